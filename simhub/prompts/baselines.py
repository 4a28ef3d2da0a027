"""The paper's five prompted baselines (docs/protocol.md §5, §8), in simhub's own words.

Each reads the dialogue as a numbered plain-text history and writes the next student turn:

* ``zero-shot``: role-play instructions only;
* ``ocean``: plus the dialogue's OCEAN persona;
* ``icl``: plus one example dialogue (the training dialogue whose free-text profile is nearest);
* ``reasoning``: a reasoning model told how it will be judged (the metrics and the act and
  correctness definitions);
* ``oracle``: plus the free-text profile of this very dialogue, an upper bound that leaks the answer.
"""

from __future__ import annotations

from simhub.prompts.common import END_OF_DIALOGUE, format_history, format_question, persona_block
from simhub.schema import Dialogue

BASELINE_STYLES: tuple[str, ...] = ("zero-shot", "ocean", "icl", "reasoning", "oracle")

_ROLE_PLAY = (
    "Play a student talking with a tutor in training about the math problem below. Be as much like a "
    "real student as you can, and keep your messages short, as students do. You may or may not know "
    "how to solve the problem; let the tutor guide you. You will be tested on the problem afterwards, "
    "so it pays to work with the tutor. When you feel you have understood and need no more help, end "
    f"your message with {END_OF_DIALOGUE}."
)

_REASONING = """Your reply will be compared with what the real student said next (you cannot see it), on these criteria:
- dialogue act: the same kind of move as the real student's (Math Answer: attempts the tutor's math question; Seek Information: asks a clarifying or conceptual question; Not Understanding: says they do not know or do not understand; Acknowledge: only acknowledges the tutor; Off-Topic: unrelated talk, greetings, goodbyes);
- correctness: the same correctness (correct: answers the tutor's task correctly; incorrect: answers it wrongly or says they do not know; na: no task with a clear answer, or no answer given);
- errors: when wrong, the same underlying mistake;
- knowledge: the same grasp of the concepts involved;
- language: the same style and length.
Work out what this student would most likely say, then reply with that message only."""

SYSTEM_PROMPTS: dict[str, str] = {
    "zero-shot": _ROLE_PLAY,
    "ocean": _ROLE_PLAY + "\n\nYou are given the student's Big Five personality; act accordingly.",
    "icl": _ROLE_PLAY + "\n\nYou are also shown an earlier dialogue of a student like you; reply in the same manner.",
    "reasoning": _ROLE_PLAY + "\n\n" + _REASONING,
    "oracle": _ROLE_PLAY + "\n\nYou are given a description of the student you play; follow it closely.",
}

#: Which persona block each style puts in the prompt.
STYLE_PERSONA = {"zero-shot": "none", "ocean": "ocean", "icl": "none", "reasoning": "none", "oracle": "profile"}


def dialogue_text(dialogue: Dialogue, upto: int | None = None) -> str:
    """The problem and the numbered history up to (not including) turn ``upto``."""
    turns = dialogue.turns if upto is None else dialogue.turns[:upto]
    return f"Problem:\n{format_question(dialogue)}\n\nConversation so far:\n{format_history(turns)}"


def baseline_messages(style: str, dialogue: Dialogue, upto: int, example: Dialogue | None = None) -> list[dict]:
    """Chat messages of baseline ``style`` predicting turn ``upto`` of ``dialogue``.

    ``example`` (ICL only) is the retrieved training dialogue, shown whole before the task.
    """
    if style not in SYSTEM_PROMPTS:
        raise ValueError(f"unknown baseline style {style!r}")
    parts = []
    if block := persona_block(dialogue, STYLE_PERSONA[style]):
        parts.append(block)
    if style == "icl" and example is not None:
        parts.append(f"=== Example dialogue ===\n{dialogue_text(example)}\n=== End of example ===")
    parts.append(dialogue_text(dialogue, upto))
    return [{"role": "system", "content": SYSTEM_PROMPTS[style]}, {"role": "user", "content": "\n\n".join(parts)}]
