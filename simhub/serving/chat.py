"""The OpenAI-compatible student (``POST /v1/chat/completions``): request to dialogue and sampling,
simulation result to a completion or to a stream of ``chat.completion.chunk`` events.

Two role conventions (the request's ``roles``, else the profile's ``serving.chat_roles``):

* ``student`` (the default): the student is the chat model. System (and developer) messages are
  the question, user messages the tutor, assistant messages the student's earlier turns.
* ``user_proxy``: the student plays the *user* of a chat whose assistant is the tutor under test,
  as harnesses that simulate users send it (their transcript as is). User messages are the
  student's own earlier turns, assistant messages the tutor's; system messages are the harness's
  instructions to its user simulator, which a trained student has never seen, so they are dropped
  and the student gets its own prompt. The question comes from the ``question`` field or
  ``metadata.question``.

Either way the student speaks next, and the completion's message (role ``assistant``, as OpenAI
always answers) is its turn.

Streaming sends the turn once it is generated (a student turn is short): a chunk with the role,
one with the text (and its log-probabilities), a last one with ``finish_reason``, optionally a usage
chunk (``stream_options.include_usage``), then ``data: [DONE]``. Validation and generation errors
therefore still arrive as ordinary JSON errors with their status, before any event.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec

from simhub.models import DEFAULT_MAX_TOKENS, Sampling, TokenLogprob
from simhub.prompts import is_student_prompt
from simhub.schema import Dialogue, Question, Turn
from simhub.serving import schemas as s
from simhub.serving.settings import ServiceSettings
from simhub.simulation import Candidate, SimulationResult

#: What OpenAI returns for a log-probability too small to represent (JSON has no -Infinity).
FLOOR_LOGPROB = -9999.0
_encode = msgspec.json.Encoder().encode


def chat_to_dialogue(messages: list[s.ChatMessage], roles: str = "student", question: str | None = None) -> Dialogue:
    """The dialogue the messages describe under ``roles`` (see the module docstring); ``question``,
    when given, is the question whatever the system messages say."""
    if question is None and roles == "student":
        question = "\n".join(m.text for m in messages if m.role in ("system", "developer"))
    student = "user" if roles == "user_proxy" else "assistant"
    turns = [Turn(role="student" if m.role == student else "tutor", content=m.text)
             for m in messages if m.role in ("user", "assistant")]
    text = (question or "").strip() or "(no question given)"
    return Dialogue(id=f"chat-{uuid.uuid4().hex[:12]}", question=Question(text=text), turns=turns)


def _question(request: s.ChatCompletionRequest, roles: str) -> str | None:
    if request.question is not None:
        return request.question
    if roles == "user_proxy" and request.metadata:
        value = request.metadata.get("question")
        if value is not None and not isinstance(value, str):
            raise s.RequestError("metadata.question: must be a string (the question the student works on)",
                                 "metadata.question")
        return value
    return None


def check_request(request: s.ChatCompletionRequest,
                  settings: ServiceSettings) -> tuple[Dialogue, Sampling, tuple[dict[str, str], ...] | None]:
    """Every rule of the request (unsupported parameters, limits, roles) as a 4xx naming the field;
    the dialogue and the sampling to run, and the messages themselves when they are simhub's own
    student prompt (run as they are; see :func:`simhub.prompts.is_student_prompt`)."""
    s.check_chat_parameters(request)
    s.check_count(request.n, settings.max_n, "n", "candidates")
    s.check_count(len(request.messages), settings.max_turns + 2, "messages", "messages")
    max_tokens = request.max_completion_tokens or request.max_tokens or min(DEFAULT_MAX_TOKENS, settings.max_tokens)
    s.check_count(max_tokens, settings.max_tokens, "max_completion_tokens" if request.max_completion_tokens else "max_tokens",
                  "tokens")
    roles = request.roles or settings.chat_roles
    s.check_chat_messages(request.messages, roles)
    dialogue = chat_to_dialogue(request.messages, roles, _question(request, roles))
    s.check_dialogue_caps([("messages", dialogue)], settings.max_turns, settings.max_request_chars)
    logprobs = (request.top_logprobs or 0) if request.logprobs else None
    sampling = Sampling(temperature=request.temperature or 0.0, top_p=request.top_p or 1.0, n=request.n,
                        seed=request.seed, max_tokens=max_tokens, logprobs=logprobs)
    plain = [{"role": m.role, "content": m.text} for m in request.messages]
    prompt = tuple(plain) if roles == "student" and is_student_prompt(plain) else None
    return dialogue, sampling, prompt


def _logprob(value: float) -> float:
    return value if math.isfinite(value) else FLOOR_LOGPROB


def _token(entry: TokenLogprob, k: int) -> s.TokenLogprobOut:
    top = sorted(entry.top, key=lambda alt: -alt[1])[:k]
    return s.TokenLogprobOut(token=entry.token, logprob=_logprob(entry.logprob), bytes=list(entry.token.encode("utf-8")),
                             top_logprobs=[s.TopLogprob(token=t, logprob=_logprob(v), bytes=list(t.encode("utf-8")))
                                           for t, v in top])


def choice_logprobs(candidate: Candidate, top: int | None) -> s.ChoiceLogprobs | None:
    """OpenAI's ``logprobs`` of a choice (None when not asked for): one entry per generated token."""
    if top is None:
        return None
    return s.ChoiceLogprobs(content=[_token(e, top) for e in candidate.logprobs or []])


