"""The content-addressed response cache: each successful response body stored under the SHA-256 of
the base URL and the exact request body (never the key), and the process-wide switch that turns it
off (``--no-cache``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhub.errors import ConfigError, EndpointError
from simhub.models.openai.config import request_key
from simhub.models.openai.results import ChatResult, EndpointFailure, Outcome, parse_chat_response
from simhub.schema import atomic_write_bytes

if TYPE_CHECKING:
    from simhub.models.openai.config import EndpointConfig

log = logging.getLogger("simhub.models.openai")

_CACHE_OFF_LOCK = threading.Lock()
_cache_off = 0


@contextlib.contextmanager
def response_cache_off(active: bool = True) -> Iterator[None]:
    """While inside (and ``active``), no client of this process reads or writes its response cache or remembered
    batch ids: every request is sent. Process-wide rather than per client because clients are shared
    per endpoint (a judge's client serves every caller), and a run's ``--no-cache`` covers them all;
    the request threads a client starts do not inherit a context variable, so a counter it is."""
    global _cache_off
    if not active:
        yield
        return
    with _CACHE_OFF_LOCK:
        _cache_off += 1
    try:
        yield
    finally:
        with _CACHE_OFF_LOCK:
            _cache_off -= 1


class _ResponseCache:
    """The cache half of :class:`~simhub.models.openai.client.OpenAIClient` (a mixin: it reads the
    client's ``config`` and ``_display_url`` and counts through its ``_count``)."""

    config: EndpointConfig
    _display_url: str

    if TYPE_CHECKING:
        def _count(self, **deltas: int) -> None: ...

    def _from_cache(self, payloads: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Any], list[int]]:
        """Cache keys, results filled from the cache, and the indices still to ask for."""
        keys, results, pending = [], [], []
        for i, payload in enumerate(payloads):
            if not isinstance(payload, Mapping):
                raise ConfigError(
                    f"payloads[{i}]: a request body must be a JSON object", field=f"payloads[{i}]"
                )
            try:
                keys.append(request_key(self.config.base_url, payload))
            except (TypeError, ValueError):
                raise ConfigError(
                    f"payloads[{i}]: the request body is not JSON-serialisable", field=f"payloads[{i}]"
                ) from None
            hit = self._cache_get(keys[-1])
            results.append(hit)
            if hit is None:
                pending.append(i)
        if len(pending) < len(keys):
            self._count(cache_hits=len(keys) - len(pending))
        return keys, results, pending

    def _finish(self, results: list[Any], pending: list[int]) -> list[Outcome]:
        failed = sum(1 for i in pending if isinstance(results[i], EndpointFailure))
        if failed:
            self._count(failures=failed)
        return results

    def _cache_folder(self) -> Path | None:
        """Where this client caches now: its ``cache_dir``, unless :func:`response_cache_off` is active."""
        return None if _cache_off else self.config.cache_dir

    def _cache_path(self, key: str) -> Path | None:
        folder = self._cache_folder()
        return None if folder is None else folder / "responses" / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> ChatResult | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            result = parse_chat_response(json.loads(path.read_bytes())["response"])
        except (OSError, ValueError, KeyError, TypeError, EndpointError):
            log.warning("ignoring unreadable cache entry %s", path.name)
            return None
        return dataclasses.replace(result, cached=True)

    def _cache_put(self, key: str, body: Any) -> None:
        path = self._cache_path(key)
        if path is not None:
            record = {"key": key, "base_url": self._display_url, "response": body}
            atomic_write_bytes(path, json.dumps(record, ensure_ascii=False).encode())
