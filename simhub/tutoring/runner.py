"""The one runner of every tutor bench: episodes in lockstep batches, resumable, cached, counted.

A learner family's bench (:class:`EpisodeBench`) says what its episodes are (one tutor in front of
one unit: a KnowSim conversation on an item at a level, a KT-learner run over a scenario's days),
how to advance a batch of them, and how its traces are read and written. The runner does the rest,
the same way for every family:

* the run folder: ``run.json`` (:class:`RunInfo`) holds the settings every trace of the folder
  shares, and a resumed run must match them (:func:`open_run_folder`); ``traces/`` holds one file
  per episode, written atomically;
* resume: an episode whose trace is finished is read, not rerun; an unfinished one (a KT run killed
  part way) is handed back to the bench with its trace, to go on from there;
* the whole-episode cache: a finished trace is cached under the family, a digest of the source of
  the family's rule modules (:func:`rules_digest`), the settings, the tutor and the episode's own
  key, so an identical run into another folder copies it with no call;
* lockstep batches of ``batch`` episodes (:meth:`EpisodeBench.run_batch`), so every step of a batch
  is one batched call per model;
* failures: a bench records a failed episode (or day) in its trace with the cause; the run goes on,
  and :attr:`RunReport.failures` counts them beside every aggregate;
* progress: one line per ``every`` finished episodes, with the rate, on stderr when asked;
* executors (:mod:`simhub.executors`): by default the batches run here, saving a KT run's trace
  after each day; on a Ray cluster each batch runs on an actor holding its own copy of the bench
  (models loaded once per actor) and its traces come back whole, for the driver alone to write and
  cache, so the files are those of a local run. A batch lost on every try is counted and named in
  :attr:`RunReport.failures`, and its episodes run on the next run.

:func:`simhub.cache.cached_answers` is the per-call cache the benches' steps use (model answers by content key).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from simhub.cache import ContentCache, fingerprint, source_digest
from simhub.errors import DataError
from simhub.executors import BatchFailure, Executor, LocalExecutor
from simhub.runformat import read_document
from simhub.schema import atomic_write_bytes

__all__ = ["RUN_FILE", "TRACES", "Episode", "EpisodeBench", "RunInfo", "RunReport", "Runner",
           "open_run_folder", "read_run_info", "rules_digest", "safe_name", "write_run_info"]

TRACES = "traces"
RUN_FILE = "run.json"

T = TypeVar("T")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """``text`` as a piece of a file name (runs of other characters become ``_``)."""
    return _SAFE.sub("_", text)


@functools.cache
def rules_digest(modules: tuple[str, ...]) -> str:
    """A hash of the source of ``modules`` (computed once per process and tuple): part of every
    whole-episode cache key, so a change to the rules' code is never answered by an old trace."""
    return source_digest(modules)


# ------------------------------------------------------------------------------------- run folder

RUN_KIND = "simhub-tutor-bench-run"
RUN_VERSION = 1
#: The versions :func:`read_run_info` reads (0: a run.json written before it had ``schema_version``
#: and ``kind``, the same layout otherwise).
RUN_READS = (0, 1)


class RunInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A tutor-bench folder's ``run.json``: the shared ``settings`` (learner, extractor, preset,
    seed...) and what the run was asked (profile, items, levels, tutors, component names)."""

    schema_version: int = RUN_VERSION
    kind: str = RUN_KIND
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    profile: str | None = None
    items: str | None = None
    n: int | None = None
    levels: list[str] | None = None
    tutors: list[str] | None = None
    learner_name: str | None = None
    extractor_name: str | None = None
    #: Anything else a library caller passed as the run's ``info``.
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, settings: dict[str, Any], info: dict[str, Any]) -> RunInfo:
        """The run file of ``settings`` and a caller's ``info`` (keys it does not name go to ``extra``)."""
        known = {f.name for f in msgspec.structs.fields(cls)} - {"schema_version", "kind", "settings", "extra"}
        plain = json.loads(json.dumps({"settings": settings, **info}, default=str))  # JSON values only
        return msgspec.convert({"settings": plain.pop("settings"), **{k: plain.pop(k) for k in list(plain) if k in known},
                                "extra": plain}, cls)


