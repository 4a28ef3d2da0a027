"""``acts``: does the simulated turn carry the same dialogue act as the real one?

The act classifier is a causal LM fine-tuned to answer with the act label (the paper's, and
``paper-8b``'s). Instead of free generation, each of the five labels (plus the end-of-turn token) is
scored as a continuation and the most likely wins, so the prediction is always one of the labels.
The labels of one prompt share its encoding (prefix packing in the model layer).

A folder holding an embedding classifier (:mod:`simhub.models.embedding_classifier`, the demo's:
a linear layer over the MiniLM embedding of the turn) is used as one instead: it reads the student
turn's text alone, and its prediction is always one of the labels too.
"""

from __future__ import annotations

from collections.abc import Sequence

from simhub.config import ModelRef
from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem
from simhub.models import LanguageModel, load_lm
from simhub.models.embedding_classifier import EmbeddingClassifier, classifier_at
from simhub.prompts import act_messages
from simhub.schema import ACTS

NO_LABEL = "real turn has no act label"


class Acts(Metric):
    """``acts``: 1 when the act classifier gives the simulated turn the real turn's dialogue act, else 0.

    A real turn without an act label (a failed annotation) is null, decided before any model runs:

    >>> from simhub.metrics import MetricContext, ScoreItem
    >>> from simhub.schema import Dialogue, Question, Turn
    >>> dialogue = Dialogue(id="d1", question=Question(text="2/5 + 6/5 = ?"), turns=[
    ...     Turn(role="tutor", content="What is 2/5 + 6/5?"), Turn(role="student", content="8/5")])
    >>> Acts(None, MetricContext()).skip(ScoreItem(dialogue, 1, "eight fifths"))
    {'acts': 'real turn has no act label'}
    """

    outputs = (Output("acts", "1 if the simulated turn's dialogue act equals the real turn's act",
                      f"{NO_LABEL} (a failed annotation)", binary=True, label="Acts"),)
    config_key = "acts"
    config: ModelRef

    def load(self) -> LanguageModel | EmbeddingClassifier:
        ref = self.config.plain()
        return classifier_at(ref) or load_lm(ref, self.context.load)

    def skip(self, item: ScoreItem) -> dict[str, str]:
        return {"acts": NO_LABEL} if item.real.act is None else {}

    def predict(self, items: Sequence[tuple[list, str, object]]) -> list[str]:
        """The predicted act of each ``(history, student text, dialogue)``."""
        lm = self.load()
        if not items:
            return []
        if isinstance(lm, EmbeddingClassifier):
            return lm.predict_turns(items, device=self.context.load.device)
        labels = [[*lm.text_ids(label), lm.eot_id] for label in ACTS]
        prompts = [lm.chat_ids(act_messages(history, text, dialogue)) for history, text, dialogue in items]
        best, _ = lm.choose(prompts, labels)
        return [ACTS[i] for i in best]

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        predicted = self.predict([(it.history, it.candidate, it.dialogue) for it in items])
        return [MetricResult({"acts": float(act == it.real.act)}, details={"predicted": act, "real": it.real.act})
                for it, act in zip(items, predicted, strict=True)]

    def prompt(self, item: ScoreItem) -> str:
        model = self.load()
        if isinstance(model, EmbeddingClassifier):  # no prompt: the turn's text is what is embedded
            return item.candidate
        return model.chat_text(act_messages(item.history, item.candidate, item.dialogue))

