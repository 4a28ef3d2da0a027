"""Benchmark the Ray executor against the local one on the same cores (``--executor ray`` of
``simhub tutor-bench``).

* **Overhead**: the offline KnowSim bench (``scripted:stepwise`` and ``scripted:dump``, the scripted
  learner, the MiniLM extractor of the demo, no cache) on N sample items at three levels, ``local``
  and ``ray`` with two actors on a local Ray instance of two CPUs (each actor loads MiniLM once),
  each run ``--repeats`` times into fresh folders (the fastest reported, every one listed); the
  ratio ray/local against the first local run of the process (which loads MiniLM, as a command
  does and as every Ray job's actors do) and against a later one (MiniLM already loaded), and the
  Ray instance's start-up time apart.
* **Overhead of ``simhub eval``**: the demo eval (``tiny-student-sft`` on the sample test split:
  simulation and the seven metrics, no cache, 1,000 resamples) as a fresh command, ``local``,
  ``--executor ray --actors 2`` (two actors of one CPU, each loading every model) and one actor of
  two CPUs (``cpus_per_actor: 2``), each command starting its own Ray instance (its start-up is in
  the time, and given apart), ``--repeats`` times each; the demo models are built before timing.
  Whether the files agree: the simulations; the scores exactly with one actor of two CPUs (the
  local run's two threads), and their largest difference with two actors of one thread each.
* **Per-batch scheduling cost**: the KT bench's offline demo cut into batches of one run, where a
  batch's work is ~10 ms: (ray wall time − local wall time / actors) per batch.
* **Scaling where the unit is the bottleneck**: a KnowSim bench whose tutor is an OpenAI-compatible
  endpoint answering after ``--latency`` seconds (the tests' fake server, in this process), each
  actor's client sending up to 4 requests at once, on 1, 2 and 4 actors (the Ray instance gets 4
  CPUs: the work is waiting); conversations per second, actor start-up included.

Usage::

    python benchmarks/bench_ray.py [--items 16] [--repeats 2] [--extractor offline] [--output benchmarks/results/ray.json]
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


def knowsim(out: Path, n: int, executor, extractor: str) -> float:
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring import family
    from simhub.tutoring.knowsim import Bench, BenchOptions, load_items
    from simhub.tutoring.knowsim.components import build_extractor

    fam = family("knowsim")
    bench = Bench([fam.build_tutor("scripted:stepwise"), fam.build_tutor("scripted:dump")], ScriptedLearner(),
                  build_extractor(extractor, None), resolve_preset("paper"), BenchOptions(no_cache=True),
                  out)
    items = load_items("sample", n)
    start = time.perf_counter()
    bench.run(items, ["novice", "intermediate", "advanced"], executor=executor)
    return time.perf_counter() - start


def kt(out: Path, batch: int, executor) -> tuple[float, int]:
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.tutoring import family
    from simhub.tutoring.lms.bench import KTBench, KTBenchOptions, learner_parts, plan_runs, run_id

    scenarios = load_scenarios("core", days=5)
    settings = LearnerSettings()
    model, model_id, log, bank = learner_parts()
    seeds = assign_seeds(persona_seeds(log, model, n_warmup=settings.n_warmup),
                         [run_id(sc, "average", 0) for sc in scenarios], seed=0)
    fam = family("kt-learner")
    bench = KTBench([fam.build_tutor("scripted:weakest")], plan_runs(scenarios, ["average"], 1, 0, seeds),
                    model=model, model_id=model_id, bank=bank, seeds=seeds, role_player=StandInRolePlayer(settings),
                    settings=settings, output=out, options=KTBenchOptions(no_cache=True, batch=batch))
    start = time.perf_counter()
    traces = bench.run(executor=executor)
    return time.perf_counter() - start, len(traces)


def endpoint_scaling(work: Path, actors: int, profile: Path, items: int, executor) -> float:
    from simhub.cli import main as simhub

    start = time.perf_counter()
    code = simhub(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--n", str(items),
                   "--extractor", "offline:lexical", "--set", "max_turns=4", "--batch", "4", "--no-cache",
                   "--bootstrap", "100", "--executor", executor, "--actors", str(actors),
                   "--output", str(work / f"endpoint-{executor}-{actors}")])
    assert code == 0, code
    return time.perf_counter() - start


def eval_overhead(work: Path, repeats: int) -> dict:
    """The demo eval as a fresh command, local and on Ray (see the module docstring)."""
    import subprocess

    from simhub.data.sample import load_sample_corpus
    from simhub.schema import write_jsonl

    data = work / "test.jsonl"
    write_jsonl(data, load_sample_corpus()["test"])
    env = {**os.environ, "TQDM_DISABLE": "1"}
    subprocess.run([sys.executable, "-c", "from simhub.config import load_profile; from simhub.provision import "
                    "provision_profile; provision_profile(load_profile('demo'), on_step=None)"], check=True, env=env)

    def timed(name: str, extra: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simhub", "eval", "--profile", "demo", "--simulator", "tiny-student-sft",
                        "--data", str(data), "--output", str(work / name), "--no-cache", "--bootstrap", "1000", *extra],
                       check=True, env=env, capture_output=True)
        return time.perf_counter() - start

    wide = work / "wide.yaml"  # one actor with both CPUs: the models load once, with two threads, as locally
    wide.write_text("extends: demo\nname: demo-wide-actor\nexecutor: {cpus_per_actor: 2}\n")
    local = [timed(f"eval-local-{k}", []) for k in range(repeats)]
    remote = [timed(f"eval-ray-{k}", ["--executor", "ray", "--actors", "2"]) for k in range(repeats)]
    one = [timed(f"eval-ray1-{k}", ["--executor", "ray", "--actors", "1", "--profile", str(wide)])
           for k in range(repeats)]

    def lines(name: str, file: str) -> list[dict]:
        return [json.loads(x) for x in (work / name / file).read_text().splitlines()]

    def largest_difference(a: str, b: str) -> float:
        return max((abs(x["scores"][m] - y["scores"][m]) for x, y in zip(lines(a, "scores.jsonl"),
                    lines(b, "scores.jsonl"), strict=True) for m in x["scores"]
                    if x["scores"][m] is not None and y["scores"][m] is not None), default=0.0)

    return {"turns": sum(len(d.student_turn_indices()) for d in load_sample_corpus()["test"]),
            "local_s": round(min(local), 2), "ray_2x1_s": round(min(remote), 2), "ray_1x2_s": round(min(one), 2),
            "ratio_2x1": round(min(remote) / min(local), 2), "ratio_1x2": round(min(one) / min(local), 2),
            "local_s_each": [round(x, 2) for x in local], "ray_2x1_s_each": [round(x, 2) for x in remote],
            "ray_1x2_s_each": [round(x, 2) for x in one],
            "same_simulations": lines("eval-ray-0", "simulations.jsonl") == lines("eval-local-0", "simulations.jsonl"),
            # torch's reductions depend on the thread count: an actor of one CPU runs one thread
            "largest_score_difference_2x1": largest_difference("eval-ray-0", "eval-local-0"),
            "same_scores_1x2": lines("eval-ray1-0", "scores.jsonl") == lines("eval-local-0", "scores.jsonl")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--extractor", default="offline", help="offline (MiniLM) or offline:lexical")
    parser.add_argument("--latency", type=float, default=0.2, help="the fake endpoint's seconds per request")
    parser.add_argument("--endpoint-items", type=int, default=24)
    parser.add_argument("--output", default="benchmarks/results/ray.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from simhub.executors import RayExecutor

    with tempfile.TemporaryDirectory(prefix="simhub-bench-ray-") as tmp:
        os.environ.setdefault("SIMHUB_HOME", tmp)
        work = Path(tmp)
        evals = eval_overhead(work, args.repeats)  # (each command starts its own Ray instance)
        start = time.perf_counter()
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - start
        local, remote = [], []
        for k in range(args.repeats):
            local.append(knowsim(work / f"local-{k}", args.items, None, args.extractor))
            remote.append(knowsim(work / f"ray-{k}", args.items, RayExecutor(actors=2), args.extractor))
        kt_local, runs = kt(work / "kt-local", 1, None)
        kt_ray, _ = kt(work / "kt-ray", 1, RayExecutor(actors=2))
        ray.shutdown()
        # endpoint-bound: the work is waiting, so the instance offers 4 CPUs on this 2-core machine
        ray.init(num_cpus=4, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.doubles.openai_server import FakeOpenAIServer

        conversations = args.endpoint_items * 3
        scaling = {}
        with FakeOpenAIServer(lambda body: "Let us take the first step together.", latency_s=args.latency) as srv:
            profile = work / "endpoint.yaml"
            profile.write_text(f"name: endpoint\ntutors:\n  api-tutor: {{kind: openai, model: t, endpoint: "
                               f"{{base_url: '{srv.base_url}', cache: false, max_retries: 1, concurrency: 4}}}}\n")
            scaling["local"] = endpoint_scaling(work, 1, profile, args.endpoint_items, "local")
            for actors in (1, 2, 4):
                scaling[f"ray-{actors}"] = endpoint_scaling(work, actors, profile, args.endpoint_items, "ray")
            requests = len(srv.chat_requests())
        ray.shutdown()
    report = {
        "benchmark": "the Ray executor against the local one (simhub eval and tutor-bench --executor ray)",
        "ray_start_s": round(ray_start, 2),
        "knowsim_overhead": {"items": args.items, "levels": 3, "extractor": args.extractor, "conversations": args.items * 3 * 2,
                             "local_cold_s": round(local[0], 3), "local_warm_s": round(min(local[1:] or local), 3),
                             "ray_s": round(min(remote), 3),
                             # a command is a fresh process: the local executor loads its models once in it, as
                             # every Ray job's actors do, so the cold local run is the comparable one
                             "ratio_vs_cold_local": round(min(remote) / local[0], 2),
                             "ratio_vs_warm_local": round(min(remote) / min(local[1:] or local), 2),
                             "local_s_each": [round(x, 3) for x in local], "ray_s_each": [round(x, 3) for x in remote]},
        "eval_overhead": {**evals, "ratio_1x2_without_ray_start": round((evals["ray_1x2_s"] - ray_start)
                                                                        / evals["local_s"], 2)},
        "endpoint_scaling": {
            "latency_s": args.latency, "conversations": conversations, "requests_all_runs": requests,
            "wall_s": {k: round(v, 2) for k, v in scaling.items()},
            "conversations_per_s": {k: round(conversations / v, 2) for k, v in scaling.items()},
            "speedup_2_actors": round(scaling["ray-1"] / scaling["ray-2"], 2),
            "speedup_4_actors": round(scaling["ray-1"] / scaling["ray-4"], 2)},
        "per_batch": {"batches": runs, "local_s": round(kt_local, 3), "ray_s": round(kt_ray, 3),
                      "scheduling_ms_per_batch": round(1000 * (kt_ray - kt_local / 2) / runs, 1)},
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
