"""The client itself: live requests (threads or an event loop) under one concurrency limit, simhub's
retries, and the key read per request and handed to the SDK as a header."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from simhub.errors import ConfigError, EndpointError
from simhub.models.openai._util import _openai, _payload_list, _progress_bar
from simhub.models.openai.batch import _BatchAPI
from simhub.models.openai.config import EndpointConfig, _display_url
from simhub.models.openai.failures import (
    RETRY_STATUSES,
    _connection_cause,
    _MissingKey,
    _Retry,
    _retry_after,
    _safe_detail,
)
from simhub.models.openai.payload import chat_payload
from simhub.models.openai.results import MALFORMED, EndpointFailure, Outcome, parse_chat_response

log = logging.getLogger("simhub.models.openai")

_T = TypeVar("_T")

CHAT_PATH = "/chat/completions"
# Sent when the endpoint needs no key (a local vLLM): the SDK insists on some key.
_NO_KEY = "EMPTY"


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



class OpenAIClient(_BatchAPI):
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

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process (an executor's worker, :mod:`simhub.executors`) is the settings
        alone, which name the key's variable and never hold the key: it opens its own connections,
        and counts from zero."""
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

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
