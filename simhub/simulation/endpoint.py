"""Simulators behind any OpenAI-compatible chat endpoint: a user's own hosted model, or one of the
paper's five prompted baselines (``baseline:zero-shot`` ... ``baseline:oracle``, docs/protocol.md §5, §8).

Without ``baseline:`` the endpoint is prompted in simhub's student chat format (the format a model
fine-tuned by simhub expects, e.g. a student served by another ``simhub serve`` or by vLLM). With
it, the baseline's prompt: the numbered plain-text history and the style's instructions.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from simhub.config import BaselinesConfig, Profile, SimulatorConfig, cache_dir
from simhub.errors import ConfigError
from simhub.models import GenerationResult, Prompt, Sampling
from simhub.prompts import BASELINE_STYLES
from simhub.schema import Dialogue
from simhub.simulation.base import LMSimulator, Simulator, Target

if TYPE_CHECKING:
    from simhub.cache import ContentCache
    from simhub.models.endpoint_lm import EndpointLM
    from simhub.models.endpoints import EndpointKind

BASELINE_PREFIX = "baseline:"


def training_split_of(data: str | os.PathLike[str]) -> Path | None:
    """The training split beside a split file: ``DIR/train.jsonl`` for ``DIR/test.jsonl`` (the layout
    ``simhub data convert-eedi`` writes), or None when there is none."""
    train = Path(data).parent / "train.jsonl"
    return train if train.is_file() else None


def with_icl_pool(profile: Profile, data: str | os.PathLike[str] | None) -> Profile:
    """``profile`` with ``baselines.icl_pool`` defaulting to the training split of ``data``, the
    split being evaluated (the reference retrieves ICL examples from the training split of the data
    it evaluates; FIDELITY.md). A pool the profile names stays; without a training split the pool
    stays unset, and the ICL baseline says so when it needs it."""
    if profile.baselines.icl_pool or data is None or (train := training_split_of(data)) is None:
        return profile
    baselines = msgspec.structs.replace(profile.baselines, icl_pool=str(train))
    return msgspec.structs.replace(profile, baselines=baselines)


class IclRetriever:
    """For a dialogue, the pool dialogue whose free-text profile embedding is nearest (cosine),
    never the dialogue itself; None when the dialogue has no profile.

    ``pool`` may be a function returning the dialogues: it is called on first use, so that a
    simulator can be built (listed, described) before its pool is known."""

    def __init__(self, pool: Sequence[Dialogue] | Callable[[], Sequence[Dialogue]], embedder: str = "minilm"):
        self._source = pool
        self._pool: list[Dialogue] | None = None
        self.embedder_name = embedder
        self._vectors: np.ndarray | None = None
        self._cache: dict[str, Dialogue | None] = {}
        #: Where a run keeps the examples it retrieved (set by :func:`simhub.evaluation.runs.simulate` for
        #: a run with a cache): a rerun then builds its prompts, and finds their answers, with no embedder.
        self.store: ContentCache | None = None
        self._pool_key: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another executor's worker: the examples found so far, no store (the driver
        alone writes the cache)."""
        return {**self.__dict__, "store": None}

    @property
    def pool(self) -> list[Dialogue]:
        """The pool dialogues that have a profile (loaded on first use)."""
        if self._pool is None:
            source = self._source() if callable(self._source) else self._source
            self._pool = [d for d in source if d.profile]
        return self._pool

    def _embed(self, texts: list[str]) -> np.ndarray:
        from simhub.models.embeddings import load_embedder

        return load_embedder(self.embedder_name).encode(texts)

    def example(self, dialogue: Dialogue) -> Dialogue | None:
        if dialogue.id in self._cache:
            return self._cache[dialogue.id]
        if not self.pool or not dialogue.profile:  # the pool first: a missing one is an error, whatever the dialogue
            return None
        key = self._key(dialogue) if self.store is not None and self.store.enabled else None
        if key is not None:
            hit = self.store.get(key)  # type: ignore[union-attr]
            index = hit.get("index") if isinstance(hit, dict) else None
            if isinstance(index, int) and 0 <= index < len(self.pool) and self.pool[index].id == hit.get("id"):
                self._cache[dialogue.id] = self.pool[index]
                return self.pool[index]
        chosen = self._nearest(dialogue)
        if chosen is not None:
            self._cache[dialogue.id] = self.pool[chosen]
            if key is not None:
                self.store.put(key, {"index": chosen, "id": self.pool[chosen].id})  # type: ignore[union-attr]
        return self.pool[chosen] if chosen is not None else None

    def _nearest(self, dialogue: Dialogue) -> int | None:
        if self._vectors is None:
            self._vectors = self._embed([d.profile or "" for d in self.pool])
        sims = self._vectors @ self._embed([dialogue.profile or ""])[0]
        for i in np.argsort(-sims, kind="stable"):
            if self.pool[int(i)].id != dialogue.id:
                return int(i)
        return None

    def _key(self, dialogue: Dialogue) -> str:
        """What the retrieved example depends on: the embedder, the pool's profiles (in order), the
        dialogue's own id and profile, and simhub's version."""
        from simhub import __version__
        from simhub.cache import fingerprint

        if self._pool_key is None:
            self._pool_key = fingerprint([[d.id, d.profile] for d in self.pool])
        return fingerprint(["icl-example", __version__, self.embedder_name, self._pool_key, dialogue.id, dialogue.profile])


