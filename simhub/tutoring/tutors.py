"""How a bench names and builds its tutors: the family's scripted ones, or any tutor of the profile.

Every tutor is a :class:`simhub.simulation.tutor.Tutor` (one base, two capabilities: ``text`` tutors
write turns, ``tools`` tutors act on an environment). A family says which capability its bench needs
(:attr:`~simhub.tutoring.family.LearnerFamily` ``capability``) and which scripted tutors it ships;
:func:`build_bench_tutor` builds a name:

* a scripted tutor of the family (``scripted:stepwise``, ``scripted:weakest``...);
* a ``text`` bench: any ``tutors:`` entry of the profile, as a :class:`ProfileTutor` (it sees the
  dialogue only);
* a ``tools`` bench: a ``tutors:`` entry of another kind (a local model) as a :class:`MessageTutor`
  (it can only talk); one with ``kind: openai`` as a :class:`ToolTutor`: the chat
  model is given the environment's tools as OpenAI tools and acts through them, as an
  :class:`~simhub.models.endpoint_lm.EndpointLM` over simhub's shared endpoint client
  (:func:`simhub.models.endpoints.endpoint_lm`): its key rules, retries, on-disk answer cache and
  call counts.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simhub.config import Profile
from simhub.errors import ConfigError, UnknownNameError
from simhub.models import LoadOptions, Sampling
from simhub.simulation.tutor import Tutor, TutorRequest, TutorTurn, build_tutor, tutor_names

if TYPE_CHECKING:
    from simhub.models.endpoint_lm import EndpointLM

__all__ = ["BenchRequest", "MessageTutor", "ProfileTutor", "ToolTutor", "bench_tutor_names", "build_bench_tutor"]


@dataclasses.dataclass(frozen=True)
class BenchRequest(TutorRequest):
    """The conversation so far, with the item's IU graph and the learner's state when the bench has them
    (read by scripted and designed tutors; a profile tutor sees the dialogue only)."""

    graph: Any = None
    state: Any = None


class ProfileTutor(Tutor):
    """A ``text`` tutor of the profile's ``tutors:`` section (a local model or an endpoint); it sees the
    dialogue only, never the learner's state."""

    def __init__(self, tutor: Tutor):
        self.tutor, self.id = tutor, tutor.id

    def describe(self) -> dict[str, Any]:
        return {**self.tutor.describe(), "fingerprint": self.tutor.fingerprint()}

    def respond(self, requests: Sequence[TutorRequest], sampling: Sampling) -> list[TutorTurn]:
        try:
            return self.tutor.respond([TutorRequest(r.dialogue) for r in requests], sampling)
        except Exception as exc:  # a tutor that raises fails these conversations, with the cause; the run goes on
            return [TutorTurn(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in requests]


class ToolTutor(Tutor):
    """A chat model of the profile acting through OpenAI tool calls (see the module docstring).

    The environment gives the tools (``env.tools``, OpenAI function specs), the system prompt
    (``env.tutor_prompt``), the number of turns of a day (``env.plan.turns``) and runs a call
    (``env.call(name, arguments)``, raising ``env.tool_error`` for a bad one) and what to raise when the
    tutor cannot act (``env.failure``: the endpoint failed after its retries; the day is marked failed). Each turn the model may
    call tools (their results go back to it) until it answers without a tool call; text it answers
    with is sent to the learner (``send_message``). A tool call with bad arguments gets the error back
    as the tool's result and is logged by the environment; the run goes on. Every step is one
    chat-completions request (a seed per day and turn), answered from the client's cache when an
    identical request was answered before. ``lm`` is the endpoint as an
    :class:`~simhub.models.endpoint_lm.EndpointLM` (requests with ``tools``; the calls come back as
    ``Generation.tool_calls``).
    """

    capabilities = frozenset({"tools"})

    def __init__(self, name: str, lm: EndpointLM, *, temperature: float = 0.0, max_tokens: int = 600,
                 max_steps: int = 8):
        self.id, self._lm = name, lm
        self.model, self.base_url = lm.model, lm.client.config.base_url
        self.temperature, self.max_tokens, self.max_steps = temperature, max_tokens, max_steps
        self._messages: list[dict[str, Any]] = []

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "openai-tools", "model": self.model, "base_url": self.base_url,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "max_steps": self.max_steps,
                "version": 1}

    def start_day(self, env: Any, day: int) -> None:
        self._messages = [{"role": "system", "content": env.tutor_prompt}]

    def act(self, env: Any, day: int, turn: int) -> None:
        self._messages.append({"role": "user", "content": f"Day {day}, turn {turn} of {env.plan.turns}."})
        sampling = Sampling(temperature=self.temperature, max_tokens=self.max_tokens, seed=day * 100 + turn)
        for _ in range(self.max_steps):
            (result,) = self._lm.send([self._lm.request(self._messages, sampling, tools=env.tools)])
            if result.error is not None:  # the endpoint failed after its retries: the day is marked failed
                raise env.failure(f"tutor: {result.error}")
            choice = result.generations[0]
            entry: dict[str, Any] = {"role": "assistant", "content": choice.text or ""}
            if choice.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": c.arguments}}
                                       for c in choice.tool_calls]
            self._messages.append(entry)
            if not choice.tool_calls:
                if (choice.text or "").strip():
                    env.call("send_message", {"text": choice.text.strip()[:4000]})
                return
            for c in choice.tool_calls:
                self._messages.append({"role": "tool", "tool_call_id": c.id,
                                       "content": json.dumps(self._run_tool(env, c.name, c.arguments))})

    @staticmethod
    def _run_tool(env: Any, name: str, arguments: str | None) -> Any:
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return {"error": f"arguments: not JSON ({exc.msg})"}
        if not isinstance(args, dict):
            return {"error": "arguments: expected a JSON object"}
        try:
            return env.call(name, args)
        except env.tool_error as exc:  # logged by the environment; the tutor gets the error and goes on
            return {"error": str(exc)}


