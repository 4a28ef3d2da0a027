"""Where a stateless learner's conversation ended, decided after the fact by an LLM judge.

KnowSim's knowledge-state learner stops by its preset's rules (mastery, persistent overload). Its
stateless baselines (``zs``, ``zs-cot``, ``zs-cot-prof``) have no state of their own to stop them:
they end a conversation by saying their end phrase, and the paper sets their end turn post hoc with
an LLM termination judge (the SimulatorArena protocol). :class:`TerminationJudge` is that judge. With one
set, a bench runs its conversations to the turn cap or the learner's end phrase (the state rules stop
nothing, as ``--full-length``; their virtual early stop is still recorded), then asks the judge once
per finished conversation which turn was the last a real student would have stayed for. The trace
keeps every turn and records ``judged_stop_turn``; its metrics (KG, DC, CO, the failure modes) are
those of the turns up to it, and IQ rates that prefix.

An answer that is not a JSON object, lacks an integer ``end_turn`` or names a turn outside
1..(turns) is a **flagged** judgement: the trace keeps the cause, its metrics stay those of the
whole conversation, and the results count it. A judge that fails (an endpoint down after its
retries) flags the judgement with ``judge: ...``; a resumed run asks again for those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from simhub.cache import ContentCache, cached_answers, fingerprint
from simhub.learners.chat import ChatModel, ask_json, find_json_object
from simhub.tutoring.knowsim.trace import Trace

#: How the flag of a judgement whose judge failed begins (a resumed run asks again for those).
JUDGE_FAILED = "judge: "


class JudgedStop(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The last turn (1-based) a real student would have stayed for, with the judge's reason; or
    ``flagged`` (why the answer was unusable)."""

    turn: int | None = None
    reason: str = ""
    flagged: str | None = None
    #: The judge failed (no answer); such judgements are not cached, so a later run asks again.
    error: bool = False


def parse_stop(text: str | dict[str, Any], turns: int) -> JudgedStop:
    """The judgement in a judge's answer about a conversation of ``turns`` turns; flagged when unusable.

    >>> parse_stop('{"end_turn": 2, "reason": "solved"}', 4)
    JudgedStop(turn=2, reason='solved', flagged=None, error=False)
    >>> parse_stop('{"end_turn": 5}', 4).flagged
    'end_turn 5 outside 1..4'
    """
    data, flag = find_json_object(text) if isinstance(text, str) else (text, None)
    if data is None:
        return JudgedStop(flagged=flag)
    turn = data.get("end_turn")
    if isinstance(turn, float) and turn.is_integer():
        turn = int(turn)
    if isinstance(turn, bool) or not isinstance(turn, int):
        return JudgedStop(flagged="no integer end_turn")
    if not 1 <= turn <= turns:
        return JudgedStop(flagged=f"end_turn {turn} outside 1..{turns}")
    reason = data.get("reason")
    return JudgedStop(turn=turn, reason=reason[:1000] if isinstance(reason, str) else "")


class TerminationJudge:
    """Judges conversations' end turns through ``chat`` with simhub's prompt (``simhub.prompts.learners``)."""

    def __init__(self, chat: ChatModel, *, name: str = "termination-judge", temperature: float = 0.0, max_tokens: int = 200):
        self.chat, self.id, self.temperature, self.max_tokens = chat, name, temperature, max_tokens

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.learners import STOP_PROMPT_VERSION

        return {"id": self.id, "kind": "llm", "model": self.chat.describe(), "prompt": STOP_PROMPT_VERSION,
                "temperature": self.temperature}

    def judge(self, conversations: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> list[JudgedStop]:
        """One judgement per (question, [(learner, tutor), ...]); never raises for one of them."""
        from simhub.prompts.learners import stop_messages

        if not conversations:
            return []
        prompts = [stop_messages(q, turns) for q, turns in conversations]
        answers = ask_json(self.chat, prompts, temperature=self.temperature, max_tokens=self.max_tokens)
        return [JudgedStop(flagged=f"{JUDGE_FAILED}{a.error}", error=True) if a.error is not None
                else JudgedStop(flagged=a.flag) if a.value is None else parse_stop(a.value, len(turns))
                for a, (_, turns) in zip(answers, conversations, strict=True)]


def whole_conversation(trace: Trace) -> tuple[str, list[tuple[str, str]]]:
    """Every recorded turn of ``trace`` (the judge reads them all, whatever it decided before)."""
    return trace.question, [(t.learner, t.tutor) for t in trace.turns]


def apply_stop(trace: Trace, stop: JudgedStop, judge: dict[str, Any]) -> Trace:
    """``trace`` with the judgement recorded and its metrics those of the turns up to the judged end."""
    from simhub.learners.graph import validate_graph
    from simhub.learners.metrics import conversation_metrics

    metrics = trace.metrics
    if stop.turn is not None:
        graph = validate_graph(trace.graph, name=trace.item)
        metrics = conversation_metrics(graph, trace.initial, [t.record for t in trace.turns[:stop.turn]])
    elif trace.judged_stop_turn is not None:  # a judgement replaced by a flagged one: back to every turn
        graph = validate_graph(trace.graph, name=trace.item)
        metrics = conversation_metrics(graph, trace.initial, [t.record for t in trace.turns])
    return msgspec.structs.replace(trace, judged_stop_turn=stop.turn, judged_stop_reason=stop.reason or None,
                                   judged_stop_flag=stop.flagged, metrics=metrics,
                                   models={**trace.models, "termination_judge": judge})


def judge_traces(judge: TerminationJudge, traces: Sequence[Trace], cache: ContentCache | None = None
                 ) -> tuple[list[Trace], int, int]:
    """``traces`` with their end turn judged (failed conversations and ones without turns are left as
    they are), and how many judgements were asked and answered from ``cache``. A usable or flagged
    answer is cached under the judge and the conversation; a judge failure is not."""
    me = judge.describe()
    out = list(traces)
    todo = [i for i, t in enumerate(out) if t.failed is None and t.turns]
    stops, hits, asked = cached_answers(
        cache, [fingerprint(["stop", me, *whole_conversation(out[i])]) for i in todo],
        lambda missing: judge.judge([whole_conversation(out[todo[j]]) for j in missing]),
        ok=lambda s: not s.error, encode=msgspec.to_builtins, decode=lambda d: msgspec.convert(d, JudgedStop))
    for i, stop in zip(todo, stops, strict=True):
        out[i] = apply_stop(out[i], stop, me)
    return out, asked, hits
