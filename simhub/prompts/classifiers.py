"""Prompts of the act and correctness classifiers: the dialogue so far as numbered turns, then the
student turn to label. The label is the assistant's answer (training) or scored as a continuation."""

from __future__ import annotations

from simhub.prompts.common import format_history, format_question
from simhub.schema import ACTS, Dialogue, Turn

ACTS_SYSTEM = (
    "Label the student turn at the end of a math tutoring dialogue with its dialogue act, one of: "
    + ", ".join(ACTS)
    + ". Reply with the act's name only."
)
CORRECTNESS_SYSTEM = (
    "Decide whether the student turn at the end of a math tutoring dialogue answers the tutor's last "
    "task correctly. Reply with one word: correct, incorrect (a wrong answer, or saying they do not "
    "know), or na (no mathematical task to answer, or a purely conversational reply)."
)


def _user(dialogue: Dialogue, history: list[Turn], student_turn: str, with_answer: bool) -> str:
    return (f"Problem:\n{format_question(dialogue, with_answer=with_answer)}\n\n"
            f"Dialogue so far:\n{format_history(history)}\n\nStudent turn: {student_turn}")


def act_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    return [{"role": "system", "content": ACTS_SYSTEM},
            {"role": "user", "content": _user(dialogue, history, student_turn, with_answer=False)}]


def correctness_messages(history: list[Turn], student_turn: str, dialogue: Dialogue) -> list[dict]:
    return [{"role": "system", "content": CORRECTNESS_SYSTEM},
            {"role": "user", "content": _user(dialogue, history, student_turn, with_answer=True)}]
