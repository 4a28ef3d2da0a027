"""``simhub tutor-bench``: tutors in front of a knowledge-state learner, scored by what it learned.

Per (tutor, item, level) one conversation, in the shape of a Gymnasium episode:

1. the learner starts in the level's initial state and writes the opening query (turn 1);
2. the tutor replies; the extractor labels every IU of the turn; :func:`simhub.learners.update`
   gives the next state and the turn's record;
3. the termination rules of the preset decide (mastery or overload terminate, the 15-turn cap
   truncates; a tutor's end-of-dialogue marker ends it too); otherwise the learner speaks again.

Conversations advance in lockstep in chunks of ``batch`` (the kit's one runner,
:mod:`simhub.tutoring.runner`, drives them), so every step is one batched call per model and an
endpoint gets a chunk's requests concurrently. Every model call's answer is cached
under a hash of the model and everything its answer depends on (state, conversation, seed), and each
conversation's trace is written the moment it ends: a killed run resumes, skipping finished traces,
and repeats no call. A finished conversation's whole trace is cached too, under its settings, tutor,
item and level and a digest of the source of the rules that compute it (:data:`RULE_MODULES`): an
identical run into another folder copies each trace with no call and no replay, and a change to the
rules' code replays the turns from the per-call answers instead. A tutor, learner or extractor that
fails marks its conversation failed with the cause; the run completes and counts it.

With a termination judge (stateless learners, see :mod:`simhub.tutoring.knowsim.termination`) the
state rules stop nothing; every finished conversation of a chunk then gets its judged end turn, and
with an IQ rater its rating, each in one batched call before its trace is written, so the trace
holds them.
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from simhub.cache import ContentCache, cached_answers, fingerprint
from simhub.errors import DataError, SimhubError
from simhub.learners.extract import Extraction, Extractor, ExtractRequest
from simhub.learners.graph import IUGraph, ValidatedGraph, read_graphs, shipped_graphs, validate_graph
from simhub.learners.metrics import conversation_metrics
from simhub.learners.presets import Preset
from simhub.learners.roleplay import Learner, LearnerRequest, LearnerTurn, state_view
from simhub.learners.state import LEVELS, KnowledgeState, initial_state
from simhub.learners.termination import early_stop, stop_decision
from simhub.learners.update import IUSignal, TurnRecord, update
from simhub.models import Sampling
from simhub.schema import Dialogue, Question, Turn
from simhub.simulation.tutor import Tutor, TutorTurn
from simhub.tutoring.estimates import parse_names
from simhub.tutoring.knowsim.iq import RATER_FAILED, IQRater, rate_traces
from simhub.tutoring.knowsim.termination import JUDGE_FAILED, TerminationJudge, judge_traces
from simhub.tutoring.knowsim.trace import (
    Trace,
    TraceTurn,
    read_trace,
    trace_name,
    write_trace,
)
from simhub.tutoring.knowsim.tutors import BenchRequest
from simhub.tutoring.runner import RUN_FILE, TRACES, Episode, EpisodeBench, Runner, rules_digest

__all__ = ["RULE_MODULES", "RUN_FILE", "TRACES", "Bench", "BenchOptions", "Item", "load_items", "parse_levels",
           "rules_digest"]


@dataclasses.dataclass(frozen=True)
class Item:
    id: str
    question: str
    graph: ValidatedGraph


def load_items(spec: str, n: int | None = None) -> list[Item]:
    """``sample`` (the graphs shipped for the sample corpus) or a graph file whose graphs carry ``question``."""
    graphs: Mapping[str, IUGraph] = shipped_graphs() if spec == "sample" else read_graphs(spec)
    where = "the shipped sample graphs" if spec == "sample" else spec
    items = []
    for name, g in graphs.items():
        if not g.question:
            raise DataError(f"{where}: item {name} has no question (a tutor-bench item needs its text)",
                            file=None if spec == "sample" else spec, field=f"graphs.{name}.question")
        items.append(Item(name, g.question, validate_graph(g, name=name, file=None if spec == "sample" else spec)))
    if n is not None:
        if n < 1:
            raise DataError(f"--n: {n} must be at least 1", field="n")
        items = items[:n]
    if not items:
        raise DataError(f"{where}: no items", field="items")
    return items


def parse_levels(text: str | Sequence[str]) -> list[str]:
    return parse_names(text, LEVELS, kind="knowledge level", field="levels")


@dataclasses.dataclass
class BenchOptions:
    seed: int = 0
    batch: int = 16
    full_length: bool = False
    temperature: float = 0.0
    max_tokens: int = 400
    cache_dir: str | None = None
    no_cache: bool = False
    progress: bool = False

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise DataError(f"--batch: {self.batch} must be at least 1", field="batch")


@dataclasses.dataclass
class _Conv:
    tutor: Tutor
    item: Item
    level: str
    state: KnowledgeState
    initial: KnowledgeState
    history: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    records: list[TurnRecord] = dataclasses.field(default_factory=list)
    turns: list[TraceTurn] = dataclasses.field(default_factory=list)
    pending: LearnerTurn | None = None
    done: bool = False
    stop: str | None = None
    terminated: bool = False
    truncated: bool = False
    failed: str | None = None

    @property
    def id(self) -> str:
        return f"{self.tutor.id}|{self.item.id}|{self.level}"

    def dialogue(self) -> Dialogue:
        turns = [Turn(role="student" if role == "learner" else "tutor", content=text) for role, text in self.history]
        return Dialogue(id=self.id, question=Question(text=self.item.question), turns=turns)


#: The modules whose code decides a trace from the model answers (the update, metrics, termination,
#: state views, the bench loop and the trace layout): their source is part of a whole trace's cache key.
RULE_MODULES = ("simhub.learners.update", "simhub.learners.metrics", "simhub.learners.termination",
                "simhub.learners.state", "simhub.learners.presets", "simhub.learners.graph",
                "simhub.learners.roleplay", "simhub.learners.extract", "simhub.tutoring.knowsim.bench",
                "simhub.tutoring.knowsim.trace", "simhub.tutoring.knowsim.iq", "simhub.tutoring.knowsim.termination",
                "simhub.tutoring.knowsim.tutors", "simhub.tutoring.runner")


def _seed(seed: int, conv: str, turn: int, side: str) -> int:
    return int(fingerprint([seed, conv, turn, side])[:8], 16)


_GRAPH_KEYS: weakref.WeakKeyDictionary[ValidatedGraph, str] = weakref.WeakKeyDictionary()


def _graph_key(graph: ValidatedGraph) -> str:
    """The content hash of a graph, computed once per graph object (every cache key holds it)."""
    key = _GRAPH_KEYS.get(graph)
    if key is None:
        key = _GRAPH_KEYS[graph] = fingerprint(msgspec.to_builtins(graph.graph))
    return key


class Bench(EpisodeBench[Trace]):
    """One tutor-bench run: its components, preset, options and output folder."""

    family = "knowsim"
    rule_modules = RULE_MODULES
    optional_settings = ("iq_rater", "termination_judge")  # settings only where one ran
    trace_type = Trace

    def __init__(self, tutors: Sequence[Tutor], learner: Learner, extractor: Extractor, preset: Preset,
                 options: BenchOptions, output: str | os.PathLike[str], *, preset_name: str = "paper",
                 info: Mapping[str, Any] | None = None, shadow: Extractor | None = None,
                 rater: IQRater | None = None, termination_judge: TerminationJudge | None = None,
                 starts: Mapping[tuple[str, str], KnowledgeState] | None = None,
                 starts_info: Mapping[str, Any] | None = None):
        self.tutors, self.learner, self.extractor, self.preset = list(tutors), learner, extractor, preset
        #: Given starting states by (item, level) (KnowSim's canonical starts); the others are derived from
        #: the level's ratios. ``starts_info`` names their source in the settings.
        self.starts, self.starts_info = dict(starts or {}), dict(starts_info or {})
        #: A second extractor run on every turn, only to report its agreement with ``extractor``.
        self.shadow = shadow
        #: Rates every finished conversation's interaction quality once (IQ), when set.
        self.rater = rater
        #: Sets every finished conversation's end turn after the fact (the state rules then stop nothing).
        self.termination_judge = termination_judge
        if termination_judge is not None and not options.full_length:
            options = dataclasses.replace(options, full_length=True)
        self.options, self.output, self.preset_name = options, Path(output), preset_name
        self.info = dict(info or {})
        from simhub.config import cache_root

        self.cache = None if options.no_cache else ContentCache(cache_root(options.cache_dir), "tutor-bench")
        self.calls = {"learner": 0, "tutor": 0, "extractor": 0, **({"shadow": 0} if shadow else {}),
                      **({"iq_rater": 0} if rater else {}), **({"termination_judge": 0} if termination_judge else {})}
        self.cache_hits = 0
        self.items: list[Item] = []
        self.levels: list[str] = []

    # ------------------------------------------------------------------------------- run settings

    def settings(self) -> dict[str, Any]:
        """What every trace of this folder must share (a resumed run must match it)."""
        return {"learner": self.learner.describe(), "extractor": self.extractor.describe(),
                "shadow_extractor": self.shadow.describe() if self.shadow else None, "preset": self.preset_name,
                "preset_fields": msgspec.to_builtins(self.preset), "seed": self.options.seed,
                "full_length": self.options.full_length, "temperature": self.options.temperature,
                "max_tokens": self.options.max_tokens,
                **({"initial_states": self.starts_info} if self.starts_info else {}),
                **({"iq_rater": self.rater.describe()} if self.rater else {}),
                **({"termination_judge": self.termination_judge.describe()} if self.termination_judge else {})}

    # --------------------------------------------------------------------------------------- run

    def run(self, items: Sequence[Item], levels: Sequence[str],
            on_trace: Callable[[Trace], None] | None = None, *, progress: bool = False,
            executor: Any = None) -> list[Trace]:
        """Every (tutor, item, level) conversation through the kit's :class:`~simhub.tutoring.runner.Runner`
        (on ``executor``, :mod:`simhub.executors`; default here): finished traces in the folder are
        read, not rerun."""
        self.items, self.levels = list(items), list(levels)
        self.runner = Runner(self, batch=self.options.batch, on_trace=on_trace, progress=progress,
                             unit="conversations", executor=executor)
        return self.runner.run()

    # ---------------------------------------------------------------- the runner's episode interface

    def episodes(self) -> list[Episode]:
        return [Episode(tutor, (item, level), trace_name(tutor.id, item.id, level),
                        [_graph_key(item.graph), item.id, item.question, level])
                for tutor in self.tutors for item in self.items for level in self.levels]

    def read_trace(self, path: Path) -> Trace:
        return read_trace(path)

    def write_trace(self, path: Path, trace: Trace) -> None:
        write_trace(path, trace)

    def finished(self, trace: Trace) -> bool:
        return trace.failed is None  # failed conversations are tried again (their good calls are cached)

    def cacheable(self, trace: Trace) -> bool:
        return trace.failed is None

    def again(self, trace: Trace) -> bool:
        """Whether a finished trace's termination judge or IQ rater failed last time (it is asked again)."""
        return ((self.termination_judge is not None and (trace.judged_stop_flag or "").startswith(JUDGE_FAILED))
                or (self.rater is not None and (trace.iq_flag or "").startswith(RATER_FAILED)))

    def failures(self, trace: Trace) -> list[str]:
        return [] if trace.failed is None else [trace.failed]

    def run_batch(self, batch: list[tuple[Episode, Trace | None]], save: Callable[[Episode, Trace], None]
                  ) -> list[Trace]:
        convs = []
        for ep, _ in batch:
            item, level = ep.unit
            start = self.starts.get((item.id, level)) or initial_state(item.graph, level)
            convs.append(_Conv(ep.tutor, item, level, start, start))
        chunk = self._run_chunk(convs)
        return self._rate(self._judge([self._trace(conv) for conv in chunk]))

    def revisit(self, batch: list[tuple[Episode, Trace]]) -> list[Trace]:
        return self._rate(self._judge([t for _, t in batch], only_failed=True))

    def _judge(self, traces: list[Trace], *, only_failed: bool = False) -> list[Trace]:
        """The chunk's traces with their judged end turn, in one batched judge call (``only_failed``:
        only those whose judge failed before, as on a resumed run)."""
        if self.termination_judge is None:
            return traces
        pick = [i for i, t in enumerate(traces)
                if not only_failed or (t.judged_stop_flag or "").startswith(JUDGE_FAILED)]
        judged, asked, hits = judge_traces(self.termination_judge, [traces[i] for i in pick], self.cache)
        self.calls["termination_judge"] += asked
        self.cache_hits += hits
        out = list(traces)
        for i, t in zip(pick, judged, strict=True):
            out[i] = t
        return out

    def _rate(self, traces: list[Trace]) -> list[Trace]:
        """The chunk's traces with their IQ, in one batched rater call (before they are written, so
        a resumed run never asks again for a finished conversation)."""
        if self.rater is None:
            return traces
        rated, asked, hits = rate_traces(self.rater, traces, self.cache)
        self.calls["iq_rater"] += asked
        self.cache_hits += hits
        return rated

    def _run_chunk(self, convs: list[_Conv]) -> list[_Conv]:
        for turn in range(1, self.preset.max_turns + 1):
            live = [c for c in convs if not c.done]
            if not live:
                break
            self._learner_step(live, turn)
            live = [c for c in live if not c.done]
            for tutor in self.tutors:
                mine = [c for c in live if c.tutor is tutor]
                if mine:
                    self._tutor_step(tutor, mine, turn)
            live = [c for c in live if not c.done]
            if live:
                self._extract_step(live, turn)
        for c in convs:
            if not c.done:
                c.done, c.stop, c.truncated = True, "max_turns", True
        return convs

    # ------------------------------------------------------------------------------ caching

    def _cached(self, side: str, keys: list[str | None], compute: Callable[[list[int]], list[Any]],
                ok: Callable[[Any], bool], encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> list[Any]:
        """Answers from the cache where there, else from ``compute`` (the kit's per-call cache)."""
        out, hits, asked = cached_answers(self.cache, keys, compute, ok=ok, encode=encode, decode=decode)
        self.cache_hits += hits
        self.calls[side] += asked
        return out

    # -------------------------------------------------------------------------------- steps

    def _learner_step(self, convs: list[_Conv], turn: int) -> None:
        requests = [LearnerRequest(c.item.graph, c.state, c.item.question, tuple(c.history), turn,
                                   c.records[-1] if c.records else None, _seed(self.options.seed, c.id, turn, "learner"),
                                   level=c.level, initial=c.initial,
                                   profile_seed=_seed(self.options.seed, c.id, 0, "profile"))
                    for c in convs]
        me = self.learner.describe()
        keys = [fingerprint(["learner", me, _graph_key(r.graph), r.state.states, r.history, r.turn, r.seed,
                             r.last.advanced if r.last else None, r.last.explained if r.last else None, r.level,
                             r.initial.states if r.initial else None, r.profile_seed]) for r in requests]
        answers = self._cached("learner", keys, lambda todo: self.learner.speak([requests[i] for i in todo]),
                               ok=lambda a: a.error is None, encode=dataclasses.asdict,
                               decode=lambda d: LearnerTurn(**d))
        for c, a in zip(convs, answers, strict=True):
            if a.error is not None:
                c.done, c.failed, c.stop = True, a.error, "failed"
                continue
            if a.end and turn > 1:  # the learner said it is done: the conversation ends before the tutor replies
                c.done, c.stop, c.terminated = True, "learner_end", True
                continue
            c.pending = a
            c.history.append(("learner", a.message))

    def _tutor_step(self, tutor: Tutor, convs: list[_Conv], turn: int) -> None:
        sampling = Sampling(temperature=self.options.temperature, max_tokens=self.options.max_tokens,
                            seed=_seed(self.options.seed, tutor.id, turn, "tutor"))
        requests = [BenchRequest(c.dialogue(), graph=c.item.graph, state=c.state) for c in convs]
        me = tutor.describe()
        keys = [fingerprint(["tutor", me, [(t.role, t.content) for t in r.dialogue.turns], r.dialogue.question.text,
                             r.state.states if tutor.reads_state else None,
                             _graph_key(r.graph) if tutor.reads_state else None, dataclasses.asdict(sampling)])  # type: ignore[arg-type]
                for r in requests]

        def compute(todo: list[int]) -> list[TutorTurn]:
            try:
                return tutor.respond([requests[i] for i in todo], sampling)
            except Exception as exc:  # a tutor that raises fails these conversations; the run goes on
                return [TutorTurn(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in todo]

        answers = self._cached("tutor", keys, compute, ok=lambda a: a.error is None, encode=dataclasses.asdict,
                               decode=lambda d: TutorTurn(**d))
        for c, a in zip(convs, answers, strict=True):
            if a.error is not None:
                c.done, c.failed, c.stop = True, f"tutor: {a.error}", "failed"
                continue
            c.history.append(("tutor", a.text))
            if a.end_of_dialogue:
                c.stop = "tutor_end"

    def _extract_step(self, convs: list[_Conv], turn: int) -> None:
        requests = [ExtractRequest(c.item.graph, c.state, tuple(c.history[:-2]), c.history[-2][1], c.history[-1][1],
                                   c.item.question) for c in convs]
        answers = self._extract("extractor", self.extractor, requests)
        shadows = self._extract("shadow", self.shadow, requests) if self.shadow else [None] * len(convs)
        for c, a, sh in zip(convs, answers, shadows, strict=True):
            if a.error is not None:
                c.done, c.failed, c.stop = True, a.error if a.error.startswith("extractor") else f"extractor: {a.error}", \
                    "failed"
                continue
            self._advance(c, turn, a, sh.signals if sh is not None and sh.error is None and not sh.flagged else None)

    def _extract(self, side: str, extractor: Extractor, requests: list[ExtractRequest]) -> list[Extraction]:
        me = extractor.describe()
        keys = [fingerprint(["extractor", me, _graph_key(r.graph), r.state.states, r.history, r.learner_message,
                             r.tutor_message]) for r in requests]

        def compute(todo: list[int]) -> list[Extraction]:
            try:
                return extractor.extract([requests[i] for i in todo])
            except Exception as exc:  # an extractor that raises fails these conversations; the run goes on
                return [Extraction(error=f"extractor: {type(exc).__name__}: {str(exc)[:200]}") for _ in todo]

        return self._cached(side, keys, compute, ok=lambda a: a.error is None, encode=msgspec.to_builtins,
                            decode=lambda d: msgspec.convert(d, Extraction))

    def _advance(self, c: _Conv, turn: int, extraction: Extraction,
                 shadow: dict[str, IUSignal] | None = None) -> None:
        graph = c.item.graph
        signals = extraction.signals
        try:
            record = update(graph, c.state, signals, self.preset)
        except SimhubError as exc:  # an extractor naming an IU outside the graph: this conversation fails
            c.done, c.failed, c.stop = True, f"extractor: {exc}", "failed"
            return
        view = state_view(graph, c.state)
        said = c.pending or LearnerTurn()
        c.turns.append(TraceTurn(turn=turn, learner=c.history[-2][1], tutor=c.history[-1][1], signals=dict(signals),
                                 record=record, learner_thought=said.thought, attempt_verify=said.attempt_verify,
                                 mode=view.mode, density=round(view.density, 6), learner_flag=said.flagged,
                                 extractor_flag=extraction.flagged, tutor_ended=c.stop == "tutor_end",
                                 shadow_signals=dict(shadow) if shadow is not None else None))
        c.records.append(record)
        c.state = record.state
        if c.stop == "tutor_end":
            c.done, c.terminated = True, True
            return
        decision = stop_decision(c.records, self.preset)
        if decision.truncated or (decision.terminated and not self.options.full_length):
            c.done, c.stop, c.terminated, c.truncated = True, decision.reason, decision.terminated, decision.truncated

    # ------------------------------------------------------------------------------- traces

    def _trace(self, c: _Conv) -> Trace:
        early = early_stop(c.records, self.preset)
        metrics = conversation_metrics(c.item.graph, c.initial, c.records) if c.failed is None else None
        return Trace(id=c.id, tutor=c.tutor.id, item=c.item.id, level=c.level, question=c.item.question,
                     graph=c.item.graph.graph, preset=self.preset_name, preset_fields=msgspec.to_builtins(self.preset),
                     initial=c.initial, turns=c.turns, stop_reason=c.stop, terminated=c.terminated,
                     truncated=c.truncated, virtual_stop_turn=early.turn if early else None,
                     virtual_stop_reason=early.reason if early else None, full_length=self.options.full_length,
                     models={"tutor": c.tutor.describe(), "learner": self.learner.describe(),
                             "extractor": self.extractor.describe(),
                             **({"shadow_extractor": self.shadow.describe()} if self.shadow else {})},
                     seed=self.options.seed, failed=c.failed, metrics=metrics)


def signals_of(trace: Trace) -> list[dict[str, IUSignal]]:
    return [t.signals for t in trace.turns]
