"""The leaderboard over runs, and Table 1 as plain data.

Rule (:data:`RANKING_RULE`): in every metric column that at least one run reports, runs are ranked
by their mean, best first: highest first, or lowest first for a metric whose declared metadata says
lower is better (``Output.higher_is_better``; the paper's seven are all higher is better); tied
means share the average of their places, and a run without a value in that column ranks below all
runs that have one. A run's score is its mean rank over those columns; lower is better. Runs with
equal mean ranks share a place and are listed by simulator name, profile and directory. "Best"
marks the best mean of a column when at least two runs report it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from simhub.evaluation.paper import METRICS, PAPER, TABLE1, TABLE1_SPLIT
from simhub.evaluation.rundir import Run, is_missing_label
from simhub.metrics import higher_is_better

RANKING_RULE = (
    "Runs are ordered by their mean rank over the metric columns (lower is better). In each column "
    "that at least one run reports, runs are ranked by mean, best first (highest first, or lowest first "
    "for a metric declared lower-is-better); tied means share the average of their places, and a run "
    "without a value ranks below every run with one. Equal mean ranks share a place. 'best' marks the "
    "best mean of a column when two or more runs report it."
)


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




@dataclass(frozen=True, slots=True)
class NullCounts:
    """Turns of one metric without a value for a reason worth showing: ``failed`` (the scoring failed:
    a model or request error) and ``no_label`` (the real turn has no label, nothing to compare with)."""

    failed: int = 0
    no_label: int = 0


def null_counts(run: Run) -> dict[str, NullCounts]:
    """Per metric, the run's failed scorings and real turns without a label.

    Counted from the null reasons of ``scores.jsonl`` when its turns carry them; runs whose turns
    record no reasons fall back to ``results.json``'s ``failures.scoring`` (which runs written
    before this rule counted missing labels in).
    """
    failed: Counter[str] = Counter()
    no_label: Counter[str] = Counter()
    recorded = False
    for turn in run.turns:
        reasons = turn.details.get("null_reasons")
        if not isinstance(reasons, Mapping):
            continue
        recorded = True
        for metric, reason in reasons.items():
            if turn.scores.get(metric) is not None or not isinstance(reason, str):
                continue
            if is_missing_label(reason):
                no_label[metric] += 1
            elif "failed" in reason:
                failed[metric] += 1
    if not recorded:
        return {m: NullCounts(failed=n) for m, n in run.failures.scoring.items() if n}
    return {m: NullCounts(failed[m], no_label[m]) for m in sorted({*failed, *no_label})}


def metric_order(names: Iterable[str]) -> list[str]:
    """The paper's order first, then any other metric (a plugin) alphabetically."""
    names = set(names)
    return [m for m in METRICS if m in names] + sorted(names - set(METRICS))


def table_metrics(runs: Sequence[Run]) -> list[str]:
    """Metric columns of Table 1: the paper's seven, plus any other metric a run reports."""
    return metric_order({*METRICS, *(name for run in runs for name in run.metrics)})


def _key(value: float) -> float:
    # Means read from JSON that print the same to 12 places are the same mean.
    return round(value, 12)


def rank_runs(runs: Sequence[Run]) -> list[RankedRun]:
    """Runs in leaderboard order, with their places, mean ranks and best columns.

    The rule is :data:`RANKING_RULE` (also in the module docstring).
    """
    columns = [m for m in table_metrics(runs)
               if any(r.metrics.get(m) and r.metrics[m].mean is not None for r in runs)]
    ranks: list[dict[str, float]] = [{} for _ in runs]
    best: list[set[str]] = [set() for _ in runs]
    for metric in columns:
        sign = 1.0 if higher_is_better(metric) else -1.0  # rank on sign·mean: larger is always better
        values = [sign * _key(s.mean) if (s := r.metrics.get(metric)) and s.mean is not None else None for r in runs]
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


def display_names(runs: Sequence[Run]) -> dict[int, str]:
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
    ``no_label`` (real turns without a label: not failures), ``rank`` (fractional, per column) and
    ``best``; :func:`null_counts` says how failures and missing labels are told apart.
    """
    names = display_names(runs)
    rows = []
    for entry in rank_runs(runs):
        run = entry.run
        nulls = null_counts(run)
        metrics = {}
        for metric in table_metrics(runs):
            summary = run.metrics.get(metric)
            if summary is None:
                continue
            metrics[metric] = {
                "mean": summary.mean, "std": summary.std, "n": summary.n,
                "ci95": list(summary.ci95) if summary.ci95 else None,
                **dict(summary.extra),
                "failures": nulls.get(metric, NullCounts()).failed,
                "no_label": nulls.get(metric, NullCounts()).no_label,
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
            "failures": {"simulation": run.failures.simulation,
                         "scoring": {m: nulls.get(m, NullCounts()).failed
                                     for m in dict.fromkeys([*run.failures.scoring, *nulls])}},
            "no_label": {m: n.no_label for m, n in nulls.items() if n.no_label},
        })
    return {
        "metrics": table_metrics(runs),
        "ranking_rule": RANKING_RULE,
        "runs": rows,
        "published": {
            "source": PAPER,
            "split": TABLE1_SPLIT,
            "note": "published (not reproduced here)",
            "rows": [row.as_dict() for row in TABLE1],
        },
    }

