"""Fitting BKT parameters to item-response sequences: EM (Baum–Welch) or a grid search.

The input is, per KC, one 0/1 sequence per student in time order (what
:meth:`simhub.learners.kt.logs.ResponseLog.kc_sequences` gives). Each KC is fitted alone, as BKT's
KCs share nothing. BKT is a two-state hidden Markov model (unmastered, mastered): the state at an
observation emits the answer (correct with probability ``G`` unmastered, ``1−S`` mastered), then
moves on (``T`` to learn, ``F`` to forget).

* **EM** runs the scaled forward–backward pass over all of a KC's sequences at once and re-estimates
  the parameters from the expected counts, until the log-likelihood gains less than ``tol`` or
  ``max_iter`` passes; it starts from ``restarts`` points (the first fixed, the others drawn from
  ``numpy.random.default_rng(seed)`` within the bounds) and keeps the best end point (the earliest
  on a tie). After every M-step each parameter is clipped into its bounds.
* **Grid** evaluates the exact log-likelihood at every point of a regular grid (``grid_step``)
  inside the bounds and keeps the best (the first in grid order on a tie).

The bounds default to guess and slip below 0.5 (``(0.001, 0.499)``): a model whose guess or slip
passes 0.5 says a student who has *not* mastered the KC answers better than one who has, which
is the label-switched solution. The fit is deterministic: the same data, settings and seed give the
same parameters, bit for bit, on one machine.

>>> from simhub.learners.kt.bkt_fit import FitSettings, fit_bkt
>>> model = fit_bkt({"add": [[0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 1, 1, 1]]}, FitSettings(seed=0))
>>> 0.0 < model.params["add"].p_guess < 0.5
True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import numpy as np

from simhub.errors import ConfigError, DataError
from simhub.learners.kt.bkt import BKT, BKTParams, FitInfo, KCFit

__all__ = ["Bounds", "FitSettings", "fit_bkt", "fit_kc", "log_likelihood"]

#: The EM start that every fit tries first (init, learn, guess, slip, forget).
_FIRST_START = (0.5, 0.1, 0.2, 0.1, 0.0)
#: At most this many grid points x sequences are evaluated in one numpy pass.
_GRID_CHUNK = 1 << 21

Sequences = Sequence[Sequence[int | bool]]


@dataclass(frozen=True)
class Bounds:
    """Closed intervals ``(low, high)`` for each parameter."""

    init: tuple[float, float] = (0.001, 0.999)
    learn: tuple[float, float] = (0.001, 0.999)
    guess: tuple[float, float] = (0.001, 0.499)
    slip: tuple[float, float] = (0.001, 0.499)
    forget: tuple[float, float] = (0.0, 0.999)

    def as_array(self) -> np.ndarray:
        return np.array([self.init, self.learn, self.guess, self.slip, self.forget], dtype=np.float64)


@dataclass(frozen=True)
class FitSettings:
    """How :func:`fit_bkt` fits: ``method`` (``"em"`` or ``"grid"``), ``seed`` (EM restarts),
    ``restarts``, ``max_iter``, ``tol`` (EM), ``grid_step`` (grid), ``forgetting`` (fit ``p_forget``
    too; otherwise it is 0) and the parameter ``bounds``."""

    method: Literal["em", "grid"] = "em"
    seed: int = 0
    restarts: int = 5
    max_iter: int = 500
    tol: float = 1e-7
    grid_step: float = 0.05
    forgetting: bool = False
    bounds: Bounds = field(default_factory=Bounds)

    def __post_init__(self) -> None:
        if self.method not in ("em", "grid"):
            raise ConfigError(f"method: {self.method!r} is not 'em' or 'grid'", field="method")
        if self.restarts < 1 or self.max_iter < 1:
            raise ConfigError("restarts and max_iter must be at least 1", field="restarts")
        if not 0.0 < self.grid_step < 0.5:
            raise ConfigError(f"grid_step: {self.grid_step} is not in (0, 0.5)", field="grid_step")
        b = self.bounds.as_array()
        if np.any(b[:, 0] > b[:, 1]) or np.any(b < 0.0) or np.any(b > 1.0):
            raise ConfigError("bounds: every bound must be 0 <= low <= high <= 1", field="bounds")
        if b[2, 1] >= 0.5 or b[3, 1] >= 0.5:
            raise ConfigError("bounds: guess and slip must stay below 0.5", field="bounds")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def fit_bkt(data: Mapping[str, Sequences] | object, settings: FitSettings | None = None, *,
            pooled: bool = False) -> BKT:
    """A :class:`~simhub.learners.kt.bkt.BKT` fitted per KC to ``data``: ``{kc: [sequence, ...]}``
    of 0/1 answers, or a :class:`~simhub.learners.kt.logs.ResponseLog`. KCs are fitted in sorted order.

    ``pooled``: one parameter set fitted on every KC's sequences together and given to each KC, the
    usual remedy when each KC has too few answers for a fit of its own (on the sample corpus's 570
    answers over 49 KCs the per-KC fits run to the bounds: ``p_learn`` 1, ``p_guess`` 0)."""
    settings = settings or FitSettings()
    sequences = data.kc_sequences() if hasattr(data, "kc_sequences") else data
    if not sequences:
        raise DataError("no observations to fit", field="data")
    params: dict[str, BKTParams] = {}
    fits: dict[str, KCFit] = {}
    if pooled:
        shared, fit = fit_kc([s for kc in sorted(sequences) for s in sequences[kc]], settings, kc="pooled")
        params = dict.fromkeys(sorted(sequences), shared)
        fits = dict.fromkeys(sorted(sequences), fit)
    for kc in sorted(sequences) if not pooled else ():
        params[kc], fits[kc] = fit_kc(sequences[kc], settings, kc=kc)
    settings_dict = msgspec.json.decode(msgspec.json.encode(settings.as_dict()))  # JSON-plain, as when loaded
    del settings_dict["method"], settings_dict["seed"]
    if pooled:
        settings_dict["pooled"] = True
    return BKT(params, fit=FitInfo(method=settings.method, seed=settings.seed, settings=settings_dict), kc_fits=fits)


def fit_kc(sequences: Sequences, settings: FitSettings | None = None, *, kc: str = "kc") -> tuple[BKTParams, KCFit]:
    """One KC's parameters and fit record from its sequences (one per student)."""
    settings = settings or FitSettings()
    y, mask = _pad(sequences, kc)
    n_obs = int(mask.sum())
    if settings.method == "grid":
        theta, ll = _grid(y, mask, settings)
        iterations, converged = 0, True
    else:
        theta, ll, iterations, converged = _em_restarts(y, mask, settings)
    init, learn, guess, slip, forget = (float(v) for v in theta)
    params = BKTParams(p_init=init, p_learn=learn, p_guess=guess, p_slip=slip, p_forget=forget)
    return params, KCFit(n_students=len(y), n_observations=n_obs, log_likelihood=float(ll),
                         iterations=iterations, converged=converged)


