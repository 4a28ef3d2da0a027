"""One self-contained HTML page over one or many ``simhub eval`` run directories.

Why an HTML page: a table of seven means hides most of what makes a simulated student realistic or
not. The page puts the numbers (the paper's Table 1, or a leaderboard when there are several runs)
next to the distributions behind them: which dialogue acts the simulator produces, how often it is
right, how realism changes along a dialogue, and how long its turns are compared with real students.

Design choices, and why:

* **Self-contained.** The page must open from disk, be mailed, attached to a pull request or kept
  as a CI artifact, and still render years later on a machine with no network. So it has no
  external script, font or stylesheet: CSS is inline, figures are inline SVG drawn by matplotlib's
  ``svg`` backend (no display needed), and there is no JavaScript at all.
* **Small.** Figures are aggregates (bars, lines, binned lengths), never one mark per turn, so the
  page stays a few hundred kilobytes whatever the number of turns. SVG text is kept as text (it is
  smaller than glyph outlines, and selectable), and matplotlib's unreferenced element ids and
  indentation are stripped.
* **Honest.** Published numbers are printed beside the runs for orientation only and are labelled
  "published (not reproduced here)": they come from :mod:`simhub.evaluation.paper`, not from runs.
* **Safe.** Every string that comes from a run (simulator names, candidates, config values) is
  HTML-escaped, and escaped for matplotlib's mathtext before it reaches a figure.

A run directory holds ``results.json`` (summary), ``scores.jsonl`` (one scored turn a line) and,
optionally, ``dialogue_results.json`` (dialogue-level realism). :func:`load_run` reads and checks
them, :func:`write_report` writes the page, and :func:`table1_data` gives the table as plain dicts.

Leaderboard rule (:data:`RANKING_RULE`): in every metric column that at least one run reports,
runs are ranked by their mean, highest first (every metric is "higher is better"); tied means share
the average of their places, and a run without a value in that column ranks below all runs that
have one. A run's score is its mean rank over those columns; lower is better. Runs with equal mean
ranks share a place and are listed by simulator name, profile and directory. "Best" marks the
highest mean of a column when at least two runs report it.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from simhub.errors import ConfigError, DataError, require
from simhub.evaluation.paper import (
    HUMAN_AGREEMENT,
    METRIC_LABELS,
    METRIC_MODEL_VALIDATION,
    METRICS,
    PAPER,
    TABLE1,
    TABLE1_SPLIT,
)
from simhub.schema import ACTS, CORRECTNESS_LABELS, atomic_write_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DIALOGUE_FIGURES",
    "DIALOGUE_RESULTS_FILE",
    "LATE_POSITION",
    "RANKING_RULE",
    "RESULTS_FILE",
    "SCORES_FILE",
    "TURN_FIGURES",
    "DataInfo",
    "DialogueMetric",
    "DialogueResults",
    "Failures",
    "FigureSpec",
    "MetricSummary",
    "RankedRun",
    "ReportContext",
    "Run",
    "ScoredTurn",
    "Series",
    "load_run",
    "rank_runs",
    "render_report",
    "table1_data",
    "write_report",
]

RESULTS_FILE = "results.json"
SCORES_FILE = "scores.jsonl"
DIALOGUE_RESULTS_FILE = "dialogue_results.json"

#: Student turns at this 0-based position or later are pooled into one "late" bucket in the
#: by-position figure: few dialogues are that long, and their per-position means are noise.
LATE_POSITION = 10

#: How many turns the examples section shows (the same turns for every run).
N_EXAMPLES = 5

#: Longest text shown in the examples section, in characters.
EXAMPLE_CHARS = 400

RANKING_RULE = (
    "Runs are ordered by their mean rank over the metric columns (lower is better). In each column "
    "that at least one run reports, runs are ranked by mean, highest first; tied means share the "
    "average of their places, and a run without a value ranks below every run with one. Equal mean "
    "ranks share a place. 'best' marks the highest mean of a column when two or more runs report it."
)

#: Labels outside the five acts (or the three correctness labels) are counted under this name.
OTHER = "Other"

# --------------------------------------------------------------------------------------- data model


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


@dataclass(frozen=True, slots=True)
class RankedRun:
    """A run's place on the leaderboard (see :data:`RANKING_RULE`).

    ``rank`` is the shared 1-based place (None when the run reports no metric), ``mean_rank`` the
    score it is sorted by, ``ranks`` its fractional rank per column and ``best`` the columns where
    it has the highest mean.
    """

    run: Run
    rank: int | None
    mean_rank: float | None
    ranks: Mapping[str, float]
    best: frozenset[str]


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


# ------------------------------------------------------------------------------------ the leaderboard


def _metric_order(names: Iterable[str]) -> list[str]:
    """The paper's order first, then any other metric (a plugin) alphabetically."""
    names = set(names)
    return [m for m in METRICS if m in names] + sorted(names - set(METRICS))


def _table_metrics(runs: Sequence[Run]) -> list[str]:
    """Metric columns of Table 1: the paper's seven, plus any other metric a run reports."""
    return _metric_order({*METRICS, *(name for run in runs for name in run.metrics)})


def _key(value: float) -> float:
    # Means read from JSON that print the same to 12 places are the same mean.
    return round(value, 12)


