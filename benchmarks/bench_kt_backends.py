"""Benchmark the KT learner's three backbones side by side: BKT, AKT and simhub's LLMKT tracer.

For each backend, in one run on this machine's CPU:

* **update**: ``update`` calls per second (a BKT update is arithmetic; AKT's and LLMKT's append to
  the history);
* **read**: one KC's ``mastery`` and all KCs' ``masteries`` per second, after a history of 10 and of
  100 graded answers (each read on a new belief, so no read comes from a cache);
* **bench**: the KT-learner bench on one scenario (``confused-productive__after-school``, 5 days,
  ``scripted:weakest``, the offline stand-in, no cache): learner-days per second.

The models: BKT and AKT fitted on the sample corpus's train split (pooled EM; AKT with its default
settings, 40 epochs, timed as ``fit_s``). LLMKT on the tiny kit's random 3-layer Llama (built here;
the demo's trained ``demo:kt`` has the same shape), so its numbers are the cost of the reads, not of
a useful model.

Usage::

    python benchmarks/bench_kt_backends.py [--output benchmarks/results/kt_backends.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def _reads(model, history: list[tuple[str, str, bool]], n: int) -> dict[str, Any]:
    kcs = list(model.kcs)
    base = model.replay(history)
    one_s = all_s = 0.0
    for i in range(n):  # a new belief each time: one more answer, so no read is cached
        b = model.update(base, history[i % len(history)][0], kcs[i % len(kcs)], i % 2 == 0)
        t = time.perf_counter()
        model.mastery(b, kcs[(i * 7) % len(kcs)])
        one_s += time.perf_counter() - t
        b = model.update(b, history[0][0], kcs[0], True)
        t = time.perf_counter()
        model.masteries(b)
        all_s += time.perf_counter() - t
    return {"history": len(history), "reads": n, "one_kc_per_s": _rate(n, one_s), "all_kcs_per_s": _rate(n, all_s),
            "kcs": len(kcs)}


def _bench(model, model_id: str, bank, log) -> dict[str, Any]:
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.tutoring.lms.bench import KTBench, KTBenchOptions, plan_runs, run_id
    from simhub.tutoring.lms.tutors import WeakestTutor

    scs = load_scenarios("confused-productive__after-school", days=5)
    settings = LearnerSettings()
    pool = persona_seeds(log, model)
    seeds = assign_seeds(pool, [run_id(sc, "average", 0) for sc in scs], seed=0)
    plans = plan_runs(scs, ["average"], 1, 0, seeds)
    with tempfile.TemporaryDirectory() as out:
        bench = KTBench([WeakestTutor()], plans, model=model, model_id=model_id, bank=bank, seeds=seeds,
                        role_player=StandInRolePlayer(settings), settings=settings, output=out,
                        options=KTBenchOptions(no_cache=True))
        t = time.perf_counter()
        bench.run()
        wall = time.perf_counter() - t
    return {"learner_days": bench.days_run, "wall_s": round(wall, 3), "learner_days_per_s": _rate(bench.days_run, wall)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "kt_backends.json"))
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args()

    import torch

    from simhub.learners.kt.akt import AKTSettings, fit_akt
    from simhub.learners.kt.bkt_fit import FitSettings, fit_bkt
    from simhub.learners.kt.llmkt import LLMKTModel
    from simhub.tutoring.lms.bench import learner_parts, sample_log

    _, _, log, bank = learner_parts()
    history = [(r.item, r.kc, r.correct) for r in sample_log("train")]
    report: dict[str, Any] = {"benchmark": "KT-learner backbones", "machine": platform.platform(),
                              "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "backends": {}}
    models = {}
    t = time.perf_counter()
    models["bkt"] = (fit_bkt(log, FitSettings(method="em", seed=0), pooled=True), time.perf_counter() - t)
    t = time.perf_counter()
    models["akt"] = (fit_akt(log, AKTSettings()), time.perf_counter() - t)
    from simhub.config import ModelRef
    from simhub.metrics.knowledge import KnowledgeTracer
    from simhub.models import LoadOptions, load_lm
    from simhub.provision import build_tiny_kit

    with tempfile.TemporaryDirectory() as kit_dir:
        kit = build_tiny_kit(kit_dir)
        tracer = KnowledgeTracer(load_lm(ModelRef(model=str(kit["llama"])), LoadOptions(device="cpu")))
        models["llmkt"] = (LLMKTModel(tracer, log.kcs, bank.items, model="tiny:llama"), 0.0)
        for name, (model, fit_s) in models.items():
            b = model.initial_belief()
            t = time.perf_counter()
            n = 0
            for item, kc, correct in history * 10:
                b = model.update(b, item, kc, correct)
                n += 1
            upd = time.perf_counter() - t
            entry = {"fit_s": round(fit_s, 2), "updates_per_s": _rate(n, upd),
                     "reads": [_reads(model, history[:h], args.reads if name != "bkt" else 2000) for h in (10, 100)],
                     "bench": _bench(model, f"bench:{name}", bank, log)}
            report["backends"][name] = entry
            print(f"{name}: fit {entry['fit_s']} s, {entry['updates_per_s']} updates/s, reads "
                  + ", ".join(f"h={r['history']}: {r['one_kc_per_s']} one-KC/s, {r['all_kcs_per_s']} all-KC/s"
                              for r in entry["reads"])
                  + f", bench {entry['bench']['learner_days_per_s']} learner-days/s", flush=True)
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    print(f"-> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
