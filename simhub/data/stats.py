"""Dataset statistics of a set of canonical dialogues (the table of the paper's data section).

Besides the shape of the data, the table says how complete the annotations are: a label that is
missing on many turns silently shrinks the set a metric is computed on, so coverage and failure
counts are reported next to the counts they qualify.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from simhub.data.annotations import LABELS
from simhub.schema import ACTS, CORRECTNESS_LABELS, Dialogue, Turn

#: Keys of :func:`dataset_stats` whose values are shares, printed as percentages.
_SHARE_KEYS = ("tutor_first_share", "label_coverage")
#: Keys whose dict values are plain counts that do not add up to a meaningful total.
_COUNT_KEYS = ("failed_labels",)


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def label_coverage(dialogues: Sequence[Dialogue]) -> dict[str, float]:
    """Share of the turns or dialogues a label applies to that carry it.

    Turn labels are measured on the turns they belong to (acts and correctness on student turns,
    KCs on tutor turns, although only the tutor turns that pose a task get KCs, so KC coverage
    stays below 100 % on complete data); dialogue labels on dialogues (the question annotation
    counts when ``solvable`` is set).
    """
    student = [t for d in dialogues for t in d.turns if t.role == "student"]
    tutor = [t for d in dialogues for t in d.turns if t.role == "tutor"]

    def turns_with(turns: list[Turn], attribute: str) -> float:
        return _share(sum(getattr(t, attribute) is not None for t in turns), len(turns))

    n = len(dialogues)
    return {
        "question": _share(sum(d.question.solvable is not None for d in dialogues), n),
        "correctness": turns_with(student, "correctness"),
        "kcs": turns_with(tutor, "kcs"),
        "acts": turns_with(student, "act"),
        "ocean": _share(sum(d.persona is not None for d in dialogues), n),
        "freeform": _share(sum(d.profile is not None for d in dialogues), n),
    }


def dataset_stats(dialogues: Sequence[Dialogue]) -> dict:
    """Counts and shares that describe a set of dialogues, with label coverage and failures."""
    turns = [t for d in dialogues for t in d.turns]
    student = [t for t in turns if t.role == "student"]
    tutor = [t for t in turns if t.role == "tutor"]
    acts = Counter(t.act for t in student if t.act is not None)
    correctness = Counter(t.correctness for t in student if t.correctness is not None)
    failed = Counter(label for d in dialogues for label in d.failed_labels)

    def mean_words(ts) -> float:
        return sum(len(t.content.split()) for t in ts) / len(ts) if ts else 0.0

    n = len(dialogues)
    return {
        "dialogues": n,
        "turns": len(turns),
        "student_turns": len(student),
        "tutor_turns": len(tutor),
        "tutor_first_share": _share(sum(1 for d in dialogues if d.turns and d.turns[0].role == "tutor"), n),
        "mean_words_student_turn": mean_words(student),
        "mean_words_tutor_turn": mean_words(tutor),
        "mean_turns_per_dialogue": _share(len(turns), n),
        "mean_kcs_per_dialogue": _share(sum(len(d.kcs) for d in dialogues), n),
        "dialogues_without_kcs": sum(1 for d in dialogues if not d.kcs),
        "acts": {a: acts.get(a, 0) for a in ACTS},
        "correctness": {c: correctness.get(c, 0) for c in CORRECTNESS_LABELS},
        "unlabelled_student_turns": sum(1 for t in student if t.act is None),
        "label_coverage": label_coverage(dialogues),
        # Dialogues whose annotation of the label failed; labels outside LABELS are kept, not lost.
        "failed_labels": {
            **{label: failed.get(label, 0) for label in LABELS},
            **{label: count for label, count in failed.items() if label not in LABELS},
        },
    }


def format_stats(stats: dict) -> str:
    """Render :func:`dataset_stats` as an aligned two-column table."""
    rows: list[tuple[str, str]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            total = sum(value.values()) or 1
            for label, item in value.items():
                if key in _SHARE_KEYS:
                    text = f"{item:.1%}"
                elif key in _COUNT_KEYS:
                    text = str(item)
                else:
                    text = f"{item} ({item / total:.1%})"
                rows.append((f"{key}: {label}", text))
        elif isinstance(value, float):
            rows.append((key, f"{value:.1%}" if key in _SHARE_KEYS else f"{value:.2f}"))
        else:
            rows.append((key, str(value)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
