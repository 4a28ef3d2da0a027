"""``simhub tutor-bench agree``: does the simulated learner order tutors the way people did?

KnowSim's validation protocol, against human ratings in a CSV file with one rating per row:

    block,level,condition,metric,value
    math-strategy,novice,scripted:stepwise,dc,7

``block`` (optional; one block if absent) groups conditions compared with one another, e.g. a study
arm; ``level`` is novice, intermediate or advanced; ``condition`` names a tutor of the run; ``metric``
is ``kg``, ``dc`` or ``co`` (or any other metric of the run's conversations, such as ``nkg``, and
``iq`` when an IQ rater ran);
``value`` is a number. Higher means more of the metric on both sides (a human overload rating as CO).

* **Sign agreement.** Within each (block, level) and metric, every pair of conditions is a contrast.
  The human effect is Cliff's δ = P(X > Y) − P(X < Y) over the ratings. A contrast is *high-signal*
  when |δ_human| ≥ ``threshold`` (0.15); it agrees when the simulator's δ over its conversations has
  the same sign (a zero δ does not agree). The agreement rate is tested against chance with a
  one-sided exact binomial test (p = 0.5).
* **Cell-level Spearman.** Per metric, the mean of every (block, level, condition) cell on each side
  is z-normalised within its (block, level); ρ is Spearman's over the cells, its p-value two-sided
  from ``n_permutations`` seeded shuffles.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec
import numpy as np

from simhub.errors import DataError
from simhub.learners.state import LEVELS
from simhub.tutoring.knowsim.trace import Trace

AGREE_KIND = "simhub-tutor-bench-agreement"
AGREE_VERSION = 1
COLUMNS = ("level", "condition", "metric", "value")


class Contrast(msgspec.Struct, kw_only=True):
    block: str
    level: str
    metric: str
    a: str
    b: str
    human_delta: float
    sim_delta: float | None
    high_signal: bool
    agrees: bool | None


class SignAgreement(msgspec.Struct, kw_only=True):
    agree: int
    high_signal: int
    rate: float | None
    p: float | None


class CellCorrelation(msgspec.Struct, kw_only=True):
    cells: int
    rho: float | None
    p: float | None


class HumanAgreement(msgspec.Struct, kw_only=True):
    schema_version: int = AGREE_VERSION
    kind: str = AGREE_KIND
    threshold: float
    pooled: SignAgreement
    by_metric: dict[str, SignAgreement]
    by_level: dict[str, SignAgreement]
    spearman: dict[str, CellCorrelation]
    contrasts: list[Contrast]
    missing_cells: list[str]


def cliffs_delta(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) − P(X < Y) over all pairs."""
    if not len(x) or not len(y):
        raise DataError("Cliff's delta needs values on both sides", field="value")
    a, b = np.asarray(x, dtype=float)[:, None], np.asarray(y, dtype=float)[None, :]
    return float(((a > b).sum() - (a < b).sum()) / (a.size * b.size))