def usage(result: SimulationResult) -> s.ChatUsage:
    completion = sum(c.tokens for c in result.candidates)
    return s.ChatUsage(prompt_tokens=result.prompt_tokens, completion_tokens=completion,
                       total_tokens=result.prompt_tokens + completion)


def check_result(result: SimulationResult) -> None:
    """A simulator behind an endpoint that failed after its retries: a 502 with the short cause."""
    if result.error is not None or not result.candidates:
        raise s.UpstreamError(f"model: the simulator's endpoint failed ({result.error or 'no answer'})", "model")


def completion(request: s.ChatCompletionRequest, sampling: Sampling, result: SimulationResult) -> s.ChatCompletion:
    return s.ChatCompletion(
        id=f"chatcmpl-{uuid.uuid4().hex}", object="chat.completion", created=int(time.time()), model=request.model,
        choices=[s.ChatChoice(index=i, message=s.ChatChoiceMessage(role="assistant", content=c.text),
                              finish_reason=c.finish_reason, logprobs=choice_logprobs(c, sampling.logprobs),  # type: ignore[arg-type]
                              end_of_dialogue=c.end_of_dialogue)
                 for i, c in enumerate(result.candidates)],
        usage=usage(result),
    )


def stream_events(request: s.ChatCompletionRequest, sampling: Sampling, result: SimulationResult) -> Iterator[bytes]:
    """The server-sent events of a streamed completion (see the module docstring)."""
    head: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
                            "created": int(time.time()), "model": request.model}
    include_usage = bool(request.stream_options and request.stream_options.include_usage)
    if include_usage:
        head["usage"] = None

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + _encode({**head, "choices": choices, **extra}) + b"\n\n"

    for i, c in enumerate(result.candidates):
        yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}])
        logprobs = choice_logprobs(c, sampling.logprobs)
        yield event([{"index": i, "delta": {"content": c.text}, "finish_reason": None,
                      "logprobs": msgspec.to_builtins(logprobs) if logprobs is not None else None}])
        yield event([{"index": i, "delta": {}, "logprobs": None, "finish_reason": c.finish_reason,
                      "end_of_dialogue": c.end_of_dialogue}])
    if include_usage:
        yield event([], usage=msgspec.to_builtins(usage(result)))
    yield b"data: [DONE]\n\n"
