"""Prompts of the act and correctness classifiers: the question with its answer key, then the
dialogue as numbered turns whose last one is the student turn to label (the real turn, or a
candidate in its place), as the reference lays them out (FIDELITY.md). The label is the
assistant's answer (training) or scored as a continuation."""

from __future__ import annotations

from simhub.prompts.common import format_history, format_question
from simhub.schema import ACTS, Dialogue, Turn

ACTS_SYSTEM = (
    "Label the last turn of a math tutoring dialogue, a student turn, with its dialogue act, one of: "
    + ", ".join(ACTS)
    + ". Reply with the act's name only."
)
CORRECTNESS_SYSTEM = (
    "Decide whether the last turn of a math tutoring dialogue, a student turn, answers the tutor's last "
    "task correctly. Reply with one word: correct, incorrect (a wrong answer, or saying they do not "
    "know), or na (no mathematical task to answer, or a purely conversational reply)."
)


def _user(dialogue: Dialogue, history: list[Turn], student_turn: str) -> str:
    turns = [*history, Turn(role="student", content=student_turn)]
    return f"Problem:\n{format_question(dialogue)}\n\nDialogue:\n{format_history(turns)}"


def act_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    return [{"role": "system", "content": ACTS_SYSTEM},
            {"role": "user", "content": _user(dialogue, history, student_turn)}]


def correctness_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    return [{"role": "system", "content": CORRECTNESS_SYSTEM},
            {"role": "user", "content": _user(dialogue, history, student_turn)}]
