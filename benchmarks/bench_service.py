"""Service throughput on the demo profile: requests/s and p50/p95 latency of /score and /simulate.

    python benchmarks/bench_service.py                # writes benchmarks/results/service.json
    python benchmarks/bench_service.py --no-vllm      # skip the vLLM backend

Each configuration starts its own ``simhub serve`` process on a loopback port:

* /score, one item per request, 16 concurrent clients, the demo metrics except knowledge: micro-batching on
  (5 ms window) against one request per Scorer call (window 0, at most 1 item per batch);
* /simulate, one dialogue per request, 32 new tokens: 16 concurrent clients against one at a
  time, for the transformers backend and (if installed) the vLLM backend (continuous batching).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the service runner lives with the tests' doubles (tests/doubles/server_process.py)
QUESTION = {"text": "Question Text: What is 5/8 divided by 1/6?\nAnswer A Text: 15/4\nAnswer B Text: 5/48"}
DIALOGUE = {
    "id": "bench", "question": QUESTION, "kcs": ["Divide fractions"],
    "turns": [
        {"role": "tutor", "content": "What calculation do we need to do here?"},
        {"role": "student", "content": "5/8 divided by 1/6?", "act": "Math Answer", "correctness": "correct"},
        {"role": "tutor", "content": "Yes! How do we divide fractions?"},
        {"role": "student", "content": "flip the second one and multiply", "act": "Math Answer", "correctness": "incorrect"},
        {"role": "tutor", "content": "Which one do we flip?"},
    ],
}
CANDIDATES = ["8/5", "So, would I divide 1/6 by 5/8?", "5/8 divided by 1/6", "times by 6", "I don't know", "15/4?"]


async def run_load(url: str, path: str, bodies: list[dict], concurrency: int) -> dict:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        async def one(body):
            async with sem:
                t = time.perf_counter()
                r = await client.post(path, json=body)
                latencies.append(time.perf_counter() - t)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

        await one(bodies[0])  # warm-up, not counted
        latencies.clear()
        statuses.clear()
        start = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        wall = time.perf_counter() - start
    lat = np.array(latencies) * 1000
    return {"requests": len(bodies), "concurrency": concurrency, "requests_per_s": round(len(bodies) / wall, 2),
            "p50_ms": round(float(np.percentile(lat, 50)), 1), "p95_ms": round(float(np.percentile(lat, 95)), 1),
            "statuses": {str(k): v for k, v in sorted(statuses.items())}}


def batch_stats(url: str) -> dict:
    import httpx

    from tests.doubles.server_process import metric_total

    text = httpx.get(f"{url}/metrics").text
    count = metric_total(text, "simhub_score_batch_items_count")
    return {"scorer_calls": int(count),
            "mean_requests_per_call": round(metric_total(text, "simhub_score_batch_requests_sum") / count, 2) if count else None}


def main() -> None:
    from tests.doubles.server_process import ServerProcess

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="demo", help="profile name or YAML path (default: the shipped demo)")
    parser.add_argument("--score-requests", type=int, default=192)
    parser.add_argument("--simulate-requests", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "service.json"))
    args = parser.parse_args()

    home = os.environ.get("SIMHUB_HOME") or tempfile.mkdtemp(prefix="simhub-bench-")
    base_env = {"SIMHUB_HOME": home, "VLLM_CPU_KVCACHE_SPACE": "1", "SIMHUB_LOG_JSON": "1"}
    from simhub.config import load_profile
    from simhub.scoring import Scorer

    profile = load_profile(args.profile)
    simulators = list(profile.simulators)[:2]
    if not simulators:
        parser.error(f"profile {args.profile!r} has no simulators (its 'simulators:' section is empty); "
                     "the /simulate benchmark needs at least one")
    scorer = Scorer.from_profile(profile)
    # A set-dependent metric (knowledge with paper cutoffs) is never merged by the service; with
    # cutoffs shipped beside the KT model (the demo) all seven metrics are compared.
    metrics = [m for m in scorer.metrics if not scorer.set_dependent([m])]
    score_bodies = [{"items": [{"dialogue": DIALOGUE, "turn_index": (1, 3)[i % 2], "candidate": CANDIDATES[i % len(CANDIDATES)]}],
                     "metrics": metrics} for i in range(args.score_requests)]
    sim_bodies = [{"model": simulators[i % len(simulators)], "dialogues": [{**DIALOGUE, "turns": DIALOGUE["turns"][: 1 + 2 * (i % 3)]}],
                   "sampling": {"max_tokens": args.max_tokens}} for i in range(args.simulate_requests)]
    results: dict = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
                     "profile": args.profile, "score": {"metrics": metrics, "items_per_request": 1}, "simulate": {}}

    configs = [("batched", {"SIMHUB_BATCH_WINDOW_MS": "5"}), ("one_at_a_time", {"SIMHUB_BATCH_WINDOW_MS": "0", "SIMHUB_MAX_BATCH_ITEMS": "1"})]
    for name, env in configs:
        print(f"/score {name} ...", flush=True)
        with ServerProcess(args.profile, env={**base_env, **env}, cwd=str(ROOT)) as url:
            results["score"][name] = asyncio.run(run_load(url, "/score", score_bodies, 16))
            results["score"][name].update(batch_stats(url))
            if name == "batched":
                print("/simulate transformers ...", flush=True)
                results["simulate"]["transformers"] = {
                    "concurrent": asyncio.run(run_load(url, "/simulate", sim_bodies, 16)),
                    "one_at_a_time": asyncio.run(run_load(url, "/simulate", sim_bodies, 1)),
                }
        print(json.dumps(results["score"][name]), flush=True)

    if not args.no_vllm:
        try:
            import vllm  # noqa: F401
        except ImportError:
            results["simulate"]["vllm"] = "not installed"
        else:
            print("/simulate vllm ...", flush=True)
            with ServerProcess(args.profile, env=base_env, args=["--backend", "vllm"], cwd=str(ROOT), ready_timeout=400) as url:
                results["simulate"]["vllm"] = {
                    "concurrent": asyncio.run(run_load(url, "/simulate", sim_bodies, 16)),
                    "one_at_a_time": asyncio.run(run_load(url, "/simulate", sim_bodies, 1)),
                }
    results["simulate"]["max_tokens"] = args.max_tokens
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
