"""Bayesian Knowledge Tracing (Corbett & Anderson 1995), written out by hand.

Each KC has four parameters (and an optional fifth):

* ``p_init``  P(L0): the KC is mastered before the first observation;
* ``p_learn`` P(T): an unmastered KC becomes mastered after an opportunity;
* ``p_guess`` P(G): a correct answer without mastery;
* ``p_slip``  P(S): a wrong answer with mastery;
* ``p_forget`` P(F): a mastered KC is lost after an opportunity (0 in standard BKT).

The belief is P(L), per KC. One observation on a KC with current P(L) = p:

1. **Posterior** given the answer,
   ``p | correct = p(1−S) / (p(1−S) + (1−p)G)`` and ``p | wrong = pS / (pS + (1−p)(1−G))``;
2. **Transition** (the opportunity to learn), ``p' = p_post (1−F) + (1−p_post) T``.

:meth:`BKT.mastery` is the current P(L) (after the last transition); :meth:`BKT.predict` is the
probability of a correct next answer, ``P(L)(1−S) + (1−P(L))G``. Items play no part (BKT is per KC).

Fitted parameters are saved as a versioned JSON file (:class:`BKTFile`, ``schema_version``
:data:`BKT_FILE_VERSION`); :meth:`BKT.load` refuses a version it does not read, naming the file.
Fitting (EM and grid search) is in :mod:`simhub.learners.kt.bkt_fit`.
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from simhub.errors import ConfigError, DataError
from simhub.learners.kt.base import KTModel, read_json_object
from simhub.runformat import convert_checked
from simhub.schema import atomic_write_bytes
from simhub.versions import check_version

__all__ = [
    "BKT",
    "BKT_FILE_VERSION",
    "BKT_READS",
    "BKTBelief",
    "BKTFile",
    "BKTParams",
    "FitInfo",
    "KCFit",
    "posterior",
    "predict_correct",
    "transition",
]

#: The version :meth:`BKT.save` writes.
BKT_FILE_VERSION = 1
#: The versions :meth:`BKT.load` reads.
BKT_READS: tuple[int, ...] = (1,)

Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Count = Annotated[int, msgspec.Meta(ge=0)]


class BKTParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One KC's BKT parameters, each a probability."""

    p_init: Probability
    p_learn: Probability
    p_guess: Probability
    p_slip: Probability
    p_forget: Probability = 0.0

    def as_tuple(self) -> tuple[float, float, float, float, float]:
        return (self.p_init, self.p_learn, self.p_guess, self.p_slip, self.p_forget)


class KCFit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How one KC's parameters were fitted: the data seen and the log-likelihood reached."""

    n_students: Count
    n_observations: Count
    log_likelihood: float
    iterations: Count = 0
    converged: bool = True


