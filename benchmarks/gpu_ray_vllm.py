"""The paper-shape simulation on Ray actors with vLLM engines, against one engine in this process.

Prepared for a lent GPU; nothing is downloaded. It builds the random-weight Llama-3.1-8B-shaped base
and student LoRA of ``gpu_paper_shape.py`` and its synthetic test split (382 dialogues, about 4.2k
student turns), then simulates every student turn through :func:`simhub.evaluation.runs.simulate`
(greedy, at most ``--max-tokens`` new tokens; random weights never stop early, so every turn is that
long, the worst case):

* ``local``: the simulator's vLLM engine in this process (``--executor local``);
* ``ray-N``: ``--executor ray`` with N actors, each holding its own vLLM engine with
  ``gpu_memory_utilization`` split between them and ``num_gpus = GPUS / N`` (several actors share a
  GPU when there are more actors than GPUs), chunks of ``--chunk-size`` turns.

It reports turns/s, the actors' engine start-up (the first chunk's wait) and whether the Ray run's
candidates equal the local run's (greedy decoding: they should, when the chunks hold the same
turns; vLLM's batch composition can still move a near-tie).

    python benchmarks/gpu_ray_vllm.py                      # one GPU: local, ray-1, ray-2
    python benchmarks/gpu_ray_vllm.py --actors 1 2 4 8     # a node of 8 GPUs
    python benchmarks/gpu_ray_vllm.py --dims tiny --dialogues 6 --backend transformers --output /tmp/r.json  # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path


def simulator(base: Path, student: Path, backend: str, share: float, dims: str):
    from simhub.config import SimulatorConfig, VLLMOptions
    from simhub.models import LoadOptions
    from simhub.simulation.model import ModelSimulator

    vllm = VLLMOptions(gpu_memory_utilization=0.85 * share, max_model_len=8192, max_lora_rank=32, max_loras=1,
                       enforce_eager=dims == "tiny", dtype="auto")
    options = LoadOptions(backend=backend, vllm=vllm, enable_lora=True, batch_size=256)
    return ModelSimulator("student", SimulatorConfig(model=str(base), adapter=str(student)), options)


def timed(sim, targets, sampling, chunk: int, executor) -> tuple[float, list[dict]]:
    from simhub.evaluation.runs import simulate

    start = time.perf_counter()
    records = simulate(sim, targets, sampling=sampling, chunk_size=chunk, progress=False, executor=executor)
    return time.perf_counter() - start, records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", choices=["llama-3.1-8b", "tiny"], default="llama-3.1-8b")
    parser.add_argument("--dialogues", type=int, default=382)
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunk-size", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--backend", choices=["vllm", "transformers"], default="vllm")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "gpu_ray_vllm.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import ray
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_paper_shape import build_models, synthetic_split  # the benchmark beside this one

    from simhub.executors import RayExecutor
    from simhub.models import Sampling, unload_models
    from simhub.simulation import Target

    gpus = torch.cuda.device_count()
    root = Path(tempfile.mkdtemp(prefix="simhub-ray-vllm-"))
    try:
        base, adapters = build_models(root, args.dims)
        dialogues = synthetic_split(args.dialogues)
        targets = [Target(d, i) for d in dialogues for i in d.student_turn_indices()]
        sampling = Sampling(temperature=0.0, max_tokens=args.max_tokens)
        rows: dict[str, dict] = {}
        local_s, expected = timed(simulator(base, adapters["student"], args.backend, 1.0, args.dims), targets,
                                  sampling, args.chunk_size, None)
        unload_models()
        if gpus:
            torch.cuda.empty_cache()
        rows["local"] = {"seconds": round(local_s, 2), "turns_per_s": round(len(targets) / local_s, 1)}
        ray.init(num_cpus=max(args.actors), num_gpus=gpus, _node_ip_address="127.0.0.1", include_dashboard=False,
                 log_to_driver=False)
        for n in args.actors:
            share = min(1.0, gpus / n) if gpus else 0.0  # of a GPU, per actor
            executor = RayExecutor(actors=n, cpus=1, gpus=share)
            seconds, records = timed(simulator(base, adapters["student"], args.backend, share or 1.0, args.dims),
                                     targets, sampling, args.chunk_size, executor)
            executor.close()
            rows[f"ray-{n}"] = {"seconds": round(seconds, 2), "turns_per_s": round(len(targets) / seconds, 1),
                                "speedup_vs_local": round(local_s / seconds, 2), "gpus_per_actor": share,
                                "same_candidates": [r["candidate"] for r in records] == [r["candidate"] for r in expected],
                                "failed": sum(1 for r in records if r["candidate"] is None)}
        ray.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {"benchmark": "paper-shape simulation, one vLLM engine here against N Ray actors each with its own",
              "dims": args.dims, "backend": args.backend, "dialogues": len(dialogues), "student_turns": len(targets),
              "max_tokens": args.max_tokens, "chunk_size": args.chunk_size, "runs": rows,
              "gpu": torch.cuda.get_device_name(0) if gpus else None, "gpus": gpus,
              "python": platform.python_version(), "cpus": os.cpu_count()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
