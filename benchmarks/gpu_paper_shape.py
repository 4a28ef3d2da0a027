"""The paper's setting at its real size on one GPU, with nothing downloaded: simulate and score a test split.

It builds a random-weight base with Llama-3.1-8B's configuration (bf16), random rank-32 LoRA adapters
for the student, the act classifier, a local judge, the knowledge tracer and the tutor, and a
synthetic test split the size of the Eedi test split (382 dialogues, about 4.2k student turns, turn
lengths of the sample corpus), then times:

* ``simulate``: every student turn with teacher forcing, through vLLM's offline engine with the
  student LoRA, each output fixed to the real turn's token length (EOS ignored), so the work is the
  real split's;
* ``rollout``: ``--rollouts`` whole dialogues (``simhub rollout --mode free``'s loop) of the student
  LoRA against the tutor LoRA on one vLLM engine, temperature 0.6, at most 40 turns of at most 100
  tokens; random weights never write the end marker, so every dialogue runs to 40 turns (the worst case);
* ``score``: the Scorer on the simulated turns with every metric local: acts, correctness and errors
  (a local judge adapter), knowledge (paper cutoffs), cosine, rouge_l, tutor_response, the four
  adapters sharing one loaded base (transformers, bf16).

The goal on one H200: at most 10 s to simulate and at most 20 s to score the split. The weights are
random, so the numbers measure speed only. The tokenizer is the tiny kit's (the vocabulary size is
Llama 3's; token counts differ somewhat from Llama 3's), and cosine uses the packaged MiniLM.

    python benchmarks/gpu_paper_shape.py                         # one GPU, writes benchmarks/results/gpu_paper_shape.json
    python benchmarks/gpu_paper_shape.py --dims tiny --dialogues 6 --output /tmp/shape.json   # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

LLAMA_31_8B = {
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "vocab_size": 128256, "tie_word_embeddings": False,
}
ADAPTERS = ("student", "acts", "judge", "kt", "tutor")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build_models(root: Path, dims: str) -> tuple[Path, dict[str, Path]]:
    """A random base (saved with its tokenizer) and random rank-32 LoRA adapters of the paper's recipe."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from simhub.demo.tiny import TINY_LLAMA, build_tokenizer

    tokenizer = build_tokenizer()
    shape = dict(TINY_LLAMA) if dims == "tiny" else dict(LLAMA_31_8B)
    if dims == "tiny":
        shape["vocab_size"] = len(tokenizer)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda else torch.float32
    config = LlamaConfig(**shape, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):
        model = LlamaForCausalLM(config).to(dtype)
    base = root / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    adapters = {}
    for k, name in enumerate(ADAPTERS):
        torch.manual_seed(k + 1)
        lora = LoraConfig(r=32, lora_alpha=64, lora_dropout=0.0, use_rslora=True, target_modules=TARGETS,
                          init_lora_weights=False)
        peft_model = get_peft_model(model, lora)
        peft_model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        model = peft_model.unload()  # the plain base again, for the next adapter
        adapters[name] = root / name
    del model
    if cuda:
        torch.cuda.empty_cache()
    return base, adapters


def synthetic_split(n_dialogues: int, seed: int = 0):
    """``n_dialogues`` dialogues drawn with replacement from the sample corpus (real turn lengths), renamed."""
    import random

    import msgspec

    from simhub.data.sample import load_sample_corpus

    corpus = load_sample_corpus()
    pool = [d for split in ("train", "val", "test") for d in corpus[split] if d.student_turn_indices()]
    rng = random.Random(seed)
    return [msgspec.structs.replace(rng.choice(pool), id=f"{900000 + i}-{i}") for i in range(n_dialogues)]


