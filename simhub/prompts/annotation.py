"""Prompts of the annotation step (docs/protocol.md §2, §8): what an LLM labeller is asked about each dialogue.

Why they look the way they do:

* **One user message per request.** The released layout keeps each label's prompt in a
  ``<label>_prompt`` column; with a single message that column is exactly what was sent.
* **The turns to label are spelled out.** The correctness label is only valid when it covers
  exactly the student turns, so the prompt lists their numbers instead of hoping the model counts.
  The numbering is :func:`~simhub.prompts.common.format_history`'s ``Turn N (Student): ...``,
  counting all merged turns from 1, as the released files key their labels.
* **JSON with fixed keys.** Every answer but the free-text profile is one JSON object whose
  shape the parser in :mod:`simhub.annotation` checks; each prompt says the word JSON, which the
  OpenAI JSON mode requires.
* **Definitions from the paper, wording our own.** Acts, correctness (saying "I don't know" is
  incorrect; conversational turns get null), KCs (chosen from the dialogue's level-3 subjects or
  ``Default``), OCEAN (reasoning first) and the one-paragraph profile follow docs/protocol.md §8.
"""

from __future__ import annotations

from collections.abc import Sequence

from simhub.prompts.common import format_history, format_kc_list, format_question
from simhub.schema import ACTS, DEFAULT_KC, Dialogue

__all__ = [
    "ACT_DEFINITIONS",
    "DIALOGUE_LABEL_PROMPTS",
    "annotation_messages",
    "annotation_prompt",
    "question_messages",
    "question_prompt",
]

#: What each dialogue act means, as the labeller is told.
ACT_DEFINITIONS: dict[str, str] = {
    "Math Answer": "the student attempts the math the tutor asked for (an answer, a step, a working, a guess)",
    "Seek Information": "the student asks the tutor something (a clarification, a hint, how or why)",
    "Not Understanding": "the student says they do not know, cannot do it, or are confused",
    "Acknowledge": "the student only acknowledges or agrees with the tutor (ok, yes, thanks) without doing any math",
    "Off-Topic": "anything unrelated to the task: greetings, goodbyes, chat about other things",
}

_QUESTION = """You are checking a multiple-choice math question before it is used in tutoring research. Work the question out yourself.

{question}

The options are numbered in order: Answer A is option 1, B is 2, C is 3, D is 4.

Answer with one JSON object with exactly these keys:
- "solution": a short worked solution;
- "solvable": true if the question can be answered from its text (and any image description) and exactly one option is right, otherwise false;
- "correct_option": the number (1-4) of the right option, or null when the question cannot be solved;
- "option_1_explanation", "option_2_explanation", "option_3_explanation", "option_4_explanation": for the right option, why it is right; for each other option, the mistake or misconception that would lead a student to choose it."""

_ACTS = """Below is a math tutoring dialogue between a tutor and a student about the problem shown. Label the dialogue act of every student turn, choosing one of these five acts:
{acts}

Problem:
{question}

Dialogue:
{history}

The student turns are turns {student_turns}. Answer with one JSON object that has one key per student turn, "turn N" for each of them and for no other turn. Each value is an object with "reasoning" (one sentence on what the student does) followed by "act" (one of the five act names, spelled as above)."""

_CORRECTNESS = """Below is a math tutoring dialogue between a tutor and a student about the problem shown. For every student turn, decide whether it answers the tutor's most recent task correctly:
- true: the turn responds correctly to what the tutor last asked;
- false: the turn responds incorrectly, or the student says they do not know or cannot do it;
- null: there is nothing to get right, because the tutor asked no question or only a conversational one, or the student's turn is purely conversational.

Problem:
{question}

Dialogue:
{history}

The student turns are turns {student_turns}. Answer with one JSON object that has one key per student turn, "turn N" for each of them and for no other turn. Each value is an object with "summary" (one sentence: what the tutor asked and how the student replied) followed by "correct" (true, false or null)."""

