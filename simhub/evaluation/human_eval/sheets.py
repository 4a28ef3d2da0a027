"""What raters are given: the Markdown rating sheet of each rater and the blank ratings CSV they fill in."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from simhub.evaluation.human_eval.layout import COLUMNS
from simhub.prompts.annotation import ACT_DEFINITIONS
from simhub.schema import ACTS

__all__ = ["json_line", "rating_sheet", "ratings_template"]


def json_line(record: Mapping[str, Any]) -> bytes:
    """One line of ``items.jsonl``."""
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


def ratings_template(rater: str, groups: Sequence[Mapping[str, Any]]) -> str:
    """The rater's blank ratings CSV: the header, then one row per item (real turn first) of each group."""
    rows = [list(COLUMNS)]
    for g in groups:
        for item in [g["real"]["item"], *(c["item"] for c in g["candidates"])]:
            rows.append([item, rater, "", "", "", ""])
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in (text or "(empty)").splitlines() or ["(empty)"])


def rating_sheet(rater: str, groups: Sequence[Mapping[str, Any]]) -> str:
    """The rater's Markdown sheet: the instructions, then each group (problem, dialogue so far, turns)."""
    acts = "\n".join(f"- **{act}**: {ACT_DEFINITIONS[act]}." for act in ACTS)
    lines = [
        f"# Rating sheet for {rater}",
        "",
        "Each section below is one moment of a real maths tutoring dialogue: the problem, the",
        "conversation so far, the student's real next turn and, when there are any, other candidate",
        "student turns written by computer models, in random order. Fill in one row of",
        f"`ratings/{rater}.csv` per turn (the `item` column names it).",
        "",
        "For every turn, real or candidate:",
        "",
        "- `act`: what the student does in this turn, one of:",
        "",
        acts,
        "",
        "- `correctness`: `correct` when the turn answers the maths the tutor just asked for correctly;",
        "  `incorrect` when it answers it wrongly or the student says they do not know; `na` for",
        "  anything else (the tutor asked no maths question, or the turn is purely conversational).",
        "",
        "For candidate turns only:",
        "",
        "- `same_error`: when you rated the candidate `incorrect` and the real turn `incorrect` too,",
        "  `yes` if the candidate makes the same mistake as the real turn (the same wrong answer, or an",
        "  equivalent one), else `no`. Leave it blank otherwise.",
        "- `linguistic`: leaving correctness aside, how close is the candidate's wording and structure",
        "  to the real turn's? 1 = nothing alike (other words, other kind of reply); 2 = slightly (a",
        "  shared number or word, expressed differently); 3 = moderately (the same kind of reply, worded",
        "  or built differently); 4 = highly (nearly the same wording and structure); 5 = practically",
        "  identical.",
        "",
        "Rate the real turn first, then each candidate; the candidates' order says nothing about where",
        "they come from.",
        "",
    ]
    for g in groups:
        answer = f" (correct answer: {g['correct_option']})" if g.get("correct_option") else ""
        lines += [f"## {g['group']}", "", f"**Problem**{answer}", "", _quote(g["question"]), ""]
        if g.get("solution"):
            lines += ["**Solution**", "", _quote(g["solution"]), ""]
        lines += ["**Dialogue so far**", ""]
        lines += [f"- *{t['role']}*: {' '.join((t['content'] or '').split()) or '(empty)'}" for t in g["context"]]
        if not g["context"]:
            lines.append("- (the student speaks first)")
        lines += ["", f"**Real student turn** `{g['real']['item']}`", "", _quote(g["real"]["text"]), ""]
        for c in g["candidates"]:
            lines += [f"**Candidate** `{c['item']}`", "", _quote(c["text"]), ""]
    return "\n".join(lines)

