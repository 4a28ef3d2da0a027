"""Training every model of the paper (docs/protocol.md §4): one trainer per method, one recipe kind each.

``train(recipe, output_dir)`` looks the recipe's kind up in :data:`TRAINERS`; DPO (offline RL) has
its own pipeline, :func:`simhub.training.dpo.run_dpo`, which needs the reward profile.
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
    if recipe.kind == "student-dpo":
        raise ConfigError("kind: student-dpo recipes run through run_dpo (simhub dpo), which needs the reward profile",
                          field="kind")
    module, _, name = TRAINERS[recipe.kind].partition(":")
    return getattr(importlib.import_module(module), name)(recipe, output_dir, resume)


__all__ = ["KINDS", "TRAINERS", "TrainRecipe", "load_recipe", "train"]
