"""The deterministic measures of a multi-session, KT-grounded tutoring benchmark (EduClaw-Bench,
U. Lee et al., arXiv 2608.03206): learning gain, responsiveness, calibration of the learner's
answers against its KT model, and the reliability statistics (pass^k, Kendall τ). No model calls.

Where EduClaw-Bench does not fix a convention, the choice made here is stated in the function's
docstring. Undefined values are None, as in :mod:`simhub.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from simhub.errors import ConfigError, DataError

__all__ = [
    "Calibration",
    "CalibrationBin",
    "HelpRequest",
    "ResponsivenessSummary",
    "brier_score",
    "calibration",
    "delta_solve",
    "expected_calibration_error",
    "kendall_tau",
    "mean_pairwise_kendall",
    "pass_hat_k",
    "responsiveness",
    "summarize_responsiveness",
]

#: The default number of equal-width bins of :func:`calibration` (EduClaw-Bench does not give its count).
DEFAULT_BINS = 10


# ------------------------------------------------------------------------------------ ΔSolve


def delta_solve(pre: Sequence[float], post: Sequence[float]) -> float:
    """ΔSolve Rate of one run: the mean over its days of post-session minus pre-session probe accuracy.

    ``pre[d]`` and ``post[d]`` are day ``d``'s probe accuracies in [0, 1]. The result is a fraction in
    [−1, 1]; EduClaw-Bench reports it in percentage points (multiply by 100).

    >>> delta_solve([0.2, 0.4, 0.5], [0.3, 0.4, 0.8])
    0.13333333333333333
    """
    if len(pre) != len(post):
        raise DataError(f"post: {len(post)} days of post-session accuracy for {len(pre)} of pre-session",
                        field="post")
    if not pre:
        raise DataError("pre: a run needs at least one day", field="pre")
    a, b = _unit_interval(pre, "pre"), _unit_interval(post, "post")
    return float(np.mean(b - a))


# ---------------------------------------------------------------------------- responsiveness


@dataclass(frozen=True, slots=True)
class HelpRequest:
    """A help request the student made on ``day``; ``answered_day`` is the day the tutor answered it
    (None: never). Days are any comparable numbers (1 to D)."""

    day: int
    answered_day: int | None = None


def responsiveness(requests: Sequence[HelpRequest], *, same_day: bool = False) -> float | None:
    """The fraction of a run's help requests that the tutor answered; None for a *silent run* (no
    request), which is left out of any average instead of counting as 0.

    *Overall* (the default) counts a request answered whenever the answer came; *same-day* only when
    it came on the day of the request. Pooling every day's requests is EduClaw-Bench's
    Σ_d answered_d / Σ_d |R_d|. An answer dated before its request is a DataError.

    >>> runs = [HelpRequest(1, 1), HelpRequest(1, 3), HelpRequest(2, None), HelpRequest(4, 4)]
    >>> responsiveness(runs), responsiveness(runs, same_day=True), responsiveness([])
    (0.75, 0.5, None)
    """
    if not requests:
        return None
    answered = 0
    for i, r in enumerate(requests):
        if r.answered_day is None:
            continue
        if r.answered_day < r.day:
            raise DataError(f"requests[{i}]: answered on day {r.answered_day}, before its request on day {r.day}",
                            field=f"requests[{i}]")
        answered += (r.answered_day == r.day) if same_day else 1
    return answered / len(requests)


@dataclass(frozen=True, slots=True)
class ResponsivenessSummary:
    """The mean responsiveness over the runs that had a help request (None when none had), how many
    runs were scored and how many were silent."""

    mean: float | None
    n_scored: int
    n_silent: int

    @property
    def silent_rate(self) -> float | None:
        total = self.n_scored + self.n_silent
        return self.n_silent / total if total else None


def summarize_responsiveness(runs: Sequence[Sequence[HelpRequest]], *, same_day: bool = False) -> ResponsivenessSummary:
    """:func:`responsiveness` over many runs: the mean of the per-run values, silent runs left out
    and counted apart (a mean of runs, each run weighted once, as a table of per-run scores averages).

    >>> summarize_responsiveness([[HelpRequest(1, 1)], [], [HelpRequest(2, None), HelpRequest(2, 2)]])
    ResponsivenessSummary(mean=0.75, n_scored=2, n_silent=1)
    """
    values = [responsiveness(run, same_day=same_day) for run in runs]
    scored = [v for v in values if v is not None]
    return ResponsivenessSummary(mean=float(np.mean(scored)) if scored else None, n_scored=len(scored),
                                 n_silent=len(values) - len(scored))


# ------------------------------------------------------------------------------- calibration


@dataclass(frozen=True, slots=True)
class CalibrationBin:
    """One bin of :func:`calibration`: ``[low, high)`` (the last bin includes 1), the total weight
    ``n`` of its pairs, their mean prediction ``confidence`` and mean outcome ``accuracy`` (None when empty)."""

    low: float
    high: float
    n: float
    confidence: float | None
    accuracy: float | None


@dataclass(frozen=True, slots=True)
class Calibration:
    """ECE and Brier score of predictions against outcomes, with the reliability bins."""

    ece: float
    brier: float
    n: float
    bins: tuple[CalibrationBin, ...]


def calibration(predicted: Sequence[float], observed: Sequence[float], *, n_bins: int = DEFAULT_BINS,
                weights: Sequence[float] | None = None) -> Calibration:
    """Expected calibration error and Brier score of predicted P(correct) against what was observed.

    ``observed`` is 0/1 per answer, or an accuracy in [0, 1] per group of answers (EduClaw-Bench bins
    (run, day) pairs by predicted mastery against that day's observed accuracy); ``weights`` (default
    1 each) weigh the pairs, e.g. by their number of answers.

    * **Bins**: ``n_bins`` equal-width bins over [0, 1] (default 10; the paper does not give its
      count). A prediction ``p`` falls in bin ``min(floor(p · n_bins), n_bins − 1)``: each bin is
      closed on the left and open on the right, except the last, which also holds ``p = 1``.
    * **ECE** = Σ_b (n_b / N) · |accuracy_b − confidence_b|, over non-empty bins, with ``n_b`` the
      bin's weight, ``N`` the total weight, and accuracy and confidence the bin's weighted means.
    * **Brier** = Σ w_i (p_i − y_i)² / Σ w_i.

    >>> c = calibration([0.1, 0.3, 0.35, 0.9], [0, 1, 0, 1], n_bins=2)
    >>> round(c.ece, 4), round(c.brier, 4)
    (0.0875, 0.1581)
    """
    if not isinstance(n_bins, int) or isinstance(n_bins, bool) or n_bins < 1:
        raise ConfigError(f"n_bins: {n_bins!r} is not a positive integer", field="n_bins")
    p = _unit_interval(predicted, "predicted")
    y = _unit_interval(observed, "observed")
    if len(p) != len(y):
        raise DataError(f"observed: {len(y)} outcomes for {len(p)} predictions", field="observed")
    if not len(p):
        raise DataError("predicted: nothing to calibrate", field="predicted")
    w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != p.shape or np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise DataError("weights: one finite non-negative weight per prediction, not all 0", field="weights")
    index = np.minimum(np.floor(p * n_bins).astype(np.int64), n_bins - 1)
    total = float(w.sum())
    bins, ece = [], 0.0
    for b in range(n_bins):
        inside = index == b
        n = float(w[inside].sum())
        if n > 0:
            conf = float((w[inside] * p[inside]).sum() / n)
            acc = float((w[inside] * y[inside]).sum() / n)
            ece += n / total * abs(acc - conf)
        else:
            conf = acc = None
        bins.append(CalibrationBin(low=b / n_bins, high=(b + 1) / n_bins, n=n, confidence=conf, accuracy=acc))
    brier = float((w * (p - y) ** 2).sum() / total)
    return Calibration(ece=float(ece), brier=brier, n=total, bins=tuple(bins))


def expected_calibration_error(predicted: Sequence[float], observed: Sequence[float], *,
                               n_bins: int = DEFAULT_BINS, weights: Sequence[float] | None = None) -> float:
    """:func:`calibration`'s ECE alone.

    >>> expected_calibration_error([0.25, 0.75], [0, 1], n_bins=2)
    0.25
    """
    return calibration(predicted, observed, n_bins=n_bins, weights=weights).ece


def brier_score(predicted: Sequence[float], observed: Sequence[float], *,
                weights: Sequence[float] | None = None) -> float:
    """:func:`calibration`'s Brier score alone.

    >>> brier_score([0.25, 0.75], [0, 1])
    0.0625
    """
    return calibration(predicted, observed, n_bins=1, weights=weights).brier


# ---------------------------------------------------------------------------- reliability


def pass_hat_k(successes: Sequence[Sequence[bool]] | Mapping[Hashable, Sequence[bool]], k: int) -> float:
    """pass^k (τ-bench): the chance that k runs of a scenario, drawn without replacement from its n
    runs, all succeed, averaged over scenarios: mean over scenarios of C(c, k) / C(n, k), with c the
    successful runs. With k = n (EduClaw-Bench's pass^4 over 4 student runs) it is the fraction of
    scenarios whose every run succeeded; pass^1 is the mean success rate. What counts as a success is
    the caller's (the paper does not say). Every scenario needs at least k runs.

    >>> pass_hat_k([[True, True, True, False], [True, True, True, True], [False, True, False, False]], 2)
    0.5
    """
    rows = list(successes.values()) if isinstance(successes, Mapping) else list(successes)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k: {k!r} is not a positive integer", field="k")
    if not rows:
        raise DataError("successes: no scenarios", field="successes")
    total = 0.0
    for i, runs in enumerate(rows):
        n = len(runs)
        if n < k:
            raise DataError(f"successes[{i}]: {n} runs, fewer than k = {k}", field=f"successes[{i}]")
        c = sum(1 for r in runs if r)
        total += math.comb(c, k) / math.comb(n, k)
    return total / len(rows)


def kendall_tau(x: Sequence[float] | Mapping[Hashable, float],
                y: Sequence[float] | Mapping[Hashable, float]) -> float | None:
    """Kendall's τ-b between two scorings of the same things (two rankings, or the scores that rank
    them): ``(C − D) / sqrt((P − Tx)(P − Ty))`` over the P = n(n−1)/2 pairs, with C and D the concordant
    and discordant pairs and Tx, Ty the pairs tied in x and in y. Two mappings are paired by key (the
    key sets must agree). None when either side is constant or there are fewer than two things (the
    statistic is undefined; scipy gives NaN there). Equal to ``scipy.stats.kendalltau`` (variant b).

    >>> kendall_tau([1, 2, 3, 4], [1, 3, 2, 4])
    0.6666666666666666
    >>> kendall_tau({"a": 3.0, "b": 1.0, "c": 2.0}, {"c": 0.2, "b": 0.1, "a": 0.3})
    1.0
    """
    a, b = _paired(x, y)
    n = len(a)
    if n < 2:
        return None
    dx = np.sign(a[:, None] - a[None, :])
    dy = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(n, k=1)
    sx, sy = dx[upper], dy[upper]
    s = float((sx * sy).sum())
    untied_x = float(np.count_nonzero(sx))
    untied_y = float(np.count_nonzero(sy))
    if untied_x == 0 or untied_y == 0:
        return None
    return s / math.sqrt(untied_x * untied_y)


def mean_pairwise_kendall(scorings: Sequence[Sequence[float] | Mapping[Hashable, float]]) -> float | None:
    """The mean :func:`kendall_tau` over every pair of scorings (EduClaw-Bench's cross-student
    stability: one ranking of the tutors per student model); undefined pairs are left out.

    >>> mean_pairwise_kendall([[1, 2, 3], [1, 2, 3], [3, 2, 1]])
    -0.3333333333333333
    """
    values = [t for u, v in combinations(scorings, 2) if (t := kendall_tau(u, v)) is not None]
    return float(np.mean(values)) if values else None


# ------------------------------------------------------------------------------------ helpers


def _unit_interval(values: Sequence[float], field: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{field}: expected numbers", field=field) from None
    if array.ndim != 1:
        raise DataError(f"{field}: expected a flat sequence of numbers", field=field)
    bad = np.flatnonzero(~((array >= 0.0) & (array <= 1.0)))
    if bad.size:
        raise DataError(f"{field}[{bad[0]}]: {array[bad[0]]} is not in [0, 1]", field=f"{field}[{bad[0]}]")
    return array


def _paired(x, y) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(x, Mapping) or isinstance(y, Mapping):
        if not (isinstance(x, Mapping) and isinstance(y, Mapping)):
            raise DataError("y: pair two mappings or two sequences, not one of each", field="y")
        if set(x) != set(y):
            missing = sorted(map(str, set(x) ^ set(y)))
            raise DataError(f"y: the two scorings name different things ({', '.join(missing)})", field="y")
        keys = list(x)
        x, y = [x[k] for k in keys], [y[k] for k in keys]
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise DataError(f"y: {b.size} scores for {a.size} things", field="y")
    if np.any(~np.isfinite(a)) or np.any(~np.isfinite(b)):
        raise DataError("x: scores must be finite numbers", field="x")
    return a, b
