"""The leaderboard over runs, and Table 1 as plain data.

Rule (:data:`RANKING_RULE`): runs are ranked only on the metrics they share. The ranked columns are
the metrics every run with a metric reports; when no metric is reported by all of them, the runs that
report the most widely reported metric (the paper's order breaks ties) are ranked on the metrics they
share, and the others are listed unranked with the reason (as is a run that reports no metric). In
each ranked column, runs are ranked by their mean, best first: highest first, or lowest first for a
metric whose declared metadata says lower is better (``Output.higher_is_better``; the paper's seven
are all higher is better); tied means share the average of their places. A run's score is its mean
rank over the ranked columns; lower is better. Runs with equal mean ranks share a place and are
listed by simulator name, profile and directory. "Best" marks the best mean of a column when at
least two runs report it.

A column that some runs lack is never ranked: a run that was scored on one metric alone (the first-ten-minutes
floor, ``--metrics rouge_l``) and a run scored on all seven are ordered by ROUGE-L only, so the
leaderboard and ``simhub compare`` on that metric agree on which is better.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from simhub.evaluation.paper import METRICS, PAPER, TABLE1, TABLE1_SPLIT
from simhub.evaluation.rundir import Run, is_missing_label
from simhub.metrics import higher_is_better, label

RANKING_RULE = (
    "Runs are ranked only on the metrics they share: the columns every ranked run reports (when no metric "
    "is reported by every run, the runs reporting the most widely reported one are ranked on what they "
    "share, and the others are listed unranked with the reason). In each ranked column, runs are ranked "
    "by mean, best first (highest first, or lowest first for a metric declared lower-is-better); tied "
    "means share the average of their places. Runs are ordered by their mean rank over the ranked "
    "columns (lower is better); equal mean ranks share a place. 'best' marks the best mean of a column "
    "when two or more runs report it."
)


@dataclass(frozen=True, slots=True)
class RankedRun:
    """A run's place on the leaderboard (see :data:`RANKING_RULE`).

    ``rank`` is the shared 1-based place (None for an unranked run, ``unranked`` then says why),
    ``mean_rank`` the score it is sorted by, ``ranks`` its fractional rank per ranked column and
    ``best`` the columns where it has the highest mean.
    """

    run: Run
    rank: int | None
    mean_rank: float | None
    ranks: Mapping[str, float]
    best: frozenset[str]
    unranked: str | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """The columns runs were ranked on (:func:`ranked_columns`) and the reason for each run left out,
    keyed by ``id(run)``."""

    columns: tuple[str, ...]
    unranked: Mapping[int, str]

    def note(self, names: Mapping[int, str] | None = None) -> str:
        """The one line shown above the leaderboard: what the runs were ranked on, and who was not."""
        cols = ", ".join(label(m) for m in self.columns)
        line = (f"Ranked on the metric{'s' if len(self.columns) != 1 else ''} every ranked run reports: {cols}."
                if self.columns else "No run is ranked: no metric is reported by two runs or more.")
        if self.unranked:
            who = "; ".join(f"{names[k] if names else k}: {why}" for k, why in self.unranked.items())
            line += f" Unranked: {who}."
        return line


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


def _reported(run: Run) -> set[str]:
    return {m for m, s in run.metrics.items() if s is not None and s.mean is not None}


def ranked_columns(runs: Sequence[Run]) -> Ranking:
    """Which metric columns the runs are ranked on, and which runs are left unranked and why
    (the rule: :data:`RANKING_RULE`)."""
    reported = [_reported(r) for r in runs]
    unranked: dict[int, str] = {}
    scored = [i for i, own in enumerate(reported) if own]
    for i, own in enumerate(reported):
        if not own:
            unranked[id(runs[i])] = "it reports no metric"
    if not scored:
        return Ranking((), unranked)
    shared = set.intersection(*(reported[i] for i in scored))
    if not shared:
        counts = Counter(m for i in scored for m in reported[i])
        most = max(counts.values())
        anchor = next(m for m in metric_order(counts) if counts[m] == most)
        keep = [i for i in scored if anchor in reported[i]]
        shared = set.intersection(*(reported[i] for i in keep))
        names = ", ".join(label(m) for m in metric_order(shared))
        for i in scored:
            if i not in keep:
                unranked[id(runs[i])] = f"it does not report {names}, which the ranked runs share"
        scored = keep
    if len(scored) == 1 and len(runs) > 1:  # nothing to rank it against
        unranked.setdefault(id(runs[scored[0]]), "no other run reports a metric it reports")
        shared = set()
    in_order = {id(r): unranked[id(r)] for r in runs if id(r) in unranked}  # listed in the runs' order
    return Ranking(tuple(metric_order(shared)), in_order)


def rank_runs(runs: Sequence[Run]) -> list[RankedRun]:
    """Runs in leaderboard order, with their places, mean ranks and best columns; unranked runs last,
    each with its reason.

    The rule is :data:`RANKING_RULE` (also in the module docstring).
    """
    ranking = ranked_columns(runs)
    columns = list(ranking.columns)
    ranked_idx = [i for i, r in enumerate(runs) if id(r) not in ranking.unranked]
    ranks: list[dict[str, float]] = [{} for _ in runs]
    for metric in columns:
        sign = 1.0 if higher_is_better(metric) else -1.0  # rank on sign·mean: larger is always better
        values = {i: sign * _key(runs[i].metrics[metric].mean) for i in ranked_idx}
        for i, v in values.items():
            above, tied = sum(p > v for p in values.values()), sum(p == v for p in values.values())
            ranks[i][metric] = 1 + above + (tied - 1) / 2
    best: list[set[str]] = [set() for _ in runs]
    for metric in table_metrics(runs):
        sign = 1.0 if higher_is_better(metric) else -1.0
        present = {i: sign * _key(s.mean) for i, r in enumerate(runs)
                   if (s := r.metrics.get(metric)) is not None and s.mean is not None}
        if len(present) >= 2:
            top = max(present.values())
            for i, v in present.items():
                if v == top:
                    best[i].add(metric)

    entries = []
    for i, run in enumerate(runs):
        mean_rank = sum(ranks[i].values()) / len(columns) if columns and i in ranked_idx else None
        entries.append((run, mean_rank, ranks[i], best[i]))
    entries.sort(key=lambda e: (e[1] is None, round(e[1], 9) if e[1] is not None else 0.0,
                                e[0].simulator, e[0].profile or "", str(e[0].path)))
    ranked = []
    for run, mean_rank, run_ranks, run_best in entries:
        place = None
        if mean_rank is not None:
            place = 1 + sum(1 for _, other, _, _ in entries
                            if other is not None and round(other, 9) < round(mean_rank, 9))
        ranked.append(RankedRun(run, place, mean_rank, MappingProxyType(run_ranks), frozenset(run_best),
                                ranking.unranked.get(id(run))))
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
    ranking = ranked_columns(runs)
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
            "unranked": entry.unranked,
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
        "ranked_on": list(ranking.columns),
        "ranking_note": ranking.note(names),
        "runs": rows,
        "published": {
            "source": PAPER,
            "split": TABLE1_SPLIT,
            "note": "published (not reproduced here)",
            "rows": [row.as_dict() for row in TABLE1],
        },
    }