class MessageTutor(Tutor):
    """A ``text`` tutor of the profile in a ``tools`` bench (the KT learner's LMS), where it can only talk.

    Each turn it is given the day's chat as a dialogue (its own messages as the tutor's turns, the
    learner's as the student's) over a question naming the unit's KCs and any open help request, and
    its turn is sent to the learner (``send_message``, which addresses a KC the text names); an empty
    turn stays silent. It pushes no content and assigns no practice: a chat model without tools is
    ranked for what its words alone do. A failed call fails the day (``env.failure``), as a tool
    tutor's does."""

    capabilities = frozenset({"tools"})

    def __init__(self, tutor: Tutor, *, max_tokens: int = 200):
        self.tutor, self.id, self.max_tokens = tutor, tutor.id, max_tokens

    def describe(self) -> dict[str, Any]:
        return {**self.tutor.describe(), "fingerprint": self.tutor.fingerprint(), "acts_by": "messages",
                "max_tokens": self.max_tokens}

    @staticmethod
    def dialogue(env: Any, day: int) -> Any:
        from simhub.schema import Dialogue, Question, Turn

        chat = env.call("get_messages")
        asks = [f"{h['kc']} ({h['text']})" for h in chat["open_help_requests"]]
        text = (f"Day {day}. The unit's skills: {', '.join(env.unit)}."
                + (f" The learner asked for help with: {'; '.join(asks)}." if asks else ""))
        turns = [Turn(role="tutor" if m["role"] == "tutor" else "student", content=m["text"]) for m in chat["messages"]
                 if m["text"].strip()]
        return Dialogue(id=f"{env.plan.run}-day{day}", question=Question(text=text), turns=turns)

    def act(self, env: Any, day: int, turn: int) -> None:
        sampling = Sampling(temperature=0.0, max_tokens=self.max_tokens, seed=day * 100 + turn)
        (answer,) = self.tutor.respond([TutorRequest(self.dialogue(env, day))], sampling)
        if answer.error is not None:
            raise env.failure(f"tutor: {answer.error}")
        if answer.text.strip():
            env.call("send_message", {"text": answer.text.strip()[:4000]})


def _scripted(target: str | type[Tutor]) -> type[Tutor]:
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def bench_tutor_names(scripted: Mapping[str, Any], capability: str, profile: Profile | None) -> list[str]:
    """The tutor names a bench takes: its scripted ones, then the profile's tutors that can serve it."""
    names = list(scripted)
    if profile is not None:
        names += tutor_names(profile)
    return names


def build_bench_tutor(name: str, profile: Profile | None, *, scripted: Mapping[str, Any], capability: str,
                      options: LoadOptions | None = None, no_cache: bool = False) -> Tutor:
    """The tutor ``name`` for a bench that needs ``capability`` (see the module docstring). ``no_cache``:
    a tool tutor's answers are neither read from nor written to the on-disk cache. A missing key is an
    error here, before the run starts."""
    if name in scripted:
        return _scripted(scripted[name])()
    known = bench_tutor_names(scripted, capability, profile)
    if profile is None or name not in profile.tutors:
        raise UnknownNameError("tutor", name, known, field="tutor")
    if capability == "text":
        return ProfileTutor(build_tutor(name, profile, options or LoadOptions(), mode="free"))
    config = profile.tutors[name]
    if config.kind != "openai":  # a local chat model: it talks to the learner and does nothing else
        return MessageTutor(build_tutor(name, profile, options or LoadOptions(), mode="free"))
    import msgspec

    from simhub.config import cache_dir
    from simhub.models.endpoints import endpoint_lm, missing_key

    field = f"tutors.{name}.endpoint"
    settings = config.endpoint
    if not settings.base_url:
        raise ConfigError(f"{field}.base_url: required for a tool-calling tutor", field=f"{field}.base_url")
    missing = missing_key(settings.base_url, settings.api_key_env, kind="tutor", field=field)
    if missing is not None:
        raise ConfigError(f"tutors.{name}: {missing}", field=f"tutors.{name}")
    if no_cache:
        settings = msgspec.structs.replace(settings, cache=False)
    lm = endpoint_lm(settings, config.model, kind="tutor", default_cache=cache_dir("tutor"), field=field, batch=False)
    return ToolTutor(name, lm)
