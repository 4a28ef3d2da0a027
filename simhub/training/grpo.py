"""Online RL of a student on the realism reward: trl's GRPO from an SFT adapter (``simhub grpo``).

Beyond the paper, whose DPO step samples once and trains offline. Here every step samples a group of
``grpo.num_generations`` next student turns per prompt from the current policy, scores each against
the real turn with the reward of :mod:`simhub.scoring.rewards` (the weighted mean of the recipe's
metrics, computed in process by the Scorer, batched), and updates the LoRA adapter with GRPO's
group-relative advantages and a KL term (``grpo.beta``) to the SFT policy (trl keeps the SFT adapter
as a frozen "ref" copy). The base model is never changed.

* **Prompts**: the paper's student prompt (the student chat format of docs/protocol.md §4, the
  recipe's persona) on every student turn of the first int(subsample·n) training dialogues, in
  trl's conversational form; a prompt of ``max_prompt_chars`` or more characters is left out, as
  the SFT and DPO steps leave it out.
* **Reward hacking**: the metrics the reward leaves out (``grpo.held_out_metrics``) are reward
  functions of weight 0, so trl logs them at every step beside the reward and the completions'
  lengths without training on them; :func:`hacking_flags` names a held-out metric that falls while
  the reward rises, in the log and in the results.
* **Resume**: a checkpoint every ``grpo.save_steps`` steps; ``--resume`` goes on from the last.
* **Record**: ``training_config.json`` holds the recipe, the reward (metrics, weights, profile) and
  the log history, which ``simhub publish`` puts in the model card, as for SFT and DPO.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from simhub.config import Profile
from simhub.errors import ConfigError, require
from simhub.models.cpu import apply_thread_policy
from simhub.schema import Dialogue
from simhub.training.config import TrainRecipe

__all__ = ["grpo_prompts", "hacking_flags", "run_grpo"]

GRPO_FOLDER = "grpo"


def _log(message: str) -> None:
    print(f"[simhub grpo] {message}", flush=True)


def grpo_prompts(recipe: TrainRecipe, dialogues: list[Dialogue], tokenizer) -> list[dict[str, Any]]:
    """One row per student turn of ``dialogues``: trl's conversational ``prompt`` (the student chat
    messages up to the turn), ``dialogue_id`` and ``turn_index``; prompts whose chat-templated text
    has ``max_prompt_chars`` or more characters are left out."""
    from simhub.prompts import student_messages

    rows = []
    for d in dialogues:
        for i in d.student_turn_indices():
            messages = student_messages(d, upto=i, persona=recipe.persona)
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            if len(text) >= recipe.max_prompt_chars:
                continue
            rows.append({"prompt": messages, "dialogue_id": d.id, "turn_index": i})
    return rows


def held_out_metrics(recipe: TrainRecipe, configured: list[str], rewarded: list[str]) -> list[str]:
    """The metrics logged but not rewarded: the recipe's, else every configured one the reward leaves out."""
    chosen = recipe.grpo.held_out_metrics
    if chosen is None:
        return [m for m in configured if m not in rewarded]
    overlap = [m for m in chosen if m in rewarded]
    if overlap:
        raise ConfigError(f"grpo.held_out_metrics: {', '.join(overlap)} is in the reward too; a held-out metric "
                          "checks what the reward does not see", field="grpo.held_out_metrics")
    missing = [m for m in chosen if m not in configured]
    if missing:
        raise ConfigError(f"grpo.held_out_metrics: {', '.join(missing)} not configured in the scoring profile",
                          field="grpo.held_out_metrics")
    return list(chosen)