def log_likelihood(sequences: Sequences, params: BKTParams) -> float:
    """The log-likelihood of the sequences under ``params`` (natural log, summed over answers)."""
    y, mask = _pad(sequences, "kc")
    return float(_forward(y, mask, np.array(params.as_tuple()))[1])


# ------------------------------------------------------------------------------------ internals


def _pad(sequences: Sequences, kc: str) -> tuple[np.ndarray, np.ndarray]:
    seqs = [list(s) for s in sequences if len(s)]
    if not seqs:
        raise DataError(f"kc {kc!r}: no observations to fit", field="kc")
    width = max(len(s) for s in seqs)
    y = np.zeros((len(seqs), width), dtype=np.float64)
    mask = np.zeros((len(seqs), width), dtype=bool)
    for i, s in enumerate(seqs):
        try:
            values = np.asarray([float(v) for v in s], dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"kc {kc!r}: answers must be 0 or 1", field="kc") from None
        if np.any((values != 0) & (values != 1)):
            raise DataError(f"kc {kc!r}: answers must be 0 or 1", field="kc")
        y[i, : len(s)] = values
        mask[i, : len(s)] = True
    return y, mask


def _emissions(y: np.ndarray, mask: np.ndarray, guess, slip) -> tuple[np.ndarray, np.ndarray]:
    """P(answer | unmastered), P(answer | mastered); 1 at padding, which makes padding neutral."""
    e0 = np.where(y == 1.0, guess, 1.0 - guess)
    e1 = np.where(y == 1.0, 1.0 - slip, slip)
    return np.where(mask, e0, 1.0), np.where(mask, e1, 1.0)


def _forward(y: np.ndarray, mask: np.ndarray, theta: np.ndarray):
    """Scaled forward pass: (filtered P(mastered) per position, log-likelihood, scales c, priors)."""
    init, learn, guess, slip, forget = theta
    e0, e1 = _emissions(y, mask, guess, slip)
    n, width = y.shape
    alpha = np.empty((n, width))
    scale = np.empty((n, width))
    prior = np.full(n, init)
    for t in range(width):
        a1 = prior * e1[:, t]
        c = a1 + (1.0 - prior) * e0[:, t]
        c = np.maximum(c, 1e-300)
        scale[:, t] = c
        alpha[:, t] = a1 / c
        prior = alpha[:, t] * (1.0 - forget) + (1.0 - alpha[:, t]) * learn
    return alpha, float(np.log(scale).sum()), scale, (e0, e1)