def baseline_config(style: str, baselines: BaselinesConfig) -> SimulatorConfig:
    """The simulator a built-in ``baseline:STYLE`` stands for: the paper's model and decoding."""
    reasoning = style == "reasoning"
    local = baselines.kind == "model"
    model = baselines.reasoning_model if reasoning else baselines.model
    return SimulatorConfig(
        kind=baselines.kind, model=model, baseline=style,  # type: ignore[arg-type]
        endpoint=baselines.endpoint, temperature=0.0 if local or not reasoning else None,
        max_tokens=baselines.max_tokens or (15_000 if reasoning else 4_000),
        reasoning_effort="medium" if reasoning and not local else None,
        description=f"the paper's {style} baseline (prompted {model}{', local' if local else ''})",
    )


class EndpointSimulator(LMSimulator):
    """A chat model behind an OpenAI-compatible endpoint, as an
    :class:`~simhub.models.endpoint_lm.EndpointLM` over the endpoint's shared client.

    Requests carry no stop string (the end-of-dialogue marker is cut from the text afterwards), no
    top-k (refused), and the profile's ``temperature`` when the caller gives no sampling: with none
    configured, the server's default. Through the Batch API when the endpoint's ``batch_api`` says so.
    """

    kind = "openai"

    def __init__(self, sid: str, config: SimulatorConfig, *, retriever: IclRetriever | None = None):
        if not config.endpoint.base_url:
            raise ConfigError(f"simulators.{sid}.endpoint.base_url: required for an OpenAI-compatible simulator",
                              field=f"simulators.{sid}.endpoint.base_url")
        if config.baseline is not None and config.baseline not in BASELINE_STYLES:
            raise ConfigError(f"simulators.{sid}.baseline: {config.baseline!r} is not one of {', '.join(BASELINE_STYLES)}",
                              field=f"simulators.{sid}.baseline")
        from simhub.models.endpoints import key_names

        self.id, self.config, self.retriever = sid, config, retriever
        self.kind = "baseline" if sid.startswith(BASELINE_PREFIX) else "openai"
        # The built-in baselines take their endpoint from the profile's `baselines` section.
        self._key_kind: EndpointKind = "baseline" if self.kind == "baseline" else "simulator"
        self._field = "baselines.endpoint" if self.kind == "baseline" else f"simulators.{sid}.endpoint"
        # A bad key setting is refused when the simulator is built, before any request.
        key_names(config.endpoint.base_url, config.endpoint.api_key_env, kind=self._key_kind, field=self._field)
        self.default_sampling = Sampling(temperature=config.temperature if config.temperature is not None else 0.0,
                                         max_tokens=config.max_tokens or Sampling().max_tokens)
        self.lm: EndpointLM | None = None

    def describe(self) -> dict[str, Any]:
        out = {"id": self.id, "kind": self.kind, "base_model": self.config.model, "base_url": self.config.endpoint.base_url}
        if self.config.baseline:
            out["baseline"] = self.config.baseline
        if self.config.description:
            out["description"] = self.config.description
        return out

    def unavailable(self) -> str | None:
        from simhub.models.endpoints import missing_key

        return missing_key(self.config.endpoint.base_url, self.config.endpoint.api_key_env, kind=self._key_kind,
                           field=self._field)

    def config_record(self) -> dict[str, Any]:
        return {**self.describe(), "temperature": self.config.temperature, "max_tokens": self.config.max_tokens,
                "reasoning_effort": self.config.reasoning_effort, "persona": self.config.persona}

    def model(self) -> EndpointLM:
        if self.lm is None:
            from simhub.models.endpoints import endpoint_lm

            self.lm = endpoint_lm(self.config.endpoint, self.config.model, kind=self._key_kind, field=self._field,
                                  default_cache=cache_dir("generations"), reasoning_effort=self.config.reasoning_effort,
                                  name=self.id)
        return self.lm

    def prompt_text(self, target: Target) -> str:
        return Simulator.prompt_text(self, target)  # the messages as sent: an endpoint has no chat template here

    def sampling_for(self, sampling: Sampling | None) -> Sampling:
        return dataclasses.replace(super().sampling_for(sampling), stop=())

    def sends_temperature(self, sampling: Sampling | None) -> bool:
        """Whether the body carries a temperature: always under the caller's sampling; under the
        default only when the profile sets one (otherwise the server's default applies)."""
        return sampling is not None or self.config.temperature is not None

    def payload(self, target: Target, sampling: Sampling | None) -> dict[str, Any]:
        """The chat-completions body sent for ``target`` (what the endpoint's cache keys on)."""
        return self.model().request(self.messages(target), self.sampling_for(sampling),
                                    temperature=self.sends_temperature(sampling))

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling | None, *,
                 progress: bool = False) -> list[GenerationResult]:
        return self.model().generate(prompts, self.sampling_for(sampling), progress=progress,
                                     temperature=self.sends_temperature(sampling))

    async def agenerate(self, prompts: Sequence[Prompt], sampling: Sampling | None) -> list[GenerationResult]:
        return await self.model().agenerate(prompts, self.sampling_for(sampling),
                                            temperature=self.sends_temperature(sampling))
