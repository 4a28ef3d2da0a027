"""Offline RL for the student simulator (docs/protocol.md §4, §8): generate → score → pairs → train.

Data, as the reference draws it: candidates are sampled for every student turn of the first
``int(subsample·n)`` dialogues of the (already shuffled) training split, and of the first
``int(subsample·n)`` of the validation split, and all of them are scored (so the knowledge
reward's cutoffs pool every turn); blank candidates and candidates that end the dialogue (kept
with the end-of-dialogue marker) count like the others. Only pairing leaves out turns with an
index below ``skip_turns`` and turns whose chat-templated prompt has 6,000 characters or more. Sampling goes through the
simulators (:class:`~simhub.simulation.ModelSimulator` with the SFT adapter), scoring through the
Scorer with the evaluated set's own knowledge cutoffs, and DPO truncates as the reference's trl
(0.22.2) did: every prompt keeps its last ``max_prompt_length`` tokens, then each of prompt + chosen
and prompt + rejected keeps its last ``max_length`` tokens (:func:`truncate_sequence`).
Training runs each pair as one packed row, its prompt encoded once for both completions, with
trl's own log-probs (:mod:`simhub.training.dpo_packing`).

Each stage writes one artifact into the output folder, atomically, and a rerun starts at the first
stage whose artifact is missing:

==========  ====================  ==================================================================================
stage       artifact              content (one JSON object per line)
==========  ====================  ==================================================================================
generate    ``candidates.jsonl``  ``{split, dialogue_id, turn_index, long_prompt, candidates: [text, ...]}``
score       ``scores.jsonl``      ``{split, dialogue_id, turn_index, long_prompt, candidates: [{text, scores, reward}]}``
pairs       ``pairs.jsonl``       ``{split, dialogue_id, turn_index, chosen, rejected, gap}``
train       ``eval_results.json`` the DPO adapter, ``training_config.json`` and the results
==========  ====================  ==================================================================================

Pairing (:func:`make_pairs`) and truncation (:func:`truncate_sequence`) are pure functions.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simhub.config import Profile
from simhub.errors import ConfigError, require
from simhub.executors import Executor
from simhub.models.cpu import apply_thread_policy
from simhub.schema import Dialogue, iter_jsonl, write_jsonl
from simhub.training.config import TrainRecipe

STAGES: tuple[str, ...] = ("generate", "score", "pairs", "train")
ARTIFACTS: dict[str, str] = {
    "generate": "candidates.jsonl",
    "score": "scores.jsonl",
    "pairs": "pairs.jsonl",
    "train": "eval_results.json",
}
DPO_SPLITS = ("train", "val")


def _log(message: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"[simhub dpo] {message}", flush=True)


# ---------------------------------------------------------------------------------- pairing (pure)


def mean_reward(scores: dict[str, float | None], metrics: Sequence[str]) -> float | None:
    """Mean of the non-null scores of ``metrics`` (the reference's average); None if all are null."""
    values = [scores[m] for m in metrics if scores.get(m) is not None]
    return sum(values) / len(values) if values else None


def turn_rewards(turns: Sequence[dict], metrics: Sequence[str], norm_level: str = "none",
                 square: bool = False) -> list[list[float | None]]:
    """Each candidate's reward, turn by turn, from its per-metric ``scores`` (the reference's
    aggregation; FIDELITY.md, DPO options).

    ``norm_level``: ``none`` keeps the scores; ``group`` z-scores each metric over the turn's
    candidates (population std; a metric whose non-null scores are all equal, or absent, becomes 0
    for every candidate, null ones included, as in the reference); ``dataset`` z-scores each metric
    with the mean and std of all its non-null scores in ``turns``. ``square`` then squares each value
    (a null stays null). The reward is the mean of the non-null values; None if all are null.
    """
    def column(turn: dict, metric: str) -> list[float | None]:
        return [(c.get("scores") or {}).get(metric) for c in turn["candidates"]]

    stats: dict[str, tuple[float, float]] = {}
    if norm_level == "dataset":
        for m in metrics:
            values = [v for t in turns for v in column(t, m) if v is not None]
            mean = sum(values) / len(values) if values else 0.0
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
            stats[m] = (mean, std)
    elif norm_level not in ("none", "group"):
        raise ConfigError(f"dpo.reward_norm_level: {norm_level!r} is not none, group or dataset",
                          field="dpo.reward_norm_level")
    out = []
    for turn in turns:
        columns = []
        for m in metrics:
            values = column(turn, m)
            if norm_level == "group":
                present = [v for v in values if v is not None]
                mean = sum(present) / len(present) if present else 0.0
                std = math.sqrt(sum((v - mean) ** 2 for v in present) / len(present)) if present else 0.0
                values = [None if v is None else (v - mean) / std for v in values] if std else [0.0] * len(values)
            elif norm_level == "dataset":
                mean, std = stats[m]
                values = [None if v is None else ((v - mean) / std if std else 0.0) for v in values]
            if square:
                values = [None if v is None else v * v for v in values]
            columns.append(values)
        rewards = []
        for c in range(len(turn["candidates"])):
            present = [col[c] for col in columns if col[c] is not None]
            rewards.append(sum(present) / len(present) if present else None)
        out.append(rewards)
    return out


def make_pairs(turns: Sequence[dict], epsilon: float = 0.1, max_pairs_per_turn: int = 6,
               skip_turns: int = 5, strategy: str = "max_delta", rng: random.Random | None = None) -> list[dict]:
    """Preference pairs from scored turns.

    ``turns``: ``{dialogue_id, turn_index, long_prompt?, candidates: [{text, reward}]}``. Turns
    with ``turn_index < skip_turns`` or a ``long_prompt`` are skipped; candidates with a null reward or the same text are
    never paired, and a pair needs a reward gap strictly greater than ``epsilon`` (the higher
    reward is chosen). ``max_delta`` (the paper): every such pair, the ``max_pairs_per_turn``
    widest gaps kept (ties in candidate order). ``each_wins``: each candidate in turn is chosen
    once, against one of those it beats drawn with ``rng`` (seeded by the caller), no limit.
    """
    if strategy not in ("max_delta", "each_wins"):
        raise ConfigError(f"dpo.pair_strategy: {strategy!r} is not max_delta or each_wins", field="dpo.pair_strategy")
    rng = rng or random.Random(0)
    pairs = []
    for turn in turns:
        if turn["turn_index"] < skip_turns or turn.get("long_prompt"):
            continue
        cands = [c for c in turn["candidates"] if c.get("reward") is not None]
        found = []
        if strategy == "max_delta":
            for (i, a), (j, b) in itertools.combinations(enumerate(cands), 2):
                gap = abs(a["reward"] - b["reward"])
                if gap > epsilon and a["text"] != b["text"]:
                    chosen, rejected = (a, b) if a["reward"] > b["reward"] else (b, a)
                    found.append((-gap, i, j, chosen, rejected))
            found.sort(key=lambda x: x[:3])
            found = found[:max_pairs_per_turn]
        else:
            for i, a in enumerate(cands):
                beaten = [(a["reward"] - b["reward"], j, b) for j, b in enumerate(cands)
                          if j != i and a["reward"] - b["reward"] > epsilon and a["text"] != b["text"]]
                if beaten:
                    gap, j, b = beaten[rng.randrange(len(beaten))]
                    found.append((-gap, i, j, a, b))
        for neg_gap, _, _, chosen, rejected in found:
            pairs.append({"dialogue_id": turn["dialogue_id"], "turn_index": turn["turn_index"],
                          "chosen": chosen["text"], "rejected": rejected["text"], "gap": -neg_gap,
                          "chosen_reward": chosen["reward"], "rejected_reward": rejected["reward"]})
    return pairs


def dedup(texts: Sequence[str]) -> list[str]:
    """Distinct candidates in first-seen order; a blank one is a candidate like any other (the
    reference keeps it and scores it)."""
    return list(dict.fromkeys(texts))


def truncate_sequence(prompt: list[int], completion: list[int], max_prompt_length: int | None,
                      max_length: int | None) -> tuple[list[int], list[int]]:
    """trl 0.22.2's DPO truncation of one sequence (the reference's pinned trl; FIDELITY.md).

    The prompt always keeps its last ``max_prompt_length`` tokens, whatever the completion's length;
    then, if prompt plus completion is longer than ``max_length``, the sequence keeps its last
    ``max_length`` tokens (trl's default ``truncation_mode="keep_end"``), so a long completion stays
    whole and eats into the prompt from the left. Chosen and rejected are cut separately, so one
    pair's two sequences can keep different amounts of prompt. Returns the kept prompt and completion.
    """
    if max_prompt_length is not None:
        prompt = prompt[-max_prompt_length:] if max_prompt_length > 0 else []
    if max_length is not None and len(prompt) + len(completion) > max_length:
        drop = len(prompt) + len(completion) - max_length
        prompt, completion = prompt[drop:], completion[max(0, drop - len(prompt)):]
    return prompt, completion


def preference_rows(pairs: Sequence[dict], dialogues: dict[str, Dialogue], persona: str) -> list[dict]:
    """trl's conversational preference rows: the student prompt up to the pair's turn, and each candidate
    as the assistant's message, as generated (the end-of-dialogue marker kept). trl renders them with the
    chat template, so a completion is the candidate and one end-of-turn token (FIDELITY.md, DPO truncation)."""
    from simhub.prompts import student_messages

    return [{"prompt": student_messages(dialogues[p["dialogue_id"]], upto=p["turn_index"], persona=persona),
             "chosen": [{"role": "assistant", "content": p["chosen"]}],
             "rejected": [{"role": "assistant", "content": p["rejected"]}]} for p in pairs]


DPO_TRUNCATION_MODE = "keep_end"
"""trl's ``truncation_mode`` that, after the prompt cut, finishes :func:`truncate_sequence`'s rule."""


# ---------------------------------------------------------------------------------- stages


class Context:
    """What the stages share: the recipe, the output folder, resolved model paths, the reward
    profile (already provisioned) and the dialogues of each split, loaded once."""

    def __init__(self, recipe: TrainRecipe, output_dir: Path, resume: bool, resolved: dict[str, str], profile: Profile,
                 executor: Executor | None = None):
        self.recipe, self.output_dir, self.resume, self.resolved, self.profile = recipe, output_dir, resume, resolved, profile
        #: Where the sampling and scoring chunks run (None: here).
        self.executor = executor
        self._dialogues: dict[str, list[Dialogue]] = {}

    @property
    def base_model(self) -> str:
        return self.resolved["base_model"]

    @property
    def sft_adapter(self) -> str:
        return self.resolved["sft_adapter"]

    def dialogues(self, split: str) -> list[Dialogue]:
        """The DPO dialogues of ``split`` (train or val): the first int(subsample·n) of the recipe's split."""
        if split not in self._dialogues:
            from simhub.training.data import head_fraction, load_split

            name = self.recipe.train_split if split == "train" else self.recipe.eval_split
            limit = self.recipe.max_train_dialogues if split == "train" else self.recipe.max_eval_dialogues
            self._dialogues[split] = head_fraction(load_split(self.recipe.data, name, limit), self.recipe.dpo.subsample)
        return self._dialogues[split]

    def by_id(self, split: str) -> dict[str, Dialogue]:
        return {d.id: d for d in self.dialogues(split)}

    def path(self, stage: str) -> Path:
        return self.output_dir / ARTIFACTS[stage]

    def simulator(self):
        """The sampling policy: the SFT student, through the simulators."""
        from simhub.config import SimulatorConfig
        from simhub.models import LoadOptions
        from simhub.simulation.model import ModelSimulator

        recipe = self.recipe
        config = SimulatorConfig(model=self.base_model, adapter=self.sft_adapter, revision=recipe.base_model_revision,
                                 backend=recipe.dpo.backend, persona=recipe.persona)  # type: ignore[arg-type]
        options = LoadOptions(backend=recipe.dpo.backend, batch_size=recipe.dpo.generation_batch_size,
                              dtype="bfloat16" if recipe.bf16 else None, vllm=self.profile.serving.vllm)
        return ModelSimulator("dpo-policy", config, options)


def generation_targets(ctx: Context, split: str, simulator) -> tuple[list, list[bool]]:
    """Every student turn of ``split``'s DPO dialogues, and whether its chat-templated prompt is too
    long to pair (``max_prompt_chars`` or more, as the reference measures it)."""
    from simhub.simulation import Target

    limit = ctx.recipe.max_prompt_chars
    targets = [Target(d, i) for d in ctx.dialogues(split) for i in d.student_turn_indices()]
    return targets, [len(simulator.prompt_text(t)) >= limit for t in targets]


def candidate_text(candidate) -> str:
    """A sampled candidate as the reference keeps it: the text with its end-of-dialogue marker, so
    that a pair can prefer (or not) ending the dialogue. Scoring removes the marker (the candidate
    rules)."""
    from simhub.prompts import END_OF_DIALOGUE

    return candidate.text + END_OF_DIALOGUE if candidate.end_of_dialogue else candidate.text


def stage_generate(ctx: Context) -> list[dict]:
    from simhub.models import Sampling
    from simhub.simulation.work import simulate_chunks

    dpo, recipe = ctx.recipe.dpo, ctx.recipe
    simulator = ctx.simulator()
    records = []
    for split in DPO_SPLITS:
        targets, long = generation_targets(ctx, split, simulator)
        _log(f"generate {split}: {len(targets)} student turns × {dpo.num_candidates} candidates ({dpo.backend}); "
             f"{sum(long)} with prompts of {recipe.max_prompt_chars}+ characters, scored but not paired")
        sampling = Sampling(temperature=dpo.temperature, top_p=dpo.top_p, top_k=dpo.top_k, max_tokens=dpo.max_new_tokens,
                            n=dpo.num_candidates, seed=recipe.seed)
        results = simulate_chunks(simulator, targets, sampling, ctx.executor, chunk_size=dpo.generation_batch_size * 4)
        records += [{"split": split, "dialogue_id": t.dialogue.id, "turn_index": t.turn_index, "long_prompt": too_long,
                     "candidates": dedup([candidate_text(c) for c in r.candidates])}
                    for t, r, too_long in zip(targets, results, long, strict=True)]
    if not any(r["split"] == "train" for r in records):
        raise ConfigError("dpo: no student turns to sample (subsample too small)", field="dpo.subsample")
    return records


def reward_metrics(ctx: Context, configured: Sequence[str]) -> list[str]:
    chosen = ctx.recipe.dpo.reward_metrics
    if chosen is None:
        return [m for m in configured if m != "rouge_l"]
    missing = [m for m in chosen if m not in configured]
    if missing:
        raise ConfigError(f"dpo.reward_metrics: {', '.join(missing)} not configured in profile "
                          f"{ctx.profile.name!r}", field="dpo.reward_metrics")
    return list(chosen)


def stage_score(ctx: Context) -> list[dict]:
    """Scores every candidate of a split together (the knowledge cutoffs come from that set, as in the
    reference) and averages the reward metrics."""
    from simhub.metrics import ScoreItem
    from simhub.scoring import Scorer

    records = list(iter_jsonl(ctx.path("generate"), type=dict))
    scorer = Scorer.from_profile(ctx.profile, mode="benchmark", executor=ctx.executor)
    metrics = reward_metrics(ctx, scorer.metrics)
    out = [{**{k: rec[k] for k in ("split", "dialogue_id", "turn_index")}, "long_prompt": rec.get("long_prompt", False),
            "candidates": [{"text": t} for t in rec["candidates"]]} for rec in records]
    for split in DPO_SPLITS:
        dialogues = ctx.by_id(split)
        items, where = [], []
        for r, rec in enumerate(records):
            if rec["split"] != split:
                continue
            for c, text in enumerate(rec["candidates"]):
                items.append(ScoreItem(dialogues[rec["dialogue_id"]], rec["turn_index"], text))
                where.append((r, c))
        if not items:
            continue
        _log(f"score {split}: {len(items)} candidates with {', '.join(metrics)}")
        result = scorer.score(items, metrics, progress=True)
        for (r, c), item in zip(where, result.items, strict=True):
            scores = {m: item.scores.get(m) for m in metrics}
            out[r]["candidates"][c].update(scores=scores, reward=mean_reward(scores, metrics))
    return out


def stage_pairs(ctx: Context) -> list[dict]:
    """Pairs per split; with ``reward_norm_level`` or ``square_rewards`` the rewards are recomputed
    from the stored per-metric scores first (the dataset statistics are the split's own)."""
    dpo = ctx.recipe.dpo
    scored = list(iter_jsonl(ctx.path("score"), type=dict))
    rng = random.Random(ctx.recipe.seed)
    pairs = []
    for split in DPO_SPLITS:
        turns = [s for s in scored if s["split"] == split]
        if dpo.reward_norm_level != "none" or dpo.square_rewards:
            metrics = list(dict.fromkeys(m for t in turns for c in t["candidates"] for m in c.get("scores") or {}))
            for turn, rewards in zip(turns, turn_rewards(turns, metrics, dpo.reward_norm_level, dpo.square_rewards),
                                     strict=True):
                for candidate, reward in zip(turn["candidates"], rewards, strict=True):
                    candidate["reward"] = reward
        found = make_pairs(turns, dpo.epsilon, dpo.max_pairs_per_turn, dpo.skip_turns, dpo.pair_strategy, rng)
        pairs += [{"split": split, **p} for p in found]
        _log(f"pairs {split}: {len(found)} preference pairs ({dpo.pair_strategy}, gap > {dpo.epsilon})")
    return pairs


def stage_train(ctx: Context) -> dict:
    require("trl", "train")
    from peft import PeftModel
    from transformers import set_seed
    from trl import DPOConfig, DPOTrainer

    from simhub.models.refs import load_tokenizer
    from simhub.training import dpo_packing
    from simhub.training.common import (
        final_eval_metrics,
        last_checkpoint,
        load_base,
        save_run,
        thread_policy_callback,
        training_arguments,
    )

    recipe, dpo, out = ctx.recipe, ctx.recipe.dpo, ctx.output_dir
    pairs = list(iter_jsonl(ctx.path("pairs"), type=dict))
    train_pairs = [p for p in pairs if p["split"] == "train"]
    eval_pairs = [p for p in pairs if p["split"] == "val"]
    if not train_pairs:
        raise ConfigError("dpo: no training preference pairs (every gap was at most dpo.epsilon); nothing to train",
                          field="dpo.epsilon")

    def rows(ps, split):
        return preference_rows(ps, ctx.by_id(split), recipe.persona)

    from datasets import Dataset

    class TruncatingDPOTrainer(DPOTrainer):
        """trl's DPO with trl 0.22.2's truncation: the prompt cut here, the sequence cut by trl's
        collator (``max_length`` with ``keep_end``, per sequence), as :func:`truncate_sequence` states."""

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            dataset = super()._prepare_dataset(dataset, processing_class, args, dataset_name)
            if dpo.max_prompt_length is None:
                return dataset
            return dataset.map(lambda example: {"prompt_ids": truncate_sequence(
                example["prompt_ids"], [], dpo.max_prompt_length, None)[0]})

    set_seed(recipe.seed)
    apply_thread_policy("training student-dpo")
    tokenizer = load_tokenizer(ctx.sft_adapter, fallback=ctx.base_model)
    # The SFT adapter is trained further; trl copies it as the frozen "ref" adapter (the reference policy).
    model = PeftModel.from_pretrained(load_base(recipe, ctx.base_model), ctx.sft_adapter, is_trainable=True)
    checkpoint = last_checkpoint(out / "dpo", ctx.resume)
    with warnings.catch_warnings():
        # trl 1.x deprecates keep_end (for 2.0); the pinned 1.16 keeps it, and it is the reference's rule.
        warnings.filterwarnings("ignore", message=".*'keep_end'.*", category=FutureWarning)
        args = training_arguments(recipe, out / "dpo", bool(eval_pairs), cls=DPOConfig, beta=dpo.beta,
                                  max_length=dpo.max_length, truncation_mode=DPO_TRUNCATION_MODE,
                                  prediction_loss_only=True)
    trainer = TruncatingDPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows(train_pairs, "train")),
                                   eval_dataset=Dataset.from_list(rows(eval_pairs, "val")) if eval_pairs else None,
                                   processing_class=tokenizer)
    # Each pair's prompt encoded once for both completions, with trl's own log-probs (FIDELITY.md).
    dpo_packing.install(trainer.model.get_base_model())
    trainer.add_callback(thread_policy_callback())
    result = trainer.train(resume_from_checkpoint=checkpoint)
    results: dict[str, Any] = {"kind": "student-dpo", "train_loss": result.training_loss, "persona": recipe.persona,
                               "global_step": result.global_step, "pairs": len(pairs),
                               "train_pairs": len(train_pairs), "eval_pairs": len(eval_pairs),
                               "best_model_checkpoint": trainer.state.best_model_checkpoint}
    if eval_pairs:
        metrics = final_eval_metrics(trainer)
        results.update({k: v for k, v in metrics.items() if isinstance(v, int | float) and not math.isnan(v)})
    if trainer.is_world_process_zero():
        save_run(trainer, tokenizer, out, recipe, ctx.resolved,
                 {"pairs": len(pairs), "train_pairs": len(train_pairs), "eval_pairs": len(eval_pairs),
                  "reward_profile": ctx.profile.source or ctx.profile.name})
    return results