def _em_step(y: np.ndarray, mask: np.ndarray, theta: np.ndarray, forgetting: bool):
    _init, learn, guess, slip, forget = theta
    alpha, ll, scale, (e0, e1) = _forward(y, mask, theta)
    n, width = y.shape
    # Scaled backward pass: beta[:, t] = (b0, b1).
    b0 = np.ones((n, width))
    b1 = np.ones((n, width))
    for t in range(width - 2, -1, -1):
        n0 = e0[:, t + 1] * b0[:, t + 1] / scale[:, t + 1]
        n1 = e1[:, t + 1] * b1[:, t + 1] / scale[:, t + 1]
        b0[:, t] = (1.0 - learn) * n0 + learn * n1
        b1[:, t] = forget * n0 + (1.0 - forget) * n1
    g1 = alpha * b1
    g0 = (1.0 - alpha) * b0
    total = g0 + g1
    g0, g1 = g0 / total, g1 / total  # exact up to rounding; renormalised against drift
    g0, g1 = g0 * mask, g1 * mask
    step = mask[:, 1:]  # transitions t -> t+1 inside a sequence
    n1_next = e1[:, 1:] * b1[:, 1:] / scale[:, 1:]
    n0_next = e0[:, 1:] * b0[:, 1:] / scale[:, 1:]
    xi01 = ((1.0 - alpha[:, :-1]) * learn * n1_next * step).sum()
    xi10 = (alpha[:, :-1] * forget * n0_next * step).sum()
    from0 = (g0[:, :-1] * step).sum()
    from1 = (g1[:, :-1] * step).sum()
    new = np.array([
        g1[:, 0].mean(),
        xi01 / from0 if from0 > 0 else learn,
        (g0 * y).sum() / g0.sum() if g0.sum() > 0 else guess,
        (g1 * (1.0 - y)).sum() / g1.sum() if g1.sum() > 0 else slip,
        (xi10 / from1 if from1 > 0 else forget) if forgetting else 0.0,
    ])
    return new, ll


def _clip(theta: np.ndarray, settings: FitSettings) -> np.ndarray:
    b = settings.bounds.as_array()
    out = np.clip(theta, b[:, 0], b[:, 1])
    if not settings.forgetting:
        out[4] = 0.0
    return out


def _em(y, mask, start: np.ndarray, settings: FitSettings):
    """EM from ``start``: the best point seen (clipping can make a step lose likelihood), its
    log-likelihood, the passes made and whether the gain fell below ``tol``."""
    theta = _clip(start, settings)
    best_theta, best_ll = theta, -math.inf
    previous = -math.inf
    for iteration in range(1, settings.max_iter + 1):
        new, ll = _em_step(y, mask, theta, settings.forgetting)
        if ll > best_ll:
            best_theta, best_ll = theta, ll
        if iteration > 1 and ll - previous < settings.tol:
            return best_theta, best_ll, iteration, True
        theta, previous = _clip(new, settings), ll
    ll = _forward(y, mask, theta)[1]
    if ll > best_ll:
        best_theta, best_ll = theta, ll
    return best_theta, best_ll, settings.max_iter, False


def _em_restarts(y, mask, settings: FitSettings):
    rng = np.random.default_rng(settings.seed)
    b = settings.bounds.as_array()
    starts = [np.array(_FIRST_START)]
    for _ in range(settings.restarts - 1):
        starts.append(rng.uniform(b[:, 0], b[:, 1]))
    best = None
    for start in starts:
        result = _em(y, mask, start, settings)
        if best is None or result[1] > best[1]:
            best = result
    return best


def _axis(low: float, high: float, step: float) -> np.ndarray:
    points = np.round(np.arange(1, math.ceil(1.0 / step - 1e-9)) * step, 10)
    points = points[(points >= low) & (points <= high)]
    return points if points.size else np.array([(low + high) / 2.0])


def _grid(y, mask, settings: FitSettings):
    b = settings.bounds
    step = settings.grid_step
    axes = [_axis(*b.init, step), _axis(*b.learn, step), _axis(*b.guess, step), _axis(*b.slip, step),
            _axis(*b.forget, step) if settings.forgetting else np.array([0.0])]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 5)
    n, width = y.shape
    chunk = max(1, _GRID_CHUNK // max(n, 1))
    best_ll, best_theta = -math.inf, grid[0]
    for start in range(0, len(grid), chunk):
        part = grid[start: start + chunk]
        init, learn, guess, slip, forget = (part[:, i: i + 1] for i in range(5))
        prior = np.broadcast_to(init, (len(part), n))
        ll = np.zeros(len(part))
        for t in range(width):
            obs = y[:, t][None, :]
            valid = mask[:, t][None, :]
            e0 = np.where(valid, np.where(obs == 1.0, guess, 1.0 - guess), 1.0)
            e1 = np.where(valid, np.where(obs == 1.0, 1.0 - slip, slip), 1.0)
            a1 = prior * e1
            c = np.maximum(a1 + (1.0 - prior) * e0, 1e-300)
            ll += np.log(c).sum(axis=1)
            post = a1 / c
            prior = post * (1.0 - forget) + (1.0 - post) * learn
        i = int(np.argmax(ll))
        if ll[i] > best_ll:
            best_ll, best_theta = float(ll[i]), part[i]
    return best_theta.copy(), best_ll
