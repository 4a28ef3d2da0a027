"""The LMS environment a tutor acts in, over one KT-grounded learner's run (EduClaw-Bench's tutor API).

One :class:`LMSRun` is one learner followed over a scenario's days. A day is

1. :meth:`LMSRun.start_day`: the pre-session probe (graded, each answer updating the KT belief), then
   the learner may ask for help (its personality's trigger and rate);
2. the tutor's session: ``turns`` turns, each :meth:`begin_turn`, any number of :meth:`call`\\s (the
   actions below), :meth:`end_turn`. After each turn the learner attempts the practice items
   assigned so far (each attempt graded and fed to the belief) and may reply to the tutor's message;
3. :meth:`LMSRun.end_day`: the post-session probe, on the same items as the pre-session one, so the
   day's gain is not item difficulty.

The tutor reaches the learner only as EduClaw-Bench allows: its messages and content change what the
role-player is told that day (and, for the stand-in, its P(correct) on the KCs addressed), and
assigned items produce more graded answers. The belief changes only through graded answers.

The actions (:data:`QUERIES` and :data:`ACTIONS`) are the same for every face: the OpenAI tool
schemas of :data:`TOOLS` and ``/lms/{run}/...`` of ``simhub serve`` both end in :meth:`LMSRun.call`.
Every call is validated and logged; a bad one is a :class:`ToolError` naming the argument (logged
too, and the run goes on).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from simhub.cache import fingerprint
from simhub.errors import DataError, SimhubError, did_you_mean
from simhub.learners.kt.base import KTModel
from simhub.learners.kt.items import ItemBank, KTItem, grade
from simhub.learners.kt.student import (
    DayContext,
    DayFailure,
    ItemAnswer,
    LearnerSettings,
    PersonaSeed,
    RolePlayer,
    named_kcs,
)
from simhub.prompts.kt_learner import TOOL_TUTOR_SYSTEM

__all__ = [
    "ACTIONS",
    "ACTION_KINDS",
    "QUERIES",
    "TOOLS",
    "Action",
    "DayRecord",
    "HelpRecord",
    "LMSRun",
    "Message",
    "ProbeAnswer",
    "RunPlan",
    "Tick",
    "ToolError",
]

#: The read-only actions.
QUERIES = ("get_profile", "get_mastery", "get_activity", "get_schedule", "get_unit_content", "get_messages")
#: The actions that count (EduClaw-Bench's five kinds; ``stay_silent`` is also what a turn with
#: no message and no write records).
ACTION_KINDS = ("send_message", "stay_silent", "assign_items", "adjust_level", "provide_content")
ACTIONS = (*QUERIES, *ACTION_KINDS)
#: Queries whose answer needs no open session day: they answer before the first day and between days
#: (``day``/``today`` null there), unlogged (:meth:`LMSRun.query`).
STATIC_QUERIES = ("get_profile", "get_schedule", "get_unit_content")
CONTENT_KINDS = ("example", "note", "media")
MAX_TEXT = 4000
MAX_ASSIGN = 10


class ToolError(DataError):
    """A tutor action with bad arguments: ``field`` names the argument (HTTP 4xx, or a tool error back
    to a tool-calling tutor)."""


# ------------------------------------------------------------------------------ trace records


class ProbeAnswer(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    item: str
    kc: str
    answer: str | None
    correct: bool
    #: The belief's P(correct) just before the answer (what calibration is measured against).
    predicted: float
    #: The stand-in's P(correct) after ability and context (None for an LLM role-player).
    p: float | None = None
    flag: str | None = None


class Action(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    turn: int
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None


class Message(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    turn: int
    role: Literal["tutor", "learner"]
    text: str
    flag: str | None = None


class HelpRecord(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A help request (on ``kc``, at ``turn`` 0 of ``day``: after the pre-session probe) and when a
    tutor message first came after it (None: never)."""

    day: int
    kc: str
    text: str
    answered_day: int | None = None
    answered_turn: int | None = None


