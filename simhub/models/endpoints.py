"""From a profile's endpoint settings to the shared OpenAI-compatible client.

The key variable is looked up in order: the kind's override (``SIMHUB_JUDGE_API_KEY``,
``SIMHUB_BASELINE_API_KEY``), the profile's ``api_key_env``, then ``OPENAI_API_KEY``; the value is
read when a request is sent and never stored. ``api_key_env: none`` declares an endpoint that takes
no key (a local vLLM server). One client per endpoint and model per process, so every caller shares
its concurrency limit and counters.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simhub.config import EndpointSettings
from simhub.errors import ConfigError
from simhub.models.openai import (
    ChatResult,
    EndpointConfig,
    EndpointFailure,
    OpenAIClient,
    chat_payload,
    is_reasoning_model,
    parse_chat_response,
)

__all__ = ["ChatResult", "EndpointFailure", "chat_payload", "client_for", "endpoint_config", "is_reasoning_model",
           "parse_chat_response", "send"]

_LOCK = threading.Lock()
_CLIENTS: dict[EndpointConfig, OpenAIClient] = {}


def endpoint_config(settings: EndpointSettings, model: str, *, default_key_env: str, default_cache: Path | None,
                    field: str = "endpoint") -> EndpointConfig:
    if not settings.base_url:
        raise ConfigError(f"{field}.base_url: required for an OpenAI-compatible endpoint", field=f"{field}.base_url")
    no_key = (settings.api_key_env or "").lower() == "none"
    names = [default_key_env, *([settings.api_key_env] if settings.api_key_env and not no_key else []), "OPENAI_API_KEY"]
    names = list(dict.fromkeys(names))
    cache = None
    if settings.cache:
        cache = Path(settings.cache_dir) if settings.cache_dir else default_cache
    try:
        return EndpointConfig(base_url=settings.base_url, model=model, api_key_env=None if no_key else names[0],
                              api_key_fallbacks=tuple(names[1:]), timeout_s=settings.timeout_s,
                              max_retries=settings.max_retries, concurrency=settings.concurrency, cache_dir=cache)
    except ConfigError as exc:
        raise ConfigError(f"{field}: {exc.message}", field=f"{field}.{exc.field}" if exc.field else field) from None


def client_for(settings: EndpointSettings, model: str, *, kind: str = "endpoint", default_key_env: str = "OPENAI_API_KEY",
               default_cache: Path | None = None) -> OpenAIClient:
    """The shared client of an endpoint (``kind`` names it in errors: ``judge``, ``simulator``...)."""
    config = endpoint_config(settings, model, default_key_env=default_key_env, default_cache=default_cache, field=kind)
    with _LOCK:
        if config not in _CLIENTS:
            _CLIENTS[config] = OpenAIClient(config)
        return _CLIENTS[config]


def send(client: OpenAIClient, payloads: Sequence[Mapping[str, Any]], *, batch: bool = False, progress: bool = False,
         desc: str = "requests") -> list[ChatResult | EndpointFailure]:
    """One outcome per payload: through the Batch API (half price, slow) or live requests."""
    if batch:
        return client.complete_batch(payloads, progress=progress, desc=desc)
    return client.complete(payloads, progress=progress, desc=desc)


def close_clients() -> None:
    with _LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for c in clients:
        c.close()
