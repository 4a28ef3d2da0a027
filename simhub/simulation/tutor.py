"""Tutors for dialogue rollouts: the other side of a simulated student's whole dialogue.

Both tutors that generate are :class:`LMTutor` over a :class:`~simhub.models.LanguageModel`:

* :class:`ModelTutor` — a local tutor model (the paper's tutor LoRA, the demo's ``tiny-tutor``),
  prompted in the tutor chat format it is trained on (the mirror image of the student's).
* :class:`EndpointTutor` — any OpenAI-compatible chat model, instructed to tutor (the prompts are in
  :mod:`simhub.prompts.tutor`); in ``mirror`` mode it is shown the real transcript and asked to
  reproduce the real tutor's next move, adapting only when the student has deviated from the real student.
* :class:`MirrorTutor` — a local model cannot take that instruction, so in ``mirror`` mode a local
  tutor says exactly what the real tutor said next.

A tutor answers a batch of histories at once and never raises for one of them: a failed turn is a
:class:`TutorTurn` with ``error`` set, and the rollout marks that dialogue failed with the cause.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from simhub.config import Profile, TutorConfig, cache_dir
from simhub.errors import UnknownNameError
from simhub.models import GenerationResult, LanguageModel, LoadOptions, Sampling, load_lm
from simhub.prompts import END_OF_DIALOGUE, instructed_tutor_messages, mirror_tutor_messages, tutor_messages
from simhub.schema import Dialogue
from simhub.simulation.base import candidate_from_text, outputs_fingerprint


@dataclasses.dataclass
class TutorTurn:
    text: str = ""
    end_of_dialogue: bool = False
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class TutorRequest:
    """The dialogue so far (ending with a student turn, or empty) and, in mirror mode, the real dialogue.
    A bench adds what its scripted tutors may read (:class:`simhub.tutoring.tutors.BenchRequest`)."""

    dialogue: Dialogue
    real: Dialogue | None = None


def _finish(text: str, stop_string: str | None = None) -> TutorTurn:
    """The turn cut at the end-of-dialogue marker, as a student's candidate is."""
    c = candidate_from_text(text, "stop", stop_string=stop_string)
    return TutorTurn(text=c.text, end_of_dialogue=c.end_of_dialogue)


class Tutor(ABC):  # noqa: B024 (a tutor implements one capability or both; neither is required)
    """Every tutor simhub puts in front of a student or a learner: one base, two capabilities.

    * ``text``: :meth:`respond` gives the next tutor turn of each dialogue (rollouts, the KnowSim
      bench);
    * ``tools``: :meth:`act` acts on an environment through its tools for one turn, :meth:`start_day`
      once a day before (the KT learner's LMS).

    :attr:`capabilities` says which a tutor has; a bench refuses a tutor without the one it needs.
    Scripted tutors are ordinary tutors of this base.
    """

    id: str = "tutor"
    #: What the tutor can do: ``text`` (:meth:`respond`) and/or ``tools`` (:meth:`act`).
    capabilities: frozenset[str] = frozenset({"text"})
    #: Whether its turns are worth caching (the mirror tutor reads them from the data).
    cacheable: bool = True
    #: Whether its turns depend on the learner's hidden state (a scripted oracle; part of its cache key).
    reads_state: bool = False

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": type(self).__name__}

    def fingerprint(self) -> str:
        """The part of a tutor turn's cache key that is the tutor (as for simulators)."""
        return outputs_fingerprint(self.describe())

    def respond(self, requests: Sequence[TutorRequest], sampling: Sampling) -> list[TutorTurn]:
        """The next tutor turn of each request (the ``text`` capability)."""
        raise NotImplementedError(f"tutor {self.id} does not write turns (capabilities: {sorted(self.capabilities)})")

    def start_day(self, env: Any, day: int) -> None:  # noqa: B027 (an optional hook)
        """Called once a day before the day's turns (``tools``; a stateful tutor resets here)."""

    def act(self, env: Any, day: int, turn: int) -> None:
        """Act on ``env`` for one turn through its tools (the ``tools`` capability)."""
        raise NotImplementedError(f"tutor {self.id} does not act through tools (capabilities: "
                                  f"{sorted(self.capabilities)})")


@dataclasses.dataclass(frozen=True)
class TutorFailure:
    """A whole batch that failed (a broken local model), with the cause."""

    cause: str


class LMTutor(Tutor):
    """A tutor over any :class:`~simhub.models.LanguageModel`: the batch's prompts in one ``generate``,
    each turn cut at the end-of-dialogue marker; a failed request (``error``) fails only its dialogue.

    Subclasses say which model (:meth:`model`), how a request is prompted (:meth:`prompt`) and which
    sampling the model gets (:meth:`sampling_for`)."""

    @abstractmethod
    def model(self) -> LanguageModel:
        """The model, loaded on first use."""

    @abstractmethod
    def prompt(self, request: TutorRequest) -> list[dict[str, str]]:
        """The chat messages for one request."""

    def sampling_for(self, sampling: Sampling) -> Sampling:
        return sampling

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another executor's worker (:mod:`simhub.executors`): without a loaded model."""
        state = self.__dict__.copy()
        if "lm" in state:
            state["lm"] = None
        return state

    def generate(self, prompts: list[list[dict[str, str]]], sampling: Sampling) -> list[GenerationResult] | TutorFailure:
        """The model's results (a failed request is one with ``error``), or a failure of the whole batch."""
        return self.model().generate(prompts, sampling)  # type: ignore[arg-type]

    def respond(self, requests: Sequence[TutorRequest], sampling: Sampling) -> list[TutorTurn]:
        out = self.generate([self.prompt(r) for r in requests], self.sampling_for(sampling))
        if isinstance(out, TutorFailure):
            return [TutorTurn(error=out.cause) for _ in requests]
        return [TutorTurn(error=r.error) if r.error is not None
                else _finish(r.generations[0].text, r.generations[0].stop_string) for r in out]


