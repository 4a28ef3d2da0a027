"""The KT backends by name: ``name -> "module:Class"``, imported when first used.

A backend is a :class:`~simhub.learners.kt.base.KTModel` subclass with a ``load(path)`` classmethod.
A saved model file names its backend (``"backend": "bkt"``), so :func:`load_kt_model` reads any of
them. A plugin adds one with :func:`register_kt_backend`.
"""

from __future__ import annotations

import os
from pathlib import Path

from simhub.errors import DataError, UnknownNameError
from simhub.learners.kt.base import KTModel, read_json_object
from simhub.registry import LazyRegistry

__all__ = ["kt_backend", "kt_backend_names", "load_kt_model", "register_kt_backend"]

_REGISTRY: dict[str, str] = {
    "bkt": "simhub.learners.kt.bkt:BKT",
    "akt": "simhub.learners.kt.akt:AKTModel",
    "llmkt": "simhub.learners.kt.llmkt:LLMKTModel",
}
_BACKENDS: LazyRegistry[type[KTModel]] = LazyRegistry(
    "KT backend", _REGISTRY, unknown=lambda name, known: UnknownNameError("KT backend", name, known, field="backend"))


def register_kt_backend(name: str, target: str | type[KTModel]) -> None:
    """Add (or replace) backend ``name``: a ``"module:Class"`` string or the class itself."""
    _BACKENDS.register(name, target)


def kt_backend_names() -> list[str]:
    return _BACKENDS.names()


def kt_backend(name: str) -> type[KTModel]:
    """The class registered as ``name`` (an UnknownNameError on ``backend`` lists the known ones)."""
    return _BACKENDS.get(name)


def load_kt_model(path: str | os.PathLike[str], backend: str | None = None) -> KTModel:
    """The model saved at ``path``, by the backend the file names (or ``backend`` when given)."""
    path = Path(path)
    if backend is None:
        backend = read_json_object(path).get("backend")
        if not isinstance(backend, str):
            raise DataError(f"{path}: backend: missing (the file must name its KT backend)", file=str(path),
                            field="backend")
    cls = kt_backend(backend)
    load = getattr(cls, "load", None)
    if load is None:
        raise DataError(f"{path}: KT backend {backend!r} cannot load a saved model", file=str(path), field="backend")
    return load(path)
