"""Checks on a request body's raw bytes, before anything decodes it.

msgspec decodes JSON recursively, so a body of 100,000 nested brackets exhausts the interpreter's
recursion limit (a RecursionError, which would be a 500); invalid UTF-8 and lone surrogate escapes
(``"\\ud800"``) come back as "Input data was truncated", which tells the client nothing. This
middleware reads the body once (refusing it early when it is larger than the limit), checks it in
linear time, answers 400 naming the problem, and hands the same bytes on to Litestar.

Duplicate keys in an object are not refused: the last one wins, as in every mainstream JSON parser.
"""

from __future__ import annotations

import re

import numpy as np

from simhub.config import Limits

#: +1 for the bytes that open an array or object, -1 for those that close one.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
_QUOTE = ord('"')
#: A ``\uD800``-``\uDFFF`` escape preceded by an even number of backslashes (so it is an escape).
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


class BodyProblem(Exception):
    """Why a body is refused: HTTP status, error type, message."""

    def __init__(self, status: int, type_: str, message: str):
        super().__init__(message)
        self.status, self.type, self.message = status, type_, message


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in ``body``, ignoring brackets inside strings.

    Linear and in C throughout (a 2 MB body costs milliseconds): dropping every ``\\\\`` pair, left
    to right, then every ``\\"``, removes exactly the escaped quotes; of the rest only quotes and
    brackets are kept, and a bracket counts when an even number of quotes precede it. Malformed
    JSON gives some number; the decoder then reports what is wrong with it.
    """
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in body else body
    kept = np.frombuffer(text.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
    if kept.size == 0:
        return 0
    steps = _STEP[kept]
    steps[np.logical_xor.accumulate(kept == _QUOTE)] = 0  # inside a string (an opening quote is a 0 step anyway)
    return int(np.cumsum(steps, dtype=np.int32).max())


def lone_surrogate(body: bytes) -> tuple[int, str] | None:
    """The offset and text of the first ``\\uXXXX`` escape that is half a surrogate pair without its
    other half (JSON allows it; the text it stands for cannot be encoded), or None."""
    if b"\\u" not in body:
        return None
    expect_low_at = -1
    for m in _SURROGATE.finditer(body):
        unit = int(m.group(1), 16)
        start = m.end() - 6
        if unit >= 0xDC00:  # a low half: fine only right after a high half
            if start != expect_low_at:
                return start, m.group(0)[-6:].decode()
            expect_low_at = -1
        else:
            if expect_low_at != -1:  # the previous high half had no low half
                return expect_low_at - 6, body[expect_low_at - 6 : expect_low_at].decode()
            expect_low_at = m.end()
    if expect_low_at != -1:
        return expect_low_at - 6, body[expect_low_at - 6 : expect_low_at].decode()
    return None


def check_body(body: bytes, limits: Limits) -> None:
    """Raise :class:`BodyProblem` for a body no decoder should see: too large, not UTF-8, nested too
    deeply, or carrying a lone surrogate."""
    if len(body) > limits.max_body_bytes:
        raise BodyProblem(413, "body_too_large", f"request body is larger than the limit of {limits.max_body_bytes} bytes")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyProblem(400, "invalid_encoding", f"request body is not valid UTF-8: byte 0x{body[exc.start]:02x} "
                                                   f"at offset {exc.start} ({exc.reason})") from None
    depth = json_depth(body)
    if depth > limits.max_json_depth:
        raise BodyProblem(400, "too_deep", f"request body nests arrays and objects {depth} levels deep, more than "
                                           f"the limit of {limits.max_json_depth}")
    found = lone_surrogate(body)
    if found is not None:
        offset, text = found
        raise BodyProblem(400, "invalid_json", f"request body has a lone surrogate escape {text} at offset {offset}: "
                                               "a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one")


#: How much of an oversized body is read (and thrown away) before the 413 is sent. A client such as
#: urllib or requests sends its whole body before it reads any answer; a server that answers and
#: closes while body bytes are still arriving makes the kernel reset the connection, and the client
#: sees "Connection reset by peer" instead of the 413. Up to this many bytes the body is drained first,
#: so the client reads the 413; past it the server answers and closes at once (never reading without end).
DRAIN_BYTES = 64 << 20


async def _drain(receive, already: int, declared: int | None, expects_continue: bool) -> None:
    """Read and discard the rest of a body being refused, up to :data:`DRAIN_BYTES` (nothing when the
    client waits for ``100 Continue``: it has sent no body, and reading would ask it for one)."""
    if expects_continue or (declared is not None and declared > DRAIN_BYTES):
        return
    read = already
    while read <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def body_guard_middleware(limits: Limits, respond):
    """ASGI middleware running :func:`check_body` on every body-carrying request.

    ``respond(status, type, message)`` builds the error response (the app's one error envelope).
    A declared ``Content-Length`` over the limit is refused before any of it is kept; a chunked body
    is refused as soon as it passes the limit, so nothing larger is ever held in memory. A refused
    body is read to its end (up to :data:`DRAIN_BYTES`, and thrown away) before the 413 is sent, so
    clients that send the whole body before reading the answer get the 413, not a reset connection;
    the answer then says ``Connection: close``.
    """

    def factory(app):
        async def middleware(scope, receive, send):
            if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
                await app(scope, receive, send)
                return
            headers = scope.get("headers", [])
            try:
                declared = next((int(v) for k, v in headers if k == b"content-length"), None)
            except ValueError:
                declared = None
            expects_continue = any(k == b"expect" and v.lower() == b"100-continue" for k, v in headers)
            size, more = 0, True
            try:
                if declared is not None and declared > limits.max_body_bytes:
                    raise BodyProblem(413, "body_too_large",
                                      f"request body is larger than the limit of {limits.max_body_bytes} bytes")
                chunks = []
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    more = message.get("more_body", False)
                    if size > limits.max_body_bytes:
                        raise BodyProblem(413, "body_too_large",
                                          f"request body is larger than the limit of {limits.max_body_bytes} bytes")
                    chunks.append(chunk)
                body = b"".join(chunks)
                check_body(body, limits)
            except BodyProblem as problem:
                response = respond(problem.status, problem.type, problem.message)
                if problem.status == 413 and more:
                    await _drain(receive, size, declared, expects_continue)
                    response.headers["Connection"] = "close"
                await response.to_asgi_response(app=None, request=None)(scope, receive, send)  # type: ignore[arg-type]
                return
            replayed = False

            async def replay():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await app(scope, replay, send)

        return middleware

    return factory