class DayRecord(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    day: int
    pre: list[ProbeAnswer] = msgspec.field(default_factory=list)
    post: list[ProbeAnswer] = msgspec.field(default_factory=list)
    practice: list[ProbeAnswer] = msgspec.field(default_factory=list)
    skipped: int = 0
    actions: list[Action] = msgspec.field(default_factory=list)
    messages: list[Message] = msgspec.field(default_factory=list)
    #: The unit KCs' mastery at the end of the day.
    mastery: dict[str, float] = msgspec.field(default_factory=dict)
    failed: str | None = None

    @property
    def pre_accuracy(self) -> float | None:
        return sum(a.correct for a in self.pre) / len(self.pre) if self.pre else None

    @property
    def post_accuracy(self) -> float | None:
        return sum(a.correct for a in self.post) / len(self.post) if self.post else None

    def observations(self) -> list[tuple[str, str, bool]]:
        """The day's graded answers in the order they reached the belief."""
        return [(a.item, a.kc, a.correct) for a in (*self.pre, *self.practice, *self.post)] \
            if self.failed is None else []


# ------------------------------------------------------------------------------------- tools


def _tool(name: str, description: str, properties: Mapping[str, Any] | None = None,
          required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": dict(properties or {}), "required": list(required),
                       "additionalProperties": False}}}


_KCS = {"type": "array", "items": {"type": "string"}, "description": "KC names, as get_mastery lists them"}