class FitInfo(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The fitting settings (:class:`simhub.learners.kt.bkt_fit.FitSettings` as written to the file)."""

    method: Literal["em", "grid"]
    seed: int
    settings: dict[str, Any] = {}


class BKTFile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A saved BKT model: ``schema_version``, ``backend`` (``"bkt"``), the parameters per KC, and
    optionally how they were fitted."""

    schema_version: int = BKT_FILE_VERSION
    backend: Literal["bkt"] = "bkt"
    kcs: dict[str, BKTParams]
    fit: FitInfo | None = None
    kc_fits: dict[str, KCFit] = {}
    simhub_version: str | None = None


# ------------------------------------------------------------------------------------ the formulas


def posterior(p_learned: float, correct: bool, params: BKTParams) -> float:
    """P(L | the answer), before the learning transition (Bayes' rule on one observation)."""
    g, s = params.p_guess, params.p_slip
    if correct:
        num, den = p_learned * (1.0 - s), p_learned * (1.0 - s) + (1.0 - p_learned) * g
    else:
        num, den = p_learned * s, p_learned * s + (1.0 - p_learned) * (1.0 - g)
    # den is 0 only when the answer is impossible under the parameters (e.g. G = 0, p = 0, correct):
    # the observation carries no usable evidence, so the prior stands.
    return p_learned if den <= 0.0 else num / den


def transition(p_learned: float, params: BKTParams) -> float:
    """P(L) after one opportunity to learn (and, with ``p_forget`` > 0, to forget)."""
    return p_learned * (1.0 - params.p_forget) + (1.0 - p_learned) * params.p_learn


def predict_correct(p_learned: float, params: BKTParams) -> float:
    """P(correct) = P(L)(1−S) + (1−P(L))G."""
    return p_learned * (1.0 - params.p_slip) + (1.0 - p_learned) * params.p_guess


# ------------------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class BKTBelief:
    """P(L) for the KCs seen so far; a KC not in ``p_learned`` is still at its ``p_init``."""

    p_learned: Mapping[str, float] = field(default_factory=lambda: types.MappingProxyType({}))


class BKT(KTModel):
    """A BKT model over a fixed set of KCs (``params``: KC -> :class:`BKTParams`).

    >>> model = BKT({"fractions": BKTParams(p_init=0.2, p_learn=0.1, p_guess=0.25, p_slip=0.1)})
    >>> b = model.update(model.initial_belief(), "q1", "fractions", True)
    >>> round(model.mastery(b, "fractions"), 4)
    0.5263
    """

    backend = "bkt"

    def __init__(self, params: Mapping[str, BKTParams], *, fit: FitInfo | None = None,
                 kc_fits: Mapping[str, KCFit] | None = None):
        if not params:
            raise ConfigError("params: a BKT model needs at least one KC", field="params")
        for kc, p in params.items():
            if not isinstance(p, BKTParams):
                raise ConfigError(f"params.{kc}: expected BKTParams, got {type(p).__name__}", field=f"params.{kc}")
        self.params: Mapping[str, BKTParams] = types.MappingProxyType(dict(params))
        self.fit = fit
        self.kc_fits: Mapping[str, KCFit] = types.MappingProxyType(dict(kc_fits or {}))

    @property
    def kcs(self) -> Sequence[str]:
        return tuple(self.params)

    def kc_params(self, kc: str) -> BKTParams:
        """The parameters of ``kc`` (an UnknownKCError when the model has none)."""
        return self.params[self.check_kc(kc)]

    def initial_belief(self) -> BKTBelief:
        return BKTBelief()

    def _p(self, belief: BKTBelief, kc: str) -> float:
        params = self.kc_params(kc)
        return belief.p_learned.get(kc, params.p_init)

    def update(self, belief: BKTBelief, item: Hashable, kc: str, correct: bool) -> BKTBelief:
        params = self.kc_params(kc)
        p = belief.p_learned.get(kc, params.p_init)
        new = dict(belief.p_learned)
        new[kc] = transition(posterior(p, bool(correct), params), params)
        return BKTBelief(types.MappingProxyType(new))

    def mastery(self, belief: BKTBelief, kc: str) -> float:
        return self._p(belief, kc)

    def predict(self, belief: BKTBelief, kc: str, item: Hashable | None = None) -> float:
        return predict_correct(self._p(belief, kc), self.kc_params(kc))

    # -------------------------------------------------------------------------------- the file

    def to_file(self, simhub_version: str | None = None) -> BKTFile:
        return BKTFile(kcs=dict(self.params), fit=self.fit, kc_fits=dict(self.kc_fits),
                       simhub_version=simhub_version)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model as a :class:`BKTFile` (JSON, KCs in model order); returns the path."""
        from simhub import __version__

        path = Path(path)
        document = msgspec.to_builtins(self.to_file(simhub_version=__version__))
        atomic_write_bytes(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BKT:
        """The model saved at ``path``; a DataError names the file and what is wrong."""
        path = Path(path)
        raw = read_json_object(path)
        version = check_version(raw.get("schema_version"), BKT_READS, str(path), what="BKT file ", file=str(path))
        document = convert_checked(raw, BKTFile, str(path), file=str(path), version=version)
        if not document.kcs:
            raise DataError(f"{path}: kcs: a BKT file needs at least one KC", file=str(path), field="kcs")
        return cls(document.kcs, fit=document.fit, kc_fits=document.kc_fits)