def write_run_info(path: str | os.PathLike[str], info: RunInfo) -> None:
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(info), indent=2))


def read_run_info(path: str | os.PathLike[str]) -> RunInfo:
    """``run.json`` decoded; a DataError naming the file (and the field) when it is not one."""
    info = read_document(path, RunInfo, RUN_KIND, RUN_READS, "run.json ",
                         f"not a tutor-bench run.json (kind {RUN_KIND!r} expected)", unversioned=True)
    return msgspec.structs.replace(info, schema_version=RUN_VERSION) if info.schema_version == 0 else info


def open_run_folder(output: str | os.PathLike[str], settings: dict[str, Any], info: dict[str, Any], *,
                    optional: tuple[str, ...] = ()) -> None:
    """Start or resume a run folder: an existing ``run.json`` must hold the same ``settings`` (a
    DataError naming the first that differs), then ``run.json`` is (re)written. ``optional``: settings
    present only when a component ran; a folder that had one differs from a run without it."""
    folder = Path(output)
    run_file = folder / RUN_FILE
    if run_file.is_file():
        theirs = read_run_info(run_file).settings
        for key in [*settings, *(k for k in optional if k in theirs and k not in settings)]:
            if json.dumps(theirs.get(key), sort_keys=True) != json.dumps(settings.get(key), sort_keys=True):
                raise DataError(f"{folder}: holds a tutor-bench run with another {key}; resume it with the "
                                f"same settings or choose another --output", file=str(run_file), field=key)
    folder.mkdir(parents=True, exist_ok=True)
    write_run_info(run_file, RunInfo.of(settings, info))


# ----------------------------------------------------------------------------------------- episodes


@dataclasses.dataclass(frozen=True)
class Episode:
    """One tutor in front of one unit of the family (an item at a level, a run plan)."""

    tutor: Any
    unit: Any
    #: The trace's file name under ``traces/``.
    name: str
    #: JSON values that, with the settings and the tutor's description, decide the episode.
    key: Any


