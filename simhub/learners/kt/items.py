"""The item bank of the KT-grounded learner: multiple-choice items, each exercising one KC.

Probes and assigned practice draw from the bank. Grading is exact match on the option letter, as
EduClaw-Bench grades multiple choice. Two sources:

* :func:`items_from_dialogues`: the questions of QATD-2k dialogues (the sample corpus for the demo).
  Each Eedi question is an item; its text holds the stem and options A–D and its ``correct_option``
  the key. Its KC is the one the tutor turns of its dialogues name most often, leaving out the
  catch-all ``Default`` unless nothing else is named (ties: alphabetical);
* :func:`read_items`: a JSON Lines file, one item per line:
  ``{"id": "q1", "kc": "Fractions", "question": "...", "options": {"A": "...", "B": "..."}, "answer": "B"}``.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

import msgspec

from simhub.errors import DataError, UnknownNameError
from simhub.schema import Dialogue

__all__ = ["ItemBank", "KTItem", "grade", "items_from_dialogues", "read_items", "sample_item_bank"]

_OPTION = re.compile(r"^\s*Answer ([A-Z]) Text:\s*(.*)$")
_STEM = re.compile(r"^\s*Question Text:\s*")
_LETTER = re.compile(r"\b([A-Z])\b")


class KTItem(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One multiple-choice item: its stem, options by letter, the key and the KC it exercises."""

    id: str
    kc: str
    question: str
    options: dict[str, str]
    answer: str
    #: A worked explanation (the Eedi solution or the key's explanation) the LMS can push as content.
    explanation: str | None = None
    #: The question's text as its source dialogues have it (for comparing the learner's chats with them).
    source_text: str | None = None

    def text(self) -> str:
        """The item as a learner reads it: the stem, then one line per option."""
        return "\n".join([self.question, *(f"{k}) {v}" for k, v in self.options.items())])


def grade(item: KTItem, answer: str | None) -> bool:
    """Exact match: the first standalone capital letter of ``answer`` that is one of the item's
    options must be its key (``"B"``, ``"B) 0.38"`` and ``"I pick B"`` all choose B; no letter is wrong)."""
    if not answer:
        return False
    for letter in _LETTER.findall(answer.strip()):
        if letter in item.options:
            return letter == item.answer
    return False


class ItemBank:
    """Items by id and by KC (in a fixed order: the order they were given)."""

    def __init__(self, items: Iterable[KTItem], *, source: str = "items"):
        self.items: dict[str, KTItem] = {}
        for it in items:
            if it.id in self.items:
                raise DataError(f"{source}: item {it.id!r} appears twice", field="id")
            if it.answer not in it.options:
                raise DataError(f"{source}: item {it.id!r}: answer {it.answer!r} is not one of its options "
                                f"{sorted(it.options)}", field="answer")
            self.items[it.id] = it
        if not self.items:
            raise DataError(f"{source}: no items", field="items")
        self.source = source

    def __len__(self) -> int:
        return len(self.items)

    @cached_property
    def by_kc(self) -> dict[str, list[KTItem]]:
        out: dict[str, list[KTItem]] = {}
        for it in self.items.values():
            out.setdefault(it.kc, []).append(it)
        return out

    @property
    def kcs(self) -> list[str]:
        return list(self.by_kc)

    def item(self, item_id: str, *, field: str = "item_ids") -> KTItem:
        """The item named ``item_id``; an unknown one is an UnknownNameError naming it."""
        found = self.items.get(item_id)
        if found is None:
            raise UnknownNameError("item", item_id, list(self.items), field=field)
        return found

    def for_kc(self, kc: str, *, field: str = "kcs") -> list[KTItem]:
        found = self.by_kc.get(kc)
        if found is None:
            raise UnknownNameError("KC", kc, self.kcs, field=field)
        return found

    def restrict(self, kcs: Sequence[str]) -> ItemBank:
        """The items whose KC is one of ``kcs`` (the KT model's, so every probe updates it)."""
        keep = set(kcs)
        return ItemBank([it for it in self.items.values() if it.kc in keep], source=self.source)


def _parse_question(text: str) -> tuple[str, dict[str, str]]:
    stem: list[str] = []
    options: dict[str, str] = {}
    for line in text.splitlines():
        m = _OPTION.match(line)
        if m:
            options[m.group(1)] = m.group(2).strip()
        elif not options:
            stem.append(_STEM.sub("", line))
    return "\n".join(stem).strip(), options


def items_from_dialogues(dialogues: Iterable[Dialogue]) -> ItemBank:
    """One item per distinct question with a key and parsable options (see the module docstring)."""
    from simhub.learners.kt.logs import item_of

    kcs: dict[str, Counter[str]] = {}
    first: dict[str, Dialogue] = {}
    for d in dialogues:
        qid = item_of(d)
        first.setdefault(qid, d)
        counts = kcs.setdefault(qid, Counter())
        for t in d.turns:
            if t.role == "tutor":
                counts.update(set(t.kcs or ()))
    items = []
    for qid, d in first.items():
        q = d.question
        stem, options = _parse_question(q.text)
        if q.correct_option is None or len(options) < 2 or q.correct_option not in options:
            continue
        counts = kcs[qid]
        named = sorted((k for k in counts if k != "Default"), key=lambda k: (-counts[k], k))
        kc = named[0] if named else "Default"
        explanation = q.solution or (q.option_explanations or {}).get(q.correct_option)
        items.append(KTItem(id=qid, kc=kc, question=stem, options=options, answer=q.correct_option,
                            explanation=explanation, source_text=q.text))
    return ItemBank(items, source="the dialogues' questions")


@functools.lru_cache(maxsize=1)
def sample_item_bank() -> ItemBank:
    """The sample corpus's questions (all three splits) as an item bank, built once per process."""
    from simhub.data.sample import load_sample_corpus

    corpus = load_sample_corpus()
    return items_from_dialogues([d for s in ("train", "val", "test") for d in corpus[s]])


def read_items(path: str | os.PathLike[str]) -> ItemBank:
    """The items of a JSON Lines file (see the module docstring); errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such item file", file=str(path))
    items = []
    decoder = msgspec.json.Decoder(KTItem)
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(decoder.decode(line))
        except msgspec.DecodeError as exc:
            raise DataError(f"{path}:{row}: {exc}", file=str(path), row=row) from None
    return ItemBank(items, source=str(path))


def bank_kcs(bank: ItemBank) -> Mapping[str, int]:
    """How many items each KC has."""
    return {kc: len(v) for kc, v in bank.by_kc.items()}
