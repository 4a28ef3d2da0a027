"""A content-addressed cache of JSON values on disk.

Long jobs (simulating a split, scoring it, annotating) store each finished unit of work under the
hash of everything that determines it: the model (and its files), the prompt, the decoding
settings. A rerun of an identical job then makes no model or endpoint call and gives identical
results, and a job killed at any moment resumes where it stopped: every entry is written atomically
the moment it is finished.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simhub.schema import atomic_write_bytes


def fingerprint(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys): the cache key of a unit of work."""
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def source_digest(modules: tuple[str, ...]) -> str:
    """A hash of the source files of ``modules`` (by import name; a module not found hashes as ``?``):
    part of the cache key of results that these modules' code decides."""
    import importlib.util

    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        h.update(name.encode())
        h.update(Path(origin).read_bytes() if origin and Path(origin).is_file() else b"?")
    return h.hexdigest()


def fingerprint_of_json(parts: list[str]) -> str:
    """:func:`fingerprint` of a list whose elements are given as their canonical JSON already
    (``json.dumps(element, ensure_ascii=False)`` of strings and numbers): the same key, without
    encoding again what many keys share (a dialogue, in every key of its turns)."""
    return hashlib.sha256(("[" + ",".join(parts) + "]").encode()).hexdigest()


def folder_fingerprint(path: str | os.PathLike[str] | None) -> str | None:
    """What identifies a model folder's contents cheaply: names, sizes and modification times of its
    files (so a retrained adapter in the same folder gets new keys). None for a Hub id or nothing."""
    if path is None or not Path(path).is_dir():
        return None
    entries = []
    for p in sorted(Path(path).rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            stat = p.stat()
            entries.append((str(p.relative_to(path)), stat.st_size, int(stat.st_mtime)))
    return fingerprint(entries)


class ContentCache:
    """JSON values under ``root/<namespace>/<key[:2]>/<key>.json``; ``None`` disables caching."""

    def __init__(self, root: str | os.PathLike[str] | None, namespace: str):
        self.root = Path(root) / namespace if root is not None else None
        #: The folder as a string: a rerun reads thousands of entries, and pathlib's joins cost more than the reads.
        self._folder = os.fspath(self.root) if self.root is not None else ""
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        if self.root is None:
            return None
        try:
            with open(os.path.join(self._folder, key[:2], key + ".json"), "rb") as fh:
                value = json.loads(fh.read())
        except (OSError, ValueError):  # absent, or a torn file from another writer: recompute
            self.misses += 1
            return None
        self.hits += 1
        return value

    def get_bytes(self, key: str) -> bytes | None:
        """Entry ``key``'s stored JSON, undecoded (a caller decodes it straight into its type)."""
        if self.root is None:
            return None
        try:
            with open(os.path.join(self._folder, key[:2], key + ".json"), "rb") as fh:
                data = fh.read()
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: str, value: Any) -> None:
        if self.root is not None:
            atomic_write_bytes(self._path(key), json.dumps(value, ensure_ascii=False).encode())


def cached_answers(cache: ContentCache | None, keys: Sequence[str | None], compute: Callable[[list[int]], list[Any]],
                   *, ok: Callable[[Any], bool], encode: Callable[[Any], Any],
                   decode: Callable[[Any], Any]) -> tuple[list[Any], int, int]:
    """Answers from ``cache`` where it has them, else from ``compute`` (given the missing positions);
    a computed answer that is ``ok`` is stored. Returns the answers, the cache hits and the positions
    computed (the calls made)."""
    out: list[Any] = [None] * len(keys)
    hits = 0
    if cache is not None:
        for i, key in enumerate(keys):
            hit = cache.get(key) if key else None
            if hit is not None:
                out[i] = decode(hit)
                hits += 1
    todo = [i for i, v in enumerate(out) if v is None]
    if todo:
        for i, value in zip(todo, compute(todo), strict=True):
            out[i] = value
            if cache is not None and keys[i] and ok(value):
                cache.put(keys[i], encode(value))  # type: ignore[arg-type]
    return out, hits, len(todo)
