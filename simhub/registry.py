"""Name → ``"module:attribute"`` registries whose entries are imported when first used.

simhub has three: the turn-level metrics (:mod:`simhub.metrics.registry`), the dialogue-level
metrics (:mod:`simhub.evaluation.dialogue_level.registry`) and the model backends
(:mod:`simhub.models.loader`). Each lists its built-in entries as strings, so naming one costs no
import; a plugin adds one with ``register`` (a string or the object itself) or through the
registry's entry-point group, read on the first lookup.

>>> reg = LazyRegistry("colour", {"path": "os.path:join"})
>>> reg.get("path")("a", "b")
'a/b'
>>> reg.register("sep", "os:sep"); reg.names()
['path', 'sep']
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Entries by name, in registration order; ``get`` imports an entry once and keeps it.

    ``entries`` is the dict of built-in entries, kept and updated in place (a module's ``_REGISTRY``
    stays the live list); ``what`` names an entry in the unknown-name error, which
    ``unknown(name, known)`` builds (by default :class:`~simhub.errors.UnknownNameError` with a
    did-you-mean); ``group`` is the entry-point group plugins declare entries in.
    """

    def __init__(self, what: str, entries: dict[str, str], *, group: str | None = None,
                 unknown: Callable[[str, list[str]], Exception] | None = None):
        self.what, self.group = what, group
        self._entries = entries
        self._loaded: dict[str, T] = {}
        self._plugins_read = group is None
        self._lock = threading.Lock()
        self._unknown = unknown

    def register(self, name: str, target: str | T) -> None:
        """Add (or replace) entry ``name``: a ``"module:attribute"`` string or the object itself."""
        with self._lock:
            if isinstance(target, str):
                self._entries[name] = target
                self._loaded.pop(name, None)
            else:
                self._entries[name] = f"{target.__module__}:{target.__qualname__}"  # type: ignore[attr-defined]
                self._loaded[name] = target

    def unregister(self, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)
            self._loaded.pop(name, None)

    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        self._plugins_read = True
        for ep in entry_points(group=self.group):
            with self._lock:
                self._entries.setdefault(ep.name, ep.value)

    def names(self) -> list[str]:
        """Every entry's name, in registration order (plugins' included)."""
        self._read_plugins()
        with self._lock:
            return list(self._entries)

    def target(self, name: str) -> str | None:
        """The ``"module:attribute"`` string of entry ``name``, or None."""
        self._read_plugins()
        with self._lock:
            return self._entries.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.target(name) is not None

    def get(self, name: str) -> T:
        """Entry ``name``, imported on first use; an unknown name is the registry's error, listing the known."""
        self._read_plugins()
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            target = self._entries.get(name)
            known = list(self._entries)
        if target is None:
            if self._unknown is not None:
                raise self._unknown(name, known)
            from simhub.errors import UnknownNameError

            raise UnknownNameError(self.what, name, known)
        module, _, attr = target.partition(":")
        value: T = getattr(importlib.import_module(module), attr)
        with self._lock:
            self._loaded[name] = value
        return value
