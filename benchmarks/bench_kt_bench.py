"""Benchmark the KT-learner bench (``simhub tutor-bench --learner kt-learner``) on its offline demo.

Four parts, in one run:

* **throughput**: the demo, the 50 ``core`` scenarios × 30 days × ``scripted:weakest`` and
  ``scripted:silent`` with the offline stand-in role-player and no cache (every learner-day is run):
  wall time of the bench loop, learner-days run, learner-days per second;
* **cache**: the same run with the cache on, into a fresh folder and a fresh cache, then the identical
  run into a second fresh folder against that cache (each finished run's trace is copied whole): both
  wall times and their ratio;
* **KT updates**: ``BKT.update`` on the pooled sample model (one EM fit on the sample corpus's train
  split, seed 0, as :func:`simhub.tutoring.lms.bench.learner_parts` builds it), updates per second
  over the sample log's observations; and ``replay`` of 200-observation warm-ups (how a persona seed
  starts a learner), seeds per second;
* **summary**: :func:`simhub.tutoring.lms.results.summarize_kt` over the demo's traces with 2000
  bootstrap resamples.

Setup (fitting the model, the persona seeds and the item bank) is timed apart and not in the loop's
time. Each bench run is repeated (``--repeats``, a fresh folder and a fresh cache each time) and the
fastest reported, every wall time listed beside it, with the loop's process CPU time: the bench
rewrites a run's trace after each day and syncs it to disk, so the wall time beyond the CPU time is
the disk's, and varies with what else the disk is doing. Writes a JSON report and prints a short table.

Usage::

    python benchmarks/bench_kt_bench.py [--scenarios core] [--days 30] [--repeats 3]
        [--output benchmarks/results/kt_bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TUTORS = ("scripted:weakest", "scripted:silent")


def parts(scenarios: str, days: int) -> dict[str, Any]:
    """Everything a bench needs, built once: the model, persona seeds, plans and item bank."""
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.tutoring.lms.bench import learner_parts, plan_runs, run_id

    start = time.perf_counter()
    model, model_id, log, bank = learner_parts()
    settings = LearnerSettings()
    scs = load_scenarios(scenarios, days=days)
    pool = persona_seeds(log, model, n_warmup=settings.n_warmup)
    seeds = assign_seeds(pool, [run_id(sc, "average", 0) for sc in scs], seed=0)
    plans = plan_runs(scs, ["average"], 1, 0, seeds)
    return {"model": model, "model_id": model_id, "log": log, "bank": bank, "settings": settings, "seeds": seeds,
            "plans": plans, "role_player": StandInRolePlayer(settings), "setup_s": time.perf_counter() - start}


def bench_run(p: dict[str, Any], output: Path, *, no_cache: bool, cache_dir: Path | None) -> dict[str, Any]:
    from simhub.tutoring import family
    from simhub.tutoring.lms.bench import KTBench, KTBenchOptions

    tutors = [family("kt-learner").build_tutor(t) for t in TUTORS]
    bench = KTBench(tutors, p["plans"], model=p["model"], model_id=p["model_id"], bank=p["bank"], seeds=p["seeds"],
                    role_player=p["role_player"], settings=p["settings"], output=output,
                    options=KTBenchOptions(cache_dir=str(cache_dir) if cache_dir else None, no_cache=no_cache))
    start, cpu = time.perf_counter(), time.process_time()
    traces = bench.run()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    days = sum(len(t.days) for t in traces)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "runs": len(traces), "learner_days": days, "learner_days_run": bench.days_run,
            "runs_from_cache": bench.cache_hits,
            "learner_days_per_s": round(bench.days_run / wall, 1) if bench.days_run and wall else None,
            "_traces": traces}


def kt_rates(p: dict[str, Any], min_s: float = 1.0) -> dict[str, Any]:
    """``BKT.update`` per second and ``replay`` of 200-observation warm-ups per second."""
    model, log = p["model"], p["log"]
    known = set(model.kcs)
    obs = [(r.item, r.kc, r.correct) for rows in log.by_student().values() for r in rows if r.kc in known]
    # updates: every observation in turn from the initial belief, repeated until min_s has passed
    n, start = 0, time.perf_counter()
    while True:
        b = model.initial_belief()
        for item, kc, correct in obs:
            b = model.update(b, item, kc, correct)
        n += len(obs)
        elapsed = time.perf_counter() - start
        if elapsed >= min_s:
            break
    updates = {"observations": len(obs), "kcs": len(model.kcs), "updates": n, "wall_s": round(elapsed, 3),
               "updates_per_s": round(n / elapsed)}
    # replays: 200-observation windows of the pooled log (cyclic), one per persona seed
    warm = 200
    windows = [[obs[(s + k) % len(obs)] for k in range(warm)] for s in range(0, len(obs), 7)]
    seeds, start = 0, time.perf_counter()
    while True:
        for w in windows:
            model.replay(w)
        seeds += len(windows)
        elapsed = time.perf_counter() - start
        if elapsed >= min_s:
            break
    lengths = [len(s.warmup) for s in p["seeds"].values()]
    replays = {"warmup_observations": warm, "seeds": seeds, "wall_s": round(elapsed, 3),
               "seeds_per_s": round(seeds / elapsed, 1),
               "demo_persona_warmups": {"n": len(lengths), "mean_length": round(sum(lengths) / len(lengths), 1),
                                        "max_length": max(lengths)}}
    return {"backend": model.backend, "model": p["model_id"], "update": updates, "replay": replays}


def summary_time(traces, n_resamples: int = 2000) -> dict[str, Any]:
    from simhub.tutoring.lms.results import summarize_kt

    start, cpu = time.perf_counter(), time.process_time()
    results = summarize_kt(traces, tutor_order=list(TUTORS), n_resamples=n_resamples, seed=0)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"n_resamples": n_resamples, "traces": len(traces), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "delta_solve_pp": {t: round(100 * r.delta_solve.mean, 2) for t, r in results.tutors.items()
                               if r.delta_solve.mean is not None}}


def table(report: dict[str, Any]) -> str:
    t, c, k, s = report["throughput"], report["cache"], report["kt_update"], report["summarize"]
    rows = [
        ("demo, no cache", f"{t['wall_s']:.2f} s", f"{t['learner_days_run']} learner-days, "
                                                   f"{t['learner_days_per_s']:.0f} learner-days/s "
                                                   f"(CPU {t['cpu_s']:.2f} s)"),
        ("cache on, first run", f"{c['first_run']['wall_s']:.2f} s",
         f"{c['first_run']['learner_days_run']} learner-days run, fresh cache"),
        ("cache on, rerun into a new folder", f"{c['rerun']['wall_s']:.2f} s",
         f"{c['rerun']['runs_from_cache']} runs copied, {c['speedup']}× faster"),
        ("BKT.update", f"{k['update']['wall_s']:.2f} s", f"{k['update']['updates_per_s']:,} updates/s"),
        ("replay, 200-observation warm-up", f"{k['replay']['wall_s']:.2f} s",
         f"{k['replay']['seeds_per_s']:,.0f} seeds/s"),
        (f"summarize_kt, {s['n_resamples']} resamples", f"{s['wall_s']:.2f} s", f"{s['traces']} traces"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b:>8}  {c_}" for a, b, c_ in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="core")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3,
                        help="times each bench run is repeated; the fastest is reported, every one is listed")
    parser.add_argument("--output", default="benchmarks/results/kt_bench.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="simhub-kt-bench-") as tmp:
        os.environ.setdefault("SIMHUB_HOME", tmp)
        work = Path(tmp)
        p = parts(args.scenarios, args.days)
        plains, pairs = [], []
        for k in range(args.repeats):
            plains.append(bench_run(p, work / f"no-cache-{k}", no_cache=True, cache_dir=None))
            pairs.append((bench_run(p, work / f"first-{k}", no_cache=False, cache_dir=work / f"cache-{k}"),
                          bench_run(p, work / f"again-{k}", no_cache=False, cache_dir=work / f"cache-{k}")))
        rates = kt_rates(p)
        summary = summary_time(plains[0]["_traces"])
    for row in (*plains, *(r for pair in pairs for r in pair)):
        row.pop("_traces")
    plain = {**min(plains, key=lambda r: r["wall_s"]), "wall_s_each": [r["wall_s"] for r in plains],
             "cpu_s_each": [r["cpu_s"] for r in plains]}
    first, again = min(pairs, key=lambda pair: pair[0]["wall_s"] + pair[1]["wall_s"])
    first = {**first, "wall_s_each": [f["wall_s"] for f, _ in pairs]}
    again = {**again, "wall_s_each": [a["wall_s"] for _, a in pairs]}
    report = {
        "benchmark": "KT-learner bench demo (scripted:weakest vs scripted:silent, offline stand-in role-player)",
        "scenarios": args.scenarios, "scenario_count": len(p["plans"]), "days": args.days, "tutors": list(TUTORS),
        "repeats": args.repeats,
        "setup_s": round(p["setup_s"], 3),
        "throughput": plain,
        "cache": {"first_run": first, "rerun": again,
                  "speedup": round(first["wall_s"] / again["wall_s"], 1) if again["wall_s"] else None},
        "kt_update": rates,
        "summarize": summary,
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
