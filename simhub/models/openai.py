"""The one client simhub uses for every OpenAI-compatible endpoint: the LLM judge, the prompted
baselines and annotation all go through :class:`OpenAIClient`.

Why it looks the way it does:

* **Pure payload building and parsing.** :func:`chat_payload` turns the paper's settings into
  the exact JSON body and :func:`parse_chat_response` turns a response body into a
  :class:`ChatResult`. Neither touches the network, so tests pin the judge's and baselines'
  request bodies exactly, and the Batch API, the live API and the cache share one parser.
* **Failures are values.** Scoring thousands of turns must not stop at the first 503, so a
  request that still fails after its retries comes back as an :class:`EndpointFailure` whose
  ``cause`` (``HTTP 503``, ``APITimeoutError``...) is short and free of secrets; callers null
  the affected score and record why.
* **Our retries, not the SDK's.** The official ``openai`` SDK does the HTTP and authentication,
  with its own retries off (``max_retries=0``): simhub retries connection errors, timeouts,
  408/409/429/5xx and 401 with exponential backoff and jitter, counts every call, and holds a
  concurrency limit shared by all batches running on one client.
* **Content-addressed cache.** With ``cache_dir`` set, each successful response body is stored
  under the SHA-256 of the base URL and the exact request body (never the key), written
  atomically, so rerunning an identical job makes no calls at all. :func:`response_cache_off`
  switches it off for every client of the process (``--no-cache``: no read, no write).
* **Batch API for big jobs.** :meth:`OpenAIClient.complete_batch` sends the requests the cache
  cannot answer as one batch (half price), and remembers the batch id in the cache folder, so a
  killed run resumes polling the same batch instead of paying twice.
* **The key stays out of sight.** It is read from the environment when a request is sent and
  handed to the SDK as a per-request header; it never reaches a log line of ours, a cache file,
  an error, a failure or a repr. Error bodies (OpenAI's 401 quotes the key it was given) are
  never copied into messages.

Importing this module does not import ``openai``; the SDK is loaded on the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from simhub.errors import ConfigError, EndpointError, NotSupportedError, UnknownNameError, require
from simhub.models.base import TokenLogprob
from simhub.schema import atomic_write_bytes

__all__ = [
    "ChatResult",
    "Choice",
    "ClientStats",
    "EndpointConfig",
    "EndpointFailure",
    "OpenAIClient",
    "Usage",
    "chat_payload",
    "is_reasoning_model",
    "parse_chat_response",
    "request_key",
    "response_cache_off",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Model-name prefixes of OpenAI reasoning models (matched on the name after any ``provider/``).
REASONING_PREFIXES: tuple[str, ...] = ("gpt-5", "o1", "o3", "o4")
#: Values the API accepts for ``reasoning_effort``.
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")
#: Statuses worth another try. A 401 is included because key rotation and gateways produce
#: transient ones; a persistent 401 is still reported once the retries are spent.
RETRY_STATUSES: frozenset[int] = frozenset({401, 408, 409, 429})
#: Batch statuses after which nothing changes any more.
BATCH_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})

CHAT_PATH = "/chat/completions"
BATCH_ENDPOINT = "/v1/chat/completions"
MALFORMED = "malformed response"
_REASONING_NAMES = ", ".join(f"{prefix}*" for prefix in REASONING_PREFIXES)
# Sent when the endpoint needs no key (a local vLLM): the SDK insists on some key.
_NO_KEY = "EMPTY"
# Short identifiers from an error body (``code``, ``param``) are safe to show; free text is not.
_SAFE_TOKEN = re.compile(r"[a-z_][a-z0-9_.\[\]]{0,39}")


# --------------------------------------------------------------------------- payloads


def is_reasoning_model(name: str) -> bool:
    """Whether ``name`` is an OpenAI reasoning model (``gpt-5*``, ``o1*``, ``o3*``, ``o4*``).

    These take ``max_completion_tokens`` and ``reasoning_effort`` and reject a non-default
    temperature or top-p, so :func:`chat_payload` shapes their requests differently.
    """
    base = name.rsplit("/", 1)[-1].strip().lower()
    return base.startswith(REASONING_PREFIXES)


def chat_payload(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
    n: int = 1,
    seed: int | None = None,
    response_format: Mapping[str, Any] | None = None,
    logprobs: bool | None = None,
    top_logprobs: int | None = None,
    stop: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """The JSON body of a chat-completions request, exactly as it will be sent and cached.

    Only what was asked for is included (``n`` only when above 1), so the body, and therefore
    the cache key, does not change when a default does. ``max_tokens`` is sent as
    ``max_completion_tokens``, the field current models read (reasoning models reject
    ``max_tokens``). For a reasoning model ``temperature`` and ``top_p`` are dropped: such
    models only run at the default (temperature 1) and reject other values, so the paper's
    "temperature 1" is expressed by leaving the field out. ``reasoning_effort`` on another model
    and log-probabilities from a reasoning model raise :class:`NotSupportedError`.

    >>> chat_payload("gpt-4.1", [{"role": "user", "content": "2+2?"}], temperature=0, max_tokens=4000)
    {'model': 'gpt-4.1', 'messages': [{'role': 'user', 'content': '2+2?'}], 'temperature': 0.0, \
'max_completion_tokens': 4000}
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigError("model: a model name is required", field="model")
    body: dict[str, Any] = {"model": model, "messages": _checked_messages(messages)}
    reasoning = is_reasoning_model(model)
    if logprobs is False and top_logprobs is not None:
        raise ConfigError("top_logprobs: needs logprobs; leave logprobs unset or true", field="top_logprobs")
    if reasoning and (logprobs or top_logprobs is not None):
        raise NotSupportedError(
            f"{model} is a reasoning model and returns no log-probabilities", field="logprobs"
        )
    if not reasoning and reasoning_effort is not None:
        raise NotSupportedError(
            f"reasoning_effort: {model} is not a reasoning model ({_REASONING_NAMES})",
            field="reasoning_effort",
        )
    if not reasoning:
        if temperature is not None:
            # As floats, so 0 and 0.0 give one body and one cache key.
            body["temperature"] = float(_checked_number("temperature", temperature, 0.0, 2.0))
        if top_p is not None:
            body["top_p"] = float(_checked_number("top_p", top_p, 0.0, 1.0))
    if max_tokens is not None:
        body["max_completion_tokens"] = _checked_int("max_tokens", max_tokens, 1)
    if reasoning_effort is not None:
        if reasoning_effort not in REASONING_EFFORTS:
            raise UnknownNameError(
                "reasoning effort", reasoning_effort, REASONING_EFFORTS, field="reasoning_effort"
            )
        body["reasoning_effort"] = reasoning_effort
    if _checked_int("n", n, 1) > 1:
        body["n"] = n
    if seed is not None:
        body["seed"] = _checked_int("seed", seed, None)
    if response_format is not None:
        body["response_format"] = dict(response_format)
    if logprobs or top_logprobs is not None:
        body["logprobs"] = True
    if top_logprobs is not None:
        body["top_logprobs"] = _checked_int("top_logprobs", top_logprobs, 0, 20)
    if stop is not None:
        body["stop"] = stop if isinstance(stop, str) else list(stop)
    return body