def time_simulation(base: Path, student: Path, dialogues, dims: str) -> dict:
    """vLLM offline engine, student LoRA, outputs fixed to the real turns' token lengths (EOS ignored)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from simhub.config import SimulatorConfig, VLLMOptions
    from simhub.models import LoadOptions
    from simhub.models.refs import ResolvedRef
    from simhub.models.vllm import VLLMLM, VLLMEngine
    from simhub.simulation import Target
    from simhub.simulation.model import ModelSimulator

    options = VLLMOptions(gpu_memory_utilization=0.45 if dims != "tiny" else 0.3, max_model_len=8192,
                          max_lora_rank=32, max_loras=1, enforce_eager=dims == "tiny", dtype="auto")
    t0 = time.perf_counter()
    engine = VLLMEngine(str(base), None, options, enable_lora=True)
    lm = VLLMLM(engine, ResolvedRef(str(base), None, str(student), None))
    load_s = time.perf_counter() - t0
    prompts_of = ModelSimulator("student", SimulatorConfig(model=str(base), adapter=str(student)), LoadOptions())
    targets = [Target(d, i) for d in dialogues for i in d.student_turn_indices()]
    prompts = [TokensPrompt(prompt_token_ids=lm.chat_ids(prompts_of.messages(t))) for t in targets]
    lengths = [max(1, len(lm.text_ids(t.dialogue.turns[t.turn_index].content)) + 1) for t in targets]
    params = [SamplingParams(temperature=0.0, max_tokens=n, min_tokens=n, ignore_eos=True) for n in lengths]
    engine.engine.generate(prompts[:4], params[:4], lora_request=lm._lora, use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outs = engine.engine.generate(prompts, params, lora_request=lm._lora, use_tqdm=False)
    seconds = time.perf_counter() - start
    generated = sum(len(o.outputs[0].token_ids) for o in outs)
    candidates = [o.outputs[0].text for o in outs]
    engine.close()
    return {"load_s": round(load_s, 1), "simulate_s": round(seconds, 2), "turns": len(targets),
            "generated_tokens": generated, "prompt_tokens": sum(len(p["prompt_token_ids"]) for p in prompts),
            "turns_per_s": round(len(targets) / seconds, 1), "candidates": candidates, "targets": targets}


def time_rollout(base: Path, adapters: dict[str, Path], dialogues, dims: str) -> dict:
    """Lockstep rollouts through simhub's own loop: the student and tutor LoRAs on one vLLM engine."""
    from simhub.config import SimulatorConfig, TutorConfig, VLLMOptions
    from simhub.evaluation.rollout import RolloutOptions, rollout
    from simhub.models import LoadOptions, unload_models
    from simhub.simulation.model import ModelSimulator
    from simhub.simulation.tutor import ModelTutor

    vllm = VLLMOptions(gpu_memory_utilization=0.45 if dims != "tiny" else 0.3, max_model_len=8192,
                       max_lora_rank=32, max_loras=2, enforce_eager=dims == "tiny", dtype="auto")
    options = LoadOptions(backend="vllm", vllm=vllm, enable_lora=True, batch_size=256)
    student = ModelSimulator("student", SimulatorConfig(model=str(base), adapter=str(adapters["student"])), options)
    tutor = ModelTutor("tutor", TutorConfig(model=str(base), adapter=str(adapters["tutor"])), options)
    settings = RolloutOptions(mode="free", max_turns=40, temperature=0.6, max_tokens=100, no_cache=True, progress=False)
    rollout(student, tutor, dialogues[:2], settings)  # load both adapters, warm up
    start = time.perf_counter()
    out = rollout(student, tutor, dialogues, settings)
    seconds = time.perf_counter() - start
    unload_models()
    turns = sum(len(d.turns) for d in out)
    return {"rollouts": len(out), "seconds": round(seconds, 2), "rollouts_per_s": round(len(out) / seconds, 2),
            "turns": turns, "turns_per_s": round(turns / seconds, 1),
            "failed": sum(1 for d in out if d.meta and d.meta.get("failed"))}


def time_scoring(base: Path, adapters: dict[str, Path], targets, candidates) -> dict:
    import torch

    from simhub.config import (
        EmbedderConfig,
        JudgeConfig,
        KnowledgeConfig,
        MetricModels,
        ModelRef,
        ScoringConfig,
    )
    from simhub.metrics import ScoreItem
    from simhub.scoring import Scorer

    cuda = torch.cuda.is_available()
    metrics = MetricModels(
        acts=ModelRef(model=str(base), adapter=str(adapters["acts"])),
        judge=JudgeConfig(kind="local", model=str(base), adapter=str(adapters["judge"])),
        knowledge=KnowledgeConfig(model=str(base), adapter=str(adapters["kt"]), cutoffs="paper"),
        cosine=EmbedderConfig(model="minilm", batch_size=256),
        tutor_response=ModelRef(model=str(base), adapter=str(adapters["tutor"])),
    )
    scorer = Scorer(ScoringConfig(device="cuda" if cuda else "cpu", batch_size=64 if cuda else 8, chunk_size=1024,
                                  metrics=metrics), mode="benchmark")
    t0 = time.perf_counter()
    scorer.load()
    load_s = time.perf_counter() - t0
    items = [ScoreItem(t.dialogue, t.turn_index, c) for t, c in zip(targets, candidates, strict=True)]
    scorer.score(items[:8])  # warm-up
    per_metric = {}
    start = time.perf_counter()
    for name in scorer.instances:
        m0 = time.perf_counter()
        scorer.score(items, list(scorer.instances[name].output_names()))
        per_metric[name] = round(time.perf_counter() - m0, 2)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return {"load_s": round(load_s, 1), "score_s": round(seconds, 2), "per_metric_s": per_metric,
            "turns_per_s": round(len(items) / seconds, 1), "peak_gpu_gib": round(peak, 1) if peak else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", choices=["llama-3.1-8b", "tiny"], default="llama-3.1-8b")
    parser.add_argument("--dialogues", type=int, default=382, help="the Eedi test split has 382")
    parser.add_argument("--rollouts", type=int, default=128, help="whole dialogues in the rollout timing")
    parser.add_argument("--workdir", help="where to write the random models (default: a temporary folder)")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "gpu_paper_shape.json")
    args = parser.parse_args(argv)

    import torch

    root = Path(args.workdir or tempfile.mkdtemp(prefix="simhub-paper-shape-"))
    t0 = time.perf_counter()
    base, adapters = build_models(root, args.dims)
    build_s = time.perf_counter() - t0
    dialogues = synthetic_split(args.dialogues)
    sim = time_simulation(base, adapters["student"], dialogues, args.dims)
    rollouts = time_rollout(base, adapters, dialogues[: args.rollouts], args.dims)
    score = time_scoring(base, adapters, sim.pop("targets"), sim.pop("candidates"))
    report = {
        "dims": args.dims, "dialogues": len(dialogues), "student_turns": sim["turns"],
        "build_models_s": round(build_s, 1), "simulate": sim, "rollout": rollouts, "score": score,
        "goal": {"simulate_s": 10, "score_s": 20},
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    if not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
