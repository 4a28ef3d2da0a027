"""The KT-learner bench's day judge: one JSON rating of a tutor's session day.

The axes follow EduClaw-Bench (helpfulness; curriculum design against Gagné's nine events and
Rosenshine's principles of instruction; whether the tutor handed over an answer); the rubric wording
is simhub's own, much shorter than the paper's 29-item rubric.
"""

from __future__ import annotations

from collections.abc import Sequence

PROMPT_VERSION = "kt-judge-v1"

_RUBRIC = (
    "Rate the tutor's session on four axes and reply with one JSON object and nothing else:\n"
    '{"helpfulness": <1-10>, "gagne": <1-5>, "rosenshine": <1-5>, "handover": <true|false>, "reason": "<one sentence>"}\n'
    "- helpfulness (1-10): how much the session helped this student learn the unit: 1 = nothing useful or harmful, "
    "5 = partly helpful, 10 = clear, targeted, well-paced help that builds understanding.\n"
    "- gagne (1-5): how many of Gagné's events of instruction the session covers (gaining attention, stating the "
    "goal, recalling prior knowledge, presenting material, guiding, eliciting practice, feedback, assessing, "
    "transfer): 1 = none, 3 = some, 5 = nearly all in a sensible order.\n"
    "- rosenshine (1-5): how closely it follows Rosenshine's principles (review, small steps, questions, models, "
    "guided then independent practice, checking understanding, high success rate): 1 = not at all, 5 = closely.\n"
    "- handover: true if the tutor gave the student the answer to an item or a decisive step instead of helping the "
    "student get there.\n"
)


def day_judge_messages(*, day: int, unit: Sequence[str], events: Sequence[str]) -> list[dict[str, str]]:
    """The judge's prompt for one session day (``events``: the day's log as lines, in order)."""
    log = "\n".join(events) if events else "(the tutor did nothing)"
    return [{"role": "system", "content": "You are an experienced teacher reviewing an online tutoring session."},
            {"role": "user", "content": f"{_RUBRIC}\nThe unit's topics: {', '.join(unit)}.\n"
                                        f"Day {day} of the session, in order:\n{log}"}]
