"""GPU: simulate every student turn of the Eedi test split with an 8B student (vLLM, teacher forcing).

Ready to run on one GPU (untested here; the CPU path of the same code is tested with the tiny kit):

    pip install 'simhub[serve,vllm]'
    simhub data convert-eedi --source Eedi/Question-Anchored-Tutoring-Dialogues-2k \
        --annotations annotations/ --output data/eedi
    python benchmarks/gpu_simulate_eedi.py --data data/eedi/test.jsonl \
        --base meta-llama/Llama-3.1-8B-Instruct --adapter simhub/student-dpo-llama-3.1-8b \
        --predictions sims.jsonl --output benchmarks/results/gpu_simulate_eedi.json

For each student turn i the history is the real ``turns[:i]`` (SPEC §1); generation is greedy with
at most 400 new tokens, cut at the end-of-dialogue marker (SPEC §4). All turns go to one AsyncLLM at
once (continuous batching) through the same backend the service uses; the adapter is a LoRARequest
on the base model (enable_lora, max_lora_rank 32). Reports simulated turns/s and tokens/s, and writes
``{"dialogue_id", "turn_index", "candidate"}`` lines that ``benchmarks/gpu_score_eedi.py
--predictions`` scores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="test.jsonl in the canonical format")
    parser.add_argument("--base", default="meta-llama/Llama-3.1-8B-Instruct")
    parser.add_argument("--adapter", default=None, help="student LoRA (folder or Hub id); none = the base model")
    parser.add_argument("--limit", type=int, default=None, help="use the first N dialogues")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--predictions", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/gpu_simulate_eedi.json"))
    args = parser.parse_args(argv)

    import msgspec

    from simhub.backends.generation import Sampling, SimulatorRegistry, SimulatorSpec, VLLMOptions
    from simhub.schema import read_jsonl

    dialogues = read_jsonl(args.data)[: args.limit]
    histories = [(d, i) for d in dialogues for i in d.student_turn_indices()]
    prompts = [msgspec.structs.replace(d, turns=d.turns[:i]) for d, i in histories]
    spec = SimulatorSpec(id="student", backend="vllm", model=args.base, adapter=args.adapter)
    options = VLLMOptions(gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len,
                          enforce_eager=False, dtype="bfloat16")
    t0 = time.perf_counter()
    # The service's own construction: an adapter-only --base is served as a LoRA on its base model.
    registry = SimulatorRegistry({spec.id: spec}, options)
    generator = registry.get(spec.id)
    generator.load()
    load_s = time.perf_counter() - t0

    async def run():
        try:
            await generator.simulate(prompts[:1], Sampling(max_tokens=8))  # warm-up
            start = time.perf_counter()
            results = await generator.simulate(prompts, Sampling(max_tokens=args.max_tokens))
            return results, time.perf_counter() - start
        finally:
            await registry.close()  # on the loop the engine ran on

    results, seconds = asyncio.run(run())
    tokens = sum(c.tokens for r in results for c in r.candidates)
    if args.predictions:
        with args.predictions.open("w") as fh:
            for (d, i), r in zip(histories, results, strict=True):
                fh.write(json.dumps({"dialogue_id": d.id, "turn_index": i, "candidate": r.candidates[0].text}) + "\n")
    import torch

    report = {
        "base": args.base, "adapter": args.adapter, "dialogues": len(dialogues), "turns": len(histories),
        "load_seconds": round(load_s, 1), "simulate_seconds": round(seconds, 2),
        "turns_per_s": round(len(histories) / seconds, 2), "generated_tokens_per_s": round(tokens / seconds, 1),
        "end_of_dialogue_turns": sum(r.end_of_dialogue for r in results),
        "length_cut_turns": sum(r.candidates[0].finish_reason == "length" for r in results),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "max_tokens": args.max_tokens,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