def hacking_flags(log_history: list[dict[str, Any]], held_out: list[str], *, window: int = 3) -> list[str]:
    """A held-out metric whose mean over the last ``window`` logged steps is below its first
    ``window`` while the reward's is above: one sentence each (none with fewer than two steps)."""
    def series(key: str) -> list[float]:
        return [float(e[key]) for e in log_history if isinstance(e.get(key), int | float) and not math.isnan(e[key])]

    def trend(values: list[float]) -> float | None:
        if len(values) < 2:
            return None
        k = max(1, min(window, len(values) // 2))
        return sum(values[-k:]) / k - sum(values[:k]) / k

    reward = trend(series("rewards/realism/mean"))
    if reward is None or reward <= 0:
        return []
    flags = []
    for m in held_out:
        change = trend(series(f"rewards/{m}/mean"))
        if change is not None and change < 0:
            flags.append(f"the reward rose by {reward:.4f} while held-out {m} fell by {-change:.4f}")
    return flags


class _Metric:
    """A held-out metric as a trl reward function (weight 0: logged, not trained on)."""

    def __init__(self, reward, metric: str):
        self.reward, self.metric, self.__name__ = reward, metric, metric

    def __call__(self, prompts=None, completions=None, **columns):
        from simhub.scoring.rewards import completion_text

        items = self.reward.items([completion_text(c) for c in completions], columns)
        return [r.scores.get(self.metric) for r in self.reward.scorer.score(items, [self.metric]).items]


def run_grpo(recipe: TrainRecipe, output_dir: str | os.PathLike[str], profile: Profile, resume: bool = False) -> dict:
    """Train ``recipe`` (kind ``student-grpo``) into ``output_dir``; ``profile`` gives the reward's
    metric models (the recipe's ``grpo.scoring_profile``, provisioned by the caller). Returns the
    results (also ``training_config.json``'s ``data``)."""
    require("trl", "train")
    from datasets import Dataset
    from peft import PeftModel
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from simhub.models.refs import load_tokenizer
    from simhub.scoring import Scorer
    from simhub.scoring.rewards import RealismReward
    from simhub.training.common import (
        last_checkpoint,
        load_base,
        save_run,
        thread_policy_callback,
        training_arguments,
    )
    from simhub.training.config import check_resources
    from simhub.training.data import head_fraction, load_split

    if recipe.kind != "student-grpo":
        raise ConfigError(f"kind is {recipe.kind!r}; simhub grpo needs a student-grpo recipe", field="kind")
    grpo, out = recipe.grpo, Path(output_dir)
    resolved = check_resources(recipe)
    checkpoint = last_checkpoint(out / GRPO_FOLDER, resume)
    set_seed(recipe.seed)
    apply_thread_policy("training student-grpo")
    scorer = Scorer.from_profile(profile, mode="service")
    train = head_fraction(load_split(recipe.data, recipe.train_split, recipe.max_train_dialogues), grpo.subsample)
    reward = RealismReward(scorer, grpo.reward_metrics, grpo.reward_weights, train)
    held_out = held_out_metrics(recipe, scorer.metrics, list(reward.metrics))
    tokenizer = load_tokenizer(resolved["sft_adapter"], fallback=resolved["base_model"])
    rows = grpo_prompts(recipe, train, tokenizer)
    if not rows:
        raise ConfigError("grpo: no prompt to train on (subsample too small, or every prompt too long)",
                          field="grpo.subsample")
    _log(f"{len(rows)} prompts × {grpo.num_generations} completions per step group; reward: "
         f"{reward.describe()}; held out: {', '.join(held_out) or 'none'}")
    model = PeftModel.from_pretrained(load_base(recipe, resolved["base_model"]), resolved["sft_adapter"],
                                      is_trainable=True)
    args = training_arguments(
        recipe, out / GRPO_FOLDER, False, cls=GRPOConfig, num_generations=grpo.num_generations,
        max_completion_length=grpo.max_new_tokens, temperature=grpo.temperature, top_p=grpo.top_p,
        top_k=grpo.top_k, beta=grpo.beta, use_vllm=grpo.use_vllm,
        reward_weights=[1.0] + [0.0] * len(held_out), save_strategy="steps", save_steps=grpo.save_steps,
        save_total_limit=recipe.save_total_limit, log_completions=False)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward, *(_Metric(reward, m) for m in held_out)], args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trainer.add_callback(thread_policy_callback())
    result = trainer.train(resume_from_checkpoint=checkpoint)
    flags = hacking_flags(trainer.state.log_history, held_out)
    for flag in flags:
        _log(f"warning: {flag} (reward hacking?)")
    results: dict[str, Any] = {
        "kind": "student-grpo", "train_loss": result.training_loss, "global_step": result.global_step,
        "persona": recipe.persona, "prompts": len(rows), "reward": {**reward.describe(),
                                                                   "profile": profile.source or profile.name},
        "held_out_metrics": held_out, "hacking_flags": flags, "resumed_from": Path(checkpoint).name if checkpoint else None}
    if trainer.is_world_process_zero():
        save_run(trainer, tokenizer, out, recipe, resolved, {k: v for k, v in results.items() if k != "kind"})
    return results
