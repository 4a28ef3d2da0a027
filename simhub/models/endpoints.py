"""From a profile's endpoint settings to the shared OpenAI-compatible client.

Which key an endpoint gets (a security rule: a key must never reach a server it was not meant for):

- ``api_key_env: VAR`` in the profile: the value of ``VAR`` and nothing else, whatever else is set;
- ``api_key_env: none``: no key (a local server that takes none);
- no ``api_key_env``: the kind's own variables (``SIMHUB_JUDGE_API_KEY``, ``SIMHUB_BASELINE_API_KEY``
  or ``SIMHUB_ANNOTATOR_API_KEY``, then ``OPENAI_API_KEY``) apply only to the kind's default host,
  ``api.openai.com``; a loopback endpoint (``localhost``, ``127.0.0.1``, ``::1``) gets no key; any
  other host is a configuration error asking for ``api_key_env``, so an OpenAI key is never sent to a
  third party by default.

The value is read when a request is sent and never stored. One client per endpoint and model per
process, so every caller shares its concurrency limit and counters.
"""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from simhub.config import EndpointSettings
from simhub.errors import ConfigError
from simhub.models.endpoint_lm import EndpointLM
from simhub.models.openai import (
    ChatResult,
    EndpointConfig,
    EndpointFailure,
    OpenAIClient,
    chat_payload,
    is_reasoning_model,
    parse_chat_response,
)

__all__ = ["DEFAULT_KEY_HOSTS", "KIND_KEY_ENVS", "ChatResult", "EndpointFailure", "EndpointKind", "chat_payload",
           "client_for", "endpoint_config", "endpoint_lm", "is_loopback", "is_reasoning_model", "key_names", "missing_key",
           "parse_chat_response"]

EndpointKind = Literal["judge", "baseline", "simulator", "tutor", "annotator"]

#: The variables each kind reads when the profile names none, in order (only for a default host).
KIND_KEY_ENVS: dict[str, tuple[str, ...]] = {
    "judge": ("SIMHUB_JUDGE_API_KEY", "OPENAI_API_KEY"),
    "baseline": ("SIMHUB_BASELINE_API_KEY", "OPENAI_API_KEY"),
    "annotator": ("SIMHUB_ANNOTATOR_API_KEY", "OPENAI_API_KEY"),
    "simulator": ("OPENAI_API_KEY",),
    "tutor": ("OPENAI_API_KEY",),
}

#: The hosts of the kinds' default endpoints: the only ones their default variables are sent to.
DEFAULT_KEY_HOSTS = frozenset({"api.openai.com"})

_LOCK = threading.Lock()
#: One client per endpoint as the client sees it: sections that differ only in what the client never reads
#: (``batch_api``, how the key variable was named, the ``cache`` flag beside the folder) share it.
_CLIENTS: dict[tuple, OpenAIClient] = {}


def is_loopback(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine (``localhost`` or a loopback address)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def key_names(base_url: str, api_key_env: str | None, *, kind: str, field: str = "endpoint") -> tuple[str, ...]:
    """The environment variables whose value may be sent to ``base_url`` as its key, in order.

    Empty means no key is sent. See the module docstring for the rule; ``field`` names the profile
    section in the error raised for a third-party host with no ``api_key_env``.
    """
    if api_key_env is not None:
        if not isinstance(api_key_env, str) or not api_key_env.strip():
            raise ConfigError(f"{field}.api_key_env: must name an environment variable, or be `none`",
                              field=f"{field}.api_key_env")
        return () if api_key_env.strip().lower() == "none" else (api_key_env.strip(),)
    host = (urlsplit(base_url).hostname or "").lower()
    if host in DEFAULT_KEY_HOSTS:
        try:
            return KIND_KEY_ENVS[kind]
        except KeyError:
            raise ConfigError(f"{field}: unknown endpoint kind {kind!r}", field=field) from None
    if is_loopback(base_url):
        return ()
    raise ConfigError(
        f"{field}.api_key_env: {host or base_url} is not {' or '.join(sorted(DEFAULT_KEY_HOSTS))}, so no key is sent "
        f"to it by default; name the environment variable that holds its key (api_key_env: MY_KEY), or "
        f"api_key_env: none if it takes none", field=f"{field}.api_key_env")


def missing_key(base_url: str, api_key_env: str | None, *, kind: str, field: str = "endpoint") -> str | None:
    """Why an endpoint cannot be asked now: it needs a key (:func:`key_names`) and none of its
    variables is set; the reason names the variables, never a value. None when it can be asked."""
    import os

    names = key_names(base_url, api_key_env, kind=kind, field=field)
    if not names or any(os.environ.get(name) for name in names):
        return None
    host = urlsplit(base_url).hostname or base_url
    return f"no API key for {host}: set {' or '.join(names)}"


def endpoint_config(settings: EndpointSettings, model: str, *, kind: str, default_cache: Path | None,
                    field: str | None = None) -> EndpointConfig:
    """The client's view of a profile's endpoint section: the settings with the model, the key variables
    the rule above allows and the cache folder (``field`` names the section in errors; default ``kind``).
    The one place an :class:`EndpointConfig` is derived from :class:`EndpointSettings`."""
    field = field or kind
    if not settings.base_url:
        raise ConfigError(f"{field}.base_url: required for an OpenAI-compatible endpoint", field=f"{field}.base_url")
    names = key_names(settings.base_url, settings.api_key_env, kind=kind, field=field)
    cache = None
    if settings.cache:
        cache = Path(settings.cache_dir) if settings.cache_dir else default_cache
    try:
        return EndpointConfig(settings, model, key_names=names, cache_dir=cache)
    except ConfigError as exc:
        raise ConfigError(f"{field}: {exc.message}", field=f"{field}.{exc.field}" if exc.field else field) from None


def client_for(settings: EndpointSettings, model: str, *, kind: EndpointKind, default_cache: Path | None = None,
               field: str | None = None) -> OpenAIClient:
    """The shared client of an endpoint; ``kind`` chooses the default key variables (see the module
    docstring) and names the section in errors unless ``field`` does."""
    config = endpoint_config(settings, model, kind=kind, default_cache=default_cache, field=field)
    key = (config.base_url, config.model, config.key_names, config.cache_dir, config.timeout_s, config.max_retries,
           config.concurrency, config.backoff_s, config.max_backoff_s)
    with _LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = OpenAIClient(config)
        return _CLIENTS[key]


def endpoint_lm(settings: EndpointSettings, model: str, *, kind: EndpointKind, default_cache: Path | None = None,
                field: str | None = None, reasoning_effort: str | None = None, max_tokens: int | None = None,
                batch: bool | None = None, poll_interval_s: float = 30.0, max_wait_s: float | None = None,
                top_k: bool = False, name: str | None = None) -> EndpointLM:
    """The endpoint as a :class:`~simhub.models.endpoint_lm.EndpointLM` over its shared client
    (:func:`client_for`); ``batch`` defaults to the settings' ``batch_api``, and a batch is polled
    every ``poll_interval_s`` and waited for ``max_wait_s`` at most (None: until it ends)."""
    client = client_for(settings, model, kind=kind, default_cache=default_cache, field=field)
    return EndpointLM(client, reasoning_effort=reasoning_effort, max_tokens=max_tokens,
                      batch=settings.batch_api if batch is None else batch, poll_interval_s=poll_interval_s,
                      max_wait_s=max_wait_s, top_k=top_k, name=name)

