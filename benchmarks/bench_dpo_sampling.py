"""Benchmark the DPO step's candidate sampling on SmolLM2: each prompt's history encoded once for its
``n`` samples (simhub's transformers backend) against transformers' own ``num_return_sequences``,
which encodes it ``n`` times.

The workload is the ``generate`` stage of the shipped ``smol-student-dpo`` recipe: every student
turn of its training and validation dialogues (the first 5% of the sample corpus's splits), in the
SFT student's prompt format, ``num_candidates`` samples each at the recipe's temperature, top-p and
token limit, in batches of ``generation_batch_size`` prompts, on SmolLM2-135M-Instruct with a LoRA of
the SFT student's shape (rank 32 on every linear layer; random weights, so nothing needs training
first: the cost is the same). Both modes run in one process on the same loaded model, the same
left-padded batches and the same seeds; ``same_samples`` counts the prompts whose samples are
token for token the same in both.

Usage::

    SIMHUB_HOME=... python benchmarks/bench_dpo_sampling.py [--dialogues 0] [--output benchmarks/results/dpo_sampling.json]

``--dialogues K`` keeps the first K dialogues of each split (0: all of the recipe's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from simhub.schema import atomic_write_bytes

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "dpo_sampling.json"


def _num_return_sequences(lm, prompts: list[list[int]], sampling) -> list[list[list[int]]]:
    """transformers' own sampling of n sequences per prompt, in the batches and with the seeds of
    simhub's backend (``lm.batch_size`` prompts, seed + offset)."""
    import torch

    from simhub.models.transformers import left_pad, through_first_stop

    stop, out = set(lm.stop_ids), []
    for start in range(0, len(prompts), lm.batch_size):
        chunk = prompts[start : start + lm.batch_size]
        ids, mask = left_pad(chunk, lm.pad_id)
        with lm.active() as model, torch.inference_mode(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(sampling.seed + start)
            gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=sampling.temperature,
                                 top_p=sampling.top_p, top_k=sampling.top_k, num_return_sequences=sampling.n,
                                 max_new_tokens=sampling.max_tokens, pad_token_id=lm.pad_id, eos_token_id=lm.stop_ids)
        rows = [through_first_stop(new, stop) for new in gen[:, ids.shape[1]:].tolist()]
        out += [rows[row * sampling.n : (row + 1) * sampling.n] for row in range(len(chunk))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=0)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()

    from simhub.config import SimulatorConfig
    from simhub.models import LoadOptions, Sampling
    from simhub.models.cpu import apply_thread_policy
    from simhub.provision import build_random_lora, resolve_model
    from simhub.simulation import Target
    from simhub.simulation.model import ModelSimulator
    from simhub.training import load_recipe
    from simhub.training.data import head_fraction, load_split

    recipe = load_recipe("smol-student-dpo")
    dpo = recipe.dpo
    base = resolve_model(recipe.base_model)  # built from the PyPI wheel on first use
    apply_thread_policy("benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        adapter = build_random_lora(base, Path(tmp) / "lora", rank=32, seed=0)
        simulator = ModelSimulator("dpo-policy", SimulatorConfig(model=base, adapter=str(adapter), backend="transformers"),
                                   LoadOptions(backend="transformers", batch_size=dpo.generation_batch_size))
        lm = simulator.model()
        dialogues = []
        for split, limit in ((recipe.train_split, recipe.max_train_dialogues), (recipe.eval_split, recipe.max_eval_dialogues)):
            kept = head_fraction(load_split(recipe.data, split, limit), dpo.subsample)
            dialogues += kept[: args.dialogues] if args.dialogues else kept
        targets = [Target(d, i) for d in dialogues for i in d.student_turn_indices()]
        prompts = [lm.chat_ids(simulator.messages(t)) for t in targets]
        sampling = Sampling(temperature=dpo.temperature, top_p=dpo.top_p, top_k=dpo.top_k, max_tokens=dpo.max_new_tokens,
                            n=dpo.num_candidates, seed=recipe.seed)
        lm.generate_ids(prompts[:1], sampling)  # warm-up, untimed
        rows, samples = {}, {}
        for mode in ("num_return_sequences", "shared_prefill"):
            started = time.perf_counter()
            samples[mode] = (_num_return_sequences(lm, prompts, sampling)
                             if mode == "num_return_sequences" else lm.generate_ids(prompts, sampling))
            seconds = time.perf_counter() - started
            rows[mode] = {"seconds": round(seconds, 2), "prompts": len(prompts),
                          "new_tokens": sum(len(s) for row in samples[mode] for s in row)}
    speedup = rows["num_return_sequences"]["seconds"] / rows["shared_prefill"]["seconds"]
    report = {
        "benchmark": "DPO candidate sampling on SmolLM2-135M-Instruct + rank-32 LoRA (smol-student-dpo's generate stage)",
        "when": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(), "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
        "dialogues": len(dialogues), "student_turns": len(targets), "prompt_tokens": sum(map(len, prompts)),
        "sampling": {"n": sampling.n, "temperature": sampling.temperature, "top_p": sampling.top_p,
                     "max_tokens": sampling.max_tokens, "batch_size": dpo.generation_batch_size, "seed": sampling.seed},
        "rows": rows,
        "speedup_shared_prefill": round(speedup, 2),
        "same_samples": sum(a == b for a, b in zip(samples["num_return_sequences"], samples["shared_prefill"], strict=True)),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.output, (json.dumps(report, indent=2) + "\n").encode())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