def binomial_greater(k: int, n: int) -> float:
    """One-sided exact binomial p-value P(X ≥ k) for X ~ Bin(n, 1/2)."""
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float], *, n_permutations: int = 10_000, seed: int = 0
             ) -> tuple[float | None, float | None]:
    """Spearman's ρ (average ranks for ties) and a two-sided permutation p-value."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < 3:
        return None, None
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None, None
    rho = float(np.corrcoef(ra, rb)[0, 1])
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_permutations):
        if abs(np.corrcoef(ra, rng.permutation(rb))[0, 1]) >= abs(rho) - 1e-12:
            hits += 1
    return rho, (hits + 1) / (n_permutations + 1)


def read_human(path: str | os.PathLike[str]) -> dict[tuple[str, str, str, str], list[float]]:
    """Ratings by (block, level, condition, metric); errors name the file, row and column."""
    path = Path(path)
    try:
        fh = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})", file=str(path)) from None
    out: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}: missing column {', '.join(missing)} (needs {', '.join(COLUMNS)}, block optional)",
                            file=str(path), column=missing[0])
        for row_no, row in enumerate(reader, start=2):
            level = (row["level"] or "").strip()
            if level not in LEVELS:
                raise DataError(f"{path}:{row_no}: level {level!r} is not one of {', '.join(LEVELS)}", file=str(path),
                                row=row_no, column="level")
            try:
                value = float(row["value"])
            except (TypeError, ValueError):
                raise DataError(f"{path}:{row_no}: value {row['value']!r} is not a number", file=str(path),
                                row=row_no, column="value") from None
            if not math.isfinite(value):
                raise DataError(f"{path}:{row_no}: value must be finite", file=str(path), row=row_no, column="value")
            key = ((row.get("block") or "all").strip(), level, row["condition"].strip(), row["metric"].strip())
            out[key].append(value)
    if not out:
        raise DataError(f"{path}: no ratings", file=str(path))
    return out


def _sim_values(traces: Sequence[Trace]) -> dict[tuple[str, str, str], list[float]]:
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for t in traces:
        if t.failed is not None or t.metrics is None:
            continue
        for name, value in msgspec.structs.asdict(t.metrics).items():
            if isinstance(value, int | float):
                out[(t.level, t.tutor, name)].append(float(value))
        if t.iq is not None:  # the IQ rater's score, against the survey's interaction-quality item
            out[(t.level, t.tutor, "iq")].append(float(t.iq))
    return out


def _summary(contrasts: Sequence[Contrast]) -> SignAgreement:
    hs = [c for c in contrasts if c.high_signal and c.agrees is not None]
    agree = sum(bool(c.agrees) for c in hs)
    return SignAgreement(agree=agree, high_signal=len(hs), rate=agree / len(hs) if hs else None,
                         p=binomial_greater(agree, len(hs)) if hs else None)


def agreement(human: Mapping[tuple[str, str, str, str], list[float]], traces: Sequence[Trace], *,
              threshold: float = 0.15, n_permutations: int = 10_000, seed: int = 0) -> HumanAgreement:
    sim = _sim_values(traces)
    known_metrics = {m for (_, _, m) in sim}
    for (_, _, _, metric) in human:
        if known_metrics and metric not in known_metrics:
            raise DataError(f"human ratings: metric {metric!r} is not a metric of the run's conversations "
                            f"({', '.join(sorted(known_metrics))})", field="metric")
    cells: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(dict)
    for (block, level, cond, metric), values in human.items():
        cells[(block, level, metric)][cond] = values
    contrasts: list[Contrast] = []
    missing: list[str] = []
    spearman_cells: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)
    for (block, level, metric), by_cond in sorted(cells.items()):
        conds = sorted(by_cond)
        for cond in conds:
            if not sim.get((level, cond, metric)):
                missing.append(f"{block}/{level}/{cond}/{metric}")
        for a, b in itertools.combinations(conds, 2):
            hd = cliffs_delta(by_cond[a], by_cond[b])
            sa, sb = sim.get((level, a, metric)), sim.get((level, b, metric))
            sd = cliffs_delta(sa, sb) if sa and sb else None
            high = abs(hd) >= threshold
            agrees = None if sd is None else (sd != 0 and math.copysign(1, sd) == math.copysign(1, hd))
            contrasts.append(Contrast(block=block, level=level, metric=metric, a=a, b=b, human_delta=hd, sim_delta=sd,
                                      high_signal=high, agrees=agrees))
        present = [c for c in conds if sim.get((level, c, metric))]
        if len(present) >= 2:
            hm = np.array([np.mean(by_cond[c]) for c in present])
            sm = np.array([np.mean(sim[(level, c, metric)]) for c in present])
            hz = (hm - hm.mean()) / hm.std() if hm.std() > 0 else np.zeros_like(hm)
            sz = (sm - sm.mean()) / sm.std() if sm.std() > 0 else np.zeros_like(sm)
            for c, h, s in zip(present, hz, sz, strict=True):
                spearman_cells[metric].append((f"{block}/{level}", c, float(h), float(s)))
    rho = {}
    for metric, rows in sorted(spearman_cells.items()):
        r, p = spearman([h for *_, h, _ in rows], [s for *_, s in rows], n_permutations=n_permutations, seed=seed)
        rho[metric] = CellCorrelation(cells=len(rows), rho=r, p=p)
    metrics = sorted({c.metric for c in contrasts})
    levels = [lv for lv in LEVELS if any(c.level == lv for c in contrasts)]
    return HumanAgreement(threshold=threshold, pooled=_summary(contrasts),
                     by_metric={m: _summary([c for c in contrasts if c.metric == m]) for m in metrics},
                     by_level={lv: _summary([c for c in contrasts if c.level == lv]) for lv in levels},
                     spearman=rho, contrasts=contrasts, missing_cells=missing)


def format_agreement(a: HumanAgreement) -> str:
    def line(name: str, s: SignAgreement) -> str:
        if not s.high_signal:
            return f"  {name:<14} no high-signal contrast"
        return f"  {name:<14} {s.agree}/{s.high_signal} = {s.rate:.0%}  p = {s.p:.3f} (one-sided binomial)"

    out = [f"sign agreement on contrasts with |Cliff's delta| >= {a.threshold}", line("pooled", a.pooled)]
    out += [line(m, s) for m, s in a.by_metric.items()]
    out += [line(lv, s) for lv, s in a.by_level.items()]
    out.append("cell-level Spearman (z-normalised within blocks)")
    for m, c in a.spearman.items():
        out.append(f"  {m:<14} " + ("-" if c.rho is None else f"rho = {c.rho:+.3f}  p = {c.p:.3f}") + f"  ({c.cells} cells)")
    if a.missing_cells:
        out.append(f"{len(a.missing_cells)} human cells have no simulated conversations: {', '.join(a.missing_cells[:5])}")
    return "\n".join(out)
