"""The simulated-student interface: every kind of simulator answers the same two calls.

A *target* is a real dialogue and the index of the student turn to simulate; the history is the
real turns before it (teacher forcing, docs/protocol.md §1). :meth:`Simulator.simulate` answers a batch of
targets at once (the CLI's batch runs); :meth:`Simulator.asimulate` does the same without blocking
an event loop (the service). A simulator that fails on a target (an endpoint down after its
retries) returns a result with ``error`` set instead of raising, so a long run completes and
counts its failures.

Both simulators that generate are :class:`LMSimulator` over a :class:`~simhub.models.LanguageModel`:
our own models (:class:`~simhub.simulation.model.ModelSimulator`) and OpenAI-compatible endpoints
(:class:`~simhub.simulation.endpoint.EndpointSimulator`, over an
:class:`~simhub.models.endpoint_lm.EndpointLM`) prompt, generate and read candidates the same way and
differ only in which model they load, the sampling it gets and what identifies them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from simhub.config import SimulatorConfig
from simhub.models import GenerationResult, LanguageModel, Prompt, Sampling, TokenLogprob
from simhub.prompts import END_OF_DIALOGUE, baseline_messages, student_messages
from simhub.schema import Dialogue


@dataclass(frozen=True)
class Target:
    dialogue: Dialogue
    turn_index: int
    #: A prompt already in the simulator's own chat format (the service received simhub's student
    #: prompt on ``/v1``): a local model runs it as it is instead of rendering ``dialogue`` again.
    messages: tuple[dict[str, str], ...] | None = None

    @property
    def history(self):
        return self.dialogue.turns[: self.turn_index]


@dataclass
class Candidate:
    text: str
    finish_reason: str  # "stop" (end of turn, or the end-of-dialogue marker) or "length"
    end_of_dialogue: bool = False
    tokens: int = 0
    logprobs: list[TokenLogprob] | None = None


@dataclass
class SimulationResult:
    candidates: list[Candidate] = field(default_factory=list)
    prompt_tokens: int = 0
    #: Why there are no candidates (a failed request), or None.
    error: str | None = None

    @property
    def end_of_dialogue(self) -> bool:
        return bool(self.candidates) and self.candidates[0].end_of_dialogue


def candidate_from_text(text: str, finish_reason: str, *, tokens: int = 0, stop_string: str | None = None,
                        logprobs: list[TokenLogprob] | None = None) -> Candidate:
    """A candidate from generated text: cut at the end-of-dialogue marker, which also counts as a stop.
    The text is not stripped (the reference scores candidates as generated)."""
    eod = stop_string == END_OF_DIALOGUE
    cut = text.find(END_OF_DIALOGUE)
    if cut >= 0:
        text, eod = text[:cut], True
    finish = "stop" if eod or finish_reason != "length" else "length"
    return Candidate(text=text, finish_reason=finish, end_of_dialogue=eod, tokens=tokens, logprobs=logprobs)


def outputs_fingerprint(record: dict[str, Any]) -> str:
    """What a generator's cached outputs depend on: its configuration ``record``, the files of its
    local ``base_model`` and ``adapter`` (a retrained adapter gets new keys) and simhub's version."""
    from simhub import __version__
    from simhub.cache import fingerprint, folder_fingerprint

    return fingerprint([record, folder_fingerprint(record.get("base_model")), folder_fingerprint(record.get("adapter")),
                        __version__])


