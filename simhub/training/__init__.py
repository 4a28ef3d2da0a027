"""Training every model of the paper (docs/protocol.md §4): one trainer per method, one recipe kind each.

``train(recipe, output_dir)`` looks the recipe's kind up in :data:`TRAINERS`; DPO (offline RL) has
its own pipeline, :func:`simhub.training.dpo.run_dpo`, and GRPO (online RL) its own loop,
:func:`simhub.training.grpo.run_grpo`; both need the reward profile.
"""

from __future__ import annotations

import importlib
import os

from simhub.errors import ConfigError
from simhub.training.config import KINDS, TrainRecipe, load_recipe

#: Recipe kind -> trainer (``"module:function"``, imported when used).
TRAINERS: dict[str, str] = {
    "student-sft": "simhub.training.sft:train_sft",
    "acts-embedding": "simhub.training.embedding_classifier:train_acts_embedding",
    "correctness-embedding": "simhub.training.embedding_classifier:train_acts_embedding",
    "tutor-sft": "simhub.training.sft:train_sft",
    "acts": "simhub.training.classifiers:train_classifier",
    "correctness": "simhub.training.classifiers:train_classifier",
    "judge": "simhub.training.classifiers:train_classifier",
    "kt": "simhub.training.kt:train_kt",
}


def train(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    """Train ``recipe`` (any kind but ``student-dpo``) into ``output_dir``; returns the evaluation results."""
    if recipe.kind in ("student-dpo", "student-grpo"):
        command = "run_dpo (simhub dpo)" if recipe.kind == "student-dpo" else "run_grpo (simhub grpo)"
        raise ConfigError(f"kind: {recipe.kind} recipes run through {command}, which needs the reward profile",
                          field="kind")
    module, _, name = TRAINERS[recipe.kind].partition(":")
    return getattr(importlib.import_module(module), name)(recipe, output_dir, resume)


__all__ = ["KINDS", "TRAINERS", "TrainRecipe", "load_recipe", "train"]
