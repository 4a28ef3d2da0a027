"""`simhub eval` on a CPU: batched simulation against one turn at a time, a whole run, and a rerun from the cache.

On the demo profile and the sample corpus's test split, in one invocation (ratios side by side):

* ``simulate_batched``: the demo student over the first ``--turns`` student turns, chunks of 64 turns,
  the model's generation batch of 16 (left-padded, greedy, at most 400 new tokens);
* ``simulate_one_at_a_time``: the same turns, one prompt per ``generate`` call;
* ``eval``: ``simhub eval`` end to end on the whole test split (simulate, seven metrics, 10,000
  dialogue-bootstrap resamples), with an empty cache;
* ``eval_rerun``: the identical command again: every generation and score comes from the cache, so
  no model is loaded (nor torch imported);
* ``bootstrap``: 10,000 dialogue-bootstrap resamples of a paper-sized metric (400 dialogues, 4,400
  turns), the interval every ``results.json`` carries;
* ``rollout`` / ``eval_dialogues``: ``simhub rollout --mode free`` of the demo student against the
  demo tutor on the test split (rollouts/s, student turns/s), then ``simhub eval-dialogues`` on the
  result (every dialogue-level statistic, tutor sensitivity included).

    python benchmarks/bench_eval.py            # writes benchmarks/results/eval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "eval.json"


def simulate_rate(turns: int, batch: int, chunk: int) -> dict:
    from simhub.config import load_profile
    from simhub.data.sample import load_sample_corpus
    from simhub.evaluation.runs import simulate, student_targets
    from simhub.models import LoadOptions
    from simhub.provision import provision_profile, restrict
    from simhub.simulation import build_simulator

    profile = provision_profile(restrict(load_profile("demo"), metrics=[], simulators=["tiny-student-sft"], tutors=[]),
                                on_step=None)
    targets = student_targets(load_sample_corpus()["test"])[:turns]
    options = LoadOptions(batch_size=batch, device="cpu")
    simulator = build_simulator("tiny-student-sft", profile, options)
    simulator.simulate(targets[:2])  # load and warm up
    start = time.perf_counter()
    records = simulate(simulator, targets, cache=None, chunk_size=chunk, progress=False)
    seconds = time.perf_counter() - start
    return {"turns": len(records), "seconds": round(seconds, 2), "turns_per_s": round(len(records) / seconds, 2),
            "batch_size": batch, "chunk_size": chunk}


def bootstrap_seconds() -> dict:
    import numpy as np

    from simhub.stats import cluster_mean_ci

    rng = np.random.default_rng(3)
    values = rng.random(4400).tolist()
    values[::9] = [None] * len(values[::9])
    clusters = [f"d{i // 11}" for i in range(4400)]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        cluster_mean_ci(values, clusters, n_resamples=10_000, seed=0)
        best = min(best, time.perf_counter() - start)
    return {"dialogues": 400, "turns": 4400, "resamples": 10_000, "best_of_3_seconds": round(best, 3)}


def timed_cli(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simhub", *args], check=True, env=env, capture_output=True)
    return round(time.perf_counter() - start, 2)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=160, help="student turns in the simulate comparison")
    parser.add_argument("--max-turns", type=int, default=20, help="turns per rollout at most (default 20)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--mode", choices=["batched", "single"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        batch, chunk = (16, 64) if args.mode == "batched" else (1, 1)
        print(json.dumps(simulate_rate(args.turns, batch, chunk)))
        return

    work = Path(tempfile.mkdtemp(prefix="simhub-bench-eval-"))
    env = {**os.environ, "SIMHUB_HOME": os.environ.get("SIMHUB_HOME") or str(work / "home"), "TQDM_DISABLE": "1"}
    # Build the demo models first so no timing below includes training.
    subprocess.run([sys.executable, "-c", "from simhub.config import load_profile; from simhub.provision import "
                    "provision_profile; provision_profile(load_profile('demo'), on_step=None)"], check=True, env=env)
    # simhub's modules byte-compiled, as an installed wheel has them (and any run but the first where Python
    # may write bytecode): with PYTHONDONTWRITEBYTECODE set and an editable install, every command would
    # otherwise compile them again, which a fully cached rerun would mostly measure.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "simhub")], check=True, env=env,
                   capture_output=True)
    report: dict = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}}
    for mode in ("batched", "single"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--turns", str(args.turns)], check=True, env=env,
                             capture_output=True, text=True).stdout
        report[f"simulate_{'batched' if mode == 'batched' else 'one_at_a_time'}"] = json.loads(out.strip().splitlines()[-1])
        print(mode, report[f"simulate_{'batched' if mode == 'batched' else 'one_at_a_time'}"], flush=True)
    report["simulate_speedup"] = round(report["simulate_batched"]["turns_per_s"]
                                       / report["simulate_one_at_a_time"]["turns_per_s"], 2)

    from simhub.data.sample import load_sample_corpus
    from simhub.schema import write_jsonl

    data = work / "test.jsonl"
    write_jsonl(data, load_sample_corpus()["test"])
    cache = work / "cache"
    common = ["eval", "--profile", "demo", "--simulator", "tiny-student-sft", "--data", str(data), "--cache-dir", str(cache)]
    report["eval_seconds"] = timed_cli([*common, "--output", str(work / "run1")], env)
    report["eval_rerun_seconds"] = timed_cli([*common, "--output", str(work / "run2")], env)
    results = json.loads((work / "run1" / "results.json").read_text())
    report["eval_turns"] = results["data"]["turns"]
    report["eval_dialogues"] = results["data"]["dialogues"]
    report["rerun_speedup"] = round(report["eval_seconds"] / report["eval_rerun_seconds"], 1)
    report["demo_row"] = {m: {k: v for k, v in s.items() if k in ("mean", "ci95", "n")} for m, s in results["metrics"].items()}
    report["bootstrap"] = bootstrap_seconds()
    print("bootstrap", report["bootstrap"], flush=True)

    roll = work / "rollouts"
    seconds = timed_cli(["rollout", "--profile", "demo", "--simulator", "tiny-student-sft", "--tutor", "tiny-tutor",
                         "--data", str(data), "--output", str(roll), "--max-turns", str(args.max_turns),
                         "--max-tokens", "64", "--cache-dir", str(cache)], env)
    summary = json.loads((roll / "rollout.json").read_text())
    student_turns = sum(1 for line in (roll / "rollouts.jsonl").read_text().splitlines()
                        for t in json.loads(line)["turns"] if t["role"] == "student")
    report["rollout"] = {"rollouts": summary["rollouts"], "failed": summary.get("failed"),
                         "max_turns": args.max_turns, "max_tokens": 64, "seconds": seconds,
                         "rollouts_per_s": round(summary["rollouts"] / seconds, 3),
                         "student_turns_per_s": round(student_turns / seconds, 2)}
    print("rollout", report["rollout"], flush=True)
    report["eval_dialogues_seconds"] = timed_cli(
        ["eval-dialogues", "--profile", "demo", "--real", str(data), "--sim", str(roll), "--output", str(work / "dl"),
         "--max-tokens", "64", "--cache-dir", str(cache)], env)
    dl = json.loads((work / "dl" / "dialogue_results.json").read_text())
    report["dialogue_row"] = {m: {"value": v["value"], "ci95": v["ci95"]} for m, v in dl["metrics"].items()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
