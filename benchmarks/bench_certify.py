"""A tutor-ranking certification on two CPU cores: the benches it needs against the certification itself.

The demo certification (``simhub tutor-bench certify --profile demo-smol --tutor tiny-tutor``) in its
parts, each timed with an empty cache (``--no-cache``) in this process:

* **the benches**: the four designed tutors and ``--tutor`` (default ``tiny-tutor``) under the KnowSim
  learner (offline stand-in, 8 items × 3 levels), the KT learner (the 50 core runs of 30 days) and
  the simulated-student family with ``--student`` (default ``smol-base``, SmolLM2-135M-Instruct;
  6 items × 3 probes × 4 turns);
* **the statistics**: reading the three folders' outcomes, then :func:`simhub.tutoring.certify.certify`
  on them at 2,000 and at 20,000 bootstrap resamples and permutations (the best of three each: the
  bootstrap's cost), and the command ``certify`` on the folders with no realism end to end;
* **the realism certificates**: each learner's dialogues against the real ones on the same
  questions, with the real-vs-real reference.

Models the profile names are built first (not timed). Writes ``benchmarks/results/certify.json``.

    python benchmarks/bench_certify.py [--profile demo-smol] [--student smol-base] [--tutor tiny-tutor]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str]) -> float:
    from simhub.cli import main

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code:
        raise SystemExit(f"simhub {' '.join(argv)} exited with {code}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="demo-smol")
    parser.add_argument("--student", default="smol-base")
    parser.add_argument("--tutor", action="append", help="profile tutors besides the designed ones (default tiny-tutor)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "certify.json"))
    args = parser.parse_args()
    from simhub.tutoring.designed import DESIGNED

    extra = args.tutor if args.tutor is not None else ["tiny-tutor"]
    tutors = [a for t in [*DESIGNED, *extra] for a in ("--tutor", t)]
    common = ["--profile", args.profile, "--no-cache"]
    out: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                 "profile": args.profile, "student": args.student, "tutors": [*DESIGNED, *extra]}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = {"knowsim": ["--learner", "knowsim", "--n", "8"],
                "kt-learner": ["--learner", "kt-learner"],
                "sim-student": ["--learner", f"student:{args.student}", "--questions", "6"]}
        # build what the profile's models need once, untimed (a one-item run of each family)
        for name, flags in runs.items():
            small = {"knowsim": ["--n", "1"], "kt-learner": ["--scenarios", "help-seeker__after-school", "--days", "2"],
                     "sim-student": ["--questions", "1", "--turns", "1", "--probes", "1"]}[name]
            _run(["tutor-bench", *common, flags[0], flags[1], *small, *tutors, "--output", str(root / f"warm-{name}")])
        benches = {}
        for name, flags in runs.items():
            benches[name] = _run(["tutor-bench", *common, *flags, *tutors, "--output", str(root / name)])
            print(f"{name}: {benches[name]:.1f} s", file=sys.stderr)
        folders = [str(root / name) for name in runs]
        from simhub.tutoring.certify import certify
        from simhub.tutoring.family import family_of_folder

        start = time.perf_counter()
        outcomes = [family_of_folder(f).outcomes(f) for f in folders]  # type: ignore[union-attr]
        read_seconds = time.perf_counter() - start
        stats = {}
        for resamples in (2000, 20000):
            best = []
            for _ in range(3):
                start = time.perf_counter()
                certify(outcomes, n_resamples=resamples, seed=0)
                best.append(time.perf_counter() - start)
            stats[resamples] = min(best)
            print(f"certify statistics, {resamples} resamples: {stats[resamples]:.3f} s", file=sys.stderr)
        command = _run(["tutor-bench", "certify", *folders, *common, "--no-realism", "--bootstrap", "2000",
                        "--output", str(root / "cert-stats")])
        with_realism = _run(["tutor-bench", "certify", *folders, *common, "--bootstrap", "2000",
                             "--output", str(root / "cert")])
        doc = json.loads((root / "cert" / "results.json").read_text())
    bench_total = sum(benches.values())
    realism = with_realism - command
    out.update({
        "bench_seconds": {k: round(v, 2) for k, v in benches.items()},
        "bench_total_seconds": round(bench_total, 1),
        "read_outcomes_seconds": round(read_seconds, 3),
        "statistics_seconds": {str(k): round(v, 4) for k, v in stats.items()},
        "bootstrap_seconds_per_1000_resamples": round((stats[20000] - stats[2000]) / 18, 4),
        "certify_command_seconds": round(command, 2),
        "realism_seconds": round(realism, 1),
        "certification_total_seconds": round(bench_total + with_realism, 1),
        "statistics_share_of_total": round(stats[2000] / (bench_total + with_realism), 6),
        "verdict": doc["verdict"], "kendall_w": doc["concordance"]["kendall_w"],
        "w_ci95": doc["concordance"]["w_ci95"],
        "known_groups": {f: [p["recovered"] for p in pairs] for f, pairs in doc["known_groups"]["families"].items()},
    })
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