def rank_runs(runs: Sequence[Run]) -> list[RankedRun]:
    """Runs in leaderboard order, with their places, mean ranks and best columns.

    The rule is :data:`RANKING_RULE` (also in the module docstring).
    """
    columns = [m for m in _table_metrics(runs)
               if any(r.metrics.get(m) and r.metrics[m].mean is not None for r in runs)]
    ranks: list[dict[str, float]] = [{} for _ in runs]
    best: list[set[str]] = [set() for _ in runs]
    for metric in columns:
        values = [_key(s.mean) if (s := r.metrics.get(metric)) and s.mean is not None else None for r in runs]
        present = [v for v in values if v is not None]
        for i, v in enumerate(values):
            if v is None:
                above, tied = len(present), len(runs) - len(present)
            else:
                above, tied = sum(p > v for p in present), sum(p == v for p in present)
            ranks[i][metric] = 1 + above + (tied - 1) / 2
            if v is not None and len(present) >= 2 and v == max(present):
                best[i].add(metric)

    entries = []
    for i, run in enumerate(runs):
        own = [m for m in columns if (s := run.metrics.get(m)) and s.mean is not None]
        mean_rank = sum(ranks[i].values()) / len(columns) if own else None
        entries.append((run, mean_rank, ranks[i], best[i]))
    entries.sort(key=lambda e: (e[1] is None, round(e[1], 9) if e[1] is not None else 0.0,
                                e[0].simulator, e[0].profile or "", str(e[0].path)))
    ranked = []
    for run, mean_rank, run_ranks, run_best in entries:
        place = None
        if mean_rank is not None:
            place = 1 + sum(1 for _, other, _, _ in entries
                            if other is not None and round(other, 9) < round(mean_rank, 9))
        ranked.append(RankedRun(run, place, mean_rank, MappingProxyType(run_ranks), frozenset(run_best)))
    return ranked


def _display_names(runs: Sequence[Run]) -> dict[int, str]:
    """A unique, readable name per run (keyed by ``id(run)``): the simulator, then the profile and
    the directory name when needed to tell runs apart."""
    names = {id(r): r.simulator for r in runs}
    for extra in (lambda r: r.profile, lambda r: r.name):
        counts = Counter(names.values())
        for r in runs:
            if counts[names[id(r)]] > 1 and extra(r):
                names[id(r)] = f"{names[id(r)]} · {extra(r)}"
    counts = Counter(names.values())
    seen: Counter[str] = Counter()
    for r in runs:
        name = names[id(r)]
        if counts[name] > 1:
            seen[name] += 1
            names[id(r)] = f"{name} #{seen[name]}"
    return names


def table1_data(runs: Sequence[Run]) -> dict[str, Any]:
    """Table 1 as plain, JSON-ready dicts: the runs in leaderboard order, and the published rows.

    ``runs[i].metrics[name]`` holds the numbers of ``results.json`` unchanged (``mean``, ``std``,
    ``n``, ``ci95``, plus ``extra`` such as ``qwk``), and ``failures`` (turns whose scoring failed),
    ``rank`` (fractional, per column) and ``best``.
    """
    names = _display_names(runs)
    rows = []
    for entry in rank_runs(runs):
        run = entry.run
        metrics = {}
        for metric in _table_metrics(runs):
            summary = run.metrics.get(metric)
            if summary is None:
                continue
            metrics[metric] = {
                "mean": summary.mean, "std": summary.std, "n": summary.n,
                "ci95": list(summary.ci95) if summary.ci95 else None,
                **dict(summary.extra),
                "failures": run.failures.scoring.get(metric, 0),
                "rank": entry.ranks.get(metric),
                "best": metric in entry.best,
            }
        rows.append({
            "rank": entry.rank,
            "mean_rank": entry.mean_rank,
            "name": names[id(run)],
            "simulator": run.simulator,
            "profile": run.profile,
            "run": run.name,
            "path": str(run.path),
            "data_sha256": run.data.sha256,
            "metrics": metrics,
            "failures": {"simulation": run.failures.simulation, "scoring": dict(run.failures.scoring)},
        })
    return {
        "metrics": _table_metrics(runs),
        "ranking_rule": RANKING_RULE,
        "runs": rows,
        "published": {
            "source": PAPER,
            "split": TABLE1_SPLIT,
            "note": "published (not reproduced here)",
            "rows": [row.as_dict() for row in TABLE1],
        },
    }


# ------------------------------------------------------------------------------------------ figures

#: Okabe–Ito colours (colour-blind safe) for runs, without the yellow that vanishes on white; more
#: runs than colours cycle through matplotlib's tab10.
_RUN_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#882255")
_REAL_COLOUR = "#4D4D4D"
_LABEL_COLOURS = {"correct": "#009E73", "incorrect": "#D55E00", "na": "#BBBBBB", OTHER: "#888888"}

_RC = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "figure.dpi": 72,
}


