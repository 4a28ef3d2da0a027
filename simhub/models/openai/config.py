"""An endpoint as the client uses it (:class:`EndpointConfig`: a profile's
:class:`~simhub.config.EndpointSettings` with the model, the key variables and the cache folder),
and the secret-free forms of its address used in messages and cache keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from simhub.config import EndpointSettings, check_number
from simhub.errors import ConfigError


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """An OpenAI-compatible endpoint as a client uses it.

    Endpoint
        ``settings`` (:class:`~simhub.config.EndpointSettings`, the one definition of an endpoint's
        fields, checked there) say where it is (``base_url``, required here) and how hard to try it:
        each attempt may take ``timeout_s`` seconds, up to ``max_retries`` retries follow the first
        attempt, waiting ``backoff_s·2^k`` (at most ``max_backoff_s``, times a random factor in
        [0.5, 1] so parallel workers spread out, and at least what a ``Retry-After`` header asks)
        between them, and at most ``concurrency`` requests are in flight per client, however many
        batches share it. ``model`` is the model :meth:`OpenAIClient.payload` puts in its bodies.
    Key
        ``key_names`` are the environment variables searched for the key, in order, read when a
        request is sent (so a rotated key is picked up) and never stored; empty sends no key. Which
        variables suit which host is decided by :func:`simhub.models.endpoints.key_names` (through
        :func:`simhub.models.endpoints.endpoint_config`, which builds this from a profile's
        settings), never here.
    Cache
        ``cache_dir``: where responses and remembered batch ids live; None disables both.
    """

    settings: EndpointSettings
    model: str
    key_names: tuple[str, ...] = ()
    cache_dir: Path | None = None
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.settings.base_url:
            raise ConfigError("base_url: required for an OpenAI-compatible endpoint", field="base_url")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model: a model name is required", field="model")
        if not all(isinstance(name, str) and name for name in self.key_names):
            raise ConfigError("key_names: must be environment variable names", field="key_names")
        object.__setattr__(self, "key_names", tuple(self.key_names))
        check_number("backoff_s", self.backoff_s)
        check_number("max_backoff_s", self.max_backoff_s)
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))

    @property
    def base_url(self) -> str:
        return self.settings.base_url or ""

    @property
    def timeout_s(self) -> float:
        return self.settings.timeout_s

    @property
    def max_retries(self) -> int:
        return self.settings.max_retries

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency

    @property
    def api_key_env(self) -> str | None:
        """The first variable searched for the key (None: no key is sent)."""
        return self.key_names[0] if self.key_names else None


def request_key(base_url: str, payload: Mapping[str, Any]) -> str:
    """The cache key of a request: SHA-256 of the normalised base URL and the request body.

    The key (credential) is deliberately not part of it: the same question to the same endpoint
    has the same answer whoever pays for it.
    """
    canonical = json.dumps(
        {"base_url": base_url.rstrip("/"), "body": payload},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _display_url(url: str) -> str:
    """``url`` without credentials or query, safe for messages and cache files."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
