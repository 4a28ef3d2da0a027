"""Chat-completions request bodies: the paper's settings as the exact JSON that is sent and cached.

Pure: nothing here touches the network, so tests pin the judge's and baselines' bodies exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simhub.errors import ConfigError, NotSupportedError, UnknownNameError

#: Model-name prefixes of OpenAI reasoning models (matched on the name after any ``provider/``).
REASONING_PREFIXES: tuple[str, ...] = ("gpt-5", "o1", "o3", "o4")
#: Values the API accepts for ``reasoning_effort``.
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")
_REASONING_NAMES = ", ".join(f"{prefix}*" for prefix in REASONING_PREFIXES)


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
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a chat-completions request, exactly as it will be sent and cached.

    Only what was asked for is included (``n`` only when above 1), so the body, and therefore
    the cache key, does not change when a default does. ``max_tokens`` is sent as
    ``max_completion_tokens``, the field current models read (reasoning models reject
    ``max_tokens``). For a reasoning model ``temperature`` and ``top_p`` are dropped: such
    models only run at the default (temperature 1) and reject other values, so the paper's
    "temperature 1" is expressed by leaving the field out. ``reasoning_effort`` on another model
    and log-probabilities from a reasoning model raise :class:`NotSupportedError`. ``tools`` (OpenAI
    function tools) and ``tool_choice`` are sent as given; the answer's calls are
    :attr:`~simhub.models.openai.results.Choice.tool_calls`.

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
    if tools is not None:
        body["tools"] = _checked_tools(tools)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
    return body


def _checked_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Function tools as the API takes them: ``{"type": "function", "function": {"name", ...}}``."""
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConfigError(f"tools[{i}]: expected {{type: function, function: {{name, parameters}}}}",
                              field=f"tools[{i}]")
        out.append(dict(tool))
    return out


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