@dataclass(frozen=True, slots=True)
class Series:
    """One thing a figure draws: the real data, or one run."""

    label: str
    colour: str
    turns: tuple[ScoredTurn, ...]
    real: bool = False


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What figure builders get: the runs in leaderboard order, their display names and colours,
    and the "real" series (one per distinct data file the runs were evaluated on)."""

    runs: tuple[Run, ...]
    names: Mapping[int, str]
    series: tuple[Series, ...]
    real: tuple[Series, ...]


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """A figure of the report. ``draw`` returns a matplotlib figure, or None when no run has the
    data it needs (the page then says so in its place). Adding a figure is adding a spec to
    :data:`TURN_FIGURES` or :data:`DIALOGUE_FIGURES`."""

    id: str
    title: str
    caption: str
    draw: Callable[[ReportContext], Figure | None]


def _mpl_text(text: str, limit: int = 40) -> str:
    """A run-supplied label made safe for matplotlib: shortened, ``$`` not read as mathtext, and
    a leading underscore (which legends would hide) kept visible."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _shares(labels: Iterable[str | None], categories: Sequence[str]) -> tuple[list[float], int]:
    """Share of each category among the non-null labels (anything else counts as :data:`OTHER`)."""
    counts = Counter(label if label in categories else OTHER for label in labels if label is not None)
    total = sum(counts.values())
    return [counts[c] / total if total else 0.0 for c in categories], total


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _act_bars(rows: Sequence[tuple[Series, Sequence[str | None]]], ylabel: str) -> Figure | None:
    """Grouped bars: the share of each act among each row's labels (real rows hatched)."""
    if not any(label is not None for _, labels in rows for label in labels):
        return None
    has_other = any(label is not None and label not in ACTS for _, labels in rows for label in labels)
    categories = [*ACTS, OTHER] if has_other else list(ACTS)
    fig = _new_figure(7.5, 3.2)
    ax = fig.subplots()
    width = 0.8 / len(rows)
    for i, (s, labels) in enumerate(rows):
        shares, n = _shares(labels, categories)
        xs = [c + (i - (len(rows) - 1) / 2) * width for c in range(len(categories))]
        ax.bar(xs, [100 * v for v in shares], width=width * 0.95, color=s.colour,
               hatch="//" if s.real else None, edgecolor="white" if s.real else None, linewidth=0,
               label=_mpl_text(f"{s.label} (n={n:,})", 60))
    ax.set_xticks(range(len(categories)), categories)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def _draw_acts(ctx: ReportContext) -> Figure | None:
    rows = [(s, [t.real_act for t in s.turns]) for s in ctx.real]
    rows += [(s, [t.predicted_act for t in s.turns]) for s in ctx.series]
    return _act_bars(rows, "share of turns (%)")


def _draw_correctness(ctx: ReportContext) -> Figure | None:
    rows = [(s, [t.real_label for t in s.turns]) for s in ctx.real]
    rows += [(s, [t.verdict for t in s.turns]) for s in ctx.series]
    rows = [(s, labels) for s, labels in rows if any(label is not None for label in labels)]
    if not rows:
        return None
    has_other = any(label not in CORRECTNESS_LABELS for _, labels in rows for label in labels if label is not None)
    categories = [*CORRECTNESS_LABELS, OTHER] if has_other else list(CORRECTNESS_LABELS)
    fig = _new_figure(7.5, 0.9 + 0.42 * len(rows))
    ax = fig.subplots()
    ticks = []
    for y, (s, labels) in enumerate(rows):
        shares, n = _shares(labels, categories)
        ticks.append(_mpl_text(f"{s.label} (n={n:,})", 48))
        left = 0.0
        for category, share in zip(categories, shares, strict=True):
            ax.barh(y, 100 * share, left=left, height=0.7, color=_LABEL_COLOURS[category],
                    label=category if y == 0 else None)
            if share >= 0.06:
                ax.text(left + 50 * share, y, f"{100 * share:.0f}%", ha="center", va="center", fontsize=8,
                        color="white" if category != "na" else "black")
            left += 100 * share
    ax.set_yticks(range(len(rows)), ticks)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of turns (%)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(categories), fontsize=8)
    return fig


def _position_bucket(position: int) -> int:
    return min(position, LATE_POSITION)


