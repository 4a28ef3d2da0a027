"""Run directories of ``simhub eval``, read and checked.

A run directory holds ``results.json`` (the summary: simulator, profile, data, one entry per
metric), ``scores.jsonl`` (one scored turn a line) and, optionally, ``dialogue_results.json``
(dialogue-level realism, from ``simhub eval-dialogues``; a folder holding only that file is a
dialogue-level run). :func:`load_run` reads them into a typed :class:`Run`. Anything malformed raises
:class:`~simhub.errors.DataError` naming the file, the line of ``scores.jsonl`` and the field, so
a broken run is caught when it is read, not later as a blank figure or a wrong comparison.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from simhub.errors import DataError

#: The files of a run directory.
RESULTS_FILE = "results.json"
SCORES_FILE = "scores.jsonl"
DIALOGUE_RESULTS_FILE = "dialogue_results.json"

# --------------------------------------------------------------------------------------- data model


#: A null reason saying the real turn has no label to compare with, in the metrics' own words ("real
#: turn has no act label", "real turn has no correctness label (a failed annotation)"): a gap in the
#: data, the same for every simulator, not a failure of the run.
_NO_LABEL = re.compile(r"^real turn has no [\w ]*label")


def is_missing_label(reason: str) -> bool:
    """Whether a null reason of ``scores.jsonl`` says the real turn has no label."""
    return bool(_NO_LABEL.match(reason))


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One metric of ``results.json``: mean, std and n over the turns where it applies, and the 95%
    interval. ``extra`` holds whatever else the entry carries (``qwk``, ``cutoff_source``...)."""

    mean: float | None
    std: float | None
    n: int | None
    ci95: tuple[float, float] | None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DataInfo:
    """What data a run was evaluated on; the sha256 tells whether two runs saw the same file."""

    path: str | None
    sha256: str | None
    dialogues: int | None
    turns: int | None


@dataclass(frozen=True, slots=True)
class Failures:
    """Turns that could not be simulated, and per metric the turns whose scoring failed."""

    simulation: int
    scoring: Mapping[str, int]


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
class DialogueMetric:
    """One dialogue-level realism number with its interval and the number of dialogues."""

    value: float | None
    ci95: tuple[float, float] | None
    n: int | None


@dataclass(frozen=True, slots=True)
class DialogueResults:
    """``dialogue_results.json``: the metrics, and the whole file for sections that want more."""

    metrics: Mapping[str, DialogueMetric]
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


def _where(file: Path, row: int | None) -> str:
    return f"{file}:{row}" if row is not None else str(file)


def _bad(file: Path, field: str, message: str, row: int | None = None) -> DataError:
    return DataError(f"{_where(file, row)}: {field}: {message}", file=str(file), row=row, field=field)


