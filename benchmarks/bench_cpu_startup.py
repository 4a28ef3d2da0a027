"""Benchmark two CPU costs the test suite and every offline run pay, side by side in one run:

1. **The offline vLLM engine's start.** simhub builds ``vllm.LLM`` on a CPU with its engine core and
   worker in the caller's process (``simhub.models.vllm._in_process_llm``); vLLM's default starts
   two processes, each importing torch and vLLM again. Each mode runs in a fresh Python process on
   SmolLM2-135M-Instruct (LoRA enabled, as simhub loads it), timed from building the engine to the
   end of a first greedy reply; the replies of both modes are compared.
2. **A training step of the demo judge** (``tiny-judge``: batches of 8 right-padded prompts of
   480-1,012 tokens) with the padding mask, and under the causal mask alone (what
   ``simhub.training.common.label_logits_loss`` now does for right-padded rows), on the same batches
   in one process, alternating; the largest gradient difference is reported.

Usage::

    SIMHUB_HOME=... python benchmarks/bench_cpu_startup.py [--batches 6] [--output benchmarks/results/cpu_startup.json]

``$SIMHUB_HOME`` needs the tiny kit and ``smol:135m-instruct`` (both are built on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from simhub.schema import atomic_write_bytes

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "cpu_startup.json"
PROMPT = [{"role": "user", "content": "Say hello to the tutor in one short sentence."}]


def _engine_child(mode: str) -> None:
    """In a fresh process: build the engine in ``mode``, decode once, print seconds and the reply."""
    from simhub.config import VLLMOptions
    from simhub.models.vllm import _in_process_llm, engine_args
    from simhub.provision import resolve_model

    base = resolve_model("smol:135m-instruct")
    args = engine_args(base, None, VLLMOptions())
    start = time.perf_counter()
    if mode == "in process":
        llm = _in_process_llm(args)
    else:
        import vllm

        llm = vllm.LLM(**args)
    import vllm

    out = llm.chat([PROMPT], vllm.SamplingParams(temperature=0.0, max_tokens=12), use_tqdm=False)
    seconds = time.perf_counter() - start
    print("RESULT " + json.dumps({"seconds": round(seconds, 1), "text": out[0].outputs[0].text}), flush=True)


def _engine_rows() -> dict:
    rows = {}
    for mode in ("own processes", "in process"):
        done = subprocess.run([sys.executable, __file__, "--engine-child", mode], capture_output=True, text=True,
                              check=True)
        line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
        rows[mode] = json.loads(line.removeprefix("RESULT "))
    return rows


def _judge_rows(batches: int) -> dict:
    import random

    import torch
    from peft import get_peft_model

    from simhub.models.cpu import pinned_threads
    from simhub.models.refs import load_tokenizer
    from simhub.provision import DEMO_BUILD_THREADS, resolve_recipe
    from simhub.training import load_recipe
    from simhub.training.common import PadCollator, label_logits_loss, load_base, lora_config
    from simhub.training.config import check_resources
    from simhub.training.data import build_chat_examples, load_split

    recipe = resolve_recipe(load_recipe("tiny-judge"))
    resolved = check_resources(recipe)
    tokenizer = load_tokenizer(resolved["base_model"], None)
    dialogues = load_split(recipe.data, recipe.train_split, recipe.max_train_dialogues)
    examples = build_chat_examples(tokenizer, recipe.kind, dialogues, recipe.max_prompt_chars, recipe.persona,
                                   judge_candidates=recipe.judge_candidates,
                                   judge_tutor_candidates=recipe.judge_tutor_candidates, seed=recipe.seed).items
    torch.manual_seed(0)
    model = get_peft_model(load_base(recipe, resolved["base_model"]), lora_config(recipe))
    collate = PadCollator(tokenizer.pad_token_id)
    draw = random.Random(0)
    data = [collate(draw.sample(examples, recipe.per_device_train_batch_size)) for _ in range(batches)]

    def step(batch: dict, masked: bool) -> tuple[float, list]:
        inputs = dict(batch)
        if masked:  # transformers' own path: the decoder gets the padding mask
            import simhub.training.common as common

            keep, common._causal_mask_suffices = common._causal_mask_suffices, lambda *a: False
        model.zero_grad()
        try:
            start = time.perf_counter()
            label_logits_loss(model, inputs).backward()
            seconds = time.perf_counter() - start
        finally:
            if masked:
                common._causal_mask_suffices = keep
        return seconds, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    times: dict[str, list[float]] = {"padding mask": [], "causal mask alone": []}
    diff = 0.0
    with pinned_threads(DEMO_BUILD_THREADS):
        step(data[0], True)  # warm-up
        for batch in data:
            a, grads_a = step(batch, True)
            b, grads_b = step(batch, False)
            times["padding mask"].append(a)
            times["causal mask alone"].append(b)
            diff = max(diff, max(float((x - y).abs().max()) for x, y in zip(grads_a, grads_b, strict=True)))
    rows = {mode: {"seconds_per_step": round(sum(t) / len(t), 3)} for mode, t in times.items()}
    return {"rows": rows, "batches": batches, "max_gradient_difference": diff,
            "mean_tokens_per_row": round(sum(int(b["attention_mask"].sum()) for b in data) / (8 * batches), 1),
            "mean_padded_width": round(sum(b["input_ids"].shape[1] for b in data) / batches, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--engine-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_child:
        _engine_child(args.engine_child)
        return
    engine = _engine_rows()
    judge = _judge_rows(args.batches)
    report = {
        "benchmark": "CPU start of the offline vLLM engine (SmolLM2, LoRA on) and the demo judge's training step",
        "when": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(), "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
        "engine_start_to_first_reply": engine,
        "engine_speedup_in_process": round(engine["own processes"]["seconds"] / engine["in process"]["seconds"], 2),
        "same_reply": engine["own processes"]["text"] == engine["in process"]["text"],
        "judge_step": judge,
        "judge_speedup_causal_mask": round(judge["rows"]["padding mask"]["seconds_per_step"]
                                           / judge["rows"]["causal mask alone"]["seconds_per_step"], 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.output, (json.dumps(report, indent=2) + "\n").encode())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
