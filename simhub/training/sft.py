"""Generators: the student simulator and the tutor model, trained on whole dialogues with the loss on
their own turns only (the other role's turns are context)."""

from __future__ import annotations

import os

from simhub.training.common import run_supervised
from simhub.training.config import TrainRecipe


def train_sft(recipe: TrainRecipe, output_dir: str | os.PathLike[str], resume: bool = False) -> dict:
    from simhub.training.data import build_chat_examples

    return run_supervised(
        recipe, output_dir, resume,
        build=lambda tok, ds: build_chat_examples(tok, recipe.kind, ds, recipe.max_prompt_chars, recipe.persona),
    )