class ModelTutor(LMTutor):
    def __init__(self, tid: str, config: TutorConfig, load: LoadOptions):
        self.id, self.config = tid, config
        self.options = dataclasses.replace(load, backend=config.backend or load.backend)
        self.lm: LanguageModel | None = None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "model", "base_model": self.config.model, "adapter": self.config.adapter}

    def model(self) -> LanguageModel:
        if self.lm is None:
            self.lm = load_lm(self.config.ref(), self.options)
        return self.lm

    def prompt(self, request: TutorRequest) -> list[dict[str, str]]:
        return tutor_messages(request.dialogue, upto=len(request.dialogue.turns))

    def sampling_for(self, sampling: Sampling) -> Sampling:
        return dataclasses.replace(sampling, stop=(END_OF_DIALOGUE,))

    def generate(self, prompts: list[list[dict[str, str]]], sampling: Sampling) -> list[GenerationResult] | TutorFailure:
        lm = self.model()
        try:
            return lm.generate(prompts, sampling)
        except Exception as exc:  # a broken model fails this batch's dialogues, with the cause
            return TutorFailure(f"{type(exc).__name__}: {str(exc)[:200]}")


class MirrorTutor(Tutor):
    """Says what the real tutor said at the same point of the real dialogue."""

    cacheable = False

    def __init__(self, tid: str):
        self.id = tid

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "mirror", "description": "the real tutor's next turn, verbatim"}

    def respond(self, requests: Sequence[TutorRequest], sampling: Sampling) -> list[TutorTurn]:
        out = []
        for r in requests:
            at = len(r.dialogue.turns)
            real = r.real.turns if r.real is not None else []
            if at < len(real) and real[at].role == "tutor":
                out.append(TutorTurn(text=real[at].content, end_of_dialogue=at == len(real) - 1))
            else:
                out.append(TutorTurn(text="", end_of_dialogue=True))
        return out


def endpoint_messages(request: TutorRequest, mirror: bool) -> list[dict[str, str]]:
    """The prompt of one request (:mod:`simhub.prompts.tutor`): the mirror prompt when ``mirror`` and
    the real dialogue is known, else the instructed tutor's."""
    if mirror and request.real is not None:
        return mirror_tutor_messages(request.dialogue, request.real)
    return instructed_tutor_messages(request.dialogue)


class EndpointTutor(LMTutor):
    """Any OpenAI-compatible chat model (an :class:`~simhub.models.endpoint_lm.EndpointLM`), instructed
    to tutor (:func:`endpoint_messages`); the profile's ``max_tokens`` replaces the sampling's."""

    def __init__(self, tid: str, config: TutorConfig, *, mirror: bool = False):
        from simhub.models.endpoints import key_names

        self.id, self.config, self.mirror = tid, config, mirror
        self._field = f"tutors.{tid}.endpoint"
        if config.endpoint.base_url:  # a bad key setting is refused before any dialogue is rolled out
            key_names(config.endpoint.base_url, config.endpoint.api_key_env, kind="tutor", field=self._field)
        self.lm: LanguageModel | None = None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "openai", "base_model": self.config.model, "base_url": self.config.endpoint.base_url,
                "mirror": self.mirror}

    def model(self) -> LanguageModel:
        if self.lm is None:
            from simhub.models.endpoints import endpoint_lm

            self.lm = endpoint_lm(self.config.endpoint, self.config.model, kind="tutor", field=self._field,
                                  default_cache=cache_dir("tutor"), max_tokens=self.config.max_tokens, batch=False,
                                  name=f"tutor {self.id}")
        return self.lm

    def prompt(self, request: TutorRequest) -> list[dict[str, str]]:
        return endpoint_messages(request, self.mirror)

    def sampling_for(self, sampling: Sampling) -> Sampling:
        # One turn per request, as text: the body asks for nothing else (no n, stop or log-probabilities).
        return dataclasses.replace(sampling, n=1, stop=(), logprobs=None)


def tutor_names(profile: Profile) -> list[str]:
    return list(profile.tutors)


def build_tutor(name: str, profile: Profile, options: LoadOptions, *, mode: str = "free") -> Tutor:
    """The tutor called ``name`` of ``profile``'s ``tutors:`` section (an UnknownNameError lists them)."""
    config = profile.tutors.get(name)
    if config is None:
        raise UnknownNameError("tutor", name, tutor_names(profile), field="tutor")
    if config.kind == "openai":
        return EndpointTutor(name, config, mirror=mode == "mirror")
    if mode == "mirror":
        return MirrorTutor(name)
    return ModelTutor(name, config, options)