def _checked_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise ConfigError(
            "messages: a non-empty list of {role, content} messages is required", field="messages"
        )
    out = []
    for i, message in enumerate(messages):
        if (
            not isinstance(message, Mapping)
            or not isinstance(message.get("role"), str)
            or "content" not in message
        ):
            raise ConfigError(
                f"messages[{i}]: each message needs a role and a content", field=f"messages[{i}]"
            )
        out.append(dict(message))
    return out


def _checked_number(name: str, value: float, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(f"{name}: must be a number in [{low:g}, {high:g}], got {value!r}", field=name)
    return value


def _checked_int(name: str, value: int, low: int | None, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name}: must be an integer {bounds}, got {value!r}", field=name)
    return value


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Choice:
    """One completion. ``text`` is None when the model produced no content (a refusal or a tool
    call); ``finish_reason`` ``length`` means the token limit cut it (for reasoning models,
    possibly before any visible text)."""

    text: str | None
    finish_reason: str | None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the endpoint reported them (``reasoning_tokens`` is part of
    ``completion_tokens`` and only reported by reasoning models)."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A parsed chat completion. ``cached`` says it came from the on-disk cache; it is left out of
    comparisons so a cached answer equals the fresh one it was stored from."""

    choices: tuple[Choice, ...]
    usage: Usage | None = None
    model: str | None = None
    cached: bool = field(default=False, compare=False)

    ok = True

    @property
    def text(self) -> str | None:
        """The first choice's text (most requests ask for one)."""
        return self.choices[0].text


@dataclass(frozen=True, slots=True)
class EndpointFailure:
    """A request that failed after its retries. ``cause`` is one secret-free line naming the error
    and the endpoint (``connection refused at http://127.0.0.1:9/v1``, ``HTTP 503 at
    https://api.openai.com/v1``), so a null score stored beside it says what to fix; ``message``
    adds what was asked and after how many attempts. A whole batch still running or ended has the
    batch's state as its cause (``batch in_progress``)."""

    cause: str
    status: int | None
    attempts: int
    message: str

    ok = False

    def to_error(self) -> EndpointError:
        """The failure as an exception, for callers that must stop on it."""
        return EndpointError(self.message, cause=self.cause, status=self.status)


#: What each request yields.
Outcome = ChatResult | EndpointFailure


def parse_chat_response(body: Any) -> ChatResult:
    """Parse a chat-completions response body; :class:`EndpointError` (cause ``malformed
    response``, ``field`` the JSON path) when it does not have the documented shape.

    Error messages name the path only and never quote the body, which may carry secrets.
    """
    if not isinstance(body, Mapping):
        raise _malformed("response is not a JSON object", "$")
    choices_raw = body.get("choices")
    if not isinstance(choices_raw, list) or not choices_raw:
        where = "an error object" if "error" in body else "no choices"
        raise _malformed(f"response has {where} instead of a non-empty choices list", "choices")
    choices = []
    ordered = sorted(enumerate(choices_raw), key=lambda pair: _index_of(pair[1], pair[0]))
    for position, raw in ordered:
        path = f"choices[{position}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("message"), Mapping):
            raise _malformed(f"{path} has no message object", f"{path}.message")
        content = raw["message"].get("content")
        if content is not None and not isinstance(content, str):
            raise _malformed(
                f"{path}.message.content is neither a string nor null", f"{path}.message.content"
            )
        finish = raw.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise _malformed(f"{path}.finish_reason is not a string", f"{path}.finish_reason")
        choices.append(Choice(content, finish, _parse_logprobs(raw.get("logprobs"), f"{path}.logprobs")))
    model = body.get("model")
    return ChatResult(
        tuple(choices), _parse_usage(body.get("usage")), model if isinstance(model, str) else None
    )


def _index_of(raw: Any, default: int) -> int:
    index = raw.get("index") if isinstance(raw, Mapping) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else default


def _parse_logprobs(raw: Any, path: str) -> tuple[TokenLogprob, ...] | None:
    if raw is None:
        return None
    content = raw.get("content") if isinstance(raw, Mapping) else None
    if content is None:
        if isinstance(raw, Mapping):
            return None
        raise _malformed(f"{path} is not an object", path)
    if not isinstance(content, list):
        raise _malformed(f"{path}.content is not a list", f"{path}.content")
    tokens = []
    for i, item in enumerate(content):
        where = f"{path}.content[{i}]"
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("token"), str)
            or not _is_number(item.get("logprob"))
        ):
            raise _malformed(f"{where} needs a token and a numeric logprob", where)
        top = []
        for j, alt in enumerate(item.get("top_logprobs") or ()):
            if (
                not isinstance(alt, Mapping)
                or not isinstance(alt.get("token"), str)
                or not _is_number(alt.get("logprob"))
            ):
                raise _malformed(
                    f"{where}.top_logprobs[{j}] needs a token and a numeric logprob",
                    f"{where}.top_logprobs[{j}]",
                )
            top.append((alt["token"], float(alt["logprob"])))
        tokens.append(TokenLogprob(item["token"], float(item["logprob"]), top))
    return tuple(tokens)