_KCS = """Below is a math tutoring dialogue between a tutor and a student about the problem shown. For every tutor turn, say in one sentence what the tutor is trying to get the student to learn or do, and name all the knowledge components (KCs) that describe the turn, chosen only from this list:
{kcs}

Use "{default}" when none of the other listed KCs fits the turn.

Problem:
{question}

Dialogue:
{history}

The tutor turns are turns {tutor_turns}. Answer with one JSON object with exactly one entry per tutor turn, keyed "turn N" (and none for a student turn). Each value is an object with "summary" (the one sentence) followed by "kcs" (a list of KC names copied exactly from the list)."""

_OCEAN = """Below is a math tutoring dialogue between a tutor and a student about the problem shown. Judging only from how the student writes and behaves, rate the student on each Big Five personality trait: Openness, Conscientiousness, Extraversion, Agreeableness and Neuroticism. Each rating is "low", "neutral" or "high"; use "neutral" when the dialogue says little about a trait.

Problem:
{question}

Dialogue:
{history}

Answer with one JSON object: first "reasoning" (a few sentences weighing the evidence for each trait), then the keys "Openness", "Conscientiousness", "Extraversion", "Agreeableness" and "Neuroticism", each "low", "neutral" or "high"."""

_FREEFORM = """Below is a math tutoring dialogue between a tutor and a student about the problem shown. Describe this student so that someone who has not seen the dialogue could play them convincingly.

Problem:
{question}

Dialogue:
{history}

Write one paragraph of plain text (no headings, no lists, no JSON) covering: what the student knows at the start and what they pick up during the dialogue; the kinds of errors they make; how they behave with the tutor; their personality; and how they write (length of messages, spelling, punctuation, tone)."""

#: The per-dialogue labels and their templates (the question label is per question, not per dialogue).
DIALOGUE_LABEL_PROMPTS: dict[str, str] = {
    "acts": _ACTS,
    "correctness": _CORRECTNESS,
    "kcs": _KCS,
    "ocean": _OCEAN,
    "freeform": _FREEFORM,
}


def _numbers(indices: Sequence[int]) -> str:
    return ", ".join(str(i + 1) for i in indices) or "(none)"


def question_prompt(question_text: str) -> str:
    """The prompt annotating one question (solution, solvable, correct option, per-option explanations)."""
    return _QUESTION.format(question=question_text.strip())


def question_messages(question_text: str) -> list[dict]:
    return [{"role": "user", "content": question_prompt(question_text)}]


def annotation_prompt(label: str, dialogue: Dialogue, *, with_answer: bool = False) -> str:
    """The prompt of a per-dialogue ``label`` (``acts``, ``correctness``, ``kcs``, ``ocean``, ``freeform``).

    ``with_answer`` shows the question's annotated answer when it is known; the annotation run passes
    it for every label, as the reference does (FIDELITY.md, annotation).
    """
    if label not in DIALOGUE_LABEL_PROMPTS:
        raise ValueError(f"unknown annotation label {label!r}")
    student = [i for i, t in enumerate(dialogue.turns) if t.role == "student"]
    tutor = [i for i, t in enumerate(dialogue.turns) if t.role == "tutor"]
    return DIALOGUE_LABEL_PROMPTS[label].format(
        acts="\n".join(f"- {act}: {ACT_DEFINITIONS[act]}" for act in ACTS),
        question=format_question(dialogue, with_answer=with_answer),
        history=format_history(dialogue.turns),
        student_turns=_numbers(student),
        tutor_turns=_numbers(tutor),
        kcs=format_kc_list(dialogue.all_kcs),
        default=DEFAULT_KC,
    )


def annotation_messages(label: str, dialogue: Dialogue, *, with_answer: bool = False) -> list[dict]:
    """Chat messages of :func:`annotation_prompt` (one user message)."""
    return [{"role": "user", "content": annotation_prompt(label, dialogue, with_answer=with_answer)}]
