"""Time one epoch of student SFT on a GPU with the 8B recipe (the paper reports 19 minutes on one L40S/A40).

Usage (one GPU, the base model in the HF cache or a local folder, QATD-2k converted to JSONL)::

    python benchmarks/gpu_train_sft.py --data data/qatd-2k
    python benchmarks/gpu_train_sft.py --data sample: --base-model /models/Llama-3.1-8B-Instruct --max-steps 20

It runs ``simhub train student-sft-8b`` for one epoch (or ``--max-steps``)
into a temporary folder and prints one JSON line: the training loop's time (the Trainer's
``train_runtime``: the optimiser steps and any evaluation/checkpointing inside the loop, but not
loading the model, building the data, the final evaluation or saving), seconds per step and
examples per second from it, the end-to-end wall time, optimiser steps, peak GPU memory, final
training and validation loss. Extra recipe overrides go through ``--set key=value``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="student-sft-8b", help="shipped recipe name or YAML path")
    parser.add_argument("--data", default="data/qatd-2k", help="'sample:' or a folder of train/val/test JSONL")
    parser.add_argument("--base-model", help="override base_model (e.g. a local folder)")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after N optimiser steps (-1: one epoch)")
    parser.add_argument("--output-dir", help="keep the run here (default: a temporary folder)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("gpu_train_sft: no CUDA GPU available", file=sys.stderr)
        return 1
    from simhub.provision import resolve_recipe
    from simhub.training import load_recipe, train

    overrides = ["epochs=1", f"data={args.data}", f"max_steps={args.max_steps}", *args.set]
    if args.base_model:
        overrides.append(f"base_model={args.base_model}")
    recipe = resolve_recipe(load_recipe(args.recipe, overrides))
    with tempfile.TemporaryDirectory(prefix="simhub-bench-") as tmp:
        out = Path(args.output_dir or tmp)
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        results = train(recipe, out)
        wall = time.perf_counter() - start
        config = json.loads((out / "training_config.json").read_text())
    steps = results["global_step"]
    examples = steps * recipe.effective_batch_size
    # The Trainer logs train_runtime once, at the end of train(), in its log history.
    runtime = next(e["train_runtime"] for e in reversed(config["log_history"]) if "train_runtime" in e)
    print(json.dumps({
        "recipe": Path(args.recipe).name,
        "gpu": torch.cuda.get_device_name(0),
        "train_runtime_s": round(runtime, 1),
        "wall_s": round(wall, 1),
        "steps": steps,
        "s_per_step": round(runtime / max(steps, 1), 2),
        "examples_per_s": round(examples / runtime, 2) if runtime else None,
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
        "train_loss": results.get("train_loss"),
        "eval_loss": results.get("eval_loss"),
        "data": config["data"],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
