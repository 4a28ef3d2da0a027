"""Tutor-bench folders in ``simhub report`` and on the console, for every learner family.

* :func:`results_kind`: the ``kind`` of a folder's ``results.json``, by which ``simhub report``
  finds each folder's family (:func:`simhub.tutoring.family.bench_sections`);
* a family without a report of its own gets the kit's: :class:`KitResults` (per tutor, each declared
  output's :class:`~simhub.tutoring.estimates.Estimate`, and the ranking) built by
  :func:`summarize_outputs`, shown by :func:`format_leaderboard` and :func:`leaderboard_section`,
  every label, direction and digit read from the family's :class:`~simhub.tutoring.family.BenchOutput`
  declarations.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.runformat import read_document
from simhub.schema import atomic_write_bytes
from simhub.tutoring.estimates import Estimate, cell_html, cluster_estimate, escape, format_estimate, rank_values

#: ``fam`` below is a :class:`simhub.tutoring.family.LearnerFamily` (not imported: the family module
#: imports this one).

__all__ = ["KIT_RESULTS_VERSION", "EpisodeValues", "KitResults", "format_leaderboard", "leaderboard_section",
           "read_kit_results", "results_kind", "summarize_outputs", "write_kit_results"]

KIT_RESULTS_VERSION = 1


class EpisodeValues(msgspec.Struct, kw_only=True):
    """One finished episode's values of a family's outputs (None: not measured), its tutor and cluster."""

    tutor: str
    cluster: str
    values: dict[str, float | None]
    failed: str | None = None


class KitResults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The results document of a family that uses the kit's summary (``kind`` is the family's)."""

    schema_version: int = KIT_RESULTS_VERSION
    kind: str
    family: str
    created: str
    episodes: int
    failed: int
    #: Per tutor, each output's mean with its cluster-bootstrap interval.
    tutors: dict[str, dict[str, Estimate]]
    #: Per tutor, its rank on each ranked output and the mean of those ranks.
    ranks: dict[str, dict[str, float]]
    mean_rank: dict[str, float | None]
    failures: list[str] = msgspec.field(default_factory=list)
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    n_resamples: int = 2000
    seed: int = 0


def summarize_outputs(fam: Any, episodes: Sequence[EpisodeValues], *, settings: Mapping[str, Any] | None = None,
                      tutor_order: Sequence[str] | None = None, n_resamples: int = 2000, seed: int = 0) -> KitResults:
    """Per tutor, each declared output's mean with a cluster-bootstrap interval (failed episodes left
    out and counted), ranks on the ranked outputs (ties share their mean rank) and the mean rank."""
    tutors = list(dict.fromkeys([*(tutor_order or ()), *(e.tutor for e in episodes)]))
    # one order whatever the caller's (the bootstrap numbers its clusters by first appearance)
    ordered = sorted(episodes, key=lambda e: (tutors.index(e.tutor), e.cluster))
    table: dict[str, dict[str, Estimate]] = {}
    for tutor in tutors:
        ok = [e for e in ordered if e.tutor == tutor and e.failed is None]
        row = {}
        for o in fam.outputs:
            pairs = [(float(v), e.cluster) for e in ok if (v := e.values.get(o.name)) is not None]
            row[o.name] = cluster_estimate([v for v, _ in pairs], [c for _, c in pairs], n_resamples, seed)
        table[tutor] = row
    ranks: dict[str, dict[str, float]] = {t: {} for t in tutors}
    for o in fam.outputs:
        if o.ranked:
            for t, r in rank_values({t: table[t][o.name].mean for t in tutors}, o.higher_is_better).items():
                ranks[t][o.name] = r
    ranked = fam.ranked()
    mean_rank = {t: (float(np.mean([ranks[t][m] for m in ranked])) if ranked and all(m in ranks[t] for m in ranked)
                     else None) for t in tutors}
    failures = [e.failed for e in ordered if e.failed is not None]
    return KitResults(kind=fam.results_kind, family=fam.name, created=datetime.now(UTC).isoformat(timespec="seconds"),
                      episodes=len(episodes), failed=len(failures), tutors=table, ranks=ranks, mean_rank=mean_rank,
                      failures=failures, settings=dict(settings or {}), n_resamples=n_resamples, seed=seed)


def write_kit_results(results: KitResults, output: str | os.PathLike[str]) -> Path:
    path = Path(output) / "results.json"
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
    return path


def read_kit_results(path: str | os.PathLike[str]) -> KitResults:
    """A kit results document (its ``kind`` is its family's; a DataError naming the file when broken)."""
    kind = results_kind(Path(path).parent)
    return read_document(path, KitResults, kind or "?", (KIT_RESULTS_VERSION,),
                         "results ", "not tutor-bench results")


def _order(r: KitResults) -> list[str]:
    return sorted(r.tutors, key=lambda t: (r.mean_rank.get(t) is None, r.mean_rank.get(t) or 0.0))


def format_leaderboard(fam: Any, r: KitResults) -> str:
    """The kit's console table: one row per tutor (best mean rank first), one column per output."""
    width = max([len(t) for t in r.tutors] + [5])
    head = f"{'tutor':<{width}}  " + "".join(f"{o.label + ' ' + o.arrow:<24}" for o in fam.outputs) + "mean rank"
    lines = [head, "-" * len(head)]
    for t in _order(r):
        cells = "".join(f"{format_estimate(r.tutors[t].get(o.name), o.digits, scale=o.scale):<24}"
                        for o in fam.outputs)
        mr = r.mean_rank.get(t)
        lines.append(f"{t:<{width}}  {cells}{'-' if mr is None else f'{mr:.2f}'}")
    lines.append(f"{r.episodes} episodes, {r.failed} failed")
    return "\n".join(lines)


def leaderboard_section(fam: Any, folders: Sequence[str]) -> tuple[str, str, str]:
    """The kit's report section: per folder, the leaderboard of the declared outputs with intervals."""
    parts = []
    for folder in folders:
        r = read_kit_results(Path(folder) / "results.json")
        head = "".join(f"<th>{escape(o.label)} {o.arrow}</th>" for o in fam.outputs)
        rows = []
        for t in _order(r):
            cells = "".join(f"<td>{cell_html(r.tutors[t].get(o.name), o.digits, scale=o.scale)}</td>"
                            for o in fam.outputs)
            mr = r.mean_rank.get(t)
            rows.append(f'<tr><th scope="row">{escape(t)}</th>{cells}<td>{"—" if mr is None else f"{mr:.2f}"}</td></tr>')
        name = Path(folder).name or folder
        parts.append(f"<h3>{escape(name)}</h3><div class=\"table-wrap\"><table class=\"bench-leaderboard\">"
                     f"<caption>Means with cluster-bootstrap 95% intervals ({r.n_resamples} resamples) over "
                     f"{r.episodes} episodes ({r.failed} failed); the mean rank is over "
                     f"{escape(', '.join(fam.output(m).label for m in fam.ranked()) or 'no output')}.</caption>"
                     f"<thead><tr><th>tutor</th>{head}<th>mean rank ↓</th></tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table></div>")
    return (f"{fam.name}-bench", fam.title, "".join(parts))


def results_kind(folder: str | PathLike[str]) -> str | None:
    """The ``kind`` of ``folder/results.json`` (None when there is none or it is not JSON)."""
    path = Path(folder) / "results.json"
    if not path.is_file():
        return None
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None