def _draw_positions(ctx: ReportContext) -> Figure | None:
    metrics = _metric_order({m for s in ctx.series for t in s.turns for m, v in t.scores.items() if v is not None})
    if not metrics:
        return None
    cols = min(4, len(metrics) + 1)  # one panel is left for the legend
    rows = math.ceil((len(metrics) + 1) / cols)
    fig = _new_figure(2.45 * cols, 2.05 * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    buckets = [b for b in range(LATE_POSITION + 1)
               if any(_position_bucket(t.position) == b for s in ctx.series for t in s.turns)]
    labels = [f"{b + 1}+" if b == LATE_POSITION else str(b + 1) for b in buckets]
    handles = []
    for ax, metric in zip(axes, metrics, strict=False):
        for s in ctx.series:
            sums: dict[int, float] = defaultdict(float)
            counts: dict[int, int] = defaultdict(int)
            for t in s.turns:
                value = t.scores.get(metric)
                if value is not None:
                    b = _position_bucket(t.position)
                    sums[b] += value
                    counts[b] += 1
            xs = [i for i, b in enumerate(buckets) if counts[b]]
            ys = [sums[buckets[i]] / counts[buckets[i]] for i in xs]
            (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.3, color=s.colour)
            if metric == metrics[0]:
                handles.append(line)
        ax.set_title(METRIC_LABELS.get(metric, _mpl_text(metric)))
        step = max(1, math.ceil(len(buckets) / 6))
        ax.set_xticks(range(0, len(buckets), step), labels[::step])
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    for ax in axes[len(metrics):]:
        ax.axis("off")
    axes[len(metrics)].legend(handles, [_mpl_text(s.label) for s in ctx.series], loc="center", fontsize=8)
    fig.supxlabel("student turn in the dialogue", fontsize=9)
    return fig


#: Word-count bins [edge, next edge) of the length figure: about two bins per doubling, so short
#: real turns and long generated ones are both resolved.
_LENGTH_EDGES = (0, 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)


def _length_bin(words: int) -> int:
    return max(i for i, edge in enumerate(_LENGTH_EDGES) if words >= edge)


def _length_labels() -> list[str]:
    labels = []
    for i, lo in enumerate(_LENGTH_EDGES):
        hi = _LENGTH_EDGES[i + 1] - 1 if i + 1 < len(_LENGTH_EDGES) else None
        labels.append(f"{lo}+" if hi is None else str(lo) if hi == lo else f"{lo}–{hi}")
    return labels


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _draw_lengths(ctx: ReportContext) -> Figure | None:
    real_words = [[_words(t.real) for t in s.turns if t.real is not None] for s in ctx.real]
    sim_pairs = [[(_words(t.real), _words(t.candidate)) for t in s.turns if t.real is not None
                  and t.candidate is not None] for s in ctx.series]
    if not any(real_words) and not any(sim_pairs):
        return None
    n_bins = 1 + max([_length_bin(w) for ws in real_words for w in ws]
                     + [_length_bin(w) for ps in sim_pairs for p in ps for w in p] + [0])
    from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter

    labels = _length_labels()[:n_bins]
    fig = _new_figure(9.0, 3.4)
    hist_ax, cond_ax = fig.subplots(1, 2)

    def histogram(ax, words: list[int], s: Series, name: str) -> None:
        counts = Counter(_length_bin(w) for w in words)
        ax.plot(range(n_bins), [100 * counts[b] / len(words) for b in range(n_bins)], drawstyle="steps-mid",
                color=s.colour, linewidth=2.2 if s.real else 1.4, linestyle="--" if s.real else "-",
                label=_mpl_text(f"{name} (median {_median(words):g})", 48))

    for s, words in zip(ctx.real, real_words, strict=True):
        if words:
            histogram(hist_ax, words, s, s.label)
    for s, pairs in zip(ctx.series, sim_pairs, strict=True):
        if pairs:
            histogram(hist_ax, [c for _, c in pairs], s, s.label)
    hist_ax.set_title("Length of turns")
    hist_ax.set_xlabel("words")
    hist_ax.set_ylabel("share of turns (%)")
    hist_ax.legend(fontsize=7)

    # Conditional on the real turn's length: does the simulator answer long turns at length and
    # short ones briefly? The dashed line is where a simulator matching the real length would be.
    reference = defaultdict(list)
    for pairs in sim_pairs:
        for real, _ in pairs:
            reference[_length_bin(real)].append(real)
    xs = sorted(reference)
    if xs:
        cond_ax.plot(xs, [max(_median(reference[b]), 0.5) for b in xs], color=_REAL_COLOUR, linestyle="--",
                     linewidth=1.2, label="same length as real")
    for s, pairs in zip(ctx.series, sim_pairs, strict=True):
        by_bin = defaultdict(list)
        for real, cand in pairs:
            by_bin[_length_bin(real)].append(cand)
        xs = sorted(by_bin)
        cond_ax.plot(xs, [max(_median(by_bin[b]), 0.5) for b in xs], marker="o", markersize=3, linewidth=1.4,
                     color=s.colour, label=_mpl_text(s.label))
    cond_ax.set_yscale("log")
    cond_ax.yaxis.set_major_locator(FixedLocator([1, 2, 5, 10, 20, 50, 100, 200, 500]))
    cond_ax.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    cond_ax.yaxis.set_minor_formatter(NullFormatter())
    cond_ax.set_title("Simulated length by real length")
    cond_ax.set_xlabel("words in the real turn")
    cond_ax.set_ylabel("median words, simulated")
    cond_ax.legend(fontsize=7)
    for ax in (hist_ax, cond_ax):
        ax.set_xticks(range(n_bins), labels, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.5, n_bins - 0.5)
        ax.tick_params(labelsize=8)
    return fig


#: Turn-level figures, in page order.
TURN_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig-acts", "Dialogue acts",
        "Share of each dialogue act among student turns: the annotated act of the real turns (hatched) "
        "and the act classifier's label of each simulator's turns. From details.acts of scores.jsonl.",
        _draw_acts,
    ),
    FigureSpec(
        "fig-correctness", "Correctness",
        "Correctness of student turns: the real turns' labels and the judge's verdict on each "
        "simulator's turns (na: no task to answer, or a purely conversational turn). From details.judge.",
        _draw_correctness,
    ),
    FigureSpec(
        "fig-position", "Metrics by turn position",
        f"Mean of each metric by the position of the student turn in its dialogue (1 = first student "
        f"turn); turns from position {LATE_POSITION + 1} on are pooled. One line per run.",
        _draw_positions,
    ),
    FigureSpec(
        "fig-length", "Turn length",
        "Left: distribution of turn lengths in words, real (dashed) and simulated. Right: median "
        "length of the simulated turn for real turns of each length; the dashed line is the real length.",
        _draw_lengths,
    ),
)

def _dialogue_figure_data(ctx: ReportContext, key: str) -> tuple[list[tuple[Series, Any]], list[tuple[Series, Any]]]:
    """``figures.<key>`` of each run's dialogue_results.json: one real entry per distinct real file
    (the first run's colour scheme), and one simulated entry per run."""
    real: list[tuple[Series, Any]] = []
    sim: list[tuple[Series, Any]] = []
    seen: dict[str, int] = {}
    for run, s in zip(ctx.runs, ctx.series, strict=True):
        if run.dialogue_results is None:
            continue
        figures = run.dialogue_results.raw.get("figures")
        entry = figures.get(key) if isinstance(figures, Mapping) else None
        if not isinstance(entry, Mapping):
            continue
        source = str(run.dialogue_results.raw.get("real") or "")
        if source not in seen and entry.get("real"):
            seen[source] = len(seen)
            label = "Real" if not seen[source] else f"Real · {Path(source).name}"
            colour = _REAL_COLOUR if not seen[source] else ("#999999", "#222222", "#777777")[(seen[source] - 1) % 3]
            real.append((Series(label, colour, (), real=True), entry["real"]))
        if entry.get("sim"):
            sim.append((s, entry["sim"]))
    return real, sim


def _draw_dialogue_acts(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "acts")
    rows = [(s, [label for label, k in counts.items() for _ in range(int(k))])
            for s, counts in real + sim if isinstance(counts, Mapping)]
    return _act_bars([(s, labels) for s, labels in rows if labels], "share of student turns (%)")


