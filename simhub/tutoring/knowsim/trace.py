"""One conversation of a tutor bench, as one versioned file: everything needed to rescore it.

A :class:`Trace` holds the item's IU graph, the learner's initial state, and per turn the learner's
message (with its thought, attempt flag and articulation mode), the tutor's reply, the extractor's
per-IU signals (or why its answer was flagged) and the turn's record under the run's preset (state,
loads, τ, η, E/Z/A sets). It also names the models, the seeds, the stop and any failure, and, when an
IQ rater ran, the conversation's interaction-quality score (or why the rating was flagged), and,
when a termination judge ran (stateless learners), the turn it judged the conversation to end at. Traces are
written atomically; :func:`read_trace` reads versions 1 (no IQ fields: a trace without IQ), 2 (no
judged stop) and 3, and refuses another or newer ``schema_version`` with a message that names it.

The run folder's ``run.json`` is the kit's (:class:`simhub.tutoring.runner.RunInfo`).
"""

from __future__ import annotations

import os
import re
from typing import Any, TypeVar

import msgspec

from simhub.learners.graph import IUGraph
from simhub.learners.metrics import ConversationMetrics
from simhub.learners.state import KnowledgeState
from simhub.learners.update import IUSignal, TurnRecord
from simhub.runformat import read_document
from simhub.schema import atomic_write_bytes

TRACE_KIND = "simhub-tutor-bench-trace"
TRACE_VERSION = 3
#: The versions :func:`read_trace` reads (1 has no IQ fields, 2 no judged stop; they read as traces without).
TRACE_READS = (1, 2, 3)


class TraceTurn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    turn: int
    learner: str
    tutor: str
    signals: dict[str, IUSignal]
    record: TurnRecord
    learner_thought: str = ""
    attempt_verify: bool = False
    mode: str = ""
    density: float = 0.0
    #: Why the learner's or the extractor's answer was unusable (the turn is kept, flagged).
    learner_flag: str | None = None
    extractor_flag: str | None = None
    tutor_ended: bool = False
    #: The comparison extractor's signals of the same turn (its agreement with the main one is reported).
    shadow_signals: dict[str, IUSignal] | None = None


class Trace(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    schema_version: int = TRACE_VERSION
    kind: str = TRACE_KIND
    id: str
    tutor: str
    item: str
    level: str
    question: str
    graph: IUGraph
    preset: str
    preset_fields: dict[str, Any]
    initial: KnowledgeState
    turns: list[TraceTurn] = msgspec.field(default_factory=list)
    #: mastery | overload | max_turns | tutor_end | learner_end | failed
    stop_reason: str | None = None
    terminated: bool = False
    truncated: bool = False
    #: The first turn (1-based) at which the rules would have stopped the run, and why (a run that
    #: stops at its rule has it equal to its length).
    virtual_stop_turn: int | None = None
    virtual_stop_reason: str | None = None
    full_length: bool = False
    models: dict[str, Any] = msgspec.field(default_factory=dict)
    seed: int = 0
    failed: str | None = None
    metrics: ConversationMetrics | None = None
    #: Interaction quality (1..10) from the run's IQ rater (version 2); None when no rater ran or
    #: its answer was unusable, in which case ``iq_flag`` says why.
    iq: int | None = None
    iq_reason: str | None = None
    iq_flag: str | None = None
    #: The last turn a termination judge decided a real student would have stayed for (version 3; stateless
    #: learners with ``--termination-judge``): the metrics and IQ are those of the turns up to it. None when
    #: no judge ran or its answer was unusable, in which case ``judged_stop_flag`` says why.
    judged_stop_turn: int | None = None
    judged_stop_reason: str | None = None
    judged_stop_flag: str | None = None

    @property
    def judged(self) -> bool:
        """A termination judge looked at this conversation (its judgement is a turn or a flag)."""
        return self.judged_stop_turn is not None or self.judged_stop_flag is not None

    @property
    def scored_turns(self) -> list[TraceTurn]:
        """The turns the metrics are of: up to the judged stop when there is one, else every turn."""
        return self.turns[:self.judged_stop_turn] if self.judged_stop_turn is not None else self.turns

    @property
    def rated(self) -> bool:
        """An IQ rater looked at this conversation (its rating is a score or a flag)."""
        return self.iq is not None or self.iq_flag is not None

    @property
    def flagged_turns(self) -> int:
        return sum(1 for t in self.turns if t.extractor_flag or t.learner_flag)


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trace_name(tutor: str, item: str, level: str) -> str:
    from simhub.cache import fingerprint

    # Names are readable and, through the digest, unique even when two ids slug alike.
    return f"{_SAFE.sub('_', tutor)}__{_SAFE.sub('_', item)}__{level}-{fingerprint([tutor, item, level])[:8]}.json"


def write_trace(path: str | os.PathLike[str], trace: Trace) -> None:
    """Write ``trace`` atomically, always in the current layout (a version-1 trace read and rewritten,
    e.g. after rating its IQ, becomes version 2)."""
    if trace.schema_version != TRACE_VERSION:
        trace = msgspec.structs.replace(trace, schema_version=TRACE_VERSION)
    atomic_write_bytes(path, msgspec.json.encode(trace))


S = TypeVar("S", bound=msgspec.Struct)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    return read_document(path, Trace, TRACE_KIND, TRACE_READS, "trace ",
                         f"not a tutor-bench trace (kind {TRACE_KIND!r} expected)")