#: Stage functions, looked up at run time (tests replace them).
STAGE_FUNCTIONS: dict[str, Callable[[Context], Any]] = {
    "generate": stage_generate,
    "score": stage_score,
    "pairs": stage_pairs,
    "train": stage_train,
}


def run_dpo(recipe: TrainRecipe, output_dir: str | os.PathLike[str], profile: Profile, resume: bool = False,
            until: str = "train", executor: Executor | None = None) -> dict:
    """Run the stages whose artifacts are missing, in order, up to and including ``until``.

    ``profile`` gives the reward models (the recipe's ``dpo.scoring_profile``, already provisioned
    by the caller). ``executor`` (:mod:`simhub.executors`; default: this process) runs the candidate
    sampling and scoring chunks; training runs here.
    """
    from simhub.training.common import release_models, write_json
    from simhub.training.config import check_resources

    if until not in STAGES:
        raise ConfigError(f"until: {until!r} is not one of {', '.join(STAGES)}", field="until")
    ctx = Context(recipe, Path(output_dir), resume, check_resources(recipe), profile, executor)
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
            # The policy (generate) and the metric models (score) are cached per process: free them so
            # that the later stages, above all DPO training, have the accelerator to themselves.
            release_models()
        if stage == "train":
            write_json(path, result)
        else:
            write_jsonl(path, result)
            _log(f"{stage}: {len(result)} records -> {path}")
        summary[stage] = "done"
    return summary
