"""simhub's own KT model (the ``knowledge`` metric's LLMKT tracer) as a KT-learner backbone.

The tracer reads dialogue text: a history of tutor and student turns, and for each KC the
probability that the student has mastered it (:class:`simhub.metrics.knowledge.KnowledgeTracer`).
As a backbone, its **belief is the graded history** (the last ``window`` answers, ``(item, kc,
correct)``), rendered as a dialogue each time the model is read:

* each answer is a tutor turn showing the item (labelled with its KC) and a student turn answering
  it: the key when correct, else the first wrong option, with the turn's correctness label;
* the dialogue's problem is the item answered last, and it lists every KC of the model (the
  knowledge metric lists a problem's KCs whatever it asks about).

``mastery`` is the tracer's P(True) for the KC after that dialogue: the same number the knowledge
metric computes for the same turns (``tests/unit/test_kt_llmkt.py``). ``predict`` is the mastery (the
tracer does not separate mastery from P(correct)). Every read is one packed forward of the model, so
this backbone is far slower than BKT; reads are cached per belief.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simhub.errors import DataError
from simhub.learners.kt.base import KTModel, read_json_object
from simhub.learners.kt.items import KTItem
from simhub.schema import Dialogue, Question, Turn, atomic_write_bytes

__all__ = ["LLMKTBelief", "LLMKTModel"]

LLMKT_VERSION = 1


@dataclass(frozen=True)
class LLMKTBelief:
    steps: tuple[tuple[str, str, bool], ...] = ()


class LLMKTModel(KTModel):
    backend = "llmkt"

    def __init__(self, tracer: Any, kcs: Sequence[str], items: Mapping[str, KTItem], *, window: int = 12,
                 model: str = "", items_source: str = "sample"):
        if window < 1:
            raise DataError(f"window: {window} must be at least 1", field="window")
        self.tracer, self._kcs, self.items = tracer, tuple(kcs), dict(items)
        self.window, self.model_ref, self.items_source = window, model, items_source
        self._read = functools.lru_cache(maxsize=2048)(self._masteries)

    @property
    def kcs(self) -> Sequence[str]:
        return self._kcs

    def initial_belief(self) -> LLMKTBelief:
        return LLMKTBelief()

    def update(self, belief: LLMKTBelief, item: Hashable, kc: str, correct: bool) -> LLMKTBelief:
        self.check_kc(kc)
        return LLMKTBelief((*belief.steps, (str(item), kc, bool(correct)))[-self.window:])

    def render(self, belief: LLMKTBelief) -> tuple[Dialogue, list[Turn]]:
        """The dialogue the tracer reads for ``belief``: its problem lists every KC of the model, so a
        read of one KC equals that KC's entry in a read of all (the tracer packs KCs independently)."""
        turns: list[Turn] = []
        for item_id, kc, correct in belief.steps:
            item = self.items.get(item_id)
            text = item.text() if item is not None else f"Question {item_id}"
            if item is not None:
                wrong = next((k for k in item.options if k != item.answer), item.answer)
                answer = item.answer if correct else wrong
                said = f"{answer}) {item.options[answer]}"
            else:
                said = "I think I have it." if correct else "I am not sure."
            turns.append(Turn(role="tutor", content=f"Try this one.\n{text}", kcs=[kc]))
            turns.append(Turn(role="student", content=said, correctness="correct" if correct else "incorrect"))
        last = self.items.get(belief.steps[-1][0]) if belief.steps else None
        question = Question(text=last.text() if last is not None else "Practice on the unit's topics.")
        return Dialogue(id="kt-learner", question=question, kcs=list(self._kcs), turns=turns), turns

    def _masteries(self, steps: tuple[tuple[str, str, bool], ...], asked: tuple[str, ...]) -> tuple[float, ...]:
        dialogue, turns = self.render(LLMKTBelief(steps))
        return tuple(float(v) for v in self.tracer.mastery(dialogue, turns, list(asked)))

    def mastery(self, belief: LLMKTBelief, kc: str) -> float:
        """One KC's read (one short forward; :meth:`masteries` reads all KCs in one packed forward)."""
        return self._read(belief.steps, (self.check_kc(kc),))[0]

    def masteries(self, belief: LLMKTBelief) -> dict[str, float]:
        return dict(zip(self._kcs, self._read(belief.steps, self._kcs), strict=True))

    def predict(self, belief: LLMKTBelief, kc: str, item: Hashable | None = None) -> float:
        return self.mastery(belief, kc)

    # ------------------------------------------------------------------------------------ files

    def save(self, path: str | os.PathLike[str]) -> Path:
        """A JSON file naming the tracer's model (a folder or a Hub id; ``simhub learners kt-fit``
        resolves ``demo:kt`` to its folder), the KCs, the window and the item bank (``sample`` or an
        item file)."""
        from simhub import __version__

        path = Path(path)
        doc = {"schema_version": LLMKT_VERSION, "backend": "llmkt", "model": self.model_ref, "kcs": list(self._kcs),
               "window": self.window, "items": self.items_source, "simhub_version": __version__}
        atomic_write_bytes(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LLMKTModel:
        from simhub.config import ModelRef
        from simhub.learners.kt.items import read_items, sample_item_bank
        from simhub.metrics.knowledge import KnowledgeTracer
        from simhub.models import LoadOptions, load_lm
        from simhub.runformat import check_version

        path = Path(path)
        raw = read_json_object(path)
        check_version(raw.get("schema_version"), (LLMKT_VERSION,), str(path), what="LLMKT file ", file=str(path))
        for key in ("model", "kcs"):
            if not raw.get(key):
                raise DataError(f"{path}: {key}: missing", file=str(path), field=key)
        source = str(raw.get("items", "sample"))
        bank = sample_item_bank() if source == "sample" else read_items(source)
        lm = load_lm(ModelRef(model=str(raw["model"])), LoadOptions(device="cpu"))
        return cls(KnowledgeTracer(lm), raw["kcs"], bank.items, window=int(raw.get("window", 12)),
                   model=str(raw["model"]), items_source=source)
