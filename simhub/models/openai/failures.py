"""Turning what went wrong into short, secret-free causes: which statuses are retried, what a
failed connection was, which identifiers of an error body are safe to show (never its free text,
which can quote the key)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Statuses worth another try. A 401 is included because key rotation and gateways produce
#: transient ones; a persistent 401 is still reported once the retries are spent.
RETRY_STATUSES: frozenset[int] = frozenset({401, 408, 409, 429})
# Short identifiers from an error body (``code``, ``param``) are safe to show; free text is not.
_SAFE_TOKEN = re.compile(r"[a-z_][a-z0-9_.\[\]]{0,39}")


class _MissingKey(Exception):
    """The key variable vanished between the up-front check and a request."""


@dataclass(frozen=True, slots=True)
class _Retry:
    delay_s: float


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
