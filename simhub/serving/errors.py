"""The one place exceptions become HTTP responses: ``{"error": {"type", "message", "field"}}``.

Client errors are 4xx with a message naming the field; the message is size-capped and has
server paths masked. Anything unexpected is a 500 whose body says only "internal error" (the
traceback goes to the server log). ``str(exc)`` of foreign exceptions is never echoed.
"""

from __future__ import annotations

import logging
import re

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from simhub.errors import ConfigError, EndpointError, SimhubError
from simhub.schema import SchemaError
from simhub.serving.schemas import ErrorBody, ErrorResponse, NotReady, Overloaded, RequestError

log = logging.getLogger("simhub.serving")
MAX_MESSAGE = 500
#: A URL (left as it is, but for file: URLs) or a server path (masked). URLs name endpoints the
#: operator configured, and "https:/<path>" would hide which one failed.
_URL_OR_PATH = re.compile(r"(?P<url>\b[A-Za-z][\w+.-]*://[^\s'\"`<>]*)|(?<![\w.])(?P<path>/(?:[\w.@+-]+/)+[\w.@+-]*)")
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.]*(?:\[\d+\][\w.]*)*): ")
_MSGSPEC_PATH = re.compile(r"at `\$\.?([^`]*)`")
_STATUS_TYPES = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
                 413: "body_too_large", 422: "validation_error", 429: "rate_limited", 503: "overloaded", 504: "timeout"}


def _mask(match: re.Match) -> str:
    url = match.group("url")
    return url if url is not None and not url.lower().startswith("file:") else "<path>"


def clean(message: str) -> str:
    message = _URL_OR_PATH.sub(_mask, message)
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def field_of(message: str) -> str | None:
    m = _FIELD_PREFIX.match(message)
    return m.group(1) if m else None


def error_response(status: int, type_: str, message: str, field: str | None = None, headers: dict | None = None) -> Response:
    body = ErrorResponse(error=ErrorBody(type=type_, message=clean(message), field=field))
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=headers)


def _validation(request: Request, exc: ValidationException) -> Response:
    """Litestar's decoding errors (bad JSON, wrong types, constraints): 422 naming the JSON path."""
    errors = [e for e in (exc.extra if isinstance(exc.extra, list) else []) if isinstance(e, dict)]
    if not errors:
        detail = exc.detail if isinstance(exc.detail, str) else ""
        if "JSON" in detail or "malformed" in detail:
            return error_response(400, "invalid_json", "request body is not valid JSON")
        return error_response(422, "validation_error", "request body could not be decoded")
    first = errors[0]
    key = str(first.get("key") or "") or None
    if key == "data":  # the body as a whole (e.g. malformed JSON, or not an object)
        key = None
    message = "; ".join(f"{e['key']}: {e.get('message')}" if e.get("key") and e.get("key") != "data" else str(e.get("message"))
                        for e in errors)
    if key is None and "malformed" in message:
        return error_response(400, "invalid_json", message)
    if key is None and (m := _MSGSPEC_PATH.search(message)):
        key = m.group(1) or None
    return error_response(422, "validation_error", message, key)


def _http(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    message = exc.detail if status < 500 else "internal error"
    if status == 413:
        message = f"request body is larger than the limit of {request.app.request_max_body_size} bytes"
    headers = dict(exc.headers or {})
    if status == 429:
        request.app.state.metrics.rejected.labels("rate_limit").inc()
        reset = {k.lower(): v for k, v in headers.items()}.get("ratelimit-reset", "60")
        headers.setdefault("Retry-After", str(reset))
        message = "rate limit exceeded; retry after the Retry-After seconds"
    return error_response(status, _STATUS_TYPES.get(status, "http_error"), message, headers=headers or None)


def _simhub(request: Request, exc: SimhubError) -> Response:
    message = str(exc)
    if isinstance(exc, NotReady):
        request.app.state.metrics.rejected.labels("not_ready").inc()
        headers = None if exc.failed else {"Retry-After": str(request.app.state.settings.retry_after_s)}
        kind = "unavailable" if exc.unavailable else "load_failed" if exc.failed else "not_ready"
        return error_response(503, kind, message, exc.field, headers=headers)
    if isinstance(exc, Overloaded):
        retry = str(request.app.state.settings.retry_after_s)
        request.app.state.metrics.rejected.labels("overloaded").inc()
        return error_response(503, "overloaded", message, headers={"Retry-After": retry})
    if isinstance(exc, RequestError):
        if exc.type == "cap_exceeded":
            request.app.state.metrics.rejected.labels("cap").inc()
        return error_response(exc.status_code, exc.type, message, exc.field)
    if isinstance(exc, SchemaError):
        return error_response(422, "schema_error", message, field_of(message))
    if isinstance(exc, EndpointError):
        return error_response(502, "upstream_error", message, exc.field)
    if isinstance(exc, ConfigError):
        # Request problems are RequestErrors by now (resolve_metrics, check_model...); a ConfigError
        # reaching here is the server's profile or environment (a key not set), not the client's to fix.
        return error_response(500, "server_config_error", message, exc.field)
    return error_response(400, "invalid_request", message, field_of(message))


def _timeout(request: Request, exc: TimeoutError) -> Response:
    request.app.state.metrics.rejected.labels("timeout").inc()
    return error_response(504, "timeout", f"the request took longer than {request.app.state.settings.request_timeout_s} s")


def _internal(request: Request, exc: Exception) -> Response:
    log.error("unhandled error", exc_info=exc, extra={"route": request.url.path})
    return error_response(500, "internal_error", "internal error")


EXCEPTION_HANDLERS = {
    ValidationException: _validation,
    HTTPException: _http,
    SimhubError: _simhub,
    TimeoutError: _timeout,
    Exception: _internal,
}
