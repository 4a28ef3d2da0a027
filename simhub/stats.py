"""Cluster-aware statistics for per-turn metrics: bootstrap intervals, paired tests, Holm adjustment.

Why this module exists: simhub scores student turns one by one, but turns are not independent. A
dialogue contributes about eleven turns that share a student, a question and a tutor, so a standard
error computed as if every turn were a fresh draw is too narrow, sometimes by a factor of three.
The unit that was actually sampled is the dialogue, so every interval and every test here resamples
or permutes whole dialogues ("clusters"), never single turns.

Conventions shared by every function:

* ``values`` are per-item metric values in the order of ``clusters``; ``None`` and NaN mean "the
  metric does not apply to this item" (docs/protocol.md §3) and are left out of means.
* ``clusters`` gives, for every item, the id of its dialogue (any hashable). Clusters are numbered in
  order of first appearance, and that numbering is what the random draws index into.
* Randomness comes only from ``numpy.random.default_rng(seed)``. The resampled clusters depend only
  on ``seed``, ``n_resamples`` and the number of clusters, so with the same seed and the same
  ``clusters`` sequence, :func:`cluster_mean_ci`, :func:`cluster_bootstrap` and the interval of
  :func:`paired_compare` all see *the same* resamples. Intervals of different metrics of one run
  are then computed from one common set of bootstrap datasets, as if the whole evaluation had been
  redone on each.
* Intervals are percentile intervals (numpy's default linear interpolation between order
  statistics) of the bootstrap distribution. A resample whose statistic is undefined (no non-null
  value among its items, or a callback that returns None/NaN/inf) is dropped, and the interval is
  taken over the remaining ones: the interval is conditional on the statistic being defined.
  ``n_dropped`` reports how many were dropped, so a caller can flag an unstable metric.

The module imports numpy only; nothing here needs scipy. Invalid parameters raise
:class:`~simhub.errors.ConfigError`, unusable data :class:`~simhub.errors.DataError`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, TypeVar

import numpy as np

from simhub.errors import ConfigError, DataError

__all__ = [
    "BootstrapCI",
    "MeanCI",
    "PairedComparison",
    "cluster_bootstrap",
    "cluster_mean_ci",
    "compare_metrics",
    "holm",
    "is_binary",
    "mcnemar_exact",
    "paired_compare",
    "permutation_test",
    "summarize_metrics",
]

#: How many cluster draws (resamples x clusters) are generated and held in memory at once. Part of
#: the definition of the random stream: every function draws through :func:`_draw_blocks`, which is
#: what makes their resamples identical for the same seed.
_DRAW_BLOCK = 1 << 21

#: Up to this many discordant pairs the McNemar test uses exact big-integer binomial coefficients.
_EXACT_PMF_MAX = 20_000

#: Entropy appended to ``seed`` for the sign flips of the Monte Carlo permutation test, so that they
#: are a stream separate from the bootstrap draws of the same seed.
_PERMUTATION_STREAM = 0x5E1F

_T = TypeVar("_T")

TestName = Literal["mcnemar-exact", "permutation"]
Values = Sequence[float | None] | np.ndarray


# ----------------------------------------------------------------------------------------- results


class _JSONResult:
    """``as_dict``: a result dataclass as a JSON-ready dict (an interval as a two-element list)."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class BootstrapCI(_JSONResult):
    """A statistic with its cluster-bootstrap percentile interval.

    ``estimate`` is the statistic on the original items (None when undefined), ``ci`` the interval at
    ``confidence`` (None when every resample was dropped), ``n_dropped`` the resamples whose statistic
    was undefined, ``n_clusters`` the number of clusters resampled.
    """

    estimate: float | None
    ci: tuple[float, float] | None
    confidence: float
    n_resamples: int
    n_dropped: int
    n_clusters: int