#: The actions as OpenAI tool definitions (``tools=`` of a chat completion request).
TOOLS: list[dict[str, Any]] = [
    _tool("get_profile", "The learner's profile: grade band, the unit's KCs, the day and the schedule."),
    _tool("get_mastery", "The KT model's mastery (0-1) of each KC of the unit, or of the KCs named.", {"kcs": _KCS}),
    _tool("get_activity", "The learner's recent events: probe results, practice answers, help requests.",
          {"limit": {"type": "integer", "minimum": 1, "maximum": 200}}),
    _tool("get_schedule", "The study schedule: session days, turns per session, probe size, today."),
    _tool("get_unit_content", "The unit's items (id, KC, question, options; no keys), all or one KC's.",
          {"kc": {"type": "string"}}),
    _tool("get_messages", "Today's chat with the learner and its open help requests."),
    _tool("assign_items", f"Queue practice items (up to {MAX_ASSIGN}) for the learner to attempt after this turn.",
          {"item_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_ASSIGN}},
          ["item_ids"]),
    _tool("adjust_level", "Raise (+1) or lower (-1) the difficulty level of the KCs named.",
          {"kcs": _KCS, "delta": {"type": "integer", "enum": [-1, 1]}}, ["kcs", "delta"]),
    _tool("provide_content", "Push an example, a note or media about one KC to the learner.",
          {"kc": {"type": "string"}, "kind": {"type": "string", "enum": list(CONTENT_KINDS)},
           "text": {"type": "string", "maxLength": MAX_TEXT}}, ["kc", "kind", "text"]),
    _tool("send_message", "Send the learner a chat message (answers any open help request).",
          {"text": {"type": "string", "maxLength": MAX_TEXT}}, ["text"]),
    _tool("stay_silent", "Do nothing this turn."),
]
_ARGS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


class RunPlan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a run is: its id, the scenario's parts, the ability and the seeds."""

    run: str
    scenario: str
    personality: str
    personality_text: str
    help_trigger: str
    help_rate: float
    engagement: float
    replies: float
    adversarial: bool
    session_days: tuple[int, ...]
    days: int
    turns: int
    probe_items: int
    ability: str
    persona: str
    seed: int


# ---------------------------------------------------------------------------------- the run


@dataclasses.dataclass(frozen=True)
class Tick:
    """What one :meth:`LMSRun.advance` did. ``day_started``: the day began (its turn 1 is open);
    ``turn`` is the turn now open (0: the day ended); ``record`` is the day's record; ``practice``,
    ``skipped`` and ``messages`` (the learner's) are what the learner did since the previous tick."""

    day_started: bool
    day: int
    turn: int
    record: DayRecord
    practice: list[ProbeAnswer]
    skipped: int
    messages: list[Message]
    day_ended: bool
    finished: bool


class LMSRun:
    """One learner's run through its days; see the module docstring.

    As a tool tutor's environment it gives :attr:`tools` (the actions as OpenAI function specs),
    :attr:`tutor_prompt` (the system prompt of a tool-calling tutor), :meth:`call`,
    :attr:`tool_error` (what a bad call raises) and :attr:`failure` (what a tutor that cannot act
    raises: the day is marked failed with its message)."""

    tools = TOOLS
    tool_error = ToolError
    failure = DayFailure
    tutor_prompt = TOOL_TUTOR_SYSTEM

    def __init__(self, plan: RunPlan, *, model: KTModel, bank: ItemBank, persona: PersonaSeed,
                 role_player: RolePlayer, settings: LearnerSettings | None = None):
        self.plan, self.model, self.role_player = plan, model, role_player
        self.settings = settings or LearnerSettings()
        self.bank = bank.restrict(list(model.kcs))
        self.persona = persona
        self.initial = model.replay(persona.warmup)
        self.belief = self.initial
        start = model.masteries(self.initial)
        self._named = named_kcs(model, self.initial, self.settings)
        self.unit: list[str] = sorted(self.bank.kcs, key=lambda k: (start[k], k))[:self.settings.unit_size]
        self.days: list[DayRecord] = []
        self.help: list[HelpRecord] = []
        self.levels: dict[str, int] = {}
        self._today: DayRecord | None = None
        self._turn = 0
        self._turn_acted = False
        self._queue: list[str] = []
        self._context: list[str] = []
        self._addressed: set[str] = set()
        self._probe: list[KTItem] = []
        #: What a failed day goes back to: the belief and the number of help requests at its start.
        self._start_belief = self.belief
        self._start_help = 0
        self._tutor_said = False

    # ---------------------------------------------------------------------------- bookkeeping

    def _seed(self, *parts: Any) -> int:
        return int(fingerprint([self.plan.seed, self.plan.run, *parts])[:8], 16)

    def restore(self, days: Sequence[DayRecord], help: Sequence[HelpRecord]) -> None:
        """Continue after ``days`` (finished earlier): the belief is their answers replayed."""
        self.days, self.help = list(days), list(help)
        for d in self.days:
            self.belief = self.model.replay(d.observations(), self.belief)
            for a in d.actions:
                if a.name == "adjust_level" and a.error is None:
                    for kc in a.args.get("kcs", []):
                        self.levels[kc] = self.levels.get(kc, 0) + int(a.args.get("delta", 0))

    def masteries(self, kcs: Sequence[str] | None = None) -> dict[str, float]:
        return {kc: round(self.model.mastery(self.belief, kc), 6) for kc in (kcs or self.unit)}

    def _ctx(self) -> DayContext:
        # The weakest and strongest KCs come from the initial belief, as EduClaw-Bench takes them from b_1.
        weakest, strongest = self._named
        assert self._today is not None
        return DayContext(day=self._today.day, ability=self.plan.ability, personality=self.plan.personality_text,
                          adversarial=self.plan.adversarial, weakest=tuple(weakest), strongest=tuple(strongest),
                          context=tuple(self._context[-12:]), addressed=frozenset(self._addressed))

    def _answer(self, items: Sequence[KTItem], purpose: str) -> list[ProbeAnswer]:
        """The learner answers ``items``; each graded answer updates the belief in turn."""
        assert self._today is not None
        predicted = [self.model.predict(self.belief, it.kc, it.id) for it in items]
        answers: list[ItemAnswer] = self.role_player.answer(self._ctx(), items, predicted,
                                                        self._seed(self._today.day, self._turn, purpose))
        out = []
        for it, pred, a in zip(items, predicted, answers, strict=True):
            correct = grade(it, a.letter)
            out.append(ProbeAnswer(item=it.id, kc=it.kc, answer=a.letter, correct=correct,
                                   predicted=round(pred, 6),
                                   p=round(a.p, 6) if a.p is not None else None, flag=a.flag))
            self.belief = self.model.update(self.belief, it.id, it.kc, correct)
        return out

    def _probe_items(self, day: int) -> list[KTItem]:
        rng = random.Random(self._seed(day, "probe"))
        kcs = [kc for kc in self.unit if self.bank.by_kc.get(kc)]
        return [rng.choice(self.bank.by_kc[kcs[i % len(kcs)]]) for i in range(self.plan.probe_items)]

    # -------------------------------------------------------------------------------- a day

    def start_day(self, day: int) -> DayRecord:
        """The pre-session probe and the learner's help request, if it makes one."""
        self._today = DayRecord(day=day)
        self._turn, self._queue, self._context, self._addressed = 0, [], [], set()
        self._start_belief = self.belief
        self._start_help = len(self.help)
        self._probe = self._probe_items(day)
        self._today.pre = self._answer(self._probe, "pre")
        rng = random.Random(self._seed(day, "help"))
        trigger = {"struggling": any(not a.correct for a in self._today.pre), "any_day": True,
                   "never": False}.get(self.plan.help_trigger, False)
        if trigger and rng.random() < self.plan.help_rate:
            wrong = [a.kc for a in self._today.pre if not a.correct]
            kc = wrong[0] if wrong else self.unit[0]
            said = self.role_player.say(self._ctx(), [], self._seed(day, 0, "help-text"), ask_help=kc)
            self._today.messages.append(Message(turn=0, role="learner", text=said.text, flag=said.flag))
            self.help.append(HelpRecord(day=day, kc=kc, text=said.text))
        return self._today

    def begin_turn(self, turn: int) -> None:
        self._turn, self._turn_acted, self._tutor_said = turn, False, False

    def end_turn(self) -> None:
        """A turn without a message or a write records ``stay_silent``; then the learner works the
        queued practice (each item attempted with its personality's engagement) and may reply."""
        day = self._need_day()
        if not self._turn_acted:
            day.actions.append(Action(turn=self._turn, name="stay_silent"))
        if self._queue:
            rng = random.Random(self._seed(day.day, self._turn, "engage"))
            attempted = [self.bank.items[i] for i in self._queue if rng.random() < self.plan.engagement]
            day.skipped += len(self._queue) - len(attempted)
            day.practice.extend(self._answer(attempted, "practice"))
            self._queue = []
        if self._tutor_said:
            rng = random.Random(self._seed(day.day, self._turn, "reply"))
            if rng.random() < self.plan.replies:
                history = [(m.role, m.text) for m in day.messages]
                said = self.role_player.say(self._ctx(), history, self._seed(day.day, self._turn, "reply-text"))
                day.messages.append(Message(turn=self._turn, role="learner", text=said.text, flag=said.flag))

    def end_day(self) -> DayRecord:
        day = self._need_day()
        day.post = self._answer(self._probe, "post")
        day.mastery = self.masteries()
        self.days.append(day)
        self._today = None
        return day

    def fail_day(self, cause: str) -> DayRecord:
        """The day could not be finished (a learner or tutor endpoint failed): it is recorded failed,
        and the belief and help requests are as they were before it."""
        day = self._today or DayRecord(day=(self.days[-1].day + 1) if self.days else 1)
        day.failed = cause
        self.belief = self._start_belief
        del self.help[self._start_help:]
        for h in self.help:
            if h.answered_day == day.day:
                h.answered_day = h.answered_turn = None
        day.mastery = self.masteries()
        self.days.append(day)
        self._today = None
        return day

    # ------------------------------------------------------------------------------ the clock

    @property
    def day_open(self) -> bool:
        """Whether a session day is open (between its start and its end)."""
        return self._today is not None

    @property
    def turn(self) -> int:
        """The turn now open (0 when no day is)."""
        return self._turn if self._today is not None else 0

    @property
    def finished(self) -> bool:
        """Whether every session day of the plan is done (finished or failed)."""
        return self._today is None and len(self.days) >= len(self.plan.session_days)

    def advance(self) -> Tick:
        """The run's clock, one step: with no day open, the next session day starts (the pre-session
        probe, the learner's help request if it makes one) and its turn 1 begins; with a day open, the
        turn ends (the learner works the items assigned so far and may reply) and the next one begins,
        or, after the last turn, the day ends (the post-session probe). The bench's loop and the HTTP
        service (``POST /lms/{run}/advance``) both drive a run through this, so they step it alike."""
        if self._today is None:
            if self.finished:
                raise ToolError(f"run: finished: all {len(self.plan.session_days)} session days are done",
                                field="run")
            record = self.start_day(self.plan.session_days[len(self.days)])
            self.begin_turn(1)
            return Tick(day_started=True, day=record.day, turn=1, record=record, practice=[], skipped=0,
                        messages=[m for m in record.messages if m.role == "learner"], day_ended=False,
                        finished=False)
        record = self._today
        n_practice, n_messages, skipped = len(record.practice), len(record.messages), record.skipped
        self.end_turn()
        since = {"practice": record.practice[n_practice:], "skipped": record.skipped - skipped,
                 "messages": [m for m in record.messages[n_messages:] if m.role == "learner"]}
        if self._turn < self.plan.turns:
            self.begin_turn(self._turn + 1)
            return Tick(day_started=False, day=record.day, turn=self._turn, record=record, day_ended=False, finished=False, **since)
        done = self.end_day()
        return Tick(day_started=False, day=done.day, turn=0, record=done, day_ended=True, finished=self.finished, **since)

    def _need_day(self) -> DayRecord:
        if self._today is None:
            raise ToolError("day: no session is open (start a day first)", field="day")
        return self._today

    # ------------------------------------------------------------------------------ actions

    def call(self, name: str, args: Mapping[str, Any] | None = None) -> Any:
        """Run one action and log it; a ToolError (logged) for an unknown action or bad arguments."""
        day = self._need_day()
        args = dict(args or {})
        try:
            handler = self._handlers().get(name)
            if handler is None:
                raise ToolError(f"action: unknown action {name!r}{did_you_mean(name, ACTIONS)}; known: "
                                f"{', '.join(ACTIONS)}", field="action")
            self._check_args(name, args)
            try:
                result = handler(args)
            except ToolError:
                raise
            except SimhubError as exc:  # a lookup's own error (the item bank's unknown item): the tutor's to fix
                raise ToolError(str(exc), field=exc.field) from None
        except ToolError as exc:
            day.actions.append(Action(turn=self._turn, name=name, args=args, error=str(exc)))
            raise
        if name in ACTION_KINDS:  # a turn with none of these records stay_silent at its end
            self._turn_acted = True
        day.actions.append(Action(turn=self._turn, name=name, args=args))
        return result

    def query(self, name: str, args: Mapping[str, Any] | None = None) -> Any:
        """A static query (:data:`STATIC_QUERIES`: the profile, the schedule, the unit's content),
        answered between session days too, before the first one included. Inside a day it is
        :meth:`call` (logged); outside one there is no day to log it in, so it is not logged and
        changes nothing."""
        if name not in STATIC_QUERIES:
            raise ToolError(f"action: {name!r} needs an open session day; only {', '.join(STATIC_QUERIES)} "
                            "answer outside one", field="day")
        if self._today is not None:
            return self.call(name, args)
        args = dict(args or {})
        self._check_args(name, args)
        try:
            return self._handlers()[name](args)
        except ToolError:
            raise
        except SimhubError as exc:
            raise ToolError(str(exc), field=exc.field) from None

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {"get_profile": self._profile, "get_mastery": self._mastery, "get_activity": self._activity,
                "get_schedule": self._schedule, "get_unit_content": self._unit_content,
                "get_messages": self._messages, "assign_items": self._assign, "adjust_level": self._adjust,
                "provide_content": self._content, "send_message": self._send, "stay_silent": lambda a: {"ok": True}}

    @staticmethod
    def _check_args(name: str, args: Mapping[str, Any]) -> None:
        schema = _ARGS[name]
        props = schema["properties"]
        for key in args:
            if key not in props:
                raise ToolError(f"{key}: {name} takes no argument {key!r}{did_you_mean(key, props)}"
                                + (f"; it takes {', '.join(props)}" if props else ""), field=key)
        for key in schema["required"]:
            if key not in args:
                raise ToolError(f"{key}: {name} needs {key!r}", field=key)
        for key, value in args.items():
            spec = props[key]
            kind = spec.get("type")
            if kind == "array" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ToolError(f"{key}: expected a list of strings, got {value!r}"[:300], field=key)
            if kind == "string" and not isinstance(value, str):
                raise ToolError(f"{key}: expected a string, got {type(value).__name__}", field=key)
            if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ToolError(f"{key}: expected an integer, got {value!r}"[:300], field=key)
            if "enum" in spec and value not in spec["enum"]:
                raise ToolError(f"{key}: {value!r} is not one of {', '.join(map(str, spec['enum']))}", field=key)
            if kind == "array" and "minItems" in spec and len(value) < spec["minItems"]:
                raise ToolError(f"{key}: name at least {spec['minItems']}", field=key)
            if kind == "array" and "maxItems" in spec and len(value) > spec["maxItems"]:
                raise ToolError(f"{key}: at most {spec['maxItems']} per call, got {len(value)}", field=key)
            if kind == "integer" and not spec.get("minimum", value) <= value <= spec.get("maximum", value):
                raise ToolError(f"{key}: {value} is outside {spec.get('minimum')}..{spec.get('maximum')}", field=key)
            if kind == "string" and len(value) > spec.get("maxLength", MAX_TEXT):
                raise ToolError(f"{key}: longer than {spec.get('maxLength', MAX_TEXT)} characters", field=key)

    def _kc(self, kc: str, field: str) -> str:
        if kc not in self.bank.by_kc:
            known = self.bank.kcs
            raise ToolError(f"{field}: unknown KC {kc!r}{did_you_mean(kc, known)}", field=field)
        return kc

    # queries
    def _profile(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"run": self.plan.run, "grade_band": self.settings.grade_band, "unit_kcs": list(self.unit),
                "day": self._today.day if self._today is not None else None, "days": self.plan.days,
                "schedule": self.plan.scenario.split("__")[-1]}

    def _mastery(self, args: dict[str, Any]) -> dict[str, float]:
        kcs = [self._kc(k, "kcs") for k in args.get("kcs") or []]
        return {k: round(v, 4) for k, v in self.masteries(kcs or None).items()}

    def _activity(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for d in [*self.days, *([self._today] if self._today else [])]:
            if d.failed:
                continue
            for label, answers in (("pre_probe", d.pre), ("practice", d.practice), ("post_probe", d.post)):
                for a in answers:
                    events.append({"day": d.day, "event": label, "item": a.item, "kc": a.kc, "correct": a.correct})
        for h in self.help:
            events.append({"day": h.day, "event": "help_request", "kc": h.kc, "answered": h.answered_day is not None})
        events.sort(key=lambda e: e["day"])
        return events[-int(args.get("limit", 20)):]

    def _schedule(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"session_days": list(self.plan.session_days), "turns_per_session": self.plan.turns,
                "probe_items": self.plan.probe_items, "today": self._today.day if self._today is not None else None,
                "turn": self._turn if self._today is not None else 0}

    def _unit_content(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        kcs = [self._kc(args["kc"], "kc")] if args.get("kc") else self.unit
        return [{"id": it.id, "kc": it.kc, "question": it.question, "options": dict(it.options),
                 "level": self.levels.get(it.kc, 0)} for kc in kcs for it in self.bank.by_kc.get(kc, [])]

    def _messages(self, args: dict[str, Any]) -> dict[str, Any]:
        day = self._need_day()
        return {"messages": [{"turn": m.turn, "role": m.role, "text": m.text} for m in day.messages],
                "open_help_requests": [{"day": h.day, "kc": h.kc, "text": h.text} for h in self.help
                                       if h.answered_day is None]}

    # writes
    def _assign(self, args: dict[str, Any]) -> dict[str, Any]:
        ids = list(args["item_ids"])
        for i in ids:  # a ToolError (logged, sent back to the tutor), not the bank's UnknownNameError
            if i not in self.bank.items:
                raise ToolError(f"item_ids: unknown item {i!r}{did_you_mean(i, self.bank.items)} (get_unit_content "
                                "lists the unit's items)", field="item_ids")
        self._queue.extend(ids)
        return {"queued": ids}

    def _adjust(self, args: dict[str, Any]) -> dict[str, Any]:
        kcs = [self._kc(k, "kcs") for k in args["kcs"]]
        if not kcs:
            raise ToolError("kcs: name at least one KC", field="kcs")
        for kc in kcs:
            self.levels[kc] = self.levels.get(kc, 0) + args["delta"]
        return {kc: self.levels[kc] for kc in kcs}

    def _content(self, args: dict[str, Any]) -> dict[str, Any]:
        kc = self._kc(args["kc"], "kc")
        text = args["text"].strip()
        if not text:
            raise ToolError("text: the content is empty", field="text")
        self._addressed.add(kc)
        self._context.append(f"{args['kind'].capitalize()} on {kc}: {text[:600]}")
        return {"ok": True}

    def _send(self, args: dict[str, Any]) -> dict[str, Any]:
        day = self._need_day()
        text = args["text"].strip()
        if not text:
            raise ToolError("text: the message is empty", field="text")
        day.messages.append(Message(turn=self._turn, role="tutor", text=text))
        self._context.append(f"Tutor said: {text[:600]}")
        low = text.lower()
        self._addressed.update(kc for kc in self.unit if kc.lower() in low)
        self._addressed.update(self.bank.items[i].kc for i in self.bank.items if i in text.split())
        for h in self.help:
            if h.answered_day is None:
                h.answered_day, h.answered_turn = day.day, self._turn
        self._tutor_said = True
        return {"ok": True}


def check_failed(exc: BaseException) -> str:
    """The cause a failed day records."""
    if isinstance(exc, DayFailure):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc)[:200]}"
