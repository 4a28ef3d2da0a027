"""Pieces every prompt shares: the question block, the numbered history, persona and profile blocks.

The wording is simhub's own; the structure follows the paper (docs/protocol.md §3-§5, §8).
"""

from __future__ import annotations

from simhub.schema import OCEAN_TRAITS, OPTIONS, Dialogue, Turn

#: Appended to the last turn of a training dialogue so that a simulator learns when to stop.
END_OF_DIALOGUE = "[end of dialogue]"
#: Prompts of this many characters or more are left out of training (docs/protocol.md §2 rule 8); measured on
#: the chat-templated prompt string.
MAX_PROMPT_CHARS = 6000


def format_question(dialogue: Dialogue, *, with_answer: bool = True) -> str:
    """The question text, followed (when known and ``with_answer``) by the annotated correct option,
    solution and one explanation per option."""
    q = dialogue.question
    parts = [q.text]
    if with_answer and q.correct_option and q.solvable is not False:
        parts.append(f"Correct option: {q.correct_option}")
        if q.solution:
            parts.append(f"Worked solution: {q.solution}")
        if q.option_explanations:
            parts.extend(f"Why a student might pick {o}: {q.option_explanations[o]}"
                         for o in OPTIONS if o in q.option_explanations)
    return "\n".join(parts)


def format_kc_list(kcs: list[str]) -> str:
    return "\n".join(f"- {kc}" for kc in kcs)


def format_turn(index: int, turn: Turn) -> str:
    """``Turn N (Student): text``, numbering all turns from 1 as the annotations do."""
    return f"Turn {index + 1} ({turn.role.capitalize()}): {turn.content}"


def format_history(turns: list[Turn], empty: str = "(nothing has been said yet)") -> str:
    return "\n".join(format_turn(i, t) for i, t in enumerate(turns)) if turns else empty


def format_persona(dialogue: Dialogue) -> str | None:
    """The OCEAN persona as one line per trait, or None when the dialogue has none."""
    if dialogue.persona is None:
        return None
    return "\n".join(f"{t.capitalize()}: {getattr(dialogue.persona, t)}" for t in OCEAN_TRAITS)


def persona_block(dialogue: Dialogue, persona: str) -> str | None:
    """What a prompt says about the student: nothing (``none``), the OCEAN traits (``ocean``) or the
    free-text profile (``profile``). None when the dialogue lacks it (a failed annotation)."""
    if persona == "ocean":
        text = format_persona(dialogue)
        return f"The student's personality (Big Five):\n{text}" if text else None
    if persona == "profile":
        return f"About this student:\n{dialogue.profile}" if dialogue.profile else None
    return None
