"""An OpenAI-compatible chat endpoint as a :class:`~simhub.models.base.LanguageModel`.

:class:`EndpointLM` wraps one shared :class:`~simhub.models.openai.OpenAIClient` (one per endpoint
and model per process, :func:`simhub.models.endpoints.endpoint_lm`), so simulators, tutors and
judges can treat a hosted model like a local one. :meth:`EndpointLM.request` maps a
:class:`~simhub.models.base.Sampling` to the exact chat-completions body:

* ``temperature`` and ``top_p`` (top-p only when it is not 1, so the default leaves the body alone;
  a reasoning model gets neither, see :func:`~simhub.models.openai.chat_payload`);
* ``max_tokens`` as ``max_completion_tokens``, unless the model has its own token limit;
* ``n`` (only above 1), ``seed``, ``stop``;
* ``logprobs``: None asks for none, 0 for the chosen tokens', k for k alternatives too;
* ``top_k`` only to an endpoint that takes it (vLLM's server does, OpenAI does not): elsewhere a
  top-k cut is a :class:`~simhub.errors.ConfigError` rather than silently ignored;
* the model's ``reasoning_effort``.

A request that fails after the client's retries is a value, never an exception in the middle of a
batch: its :class:`~simhub.models.base.GenerationResult` has no generations and ``error`` set to the
client's one-line, secret-free cause. Log-probabilities of given tokens need a local model
(:class:`~simhub.errors.NotSupportedError`, from the base class).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simhub.errors import ConfigError, NotSupportedError
from simhub.models.base import Generation, GenerationResult, LanguageModel, Prompt, Sampling, cut_at_stop
from simhub.models.openai import ChatResult, EndpointFailure, OpenAIClient, chat_payload

__all__ = ["EndpointLM"]


class EndpointLM(LanguageModel):
    """A chat model behind an OpenAI-compatible endpoint (see the module docstring).

    ``reasoning_effort`` goes into every request; ``max_tokens``, when set, replaces the sampling's
    token limit (a profile's own limit for this model); ``batch`` sends :meth:`generate`'s requests
    through the Batch API, polled every ``poll_interval_s`` seconds; ``top_k`` says the endpoint
    accepts a ``top_k`` field.
    """

    def __init__(self, client: OpenAIClient, *, reasoning_effort: str | None = None, max_tokens: int | None = None,
                 batch: bool = False, poll_interval_s: float = 30.0, top_k: bool = False, name: str | None = None):
        self.client = client
        self.model = client.config.model
        self.reasoning_effort = reasoning_effort
        self.max_tokens = max_tokens
        self.batch = batch
        self.poll_interval_s = poll_interval_s
        self.accepts_top_k = top_k
        self.name = name or self.model

    def __repr__(self) -> str:
        return f"EndpointLM({self.client!r}, reasoning_effort={self.reasoning_effort!r})"

    # ------------------------------------------------------------------ requests

    def request(self, messages: Prompt, sampling: Sampling, *, temperature: bool = True) -> dict[str, Any]:
        """The chat-completions body for ``messages`` under ``sampling``; ``temperature=False`` leaves
        the temperature to the endpoint (the body carries none)."""
        if not messages or not all(isinstance(m, dict) for m in messages):
            raise NotSupportedError(f"{self.name}: an OpenAI-compatible endpoint takes chat messages, not token ids",
                                    field="prompts")
        if sampling.top_k and not self.accepts_top_k:
            raise ConfigError(f"sampling: {self.name} is an OpenAI-compatible endpoint, which takes no top_k "
                              f"(asked for {sampling.top_k})", field="sampling.top_k")
        body = chat_payload(
            self.model, messages,  # type: ignore[arg-type]
            temperature=sampling.temperature if temperature else None,
            top_p=sampling.top_p if sampling.top_p != 1.0 else None,
            max_tokens=self.max_tokens or sampling.max_tokens,
            reasoning_effort=self.reasoning_effort, n=sampling.n, seed=sampling.seed,
            logprobs=sampling.logprobs is not None or None, top_logprobs=sampling.logprobs or None,
            stop=list(sampling.stop) if sampling.stop else None,
        )
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        return body

    def requests(self, prompts: Sequence[Prompt], sampling: Sampling, *, temperature: bool = True) -> list[dict[str, Any]]:
        return [self.request(p, sampling, temperature=temperature) for p in prompts]

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False,
                 temperature: bool = True, desc: str | None = None) -> list[GenerationResult]:
        """One result per prompt, in order; a failed request is a result with ``error`` set."""
        payloads = self.requests(prompts, sampling, temperature=temperature)
        desc = desc or self.name
        if self.batch:
            answers = self.client.complete_batch(payloads, poll_interval_s=self.poll_interval_s, progress=progress,
                                               desc=desc)
        else:
            answers = self.client.complete(payloads, progress=progress, desc=desc)
        return [self.result(a, sampling.stop) for a in answers]

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
                logprobs=list(choice.logprobs) if choice.logprobs else None))
        return GenerationResult(generations, prompt_tokens=(usage.prompt_tokens if usage else None) or 0)

    def close(self) -> None:
        """Nothing to release: the client is shared by every user of the endpoint."""
        return None
