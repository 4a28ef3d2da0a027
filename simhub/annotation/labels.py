"""The labels ``simhub annotate`` can make, and where each lives in the released layout.

The command speaks of ``questions`` (one annotation per unique question text) while the released
files and :mod:`simhub.data.annotations` speak of the ``question`` label; this module is the one
place that maps between the two, so the writer and the reader cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from simhub.data.annotations import LABEL_COLUMNS, LABEL_PREFIXES
from simhub.errors import ConfigError, UnknownNameError

__all__ = ["ANNOTATION_LABELS", "DIALOGUE_LABELS", "JSON_LABELS", "columns_of", "data_label", "parse_labels"]

#: Every label, in the order they are made (questions first: the correctness prompt uses them).
ANNOTATION_LABELS: tuple[str, ...] = ("questions", "acts", "correctness", "kcs", "ocean", "freeform")
#: The labels made once per dialogue.
DIALOGUE_LABELS: tuple[str, ...] = ANNOTATION_LABELS[1:]
#: The labels answered as a JSON object (the free-text profile is plain text).
JSON_LABELS: frozenset[str] = frozenset(ANNOTATION_LABELS) - {"freeform"}

# Other spellings people will type: the reader's label names and the released column names.
_ALIASES = {
    "question": "questions",
    "question_annotation": "questions",
    "eedi_kcs": "kcs",
    "ocean_persona": "ocean",
    "freeform_persona": "freeform",
    "profile": "freeform",
}


def data_label(label: str) -> str:
    """The name :mod:`simhub.data.annotations` uses for ``label`` (``questions`` -> ``question``)."""
    return "question" if label == "questions" else label


def columns_of(label: str) -> tuple[str, str, str]:
    """``(prompt column, raw answer column, parsed column)`` of ``label`` in the released layout."""
    name = data_label(label)
    prefix = LABEL_PREFIXES[name]
    return f"{prefix}_prompt", f"{prefix}_annotation_raw", LABEL_COLUMNS[name]


def parse_labels(labels: str | Iterable[str] | None) -> tuple[str, ...]:
    """Label names (a comma-separated string or a list; None means all) in :data:`ANNOTATION_LABELS`
    order, without repeats; an unknown name raises :class:`UnknownNameError` listing the valid ones."""
    if labels is None:
        return ANNOTATION_LABELS
    items = labels.split(",") if isinstance(labels, str) else list(labels)
    chosen: set[str] = set()
    for item in items:
        name = str(item).strip().lower()
        if not name:
            continue
        name = _ALIASES.get(name, name)
        if name not in ANNOTATION_LABELS:
            raise UnknownNameError("label", str(item).strip(), ANNOTATION_LABELS, field="labels")
        chosen.add(name)
    if not chosen:
        raise ConfigError(f"labels: name at least one of {', '.join(ANNOTATION_LABELS)}", field="labels")
    return tuple(label for label in ANNOTATION_LABELS if label in chosen)