@dataclass(frozen=True, slots=True)
class MeanCI(_JSONResult):
    """The mean of a metric over its non-null items, as a report shows it, with a cluster interval.

    ``mean`` and ``std`` (population std, ddof=0, as the "mean ± std" of docs/protocol.md §3 and numpy's default) are
    over the ``n`` non-null items; both are None when ``n`` is 0. ``n_clusters`` counts every cluster
    in the input, also those whose items are all null: they are resampled too, which is what keeps
    the resamples common to all metrics.
    """

    mean: float | None
    std: float | None
    n: int
    ci: tuple[float, float] | None
    confidence: float
    n_resamples: int
    n_dropped: int
    n_clusters: int


@dataclass(frozen=True, slots=True)
class PairedComparison(_JSONResult):
    """Run A against run B on the same items, using only items where both are non-null.

    ``a`` and ``b`` are the two means over those ``n`` paired items (so they can differ from each
    run's own mean over its non-null items), ``diff = a - b``, ``ci95`` the paired cluster-bootstrap
    95% interval of ``diff``, ``p`` the two-sided p-value of ``test`` (None when nothing is paired)
    and ``p_holm`` the Holm-adjusted p-value when the comparison is one of a family
    (:func:`compare_metrics`), else None.
    """

    a: float | None
    b: float | None
    diff: float | None
    ci95: tuple[float, float] | None
    p: float | None
    test: TestName
    n: int
    n_clusters: int
    p_holm: float | None = None


# ------------------------------------------------------------------------------------ bootstrap


