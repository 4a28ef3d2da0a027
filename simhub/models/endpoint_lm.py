"""An OpenAI-compatible chat endpoint as a :class:`~simhub.models.base.LanguageModel`.

:class:`EndpointLM` wraps one shared :class:`~simhub.models.openai.OpenAIClient` (one per endpoint
and model per process, :func:`simhub.models.endpoints.endpoint_lm`), so simulators, tutors and
judges can treat a hosted model like a local one. :meth:`EndpointLM.request` (and, without a client,
:func:`chat_request`) maps a :class:`~simhub.models.base.Sampling` to the exact chat-completions body:

* ``temperature`` and ``top_p`` (top-p only when it is not 1, so the default leaves the body alone;
  a reasoning model gets neither, see :func:`~simhub.models.openai.chat_payload`);
* ``max_tokens`` as ``max_completion_tokens``, unless the model has its own token limit;
* ``n`` (only above 1), ``seed``, ``stop``;
* ``logprobs``: None asks for none, 0 for the chosen tokens', k for k alternatives too;
* ``top_k`` only to an endpoint that takes it (vLLM's server does, OpenAI does not): elsewhere a
  top-k cut is a :class:`~simhub.errors.ConfigError` rather than silently ignored;
* the model's ``reasoning_effort``;
* a ``response_format`` (JSON mode, ``{"type": "json_object"}``) when the caller asks for one, or
  else, for a ``Sampling.json_schema``, the endpoint's structured outputs
  (:func:`json_schema_format`: ``{"type": "json_schema", "json_schema": {"name": "answer",
  "schema": ..., "strict": true}}``). Not every OpenAI-compatible server takes that format, and
  strict modes differ in the schema keywords they accept; such a refusal is the request's error.

A request that fails after the client's retries is a value, never an exception in the middle of a
batch: its :class:`~simhub.models.base.GenerationResult` has no generations and ``error`` set to the
client's one-line, secret-free cause. Log-probabilities of given tokens need a local model
(:class:`~simhub.errors.NotSupportedError`, from the base class).

Callers that only want text ask through :func:`ask` (prepared request bodies, one per prompt, so each
may carry its own seed or response format) or :func:`endpoint_answers` (prompts under one sampling):
an :class:`Answer` per prompt, ``(text, None)`` or ``(None, cause)``. The judge metric, the
dialogue-level labeller, the annotation labeller and the learners' chat models all use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from simhub.errors import ConfigError, NotSupportedError
from simhub.models.base import (
    Generation,
    GenerationResult,
    LanguageModel,
    Prompt,
    Sampling,
    cut_at_stop,
    json_schema_text,
)
from simhub.models.openai import ChatResult, EndpointFailure, OpenAIClient, chat_payload

__all__ = ["Answer", "EndpointLM", "ask", "chat_request", "endpoint_answers", "json_schema_format"]


def json_schema_format(schema: Mapping[str, Any], *, name: str = "answer") -> dict[str, Any]:
    """The chat-completions ``response_format`` that holds the reply to ``schema`` (strict)."""
    json_schema_text(schema)  # a ConfigError naming json_schema when it is no JSON object
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": True}}


def chat_request(model: str, messages: Prompt, sampling: Sampling, *, name: str | None = None,
                 reasoning_effort: str | None = None, max_tokens: int | None = None, top_k: bool = False,
                 temperature: bool = True, token_limit: bool = True,
                 response_format: Mapping[str, Any] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The chat-completions body :class:`EndpointLM` sends for ``messages`` under ``sampling`` (see
    the module docstring); pure, so a dry run can build it without a client. ``tools`` (OpenAI
    function specs) are offered to the model; its calls come back as ``Generation.tool_calls``.

    ``max_tokens`` replaces the sampling's token limit; ``top_k`` says the endpoint takes a ``top_k``
    field; ``temperature=False`` leaves the temperature to the endpoint and ``token_limit=False`` the
    token limit (the body carries neither); ``response_format`` goes in as given, and without one a
    ``sampling.json_schema`` goes in as :func:`json_schema_format`.
    """
    who = name or model
    if not messages or not all(isinstance(m, dict) for m in messages):
        raise NotSupportedError(f"{who}: an OpenAI-compatible endpoint takes chat messages, not token ids",
                                field="prompts")
    if sampling.top_k and not top_k:
        raise ConfigError(f"sampling: {who} is an OpenAI-compatible endpoint, which takes no top_k "
                          f"(asked for {sampling.top_k})", field="sampling.top_k")
    if response_format is None and sampling.json_schema is not None:
        response_format = json_schema_format(sampling.json_schema)
    body = chat_payload(
        model, messages,  # type: ignore[arg-type]
        temperature=sampling.temperature if temperature else None,
        top_p=sampling.top_p if sampling.top_p != 1.0 else None,
        max_tokens=(max_tokens or sampling.max_tokens) if token_limit else None,
        reasoning_effort=reasoning_effort, n=sampling.n, seed=sampling.seed, response_format=response_format,
        logprobs=sampling.logprobs is not None or None, top_logprobs=sampling.logprobs or None,
        stop=list(sampling.stop) if sampling.stop else None, tools=tools,
    )
    if sampling.top_k:
        body["top_k"] = sampling.top_k
    return body


