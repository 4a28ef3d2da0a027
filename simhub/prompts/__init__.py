"""Every text a model sees, in training and at inference, in one place.

``simhub prompt show`` prints what a model receives for a given turn. The wording is simhub's own;
the structure follows the paper (docs/protocol.md §3-§5, §8).
"""

from simhub.prompts.baselines import BASELINE_STYLES, baseline_messages, dialogue_text
from simhub.prompts.chat import cut_end_marker, is_student_prompt, remove_end_marker, student_messages, tutor_messages
from simhub.prompts.classifiers import act_messages, correctness_messages
from simhub.prompts.common import (
    END_OF_DIALOGUE,
    MAX_PROMPT_CHARS,
    format_history,
    format_question,
    format_turn,
    persona_block,
)
from simhub.prompts.judge import judge_messages, realness_messages
from simhub.prompts.kt import KT_SYSTEM, kt_context, kt_context_body, kt_messages, kt_question
from simhub.prompts.tutor import (
    INSTRUCTED_TUTOR_SYSTEM,
    MIRROR_SYSTEM,
    instructed_tutor_messages,
    mirror_tutor_messages,
)

__all__ = [
    "BASELINE_STYLES",
    "END_OF_DIALOGUE",
    "INSTRUCTED_TUTOR_SYSTEM",
    "KT_SYSTEM",
    "MAX_PROMPT_CHARS",
    "MIRROR_SYSTEM",
    "act_messages",
    "baseline_messages",
    "correctness_messages",
    "cut_end_marker",
    "dialogue_text",
    "format_history",
    "format_question",
    "format_turn",
    "instructed_tutor_messages",
    "is_student_prompt",
    "judge_messages",
    "kt_context",
    "kt_context_body",
    "kt_messages",
    "kt_question",
    "mirror_tutor_messages",
    "persona_block",
    "realness_messages",
    "remove_end_marker",
    "student_messages",
    "tutor_messages",
]
