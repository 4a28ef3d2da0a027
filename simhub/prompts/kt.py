"""The LLMKT knowledge-tracing prompt (docs/protocol.md §3, §8).

A shared context (instruction, OCEAN persona, question with its solution, the list of *all* the
dialogue's knowledge components, the numbered history) is followed by one short question per KC;
the model's next token after each question is read as True or False. The context lists all KCs
both in training and at evaluation (the reference does); only the questions differ: the KCs
labelled on the turn (training) or all of them (evaluation).
"""

from __future__ import annotations

from simhub.prompts.common import format_history, format_kc_list, format_question, persona_block
from simhub.schema import Dialogue, Turn

KT_SYSTEM = (
    "You follow what a student knows during a math tutoring dialogue. For a knowledge component, "
    "answer True if the student has it at this point of the dialogue (they would need it to answer the "
    "tutor's latest question correctly), otherwise False. Use everything said so far."
)


def kt_context_body(dialogue: Dialogue, history: list[Turn], persona: str = "ocean") -> str:
    """The context after the instruction (:data:`KT_SYSTEM`): persona, problem, KCs, history."""
    parts = []
    if block := persona_block(dialogue, persona):
        parts.append(block)
    parts.append(f"Problem:\n{format_question(dialogue)}")
    parts.append(f"Knowledge components of this problem:\n{format_kc_list(dialogue.all_kcs)}")
    parts.append(f"Dialogue so far:\n{format_history(history)}")
    return "\n\n".join(parts)


def kt_messages(dialogue: Dialogue, history: list[Turn], persona: str = "ocean") -> list[dict[str, str]]:
    """The instruction and the context as chat messages (system, then user): the reference's layout.
    simhub's model reads them as plain text (:func:`kt_context`); training measures a prompt's length
    on this layout, as the reference does."""
    return [{"role": "system", "content": KT_SYSTEM},
            {"role": "user", "content": kt_context_body(dialogue, history, persona)}]


def kt_context(dialogue: Dialogue, history: list[Turn], persona: str = "ocean") -> str:
    return f"{KT_SYSTEM}\n\n{kt_context_body(dialogue, history, persona)}\n\n"


def kt_question(kc: str) -> str:
    """One KC's question; the answer token follows it."""
    return f"Does the student have '{kc}'? Answer:"
