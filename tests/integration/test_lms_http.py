"""The LMS over HTTP (``/lms/...`` of ``simhub serve``): a KT-learner run driven by an outside tutor.

Litestar's TestClient on an app with no models (the KT learner needs none: BKT is fitted on the
sample corpus once per process). Each test writes its traces under its own ``SIMHUB_HOME``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

pytest.importorskip("litestar")

from litestar.testing import TestClient

from simhub.config import Profile
from simhub.learners.kt.lms import TOOLS, LMSRun, ToolError
from simhub.learners.kt.metrics import HelpRequest, responsiveness
from simhub.serving.app import create_app
from simhub.serving.lms import TRACE_DIR
from simhub.serving.settings import ServiceSettings
from simhub.tutoring.lms.bench import read_kt_trace

MINI = Profile(name="mini")
HELP_SEEKER = {"scenario": "help-seeker__after-school", "days": 2, "seed": 0, "tutor": "my-agent"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(ServiceSettings.load(MINI, environ={}, preload=False), MINI)) as c:
        yield c


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHUB_HOME", str(tmp_path))
    return tmp_path


def ok(r, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


def error(r, status: int, field: str | None, *words: str) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"type", "message", "field"} and err["field"] == field, err
    if field is not None:
        assert err["message"].startswith(f"{field}: "), err
    for w in words:
        assert w in err["message"], err
    return err


def create(client: TestClient, **body: Any) -> dict:
    return ok(client.post("/lms/runs", json={**HELP_SEEKER, **body}), 201)


def advance_to_day_end(client: TestClient, run: str) -> dict:
    while True:
        out = ok(client.post(f"/lms/{run}/advance"))
        if "day_ended" in out:
            return out


# ------------------------------------------------------------------------------------ a run


def test_a_run_driven_over_http_is_traced_as_the_bench_traces_it(client, home):
    created = create(client)
    run = created["run"]
    assert len(run) == 12 and created["session_days"] == [1, 2] and created["turns"] == 4
    assert len(created["unit_kcs"]) == 5 and created["tutor"] == "my-agent"

    start = ok(client.post(f"/lms/{run}/advance"))
    assert (start["day"], start["turn"], start["turns"]) == (1, 1, 4)
    assert 0.0 <= start["pre_probe_accuracy"] <= 1.0
    (help_request,) = start["messages"]  # the help-seeker asks on day 1 with seed 0
    assert help_request["role"] == "learner" and help_request["turn"] == 0
    assert ok(client.get(f"/lms/{run}/messages"))["open_help_requests"][0]["text"] == help_request["text"]

    mastery = ok(client.get(f"/lms/{run}/mastery"))
    assert set(mastery) == set(created["unit_kcs"])
    weakest = min(mastery, key=lambda k: (mastery[k], k))
    assert ok(client.get(f"/lms/{run}/mastery", params={"kcs": [weakest]})) == {weakest: mastery[weakest]}
    items = [it["id"] for it in ok(client.get(f"/lms/{run}/unit_content", params={"kc": weakest}))]
    assert items and all("answer" not in it for it in ok(client.get(f"/lms/{run}/unit_content")))
    assigned = items[:3]
    assert ok(client.post(f"/lms/{run}/assign_items", json={"item_ids": assigned})) == {"queued": assigned}
    assert ok(client.post(f"/lms/{run}/message", json={"text": f"Let's go through {weakest} together."})) == {"ok": True}
    assert ok(client.get(f"/lms/{run}/messages"))["open_help_requests"] == []
    assert ok(client.get(f"/lms/{run}/schedule"))["turn"] == 1
    assert ok(client.get(f"/lms/{run}/profile"))["unit_kcs"] == created["unit_kcs"]

    turn2 = ok(client.post(f"/lms/{run}/advance"))
    assert (turn2["day"], turn2["turn"]) == (1, 2)
    assert len(turn2["practice"]) + turn2["skipped"] == len(assigned)
    assert {p["item"] for p in turn2["practice"]} <= set(assigned)
    assert all(m["role"] == "learner" and m["turn"] == 1 for m in turn2["messages"])
    activity = ok(client.get(f"/lms/{run}/activity", params={"limit": 200}))
    assert sum(e["event"] == "practice" for e in activity) == len(turn2["practice"])

    day1 = advance_to_day_end(client, run)
    assert day1["day_ended"] == 1 and day1["finished"] is False and day1["pre"] == start["pre_probe_accuracy"]
    path = home / TRACE_DIR / f"{run}.json"
    assert day1["trace"] == f"$SIMHUB_HOME/{TRACE_DIR}/{run}.json" and path.is_file()
    partial = read_kt_trace(path)
    assert [d.day for d in partial.days] == [1] and not partial.complete

    error(client.get(f"/lms/{run}/mastery"), 409, "day", "no session day is open")  # between two days
    assert ok(client.post(f"/lms/{run}/advance"))["day"] == 2
    day2 = advance_to_day_end(client, run)
    assert day2["day_ended"] == 2 and day2["finished"] is True

    trace = read_kt_trace(path)
    assert trace.complete and trace.tutor == "my-agent" and trace.id == "my-agent|help-seeker__after-school__average__r0"
    assert [d.day for d in trace.days] == [1, 2] and trace.unit == created["unit_kcs"]
    assert (trace.days[0].pre_accuracy, trace.days[0].post_accuracy) == (day1["pre"], day1["post"])
    assert (trace.days[1].pre_accuracy, trace.days[1].post_accuracy) == (day2["pre"], day2["post"])
    logged = [(a.turn, a.name) for a in trace.days[0].actions]
    assert logged[:4] == [(1, "get_messages"), (1, "get_mastery"), (1, "get_mastery"), (1, "get_unit_content")]
    assert (1, "assign_items") in logged and (1, "send_message") in logged
    assert [a.args for a in trace.days[0].actions if a.name == "assign_items"] == [{"item_ids": assigned}]
    assert [t for t, name in logged if name == "stay_silent"] == [2, 3, 4]  # turns with no action record it
    assert [t for t, name in ((a.turn, a.name) for a in trace.days[1].actions)] == [1, 2, 3, 4]
    assert [p.item for p in trace.days[0].practice] == [p["item"] for p in turn2["practice"]]
    # Responsiveness: the day-1 request was answered at turn 1; day 2's (the help-seeker asks again) never.
    assert [(h.day, h.answered_day, h.answered_turn) for h in trace.help] == [(1, 1, 1), (2, None, None)]
    assert responsiveness([HelpRequest(h.day, h.answered_day) for h in trace.help]) == 0.5
    assert msgspec.json.decode(client.get(f"/lms/{run}/trace").content) == msgspec.json.decode(path.read_bytes())


def test_bad_calls_are_4xx_naming_the_field_and_the_run_goes_on(client, home):
    error(client.get("/lms/0123456789ab/mastery"), 404, "run", "'0123456789ab'")
    error(client.post("/lms/0123456789ab/advance"), 404, "run")
    error(client.delete("/lms/0123456789ab"), 404, "run")
    run = create(client)["run"]
    error(client.post(f"/lms/{run}/assign_items", json={"item_ids": ["zz"]}), 409, "day", "advance")
    error(client.get(f"/lms/{run}/mastery"), 409, "day")
    # the static queries answer before the first day (no day is open: day and today are null), unlogged
    profile, schedule = ok(client.get(f"/lms/{run}/profile")), ok(client.get(f"/lms/{run}/schedule"))
    assert profile["day"] is None and profile["unit_kcs"] and schedule["today"] is None and schedule["turn"] == 0
    assert schedule["session_days"] and ok(client.get(f"/lms/{run}/unit_content"))
    ok(client.post(f"/lms/{run}/advance"))
    assert ok(client.get(f"/lms/{run}/profile"))["day"] == schedule["session_days"][0]

    error(client.post(f"/lms/{run}/assign_items", json={"item_ids": ["zz"]}), 400, "item_ids", "unknown item 'zz'")
    item = ok(client.get(f"/lms/{run}/unit_content"))[0]
    assert ok(client.post(f"/lms/{run}/assign_items", json={"item_ids": [item["id"]]})) == {"queued": [item["id"]]}
    error(client.post(f"/lms/{run}/adjust_level", json={"kcs": [item["kc"]], "delta": 2}), 400, "delta", "-1, 1")
    error(client.post(f"/lms/{run}/adjust_level", json={"kcs": [item["kc"]]}), 400, "delta", "needs")
    error(client.post(f"/lms/{run}/adjust_level", json={"kcs": [item["kc"][:-1]], "delta": 1}), 400, "kcs",
          "did you mean")
    error(client.post(f"/lms/{run}/message", json={"txt": "hi"}), 400, "txt", "did you mean 'text'")
    error(client.post(f"/lms/{run}/provide_content", json={"kc": item["kc"], "kind": "video", "text": "x"}), 400, "kind")
    error(client.get(f"/lms/{run}/activity", params={"limit": 0}), 400, "limit")
    error(client.get(f"/lms/{run}/activity", params={"limit": "many"}), 422, "limit")
    error(client.post(f"/lms/{run}/assign_items", json=["not", "an", "object"]), 422, None)
    assert ok(client.post(f"/lms/{run}/adjust_level", json={"kcs": [item["kc"]], "delta": -1})) == {item["kc"]: -1}
    assert ok(client.post(f"/lms/{run}/stay_silent")) == {"ok": True}

    turn2 = ok(client.post(f"/lms/{run}/advance"))  # the run went on: the valid assignment was worked
    assert len(turn2["practice"]) + turn2["skipped"] == 1
    advance_to_day_end(client, run)
    assert advance_to_day_end(client, run)["finished"] is True
    error(client.post(f"/lms/{run}/advance"), 409, "run", "finished")
    error(client.post(f"/lms/{run}/message", json={"text": "hi"}), 409, "run", "finished")
    error(client.delete(f"/lms/{run}"), 409, "run")
    assert ok(client.get(f"/lms/{run}/trace"))["complete"] is True

    errors = [(a.name, a.error.split(":")[0]) for a in read_kt_trace(home / TRACE_DIR / f"{run}.json").days[0].actions
              if a.error]  # the bad calls are logged in the run (those refused before it are not)
    assert errors == [("assign_items", "item_ids"), ("adjust_level", "delta"), ("adjust_level", "delta"),
                      ("adjust_level", "kcs"), ("send_message", "txt"), ("provide_content", "kind"),
                      ("get_activity", "limit")]


def test_create_errors_name_the_field(client):
    err = error(client.post("/lms/runs", json={**HELP_SEEKER, "scenario": "help-seeker__afterschool"}), 400,
                "scenario", "did you mean 'help-seeker__after-school'", "after-school", "help-seeker")
    assert err["type"] == "invalid_request"
    error(client.post("/lms/runs", json={"scenario": "../../etc/passwd.yaml"}), 400, "scenario")  # never a file
    error(client.post("/lms/runs", json={"scenario": "core"}), 400, "scenario")  # one scenario, not a set
    error(client.post("/lms/runs", json={**HELP_SEEKER, "ability": "clever"}), 422, "ability")
    error(client.post("/lms/runs", json={**HELP_SEEKER, "days": 0}), 422, "days")
    error(client.post("/lms/runs", json={**HELP_SEEKER, "scenario": "guesser__weekend-warrior", "days": 5}), 400,
          "days", "no study block")
    error(client.post("/lms/runs", json={**HELP_SEEKER, "turns": 3}), 422, None, "unknown field `turns`")
    error(client.post("/lms/runs", json={"days": 2}), 422, None, "required field `scenario`")


def test_open_runs_are_bounded_and_can_be_closed(client):
    runs = client.app.state.lms
    before = runs.max_open
    runs.max_open = len(runs.open) + 2
    try:
        first, _ = create(client)["run"], create(client)["run"]
        err = error(client.post("/lms/runs", json=HELP_SEEKER), 429, None, "runs are open")
        assert err["type"] == "too_many_runs"
        assert ok(client.delete(f"/lms/{first}"), 204) is None
        error(client.get(f"/lms/{first}/profile"), 404, "run")
        create(client)
    finally:
        runs.max_open = before


# --------------------------------------------------------------------------- one implementation


def teach(call: Callable[[str, dict], Any], turn: int) -> None:
    """One turn of a small scripted tutor, through ``call(name, args)`` (HTTP or in-process)."""
    mastery = call("get_mastery", {})
    weakest = min(mastery, key=lambda k: (mastery[k], k))
    items = [it["id"] for it in call("get_unit_content", {"kc": weakest})]
    if turn == 1:
        call("provide_content", {"kc": weakest, "kind": "example", "text": f"A worked example on {weakest}."})
        call("send_message", {"text": f"Today: {weakest}. Read the example, then try these."})
        call("assign_items", {"item_ids": items[:3]})
        call("assign_items", {"item_ids": ["no-such-item"]})  # a bad call, logged by both
    elif turn == 2:
        call("adjust_level", {"kcs": [weakest], "delta": -1})
        call("assign_items", {"item_ids": items[-2:]})


def test_http_and_in_process_runs_are_one_implementation(client, home):
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.tutoring.lms.bench import learner_parts, plan_runs, run_id

    scenario, ability, seed, days = "confused-productive__after-school", "weak", 3, 3
    created = create(client, scenario=scenario, ability=ability, seed=seed, days=days)
    run = created["run"]

    routes = {"send_message": "message"}

    def over_http(name: str, args: dict) -> Any:
        route = routes.get(name, name.removeprefix("get_"))
        if name.startswith("get_"):
            r = client.get(f"/lms/{run}/{route}", params=args)
        else:
            r = client.post(f"/lms/{run}/{route}", json=args)
        if r.status_code == 400:
            return None
        return ok(r)

    http_days = []
    for _ in created["session_days"]:
        for t in range(1, created["turns"] + 1):
            ok(client.post(f"/lms/{run}/advance"))
            teach(over_http, t)
        http_days.append(advance_to_day_end(client, run))
    trace = read_kt_trace(home / TRACE_DIR / f"{run}.json")

    # In-process, as tutor-bench --learner kt-learner builds the learner for this one scenario.
    settings = LearnerSettings()
    model, _, log, bank = learner_parts("sample", "sample", "sample")
    (sc,) = load_scenarios(scenario, days=days)
    key = run_id(sc, ability, 0)
    seeds = assign_seeds(persona_seeds(log, model, n_warmup=settings.n_warmup), [key], seed=seed, share=True)
    (plan,) = plan_runs([sc], [ability], 1, seed, seeds)
    assert plan == trace.plan
    lms = LMSRun(plan, model=model, bank=bank, persona=seeds[key], role_player=StandInRolePlayer(settings),
                 settings=settings)

    def in_process(name: str, args: dict) -> Any:
        try:
            return msgspec.json.decode(msgspec.json.encode(lms.call(name, args)))
        except ToolError:
            return None

    assert lms.unit == created["unit_kcs"]
    for day in plan.session_days:
        lms.start_day(day)
        for t in range(1, plan.turns + 1):
            lms.begin_turn(t)
            teach(in_process, t)
            lms.end_turn()
        lms.end_day()

    assert [(d.pre_accuracy, d.post_accuracy) for d in lms.days] == [(d["pre"], d["post"]) for d in http_days]
    assert msgspec.to_builtins(lms.days) == msgspec.to_builtins(trace.days)  # answers, actions, messages alike
    assert msgspec.to_builtins(lms.help) == msgspec.to_builtins(trace.help)
    assert any(a.error for a in trace.days[0].actions) and trace.days[0].practice


# ------------------------------------------------------------------------------------- docs


def test_openapi_documents_the_lms_with_the_tools_schemas(client):
    doc = client.get("/schema/openapi.json").json()
    ops = {op["operationId"]: (path, method, op) for path, item in doc["paths"].items() for method, op in item.items()
           if path.startswith("/lms")}
    assert {"lmsCreateRun", "lmsAdvance", "lmsCloseRun", "lmsGetTrace", "lmsGetProfile", "lmsGetMastery",
            "lmsGetActivity", "lmsGetSchedule", "lmsGetUnitContent", "lmsGetMessages", "lmsAssignItems",
            "lmsAdjustLevel", "lmsProvideContent", "lmsSendMessage", "lmsStaySilent"} == set(ops)
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    body = ops["lmsAdjustLevel"][2]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == tools["adjust_level"]["required"] and body["properties"]["delta"]["enum"] == [-1, 1]
    assert body["additionalProperties"] is False
    (example,) = ops["lmsCreateRun"][2]["requestBody"]["content"]["application/json"]["examples"].values()
    assert ok(client.post("/lms/runs", json=example["value"]), 201)["session_days"] == [1, 2]
    documented: dict[tuple[str, str | None], str] = {}
    for operation_id, (_, _, op) in ops.items():
        assert op["tags"] == ["lms"], operation_id
        for status, response in op["responses"].items():
            if int(status) >= 400:
                for ex in response["content"]["application/json"]["examples"].values():
                    err = ex["value"]["error"]  # (the docs leave out a null field)
                    documented[(int(status), err["type"], err.get("field"))] = err["message"]

    def finished_run() -> str:
        run = create(client, days=1)["run"]
        advance_to_day_end(client, run)
        return run

    def too_many() -> Any:
        runs = client.app.state.lms
        before, runs.max_open = runs.max_open, len(runs.open)
        try:
            return client.post("/lms/runs", json=HELP_SEEKER)
        finally:
            runs.max_open = before

    def bad_delta() -> Any:
        created = create(client)
        ok(client.post(f"/lms/{created['run']}/advance"))
        return client.post(f"/lms/{created['run']}/adjust_level", json={"kcs": created["unit_kcs"][:1], "delta": 2})

    provoke = {
        (400, "invalid_request", "scenario"): lambda: client.post("/lms/runs", json={"scenario": "help-seeker__afterschool"}),
        (422, "validation_error", "ability"): lambda: client.post("/lms/runs", json={**HELP_SEEKER, "ability": "clever"}),
        (429, "too_many_runs", None): too_many,
        (404, "unknown_run", "run"): lambda: client.post("/lms/0123456789ab/advance"),
        (409, "conflict", "day"): lambda: client.get(f"/lms/{create(client)['run']}/mastery"),
        (409, "conflict", "run"): lambda: client.post(f"/lms/{finished_run()}/advance"),
        (400, "invalid_request", "delta"): bad_delta,
    }
    assert set(documented) == set(provoke)

    def aside(message: str) -> str:  # run ids and counts differ between the docs and this app
        return re.sub(r"\b[0-9a-f]{12}\b", "RUN", re.sub(r"\b\d+ runs\b", "N runs", message))

    for (status, type_, field), message in documented.items():
        err = error(provoke[(status, type_, field)](), status, field)
        assert err["type"] == type_
        if message.endswith("..."):  # shortened in the docs
            assert aside(err["message"]).startswith(aside(message[:-3])), (message, err)
        else:
            assert aside(err["message"]) == aside(message), (message, err)