def _draw_dialogue_lengths(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "lengths")
    rows = [(s, [int(w) for w in v]) for s, v in real + sim if isinstance(v, list) and v]
    if not rows:
        return None
    n_bins = 1 + max(_length_bin(w) for _, words in rows for w in words)
    fig = _new_figure(7.5, 3.2)
    ax = fig.subplots()
    for s, words in rows:
        counts = Counter(_length_bin(w) for w in words)
        ax.plot(range(n_bins), [100 * counts[b] / len(words) for b in range(n_bins)], drawstyle="steps-mid",
                color=s.colour, linewidth=2.2 if s.real else 1.4, linestyle="--" if s.real else "-",
                label=_mpl_text(f"{s.label} (median {_median(words):g}, n={len(words):,})", 60))
    ax.set_xticks(range(n_bins), _length_labels()[:n_bins], rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.5, n_bins - 0.5)
    ax.set_xlabel("words per student turn")
    ax.set_ylabel("share of student turns (%)")
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7)
    return fig


def _draw_mastery(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "mastery")
    rows = [(s, [float(v) for v in curve]) for s, curve in real + sim if isinstance(curve, list) and curve]
    if not rows:
        return None
    fig = _new_figure(7.5, 3.2)
    ax = fig.subplots()
    for s, curve in rows:
        ax.plot(range(1, len(curve) + 1), curve, marker="o", markersize=3, color=s.colour,
                linewidth=2.2 if s.real else 1.4, linestyle="--" if s.real else "-", label=_mpl_text(s.label, 60))
    ax.set_xlabel("student turn in the dialogue")
    ax.set_ylabel("mean predicted mastery")
    ax.set_ylim(0, 1)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.legend(fontsize=7)
    return fig


#: Figures of the dialogue-level section (``figures`` of ``dialogue_results.json``), in page order.
DIALOGUE_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig-dialogue-acts", "Act mix over whole dialogues",
        "Share of each dialogue act among the student turns of the real dialogues (hatched) and of each "
        "simulator's rollouts, both labelled by the same act classifier (acts_jsd compares them).",
        _draw_dialogue_acts,
    ),
    FigureSpec(
        "fig-dialogue-length", "Student turn length over whole dialogues",
        "Distribution of words per student turn, real (dashed) and in each simulator's rollouts "
        "(length_w1 compares them on log1p(words)).",
        _draw_dialogue_lengths,
    ),
    FigureSpec(
        "fig-mastery", "Knowledge trajectories",
        "Mean mastery the knowledge-tracing model predicts after each student turn, averaged over the "
        "knowledge components of the question and over dialogues still running at that turn; real dashed "
        "(kt_gain_diff compares the gains). Shown when the profile configures the knowledge metric.",
        _draw_mastery,
    ),
)


