"""Dataset statistics of a canonical JSONL file (the table of the paper's data section)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from simhub.schema import ACTS, CORRECTNESS_LABELS, Dialogue


def dataset_stats(dialogues: Sequence[Dialogue]) -> dict:
    """Counts and shares that describe a set of dialogues."""
    turns = [t for d in dialogues for t in d.turns]
    student = [t for t in turns if t.role == "student"]
    tutor = [t for t in turns if t.role == "tutor"]
    acts = Counter(t.act for t in student if t.act is not None)
    correctness = Counter(t.correctness for t in student if t.correctness is not None)

    def mean_words(ts) -> float:
        return sum(len(t.content.split()) for t in ts) / len(ts) if ts else 0.0

    n = len(dialogues)
    return {
        "dialogues": n,
        "turns": len(turns),
        "student_turns": len(student),
        "tutor_turns": len(tutor),
        "tutor_first_share": sum(1 for d in dialogues if d.turns and d.turns[0].role == "tutor") / n if n else 0.0,
        "mean_words_student_turn": mean_words(student),
        "mean_words_tutor_turn": mean_words(tutor),
        "mean_turns_per_dialogue": len(turns) / n if n else 0.0,
        "mean_kcs_per_dialogue": sum(len(d.kcs) for d in dialogues) / n if n else 0.0,
        "dialogues_without_kcs": sum(1 for d in dialogues if not d.kcs),
        "acts": {a: acts.get(a, 0) for a in ACTS},
        "correctness": {c: correctness.get(c, 0) for c in CORRECTNESS_LABELS},
        "unlabelled_student_turns": sum(1 for t in student if t.act is None),
    }


def format_stats(stats: dict) -> str:
    """Render :func:`dataset_stats` as an aligned two-column table."""
    rows: list[tuple[str, str]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            total = sum(value.values()) or 1
            for label, count in value.items():
                rows.append((f"{key}: {label}", f"{count} ({count / total:.1%})"))
        elif isinstance(value, float):
            rows.append((key, f"{value:.1%}" if key.endswith("share") else f"{value:.2f}"))
        else:
            rows.append((key, str(value)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
