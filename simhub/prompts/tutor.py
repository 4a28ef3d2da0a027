"""Prompts of the instructed tutors: a general chat model (an OpenAI-compatible endpoint) told to tutor.

Unlike the fine-tuned tutor (:func:`simhub.prompts.tutor_messages`, the student's chat format seen
from the other side), an instructed tutor gets two messages: a system prompt saying what to do and a
user message holding the problem and the numbered history as plain text.

* :func:`instructed_tutor_messages` (``free`` rollouts): tutor the student in front of you, and end
  your message with the end-of-dialogue marker once the student has understood;
* :func:`mirror_tutor_messages` (``mirror`` rollouts): the real transcript is shown as well, and the
  model replays the real tutor's next move, adapting only where the simulated student said
  something other than the real student did.

Both take dialogues (the one so far and, for the mirror, the real one), never a caller's request type.
"""

from __future__ import annotations

from simhub.prompts.common import END_OF_DIALOGUE, format_history, format_question
from simhub.schema import Dialogue

INSTRUCTED_TUTOR_SYSTEM = (
    "You are a math tutor in an online chat with a student working on a multiple-choice problem. Guide the "
    f"student towards understanding without simply giving the answer. When the student has understood and the "
    f"dialogue should end, end your message with {END_OF_DIALOGUE}."
)
MIRROR_SYSTEM = (
    "You play the tutor of a real tutoring dialogue whose transcript you are given. The student in front of you "
    "is a simulation of the real student. Reply with what the real tutor said at this point, word for word, as "
    "long as the student has said what the real student said; when the student says something different, reply "
    "as that tutor would to what this student actually said, in the same style. End your message with "
    f"{END_OF_DIALOGUE} when the real dialogue ends here."
)


def instructed_tutor_messages(dialogue: Dialogue) -> list[dict[str, str]]:
    """The next tutor turn of ``dialogue`` (its turns so far: empty, or ending with the student's)."""
    user = (f"Problem:\n{format_question(dialogue)}\n\nThe dialogue so far:\n{format_history(dialogue.turns)}\n\n"
            "Your next turn as the tutor:")
    return [{"role": "system", "content": INSTRUCTED_TUTOR_SYSTEM}, {"role": "user", "content": user}]


def mirror_tutor_messages(dialogue: Dialogue, real: Dialogue) -> list[dict[str, str]]:
    """The next tutor turn of ``dialogue`` (the rollout so far, with the simulated student), replaying
    ``real``: the problem as ``real`` states it, its whole transcript, then the rollout so far."""
    user = (f"Problem:\n{format_question(real)}\n\nThe real dialogue:\n{format_history(real.turns)}\n\n"
            f"The dialogue so far, with the simulated student:\n{format_history(dialogue.turns)}\n\n"
            "The tutor's next turn:")
    return [{"role": "system", "content": MIRROR_SYSTEM}, {"role": "user", "content": user}]