def cluster_mean_ci(
    values: Values,
    clusters: Sequence[Hashable],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> MeanCI:
    """Mean of a per-item metric over non-null items, with a dialogue-bootstrap percentile interval.

    Each resample draws ``n_clusters`` dialogues with replacement and keeps all of their items; its
    statistic is the mean over the non-null values of the drawn items, an item of a dialogue drawn
    twice counting twice. That is a ratio of per-cluster sums to per-cluster counts, so it is
    computed from those two vectors without building any resampled dataset: 10,000 resamples of a
    few hundred dialogues take a few tens of milliseconds. Resamples with no non-null value are
    dropped (see the module docstring). With the same ``seed`` and ``clusters`` the resamples are
    those of :func:`cluster_bootstrap` and :func:`paired_compare`.

    Three dialogues, one item with no value:

    >>> r = cluster_mean_ci([1.0, 0.0, None, 1.0, 1.0, 0.0], ["d1", "d1", "d1", "d2", "d3", "d3"],
    ...                     n_resamples=1000, seed=0)
    >>> r.mean, r.n, r.ci, r.n_clusters
    (0.6, 5, (0.5, 1.0), 3)
    """
    x = _as_values(values, "values")
    codes, n_clusters = _factorize(clusters, len(x), "values")
    _check_resampling(n_resamples, seed, confidence)
    ok = np.isfinite(x)
    n = int(ok.sum())
    if n == 0:
        return MeanCI(None, None, 0, None, confidence, n_resamples, n_resamples, n_clusters)
    sums = np.bincount(codes, weights=np.where(ok, x, 0.0), minlength=n_clusters)
    counts = np.bincount(codes, weights=ok.astype(float), minlength=n_clusters)
    stats = _ratio_resamples(sums, counts, n_resamples, seed)
    ci, dropped = _percentile_interval(stats, confidence)
    kept = x[ok]
    return MeanCI(float(kept.mean()), float(kept.std()), n, ci, confidence, n_resamples, dropped, n_clusters)


def cluster_bootstrap(
    clusters: Sequence[Hashable],
    statistic: Callable[[np.ndarray], float | None],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapCI:
    """Cluster bootstrap of any statistic that must be recomputed from the resampled items.

    Some statistics are not means of fixed per-item values: the knowledge metric, for one, bins its
    deltas with quantile cutoffs taken from the evaluated set itself, so a faithful bootstrap has to
    recompute the cutoffs inside every resample. ``statistic`` receives an integer array of item
    indices (positions in ``clusters``), with repetition: the items of every drawn dialogue, in
    ascending order within a dialogue, dialogues in draw order. It returns a float, or None/NaN when
    the statistic is undefined on that resample (such resamples are dropped). ``estimate`` is
    ``statistic(np.arange(n_items))``, computed first (a broken callback fails before the loop),
    then ``statistic`` is called once per resample.

    A statistic that depends only on how often each item was drawn may also have an ``of_draws``
    method: ``of_draws(counts, codes)``, with ``counts[r, c]`` the times resample ``r`` drew cluster
    ``c`` (clusters numbered as above) and ``codes[i]`` item ``i``'s cluster, returns the statistic
    of every resample (NaN where undefined), equal to calling ``statistic`` on each resample's
    indices. It is then used instead of the per-resample calls (the knowledge metric's statistic
    takes milliseconds that way instead of seconds).

    The same ``seed`` and ``clusters`` give the same resampled dialogues as :func:`cluster_mean_ci`
    (whose interval equals this one with ``statistic`` a nan-mean, up to rounding), so intervals of
    different metrics computed with one seed come from the same resamples.

    >>> values = np.array([0.2, 0.4, 0.9, 0.5])
    >>> b = cluster_bootstrap(["d1", "d1", "d2", "d3"], lambda idx: float(np.median(values[idx])),
    ...                       n_resamples=500, seed=0)
    >>> b.estimate, round(b.ci[0], 4), b.ci[1], b.n_dropped
    (0.45, 0.3475, 0.9, 0)
    """
    n_items = len(clusters)
    codes, n_clusters = _factorize(clusters, n_items, None)
    _check_resampling(n_resamples, seed, confidence)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_clusters)
    starts = np.cumsum(sizes) - sizes
    estimate = _as_stat(statistic(np.arange(n_items)))
    stats = np.empty(n_resamples)
    of_draws = getattr(statistic, "of_draws", None)
    row = 0
    for block in _draw_blocks(n_clusters, n_resamples, seed):
        if of_draws is not None:
            # How often each resample drew each cluster.
            offsets = np.arange(len(block))[:, None] * n_clusters
            counts = np.bincount((block + offsets).ravel(), minlength=len(block) * n_clusters)
            values = np.asarray(of_draws(counts.reshape(len(block), n_clusters), codes), dtype=np.float64)
            stats[row : row + len(block)] = np.where(np.isfinite(values), values, math.nan)
            row += len(block)
            continue
        for drawn in block:
            lens = sizes[drawn]
            ends = np.cumsum(lens)
            pos = np.arange(ends[-1]) + np.repeat(starts[drawn] - (ends - lens), lens)
            stats[row] = _as_stat(statistic(order[pos]))
            row += 1
    ci, dropped = _percentile_interval(stats, confidence)
    return BootstrapCI(
        None if math.isnan(estimate) else estimate, ci, confidence, n_resamples, dropped, n_clusters
    )


# --------------------------------------------------------------------------------- paired tests


def paired_compare(
    a: Values,
    b: Values,
    clusters: Sequence[Hashable],
    *,
    test: Literal["auto", "mcnemar-exact", "permutation"] = "auto",
    n_resamples: int = 10_000,
    n_permutations: int = 10_000,
    exact_max_clusters: int = 16,
    seed: int = 0,
) -> PairedComparison:
    """Compare two runs scored on the same items: difference of means, paired interval, p-value.

    ``a[i]`` and ``b[i]`` must be the scores of the same (dialogue, turn) item, whose dialogue is
    ``clusters[i]``; only items where both are non-null are used. Pairing removes the variance the
    two runs share (hard dialogues are hard for both), which is why this is far more sensitive than
    comparing two separate intervals.

    * ``ci95``: dialogue bootstrap of the mean paired difference, with the same resamples as
      :func:`cluster_mean_ci` for the same seed and clusters.
    * ``test="auto"`` picks ``"mcnemar-exact"`` when every paired value of both runs is 0 or 1, else
      ``"permutation"``. The exact McNemar test (:func:`mcnemar_exact`) treats turns as independent,
      so with strongly clustered outcomes it is somewhat liberal; ``"permutation"`` is valid for
      binary metrics too and respects clustering, choose it explicitly when that matters.
    * ``"permutation"``: :func:`permutation_test` on the per-item differences, flipping the sign of
      whole dialogues.

    >>> c = paired_compare([1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0], ["d1", "d1", "d2", "d2", "d3", "d3"],
    ...                    n_resamples=1000)
    >>> round(c.diff, 4), c.ci95, c.test, c.p
    (0.3333, (0.0, 0.5), 'mcnemar-exact', 0.5)
    """
    xa = _as_values(a, "a")
    xb = _as_values(b, "b")
    if len(xa) != len(xb):
        raise DataError(
            f"runs A and B must score the same items: A has {len(xa)} values, B has {len(xb)}", field="b"
        )
    codes, n_clusters = _factorize(clusters, len(xa), "a")
    _check_resampling(n_resamples, seed, 0.95)
    _check_permutation(n_permutations, exact_max_clusters)
    if test not in ("auto", "mcnemar-exact", "permutation"):
        raise ConfigError(
            f"test must be 'auto', 'mcnemar-exact' or 'permutation', not {test!r}", field="test"
        )
    ok = np.isfinite(xa) & np.isfinite(xb)
    n = int(ok.sum())
    binary = bool(n) and _binary_array(xa[ok]) and _binary_array(xb[ok])
    if test == "mcnemar-exact" and n and not binary:
        raise DataError("the McNemar test needs binary (0/1) values in both runs", field="a")
    chosen: TestName = ("mcnemar-exact" if binary else "permutation") if test == "auto" else test
    if n == 0:
        return PairedComparison(None, None, None, None, None, chosen, 0, n_clusters)
    d = np.where(ok, xa - xb, 0.0)
    sums = np.bincount(codes, weights=d, minlength=n_clusters)
    counts = np.bincount(codes, weights=ok.astype(float), minlength=n_clusters)
    ci, _ = _percentile_interval(_ratio_resamples(sums, counts, n_resamples, seed), 0.95)
    if chosen == "mcnemar-exact":
        pa, pb = xa[ok], xb[ok]
        p = mcnemar_exact(int(np.sum((pa == 1) & (pb == 0))), int(np.sum((pa == 0) & (pb == 1))))
    else:
        p = _sign_flip_p(sums, n_permutations, exact_max_clusters, seed)
    mean_a, mean_b = float(xa[ok].mean()), float(xb[ok].mean())
    return PairedComparison(mean_a, mean_b, float(d[ok].mean()), ci, p, chosen, n, n_clusters)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` (A right, B wrong) and ``c``.

    Under the null each discordant pair is equally likely to go either way, so ``min(b, c)`` is a
    draw of Bin(b + c, 1/2) and ``p = min(1, 2 P(X <= min(b, c)))``; ``p = 1`` when there is no
    discordant pair. This is ``scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue`` computed
    without scipy: the probability of ``min(b, c)`` is an exact big-integer ratio rounded once, and
    the rest of the tail is summed downwards as a product of term ratios, stopping once terms no
    longer change the sum (relative error of order 1e-14). Above ``_EXACT_PMF_MAX`` discordant
    pairs, where big-integer binomial coefficients get slow, that first probability comes from
    Loader's saddle-point formula instead, accurate to about 1e-13 relative.

    >>> mcnemar_exact(8, 2), mcnemar_exact(3, 3)
    (0.109375, 1.0)
    """
    for name, v in (("b", b), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise ConfigError(f"{name} must be a non-negative integer count, not {v!r}", field=name)
    n, k = int(b) + int(c), min(int(b), int(c))
    if 2 * k >= n:  # also n == 0: the lower tail holds at least half the mass
        return 1.0
    # P(X = k): exact integers and one correctly rounded division, or the saddle-point formula.
    head = math.comb(n, k) / (1 << n) if n <= _EXACT_PMF_MAX else math.exp(_log_binom_half_pmf(k, n))
    tail, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)  # P(X = i - 1) / P(X = i)
        tail += term
        if term < 1e-17 * tail:
            break
    return min(1.0, 2.0 * head * tail)


def permutation_test(
    diffs: Values,
    clusters: Sequence[Hashable],
    *,
    n_permutations: int = 10_000,
    exact_max_clusters: int = 16,
    seed: int = 0,
) -> float:
    """Two-sided paired permutation p-value for a zero mean of per-item differences ``A - B``.

    Under the null that the two runs are exchangeable, swapping A and B in a dialogue flips the sign
    of all of its differences at once (flipping single turns would ignore the clustering and give
    too small p-values). The statistic is ``|sum of differences|``, i.e. the mean paired difference
    up to a constant factor. Null items are dropped. Dialogues whose differences sum to exactly zero
    change nothing and are left out. With at most ``exact_max_clusters`` remaining dialogues all
    ``2**k`` sign patterns are enumerated and the p-value is exact; otherwise ``n_permutations``
    random patterns are drawn (seeded, a stream separate from the bootstrap's) and
    ``p = (1 + #{|T*| >= |T|}) / (1 + n_permutations)``, which is never 0 and keeps the test valid.
    Returns 1.0 when there is no non-zero difference.

    Three dialogues, so all 2**3 sign patterns are enumerated and the p-value is exact:

    >>> permutation_test([0.2, 0.1, 0.3, -0.1], ["d1", "d1", "d2", "d3"])
    0.5
    """
    x = _as_values(diffs, "diffs")
    codes, n_clusters = _factorize(clusters, len(x), "diffs", min_clusters=1)
    _check_permutation(n_permutations, exact_max_clusters)
    _check_seed(seed)
    ok = np.isfinite(x)
    sums = np.bincount(codes, weights=np.where(ok, x, 0.0), minlength=n_clusters)
    return _sign_flip_p(sums, n_permutations, exact_max_clusters, seed)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni step-down adjusted p-values, in the input order; None stays None.

    Comparing two runs on seven metrics makes seven tests, and one of them will look significant by
    chance more often than the nominal 5%. Holm controls the family-wise error rate like Bonferroni
    but is uniformly more powerful: with the ``m`` non-None p-values sorted ascending,
    ``adj_(j) = max_{i <= j} min(1, (m - i + 1) p_(i))``. Tied p-values get equal adjusted values, and
    the adjusted values are monotone in the raw ones.

    >>> holm([0.01, None, 0.04, 0.03])
    [0.03, None, 0.06, 0.06]
    """
    present = []
    for i, p in enumerate(pvalues):
        if p is None:
            continue
        if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating) or not 0 <= p <= 1:
            raise DataError(f"p-values must be numbers in [0, 1] or None; item {i} is {p!r}", field=f"pvalues[{i}]")
        present.append(i)
    out: list[float | None] = [None] * len(pvalues)
    if not present:
        return out
    raw = np.array([float(pvalues[i]) for i in present])  # type: ignore[arg-type]
    order = np.argsort(raw, kind="stable")
    m = len(raw)
    scaled = np.minimum(1.0, (m - np.arange(m)) * raw[order])
    adjusted = np.maximum.accumulate(scaled)
    for rank, j in enumerate(order):
        out[present[j]] = float(adjusted[rank])
    return out


# --------------------------------------------------------------------------------------- helpers


def is_binary(values: Values) -> bool:
    """Whether every non-null value is 0 or 1 (False when there is none).

    Used to choose McNemar for the 0/1 metrics (acts, correctness, errors). A continuous metric that
    happens to take only 0 and 1 on a set is binary data for the test's purposes, so looking at the
    values rather than at the metric's name is sound.

    >>> is_binary([0, 1, None, 1.0]), is_binary([0.5, 1]), is_binary([None])
    (True, False, False)
    """
    x = _as_values(values, "values")
    x = x[np.isfinite(x)]
    return bool(x.size) and _binary_array(x)


def summarize_metrics(
    metrics: Mapping[str, Values],
    clusters: Sequence[Hashable],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, MeanCI]:
    """:func:`cluster_mean_ci` for every metric of one run, all from the same resamples.

    Every metric's values must be aligned with ``clusters`` (one value per item, None where the
    metric does not apply). Using one seed for all metrics is deliberate: their intervals are then
    the marginals of one joint bootstrap, which is what a table of intervals implicitly claims.

    >>> cis = summarize_metrics({"rouge_l": [0.5, 0.25, None], "acts": [1, 0, 1]}, ["d1", "d1", "d2"],
    ...                         n_resamples=200)
    >>> cis["rouge_l"].mean, cis["rouge_l"].n, cis["acts"].ci
    (0.375, 2, (0.5, 1.0))
    """
    return {
        name: _with_field(
            name,
            lambda v=values: cluster_mean_ci(
                v, clusters, n_resamples=n_resamples, seed=seed, confidence=confidence
            ),
        )
        for name, values in metrics.items()
    }


def compare_metrics(
    a: Mapping[str, Values],
    b: Mapping[str, Values],
    clusters: Sequence[Hashable],
    *,
    metrics: Sequence[str] | None = None,
    binary: Collection[str] | None = None,
    n_resamples: int = 10_000,
    n_permutations: int = 10_000,
    exact_max_clusters: int = 16,
    seed: int = 0,
) -> dict[str, PairedComparison]:
    """:func:`paired_compare` for each metric of two runs, with Holm-adjusted p-values in ``p_holm``.

    ``metrics`` chooses and orders the metrics (each must be in both runs); by default the metrics of
    ``a`` that ``b`` also has. ``binary`` names the metrics to test with exact McNemar, the others
    get the permutation test; by default the test is chosen from the values (:func:`is_binary`).
    The Holm family is the compared metrics with a defined p-value.

    >>> c = compare_metrics({"acts": [1, 1, 0, 1]}, {"acts": [0, 1, 0, 0]}, ["d1", "d1", "d2", "d3"],
    ...                     n_resamples=200)
    >>> c["acts"].diff, c["acts"].test, c["acts"].p_holm
    (0.5, 'mcnemar-exact', 0.5)
    """
    names = [m for m in a if m in b] if metrics is None else list(metrics)
    for name in names:
        for run, label in ((a, "a"), (b, "b")):
            if name not in run:
                raise ConfigError(
                    f"metric {name!r} is not in run {label.upper()} (it has: {', '.join(run) or 'none'})",
                    field=f"{label}.{name}",
                )
    results: dict[str, PairedComparison] = {}
    for name in names:
        chosen: Literal["auto", "mcnemar-exact", "permutation"] = (
            "auto" if binary is None else "mcnemar-exact" if name in binary else "permutation"
        )
        results[name] = _with_field(
            name,
            lambda name=name, chosen=chosen: paired_compare(
                a[name], b[name], clusters, test=chosen, n_resamples=n_resamples,
                n_permutations=n_permutations, exact_max_clusters=exact_max_clusters, seed=seed,
            ),
        )
    adjusted = holm([r.p for r in results.values()])
    return {name: replace(r, p_holm=adj) for (name, r), adj in zip(results.items(), adjusted, strict=True)}


# ------------------------------------------------------------------------------------- internals


def _draw_blocks(n_clusters: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The resampled cluster indices, ``(rows, n_clusters)`` blocks of uniform draws with replacement.

    The single source of bootstrap randomness: every function draws through it, so equal
    ``(n_clusters, n_resamples, seed)`` mean equal resamples everywhere.
    """
    rows = max(1, _DRAW_BLOCK // n_clusters)
    if n_resamples <= rows:  # one block: the same for every metric of a run, so drawn once
        yield _single_block(n_clusters, n_resamples, seed)
        return
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n_clusters, size=(min(rows, n_resamples - start), n_clusters))


@functools.lru_cache(maxsize=2)
def _single_block(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """:func:`_draw_blocks`'s only block when there is one (at most ``_DRAW_BLOCK`` draws), read-only."""
    block = np.random.default_rng(seed).integers(0, n_clusters, size=(n_resamples, n_clusters))
    block.setflags(write=False)
    return block


def _ratio_resamples(sums: np.ndarray, counts: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Per resample, sum of drawn clusters' ``sums`` over sum of their ``counts`` (NaN when 0/0)."""
    stats = np.empty(n_resamples)
    row = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for block in _draw_blocks(len(sums), n_resamples, seed):
            stats[row:row + len(block)] = sums[block].sum(axis=1) / counts[block].sum(axis=1)
            row += len(block)
    return stats


def _percentile_interval(stats: np.ndarray, confidence: float) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval of the finite ``stats`` and the number of non-finite (dropped) ones."""
    kept = stats[np.isfinite(stats)]
    dropped = int(len(stats) - len(kept))
    if not len(kept):
        return None, dropped
    alpha = 1.0 - confidence
    lo, hi = np.quantile(kept, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi)), dropped


def _sign_flip_p(sums: np.ndarray, n_permutations: int, exact_max_clusters: int, seed: int) -> float:
    """Two-sided sign-flip p-value of ``|sum(sums)|`` over per-cluster sums (see permutation_test)."""
    d = sums[sums != 0]
    k = len(d)
    if k == 0:
        return 1.0
    observed = abs(float(d.sum()))
    # Sums of the same numbers in another order can differ in the last bits; count those as ties.
    threshold = observed - 1e-9 * float(np.abs(d).sum())
    if k <= exact_max_clusters:
        totals = np.zeros(1)
        for x in d:  # all 2**k signed sums, doubling the list once per dialogue
            totals = np.concatenate((totals + x, totals - x))
        return float(np.count_nonzero(np.abs(totals) >= threshold) / (1 << k))
    rng = np.random.default_rng([seed, _PERMUTATION_STREAM])
    rows = max(1, _DRAW_BLOCK // k)
    hits = 0
    for start in range(0, n_permutations, rows):
        signs = 1 - 2 * rng.integers(0, 2, size=(min(rows, n_permutations - start), k))
        hits += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return (1 + hits) / (1 + n_permutations)


def _log_binom_half_pmf(k: int, n: int) -> float:
    """log P(X = k) for X ~ Bin(n, 1/2), by Loader's saddle-point expansion.

    Catherine Loader (2000), "Fast and accurate computation of binomial probabilities" (the method
    of R's ``dbinom`` and scipy's binomial pmf): it avoids the cancellation of ``log n!`` against
    ``log k!`` that makes a plain ``lgamma`` formula lose about ``log10(n log n)`` digits.
    """
    if k == 0 or k == n:
        return -n * math.log(2.0)
    half = n / 2.0
    return (_stirlerr(n) - _stirlerr(k) - _stirlerr(n - k) - _bd0(k, half) - _bd0(n - k, half)
            + 0.5 * math.log(n / (2.0 * math.pi * k * (n - k))))


def _stirlerr(m: int) -> float:
    """log(m!) - log(sqrt(2 pi m) (m/e)^m), the error of Stirling's formula."""
    if m <= 15:
        return math.lgamma(m + 1.0) - (m + 0.5) * math.log(m) + m - 0.5 * math.log(2.0 * math.pi)
    m2 = float(m) * m
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1 / 1188 / m2) / m2) / m2) / m2) / m


def _bd0(x: float, mean: float) -> float:
    """x log(x / mean) + mean - x, summed as a series when x is close to mean (no cancellation)."""
    if abs(x - mean) < 0.1 * (x + mean):
        v = (x - mean) / (x + mean)
        total = (x - mean) * v
        term = 2.0 * x * v
        j = 1
        while True:
            term *= v * v
            updated = total + term / (2 * j + 1)
            if updated == total:
                return total
            total, j = updated, j + 1
    return x * math.log(x / mean) + mean - x


def _as_values(values: Values, field: str) -> np.ndarray:
    """Per-item values as float64 with NaN for null; rejects what is not a number."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise DataError(f"{field} must be one-dimensional, got shape {values.shape}", field=field)
        if values.dtype != object:
            x = values.astype(float)
            _reject_inf(x, field)
            return x
    out = np.empty(len(values))
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise DataError(f"{field}[{i}] must be a number or null, not {v!r}", field=f"{field}[{i}]") from None
    _reject_inf(out, field)
    return out


def _reject_inf(x: np.ndarray, field: str) -> None:
    bad = np.flatnonzero(np.isinf(x))
    if len(bad):
        raise DataError(f"{field}[{bad[0]}] is infinite; metric values must be finite or null",
                        field=f"{field}[{bad[0]}]")


def _factorize(clusters: Sequence[Hashable], n_items: int, values_field: str | None,
               min_clusters: int = 2) -> tuple[np.ndarray, int]:
    """Cluster codes 0..K-1 in order of first appearance, after checking lengths and K."""
    if len(clusters) != n_items:
        raise DataError(
            f"clusters must give one dialogue id per item: {len(clusters)} ids for {n_items} items"
            + (f" of {values_field}" if values_field else ""), field="clusters",
        )
    index: dict[Hashable, int] = {}
    try:
        codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.intp, count=n_items)
    except TypeError as exc:
        raise DataError(f"cluster ids must be hashable ({exc})", field="clusters") from None
    if len(index) < min_clusters:
        raise DataError(
            f"at least {min_clusters} dialogue{'s' if min_clusters > 1 else ''} (clusters) needed, got "
            f"{len(index)}: with fewer there is nothing to resample", field="clusters",
        )
    return codes, len(index)


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, not {seed!r}", field="seed")


def _check_resampling(n_resamples: int, seed: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise ConfigError(f"n_resamples must be a positive integer, not {n_resamples!r}", field="n_resamples")
    _check_seed(seed)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise ConfigError(f"confidence must be strictly between 0 and 1, not {confidence!r}", field="confidence")


def _check_permutation(n_permutations: int, exact_max_clusters: int) -> None:
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer) or n_permutations < 1:
        raise ConfigError(f"n_permutations must be a positive integer, not {n_permutations!r}",
                          field="n_permutations")
    if (isinstance(exact_max_clusters, bool) or not isinstance(exact_max_clusters, int | np.integer)
            or not 0 <= exact_max_clusters <= 20):
        raise ConfigError(
            f"exact_max_clusters must be an integer from 0 to 20 (2**20 sign patterns), not {exact_max_clusters!r}",
            field="exact_max_clusters",
        )


def _binary_array(x: np.ndarray) -> bool:
    return bool(np.all((x == 0) | (x == 1)))


def _as_stat(value: float | None) -> float:
    """A callback's statistic as a float, NaN standing for undefined (None, NaN or infinite)."""
    if value is None:
        return math.nan
    v = float(value)
    return v if math.isfinite(v) else math.nan


def _with_field(name: str, compute: Callable[[], _T]) -> _T:
    """Run ``compute``, prefixing the metric name to the field and message of a DataError it raises."""
    try:
        return compute()
    except DataError as exc:
        raise DataError(f"{name}: {exc.message}", field=f"{name}.{exc.field}" if exc.field else name) from None


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}
