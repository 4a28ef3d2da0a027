"""Benchmark ``simhub tutor-bench`` on the offline demo: wall time, calls per conversation, rerun from cache.

Runs the demo (``scripted:stepwise`` and ``scripted:dump`` on the sample corpus's 46 items at the
three levels, the scripted learner, the offline extractor) into a fresh folder with a fresh cache,
then the identical run into a second fresh folder with the same cache, which answers every call from
the cache. Reports both wall times, their ratio, the conversations, turns and model calls per
conversation (each turn is one learner, one tutor and one extractor call: with LLM components,
three LLM calls a turn). Writes a JSON report.

A second part measures the two once-per-conversation LLM judges: a stateless ``zs`` learner, an IQ
rater and a termination judge, all on a local OpenAI-compatible endpoint (the tests' fake server,
answering at once after ``--latency`` seconds; the tutors are the scripted ones and the extractor is
``offline:lexical``), through the ``simhub tutor-bench`` command: its first run into a fresh cache and
the identical rerun into a new folder. It shows each judge's calls per conversation and what they add
to the run.

Usage::

    python benchmarks/bench_tutor_bench.py [--extractor offline|offline:lexical] [--n 46] [--judges-n 10]
        [--latency 0.02] [--output benchmarks/results/tutor_bench.json]
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
    from simhub.tutoring import family
    from simhub.tutoring.knowsim import Bench, BenchOptions, load_items, summarize
    from simhub.tutoring.knowsim.components import build_extractor

    start = time.perf_counter()
    tutors = [family("knowsim").build_tutor(t) for t in ("scripted:stepwise", "scripted:dump")]
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


ROOT = Path(__file__).resolve().parent.parent


#: How the IQ rater's and the termination judge's system prompts begin (simhub.prompts.learners).
RATER, JUDGE = "You review a finished chat", "You read a chat between a tutor and a student"


def _role(body: dict) -> str:
    system = body["messages"][0]["content"]
    return "iq_rater" if system.startswith(RATER) else "termination_judge" if system.startswith(JUDGE) else "learner"


def _judges_responder(body: dict) -> str:
    role = _role(body)
    if role == "iq_rater":
        return json.dumps({"score": 6, "reason": "clear"})
    if role == "termination_judge":
        turns = int(body["messages"][-1]["content"].split("The conversation (", 1)[1].split(" ", 1)[0])
        return json.dumps({"end_turn": max(1, (turns + 1) // 2), "reason": "nothing new after this"})
    return "I am not sure how to start. Can you show me the first step?"  # the zs learner


def run_judges(n: int, latency: float, workdir: Path) -> dict:
    """The zs learner with and without the IQ rater and termination judge (fake endpoint), twice each."""
    sys.path.insert(0, str(ROOT))  # the fake endpoint lives with the tests' doubles
    from simhub.cli import main as simhub
    from tests.doubles.openai_server import FakeOpenAIServer

    out: dict = {"items": n, "levels": 3, "tutors": ["scripted:stepwise", "scripted:dump"], "latency_s": latency}
    with FakeOpenAIServer(_judges_responder, latency_s=latency) as server:
        ep = f"{{base_url: '{server.base_url}', cache: false, max_retries: 1, concurrency: 16}}"
        profile = workdir / "judges.yaml"
        profile.write_text(f"name: judges\nsimulators:\n  api-learner: {{kind: openai, model: learner, endpoint: {ep}}}\n"
                           f"  api-judge: {{kind: openai, model: judge, endpoint: {ep}}}\n")
        base = ["tutor-bench", "--profile", str(profile), "--tutor", "scripted:stepwise", "--tutor", "scripted:dump",
                "--learner", "zs:api-learner", "--extractor", "offline:lexical", "--n", str(n), "--batch", "64",
                "--bootstrap", "2000", "--cache-dir", str(workdir / "judges-cache")]
        for name, extra in (("zs learner alone (full length)", ["--full-length"]),
                            ("the same + IQ rater + termination judge (learner turns from the cache)", ["--iq-rater", "api-judge",
                                                                           "--termination-judge", "api-judge"])):
            rows = {}
            for attempt in ("first_run", "rerun_from_cache"):
                before = len(server.chat_requests())
                folder = workdir / f"judges-{len(out)}-{attempt}"
                start = time.perf_counter()
                code = simhub([*base, *extra, "--output", str(folder)])
                wall = time.perf_counter() - start
                requests = server.chat_requests()[before:]
                roles = {"learner": 0, "iq_rater": 0, "termination_judge": 0}
                for r in requests:
                    roles[_role(r.body)] += 1
                results = json.loads((folder / "results.json").read_text())
                convs = results["conversations"]
                rows[attempt] = {"exit": code, "wall_s": round(wall, 3), "conversations": convs,
                                 "requests": len(requests),
                                 "requests_per_conversation": {k: round(v / convs, 2) for k, v in roles.items()},
                                 "mean_turns_scored": round(sum(lv["mean_turns"] for t in results["tutors"]
                                                                for lv in t["levels"].values())
                                                            / sum(len(t["levels"]) for t in results["tutors"]), 2)}
            rows["speedup_from_cache"] = (round(rows["first_run"]["wall_s"] / rows["rerun_from_cache"]["wall_s"], 1)
                                          if rows["rerun_from_cache"]["wall_s"] else None)
            out[name] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extractor", default="offline")
    parser.add_argument("--n", type=int, default=46)
    parser.add_argument("--judges-n", type=int, default=10, help="items of the judges' part (0: skip it)")
    parser.add_argument("--latency", type=float, default=0.02, help="the fake endpoint's seconds per request")
    parser.add_argument("--output", default="benchmarks/results/tutor_bench.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="simhub-tutor-bench-") as tmp:
        os.environ.setdefault("SIMHUB_HOME", tmp)
        work = Path(tmp)
        first = run(args.extractor, args.n, work, "first")
        again = run(args.extractor, args.n, work, "again")
        judges = run_judges(args.judges_n, args.latency, work) if args.judges_n else None
    report = {
        "benchmark": "tutor-bench demo (scripted:stepwise vs scripted:dump, scripted learner)",
        "extractor": args.extractor, "items": args.n, "levels": 3,
        "first_run": first, "rerun_from_cache": again,
        "speedup_from_cache": round(first["wall_s"] / again["wall_s"], 1) if again["wall_s"] else None,
        "llm_calls_per_conversation_if_all_llm": round(3 * first["turns_per_conversation"], 2),
        "judges": judges,
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