def _parse_usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = raw.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return Usage(prompt, completion, reasoning if isinstance(reasoning, int) else None)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _malformed(message: str, path: str) -> EndpointError:
    return EndpointError(f"malformed chat-completions response: {message}", cause=MALFORMED, field=path)


# --------------------------------------------------------------------------- configuration


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


# --------------------------------------------------------------------------- client

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


@dataclass
class ClientStats:
    """What a client has done since it was made (or since :meth:`OpenAIClient.reset_stats`).

    ``calls`` counts every HTTP request sent (retries, uploads, polls and downloads included),
    so "a rerun makes zero calls" is ``stats.calls == 0``.
    """

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    batched: int = 0


class _MissingKey(Exception):
    """The key variable vanished between the up-front check and a request."""


@dataclass(frozen=True, slots=True)
class _Retry:
    delay_s: float


class OpenAIClient:
    """A client for one OpenAI-compatible endpoint, shared by judge, simulators and annotation.

    ``complete`` (threads; fine from plain scripts and from inside a running event loop),
    ``acomplete`` (for async services) and ``complete_batch`` (Batch API) all return one
    :class:`ChatResult` or :class:`EndpointFailure` per payload, in order. Use it as a context
    manager, or call :meth:`close`, to release connections.
    """

    def __init__(self, config: EndpointConfig):
        self.config = config
        self._display_url = _display_url(config.base_url)
        self._lock = threading.Lock()
        self._stats = ClientStats()
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._sync_sdk: Any = None
        self._async_sdk: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return (
            f"OpenAIClient(base_url={self._display_url!r}, model={self.config.model!r}, "
            f"api_key_env={self.config.api_key_env!r})"
        )

    # ------------------------------------------------------------------ public helpers

    def payload(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> dict[str, Any]:
        """:func:`chat_payload` for this endpoint's model."""
        return chat_payload(self.config.model, messages, **options)

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters."""
        with self._lock:
            return dataclasses.replace(self._stats)

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = ClientStats()

    def close(self) -> None:
        """Close the synchronous connection pool (async pools close with :meth:`aclose`)."""
        with self._lock:
            sdk, self._sync_sdk = self._sync_sdk, None
        if sdk is not None:
            sdk.close()

    async def aclose(self) -> None:
        """Close this event loop's connection pool, then the synchronous one."""
        with self._lock:
            state = self._async_sdk.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[0].close()
        self.close()

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ live requests

    def complete(
        self, payloads: Sequence[Mapping[str, Any]], *, progress: bool = False, desc: str = "requests"
    ) -> list[Outcome]:
        """Send chat requests concurrently (at most ``concurrency`` at a time), answering from the
        cache where possible; one outcome per payload, in order. Never raises for a failed request.
        """
        payloads = _payload_list(payloads)
        keys, results, pending = self._from_cache(payloads)
        if pending:
            self._check_key()
        bar = _progress_bar(progress, desc, len(keys), len(keys) - len(pending))
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(self.config.concurrency, len(pending)))) as pool:
                futures = {pool.submit(self._request_sync, payloads[i], keys[i]): i for i in pending}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
        finally:
            bar.close()
        return self._finish(results, pending)

    async def acomplete(
        self, payloads: Sequence[Mapping[str, Any]], *, progress: bool = False, desc: str = "requests"
    ) -> list[Outcome]:
        """:meth:`complete` for code already running an event loop (a Litestar handler): awaits
        the requests on that loop instead of starting one."""
        payloads = _payload_list(payloads)
        keys, results, pending = self._from_cache(payloads)
        if pending:
            self._check_key()
        sdk, slots = self._async_state()
        bar = _progress_bar(progress, desc, len(keys), len(keys) - len(pending))

        async def one(index: int) -> None:
            results[index] = await self._request_async(sdk, slots, payloads[index], keys[index])
            bar.update(1)

        try:
            await asyncio.gather(*(one(i) for i in pending))
        finally:
            bar.close()
        return self._finish(results, pending)

    def _request_sync(self, payload: Mapping[str, Any], key: str) -> Outcome:
        sdk = self._sdk()
        attempt = 0
        while True:
            attempt += 1
            with self._slots:
                self._count(calls=1)
                try:
                    body = sdk.post(
                        CHAT_PATH, body=payload, cast_to=object, options={"headers": self._headers()}
                    )
                except Exception as exc:
                    decision = self._after_error(exc, attempt, "chat completion")
                else:
                    decision = None
            if decision is None:
                return self._accept(body, key, attempt)
            if isinstance(decision, EndpointFailure):
                return decision
            time.sleep(decision.delay_s)

    async def _request_async(
        self, sdk: Any, slots: asyncio.Semaphore, payload: Mapping[str, Any], key: str
    ) -> Outcome:
        attempt = 0
        while True:
            attempt += 1
            async with slots:
                self._count(calls=1)
                try:
                    body = await sdk.post(
                        CHAT_PATH, body=payload, cast_to=object, options={"headers": self._headers()}
                    )
                except Exception as exc:
                    decision = self._after_error(exc, attempt, "chat completion")
                else:
                    decision = None
            if decision is None:
                # Off the loop: the cache write syncs to disk.
                return await asyncio.to_thread(self._accept, body, key, attempt)
            if isinstance(decision, EndpointFailure):
                return decision
            await asyncio.sleep(decision.delay_s)

    def _call_sync(self, call: Callable[[], _T], what: str) -> _T | EndpointFailure:
        """Run one SDK call with simhub's retry policy under the shared concurrency limit."""
        attempt = 0
        while True:
            attempt += 1
            with self._slots:
                self._count(calls=1)
                try:
                    return call()
                except Exception as exc:
                    decision = self._after_error(exc, attempt, what)
            if isinstance(decision, EndpointFailure):
                return decision
            time.sleep(decision.delay_s)

    def _after_error(self, exc: Exception, attempt: int, what: str) -> _Retry | EndpointFailure:
        """Retry (after how long) or give up, from the exception alone; nothing of the exception's
        text is kept, because SDK messages quote response bodies."""
        openai = _openai()
        status: int | None = None
        detail = ""
        retry_after: float | None = None
        if isinstance(exc, openai.APITimeoutError):
            cause, retryable = f"no answer within {self.config.timeout_s:g} s", True
        elif isinstance(exc, openai.APIConnectionError):
            cause, retryable = _connection_cause(exc), True
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            cause, retryable = f"HTTP {status}", status in RETRY_STATUSES or status >= 500
            retry_after = _retry_after(getattr(exc.response, "headers", {}))
            if status != 401:
                detail = _safe_detail(exc.body)
        elif isinstance(exc, _MissingKey):
            cause, retryable = "missing API key", False
        elif isinstance(exc, ValueError):  # the SDK decoding a JSON body that is not JSON
            cause, retryable = MALFORMED, False
        else:
            cause, retryable = type(exc).__name__, False
            log.warning("unexpected %s from %s at %s", cause, what, self._display_url)
        cause = f"{cause} at {self._display_url}"
        if retryable and attempt <= self.config.max_retries:
            delay = min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1))
            delay *= random.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.config.max_backoff_s))
            self._count(retries=1)
            log.debug("%s at %s: %s, retry %d in %.2fs", what, self._display_url, cause, attempt, delay)
            return _Retry(delay)
        message = f"{what} failed after {attempt} attempt(s): {cause}{detail}"
        log.info("%s", message)
        return EndpointFailure(cause, status, attempt, message)

    def _accept(self, body: Any, key: str, attempts: int) -> Outcome:
        """Parse a 200 body; cache it only when it parses, so a bad answer is asked again next time."""
        try:
            result = parse_chat_response(body)
        except EndpointError as exc:
            message = f"chat completion at {self._display_url}: {exc.message} (at {exc.field})"
            log.info("%s", message)
            return EndpointFailure(f"{exc.cause} at {self._display_url}", None, attempts, message)
        self._cache_put(key, body)
        return result

    # ------------------------------------------------------------------ Batch API

    def complete_batch(
        self,
        payloads: Sequence[Mapping[str, Any]],
        *,
        poll_interval_s: float = 30.0,
        max_wait_s: float | None = None,
        progress: bool = False,
        desc: str = "batch",
    ) -> list[Outcome]:
        """Answer ``payloads`` through the Batch API (half the price; done within 24 hours).

        Cached answers are not re-sent and identical payloads are sent once (their custom id is
        the cache key). The batch id is remembered in ``cache_dir`` until the batch is over, so
        a rerun after a crash or kill polls the same batch instead of submitting (and paying
        for) it again. Polls every ``poll_interval_s`` seconds; with ``max_wait_s`` set, stops
        waiting after that long and reports the unanswered requests as failures with cause
        ``batch in_progress`` (rerun later to collect them). Never raises for a failed request;
        a request the batch could not answer is not retried inside it (failures are not cached,
        so a rerun sends it again).
        """
        payloads = _payload_list(payloads)
        keys, results, pending = self._from_cache(payloads)
        unique = {keys[i]: payloads[i] for i in pending}
        if unique:
            self._check_key()
            if self._cache_folder() is None:
                log.warning("batch without a cache: a killed run cannot resume its batch")
            answers = self._run_batch(unique, poll_interval_s, max_wait_s, progress, desc)
            for i in pending:
                results[i] = answers[keys[i]]
            with self._lock:
                self._stats.batched += len(unique)
        return self._finish(results, pending)

    def _run_batch(
        self,
        unique: dict[str, Mapping[str, Any]],
        poll_interval_s: float,
        max_wait_s: float | None,
        progress: bool,
        desc: str,
    ) -> dict[str, Outcome]:
        sdk = self._sdk()
        remembered = self._recall_batch(set(unique))
        batch_id = remembered.get("batch_id") if remembered else None

        def everyone(failure: EndpointFailure) -> dict[str, Outcome]:
            return dict.fromkeys(unique, failure)

        if batch_id is not None:
            log.info("resuming batch %s for %d request(s)", batch_id, len(unique))
        else:
            batch_id = self._submit_batch(sdk, unique)
            if isinstance(batch_id, EndpointFailure):
                return everyone(batch_id)

        started = time.monotonic()
        bar = _progress_bar(progress, desc, len(unique), 0)
        try:
            while True:
                batch = self._call_sync(
                    lambda: sdk.batches.retrieve(batch_id, extra_headers=self._headers()), "batch poll"
                )
                if isinstance(batch, EndpointFailure):
                    if remembered is not None and batch.status == 404:
                        # The endpoint does not know the remembered batch (another account, or
                        # purged): forget it and start over.
                        self._forget_batch(remembered["path"])
                        return self._run_batch(unique, poll_interval_s, max_wait_s, progress, desc)
                    return everyone(batch)
                counts = getattr(batch, "request_counts", None)
                if counts is not None:
                    bar.update(max(0, (counts.completed or 0) + (counts.failed or 0) - bar.n))
                if batch.status in BATCH_TERMINAL:
                    break
                if max_wait_s is not None and time.monotonic() - started >= max_wait_s:
                    note = f"still {batch.status} after {max_wait_s:g}s; rerun to collect it"
                    message = f"batch {batch_id} at {self._display_url} {note}"
                    return everyone(EndpointFailure(f"batch {batch.status}", None, 1, message))
                time.sleep(poll_interval_s)
        finally:
            bar.close()

        answers: dict[str, Outcome] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = self._call_sync(
                lambda fid=file_id: sdk.files.content(fid, extra_headers=self._headers()).content,
                "batch download",
            )
            if isinstance(content, EndpointFailure):
                return everyone(content)  # the batch stays remembered; a rerun downloads again
            answers.update(self._read_batch_lines(content, unique))
        for key in unique:
            if key not in answers:
                answers[key] = EndpointFailure(
                    f"batch {batch.status}",
                    None,
                    1,
                    f"batch {batch_id} at {self._display_url} ended {batch.status} without this request",
                )
        self._forget_batch(self._batch_state_path(unique))
        if remembered is not None:
            self._forget_batch(remembered["path"])
        return answers

    def _submit_batch(self, sdk: Any, unique: Mapping[str, Mapping[str, Any]]) -> str | EndpointFailure:
        lines = [
            json.dumps(
                {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT, "body": body}, ensure_ascii=False
            )
            for key, body in unique.items()
        ]
        data = ("\n".join(lines) + "\n").encode()
        uploaded = self._call_sync(
            lambda: sdk.files.create(
                file=("simhub-batch.jsonl", data, "application/jsonl"),
                purpose="batch",
                extra_headers=self._headers(),
            ),
            "batch upload",
        )
        if isinstance(uploaded, EndpointFailure):
            return uploaded
        set_key = _set_key(unique)
        batch = self._call_sync(
            lambda: sdk.batches.create(
                input_file_id=uploaded.id,
                endpoint=BATCH_ENDPOINT,
                completion_window="24h",
                metadata={"source": "simhub", "request_set": set_key[:32]},
                extra_headers=self._headers(),
            ),
            "batch create",
        )
        if isinstance(batch, EndpointFailure):
            return batch
        log.info("submitted batch %s with %d request(s) to %s", batch.id, len(unique), self._display_url)
        path = self._batch_state_path(unique)
        if path is not None:
            state = {
                "batch_id": batch.id,
                "input_file_id": uploaded.id,
                "base_url": self._display_url,
                "submitted_at": time.time(),
                "keys": sorted(unique),
            }
            atomic_write_bytes(path, json.dumps(state).encode())
        return batch.id

    def _read_batch_lines(self, content: bytes, unique: Mapping[str, Any]) -> dict[str, Outcome]:
        """Map output/error lines back to their requests by ``custom_id``; successes are cached."""
        answers: dict[str, Outcome] = {}
        for number, raw in enumerate(content.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                key = line["custom_id"]
            except (ValueError, TypeError, KeyError):
                log.warning("batch output line %d is not a JSON record with a custom_id; skipped", number)
                continue
            if key not in unique:
                continue
            response = line.get("response") if isinstance(line.get("response"), Mapping) else {}
            status = response.get("status_code")
            if status == 200 and not line.get("error"):
                answers[key] = self._accept(response.get("body"), key, 1)
                continue
            error = line.get("error") if isinstance(line.get("error"), Mapping) else {}
            if isinstance(status, int):
                cause = f"HTTP {status} at {self._display_url}"
                detail = _safe_detail(response.get("body")) if status != 401 else ""
            else:
                code = error.get("code")
                cause = code if isinstance(code, str) and _SAFE_TOKEN.fullmatch(code) else "batch error"
                cause = f"{cause} at {self._display_url}"
                detail = ""
            answers[key] = EndpointFailure(
                cause,
                status if isinstance(status, int) else None,
                1,
                f"batch request failed: {cause}{detail}",
            )
        return answers

    def _batch_state_path(self, unique: Mapping[str, Any]) -> Path | None:
        folder = self._cache_folder()
        return None if folder is None else folder / "batches" / f"{_set_key(unique)}.json"

    def _recall_batch(self, keys: set[str]) -> dict[str, Any] | None:
        """A remembered, unfinished batch covering every one of ``keys`` (exactly this request set
        first; else any superset, left behind by a run killed while storing its answers)."""
        root = self._cache_folder()
        if root is None:
            return None
        folder = root / "batches"
        exact = folder / f"{_set_key(keys)}.json"
        candidates = [exact] if exact.is_file() else []
        if folder.is_dir():
            candidates += sorted(p for p in folder.glob("*.json") if p != exact)
        for path in candidates:
            try:
                state = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            if (
                isinstance(state, dict)
                and state.get("base_url") == self._display_url
                and isinstance(state.get("batch_id"), str)
                and keys <= set(state.get("keys") or ())
            ):
                return {**state, "path": path}
        return None

    @staticmethod
    def _forget_batch(path: Path | None) -> None:
        if path is not None:
            path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ plumbing

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

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self._stats, name, getattr(self._stats, name) + delta)

    def _api_key(self) -> str | None:
        for name in self.config.key_names:
            value = os.environ.get(name)
            if value:
                return value
        return None

    def _check_key(self) -> None:
        """Fail before any request when a needed key is not set (the message names variables only)."""
        if self.config.key_names and self._api_key() is None:
            raise ConfigError(
                f"no API key for {self._display_url}: set {' or '.join(self.config.key_names)}",
                field=self.config.api_key_env,
            )

    def _headers(self) -> dict[str, Any]:
        """The Authorization header with the key read now, passed per request so that the SDK
        client itself never holds the key (and a rotated key is picked up). A keyless endpoint gets
        no Authorization header at all, not the SDK's placeholder key."""
        if not self.config.key_names:
            return {"Authorization": _openai().Omit()}
        key = self._api_key()
        if key is None:
            raise _MissingKey()
        return {"Authorization": f"Bearer {key}"}

    def _sdk(self) -> Any:
        with self._lock:
            if self._sync_sdk is None:
                self._sync_sdk = _openai().OpenAI(
                    api_key=_NO_KEY,
                    base_url=self.config.base_url,
                    timeout=self.config.timeout_s,
                    max_retries=0,
                )
            return self._sync_sdk

    def _async_state(self) -> tuple[Any, asyncio.Semaphore]:
        """This event loop's SDK client and concurrency limit (both are bound to one loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._async_sdk.get(loop)
            if state is None:
                sdk = _openai().AsyncOpenAI(
                    api_key=_NO_KEY,
                    base_url=self.config.base_url,
                    timeout=self.config.timeout_s,
                    max_retries=0,
                )
                state = self._async_sdk[loop] = (sdk, asyncio.Semaphore(self.config.concurrency))
            return state


def _payload_list(payloads: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The payloads as a list (any iterable will do); a lone body is a mistake worth naming."""
    if isinstance(payloads, Mapping | str | bytes):
        raise ConfigError("payloads: expected a list of request bodies", field="payloads")
    return list(payloads)


