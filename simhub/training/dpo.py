"""Offline RL for the student simulator (SPEC §4): generate → score → pairs → train.

Each stage writes one artifact into the output folder, atomically, and a rerun starts at the
first stage whose artifact is missing:

==========  ====================  ===============================================================
stage       artifact              content (one JSON object per line)
==========  ====================  ===============================================================
generate    ``candidates.jsonl``  ``{dialogue_id, turn_index, candidates: [text, ...]}``
score       ``scores.jsonl``      ``{dialogue_id, turn_index, candidates: [{text, scores, reward}]}``
pairs       ``pairs.jsonl``       ``{dialogue_id, turn_index, chosen, rejected, gap}``
train       ``eval_results.json`` the DPO adapter, ``training_config.json`` and the results
==========  ====================  ===============================================================

Pairing (:func:`make_pairs`) is a pure function of the scored candidates.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simhub.errors import ConfigError, require
from simhub.schema import Dialogue, atomic_write_bytes
from simhub.training.config import TrainRecipe

STAGES: tuple[str, ...] = ("generate", "score", "pairs", "train")
ARTIFACTS: dict[str, str] = {
    "generate": "candidates.jsonl",
    "score": "scores.jsonl",
    "pairs": "pairs.jsonl",
    "train": "eval_results.json",
}


def _log(message: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"[simhub dpo] {message}", flush=True)


def write_records(path: Path, records: Sequence[dict]) -> None:
    atomic_write_bytes(path, b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records))


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------------- pairing (pure)


def mean_reward(scores: dict[str, float | None], metrics: Sequence[str]) -> float | None:
    """Mean of the non-null scores of ``metrics`` (the reference's average); None if all are null."""
    values = [scores[m] for m in metrics if scores.get(m) is not None]
    return sum(values) / len(values) if values else None


def make_pairs(turns: Sequence[dict], epsilon: float = 0.1, max_pairs_per_turn: int = 6,
               skip_turns: int = 5) -> list[dict]:
    """Preference pairs from scored turns.

    ``turns``: ``{dialogue_id, turn_index, candidates: [{text, reward}]}``. Turns with
    ``turn_index < skip_turns`` are skipped; within a turn every two candidates with rewards
    whose gap is strictly greater than ``epsilon`` form a pair (the higher reward is chosen),
    candidates with a null reward or the same text are never paired, and the
    ``max_pairs_per_turn`` widest gaps are kept (ties in candidate order).
    """
    pairs = []
    for turn in turns:
        if turn["turn_index"] < skip_turns:
            continue
        cands = [c for c in turn["candidates"] if c.get("reward") is not None]
        found = []
        for (i, a), (j, b) in itertools.combinations(enumerate(cands), 2):
            gap = abs(a["reward"] - b["reward"])
            if gap > epsilon and a["text"] != b["text"]:
                chosen, rejected = (a, b) if a["reward"] > b["reward"] else (b, a)
                found.append((-gap, i, j, chosen, rejected))
        found.sort(key=lambda x: x[:3])
        for neg_gap, _, _, chosen, rejected in found[:max_pairs_per_turn]:
            pairs.append({"dialogue_id": turn["dialogue_id"], "turn_index": turn["turn_index"],
                          "chosen": chosen["text"], "rejected": rejected["text"], "gap": -neg_gap,
                          "chosen_reward": chosen["reward"], "rejected_reward": rejected["reward"]})
    return pairs


def dedup(texts: Sequence[str]) -> list[str]:
    """Distinct non-empty candidates in first-seen order."""
    seen: dict[str, None] = {}
    for t in texts:
        if t.strip() and t not in seen:
            seen[t] = None
    return list(seen)


# ---------------------------------------------------------------------------------- stages


class Context:
    """What the stages share: the recipe, the output folder and lazily loaded dialogues."""

    def __init__(self, recipe: TrainRecipe, output_dir: Path, resume: bool):
        self.recipe = recipe
        self.output_dir = output_dir
        self.resume = resume
        self._dialogues: dict[str, Dialogue] | None = None

    @property
    def dialogues(self) -> dict[str, Dialogue]:
        if self._dialogues is None:
            from simhub.training.data import load_split

            data = load_split(self.recipe.data, self.recipe.train_split, self.recipe.max_train_dialogues)
            self._dialogues = {d.id: d for d in data}
        return self._dialogues

    def path(self, stage: str) -> Path:
        return self.output_dir / ARTIFACTS[stage]


def generation_targets(ctx: Context) -> list[tuple[Dialogue, int]]:
    """``(dialogue, student turn index)`` to sample for: a seeded subsample, first turns skipped."""
    from simhub.training.data import subsample

    dpo = ctx.recipe.dpo
    chosen = subsample(list(ctx.dialogues.values()), dpo.subsample, ctx.recipe.seed)
    return [(d, i) for d in chosen for i in d.student_turn_indices() if i >= dpo.skip_turns]


def _sample_transformers(ctx: Context, prompts: list[list[dict]]) -> list[list[str]]:
    torch = require("torch", "train")
    from tqdm.auto import tqdm

    from simhub.backends.hf import ModelRef, left_pad, load_causal_lm
    from simhub.prompts import strip_end_marker

    dpo = ctx.recipe.dpo
    lm = load_causal_lm(ModelRef(dpo.sft_adapter), dtype="bfloat16" if ctx.recipe.bf16 else None)
    torch.manual_seed(ctx.recipe.seed)
    out: list[list[str]] = []
    ids = [lm.chat_ids(p) for p in prompts]
    for start in tqdm(range(0, len(ids), dpo.generation_batch_size), desc="generate", unit="batch"):
        chunk = ids[start : start + dpo.generation_batch_size]
        batch, mask = left_pad(chunk, lm.pad_id)
        width = batch.shape[1]
        with torch.inference_mode():
            gen = lm.model.generate(
                input_ids=batch.to(lm.device), attention_mask=mask.to(lm.device), do_sample=True,
                temperature=dpo.temperature, top_p=dpo.top_p, max_new_tokens=dpo.max_new_tokens,
                num_return_sequences=dpo.num_candidates, pad_token_id=lm.pad_id,
            )
        texts = lm.tokenizer.batch_decode(gen[:, width:], skip_special_tokens=True)
        for row in range(len(chunk)):
            group = texts[row * dpo.num_candidates : (row + 1) * dpo.num_candidates]
            out.append([strip_end_marker(t)[0] for t in group])
    return out


def _sample_vllm(ctx: Context, prompts: list[list[dict]]) -> list[list[str]]:
    vllm = require("vllm", "vllm")
    from vllm.lora.request import LoRARequest

    from simhub.prompts import strip_end_marker
    from simhub.training.config import check_model

    dpo = ctx.recipe.dpo
    config = json.loads((Path(dpo.sft_adapter) / "adapter_config.json").read_text())
    llm = vllm.LLM(model=config["base_model_name_or_path"], enable_lora=True, max_lora_rank=config.get("r", 32),
                   seed=ctx.recipe.seed)
    params = vllm.SamplingParams(n=dpo.num_candidates, temperature=dpo.temperature, top_p=dpo.top_p,
                                 max_tokens=dpo.max_new_tokens, seed=ctx.recipe.seed)
    outputs = llm.chat(prompts, params, lora_request=LoRARequest("sft", 1, check_model(dpo.sft_adapter,
                       "dpo.sft_adapter", adapter=True)))
    return [[strip_end_marker(c.text)[0] for c in o.outputs] for o in outputs]


def stage_generate(ctx: Context) -> list[dict]:
    from simhub.prompts import student_messages

    targets = generation_targets(ctx)
    if not targets:
        raise ConfigError("dpo: no student turns to sample (subsample too small or all turns skipped)")
    prompts = [student_messages(d, upto=i, persona=ctx.recipe.persona) for d, i in targets]
    _log(f"generate: {len(targets)} student turns × {ctx.recipe.dpo.num_candidates} candidates "
         f"({ctx.recipe.dpo.backend})")
    sample = _sample_vllm if ctx.recipe.dpo.backend == "vllm" else _sample_transformers
    texts = sample(ctx, prompts)
    return [{"dialogue_id": d.id, "turn_index": i, "candidates": dedup(group)}
            for (d, i), group in zip(targets, texts, strict=True)]


def reward_metrics(ctx: Context, configured: Sequence[str]) -> list[str]:
    chosen = ctx.recipe.dpo.reward_metrics
    if chosen is None:
        return [m for m in configured if m != "rouge_l"]
    missing = [m for m in chosen if m not in configured]
    if missing:
        raise ConfigError(f"dpo.reward_metrics: {', '.join(missing)} not configured in profile "
                          f"{ctx.recipe.dpo.scoring_profile!r}")
    return list(chosen)


def stage_score(ctx: Context) -> list[dict]:
    from simhub.profiles import load_profile, scorer_config
    from simhub.scoring import ScoreItem, Scorer

    records = read_records(ctx.path("generate"))
    scorer = Scorer(scorer_config(load_profile(ctx.recipe.dpo.scoring_profile)))
    metrics = reward_metrics(ctx, scorer.metrics)
    items, where = [], []
    for r, rec in enumerate(records):
        dialogue = ctx.dialogues[rec["dialogue_id"]]
        for c, text in enumerate(rec["candidates"]):
            items.append(ScoreItem(dialogue, rec["turn_index"], text))
            where.append((r, c))
    _log(f"score: {len(items)} candidates with {', '.join(metrics)}")
    result = scorer.score(items, metrics, progress=True)
    out = [{"dialogue_id": rec["dialogue_id"], "turn_index": rec["turn_index"],
            "candidates": [{"text": t} for t in rec["candidates"]]} for rec in records]
    for (r, c), item in zip(where, result.items, strict=True):
        scores = {m: item.scores.get(m) for m in metrics}
        out[r]["candidates"][c].update(scores=scores, reward=mean_reward(scores, metrics))
    return out


def stage_pairs(ctx: Context) -> list[dict]:
    dpo = ctx.recipe.dpo
    pairs = make_pairs(read_records(ctx.path("score")), dpo.epsilon, dpo.max_pairs_per_turn, dpo.skip_turns)
    _log(f"pairs: {len(pairs)} preference pairs (gap > {dpo.epsilon})")
    return pairs


def split_pairs(pairs: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out the pairs of a seeded ``fraction`` of dialogues for validation loss."""
    import random

    ids = sorted({p["dialogue_id"] for p in pairs})
    n = round(fraction * len(ids)) if len(ids) > 1 else 0
    held = set(random.Random(seed).sample(ids, n))
    return [p for p in pairs if p["dialogue_id"] not in held], [p for p in pairs if p["dialogue_id"] in held]


def stage_train(ctx: Context) -> dict:
    require("trl", "train")
    from peft import PeftModel
    from transformers import set_seed
    from trl import DPOConfig, DPOTrainer

    from simhub.prompts import student_messages
    from simhub.training.config import check_model
    from simhub.training.train import (
        TRAINING_CONFIG_FILE,
        hub_id_of,
        last_checkpoint,
        load_base,
        load_tokenizer,
        training_arguments,
        versions,
        write_json,
    )

    recipe, dpo, out = ctx.recipe, ctx.recipe.dpo, ctx.output_dir
    pairs = read_records(ctx.path("pairs"))
    if not pairs:
        raise ConfigError("dpo: no preference pairs (every gap was below dpo.epsilon); nothing to train")
    train_pairs, eval_pairs = split_pairs(pairs, dpo.eval_fraction, recipe.seed)

    def rows(ps):
        return [{"prompt": student_messages(ctx.dialogues[p["dialogue_id"]], upto=p["turn_index"],
                                            persona=recipe.persona),
                 "chosen": [{"role": "assistant", "content": p["chosen"]}],
                 "rejected": [{"role": "assistant", "content": p["rejected"]}]} for p in ps]

    from datasets import Dataset

    set_seed(recipe.seed)
    adapter = check_model(dpo.sft_adapter or "", "dpo.sft_adapter", adapter=True)
    base_path = check_model(recipe.base_model, "base_model", recipe.base_model_revision)
    tokenizer = load_tokenizer(adapter)
    # The SFT adapter is trained further; trl copies it as the frozen "ref" adapter (the reference policy).
    model = PeftModel.from_pretrained(load_base(recipe, base_path), adapter, is_trainable=True)
    checkpoint = last_checkpoint(out / "dpo", ctx.resume)
    args = training_arguments(recipe, out / "dpo", bool(eval_pairs), cls=DPOConfig, beta=dpo.beta,
                              max_length=dpo.max_length, prediction_loss_only=True)
    trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows(train_pairs)),
                         eval_dataset=Dataset.from_list(rows(eval_pairs)) if eval_pairs else None,
                         processing_class=tokenizer)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    results: dict[str, Any] = {"kind": "student-dpo", "train_loss": result.training_loss,
                               "global_step": result.global_step, "pairs": len(pairs),
                               "train_pairs": len(train_pairs), "eval_pairs": len(eval_pairs),
                               "best_model_checkpoint": trainer.state.best_model_checkpoint}
    if eval_pairs:
        metrics = trainer.evaluate()
        results.update({k: v for k, v in metrics.items() if isinstance(v, int | float) and not math.isnan(v)})
    if trainer.is_world_process_zero():
        trainer.save_model(str(out))
        tokenizer.save_pretrained(str(out))
        write_json(out / TRAINING_CONFIG_FILE, {
            "recipe": recipe.to_dict(),
            "resolved": {"base_model": base_path, "sft_adapter": adapter, "base_model_hub_id": hub_id_of(recipe)},
            "gradient_accumulation_steps": recipe.gradient_accumulation_steps(),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "data": {"pairs": len(pairs), "train_pairs": len(train_pairs), "eval_pairs": len(eval_pairs)},
            "versions": versions(),
            "log_history": trainer.state.log_history,
        })
    return results


#: Stage functions, looked up at run time (tests replace them).
STAGE_FUNCTIONS: dict[str, Callable[[Context], Any]] = {
    "generate": stage_generate,
    "score": stage_score,
    "pairs": stage_pairs,
    "train": stage_train,
}


def run_dpo(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False,
            until: str = "train") -> dict:
    """Run the stages whose artifacts are missing, in order, up to and including ``until``."""
    from simhub.training.config import check_resources

    if until not in STAGES:
        raise ConfigError(f"--until: {until!r} is not one of {', '.join(STAGES)}")
    check_resources(recipe)
    ctx = Context(recipe, Path(output_dir), resume)
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for stage in STAGES[: STAGES.index(until) + 1]:
        path = ctx.path(stage)
        if path.is_file():
            _log(f"{stage}: {path.name} exists, skipped")
            summary[stage] = "skipped"
            continue
        result = STAGE_FUNCTIONS[stage](ctx)
        if stage == "train":
            atomic_write_bytes(path, json.dumps(result, indent=2, default=str).encode() + b"\n")
        else:
            write_records(path, result)
            _log(f"{stage}: {len(result)} records -> {path}")
        summary[stage] = "done"
    return summary
