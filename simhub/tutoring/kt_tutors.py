"""The tutors of the KT-learner bench: they act through the LMS actions of :mod:`simhub.learners.kt.lms`.

* ``scripted:silent`` never acts (every turn records ``stay_silent``): the floor;
* ``scripted:weakest`` reads the mastery and works the weakest KCs: it answers an open help request,
  pushes a worked example on the weakest KC, and assigns practice items on the two weakest;
* any ``tutors:`` entry of the profile with ``kind: openai``: a chat model given the actions as OpenAI
  tools (:class:`ToolTutor`), the way agent frameworks call tools, through simhub's shared endpoint
  client (:func:`simhub.models.endpoints.client_for`): its key rules, retries, on-disk answer cache
  and call counts. Each turn it may call tools (their results go back to it) until it answers without
  a tool call; text it answers with is sent to the learner as a message. A tool call with bad
  arguments gets the error back as the tool's result and is logged; the run goes on.

The two scripted tutors are references for the demo and tests, not tutors to rank.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from simhub.config import Profile
from simhub.errors import ConfigError, UnknownNameError
from simhub.learners.kt.lms import TOOLS, LMSRun, ToolError
from simhub.learners.kt.student import DayFailure
from simhub.prompts.kt_learner import TOOL_TUTOR_SYSTEM

if TYPE_CHECKING:
    from simhub.models.openai import OpenAIClient

SCRIPTED_KT = ("scripted:weakest", "scripted:silent")


class TutorFailure(DayFailure):
    """The tutor could not act (its endpoint failed after its retries): the day is marked failed."""


class LMSTutor(ABC):
    id: str = "tutor"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id}

    def start_day(self, run: LMSRun, day: int) -> None:  # noqa: B027 (optional hook)
        """Called once a day after the pre-session probe (a stateful tutor resets here)."""

    @abstractmethod
    def turn(self, run: LMSRun, day: int, turn: int) -> None:
        """Act on ``run`` for one turn (any number of :meth:`LMSRun.call`\\s)."""


class SilentTutor(LMSTutor):
    id = "scripted:silent"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def turn(self, run: LMSRun, day: int, turn: int) -> None:
        return None


class WeakestTutor(LMSTutor):
    id = "scripted:weakest"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def turn(self, run: LMSRun, day: int, turn: int) -> None:
        mastery: dict[str, float] = run.call("get_mastery")
        weakest = sorted(mastery, key=lambda k: (mastery[k], k))[:2]
        items = run.call("get_unit_content")
        by_kc: dict[str, list[str]] = {}
        for it in items:
            by_kc.setdefault(it["kc"], []).append(it["id"])
        if turn == 1:
            open_requests = run.call("get_messages")["open_help_requests"]
            kc = open_requests[-1]["kc"] if open_requests else weakest[0]
            example = next((i for i in run.bank.by_kc.get(kc, []) if i.explanation), None)
            if example is not None:
                run.call("provide_content", {"kc": kc, "kind": "example",
                                             "text": f"Worked example. {example.question} {example.explanation}"})
            run.call("send_message", {"text": f"Today we work on {kc}. Look at the example, then try the practice."})
        assign = [i for kc in weakest for i in by_kc.get(kc, [])[:2]]
        if assign:
            run.call("assign_items", {"item_ids": assign})


# ---------------------------------------------------------------------------------- tool tutor


class ToolTutor(LMSTutor):
    """A chat model of the profile acting through OpenAI tool calls (see the module docstring).

    ``client`` is the endpoint's :class:`~simhub.models.openai.OpenAIClient`; every step is one
    chat-completions request (the model, the conversation so far, the LMS tools, a seed per day and
    turn), answered from the client's cache when an identical request was answered before.
    """

    def __init__(self, name: str, client: OpenAIClient, *, temperature: float = 0.0, max_tokens: int = 600,
                 max_steps: int = 8):
        self.id, self._client = name, client
        self.model, self.base_url = client.config.model, client.config.base_url
        self.temperature, self.max_tokens, self.max_steps = temperature, max_tokens, max_steps
        self._messages: list[dict[str, Any]] = []

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "openai-tools", "model": self.model, "base_url": self.base_url,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "max_steps": self.max_steps,
                "version": 1}

    def start_day(self, run: LMSRun, day: int) -> None:
        self._messages = [{"role": "system", "content": TOOL_TUTOR_SYSTEM}]

    def turn(self, run: LMSRun, day: int, turn: int) -> None:
        from simhub.models.openai import chat_payload

        self._messages.append({"role": "user", "content": f"Day {day}, turn {turn} of {run.plan.turns}."})
        for _ in range(self.max_steps):
            payload = chat_payload(self.model, self._messages, temperature=self.temperature,
                                   max_tokens=self.max_tokens, seed=day * 100 + turn, tools=TOOLS)
            (outcome,) = self._client.complete([payload])
            if not outcome.ok:  # the endpoint failed after its retries: the day is marked failed
                raise TutorFailure(f"tutor: {outcome.cause}")
            choice = outcome.choices[0]
            entry: dict[str, Any] = {"role": "assistant", "content": choice.text or ""}
            if choice.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": c.arguments}}
                                       for c in choice.tool_calls]
            self._messages.append(entry)
            if not choice.tool_calls:
                if (choice.text or "").strip():
                    run.call("send_message", {"text": choice.text.strip()[:4000]})
                return
            for c in choice.tool_calls:
                self._messages.append({"role": "tool", "tool_call_id": c.id,
                                       "content": json.dumps(self._run_tool(run, c.name, c.arguments))})

    @staticmethod
    def _run_tool(run: LMSRun, name: str, arguments: str | None) -> Any:
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return {"error": f"arguments: not JSON ({exc.msg})"}
        if not isinstance(args, dict):
            return {"error": "arguments: expected a JSON object"}
        try:
            return run.call(name, args)
        except ToolError as exc:  # logged by the run; the tutor gets the error and goes on
            return {"error": str(exc)}


def kt_tutor_names(profile: Profile | None) -> list[str]:
    names = list(SCRIPTED_KT)
    if profile is not None:
        names += [n for n, c in profile.tutors.items() if c.kind == "openai"]
    return names


def build_kt_tutor(name: str, profile: Profile | None, *, no_cache: bool = False) -> LMSTutor:
    """The tutor ``name``: a scripted one, or a profile tutor with ``kind: openai`` on simhub's endpoint
    client (``no_cache``: its answers are neither read from nor written to the on-disk cache). A missing
    key is an error here, before the run starts."""
    if name == WeakestTutor.id:
        return WeakestTutor()
    if name == SilentTutor.id:
        return SilentTutor()
    known = kt_tutor_names(profile)
    if profile is None or name not in profile.tutors:
        raise UnknownNameError("tutor", name, known, field="tutor")
    config = profile.tutors[name]
    if config.kind != "openai":
        raise ConfigError(f"--tutor {name}: the KT-learner bench's tutors act through tool calls, so a profile "
                          f"tutor must be an OpenAI-compatible endpoint (kind: openai), not kind: {config.kind}",
                          field="tutor")
    import msgspec

    from simhub.config import cache_dir
    from simhub.models.endpoints import client_for, missing_key

    field = f"tutors.{name}.endpoint"
    settings = config.endpoint
    if not settings.base_url:
        raise ConfigError(f"{field}.base_url: required for a tool-calling tutor", field=f"{field}.base_url")
    missing = missing_key(settings.base_url, settings.api_key_env, kind="tutor", field=field)
    if missing is not None:
        raise ConfigError(f"tutors.{name}: {missing}", field=f"tutors.{name}")
    if no_cache:
        settings = msgspec.structs.replace(settings, cache=False)
    client = client_for(settings, config.model, kind="tutor", default_cache=cache_dir("tutor"), field=field)
    return ToolTutor(name, client)