class EpisodeBench(ABC, Generic[T]):
    """What a learner family's bench gives the :class:`Runner` (see the module docstring).

    Subclasses set ``family`` and ``rule_modules``, and hold ``output``, ``info``, ``cache`` (or
    None), ``calls`` (model calls by part) and ``cache_hits``.
    """

    family: ClassVar[str]
    #: The modules whose code decides a trace from the model answers (see :func:`rules_digest`).
    rule_modules: ClassVar[tuple[str, ...]]
    #: Settings present only when an optional component ran (see :func:`open_run_folder`).
    optional_settings: ClassVar[tuple[str, ...]] = ()
    #: The trace type (a msgspec struct), for whole traces read back from the cache.
    trace_type: ClassVar[type]

    output: Path
    info: dict[str, Any]
    cache: ContentCache | None
    calls: dict[str, int]
    cache_hits: int

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """What every trace of the folder must share (a resumed run must match it)."""

    @abstractmethod
    def episodes(self) -> list[Episode]:
        """Every episode of the run, in the order of the results."""

    @abstractmethod
    def read_trace(self, path: Path) -> T: ...

    @abstractmethod
    def write_trace(self, path: Path, trace: T) -> None: ...

    @abstractmethod
    def finished(self, trace: T) -> bool:
        """Whether a trace found in the folder is done (else the episode runs again, given it)."""

    def cacheable(self, trace: T) -> bool:
        """Whether a finished trace is kept in the whole-episode cache (not a failed one)."""
        return True

    def again(self, trace: T) -> bool:
        """Whether a finished trace still has a part to ask again (a judge that failed last time)."""
        return False

    @abstractmethod
    def run_batch(self, batch: list[tuple[Episode, T | None]], save: Callable[[Episode, T], None]) -> list[T]:
        """Advance the batch's episodes together to their end (given the unfinished trace of a resumed
        one); ``save`` writes a partial trace. Returns the finished traces, in order."""

    def revisit(self, batch: list[tuple[Episode, T]]) -> list[T]:
        """The traces of :meth:`again`, with their failed parts asked again."""
        return [t for _, t in batch]

    def finish(self, done: list[tuple[Episode, T]], save: Callable[[Episode, T], None]) -> None:
        """After every episode has finished (a judge panel over every run, say)."""

    def failures(self, trace: T) -> list[str]:
        """The causes of what failed in a trace (an episode, or some of its days)."""
        return []

    # ------------------------------------------------------------------- on another executor's worker

    def __getstate__(self) -> dict[str, Any]:
        """What a worker gets: the bench without its runner and callbacks (the driver keeps those)."""
        state = self.__dict__.copy()
        for name in ("runner", "_episodes"):
            state.pop(name, None)
        if "_on_day" in state:
            state["_on_day"] = None
        return state

    def remote_batch(self, batch: list[tuple[int, T | None]]) -> tuple[list[T], dict[str, Any]]:
        """:meth:`run_batch` on a worker (:mod:`simhub.executors`): the episodes by their index in
        :meth:`episodes` (the worker's own tutors, not copies), no partial save (the driver writes), and
        the worker's counts for the driver to add."""
        episodes = self.__dict__.get("_episodes")
        if episodes is None:
            episodes = self.__dict__["_episodes"] = self.episodes()
        before = (dict(self.calls), self.cache_hits, getattr(self, "days_run", 0))
        traces = self.run_batch([(episodes[i], old) for i, old in batch], lambda ep, trace: None)
        counts = {"calls": {k: v - before[0].get(k, 0) for k, v in self.calls.items()},
                  "cache_hits": self.cache_hits - before[1], "days_run": getattr(self, "days_run", 0) - before[2]}
        return traces, counts

    def add_counts(self, counts: dict[str, Any]) -> None:
        """Add a worker's counts (:meth:`remote_batch`) to this bench's."""
        for k, v in counts["calls"].items():
            self.calls[k] = self.calls.get(k, 0) + v
        self.cache_hits += counts["cache_hits"]
        if hasattr(self, "days_run"):
            self.days_run += counts["days_run"]  # type: ignore[attr-defined]


@dataclasses.dataclass
class RunReport:
    """What a run did: episodes run, copied from the cache, read from the folder; failure causes."""

    episodes: int = 0
    run: int = 0
    from_cache: int = 0
    resumed: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


