"""Run directories of ``simhub eval``, read and checked.

A run directory holds ``results.json`` (the summary: simulator, profile, data, one entry per
metric), ``scores.jsonl`` (one scored turn a line) and, optionally, ``dialogue_results.json``
(dialogue-level realism, from ``simhub eval-dialogues``; a folder holding only that file is a
dialogue-level run). Their layout, and its ``schema_version``, is :mod:`simhub.runformat`'s structs;
:func:`load_run` reads the files through them into a typed :class:`Run` and adds the checks that
span fields (one line per turn, a turn's position). Anything malformed raises
:class:`~simhub.errors.DataError` naming the file, the line of ``scores.jsonl`` and the field, so
a broken run is caught when it is read, not later as a blank figure or a wrong comparison.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec

from simhub.errors import DataError
from simhub.runformat import (
    DIALOGUE_RESULTS_FILE,
    RESULTS_FILE,
    SCORES_FILE,
    DataInfo,
    DialogueLevelResults,
    DialogueStatistic,
    Failures,
    MetricSummary,
    ScoreLine,
    read_dialogue_results,
    read_eval_results,
    read_scores,
)

__all__ = [
    "DIALOGUE_RESULTS_FILE",
    "RESULTS_FILE",
    "SCORES_FILE",
    "DataInfo",
    "DialogueResults",
    "DialogueStatistic",
    "Failures",
    "MetricSummary",
    "Run",
    "ScoredTurn",
    "is_missing_label",
    "load_run",
]

# --------------------------------------------------------------------------------------- data model


#: A null reason saying the real turn has no label to compare with, in the metrics' own words ("real
#: turn has no act label", "real turn has no correctness label (a failed annotation)"): a gap in the
#: data, the same for every simulator, not a failure of the run.
_NO_LABEL = re.compile(r"^real turn has no [\w ]*label")


def is_missing_label(reason: str) -> bool:
    """Whether a null reason of ``scores.jsonl`` says the real turn has no label."""
    return bool(_NO_LABEL.match(reason))


@dataclass(frozen=True, slots=True)
class ScoredTurn:
    """One line of ``scores.jsonl``: a real student turn, the simulated one, and their scores."""

    dialogue_id: str
    turn_index: int
    position: int
    real: str | None
    candidate: str | None
    scores: Mapping[str, float | None]
    details: Mapping[str, Any]
    error: str | None = None

    def _detail(self, group: str, key: str) -> str | None:
        value = self.details.get(group)
        value = value.get(key) if isinstance(value, Mapping) else None
        return value if isinstance(value, str) else None

    @property
    def predicted_act(self) -> str | None:
        """The act classifier's label of the candidate."""
        return self._detail("acts", "predicted")

    @property
    def real_act(self) -> str | None:
        """The real turn's annotated act."""
        return self._detail("acts", "real")

    @property
    def verdict(self) -> str | None:
        """The judge's reading of the candidate: correct, incorrect or na."""
        return self._detail("judge", "verdict")

    @property
    def real_label(self) -> str | None:
        """The real turn's correctness label."""
        return self._detail("judge", "real_label")


@dataclass(frozen=True, slots=True)
class DialogueResults:
    """``dialogue_results.json``: the metrics, and the whole file (as JSON values) for sections that want more."""

    metrics: Mapping[str, DialogueStatistic]
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Run:
    """One ``simhub eval`` run directory, checked and typed."""

    path: Path
    simulator: str
    profile: str | None
    data: DataInfo
    metrics: Mapping[str, MetricSummary]
    failures: Failures
    config: Mapping[str, Any]
    simhub_version: str | None
    created: str | None
    turns: tuple[ScoredTurn, ...]
    dialogue_results: DialogueResults | None = None

    @property
    def name(self) -> str:
        """The run directory's name."""
        return self.path.name


# ------------------------------------------------------------------------------------------ loading


def _finite(value: float | None) -> float | None:
    """NaN and infinities (which files written with Python's json can hold) count as null: the
    metric did not apply."""
    return value if value is not None and math.isfinite(value) else None


def _interval(ci95: tuple[float, float] | None) -> tuple[float, float] | None:
    if ci95 is None:
        return None
    lo, hi = (_finite(v) for v in ci95)
    return None if lo is None or hi is None else (lo, hi)


