"""``acts``: does the simulated turn carry the same dialogue act as the real one?

The act classifier is a causal LM fine-tuned to answer with the act label. Instead of free
generation, each of the five labels (plus the end-of-turn token) is scored as a continuation
and the most likely wins, so the prediction is always one of the labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simhub.backends.hf import LogprobModel, ModelRef, load_causal_lm
from simhub.prompts import act_messages
from simhub.schema import ACTS, Dialogue, Turn


class ActClassifier:
    def __init__(self, ref: ModelRef | str, device: str | None = None, batch_size: int = 16, backend: str = "transformers"):
        self.lm: LogprobModel = load_causal_lm(ref, device=device, batch_size=batch_size, backend=backend)
        self.label_ids = [[*self.lm.text_ids(label), self.lm.eot_id] for label in ACTS]

    def predict(self, items: Sequence[tuple[Dialogue, list[Turn], str]]) -> tuple[list[str], np.ndarray]:
        """Predicted act per ``(dialogue, history, student_text)`` and the label log-probabilities."""
        if not items:
            return [], np.zeros((0, len(ACTS)))
        prompts = [self.lm.chat_ids(act_messages(history, text, dialogue)) for dialogue, history, text in items]
        best, scores = self.lm.choose(prompts, self.label_ids)
        return [ACTS[i] for i in best], scores


def act_agreement(real: str | None, predicted: str) -> float | None:
    return None if real is None else float(real == predicted)
