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
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simhub.errors import ConfigError, require
from simhub.schema import Dialogue, iter_jsonl, write_jsonl
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
    """What the stages share: the recipe, the output folder, the model paths resolved by
    :func:`~simhub.training.config.check_resources` and lazily loaded dialogues."""

    def __init__(self, recipe: TrainRecipe, output_dir: Path, resume: bool, resolved: dict[str, str]):
        self.recipe = recipe
        self.output_dir = output_dir
        self.resume = resume
        self.resolved = resolved
        self._dialogues: dict[str, Dialogue] | None = None

    @property
    def base_model(self) -> str:
        """The resolved base model (folder or Hub id) that every stage loads the SFT adapter onto."""
        return self.resolved["base_model"]

    @property
    def sft_adapter(self) -> str:
        """The resolved SFT adapter (folder or Hub id)."""
        return self.resolved["sft_adapter"]

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
    from tqdm.auto import tqdm

    from simhub.backends.hf import ModelRef, load_causal_lm
    from simhub.prompts import strip_end_marker

    recipe, dpo = ctx.recipe, ctx.recipe.dpo
    ref = ModelRef(ctx.base_model, adapter=ctx.sft_adapter, revision=recipe.base_model_revision)
    lm = load_causal_lm(ref, dtype="bfloat16" if recipe.bf16 else None, batch_size=dpo.generation_batch_size)
    ids = [lm.chat_ids(p) for p in prompts]
    out: list[list[str]] = []
    # One lm.generate call per batch, for the progress bar; seed + start is the seed one call would use.
    for start in tqdm(range(0, len(ids), lm.batch_size), desc="generate", unit="batch"):
        texts = lm.generate(ids[start : start + lm.batch_size], dpo.max_new_tokens, temperature=dpo.temperature,
                            top_p=dpo.top_p, n=dpo.num_candidates, seed=recipe.seed + start)
        out.extend([strip_end_marker(t)[0] for t in group] for group in texts)
    return out


def _sample_vllm(ctx: Context, prompts: list[list[dict]]) -> list[list[str]]:
    vllm = require("vllm", "vllm")
    peft = require("peft", "train")
    from vllm.lora.request import LoRARequest

    from simhub.prompts import strip_end_marker

    recipe, dpo = ctx.recipe, ctx.recipe.dpo
    # The same base and adapter as stage_train (a Hub-id adapter works too: PeftConfig fetches its config).
    rank = peft.PeftConfig.from_pretrained(ctx.sft_adapter).r
    llm = vllm.LLM(model=ctx.base_model, revision=recipe.base_model_revision, enable_lora=True,
                   max_lora_rank=rank, seed=recipe.seed)
    params = vllm.SamplingParams(n=dpo.num_candidates, temperature=dpo.temperature, top_p=dpo.top_p,
                                 max_tokens=dpo.max_new_tokens, seed=recipe.seed)
    outputs = llm.chat(prompts, params, lora_request=LoRARequest("sft", 1, ctx.sft_adapter))
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

    records = list(iter_jsonl(ctx.path("generate"), type=dict))
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
    scored = list(iter_jsonl(ctx.path("score"), type=dict))
    pairs = make_pairs(scored, dpo.epsilon, dpo.max_pairs_per_turn, dpo.skip_turns)
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
    from simhub.training.train import last_checkpoint, load_base, load_tokenizer, save_run, training_arguments

    recipe, dpo, out = ctx.recipe, ctx.recipe.dpo, ctx.output_dir
    pairs = list(iter_jsonl(ctx.path("pairs"), type=dict))
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
    tokenizer = load_tokenizer(ctx.sft_adapter)
    # The SFT adapter is trained further; trl copies it as the frozen "ref" adapter (the reference policy).
    model = PeftModel.from_pretrained(load_base(recipe, ctx.base_model), ctx.sft_adapter, is_trainable=True)
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
        save_run(trainer, tokenizer, out, recipe, ctx.resolved,
                 {"pairs": len(pairs), "train_pairs": len(train_pairs), "eval_pairs": len(eval_pairs)})
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
    from simhub.training.train import release_models, write_json

    if until not in STAGES:
        raise ConfigError(f"--until: {until!r} is not one of {', '.join(STAGES)}")
    ctx = Context(recipe, Path(output_dir), resume, check_resources(recipe))
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for stage in STAGES[: STAGES.index(until) + 1]:
        path = ctx.path(stage)
        if path.is_file():
            _log(f"{stage}: {path.name} exists, skipped")
            summary[stage] = "skipped"
            continue
        result = STAGE_FUNCTIONS[stage](ctx)
        if stage in ("generate", "score"):
            # The policy (generate) and the metric models (score) are cached per process: free them
            # so that the later stages, above all DPO training, have the accelerator to themselves.
            release_models()
        if stage == "train":
            write_json(path, result)
        else:
            write_jsonl(path, result)
            _log(f"{stage}: {len(result)} records -> {path}")
        summary[stage] = "done"
    return summary
