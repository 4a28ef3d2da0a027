"""Interaction quality (IQ): one LLM rating of a whole finished conversation, on a 1–10 scale.

IQ mirrors the survey item a human rater answers after a conversation (1–2 very poor, 3–4 poor,
5–6 average, 7–8 good, 9–10 excellent). It is the one tutor-bench metric that needs no knowledge
state, so a stateless learner's runs can have it too. :class:`IQRater` asks a chat model (a profile
entry; an OpenAI-compatible endpoint in JSON mode) once per conversation. An answer that is not a
JSON object, lacks an integer ``score`` or puts it outside 1..10 is a **flagged** rating: the trace
keeps the cause and no score, and the results count it next to the flagged turns. A rater that fails
(an endpoint down after its retries) flags the rating with its cause too (``rater: ...``; such a
rating is asked again when the run is resumed); the conversation itself is not failed, because its
KG, DC and CO stand without IQ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from simhub.cache import ContentCache, cached_answers, fingerprint
from simhub.learners.chat import ChatModel, ask_json, find_json_object
from simhub.tutoring.knowsim.trace import Trace

IQ_MIN, IQ_MAX = 1, 10
#: How the flag of a rating whose rater failed begins (a resumed run asks again for those).
RATER_FAILED = "rater: "


class IQRating(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A score in 1..10 with the rater's reason, or ``flagged`` (why the answer was unusable)."""

    score: int | None = None
    reason: str = ""
    flagged: str | None = None
    #: The rater failed (no answer); such ratings are not cached, so a later rescore asks again.
    error: bool = False


def parse_rating(text: str | dict[str, Any]) -> IQRating:
    """The rating in a rater's answer (its text, or the JSON object found in it); a flagged rating naming
    the problem when it is unusable."""
    data, flag = find_json_object(text) if isinstance(text, str) else (text, None)
    if data is None:
        return IQRating(flagged=flag)
    score = data.get("score")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if isinstance(score, bool) or not isinstance(score, int):
        return IQRating(flagged="no integer score")
    if not IQ_MIN <= score <= IQ_MAX:
        return IQRating(flagged=f"score {score} outside {IQ_MIN}..{IQ_MAX}")
    reason = data.get("reason")
    return IQRating(score=score, reason=reason[:1000] if isinstance(reason, str) else "")


class IQRater:
    """Rates conversations through ``chat`` with simhub's IQ prompt (``simhub.prompts.learners``)."""

    def __init__(self, chat: ChatModel, *, name: str = "iq", temperature: float = 0.0, max_tokens: int = 300):
        self.chat, self.id, self.temperature, self.max_tokens = chat, name, temperature, max_tokens

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.learners import IQ_PROMPT_VERSION

        return {"id": self.id, "kind": "llm", "model": self.chat.describe(), "prompt": IQ_PROMPT_VERSION,
                "temperature": self.temperature}

    def rate(self, conversations: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> list[IQRating]:
        """One rating per (question, [(learner, tutor), ...]); never raises for one of them."""
        from simhub.prompts.learners import iq_messages

        if not conversations:
            return []
        prompts = [iq_messages(q, turns) for q, turns in conversations]
        answers = ask_json(self.chat, prompts, temperature=self.temperature, max_tokens=self.max_tokens)
        return [IQRating(flagged=f"{RATER_FAILED}{a.error}", error=True) if a.error is not None
                else IQRating(flagged=a.flag) if a.value is None else parse_rating(a.value) for a in answers]


def conversation_of(trace: Trace) -> tuple[str, list[tuple[str, str]]]:
    """What the rater reads: the turns the metrics are of (up to a judged stop, when there is one)."""
    return trace.question, [(t.learner, t.tutor) for t in trace.scored_turns]


def rate_traces(rater: IQRater, traces: Sequence[Trace], cache: ContentCache | None = None) -> tuple[list[Trace], int, int]:
    """``traces`` with their IQ filled in by ``rater`` (failed conversations and ones without turns are
    left as they are), and how many ratings were asked and answered from ``cache``. A usable or
    flagged answer is cached under the rater and the conversation; a rater failure is not."""
    me = rater.describe()
    out = list(traces)
    todo = [i for i, t in enumerate(out) if t.failed is None and t.turns]
    ratings, hits, asked = cached_answers(
        cache, [fingerprint(["iq", me, *conversation_of(out[i])]) for i in todo],
        lambda missing: rater.rate([conversation_of(out[todo[j]]) for j in missing]),
        ok=lambda r: not r.error, encode=msgspec.to_builtins, decode=lambda d: msgspec.convert(d, IQRating))
    for i, rating in zip(todo, ratings, strict=True):
        t = out[i]
        out[i] = msgspec.structs.replace(t, iq=rating.score, iq_reason=rating.reason or None, iq_flag=rating.flagged,
                                         models={**t.models, "iq_rater": me})
    return out, asked, hits
