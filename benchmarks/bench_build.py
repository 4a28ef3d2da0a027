"""Benchmark the demo's first-start build: each demo model's build time on a quiet machine and next
to one other CPU-bound process, as simhub builds now and as it built before.

Each condition provisions the demo profile (the tiny kit and the six demo models, as ``simhub
serve`` does on a first start) in a fresh ``$SIMHUB_HOME``, in a fresh worker process, and times
every step (a step waiting for a model a worker builds ends when that model is there). Two ways of building:

- ``policy`` (simhub now): every demo build trains on ``DEMO_BUILD_THREADS`` threads (the same
  models whatever the load), the two long builds (acts, judge) run side by side where there are
  cores for both, idle OpenMP threads sleep (``simhub.models.cpu``,
  ``simhub.provision.start_parallel_builds``);
- ``defaults`` (before): a torch thread per core with OpenMP's spinning waits, one build after
  another.

- ``full-logits`` (before the label-only loss): the policy above, but training takes
  transformers' own loss, with the output layer over every position
  (``simhub.training.common.label_logits_loss`` off);

and two machine states: ``quiet``, and ``loaded`` (another process spins on one core the whole
time). The build with the old defaults next to the other process takes about an hour, so the rows
with ``defaults`` (and a ``policy`` pair of the same size) train the two long models for
``--short-steps`` steps only; ratios are read between rows of the same size.

Writes a JSON report; benchmarks/README.md quotes it.

Usage::

    python benchmarks/bench_build.py [--short-steps 100] [--skip-short] [--output benchmarks/results/build.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LONG = ("acts", "judge")


def worker(mode: str, short_steps: int | None) -> None:
    """Build everything in this process and print one JSON line of step times."""
    if mode in ("policy", "full-logits"):
        from simhub.models.cpu import prefer_sleeping_threads

        prefer_sleeping_threads()
    else:  # before the policy: a thread per usable core, OpenMP's own wait policy, one build after another
        os.environ["SIMHUB_THREADS"] = str(len(os.sched_getaffinity(0)))
        os.environ["SIMHUB_PARALLEL_BUILDS"] = "0"
    import torch  # noqa: F401  (after the wait policy is chosen)

    from simhub import provision

    if mode == "defaults":
        provision.DEMO_BUILD_THREADS = len(os.sched_getaffinity(0))
    if mode == "full-logits":
        import simhub.training.common as common

        common.label_logits_loss = lambda *args, **kwargs: None  # every step takes the Trainer's own loss
    from simhub.training import load_recipe

    if short_steps:  # the demo build reads recipes through simhub.training.load_recipe at call time
        import simhub.training as training

        def short(name, overrides=()):
            extra = [f"max_steps={short_steps}", f"eval_steps={short_steps}"] if name.removeprefix("tiny-") in LONG else []
            return load_recipe(name, [*overrides, *extra])

        training.load_recipe = short
    from simhub.config import load_profile

    times: dict[str, float] = {}
    start = time.perf_counter()
    last = [None, start]

    def on_step(k: int, n: int, what: str) -> None:  # a step's time runs to the next step's start
        now = time.perf_counter()
        if last[0] is not None:
            times[last[0]] = round(now - last[1], 2)
        last[0], last[1] = what.removeprefix("building "), now

    provision.provision_profile(load_profile("demo"), on_step=on_step)  # as simhub serve's first start
    if last[0] is not None:
        times[last[0]] = round(time.perf_counter() - last[1], 2)
    times["total"] = round(time.perf_counter() - start, 2)
    print("TIMES " + json.dumps(times), flush=True)


def run_condition(mode: str, loaded: bool, short_steps: int | None, keep: str | None = None) -> dict:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if loaded else None
    try:
        with tempfile.TemporaryDirectory(prefix="simhub-bench-build-") as tmp:
            home = keep or tmp
            env = {**os.environ, "SIMHUB_HOME": home, "TRANSFORMERS_VERBOSITY": "error"}
            for name in ("OMP_WAIT_POLICY", "SIMHUB_THREADS", "OMP_NUM_THREADS"):
                env.pop(name, None)
            cmd = [sys.executable, __file__, "--worker", mode]
            if short_steps:
                cmd += ["--worker-short", str(short_steps)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    lines = [line for line in out.stdout.splitlines() if line.startswith("TIMES ")]
    if out.returncode or not lines:
        raise SystemExit(f"worker {mode} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("TIMES "):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("policy", "defaults", "full-logits"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-short", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--short-steps", type=int, default=100,
                        help="training steps of the acts and judge builds in the rows with torch's defaults")
    parser.add_argument("--output", default="benchmarks/results/build.json")
    parser.add_argument("--skip-full", action="store_true", help="only the short rows")
    parser.add_argument("--skip-short", action="store_true", help="only the full-length rows")
    parser.add_argument("--no-loaded-defaults", action="store_true",
                        help="leave out the slowest row (torch's defaults next to the other process)")
    parser.add_argument("--before-from", metavar="FILE", help="take the full-logits row from an earlier report "
                        "(its build as it was before) instead of building it again")
    parser.add_argument("--keep", metavar="DIR", help="build the quiet row into DIR (an empty SIMHUB_HOME) and keep it")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.worker_short)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed benchmark still stops its busy process
    rows = {}
    if not args.skip_full:
        rows["quiet"] = run_condition("policy", False, None, keep=args.keep)
        rows["loaded"] = run_condition("policy", True, None)
        if args.before_from:
            earlier = json.loads(Path(args.before_from).read_text(encoding="utf-8"))
            rows["quiet-full-logits"] = {**earlier["rows_s"]["quiet-full-logits"],
                                         "measured": earlier.get("when"), "as_built_then": True}
        else:
            rows["quiet-full-logits"] = run_condition("full-logits", False, None)
    short = args.short_steps
    for mode, loaded in (("policy", False), ("policy", True), ("defaults", False), ("defaults", True)):
        if args.skip_short or (loaded and mode == "defaults" and args.no_loaded_defaults):
            continue
        name = f"{'loaded' if loaded else 'quiet'}{'-defaults' if mode == 'defaults' else ''}-short{short}"
        rows[name] = run_condition(mode, loaded, short)

    def ratio(a: str, b: str) -> float | None:
        return round(rows[a]["total"] / rows[b]["total"], 2) if a in rows and b in rows else None

    report = {
        "benchmark": "demo first-start build (tiny kit + six demo models), quiet and next to one CPU-bound process",
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "rows_s": rows,
        "ratios": {
            "loaded_over_quiet (policy, full build)": ratio("loaded", "quiet"),
            "quiet over quiet with full logits (full build)": ratio("quiet", "quiet-full-logits"),
            f"loaded_over_quiet (policy, short{short})": ratio(f"loaded-short{short}", f"quiet-short{short}"),
            f"loaded_over_quiet (torch defaults, short{short})": ratio(f"loaded-defaults-short{short}",
                                                                      f"quiet-defaults-short{short}"),
            f"quiet policy over quiet defaults (short{short})": ratio(f"quiet-short{short}", f"quiet-defaults-short{short}"),
        },
        "when": time.strftime("%Y-%m-%d"),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
