"""Where an endpoint is and how hard to try it (:class:`EndpointConfig`), and the secret-free forms
of its address used in messages and cache keys."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from simhub.errors import ConfigError, UnknownNameError
from simhub.models.openai.payload import _checked_int


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Where an OpenAI-compatible endpoint is and how hard to try it.

    Endpoint
        ``base_url`` ends in ``/v1`` (``https://api.openai.com/v1``, ``http://localhost:8000/v1``
        for vLLM). ``model`` is the model :meth:`OpenAIClient.payload` puts in its bodies.
    Key
        ``api_key_env`` names the environment variable holding the key, read when a request is
        sent (so a rotated key is picked up) and never stored; ``api_key_fallbacks`` are tried
        after it. ``api_key_env=None`` (the default) sends no key. Which variables suit which host
        is decided by :func:`simhub.models.endpoints.key_names`, never here.
    Retries
        Up to ``max_retries`` retries after the first attempt, waiting ``backoff_s·2^k`` (at
        most ``max_backoff_s``, times a random factor in [0.5, 1] so parallel workers spread
        out, and at least what a ``Retry-After`` header asks) between them. Each attempt may
        take ``timeout_s`` seconds.
    Load
        At most ``concurrency`` requests in flight per client, however many batches share it.
    Cache
        ``cache_dir``: where responses and remembered batch ids live; None disables both.
    """

    base_url: str
    model: str
    api_key_env: str | None = None
    api_key_fallbacks: tuple[str, ...] = ()
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    concurrency: int = 8
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ConfigError(
                "base_url: must be an http(s) URL such as https://api.openai.com/v1", field="base_url"
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model: a model name is required", field="model")
        if self.api_key_env is not None and not (isinstance(self.api_key_env, str) and self.api_key_env):
            raise ConfigError(
                "api_key_env: must name an environment variable, or be null", field="api_key_env"
            )
        fallbacks = (
            (self.api_key_fallbacks,) if isinstance(self.api_key_fallbacks, str) else self.api_key_fallbacks
        )
        if not all(isinstance(name, str) and name for name in fallbacks):
            raise ConfigError(
                "api_key_fallbacks: must be a list of environment variable names", field="api_key_fallbacks"
            )
        object.__setattr__(self, "api_key_fallbacks", tuple(fallbacks))
        for name, low in (("timeout_s", 0.0), ("backoff_s", 0.0), ("max_backoff_s", 0.0)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or value < low
                or (name == "timeout_s" and value == 0)
            ):
                raise ConfigError(f"{name}: must be a positive number of seconds, got {value!r}", field=name)
        _checked_int("max_retries", self.max_retries, 0)
        _checked_int("concurrency", self.concurrency, 1)
        if self.cache_dir is not None:
            if not isinstance(self.cache_dir, str | os.PathLike):
                raise ConfigError("cache_dir: must be a folder path, or null", field="cache_dir")
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, section: str = "endpoint") -> EndpointConfig:
        """Build from a profile section; an unknown key is an error naming ``section.key``."""
        known = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in known:
                raise UnknownNameError("endpoint option", key, known, field=f"{section}.{key}")
        for required in ("base_url", "model"):
            if required not in data:
                raise ConfigError(f"{section}.{required}: required", field=f"{section}.{required}")
        try:
            return cls(**data)
        except ConfigError as exc:
            where = f"{section}.{exc.field}" if exc.field else section
            raise ConfigError(f"{section}.{exc.message}", field=where) from None

    @property
    def key_names(self) -> tuple[str, ...]:
        """The environment variables searched for the key, in order (empty: no key needed)."""
        if self.api_key_env is None:
            return ()
        return tuple(dict.fromkeys((self.api_key_env, *self.api_key_fallbacks)))


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