def _openai() -> Any:
    return require("openai", "metrics")


def _set_key(keys: Any) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after-ms")
        if value is not None:
            return float(value) / 1000
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _connection_cause(exc: BaseException) -> str:
    """What the operating system said about a failed connection (``connection refused``, ``host not
    found``), from the exceptions the SDK wraps; its own text ("Connection error.") says nothing."""
    import socket
    import ssl

    seen: BaseException | None = exc
    for _ in range(8):  # the SDK's, httpx's and httpcore's wrappers, then the socket's error
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host not found"
        if isinstance(seen, ssl.SSLError):
            return "TLS handshake failed"
        if isinstance(seen, OSError) and seen.strerror:
            return f"connection failed ({seen.strerror.lower()})"
        seen = seen.__cause__ or seen.__context__
    return "connection failed"


def _safe_detail(body: Any) -> str:
    """`` (code: param)`` from an OpenAI error body when both look like identifiers; the free-text
    message is never used (it can quote the key)."""
    error = (
        body.get("error") if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping) else body
    )
    if not isinstance(error, Mapping):
        return ""
    parts = [
        v for v in (error.get("code"), error.get("param")) if isinstance(v, str) and _SAFE_TOKEN.fullmatch(v)
    ]
    return f" ({': '.join(parts)})" if parts else ""


class _NullBar:
    n = 0

    def update(self, k: int = 1) -> None:
        self.n += k

    def close(self) -> None:
        pass


def _progress_bar(enabled: bool, desc: str, total: int, done: int) -> Any:
    if not enabled:
        return _NullBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=desc, unit="req")