_SVG_STYLE = re.compile(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>", re.S)


def _svg_markup(fig: Figure, salt: str, label: str) -> str:
    """Inline SVG for ``fig``: no XML prolog, no unreferenced ids (they would clash between figures
    of one page), no indentation, and an accessible name."""
    import matplotlib as mpl

    buffer = io.StringIO()
    with mpl.rc_context({**_RC, "svg.hashsalt": salt}):
        fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = _SVG_STYLE.sub("", svg, count=1)
    referenced = set(re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
    svg = re.sub(r' id="([^"]*)"', lambda m: m.group(0) if m.group(1) in referenced else "", svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    svg = re.sub(r">\s+<", "><", svg)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{_e(label)}" ', 1).strip()


def _render_figure(spec: FigureSpec, ctx: ReportContext) -> str:
    import matplotlib as mpl

    with mpl.rc_context(_RC):
        fig = spec.draw(ctx)
    if fig is None:
        body = '<p class="empty">No run in this report has the data for this figure.</p>'
    else:
        body = _svg_markup(fig, spec.id, spec.title)
    return (f'<figure id="{_e(spec.id)}">{body}'
            f"<figcaption><strong>{_e(spec.title)}.</strong> {_e(spec.caption)}</figcaption></figure>")


def _context(ranked: Sequence[RankedRun]) -> ReportContext:
    runs = tuple(r.run for r in ranked)
    names = _display_names(runs)
    series = tuple(Series(names[id(run)], _RUN_COLOURS[i] if i < len(_RUN_COLOURS) else f"C{i % 10}", run.turns)
                   for i, run in enumerate(runs))
    # Real turns are the same for runs on the same data file: one real series per file.
    groups: dict[str, Run] = {}
    for run in runs:
        groups.setdefault(run.data.sha256 or run.data.path or str(run.path), run)
    real = []
    for i, run in enumerate(groups.values()):
        label = "Real"
        if len(groups) > 1:
            label = f"Real · {Path(run.data.path).name if run.data.path else names[id(run)]}"
        colour = _REAL_COLOUR if i == 0 else ("#999999", "#222222", "#777777")[(i - 1) % 3]
        real.append(Series(label, colour, run.turns, real=True))
    return ReportContext(runs, MappingProxyType(names), series, tuple(real))


# --------------------------------------------------------------------------------------------- HTML


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


_CSS = """
:root { color-scheme: light; --fg: #1a1a1a; --muted: #5b5b5b; --line: #d9d9d9; --accent: #0a5ea8; --best: #e7f3ea; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header, main, footer { max-width: 1320px; margin: 0 auto; padding: 0 1.25rem; }
header { padding-top: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p, li, dd { max-width: 80ch; }
.muted, .empty { color: var(--muted); }
a { color: var(--accent); }
a:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
nav ol { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding: 0; margin: .8rem 0 0; list-style: none; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: .86rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: 0 0 .5rem; max-width: 110ch; }
th, td { padding: .35rem .45rem; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th[scope=col] { border-bottom: 2px solid var(--fg); white-space: nowrap; vertical-align: bottom; }
th.wrap { white-space: normal; max-width: 6.5rem; }
th[scope=row] { min-width: 8rem; }
td.text, th.text { text-align: left; }
th[scope=row] { text-align: left; font-weight: 600; }
tbody.published td, tbody.published th[scope=row] { color: var(--muted); font-weight: normal; }
tbody.published th[scope=rowgroup] { text-align: left; font-weight: 600; padding-top: 1rem;
  border-bottom: 2px solid var(--line); }
td.best { background: var(--best); }
.mean { font-weight: 600; }
.sub { display: block; font-size: .76rem; color: var(--muted); white-space: nowrap; }
.badge { display: inline-block; margin-left: .3rem; padding: 0 .3rem; border-radius: .6rem; font-size: .68rem;
  font-weight: 700; color: #fff; background: #1b7a3a; vertical-align: .1em; }
.warn { color: #a23b00; }
figure { margin: 1.6rem 0; }
figure svg { display: block; width: 100%; height: auto; max-width: 980px; }
figure svg * { stroke-linejoin: round; stroke-linecap: butt; }
figcaption { font-size: .88rem; color: var(--muted); max-width: 100ch; margin-top: .4rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; font-size: .9rem; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
code { font-size: .85em; }
details { margin: .5rem 0; }
pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; font-size: .8rem; }
.example { border-top: 1px solid var(--line); padding: .6rem 0; }
.example dl { grid-template-columns: minmax(8rem, max-content) 1fr; }
footer { margin-top: 3rem; padding-bottom: 2rem; font-size: .82rem; color: var(--muted); }
""".strip()


def _metric_header(metric: str) -> str:
    return f'<th scope="col" class="metric">{_e(METRIC_LABELS.get(metric, metric))} ↑</th>'


def _run_cell(run: Run, metric: str, best: bool) -> str:
    summary = run.metrics.get(metric)
    failed = run.failures.scoring.get(metric, 0)
    fail = f'<span class="sub warn">{failed:,} not scored</span>' if failed else ""
    if summary is None:
        return f'<td><span class="muted" title="not evaluated">—</span>{fail}</td>'
    badge = '<span class="badge">best</span>' if best else ""
    parts = [f'<span class="mean">{_f(summary.mean)}</span>{badge}']
    if summary.ci95:
        parts.append(f'<span class="sub" title="95% confidence interval">{_f(summary.ci95[0], 3)}–'
                     f"{_f(summary.ci95[1], 3)}</span>")
    stats = [f"n={summary.n:,}" if summary.n is not None else None,
             f"sd {_f(summary.std, 3)}" if summary.std is not None else None]
    if any(stats):
        parts.append(f'<span class="sub">{_e(" · ".join(s for s in stats if s))}</span>')
    qwk = summary.extra.get("qwk")
    if isinstance(qwk, int | float) and not isinstance(qwk, bool):
        parts.append(f'<span class="sub">QWK {qwk:.3f}</span>')
    cls = ' class="best"' if best else ""
    return f"<td{cls}>{''.join(parts)}{fail}</td>"


def _failed_simulations(run: Run) -> str:
    n = run.failures.simulation
    return f'<span class="sub warn">{n:,} simulation{"s" if n != 1 else ""} failed</span>' if n else ""


def _table1(ranked: Sequence[RankedRun], names: Mapping[int, str]) -> str:
    runs = [r.run for r in ranked]
    metrics = _table_metrics(runs)
    many = len(runs) > 1
    head = ('<tr><th scope="col">Rank</th><th scope="col" class="text">Simulator</th>'
            '<th scope="col" class="text">Profile / model</th>'
            + "".join(_metric_header(m) for m in metrics)
            + '<th scope="col" class="wrap">Mean rank</th></tr>')
    body = []
    for entry in ranked:
        run = entry.run
        body.append(
            f'<tr data-kind="run" data-run="{_e(run.name)}">'
            f"<td>{entry.rank if entry.rank is not None else '—'}</td>"
            f'<th scope="row" class="text">{_e(names[id(run)])}{_failed_simulations(run)}</th>'
            f'<td class="text">{_e(run.profile or "—")}</td>'
            + "".join(_run_cell(run, m, m in entry.best) for m in metrics)
            + f"<td>{_f(entry.mean_rank, 2)}</td></tr>"
        )
    published = [
        f'<tr><th scope="rowgroup" colspan="{len(metrics) + 4}">Published (not reproduced here): '
        f"{_e(PAPER)}, Table 1, {_e(TABLE1_SPLIT)}. Means only; shown for orientation.</th></tr>"
    ]
    for row in TABLE1:
        published.append(
            f'<tr data-kind="published"><td>—</td><th scope="row" class="text">{_e(row.method)}</th>'
            f'<td class="text" title="{_e(row.note)}">{_e(row.model)}</td>'
            + "".join(f"<td>{_f(row.metrics.get(m))}</td>" for m in metrics)
            + "<td>—</td></tr>"
        )
    what = "Leaderboard" if many else "Results"
    caption = (
        f"<strong>{what}.</strong> Each cell: the mean of the metric over the student turns where it applies; "
        "below it the 95% confidence interval, then the number of scored turns (n) and the standard deviation "
        "(sd), as written by simhub eval (for knowledge also the quadratic-weighted kappa, QWK), and turns whose "
        "simulation or scoring failed. Every metric "
        "lies in [0, 1] and higher is more realistic (↑). "
        + (_e(RANKING_RULE) + " " if many else "")
        + "The rows below the runs are the paper's published numbers, not produced by simhub: they are "
        "comparable only for runs on the same test split."
    )
    return (f'<div class="table-wrap"><table id="table1"><caption>{caption}</caption>'
            f'<thead>{head}</thead><tbody id="table1-runs">{"".join(body)}</tbody>'
            f'<tbody id="table1-published" class="published">{"".join(published)}</tbody></table></div>'
            f"{_validation_note()}")


def _validation_note() -> str:
    """The paper's validation of its metric models: how far a difference in a metric can be trusted."""
    models = "; ".join(
        f"{METRIC_LABELS.get(name, name).lower()} {v['statistic']} {v['value']:.4f}"
        + (f" ({v['note']})" if v.get("note") else "")
        for name, v in METRIC_MODEL_VALIDATION.items()
    )
    agreement = ", ".join(f"{name} {value:.2f}" for name, value in HUMAN_AGREEMENT.items())
    return (f'<p class="muted">Published validation of the paper\'s metric models (not reproduced here): '
            f"{_e(models)}. Agreement with human judgements (Cohen's κ; Pearson for linguistic): "
            f"{_e(agreement)}.</p>")


def _dialogue_detail(metric: str, details: Any) -> list[str]:
    """The numbers behind a dialogue-level value, where the file has them."""
    d = details.get(metric) if isinstance(details, Mapping) else None
    if not isinstance(d, Mapping):
        return []

    def num(key: str) -> float | None:
        value = d.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    if metric == "tutor_sensitivity" and num("real_delta") is not None:
        return [f"Δ real {_f(num('real_delta'), 3)}, simulated {_f(num('sim_delta'), 3)}"]
    if metric == "pi_calibrated" and num("pi") is not None:
        parts = [f"PI {_f(num('pi'), 3)}", f"ties {_f(num('tie_rate'), 3)}"]
        if num("hh") is not None and num("pp") is not None:
            parts.append(f"HH {_f(num('hh'), 3)}, PP {_f(num('pp'), 3)}")
        return [" · ".join(parts)]
    if metric == "kt_gain_diff" and num("real_mean") is not None:
        return [f"gain real {_f(num('real_mean'), 3)}, simulated {_f(num('sim_mean'), 3)}"]
    return []


def _dialogue_section(ctx: ReportContext) -> str | None:
    runs = [r for r in ctx.runs if r.dialogue_results is not None]
    if not runs:
        return None
    metrics: list[str] = []
    for run in runs:
        metrics += [m for m in run.dialogue_results.metrics if m not in metrics]
    head = '<tr><th scope="col" class="text">Metric</th>' + "".join(
        f'<th scope="col">{_e(ctx.names[id(r)])}</th>' for r in runs) + "</tr>"
    rows = []
    for metric in metrics:
        cells = []
        for run in runs:
            value = run.dialogue_results.metrics.get(metric)
            if value is None:
                cells.append('<td class="muted">—</td>')
                continue
            sub = []
            if value.ci95:
                sub.append(f"95% CI {_f(value.ci95[0], 3)}–{_f(value.ci95[1], 3)}")
            if value.n is not None:
                sub.append(f"n={value.n:,} dialogues")
            failed = run.dialogue_results.raw.get("failed_rollouts")
            if isinstance(failed, int) and failed:
                sub.append(f"{failed:,} failed rollouts left out")
            sub += _dialogue_detail(metric, run.dialogue_results.raw.get("details"))
            stability = run.dialogue_results.raw.get("stability_sd")
            sd = stability.get(metric) if isinstance(stability, Mapping) else None
            if isinstance(sd, int | float):
                sub.append(f"between-sample SD {_f(sd, 3)}")
            cells.append(f'<td><span class="mean">{_f(value.value)}</span>'
                         + "".join(f'<span class="sub">{_e(s)}</span>' for s in sub) + "</td>")
        rows.append(f'<tr><th scope="row" class="text">{_e(metric)}</th>{"".join(cells)}</tr>')
    table = (
        '<div class="table-wrap"><table id="dialogue-table"><caption>Dialogue-level realism from '
        "dialogue_results.json: each number compares whole simulated dialogues with the real ones. Unlike the "
        "turn-level metrics these are not all 'higher is better'; see each metric's documentation.</caption>"
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    figures = "".join(_render_figure(spec, ctx) for spec in DIALOGUE_FIGURES)
    return ('<section id="dialogue-level" aria-labelledby="dialogue-level-h"><h2 id="dialogue-level-h">'
            f"Dialogue-level realism</h2>{table}{figures}</section>")


def _clip(text: str | None) -> str:
    if text is None:
        return '<span class="muted">(none)</span>'
    shown = text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + "…"
    return _e(shown) if shown.strip() else '<span class="muted">(empty)</span>'


def _examples(ctx: ReportContext) -> str:
    """A few turns, the same for every run, so a reader can see what the numbers are about."""
    keyed = [{(t.dialogue_id, t.turn_index): t for t in run.turns} for run in ctx.runs]
    common = set(keyed[0]).intersection(*keyed[1:]) if keyed else set()
    keys = sorted(common, key=lambda k: (k[0], k[1]))
    if len(keys) > N_EXAMPLES:
        keys = [keys[round(i * (len(keys) - 1) / (N_EXAMPLES - 1))] for i in range(N_EXAMPLES)]
    if not keys:
        return '<p class="empty">The runs have no scored turn in common.</p>'
    items = []
    for dialogue_id, turn_index in keys:
        first = keyed[0][(dialogue_id, turn_index)]
        real_note = " · ".join(x for x in (first.real_act, first.real_label) if x)
        real_sub = f'<span class="sub">{_e(real_note)}</span>' if real_note else ""
        rows = [f"<dt>Real{real_sub}</dt><dd>{_clip(first.real)}</dd>"]
        for run, turns in zip(ctx.runs, keyed, strict=True):
            t = turns[(dialogue_id, turn_index)]
            note = " · ".join(x for x in (t.predicted_act, t.verdict) if x)
            if t.error:
                note = f"{note} · error: {t.error}" if note else f"error: {t.error}"
            sub = f'<span class="sub">{_e(note)}</span>' if note else ""
            rows.append(f"<dt>{_e(ctx.names[id(run)])}{sub}</dt><dd>{_clip(t.candidate)}</dd>")
        items.append(f'<div class="example"><h3>Dialogue {_e(dialogue_id)}, turn {turn_index} '
                     f'(student turn {first.position + 1})</h3><dl>{"".join(rows)}</dl></div>')
    return "".join(items)


def _provenance(run: Run, name: str) -> str:
    d = run.data
    knowledge = run.metrics.get("knowledge")
    items: list[tuple[str, str]] = [
        ("Run directory", f"<code>{_e(run.name)}</code>"),
        ("Simulator", _e(run.simulator)),
        ("Profile", _e(run.profile or "—")),
        ("Data", f"<code>{_e(d.path or '—')}</code>"),
        ("Data sha256", f"<code>{_e(d.sha256 or '—')}</code>"),
        ("Dialogues / turns", f"{'—' if d.dialogues is None else f'{d.dialogues:,}'} / "
                              f"{'—' if d.turns is None else f'{d.turns:,}'}"),
        ("Scored turns (scores.jsonl)", f"{len(run.turns):,}"),
        ("Failed simulations", f"{run.failures.simulation:,}"),
        ("Failed scoring", _e(", ".join(f"{k}: {v:,}" for k, v in run.failures.scoring.items() if v) or "none")),
        ("simhub version", _e(run.simhub_version or "—")),
        ("Created", _e(run.created or "—")),
    ]
    if knowledge is not None:
        items.append(("Knowledge cutoffs", _e(knowledge.extra.get("cutoff_source") or "—")))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items)
    config = ""
    if run.config:
        config = (f"<details><summary>Configuration</summary><pre>"
                  f"{_e(json.dumps(dict(run.config), indent=2, sort_keys=True, default=str))}</pre></details>")
    return f"<h3>{_e(name)}</h3><dl>{dl}</dl>{config}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("simhub")
    except Exception:  # not installed as a distribution (running from a source tree)
        import simhub

        return getattr(simhub, "__version__", "unknown")


def render_report(runs: Sequence[Run], *, title: str | None = None) -> str:
    """The report page for already loaded runs, as a string (see :func:`write_report`)."""
    require("matplotlib", "report")
    if not runs:
        raise ConfigError("a report needs at least one run directory", field="run_dirs")
    ranked = rank_runs(runs)
    ctx = _context(ranked)
    names = ctx.names
    if title is None:
        shown = ", ".join(names[id(r)] for r in ctx.runs[:4]) + (", …" if len(ctx.runs) > 4 else "")
        title = f"Simulated-student realism: {shown}"
    version = _version()
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")

    sections = [
        ("table1-section", "Leaderboard" if len(runs) > 1 else "Table 1", _table1(ranked, names)),
        ("figures", "Distributions", "".join(_render_figure(spec, ctx) for spec in TURN_FIGURES)),
    ]
    dialogue = _dialogue_section(ctx)
    nav_extra = [("dialogue-level", "Dialogue-level realism")] if dialogue else []
    sections_html = [
        f'<section id="{sid}" aria-labelledby="{sid}-h"><h2 id="{sid}-h">{_e(head)}</h2>{body}</section>'
        for sid, head, body in sections
    ]
    if dialogue:
        sections_html.append(dialogue)
    sections_html.append('<section id="examples" aria-labelledby="examples-h"><h2 id="examples-h">Examples</h2>'
                         "<p>The same real turns for every run, with each simulator's turn in their place "
                         f"(real act · correctness label; predicted act · judge verdict).</p>{_examples(ctx)}"
                         "</section>")
    sections_html.append('<section id="provenance" aria-labelledby="provenance-h"><h2 id="provenance-h">'
                         "Provenance</h2>" + "".join(_provenance(r, names[id(r)]) for r in ctx.runs) + "</section>")
    nav = [(sid, head) for sid, head, _ in sections] + nav_extra + [("examples", "Examples"),
                                                                    ("provenance", "Provenance")]
    nav_html = "".join(f'<li><a href="#{sid}">{_e(head)}</a></li>' for sid, head in nav)
    plural = "s" if len(runs) > 1 else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="simhub {_e(version)}"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><p class="muted">{len(runs)} run{plural} · turn-level realism of simulated '
        "students against the real student turns they replace (teacher forcing) · generated "
        f'{generated} by simhub {_e(version)}</p><nav aria-label="Contents"><ol>{nav_html}</ol></nav></header>'
        f"<main>{''.join(sections_html)}</main>"
        "<footer>This page is self-contained: it loads nothing from the network. Published rows: "
        f"{_e(PAPER)}.</footer></body></html>\n"
    )


def write_report(run_dirs: Sequence[str | PathLike[str] | Run], output: str | PathLike[str], *,
                 title: str | None = None) -> Path:
    """Write the HTML report over ``run_dirs`` (folders, or runs already read by :func:`load_run`) to
    ``output`` atomically; returns the file written.

    ``output`` may be an existing directory, in which case the page is ``report.html`` inside it.
    Raises :class:`~simhub.errors.DataError` for a broken run directory and
    :class:`~simhub.errors.MissingExtraError` when matplotlib (``simhub[report]``) is missing,
    before anything is written.
    """
    require("matplotlib", "report")
    if not run_dirs:
        raise ConfigError("a report needs at least one run directory", field="run_dirs")
    runs = [d if isinstance(d, Run) else load_run(d) for d in run_dirs]
    page = render_report(runs, title=title)
    target = Path(output)
    if target.is_dir():
        target = target / "report.html"
    atomic_write_bytes(target, page.encode("utf-8"))
    return target