def _number(value: Any, file: Path, field: str, row: int | None = None) -> float | None:
    """A JSON number or null; NaN and infinities count as null (the metric did not apply)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(file, field, f"expected a number or null, got {type(value).__name__}", row)
    value = float(value)
    return value if math.isfinite(value) else None


def _count(value: Any, file: Path, field: str, row: int | None = None, *, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(file, field, f"expected a non-negative integer, got {value!r}", row)
    return value


def _text(value: Any, file: Path, field: str, row: int | None = None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(file, field, f"expected a string or null, got {type(value).__name__}", row)
    return value


def _object(value: Any, file: Path, field: str, row: int | None = None, *, default: bool = True) -> dict[str, Any]:
    if value is None and default:
        return {}
    if not isinstance(value, dict):
        raise _bad(file, field, f"expected a JSON object, got {type(value).__name__}", row)
    return value


def _interval(value: Any, file: Path, field: str, row: int | None = None) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise _bad(file, field, "expected [low, high] or null", row)
    lo, hi = (_number(v, file, f"{field}[{i}]", row) for i, v in enumerate(value))
    return None if lo is None or hi is None else (lo, hi)


def _read_json(file: Path) -> Any:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{file}: not found; is this a simhub eval run directory?", file=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: cannot be read ({exc})", file=str(file)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{file}:{exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno})",
                        file=str(file), row=exc.lineno) from None


def _load_results(file: Path) -> dict[str, Any]:
    data = _object(_read_json(file), file, "$", default=False)
    simulator = data.get("simulator")
    if not isinstance(simulator, str) or not simulator:
        raise _bad(file, "simulator", "missing or not a non-empty string")
    metrics: dict[str, MetricSummary] = {}
    for name, entry in _object(data.get("metrics"), file, "metrics", default=False).items():
        where = f"metrics.{name}"
        entry = _object(entry, file, where)
        metrics[name] = MetricSummary(
            mean=_number(entry.get("mean"), file, f"{where}.mean"),
            std=_number(entry.get("std"), file, f"{where}.std"),
            n=_count(entry.get("n"), file, f"{where}.n"),
            ci95=_interval(entry.get("ci95"), file, f"{where}.ci95"),
            extra=MappingProxyType({k: v for k, v in entry.items() if k not in ("mean", "std", "n", "ci95")}),
        )
    raw_data = _object(data.get("data"), file, "data")
    info = DataInfo(
        path=_text(raw_data.get("path"), file, "data.path"),
        sha256=_text(raw_data.get("sha256"), file, "data.sha256"),
        dialogues=_count(raw_data.get("dialogues"), file, "data.dialogues"),
        turns=_count(raw_data.get("turns"), file, "data.turns"),
    )
    raw_failures = _object(data.get("failures"), file, "failures")
    scoring = _object(raw_failures.get("scoring"), file, "failures.scoring")
    failures = Failures(
        simulation=_count(raw_failures.get("simulation"), file, "failures.simulation", default=0) or 0,
        scoring=MappingProxyType({k: _count(v, file, f"failures.scoring.{k}", default=0) or 0
                                  for k, v in scoring.items()}),
    )
    return {
        "simulator": simulator,
        "profile": _text(data.get("profile"), file, "profile"),
        "data": info,
        "metrics": MappingProxyType(metrics),
        "failures": failures,
        "config": MappingProxyType(_object(data.get("config"), file, "config")),
        "simhub_version": _text(data.get("simhub_version"), file, "simhub_version"),
        "created": _text(data.get("created"), file, "created"),
    }


def _load_scores(file: Path) -> tuple[ScoredTurn, ...]:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"{file}: not found; is this a simhub eval run directory?", file=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: cannot be read ({exc})", file=str(file)) from None
    parsed: list[tuple[int, dict[str, Any]]] = []
    seen: dict[tuple[str, int], int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{file}:{lineno}: invalid JSON ({exc.msg}, column {exc.colno})",
                            file=str(file), row=lineno) from None
        record = _object(record, file, "$", lineno, default=False)
        dialogue_id = record.get("dialogue_id")
        if isinstance(dialogue_id, bool) or not isinstance(dialogue_id, str | int):
            raise _bad(file, "dialogue_id", "missing or not a string", lineno)
        turn_index = record.get("turn_index")
        if isinstance(turn_index, bool) or not isinstance(turn_index, int) or turn_index < 0:
            raise _bad(file, "turn_index", "missing or not a non-negative integer", lineno)
        key = (str(dialogue_id), turn_index)
        if key in seen:
            raise _bad(file, "turn_index", f"turn {turn_index} of dialogue {key[0]!r} is also on line {seen[key]}",
                       lineno)
        seen[key] = lineno
        parsed.append((lineno, record))

    # ``position`` is written by simhub eval; when an older file lacks it, it is the rank of the
    # turn among the dialogue's scored student turns, which is what it means.
    by_dialogue: dict[str, list[int]] = defaultdict(list)
    for dialogue_id, turn_index in seen:
        by_dialogue[dialogue_id].append(turn_index)
    derived = {d: {t: i for i, t in enumerate(sorted(ts))} for d, ts in by_dialogue.items()}

    turns = []
    for lineno, record in parsed:
        dialogue_id, turn_index = str(record["dialogue_id"]), record["turn_index"]
        position = _count(record.get("position"), file, "position", lineno)
        scores = _object(record.get("scores"), file, "scores", lineno)
        details = _object(record.get("details"), file, "details", lineno)
        turns.append(ScoredTurn(
            dialogue_id=dialogue_id,
            turn_index=turn_index,
            position=derived[dialogue_id][turn_index] if position is None else position,
            real=_text(record.get("real"), file, "real", lineno),
            candidate=_text(record.get("candidate"), file, "candidate", lineno),
            scores=MappingProxyType({k: _number(v, file, f"scores.{k}", lineno) for k, v in scores.items()}),
            details=MappingProxyType(details),
            error=_text(record.get("error"), file, "error", lineno),
        ))
    return tuple(turns)


def _load_dialogue_results(file: Path) -> DialogueResults | None:
    if not file.is_file():
        return None
    data = _object(_read_json(file), file, "$", default=False)
    metrics = {}
    for name, entry in _object(data.get("metrics"), file, "metrics").items():
        where = f"metrics.{name}"
        entry = _object(entry, file, where)
        metrics[name] = DialogueMetric(
            value=_number(entry.get("value"), file, f"{where}.value"),
            ci95=_interval(entry.get("ci95"), file, f"{where}.ci95"),
            n=_count(entry.get("n"), file, f"{where}.n"),
        )
    return DialogueResults(MappingProxyType(metrics), MappingProxyType(data))


def _dialogue_only_run(path: Path, dialogue: DialogueResults) -> Run:
    """A folder written by ``simhub eval-dialogues`` alone: no turn-level row, only the dialogue-level
    section (its Table-1 cells show as missing)."""
    raw = dialogue.raw
    file = path / DIALOGUE_RESULTS_FILE
    return Run(
        path=path,
        simulator=_text(raw.get("simulator"), file, "simulator") or "simulated",
        profile=_text(raw.get("profile"), file, "profile"),
        data=DataInfo(path=_text(raw.get("real"), file, "real"), sha256=None,
                      dialogues=_count(raw.get("real_dialogues"), file, "real_dialogues"), turns=None),
        metrics=MappingProxyType({}),
        failures=Failures(simulation=_count(raw.get("failed_rollouts"), file, "failed_rollouts", default=0) or 0,
                          scoring=MappingProxyType({})),
        config=MappingProxyType({}),
        simhub_version=None,
        created=None,
        turns=(),
        dialogue_results=dialogue,
    )


def load_run(path: str | PathLike[str]) -> Run:
    """Read and check a ``simhub eval`` run directory.

    Raises :class:`~simhub.errors.DataError` naming the file (and the line of ``scores.jsonl``) when
    ``results.json`` or ``scores.jsonl`` is missing or malformed, so a broken run is caught here
    rather than as a blank figure.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: not a directory (expected a simhub eval run directory)", file=str(path))
    dialogue = _load_dialogue_results(path / DIALOGUE_RESULTS_FILE)
    if dialogue is not None and not (path / RESULTS_FILE).is_file():
        return _dialogue_only_run(path, dialogue)
    return Run(path=path, turns=_load_scores(path / SCORES_FILE), dialogue_results=dialogue,
               **_load_results(path / RESULTS_FILE))

