"""``/lms/...``: an agent tutor outside simhub drives a KT-learner run over HTTP.

The actions are those of the tool-calling tutors of ``simhub tutor-bench --learner kt-learner``
(:data:`simhub.learners.kt.lms.TOOLS`), and every one of them ends in :meth:`LMSRun.call`: the same
validation, the same log, the same learner. What HTTP adds is the clock, which the bench's loop
drives in-process and a remote tutor drives with ``POST /lms/{run}/advance``:

* no day open: the next session day starts (pre-session probe, the learner's help request if it
  makes one) and its turn 1 begins;
* a day open: the turn ends (the learner works the items assigned so far and may reply to a message)
  and the next one begins; after the last turn the day ends (post-session probe) and the run's
  trace (a :class:`~simhub.learners.kt.runs.KTRunTrace`) is written to
  ``$SIMHUB_HOME/lms-runs/{run}.json``, atomically; after the last session day the run is finished.

A run's learner is what ``simhub tutor-bench --learner kt-learner --scenarios S --abilities A
--seed N`` builds for that one scenario: the sample KT model, persona log and item bank, the offline
stand-in role-player, the persona seed drawn with the seed. Runs live in this process's memory
(:data:`MAX_OPEN_RUNS` open at once); a restarted service forgets them, their traces stay on disk.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import msgspec
from litestar import Controller, Response, delete, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example, OpenAPIType, Schema
from litestar.params import Body, Parameter
from msgspec import Meta

from simhub.errors import did_you_mean
from simhub.learners.kt.lms import STATIC_QUERIES, TOOLS, ToolError
from simhub.serving.examples import STATUS_DESCRIPTIONS, ErrorExample
from simhub.serving.schemas import ErrorResponse, RequestError

if TYPE_CHECKING:
    from litestar.openapi.spec import OpenAPI

    from simhub.learners.kt.base import KTModel
    from simhub.learners.kt.items import ItemBank
    from simhub.learners.kt.lms import LMSRun
    from simhub.learners.kt.runs import KTRunTrace
    from simhub.learners.kt.scenarios import Scenario
    from simhub.learners.kt.student import LearnerSettings, PersonaSeed, RolePlayer

__all__ = ["MAX_OPEN_RUNS", "TRACE_DIR", "LMSController", "LMSRuns", "apply_lms_docs"]

#: Runs open at once (a run is open from its creation until its last day ends or it is deleted).
MAX_OPEN_RUNS = 64
#: Finished runs remembered, so that a late call on one is a 409 rather than a 404.
MAX_FINISHED = 4096
#: Where the traces go, under ``$SIMHUB_HOME``.
TRACE_DIR = "lms-runs"


class UnknownRun(RequestError):
    status_code = 404
    type = "unknown_run"


class RunConflict(RequestError):
    """The call does not fit the run's clock: no day is open yet, or the run is finished."""

    status_code = 409
    type = "conflict"


class TooManyRuns(RequestError):
    status_code = 429
    type = "too_many_runs"


# The messages name routes in words: the service masks anything that looks like a server path.
def _unknown_run(run: str) -> str:
    return (f"run: unknown run {run!r} (create one first; runs are kept in the service's memory, so a restart "
            "forgets them)")


def _no_day(run: str) -> str:
    return f"day: no session day is open in run {run}; advance the run to start the next one"


def _finished(run: str) -> str:
    return f"run: run {run} is finished (every session day is done); its trace can still be read"


def _too_many(n: int = MAX_OPEN_RUNS) -> str:
    return f"runs: {n} runs are open, the most this service keeps; finish or delete one first"


# ----------------------------------------------------------------------------------- bodies


class CreateRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    scenario: Annotated[str, Meta(min_length=1, max_length=200,
                                  description="PERSONALITY__SCHEDULE, e.g. help-seeker__after-school "
                                              "(docs/kt-learner.md lists the 11 personalities and 5 schedules)")]
    ability: Literal["weak", "average", "strong"] = "average"
    days: Annotated[int, Meta(ge=1, le=365, description="default: the scenario's (30)")] | None = None
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1, description="draws the persona seed and every random draw")] = 0
    tutor: Annotated[str, Meta(min_length=1, max_length=100, description="the tutor's name, in the trace")] = "http"


