"""Reading an LLM labeller's answers into the cells of the released layout.

Parsing is lenient about form and strict about content. Lenient, because models wrap JSON in
code fences, think aloud before answering (``...</think>``), add keys nobody asked for and write
``"3"`` for ``"turn 3"``: none of that changes what the label says. Strict, because a label on
the wrong turns or outside its vocabulary would silently change reported numbers: correctness
and acts must cover exactly the student turns, acts and OCEAN levels must be known values, and
a question's option must be 1-4. An answer that fails is not guessed at: it becomes an
``{"error": ...}`` cell (see :class:`InvalidAnnotation`), which the reader counts as a failed label.

Every cell this module returns holds plain Python values only (str, bool, int, None, lists and
dicts), so pandas writes it as a literal that :func:`simhub.data.annotations.parse_literal` reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from simhub.data.annotations import LEVELS, OCEAN_KEYS, get_key
from simhub.schema import ACTS, DEFAULT_KC, Dialogue

__all__ = [
    "InvalidAnnotation",
    "extract_json",
    "parse_acts",
    "parse_answer",
    "parse_correctness",
    "parse_freeform",
    "parse_kcs",
    "parse_ocean",
    "parse_question",
    "strip_reasoning",
]

# Words models use for the middle level.
_NEUTRAL = {"neutral", "medium", "moderate", "average", "mid", "middle"}
_TURN_KEY = re.compile(r"^\s*(?:turn\s*)?(\d+)\s*$", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_THINK_END = "</think>"


class InvalidAnnotation(ValueError):
    """An answer that cannot be used; its message becomes the ``{"error": ...}`` cell."""


# --------------------------------------------------------------------------- form


def strip_reasoning(text: str) -> str:
    """The answer after a reasoning block (everything up to the last ``</think>``), stripped."""
    if _THINK_END in text:
        text = text.rsplit(_THINK_END, 1)[1]
    return text.strip()


def extract_json(text: str | None) -> dict[str, Any]:
    """The JSON object of an answer: reasoning dropped, code fences removed, and if need be the
    text from the first ``{`` to the last ``}`` (models sometimes add a sentence around it)."""
    if text is None:
        raise InvalidAnnotation("the answer has no text")
    body = strip_reasoning(text)
    fenced = _FENCE.search(body)
    candidates = [body, *([fenced.group(1).strip()] if fenced else [])]
    start, end = body.find("{"), body.rfind("}")
    if 0 <= start < end:
        candidates.append(body[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise InvalidAnnotation(f"expected a JSON object, got a JSON {type(value).__name__}")
    raise InvalidAnnotation("the answer is not JSON")


def _has(value: Mapping[str, Any], name: str) -> bool:
    return any(str(key).strip().lower() == name.lower() for key in value)


def _turns(value: Mapping[str, Any]) -> dict[int, Any]:
    """``{turn index: item}`` from keys ``"turn N"`` or ``"N"`` (N counts from 1); other keys are
    extra and ignored. Two keys naming one turn make the answer ambiguous."""
    out: dict[int, Any] = {}
    for key, item in value.items():
        match = _TURN_KEY.match(str(key))
        if not match:
            continue
        index = int(match.group(1)) - 1
        if index in out:
            raise InvalidAnnotation(f"turn {index + 1} is labelled twice")
        out[index] = item
    return out


def _numbers(indices: Any) -> str:
    return ", ".join(str(i + 1) for i in sorted(indices)) or "none"


def _exactly_student_turns(found: Mapping[int, Any], dialogue: Dialogue) -> None:
    wanted = set(dialogue.student_turn_indices())
    if set(found) != wanted:
        raise InvalidAnnotation(
            f"the turn keys ({_numbers(found)}) do not match the student turns ({_numbers(wanted)})"
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


# --------------------------------------------------------------------------- labels


def parse_question(text: str | None) -> dict[str, Any]:
    """``{"solution", "solvable", "correct_option": 1-4 | None, "option_1_explanation", ...}``.

    ``correct_option`` may come as ``2``, ``"2"``, ``"B"`` or ``"option 2"``; null makes the
    question unsolvable whatever ``solvable`` says (the reference's rule); anything else fails.
    """
    value = extract_json(text)
    correct = _option(get_key(value, "correct_option"))
    solvable = get_key(value, "solvable")
    if isinstance(solvable, str) and solvable.strip().lower() in ("true", "false"):
        solvable = solvable.strip().lower() == "true"
    if solvable is not None and not isinstance(solvable, bool):
        raise InvalidAnnotation(f"solvable must be true or false, got {solvable!r}")
    if correct is None:
        solvable = False
    elif solvable is None:
        solvable = True
    cell: dict[str, Any] = {
        "solution": _text(get_key(value, "solution")),
        "solvable": solvable,
        "correct_option": correct,
    }
    for number in range(1, 5):
        cell[f"option_{number}_explanation"] = _text(get_key(value, f"option_{number}_explanation"))
    return cell


def _option(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidAnnotation(f"correct_option must be 1-4 or null, got {value!r}")
    if isinstance(value, int | float) and value == int(value) and 1 <= value <= 4:
        return int(value)
    text = str(value).strip().upper()
    if text in ("", "NULL", "NONE", "N/A"):
        return None
    text = re.sub(r"^(OPTION|ANSWER)\s*", "", text).strip()
    if text in ("A", "B", "C", "D"):
        return "ABCD".index(text) + 1
    if text.isdigit() and 1 <= int(text) <= 4:
        return int(text)
    raise InvalidAnnotation(f"correct_option must be 1-4 or null, got {value!r}")


def parse_acts(text: str | None, dialogue: Dialogue) -> dict[str, Any]:
    """``{"turn N": {"reasoning", "act"}}`` for exactly the student turns, each act one of the five."""
    found = _turns(extract_json(text))
    _exactly_student_turns(found, dialogue)
    known = {_squash(act): act for act in ACTS}
    cell: dict[str, Any] = {}
    for index in sorted(found):
        item = found[index]
        reasoning = _text(get_key(item, "reasoning")) if isinstance(item, Mapping) else None
        act = get_key(item, "act") if isinstance(item, Mapping) else item
        name = known.get(_squash(str(act))) if act is not None else None
        if name is None:
            raise InvalidAnnotation(f"turn {index + 1}: {act!r} is not one of {', '.join(ACTS)}")
        cell[f"turn {index + 1}"] = {"reasoning": reasoning, "act": name}
    return cell


_VERDICTS: dict[str, bool | None] = {
    "true": True, "correct": True, "yes": True,
    "false": False, "incorrect": False, "no": False,
    "null": None, "none": None, "na": None, "n/a": None, "": None,
}


def parse_correctness(text: str | None, dialogue: Dialogue) -> dict[str, Any]:
    """``{"turn N": {"summary", "correct": True | False | None}}`` for exactly the student turns."""
    found = _turns(extract_json(text))
    _exactly_student_turns(found, dialogue)
    cell: dict[str, Any] = {}
    for index in sorted(found):
        item = found[index]
        if isinstance(item, Mapping):
            if not _has(item, "correct"):
                raise InvalidAnnotation(f"turn {index + 1}: no 'correct' entry")
            summary, verdict = _text(get_key(item, "summary")), get_key(item, "correct")
        else:
            summary, verdict = None, item
        if not (verdict is None or isinstance(verdict, bool)):
            key = str(verdict).strip().lower()
            if key not in _VERDICTS:
                raise InvalidAnnotation(f"turn {index + 1}: correct must be true, false or null, got {verdict!r}")
            verdict = _VERDICTS[key]
        cell[f"turn {index + 1}"] = {"summary": summary, "correct": verdict}
    return cell


def parse_kcs(text: str | None, dialogue: Dialogue) -> dict[str, Any]:
    """``{"turn N": {"summary", "kcs": [...]}}`` on tutor turns.

    Keys that are not tutor turns are ignored (only the tutor turns that pose a task are
    labelled, so there is no coverage rule). KC names are matched to the dialogue's level-3
    subjects plus ``Default`` ignoring case and spacing; names not in that list are dropped, and
    a turn whose names were all unknown gets ``Default`` (the catch-all the prompt asks for).
    """
    found = _turns(extract_json(text))
    tutor = {i for i, t in enumerate(dialogue.turns) if t.role == "tutor"}
    allowed = {_squash(kc): kc for kc in dialogue.all_kcs}
    cell: dict[str, Any] = {}
    for index in sorted(found):
        if index not in tutor:
            continue
        item = found[index]
        summary = _text(get_key(item, "summary")) if isinstance(item, Mapping) else None
        names = get_key(item, "kcs") if isinstance(item, Mapping) else item
        if names is None:
            names = []
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list):
            raise InvalidAnnotation(f"turn {index + 1}: kcs must be a list of KC names")
        kcs: list[str] = []
        for name in names:
            kc = allowed.get(_squash(str(name)))
            if kc is not None and kc not in kcs:
                kcs.append(kc)
        if names and not kcs:
            kcs = [DEFAULT_KC]
        cell[f"turn {index + 1}"] = {"summary": summary, "kcs": kcs}
    return cell


def parse_ocean(text: str | None) -> dict[str, Any]:
    """``{"reasoning", "Openness": "low|neutral|high", ...}`` with all five traits."""
    value = extract_json(text)
    cell: dict[str, Any] = {"reasoning": _text(get_key(value, "reasoning"))}
    for key in OCEAN_KEYS:
        level = get_key(value, key)
        if level is None:
            raise InvalidAnnotation(f"missing trait {key}")
        word = str(level).strip().lower()
        if word in _NEUTRAL:
            word = "neutral"
        if word not in LEVELS:
            raise InvalidAnnotation(f"{key}: {level!r} is not low, neutral or high")
        cell[key] = word
    return cell


def parse_freeform(text: str | None) -> str:
    """The profile as one paragraph: reasoning dropped, whitespace (line breaks too) collapsed."""
    if text is None:
        raise InvalidAnnotation("the answer has no text")
    paragraph = " ".join(strip_reasoning(text).split())
    if not paragraph:
        raise InvalidAnnotation("the answer is empty")
    return paragraph


def parse_answer(label: str, text: str | None, dialogue: Dialogue | None = None) -> Any:
    """The cell of ``label`` (a name of :data:`simhub.annotation.labels.ANNOTATION_LABELS`) from an
    answer's text; :class:`InvalidAnnotation` when it cannot be used. Turn labels need ``dialogue``."""
    if label == "questions":
        return parse_question(text)
    if label == "ocean":
        return parse_ocean(text)
    if label == "freeform":
        return parse_freeform(text)
    if dialogue is None:
        raise ValueError(f"the {label} label needs its dialogue")
    if label == "acts":
        return parse_acts(text, dialogue)
    if label == "correctness":
        return parse_correctness(text, dialogue)
    if label == "kcs":
        return parse_kcs(text, dialogue)
    raise ValueError(f"unknown annotation label {label!r}")
