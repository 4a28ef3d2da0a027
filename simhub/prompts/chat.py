"""Chat prompts of the fine-tuned generators: the student simulator and its mirror image, the tutor.

Structure (docs/protocol.md §4): a short system prompt; a first user message holding the question (with the
annotated answer, solution and option explanations when known) and the other side's opening turn
(or a note that there was none); then the remaining turns as chat, the model's own role as
``assistant`` and the other role as ``user``. In training, the end-of-dialogue marker is appended
to the last turn so the model learns to stop. The fine-tuned students see no persona (docs/protocol.md §8);
``persona`` exists for experiments and the OCEAN/profile variants.
"""

from __future__ import annotations

from simhub.prompts.common import END_OF_DIALOGUE, format_question, persona_block
from simhub.schema import Dialogue, Turn

STUDENT_SYSTEM = "You are a student working through a math problem with a tutor in an online chat."
TUTOR_SYSTEM = "You are a tutor helping a student through a math problem in an online chat."
NO_TUTOR_OPENING = "(The student speaks first; the tutor has not said anything yet.)"
NO_STUDENT_OPENING = "(The tutor speaks first.)"


def _chat(dialogue: Dialogue, turns: list[Turn], me: str, system: str, persona: str, end_marker: bool) -> list[dict]:
    parts = []
    if me == "student" and (block := persona_block(dialogue, persona)):
        parts.append(block)
    parts.append(f"The problem:\n{format_question(dialogue)}")
    rest = list(turns)
    if rest and rest[0].role != me:
        opener = "The tutor opens with" if me == "student" else "The student opens with"
        parts.append(f"{opener}: {rest[0].content}")
        rest = rest[1:]
    else:
        parts.append(NO_TUTOR_OPENING if me == "student" else NO_STUDENT_OPENING)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]
    for i, turn in enumerate(rest):
        content = turn.content
        if end_marker and i == len(rest) - 1:
            content = f"{content}{END_OF_DIALOGUE}"
        messages.append({"role": "assistant" if turn.role == me else "user", "content": content})
    return messages


def student_messages(dialogue: Dialogue, upto: int | None = None, *, persona: str = "none",
                     end_marker: bool = False) -> list[dict]:
    """Messages of the student simulator.

    With ``upto`` the history is ``turns[:upto]`` (the prompt that predicts turn ``upto``; add a
    generation prompt when templating); without it the whole dialogue (training), where
    ``end_marker`` appends the end-of-dialogue marker to the last turn.
    """
    turns = dialogue.turns if upto is None else dialogue.turns[:upto]
    return _chat(dialogue, turns, "student", STUDENT_SYSTEM, persona, end_marker and upto is None)


def is_student_prompt(messages: list[dict]) -> bool:
    """Whether ``messages`` are a prompt :func:`student_messages` rendered (its system prompt, then the
    problem): a simhub service receiving one runs it as it is, so a simulator pointed at simhub's
    own ``/v1`` is the same student as the local model, not a second wrapping of the first."""
    return (len(messages) >= 2 and messages[0].get("role") == "system" and messages[0].get("content") == STUDENT_SYSTEM
            and messages[1].get("role") == "user" and "The problem:\n" in str(messages[1].get("content")))


def tutor_messages(dialogue: Dialogue, upto: int | None = None, *, end_marker: bool = False) -> list[dict]:
    """Messages of the tutor model: the mirror image of :func:`student_messages` (no persona)."""
    turns = dialogue.turns if upto is None else dialogue.turns[:upto]
    return _chat(dialogue, turns, "tutor", TUTOR_SYSTEM, "none", end_marker and upto is None)


def cut_end_marker(text: str) -> tuple[str, bool]:
    """Generated text up to the end-of-dialogue marker, and whether the marker was there."""
    cut = text.find(END_OF_DIALOGUE)
    return (text, False) if cut < 0 else (text[:cut], True)


def remove_end_marker(text: str) -> tuple[str, bool]:
    """Text with every end-of-dialogue marker deleted (the reference's candidate rule), and whether
    there was one."""
    return text.replace(END_OF_DIALOGUE, ""), END_OF_DIALOGUE in text