class Runner(Generic[T]):
    """Runs an :class:`EpisodeBench` into its folder (see the module docstring).

    ``batch``: episodes advanced together; ``on_trace``: called with every episode's final trace;
    ``progress``: a line on stderr every ``every`` episodes (and at the end) with the rate.
    """

    def __init__(self, bench: EpisodeBench[T], *, batch: int = 16, on_trace: Callable[[T], None] | None = None,
                 progress: bool = False, every: int = 25, unit: str = "episodes", executor: Executor | None = None):
        if batch < 1:
            raise DataError(f"--batch: {batch} must be at least 1", field="batch")
        self.bench, self.batch, self.on_trace = bench, batch, on_trace
        #: Where the batches run (:mod:`simhub.executors`); None or local: in this process, saving
        #: partial traces as they go. Elsewhere a batch's traces come back whole and the driver writes them.
        self.executor = executor
        self.progress, self.every, self.unit = progress, max(1, every), unit
        self.report = RunReport()
        #: Episodes whose batch failed on every try of another executor (left out of the traces returned).
        self._lost: list[str] = []
        self._started = 0.0
        self._done = 0
        self._total = 0

    @functools.cached_property
    def _settings_key(self) -> str:
        b = self.bench
        return fingerprint([b.family, rules_digest(b.rule_modules), b.settings()])

    def key(self, episode: Episode) -> str:
        """The whole-episode cache key."""
        return fingerprint([self._settings_key, episode.tutor.describe(), episode.key])

    def _from_cache(self, episode: Episode) -> T | None:
        cache = self.bench.cache
        if cache is None:
            return None
        raw = cache.get_bytes(self.key(episode))
        if raw is None:
            return None
        try:  # straight into the trace type: no intermediate dicts
            return msgspec.json.decode(raw, type=self.bench.trace_type)
        except (msgspec.ValidationError, msgspec.DecodeError):  # another layout, or a torn file: run it instead
            return None

    def _keep(self, episode: Episode, trace: T) -> None:
        b = self.bench
        if b.cache is not None and b.cacheable(trace) and not b.again(trace):
            b.cache.put(self.key(episode), msgspec.to_builtins(trace))

    def _finished_one(self, trace: T) -> None:
        self._done += 1
        if self.on_trace is not None:
            self.on_trace(trace)
        if self.progress and (self._done % self.every == 0 or self._done == self._total):
            rate = self._done / max(time.perf_counter() - self._started, 1e-9)
            print(f"  {self._done}/{self._total} {self.unit} finished ({rate:.1f}/s)", file=sys.stderr)

    def run(self) -> list[T]:
        """Every episode, run, resumed or copied; the traces in :meth:`EpisodeBench.episodes` order."""
        b = self.bench
        self._started = time.perf_counter()
        open_run_folder(b.output, b.settings(), b.info, optional=b.optional_settings)
        folder = b.output / TRACES
        folder.mkdir(exist_ok=True)
        episodes = b.episodes()
        self._total = self.report.episodes = len(episodes)
        done: dict[str, T] = {}
        todo: list[tuple[Episode, T | None]] = []
        again: list[tuple[Episode, T]] = []
        for ep in episodes:
            path = folder / ep.name
            old = b.read_trace(path) if path.is_file() else None
            if old is not None and b.finished(old):
                done[ep.name] = old
                self.report.resumed += 1
                if b.again(old):
                    again.append((ep, old))
                continue
            cached = self._from_cache(ep)
            if cached is not None:  # the same episode finished in another run: copied, no call
                b.cache_hits += 1
                self.report.from_cache += 1
                b.write_trace(path, cached)
                done[ep.name] = cached
                self._finished_one(cached)
                continue
            todo.append((ep, old))

        def save(ep: Episode, trace: T) -> None:
            b.write_trace(folder / ep.name, trace)

        chunks = [todo[k:k + self.batch] for k in range(0, len(todo), self.batch)]
        if self.executor is None or isinstance(self.executor, LocalExecutor):
            for chunk in chunks:
                self._finish_chunk(chunk, b.run_batch(chunk, save), done, save)
        else:
            index = {ep.name: i for i, ep in enumerate(episodes)}
            batches = [[(index[ep.name], old) for ep, old in chunk] for chunk in chunks]
            for i, outcome in self.executor.map(b, "remote_batch", batches):
                if isinstance(outcome, BatchFailure):  # counted, named; its episodes run again next time
                    self.report.failures.extend(f"{ep.name}: {outcome.cause}" for ep, _ in chunks[i])
                    self._lost.extend(ep.name for ep, _ in chunks[i])
                    continue
                traces, counts = outcome
                b.add_counts(counts)
                self._finish_chunk(chunks[i], traces, done, save)
        for k in range(0, len(again), self.batch):
            chunk = again[k:k + self.batch]
            for (ep, _), trace in zip(chunk, b.revisit(chunk), strict=True):
                save(ep, trace)
                self._keep(ep, trace)
                done[ep.name] = trace
        kept = [ep for ep in episodes if ep.name in done]
        out = [done[ep.name] for ep in kept]
        b.finish(list(zip(kept, out, strict=True)), save)
        self.report.failures += [cause for trace in out for cause in b.failures(trace)]
        self.report.seconds = time.perf_counter() - self._started
        return out

    @property
    def lost(self) -> list[str]:
        """The episodes whose batch failed on every try of another executor (no trace; they run next time)."""
        return list(self._lost)

    def _finish_chunk(self, chunk: list[tuple[Episode, T | None]], traces: list[T], done: dict[str, T],
                      save: Callable[[Episode, T], None]) -> None:
        for (ep, _), trace in zip(chunk, traces, strict=True):
            save(ep, trace)
            self._keep(ep, trace)
            done[ep.name] = trace
            self.report.run += 1
            self._finished_one(trace)
