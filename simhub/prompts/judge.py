"""The correctness/errors judge prompt (docs/protocol.md §3): one call gives both metrics.

The judge sees the question, the numbered history, the real next student turn with its
correctness label, and the candidate. It is given the paper's definitions (correct: responds
correctly to the tutor's last turn; incorrect: responds incorrectly *or says it does not know*;
na: anything else; same error: the two incorrect turns are mathematically equivalent) and asked
for a short final verdict only, which the reference's table then scores.
"""

from __future__ import annotations

from simhub.prompts.common import format_history, format_question
from simhub.schema import Dialogue, Turn

JUDGE_SYSTEM = """You grade simulated students in math tutoring dialogues. You will read a dialogue, the turn the real student gave next with its correctness, and a candidate turn written by a simulator for the same moment. Grade the candidate.

Correctness has three values:
- correct: the turn responds correctly to what the tutor asked in the previous turn;
- incorrect: the turn responds to it incorrectly, or the student says they do not know;
- na: anything else, e.g. the tutor asked no question or only a conversational one, or the turn is purely conversational (it does not take up a mathematical task from the tutor).

When the real turn and the candidate are both incorrect, also decide whether they make the same error: they do only if the two answers are mathematically equivalent; otherwise the error is different.

Think it through, then answer with the candidate's correctness only: correct, incorrect or na. If both turns are incorrect, write "incorrect, same error" or "incorrect, different error". Write nothing else."""


def judge_messages(dialogue: Dialogue, history: list[Turn], real_text: str, real_label: str, candidate: str) -> list[dict]:
    user = (f"Problem:\n{format_question(dialogue)}\n\nDialogue so far:\n{format_history(history)}\n\n"
            f"The real student's next turn:\n{real_text}\nIts correctness: {real_label}\n\n"
            f"The candidate's next turn:\n{candidate}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


REALNESS_SYSTEM = """You will read two tutoring dialogues about the same math problem. In one of them the student is a real student; in the other the student is a simulation (the tutor's side may be real or simulated in either). Decide which student is the real one from how they write, answer, err and react.

Answer with one word: A, B, or tie if you cannot tell."""


def realness_messages(problem: str, first: list[Turn], second: list[Turn]) -> list[dict]:
    """Pairwise indistinguishability: which of two dialogues has the real student?"""
    user = (f"Problem:\n{problem}\n\nDialogue A:\n{format_history(first)}\n\nDialogue B:\n{format_history(second)}\n\n"
            "Which student is real: A, B or tie?")
    return [{"role": "system", "content": REALNESS_SYSTEM}, {"role": "user", "content": user}]