class EndpointLM(LanguageModel):
    """A chat model behind an OpenAI-compatible endpoint (see the module docstring).

    ``reasoning_effort`` goes into every request; ``max_tokens``, when set, replaces the sampling's
    token limit (a profile's own limit for this model); ``batch`` sends :meth:`generate`'s requests
    through the Batch API, polled every ``poll_interval_s`` seconds and, with ``max_wait_s``, waited
    for that long at most (what has not ended then fails with the batch's state as its cause, and a
    rerun collects it); ``top_k`` says the endpoint accepts a ``top_k`` field.
    """

    def __init__(self, client: OpenAIClient, *, reasoning_effort: str | None = None, max_tokens: int | None = None,
                 batch: bool = False, poll_interval_s: float = 30.0, max_wait_s: float | None = None,
                 top_k: bool = False, name: str | None = None):
        self.client = client
        self.model = client.config.model
        self.reasoning_effort = reasoning_effort
        self.max_tokens = max_tokens
        self.batch = batch
        self.poll_interval_s = poll_interval_s
        self.max_wait_s = max_wait_s
        self.accepts_top_k = top_k
        self.name = name or self.model

    def __repr__(self) -> str:
        return f"EndpointLM({self.client!r}, reasoning_effort={self.reasoning_effort!r})"

    # ------------------------------------------------------------------ requests

    def request(self, messages: Prompt, sampling: Sampling, *, temperature: bool = True, token_limit: bool = True,
                response_format: Mapping[str, Any] | None = None,
                tools: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """The chat-completions body for ``messages`` under ``sampling`` (:func:`chat_request` with this
        model's settings); ``temperature=False`` leaves the temperature to the endpoint,
        ``token_limit=False`` the token limit, ``response_format`` asks for one (JSON mode), and
        ``tools`` offers tools (the calls are :attr:`Generation.tool_calls`)."""
        return chat_request(self.model, messages, sampling, name=self.name, reasoning_effort=self.reasoning_effort,
                            max_tokens=self.max_tokens, top_k=self.accepts_top_k, temperature=temperature,
                            token_limit=token_limit, response_format=response_format, tools=tools)

    def requests(self, prompts: Sequence[Prompt], sampling: Sampling, *, temperature: bool = True,
                 token_limit: bool = True, response_format: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return [self.request(p, sampling, temperature=temperature, token_limit=token_limit,
                             response_format=response_format) for p in prompts]

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False,
                 temperature: bool = True, desc: str | None = None,
                 response_format: Mapping[str, Any] | None = None) -> list[GenerationResult]:
        """One result per prompt, in order; a failed request is a result with ``error`` set."""
        payloads = self.requests(prompts, sampling, temperature=temperature, response_format=response_format)
        return self.send(payloads, stop=sampling.stop, progress=progress, desc=desc)

    def send(self, payloads: Sequence[Mapping[str, Any]], *, stop: Sequence[str] = (), progress: bool = False,
             desc: str | None = None) -> list[GenerationResult]:
        """Request bodies built by :meth:`request`, sent live or through the Batch API (``batch``): one
        result per body, in order, a failed request a result with ``error`` set; a completion that
        holds one of ``stop`` is cut there."""
        desc = desc or self.name
        if self.batch:
            answers = self.client.complete_batch(payloads, poll_interval_s=self.poll_interval_s,
                                                 max_wait_s=self.max_wait_s, progress=progress, desc=desc)
        else:
            answers = self.client.complete(payloads, progress=progress, desc=desc)
        return [self.result(a, stop) for a in answers]

    async def agenerate(self, prompts: Sequence[Prompt], sampling: Sampling, *,
                        temperature: bool = True) -> list[GenerationResult]:
        """:meth:`generate` on the running event loop (live requests, never the Batch API)."""
        answers = await self.client.acomplete(self.requests(prompts, sampling, temperature=temperature))
        return [self.result(a, sampling.stop) for a in answers]

    @staticmethod
    def result(answer: ChatResult | EndpointFailure, stop: Sequence[str] = ()) -> GenerationResult:
        """A client outcome as a :class:`GenerationResult`: the completion tokens the endpoint reports
        are shared out over the choices (the API counts them per request, not per choice)."""
        if isinstance(answer, EndpointFailure):
            return GenerationResult([], error=answer.cause)
        usage = answer.usage
        total = (usage.completion_tokens if usage else None) or 0
        count = len(answer.choices)
        generations = []
        for i, choice in enumerate(answer.choices):
            # The endpoint cuts at the stop strings it was sent; one that ignores them is cut here.
            text, found = cut_at_stop(choice.text or "", stop)
            generations.append(Generation(
                text=text, finish_reason="stop" if found else (choice.finish_reason or "stop"),
                tokens=total // count + (1 if i < total % count else 0), stop_string=found,
                logprobs=list(choice.logprobs) if choice.logprobs else None, tool_calls=tuple(choice.tool_calls)))
        return GenerationResult(generations, prompt_tokens=(usage.prompt_tokens if usage else None) or 0)

    def close(self) -> None:
        """Nothing to release: the client is shared by every user of the endpoint."""
        return None


# --------------------------------------------------------------------------- answers


class Answer(NamedTuple):
    """One prompt's answer: ``(text, None)``, or ``(None, cause)`` for a request that failed after the
    client's retries (``cause`` is the client's one-line, secret-free reason). ``cut`` says the
    endpoint stopped the text at the token limit. The text is the first choice's, as generated (empty
    when the endpoint sent no content)."""

    text: str | None
    cause: str | None
    cut: bool = False

    @classmethod
    def of(cls, result: GenerationResult) -> Answer:
        if result.error is not None:
            return cls(None, result.error)
        if not result.generations:
            return cls("", None)
        first = result.generations[0]
        return cls(first.text, None, first.finish_reason == "length")


def ask(lm: EndpointLM, payloads: Sequence[Mapping[str, Any]], *, stop: Sequence[str] = (), progress: bool = False,
        desc: str | None = None, chunk_size: int | None = None,
        on_chunk: Callable[[int, int], None] | None = None) -> list[Answer]:
    """An :class:`Answer` per request body (built by :meth:`EndpointLM.request`), in order.

    Live requests go out ``chunk_size`` at a time (all at once without one), so an interrupt stops
    the caller after at most one chunk, whose answers the client has cached; through the Batch API
    (``lm.batch``) they go as one batch. ``on_chunk(done, total)`` is called after each chunk (after
    the batch). Nothing is sent, and nothing called, for no bodies.
    """
    total = len(payloads)
    if not total:
        return []
    size = total if lm.batch or not chunk_size else chunk_size
    answers: list[Answer] = []
    for start in range(0, total, size):
        results = lm.send(payloads[start : start + size], stop=stop, progress=progress, desc=desc)
        answers.extend(Answer.of(r) for r in results)
        if on_chunk is not None:
            on_chunk(len(answers), total)
    return answers


def endpoint_answers(lm: EndpointLM, prompts: Sequence[Prompt], sampling: Sampling, *, temperature: bool = True,
                     response_format: Mapping[str, Any] | None = None, progress: bool = False) -> list[Answer]:
    """:func:`ask` for chat prompts under one ``sampling`` (see :meth:`EndpointLM.request` for
    ``temperature`` and ``response_format``)."""
    payloads = lm.requests(prompts, sampling, temperature=temperature, response_format=response_format)
    return ask(lm, payloads, stop=sampling.stop, progress=progress)
