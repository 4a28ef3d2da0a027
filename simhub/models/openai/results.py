"""Parsed chat completions and failed requests: what every request of the client yields.

A request that fails after its retries is an :class:`EndpointFailure` value, never an exception in
the middle of a batch. :func:`parse_chat_response` is the one parser of the live API, the Batch API
and the cache; its errors name JSON paths and never quote a body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simhub.errors import EndpointError
from simhub.models.base import TokenLogprob

MALFORMED = "malformed response"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for: ``arguments`` is the JSON text as the model wrote it
    (it may not parse: the caller decides what a bad call gets back)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Choice:
    """One completion. ``text`` is None when the model produced no content (a refusal or a tool
    call); ``finish_reason`` ``length`` means the token limit cut it (for reasoning models,
    possibly before any visible text). ``tool_calls`` are the function calls it asked for (a request
    sent with ``tools``)."""

    text: str | None
    finish_reason: str | None
    logprobs: tuple[TokenLogprob, ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()


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
        choices.append(Choice(content, finish, _parse_logprobs(raw.get("logprobs"), f"{path}.logprobs"),
                              _parse_tool_calls(raw["message"].get("tool_calls"), f"{path}.message.tool_calls")))
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


def _parse_tool_calls(raw: Any, path: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _malformed(f"{path} is not a list", path)
    calls = []
    for i, call in enumerate(raw):
        where = f"{path}[{i}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if (not isinstance(function, Mapping) or not isinstance(call.get("id"), str)
                or not isinstance(function.get("name"), str)
                or not isinstance(function.get("arguments", ""), str | type(None))):
            raise _malformed(f"{where} needs an id and a function with a name and string arguments", where)
        calls.append(ToolCall(call["id"], function["name"], function.get("arguments") or ""))
    return tuple(calls)


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
