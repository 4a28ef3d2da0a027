"""The one interface every language model implements (transformers, vLLM, OpenAI-compatible, dummy).

Three operations, with documented shapes:

* :meth:`LanguageModel.continuation_logprobs` — per-token log-probabilities of continuations given
  prompts (token ids); the act classifier, the local judge and the tutor-response metric use it.
* :meth:`LanguageModel.next_token_logprobs` — log-probabilities of a few given tokens right after
  each prompt; the knowledge tracer reads P(True) over {True, False} this way.
* :meth:`LanguageModel.generate` — sampled or greedy continuations of chat prompts; simulators,
  tutors and API judges use it.

A backend that cannot do one of them (a chat API has no prompt log-probabilities) raises
:class:`~simhub.errors.NotSupportedError` naming what would.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simhub.errors import ConfigError, NotSupportedError

#: A prompt: chat messages (``[{"role", "content"}]``), templated by the model, or token ids.
Prompt = list[dict[str, str]] | list[int]

#: docs/protocol.md §4: inference is greedy with at most 400 new tokens.
DEFAULT_MAX_TOKENS = 400


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; temperature 0 is greedy (then ``n`` identical candidates)."""

    temperature: float = 0.0
    top_p: float = 1.0
    #: 0: no top-k cut. Passed to every local backend explicitly, because transformers' ``generate``
    #: would otherwise take top_k=50 from the generation config; the reference samples with vLLM,
    #: which has no top-k unless asked (FIDELITY.md, sampling). OpenAI-compatible endpoints take none.
    top_k: int = 0
    max_tokens: int = DEFAULT_MAX_TOKENS
    n: int = 1
    seed: int | None = None
    #: Strings that end a generation (not included in the text).
    stop: tuple[str, ...] = ()
    #: None: no log-probabilities; 0: the chosen tokens'; k > 0: plus the k most likely alternatives.
    logprobs: int | None = None
    #: A JSON schema every generation must match (schema-guided decoding: the transformers backend
    #: masks the tokens that would leave it, vLLM uses its structured outputs, an endpoint gets it as
    #: ``response_format``); None: free text. Generation ends with the JSON value, or at ``max_tokens``
    #: with it unfinished (``finish_reason`` "length"). Left out of the hash (a dict has none), not
    #: out of equality or ``dataclasses.asdict``, so cache keys built from the sampling tell schemas apart.
    json_schema: Mapping[str, Any] | None = field(default=None, hash=False)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class TokenLogprob:
    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class Generation:
    """One generated continuation. ``text`` excludes the stop string that ended it (``stop_string``)."""

    text: str
    finish_reason: str  # "stop" (end of turn or a stop string) or "length"
    tokens: int = 0
    stop_string: str | None = None
    logprobs: list[TokenLogprob] | None = None
    #: The tools the model called (an endpoint offered ``tools``): each has ``id``, ``name`` and
    #: ``arguments`` (JSON text), as :class:`simhub.models.openai.results.ToolCall`.
    tool_calls: tuple[Any, ...] = ()


@dataclass
class GenerationResult:
    """The ``n`` generations of one prompt and the prompt's length in tokens. A request that failed
    (an endpoint's, after its retries) has no generations and ``error``: one secret-free line saying why."""

    generations: list[Generation]
    prompt_tokens: int = 0
    error: str | None = None


def json_schema_text(schema: Any) -> str:
    """``Sampling.json_schema`` as compact JSON text, what the guided decoders take; a
    :class:`~simhub.errors.ConfigError` naming ``json_schema`` when it is no JSON object."""
    if not isinstance(schema, Mapping):
        raise ConfigError(f"json_schema: a JSON schema is an object (a mapping), not {type(schema).__name__}",
                          field="json_schema")
    try:
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"json_schema: not JSON: {exc}", field="json_schema") from None


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, str | None]:
    """``text`` up to the earliest stop string, and that string (None when none occurs)."""
    best, found = len(text), None
    for s in stop:
        at = text.find(s)
        if 0 <= at < best:
            best, found = at, s
    return text[:best], found


class LanguageModel(ABC):
    """A loaded language model; see the module docstring. Thread-safe: calls on one model are serialised."""

    #: Human-readable identity for logs and provenance (base model and adapter).
    name: str = "model"
    #: A transformers tokenizer, or None for API models.
    tokenizer: Any = None

    # ------------------------------------------------------------------ tokens

    def chat_ids(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of ``messages`` through the model's chat template."""
        self._need_tokenizer("chat_ids")
        ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def chat_text(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The chat-templated prompt string (what ``simhub prompt show`` prints; the 6,000-character rule measures it)."""
        self._need_tokenizer("chat_text")
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def text_ids(self, text: str) -> list[int]:
        self._need_tokenizer("text_ids")
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def eot_id(self) -> int:
        """The end-of-turn token that closes a chat message (a continuation scored as a whole turn ends with it)."""
        self._need_tokenizer("eot_id")
        return int(self.tokenizer.eos_token_id)

    def _need_tokenizer(self, what: str) -> None:
        if self.tokenizer is None:
            raise NotSupportedError(f"{self.name}: {what} needs a local model with a tokenizer", field="model")

    # ------------------------------------------------------------------ scoring

    def continuation_logprobs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[np.ndarray]:
        """For each ``(prompt ids, continuation ids)``, the log-probability of every continuation token
        (float64 array of the continuation's length)."""
        raise NotSupportedError(f"{self.name}: log-probabilities need a local model (transformers or vllm)",
                                field="model")

    def next_token_logprobs(self, prompts: Sequence[Sequence[int]], tokens: Sequence[int]) -> np.ndarray:
        """Log-probabilities (over the whole vocabulary) of each of ``tokens`` right after each prompt,
        shape ``(len(prompts), len(tokens))``. The default scores one-token continuations."""
        pairs = [(p, [t]) for p in prompts for t in tokens]
        values = [lp[0] for lp in self.continuation_logprobs(pairs)]
        return np.asarray(values, dtype=np.float64).reshape(len(prompts), len(tokens))

    def choose(self, prompts: Sequence[Sequence[int]], options: Sequence[Sequence[int]]) -> tuple[list[int], np.ndarray]:
        """For each prompt, the index of the most likely option (summed log-probability) and all scores."""
        pairs = [(p, o) for p in prompts for o in options]
        scores = np.array([lp.sum() for lp in self.continuation_logprobs(pairs)]).reshape(len(prompts), len(options))
        return [int(i) for i in scores.argmax(axis=1)], scores

    # ------------------------------------------------------------------ generation

    @abstractmethod
    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, *, progress: bool = False) -> list[GenerationResult]:
        """``sampling.n`` continuations of each prompt (chat messages are templated with a generation prompt)."""

    async def agenerate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[GenerationResult]:
        """:meth:`generate` without blocking the event loop (engines with their own loop override it)."""
        import asyncio  # here: the command line never needs it, and it costs every command its import

        return await asyncio.to_thread(self.generate, prompts, sampling)

    def close(self) -> None:
        """Release what the model holds (engine processes, memory)."""
        return None