class RunCreated(msgspec.Struct, kw_only=True):
    run: str
    scenario: str
    ability: str
    seed: int
    tutor: str
    #: The KCs the run studies (the learner's weakest with items, at the start).
    unit_kcs: list[str]
    session_days: list[int]
    #: Tutor turns per session day.
    turns: int
    probe_items: int


class PracticeOut(msgspec.Struct, kw_only=True):
    item: str
    kc: str
    answer: str | None
    correct: bool


class LearnerMessage(msgspec.Struct, kw_only=True):
    turn: int
    role: str
    text: str


class Advanced(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What ``advance`` did; the fields present say which of its three moves it was."""

    #: A turn begins: the day and the turn (1-based) of ``turns``.
    day: int | None = None
    turn: int | None = None
    turns: int | None = None
    #: A day starts: its pre-session probe's accuracy.
    pre_probe_accuracy: float | None = None
    #: The turn that ended: the practice the learner worked (``skipped``: assigned but not attempted).
    practice: list[PracticeOut] | None = None
    skipped: int | None = None
    #: The learner's new messages: its help request when a day starts, its replies when a turn ends.
    messages: list[LearnerMessage] | None = None
    #: A day ends: the day, its pre- and post-session probe accuracies, and where its trace is.
    day_ended: int | None = None
    pre: float | None = None
    post: float | None = None
    finished: bool | None = None
    trace: str | None = None


# ------------------------------------------------------------------------------- the learner


@dataclasses.dataclass(frozen=True)
class LearnerKit:
    """What every run's learner is built from (one per process: fitting the KT model takes a second)."""

    model: KTModel
    model_id: str
    pool: list[PersonaSeed]
    bank: ItemBank
    settings: LearnerSettings
    role_player: RolePlayer
    scenarios: dict[str, Scenario]


_kit: LearnerKit | None = None
_kit_lock = threading.Lock()


def learner_kit() -> LearnerKit:
    global _kit
    with _kit_lock:
        if _kit is None:
            from simhub.learners.kt.runs import learner_parts
            from simhub.learners.kt.scenarios import load_scenarios
            from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, persona_seeds

            settings = LearnerSettings()
            model, model_id, log, bank = learner_parts("sample", "sample", "sample")
            _kit = LearnerKit(model=model, model_id=model_id, pool=persona_seeds(log, model, n_warmup=settings.n_warmup),
                              bank=bank, settings=settings, role_player=StandInRolePlayer(settings),
                              scenarios={s.id: s for s in load_scenarios("all")})
        return _kit


def find_scenario(kit: LearnerKit, name: str, days: int | None) -> Scenario:
    """The shipped scenario ``name`` (never a file: the name comes from a client), ``days`` long."""
    from simhub.learners.kt.scenarios import shipped_personalities, shipped_schedules

    found = kit.scenarios.get(name)
    if found is None:
        raise RequestError(f"scenario: unknown scenario {name!r}{did_you_mean(name, kit.scenarios)}; a scenario is "
                           f"PERSONALITY__SCHEDULE, with a personality of {', '.join(shipped_personalities())} and a "
                           f"schedule of {', '.join(shipped_schedules())}", field="scenario")
    if days is not None:
        found = msgspec.structs.replace(found, days=days)
    if not found.session_days():
        weekdays = ", ".join(map(str, found.schedule.session_weekdays))
        raise RequestError(f"days: {found.id} has no study block in days 1..{found.days} (its weekdays are {weekdays}; "
                           "day 1 is a Monday)", field="days")
    return found


def plan_one(kit: LearnerKit, scenario: Scenario, ability: str, seed: int):
    """The plan and persona seed ``tutor-bench --learner kt-learner`` gives this one scenario."""
    from simhub.learners.kt.runs import plan_runs, run_id
    from simhub.learners.kt.student import assign_seeds

    key = run_id(scenario, ability, 0)
    seeds = assign_seeds(kit.pool, [key], seed=seed, share=True)
    (plan,) = plan_runs([scenario], [ability], 1, seed, seeds)
    return plan, seeds[key]


# ---------------------------------------------------------------------------------- a run


class HTTPRun:
    """One run driven over HTTP: the :class:`LMSRun`, the clock, and the trace it writes."""

    def __init__(self, handle: str, run: LMSRun, trace: KTRunTrace, path: Path):
        self.handle, self.run, self.trace, self.path = handle, run, trace, path

    @property
    def finished(self) -> bool:
        return self.run.finished

    def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """A tool call; the static queries (the profile, the schedule, the unit's content) answer
        before the first day and between days too, every other call needs an open day (else 409)."""
        if not self.run.day_open and name not in STATIC_QUERIES:
            raise RunConflict(_no_day(self.handle), field="day")
        try:
            return self.run.call(name, args) if self.run.day_open else self.run.query(name, args)
        except ToolError as exc:  # logged by the run, which goes on
            raise RequestError(str(exc), field=exc.field) from None

    def advance(self) -> Advanced:
        """One step of the run's own clock (:meth:`LMSRun.advance`), as the bench's loop steps it."""
        plan = self.run.plan
        tick = self.run.advance()
        messages = [LearnerMessage(turn=m.turn, role=m.role, text=m.text) for m in tick.messages]
        if tick.day_started:
            return Advanced(day=tick.day, turn=1, turns=plan.turns, pre_probe_accuracy=tick.record.pre_accuracy,
                            messages=messages)
        turn_out = {"practice": [PracticeOut(item=a.item, kc=a.kc, answer=a.answer, correct=a.correct)
                                 for a in tick.practice], "skipped": tick.skipped, "messages": messages}
        if not tick.day_ended:
            return Advanced(day=tick.day, turn=tick.turn, turns=plan.turns, **turn_out)
        self.write_trace()
        return Advanced(day_ended=tick.day, pre=tick.record.pre_accuracy, post=tick.record.post_accuracy,
                        finished=tick.finished, trace=f"$SIMHUB_HOME/{TRACE_DIR}/{self.path.name}", **turn_out)

    def write_trace(self) -> None:
        from simhub.learners.kt.runs import write_kt_trace

        self.trace.days = list(self.run.days)
        self.trace.help = [msgspec.structs.replace(h) for h in self.run.help]
        self.trace.complete = self.finished
        write_kt_trace(self.path, self.trace)


class LMSRuns:
    """The runs of one app (``app.state.lms``): the open ones, and the finished ones' trace files."""

    def __init__(self, max_open: int = MAX_OPEN_RUNS):
        self.max_open = max_open
        self.open: dict[str, HTTPRun] = {}
        self.finished: collections.OrderedDict[str, Path] = collections.OrderedDict()

    async def create(self, data: CreateRun) -> RunCreated:
        if len(self.open) >= self.max_open:
            raise TooManyRuns(_too_many(self.max_open))
        kit = await asyncio.to_thread(learner_kit)
        scenario = find_scenario(kit, data.scenario, data.days)
        if len(self.open) >= self.max_open:  # others may have been created while the kit loaded
            raise TooManyRuns(_too_many(self.max_open))
        run = self._build(kit, scenario, data)
        self.open[run.handle] = run
        plan = run.run.plan
        return RunCreated(run=run.handle, scenario=plan.scenario, ability=plan.ability, seed=plan.seed, tutor=data.tutor,
                          unit_kcs=list(run.run.unit), session_days=list(plan.session_days), turns=plan.turns,
                          probe_items=plan.probe_items)

    @staticmethod
    def _build(kit: LearnerKit, scenario: Scenario, data: CreateRun) -> HTTPRun:
        from simhub.config import simhub_home
        from simhub.learners.kt.lms import LMSRun
        from simhub.learners.kt.runs import KTRunTrace

        plan, persona = plan_one(kit, scenario, data.ability, data.seed)
        run = LMSRun(plan, model=kit.model, bank=kit.bank, persona=persona, role_player=kit.role_player,
                     settings=kit.settings)
        trace = KTRunTrace(id=f"{data.tutor}|{plan.run}", tutor=data.tutor, plan=plan, unit=list(run.unit),
                           initial_mastery=run.masteries(),
                           persona_accuracy=round(sum(c for _, _, c in persona.warmup) / len(persona.warmup), 6),
                           models={"tutor": {"kind": "http", "name": data.tutor},
                                   "role_player": kit.role_player.describe(), "kt_model": kit.model_id})
        handle = uuid.uuid4().hex[:12]
        return HTTPRun(handle, run, trace, simhub_home() / TRACE_DIR / f"{handle}.json")

    def get(self, handle: str) -> HTTPRun:
        found = self.open.get(handle)
        if found is not None:
            return found
        if handle in self.finished:
            raise RunConflict(_finished(handle), field="run")
        raise UnknownRun(_unknown_run(handle), field="run")

    def advance(self, handle: str) -> Advanced:
        run = self.get(handle)
        out = run.advance()
        if run.finished:
            del self.open[handle]
            self.finished[handle] = run.path
            while len(self.finished) > MAX_FINISHED:
                self.finished.popitem(last=False)
        return out

    def close(self, handle: str) -> None:
        self.get(handle)
        del self.open[handle]

    def trace_bytes(self, handle: str) -> bytes:
        run = self.open.get(handle)
        if run is not None:
            return msgspec.json.encode(run.trace)
        path = self.finished.get(handle)
        if path is None:
            raise UnknownRun(_unknown_run(handle), field="run")
        try:
            return path.read_bytes()
        except OSError:
            raise UnknownRun(f"run: the trace of run {handle} is no longer on the server", field="run") from None


def provide_lms(state: State) -> LMSRuns:
    return state.lms


# ------------------------------------------------------------------------------------- docs

_RUN = "3f2a9c1b7d4e"
_UNKNOWN_RUN = ErrorExample(404, "A run this service does not have", "unknown_run", _unknown_run("0123456789ab"), "run")
_NO_DAY = ErrorExample(409, "An action before advance opened a day", "conflict", _no_day(_RUN), "day")
_FINISHED = ErrorExample(409, "A call after the run's last day", "conflict", _finished(_RUN), "run")
_BAD_ARGUMENT = ErrorExample(400, "An argument the action does not accept", "invalid_request",
                             "delta: 2 is not one of -1, 1", "delta")
_CREATE_ERRORS = [
    ErrorExample(400, "A scenario that does not exist", "invalid_request",
                 "scenario: unknown scenario 'help-seeker__afterschool' (did you mean 'help-seeker__after-school'?); "
                 "a scenario is PERSONALITY__SCHEDULE, ...", "scenario"),
    ErrorExample(422, "A value of the wrong type", "validation_error",
                 "ability: Invalid enum value 'clever'", "ability"),
    ErrorExample(429, "Too many open runs", "too_many_runs", _too_many()),
]
_DESCRIPTIONS = {**STATUS_DESCRIPTIONS, 404: "no run of that id", 409: "the call does not fit the run's clock",
                 429: "too many open runs, or rate limited"}


def _responses(errors: list[ErrorExample]) -> dict[int, ResponseSpec]:
    by_status: dict[int, list[Example]] = {}
    for error in errors:
        by_status.setdefault(error.status, []).append(error.as_example())
    return {status: ResponseSpec(data_container=ErrorResponse, description=_DESCRIPTIONS[status],
                                 generate_examples=False, examples=found)
            for status, found in sorted(by_status.items())}


#: What the queries and the actions answer besides their result.
_CALL_ERRORS = _responses([_BAD_ARGUMENT, _UNKNOWN_RUN, _NO_DAY, _FINISHED])
#: The static queries answer outside a session day too (simhub.learners.kt.lms.STATIC_QUERIES).
_STATIC_ERRORS = _responses([_BAD_ARGUMENT, _UNKNOWN_RUN, _FINISHED])

#: The tool of each action route, by operation id (its request body is the tool's parameters).
_ACTION_TOOLS = {"lmsAssignItems": "assign_items", "lmsAdjustLevel": "adjust_level",
                 "lmsProvideContent": "provide_content", "lmsSendMessage": "send_message",
                 "lmsStaySilent": "stay_silent"}
_TOOL_DOCS = {t["function"]["name"]: t["function"] for t in TOOLS}

#: Request examples by operation id (for :func:`simhub.serving.openapi.apply_request_examples`).
LMS_REQUESTS = {"lmsCreateRun": [Example(
    summary="Two days with a learner who asks for help",
    value={"scenario": "help-seeker__after-school", "ability": "average", "days": 2, "seed": 0, "tutor": "my-agent"})]}

_TYPES = {"object": OpenAPIType.OBJECT, "array": OpenAPIType.ARRAY, "string": OpenAPIType.STRING,
          "integer": OpenAPIType.INTEGER, "number": OpenAPIType.NUMBER, "boolean": OpenAPIType.BOOLEAN}


def _schema(spec: dict[str, Any]) -> Schema:
    """A tool's JSON Schema (the subset :data:`TOOLS` uses) as an OpenAPI schema."""
    return Schema(
        type=_TYPES.get(spec.get("type", "")), description=spec.get("description"),
        properties={k: _schema(v) for k, v in spec["properties"].items()} if "properties" in spec else None,
        required=list(spec["required"]) if spec.get("required") else None,
        additional_properties=spec.get("additionalProperties"),
        items=_schema(spec["items"]) if "items" in spec else None, enum=spec.get("enum"),
        minimum=spec.get("minimum"), maximum=spec.get("maximum"), min_items=spec.get("minItems"),
        max_items=spec.get("maxItems"), max_length=spec.get("maxLength"))


def apply_lms_docs(openapi: OpenAPI) -> None:
    """Give each action route's request body its tool's parameters, as the tool-calling tutors get them,
    and drop the 400 Litestar documents for any route with a parameter where the route cannot answer one
    (a run id is any string): its body would be Litestar's own, which this service never sends."""
    for path, item in (openapi.paths or {}).items():
        if not path.startswith("/lms/"):
            continue
        for operation in (item.get, item.post, item.delete):
            if operation is None:
                continue
            for status, response in list((operation.responses or {}).items()):
                media = (getattr(response, "content", None) or {}).get("application/json")
                if status == "400" and media is not None and not media.examples:
                    del operation.responses[status]
            if operation.operation_id == "lmsGetTrace":  # served as the file's bytes, documented as what they are
                ok = operation.responses["200"]
                ok.content["application/json"].schema = Schema(  # type: ignore[union-attr]
                    type=OpenAPIType.OBJECT, description="a KTRunTrace (simhub.learners.kt.runs): the plan, the "
                    "learner's start, every finished day (probes, practice, actions, messages) and the help requests")
            if operation.operation_id in _ACTION_TOOLS and operation.request_body is not None:
                tool = _TOOL_DOCS[_ACTION_TOOLS[operation.operation_id]]
                operation.request_body.content["application/json"].schema = _schema(tool["parameters"])


# ---------------------------------------------------------------------------------- routes

Run = Annotated[str, Parameter(description="the run's id, from POST /lms/runs")]


class LMSController(Controller):
    """The routes; each is one line into :class:`LMSRuns` or :meth:`HTTPRun.call`."""

    path = "/lms"
    tags: ClassVar[list[str]] = ["lms"]
    dependencies: ClassVar[dict[str, Provide]] = {"lms": Provide(provide_lms, sync_to_thread=False)}

    @post("/runs", operation_id="lmsCreateRun", status_code=201, responses=_responses(_CREATE_ERRORS),
          summary="Start a KT-learner run (no day is open until advance)",
          description="The learner of simhub tutor-bench --learner kt-learner for one scenario: the sample KT model, "
                      "persona log and item bank, and the offline stand-in role-player; the persona seed and every "
                      "draw follow from scenario, ability and seed, so the same body gives the same learner.")
    async def create(self, data: Annotated[CreateRun, Body(title="New run")], lms: LMSRuns) -> RunCreated:
        return await lms.create(data)

    @delete("/{run:str}", operation_id="lmsCloseRun", status_code=204, responses=_responses([_UNKNOWN_RUN, _FINISHED]),
            summary="Drop an open run (its trace keeps the days it finished)")
    async def close(self, run: Run, lms: LMSRuns) -> None:
        lms.close(run)

    @post("/{run:str}/advance", operation_id="lmsAdvance", status_code=200,
          responses=_responses([_UNKNOWN_RUN, _FINISHED]), summary="Move the run's clock",
          description="No day open: the next session day starts (pre-session probe, the learner's help request) "
                      "and turn 1 begins. A day open: the turn ends (the learner works the assigned items and may "
                      "reply) and the next begins; after the last turn the day ends (post-session probe) and the "
                      "run's trace is written. finished: true after the last session day; later calls are 409.")
    async def advance(self, run: Run, lms: LMSRuns) -> Advanced:
        return lms.advance(run)

    @get("/{run:str}/trace", operation_id="lmsGetTrace", responses=_responses([_UNKNOWN_RUN]),
         summary="The run's trace so far (a KTRunTrace: what simhub tutor-bench --learner kt-learner writes)")
    async def trace(self, run: Run, lms: LMSRuns) -> Response[bytes]:
        return Response(lms.trace_bytes(run), media_type="application/json")

    # queries
    @get("/{run:str}/profile", operation_id="lmsGetProfile", responses=_STATIC_ERRORS,
         summary=_TOOL_DOCS["get_profile"]["description"])
    async def profile(self, run: Run, lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("get_profile")

    @get("/{run:str}/mastery", operation_id="lmsGetMastery", responses=_CALL_ERRORS,
         summary=_TOOL_DOCS["get_mastery"]["description"])
    async def mastery(self, run: Run, lms: LMSRuns, kcs: list[str] | None = None) -> dict[str, float]:
        return lms.get(run).call("get_mastery", {"kcs": kcs} if kcs else {})

    @get("/{run:str}/activity", operation_id="lmsGetActivity", responses=_CALL_ERRORS,
         summary=_TOOL_DOCS["get_activity"]["description"])
    async def activity(self, run: Run, lms: LMSRuns, limit: int | None = None) -> list[dict[str, Any]]:
        return lms.get(run).call("get_activity", {"limit": limit} if limit is not None else {})

    @get("/{run:str}/schedule", operation_id="lmsGetSchedule", responses=_STATIC_ERRORS,
         summary=_TOOL_DOCS["get_schedule"]["description"])
    async def schedule(self, run: Run, lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("get_schedule")

    @get("/{run:str}/unit_content", operation_id="lmsGetUnitContent", responses=_STATIC_ERRORS,
         summary=_TOOL_DOCS["get_unit_content"]["description"])
    async def unit_content(self, run: Run, lms: LMSRuns, kc: str | None = None) -> list[dict[str, Any]]:
        return lms.get(run).call("get_unit_content", {"kc": kc} if kc is not None else {})

    @get("/{run:str}/messages", operation_id="lmsGetMessages", responses=_CALL_ERRORS,
         summary=_TOOL_DOCS["get_messages"]["description"])
    async def messages(self, run: Run, lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("get_messages")

    # actions: the body is the tool's arguments, checked by the run (a bad one is logged there, then a 400)
    @post("/{run:str}/assign_items", operation_id="lmsAssignItems", status_code=200, responses=_CALL_ERRORS,
          summary=_TOOL_DOCS["assign_items"]["description"])
    async def assign_items(self, run: Run, data: dict[str, Any], lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("assign_items", data)

    @post("/{run:str}/adjust_level", operation_id="lmsAdjustLevel", status_code=200, responses=_CALL_ERRORS,
          summary=_TOOL_DOCS["adjust_level"]["description"])
    async def adjust_level(self, run: Run, data: dict[str, Any], lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("adjust_level", data)

    @post("/{run:str}/provide_content", operation_id="lmsProvideContent", status_code=200, responses=_CALL_ERRORS,
          summary=_TOOL_DOCS["provide_content"]["description"])
    async def provide_content(self, run: Run, data: dict[str, Any], lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("provide_content", data)

    @post("/{run:str}/message", operation_id="lmsSendMessage", status_code=200, responses=_CALL_ERRORS,
          summary=_TOOL_DOCS["send_message"]["description"])
    async def message(self, run: Run, data: dict[str, Any], lms: LMSRuns) -> dict[str, Any]:
        return lms.get(run).call("send_message", data)

    @post("/{run:str}/stay_silent", operation_id="lmsStaySilent", status_code=200, responses=_CALL_ERRORS,
          summary=_TOOL_DOCS["stay_silent"]["description"])
    async def stay_silent(self, run: Run, lms: LMSRuns, data: dict[str, Any] | None = None) -> dict[str, Any]:
        return lms.get(run).call("stay_silent", data or {})

