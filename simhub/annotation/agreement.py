"""How far two annotators agree on the same dialogues (``simhub annotate agree``).

Before trusting a cheaper or local labeller in place of GPT-4.1, compare its files with the
released ones on the same dialogues. Both folders are read with the released-layout reader, rows
are matched by ``key`` (and must hold the same turns), and a label enters a comparison only
where both annotators produced it:

- acts and correctness: Cohen's κ over the student turns labelled by both (and the raw share
  of equal labels); correctness has three values, ``correct``, ``incorrect`` and ``na``;
- KCs: the mean Jaccard index of the two KC sets over tutor turns where at least one annotator
  named a KC (a turn one of them left out counts as an empty set);
- questions: the share of questions (unique texts) given the same correct option, an
  unsolvable verdict counting as an answer of its own;
- OCEAN: the share of (dialogue, trait) pairs given the same level.

κ is null when it is undefined (both annotators used a single label throughout). For scale, the
paper reports how well its metrics agree with humans (:data:`PAPER_HUMAN_AGREEMENT`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from simhub.data.annotations import annotate, read_annotation_file, row_dialogue
from simhub.errors import ConfigError, DataError
from simhub.metrics.agreement import cohen_kappa
from simhub.schema import OCEAN_TRAITS, Dialogue

__all__ = ["PAPER_HUMAN_AGREEMENT", "cohen_kappa", "compare_annotations", "format_agreement", "jaccard"]

#: The paper's agreement between human judgements and its metrics (Cohen's κ; Pearson for linguistic).
PAPER_HUMAN_AGREEMENT: dict[str, float] = {"acts": 0.73, "correctness": 0.69, "errors": 0.61, "linguistic": 0.74}


def jaccard(a: set, b: set) -> float | None:
    """|A ∩ B| / |A ∪ B|; None when both sets are empty."""
    union = a | b
    return len(a & b) / len(union) if union else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------- reading


def _files(folder: Path, annotator: str | None, field: str) -> dict[str, Path]:
    """``{split: file}`` of one annotator in ``folder``; without a name, the folder's only annotator."""
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder", file=str(folder), field=field)
    csvs = sorted(p for p in folder.glob("*.csv") if p.is_file())
    if annotator is not None:
        suffix = f"_{annotator.replace('/', '-')}.csv"
        files = {p.name[: -len(suffix)]: p for p in csvs if p.name.endswith(suffix) and len(p.name) > len(suffix)}
        if not files:
            raise DataError(f"{folder}: no {{split}}{suffix} annotation file", file=str(folder), field=field)
        return files
    names: dict[str, dict[str, Path]] = {}
    for path in csvs:
        split, _, name = path.stem.partition("_")
        names.setdefault(name, {})[split] = path
    if len(names) != 1:
        found = ", ".join(repr(n) if n else "(plain {split}.csv)" for n in sorted(names)) or "none"
        raise ConfigError(
            f"{field}: {folder} holds the files of {'several annotators' if names else 'no annotator'} "
            f"({found}); name the one to compare", field=field,
        )
    return next(iter(names.values()))


def _read(folder: Path, annotator: str | None, field: str) -> dict[tuple[int, int], Dialogue]:
    dialogues: dict[tuple[int, int], Dialogue] = {}
    where: dict[tuple[int, int], str] = {}
    for _, path in sorted(_files(folder, annotator, field).items()):
        for row in read_annotation_file(path):
            if row.key in dialogues:
                raise row.error("key", f"key {row.key} is also in {where[row.key]}")
            dialogues[row.key] = annotate(row_dialogue(row), row)
            where[row.key] = f"{row.file}, row {row.row}"
    return dialogues


# --------------------------------------------------------------------------- comparing