class Simulator(ABC):
    """A simulated student; see the module docstring."""

    #: The name users select it by (``--simulator``, the ``model`` field of ``/simulate``).
    id: str = "simulator"
    kind: str = "simulator"
    #: Decoding used when the caller gives none (the paper's: greedy, 400 new tokens).
    default_sampling: Sampling = Sampling()
    #: Whether it can answer arbitrary histories (HTTP); reference simulators need the real turn.
    serves_http: bool = True
    #: Whether its answers are worth caching (a reference simulator answers instantly from the data).
    cacheable: bool = True

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind}

    def load(self) -> None:
        """Load models or open clients now (the service does this before it is ready)."""
        return None

    def unavailable(self) -> str | None:
        """Why it cannot answer in this environment (an endpoint whose API key is not set, naming
        the variable to set), or None. The service lists such a simulator as unavailable and answers
        its requests 503 with the reason."""
        return None

    @abstractmethod
    def messages(self, target: Target) -> list[dict[str, str]]:
        """The chat messages the simulator's model receives for ``target``."""

    def prompt_text(self, target: Target) -> str:
        """What the model receives, after its chat template where it has one (``simhub prompt show``)."""
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages(target))

    @abstractmethod
    def simulate(self, targets: Sequence[Target], sampling: Sampling | None = None, *,
                 progress: bool = False) -> list[SimulationResult]:
        """``sampling.n`` candidates for each target."""

    async def asimulate(self, targets: Sequence[Target], sampling: Sampling | None = None) -> list[SimulationResult]:
        import asyncio  # here: the command line never needs it, and it costs every command its import

        return await asyncio.to_thread(self.simulate, targets, sampling)

    def config_record(self) -> dict[str, Any]:
        """What identifies the simulator's outputs (cache keys and run provenance)."""
        return self.describe()

    def fingerprint(self) -> str:
        """The part of a generation's cache key that is the simulator (see :func:`outputs_fingerprint`)."""
        return outputs_fingerprint(self.config_record())

    def close(self) -> None:
        """Release what :meth:`load` took."""
        return None


class ExampleSource(Protocol):
    """Where the ICL baseline's example comes from (:class:`~simhub.simulation.endpoint.IclRetriever`)."""

    def example(self, dialogue: Dialogue) -> Dialogue | None: ...


class LMSimulator(Simulator):
    """A simulated student over any :class:`~simhub.models.LanguageModel`.

    The targets' prompts go to the model in one ``generate`` (``agenerate`` in the service) and every
    generation becomes a candidate cut at the end-of-dialogue marker (:func:`candidate_from_text`); a
    failed request (a result with ``error``) fails only its target. The prompt is simhub's student
    chat format, or with ``config.baseline`` that baseline's prompt (the ICL baseline's example from
    ``retriever``).

    Subclasses say which model (:meth:`model`, built on first use) and which sampling it gets
    (:meth:`sampling_for`); an endpoint also chooses how a request is sent (:meth:`generate`).
    """

    config: SimulatorConfig
    retriever: ExampleSource | None = None

    @abstractmethod
    def model(self) -> LanguageModel:
        """The model, loaded on first use."""

    def load(self) -> LanguageModel:
        return self.model()

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another executor's worker (:mod:`simhub.executors`): without a loaded model,
        which the worker loads for itself on first use."""
        state = self.__dict__.copy()
        if "lm" in state:
            state["lm"] = None
        return state

    def messages(self, target: Target) -> list[dict[str, str]]:
        if self.config.baseline:  # one of the paper's prompted baselines
            example = self.retriever.example(target.dialogue) if self.config.baseline == "icl" and self.retriever else None
            return baseline_messages(self.config.baseline, target.dialogue, target.turn_index, example)
        return student_messages(target.dialogue, upto=target.turn_index, persona=self.config.persona)

    def sampling_for(self, sampling: Sampling | None) -> Sampling:
        """What the model gets for the caller's ``sampling`` (None: :attr:`default_sampling`)."""
        return sampling or self.default_sampling

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling | None, *,
                 progress: bool = False) -> list[GenerationResult]:
        """One result per prompt, under the caller's ``sampling`` (None: the simulator's default)."""
        return self.model().generate(prompts, self.sampling_for(sampling), progress=progress)

    async def agenerate(self, prompts: Sequence[Prompt], sampling: Sampling | None) -> list[GenerationResult]:
        return await self.model().agenerate(prompts, self.sampling_for(sampling))

    @staticmethod
    def results(generated: Sequence[GenerationResult]) -> list[SimulationResult]:
        """The model's results as simulation results: each generation a candidate; a failed request
        a result with no candidates and its cause."""
        return [SimulationResult([candidate_from_text(g.text, g.finish_reason, tokens=g.tokens, stop_string=g.stop_string,
                                                      logprobs=g.logprobs) for g in r.generations],
                                 prompt_tokens=r.prompt_tokens, error=r.error) for r in generated]

    def simulate(self, targets: Sequence[Target], sampling: Sampling | None = None, *,
                 progress: bool = False) -> list[SimulationResult]:
        self.load()
        return self.results(self.generate([self.messages(t) for t in targets], sampling, progress=progress))

    async def asimulate(self, targets: Sequence[Target], sampling: Sampling | None = None) -> list[SimulationResult]:
        self.load()
        return self.results(await self.agenerate([self.messages(t) for t in targets], sampling))