def _summary(entry: MetricSummary) -> MetricSummary:
    return MetricSummary(mean=_finite(entry.mean), std=_finite(entry.std), n=entry.n, ci95=_interval(entry.ci95),
                         extra=entry.extra)


def _load_results(file: Path) -> dict[str, Any]:
    results = read_eval_results(file)
    return {
        "simulator": results.simulator,
        "profile": results.profile,
        "data": results.data,
        "metrics": MappingProxyType({name: _summary(entry) for name, entry in results.metrics.items()}),
        "failures": results.failures,
        "config": MappingProxyType(results.config),
        "simhub_version": results.simhub_version,
        "created": results.created,
    }


def _load_scores(file: Path) -> tuple[ScoredTurn, ...]:
    lines = read_scores(file)
    seen: dict[tuple[str, int], int] = {}
    for lineno, line in lines:
        key = (str(line.dialogue_id), line.turn_index)
        if key in seen:
            raise DataError(f"{file}:{lineno}: turn_index: turn {key[1]} of dialogue {key[0]!r} is also on line "
                            f"{seen[key]}", file=str(file), row=lineno, field="turn_index")
        seen[key] = lineno
    positions = _positions(seen)
    return tuple(_turn(line, positions) for _, line in lines)


def _positions(keys: Mapping[tuple[str, int], int]) -> dict[str, dict[int, int]]:
    """Each turn's rank among its dialogue's scored student turns: its ``position`` where an early
    file lacks the field (simhub eval writes it), which is what the field means."""
    by_dialogue: dict[str, list[int]] = defaultdict(list)
    for dialogue_id, turn_index in keys:
        by_dialogue[dialogue_id].append(turn_index)
    return {d: {t: i for i, t in enumerate(sorted(ts))} for d, ts in by_dialogue.items()}


def _turn(line: ScoreLine, positions: Mapping[str, Mapping[int, int]]) -> ScoredTurn:
    dialogue_id = str(line.dialogue_id)
    return ScoredTurn(
        dialogue_id=dialogue_id,
        turn_index=line.turn_index,
        position=positions[dialogue_id][line.turn_index] if line.position is None else line.position,
        real=line.real,
        candidate=line.candidate,
        scores=MappingProxyType({k: _finite(v) for k, v in line.scores.items()}),
        details=MappingProxyType(line.details),
        error=None if line.error is msgspec.UNSET else line.error,
    )


def _load_dialogue_results(file: Path) -> tuple[DialogueResults, DialogueLevelResults] | None:
    if not file.is_file():
        return None
    results = read_dialogue_results(file)
    metrics = {name: DialogueStatistic(value=_finite(m.value), ci95=_interval(m.ci95), n=m.n)
               for name, m in results.metrics.items()}
    raw = msgspec.to_builtins(results)
    return DialogueResults(MappingProxyType(metrics), MappingProxyType(raw)), results


def _dialogue_only_run(path: Path, dialogue: DialogueResults, results: DialogueLevelResults) -> Run:
    """A folder written by ``simhub eval-dialogues`` alone: no turn-level row, only the dialogue-level
    section (its Table-1 cells show as missing)."""
    return Run(
        path=path,
        simulator=results.simulator or "simulated",
        profile=results.profile,
        data=DataInfo(path=results.real, sha256=None, dialogues=results.real_dialogues, turns=None),
        metrics=MappingProxyType({}),
        failures=Failures(simulation=results.failed_rollouts),
        config=MappingProxyType({}),
        simhub_version=None,
        created=None,
        turns=(),
        dialogue_results=dialogue,
    )


def load_run(path: str | PathLike[str]) -> Run:
    """Read and check a ``simhub eval`` run directory.

    Raises :class:`~simhub.errors.DataError` naming the file (and the line of ``scores.jsonl``) when
    ``results.json`` or ``scores.jsonl`` is missing or malformed, or of a ``schema_version`` this
    simhub does not read, so a broken run is caught here rather than as a blank figure.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: not a directory (expected a simhub eval run directory)", file=str(path))
    loaded = _load_dialogue_results(path / DIALOGUE_RESULTS_FILE)
    dialogue = loaded[0] if loaded is not None else None
    if loaded is not None and not (path / RESULTS_FILE).is_file():
        return _dialogue_only_run(path, *loaded)
    return Run(path=path, turns=_load_scores(path / SCORES_FILE), dialogue_results=dialogue,
               **_load_results(path / RESULTS_FILE))
