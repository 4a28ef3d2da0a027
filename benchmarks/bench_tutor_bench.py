"""Benchmark ``simhub tutor-bench`` on the offline demo: wall time, calls per conversation, rerun from cache.

Runs the demo (``scripted:stepwise`` and ``scripted:dump`` on the sample corpus's 46 items at the
three levels, the scripted learner, the offline extractor) into a fresh folder with a fresh cache,
then the identical run into a second fresh folder with the same cache, which answers every call from
the cache. Reports both wall times, their ratio, the conversations, turns and model calls per
conversation (each turn is one learner, one tutor and one extractor call: with LLM components,
three LLM calls a turn). Writes a JSON report.

Usage::

    python benchmarks/bench_tutor_bench.py [--extractor offline|offline:lexical] [--n 46]
        [--output benchmarks/results/tutor_bench.json]
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


def run(extractor_name: str, n: int, workdir: Path, folder: str) -> dict:
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring import Bench, BenchOptions, build_bench_tutor, load_items, summarize
    from simhub.tutoring.components import build_extractor

    start = time.perf_counter()
    tutors = [build_bench_tutor(t, None) for t in ("scripted:stepwise", "scripted:dump")]
    bench = Bench(tutors, ScriptedLearner(), build_extractor(extractor_name, None), resolve_preset("paper"),
                  BenchOptions(batch=64, cache_dir=str(workdir / "cache")), workdir / folder)
    items = load_items("sample", n)
    traces = bench.run(items, ["novice", "intermediate", "advanced"])
    results = summarize(traces, preset="paper", n_resamples=2000)
    wall = time.perf_counter() - start
    turns = sum(len(t.turns) for t in traces)
    step, dump = results.tutors
    return {"wall_s": round(wall, 3), "conversations": len(traces), "turns": turns,
            "turns_per_conversation": round(turns / len(traces), 2),
            "calls": dict(bench.calls), "cache_hits": bench.cache_hits,
            "calls_per_conversation": {k: round(v / len(traces), 2) for k, v in bench.calls.items()},
            "marginal": {r.tutor: {m: round(e.mean, 4) for m, e in r.marginal.items()} for r in (step, dump)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extractor", default="offline")
    parser.add_argument("--n", type=int, default=46)
    parser.add_argument("--output", default="benchmarks/results/tutor_bench.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="simhub-tutor-bench-") as tmp:
        os.environ.setdefault("SIMHUB_HOME", tmp)
        work = Path(tmp)
        first = run(args.extractor, args.n, work, "first")
        again = run(args.extractor, args.n, work, "again")
    report = {
        "benchmark": "tutor-bench demo (scripted:stepwise vs scripted:dump, scripted learner)",
        "extractor": args.extractor, "items": args.n, "levels": 3,
        "first_run": first, "rerun_from_cache": again,
        "speedup_from_cache": round(first["wall_s"] / again["wall_s"], 1) if again["wall_s"] else None,
        "llm_calls_per_conversation_if_all_llm": round(3 * first["turns_per_conversation"], 2),
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
