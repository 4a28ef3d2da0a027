"""The knowledge-tracing (KT) backbone interface: a belief over KCs, updated one graded answer at a time.

A KT model keeps, per student, a *belief* about which knowledge components (KCs) the student has
mastered. It is told one graded observation at a time: the student answered ``item``, which
exercises ``kc``, and was ``correct`` or not. EduClaw-Bench (U. Lee et al., arXiv 2608.03206) writes
this as ``b' = f(b, q, k, y)``; here it is :meth:`KTModel.update`, a pure function that returns a new
belief and never changes the one it was given.

Beliefs are backend-specific (BKT keeps one probability per KC; an attention model would keep the
interaction history), so callers treat them as opaque values and ask the model about them:

* :meth:`KTModel.mastery`: the probability that the KC is mastered, in [0, 1];
* :meth:`KTModel.predict`: the probability that the next answer on the KC is correct;
* :meth:`KTModel.masteries`: every KC's mastery, in the model's KC order.

A KC the model has no parameters for is an :class:`UnknownKCError` naming it (and the closest
known KC), never a silent default.
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from simhub.errors import DataError, did_you_mean

__all__ = ["KTModel", "UnknownKCError"]


class UnknownKCError(DataError):
    """A KC the KT model has no parameters for; ``kc`` is the name, ``known`` the model's KCs."""

    def __init__(self, kc: str, known: Iterable[str], *, model: str = "KT model"):
        known = list(known)
        shown = ", ".join(map(repr, known[:8])) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
        super().__init__(f"kc: {kc!r} is not a KC of this {model}{did_you_mean(kc, known)}; "
                         f"it knows {len(known)}: {shown or 'none'}", field="kc")
        self.kc, self.known = kc, known


class KTModel(abc.ABC):
    """A fitted KT model: its KCs, the belief of a new student, and the pure update.

    Subclasses implement :attr:`kcs`, :meth:`initial_belief`, :meth:`update`, :meth:`mastery` and
    :meth:`predict`; a backend that can be saved also gives :meth:`save` and a ``load(path)``
    classmethod, which :func:`simhub.learners.kt.registry.load_kt_model` calls.
    """

    #: The name the backend is registered under (``"bkt"``).
    backend: str = ""

    @property
    @abc.abstractmethod
    def kcs(self) -> Sequence[str]:
        """The KCs the model has parameters for, in a fixed order."""

    @abc.abstractmethod
    def initial_belief(self) -> Any:
        """The belief about a student the model has seen nothing of."""

    @abc.abstractmethod
    def update(self, belief: Any, item: Hashable, kc: str, correct: bool) -> Any:
        """The belief after the student answered ``item`` (on ``kc``) ``correct``ly or not; pure."""

    @abc.abstractmethod
    def mastery(self, belief: Any, kc: str) -> float:
        """P(``kc`` mastered) under ``belief``."""

    @abc.abstractmethod
    def predict(self, belief: Any, kc: str, item: Hashable | None = None) -> float:
        """P(the next answer on ``kc``, to ``item`` when the backend uses items, is correct)."""

    def masteries(self, belief: Any) -> dict[str, float]:
        """Every KC's mastery under ``belief``, in :attr:`kcs` order."""
        return {kc: self.mastery(belief, kc) for kc in self.kcs}

    def replay(self, observations: Iterable[tuple[Hashable, str, bool]], belief: Any = None) -> Any:
        """The belief after ``(item, kc, correct)`` observations in order, from ``belief`` (default:
        :meth:`initial_belief`); how a warm-up history seeds a learner."""
        current = self.initial_belief() if belief is None else belief
        for item, kc, correct in observations:
            current = self.update(current, item, kc, correct)
        return current

    def check_kc(self, kc: str) -> str:
        """``kc`` when the model knows it, else an :class:`UnknownKCError`."""
        if kc not in self._kc_set():
            raise UnknownKCError(kc, self.kcs, model=f"{self.backend or 'KT'} model")
        return kc

    def _kc_set(self) -> frozenset[str]:
        cached = self.__dict__.get("_kc_frozen")
        if cached is None:
            cached = frozenset(self.kcs)
            self.__dict__["_kc_frozen"] = cached
        return cached


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A saved model file's JSON object; a DataError naming the file when it is missing, not JSON or
    not an object."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc})", file=str(path)) from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a JSON object", file=str(path), field="$")
    return raw