def compare_annotations(
    folder_a: str | os.PathLike[str],
    folder_b: str | os.PathLike[str],
    *,
    annotator_a: str | None = None,
    annotator_b: str | None = None,
) -> dict[str, Any]:
    """Agreement of two annotation folders (the released layout) on the dialogues they share.

    Returns ``{"dialogues": {"common", "only_a", "only_b"}, "acts": {"kappa", "agreement", "n"},
    "correctness": {...}, "kcs": {"jaccard", "n"}, "question": {"agreement", "n"},
    "ocean": {"agreement", "n"}}``; a statistic with nothing to compare is None.
    """
    a = _read(Path(folder_a), annotator_a, "annotator_a")
    b = _read(Path(folder_b), annotator_b, "annotator_b")
    common = [key for key in a if key in b]
    acts: tuple[list, list] = ([], [])
    correctness: tuple[list, list] = ([], [])
    kc_scores: list[float] = []
    questions: dict[str, tuple[Any, Any]] = {}
    ocean: list[bool] = []
    for key in common:
        da, db = a[key], b[key]
        if [(t.role, t.content) for t in da.turns] != [(t.role, t.content) for t in db.turns]:
            raise DataError(f"dialogue {key}: the two folders hold different turns under this key", field="turns")
        for ta, tb in zip(da.turns, db.turns, strict=True):
            if ta.act is not None and tb.act is not None:
                acts[0].append(ta.act)
                acts[1].append(tb.act)
            if ta.correctness is not None and tb.correctness is not None:
                correctness[0].append(ta.correctness)
                correctness[1].append(tb.correctness)
        if "kcs" not in da.failed_labels and "kcs" not in db.failed_labels:
            for ta, tb in zip(da.turns, db.turns, strict=True):
                if ta.role == "tutor":
                    score = jaccard(set(ta.kcs or ()), set(tb.kcs or ()))
                    if score is not None:
                        kc_scores.append(score)
        if "question" not in da.failed_labels and "question" not in db.failed_labels:
            questions.setdefault(da.question.text, (_answer(da), _answer(db)))
        if da.persona is not None and db.persona is not None:
            ocean.extend(getattr(da.persona, t) == getattr(db.persona, t) for t in OCEAN_TRAITS)
    return {
        "dialogues": {"common": len(common), "only_a": len(a) - len(common),
                      "only_b": sum(1 for key in b if key not in a)},
        "acts": _categorical(*acts),
        "correctness": _categorical(*correctness),
        "kcs": {"jaccard": _mean(kc_scores), "n": len(kc_scores)},
        "question": {"agreement": _mean([float(x == y) for x, y in questions.values()]), "n": len(questions)},
        "ocean": {"agreement": _mean([float(v) for v in ocean]), "n": len(ocean)},
    }


def _answer(dialogue: Dialogue) -> str:
    q = dialogue.question
    return q.correct_option if q.solvable and q.correct_option else "unsolvable"


def _categorical(a: list, b: list) -> dict[str, Any]:
    return {
        "kappa": cohen_kappa(a, b),
        "agreement": _mean([float(x == y) for x, y in zip(a, b, strict=True)]),
        "n": len(a),
    }


def format_agreement(result: dict[str, Any]) -> str:
    """A short table of :func:`compare_annotations`, with the paper's figures for scale."""

    def num(value: float | None, percent: bool = False) -> str:
        if value is None:
            return "n/a"
        return f"{value:.1%}" if percent else f"{value:.3f}"

    d = result["dialogues"]
    lines = [f"dialogues compared: {d['common']} (only in A: {d['only_a']}, only in B: {d['only_b']})"]
    for label in ("acts", "correctness"):
        r = result[label]
        lines.append(f"{label:<12} Cohen's kappa {num(r['kappa'])}  agreement {num(r['agreement'], True)}  "
                     f"({r['n']} student turns)")
    r = result["kcs"]
    lines.append(f"{'kcs':<12} mean Jaccard {num(r['jaccard'])}  ({r['n']} tutor turns)")
    r = result["question"]
    lines.append(f"{'question':<12} same correct option {num(r['agreement'], True)}  ({r['n']} questions)")
    r = result["ocean"]
    lines.append(f"{'ocean':<12} same level {num(r['agreement'], True)}  ({r['n']} traits)")
    paper = PAPER_HUMAN_AGREEMENT
    lines.append(f"for scale, the paper's human agreement with its metrics: acts {paper['acts']}, correctness "
                 f"{paper['correctness']}, errors {paper['errors']} (Cohen's kappa), linguistic "
                 f"{paper['linguistic']} (Pearson)")
    return "\n".join(lines)
