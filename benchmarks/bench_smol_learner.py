"""Benchmark the knowledge-state learner role-played by SmolLM2-135M-Instruct: its valid-JSON rate.

Runs ``simhub tutor-bench --profile demo-smol --learner knowsim:smol-base`` (SmolLM2 itself, its
turns held to the learner's JSON schema by xgrammar on the transformers backend) with the offline
extractor and the scripted stepwise tutor on the first ``--n`` sample items at ``--levels``, then
reads the traces. Reported: conversations, learner turns, turns whose answer was valid
``{thought, message, attempt_verify}`` JSON (the rest are flagged in the trace and kept), the
valid-JSON rate, seconds per learner turn, and the tutor's KG and the stop reasons (what the
learner's state did; a 135M model's turns are valid, not necessarily sensible).

Usage::

    SIMHUB_HOME=... python benchmarks/bench_smol_learner.py [--n 4] [--levels novice]
        [--output benchmarks/results/smol_learner.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

from simhub.schema import atomic_write_bytes

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "smol_learner.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--levels", default="novice")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    from simhub.cli import main as simhub
    from simhub.tutoring.knowsim.bench import TRACES
    from simhub.tutoring.knowsim.trace import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        start = time.perf_counter()
        code = simhub(["tutor-bench", "--profile", "demo-smol", "--tutor", "scripted:stepwise",
                       "--learner", "knowsim:smol-base", "--extractor", "offline", "--items", "sample",
                       "--n", str(args.n), "--levels", args.levels, "--output", str(run), "--no-cache"])
        seconds = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"simhub tutor-bench exited {code}")
        traces = [read_trace(p) for p in sorted((run / TRACES).glob("*.json"))]
    turns = [t for trace in traces for t in trace.turns]
    flags = Counter(t.learner_flag for t in turns if t.learner_flag)
    valid = len(turns) - sum(flags.values())
    out = {"model": "smol:135m-instruct (knowsim:smol-base, demo-smol)", "guided": "xgrammar (transformers)",
           "items": args.n, "levels": args.levels.split(","), "conversations": len(traces),
           "learner_turns": len(turns), "valid_json_turns": valid,
           "valid_json_rate": round(valid / len(turns), 3) if turns else None, "flags": dict(flags),
           "failed_conversations": sum(1 for t in traces if t.failed),
           "seconds": round(seconds, 1), "seconds_per_learner_turn": round(seconds / max(len(turns), 1), 2),
           "stop_reasons": dict(Counter(t.stop_reason for t in traces)),
           "mean_kg": round(sum(t.metrics.kg for t in traces if t.metrics) / max(len(traces), 1), 3),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.output, (json.dumps(out, indent=1) + "\n").encode())
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
