"""simhub tutor-bench --learner kt-learner end to end: the demo's two scripted tutors, resume after a
kill, a rerun copied from the cache, rescoring, bad input, a tool-calling tutor through the official
openai client, and a learner endpoint that fails mid-run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from simhub.cli import main
from simhub.learners.kt.lms import ACTIONS, LMSRun
from simhub.simulation.tutor import Tutor
from simhub.tutoring.lms.bench import TRACES, KTBench, read_kt_trace
from simhub.tutoring.lms.tutors import SilentTutor, WeakestTutor

KT = ["tutor-bench", "--learner", "kt-learner", "--bootstrap", "200"]
BOTH = ["--tutor", "scripted:silent", "--tutor", "scripted:weakest"]
# after-school: days 1-5; self-directed: days 1, 3 and 5 (of 5): 16 learner-days per pair of tutors
SMALL = ["--scenarios", "help-seeker__after-school,guesser__self-directed", "--days", "5"]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """SIMHUB_HOME (and so the whole-run cache) in the test's folder."""
    path = tmp_path / "home"
    monkeypatch.setenv("SIMHUB_HOME", str(path))
    return path


def _results(folder) -> dict:
    return json.loads((folder / "results.json").read_text())


def _traces(folder) -> dict[str, dict]:
    return {f.name: msgspec.to_builtins(read_kt_trace(f)) for f in sorted((folder / TRACES).glob("*.json"))}


def _days_run(printed: str) -> tuple[int, int]:
    m = re.search(r"learner-days run: (\d+) \(runs copied from the cache: (\d+)\)", printed)
    assert m, printed
    return int(m.group(1)), int(m.group(2))


def test_the_demo_tutors_separate_on_delta_solve(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main([*KT, "--tutor", "scripted:weakest", "--tutor", "scripted:silent", "--scenarios", "core", "--days",
                 "10", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "KT-learner bench: 50 runs per tutor" in printed
    results = _results(out)
    assert results["schema_version"] == 1 and results["kind"] == "kt-learner-results" and results["runs"] == 50
    assert results["failures"] == [] and results["ranking"] == ["scripted:weakest", "scripted:silent"]
    (c,) = results["comparisons"]
    assert (c["a"], c["b"], c["n"]) == ("scripted:weakest", "scripted:silent", 50)
    assert c["diff"] > 0 and c["p"] < 0.05
    weakest, silent = results["tutors"]["scripted:weakest"], results["tutors"]["scripted:silent"]
    # Some learners ask for help, some never do; only one of the tutors answers.
    assert 0 < weakest["silent_runs"] < 50 and 0 < silent["silent_runs"] < 50
    assert weakest["responsiveness"]["mean"] == 1.0 and silent["responsiveness"]["mean"] == 0.0
    assert silent["actions_per_run"]["send_message"] == 0.0 and silent["actions_per_run"]["stay_silent"] > 0
    assert weakest["actions_per_run"]["assign_items"] > 0
    assert results["learner"]["kt_heldout_calibration"]["n"] > 0
    assert len(list((out / TRACES).glob("*.json"))) == 100
    # The learner's chats are dialogues simhub reads back.
    from simhub.cli.common import read_dialogues

    dialogues = read_dialogues(str(out / "learner_dialogues.jsonl"))
    assert dialogues and all(any(t.role == "student" for t in d.turns) for d in dialogues)
    assert {d.meta["tutor"] for d in dialogues} <= {"scripted:weakest", "scripted:silent"}


class DiesMidDay(Tutor):
    """A tutor that stops the process (as a kill would) in turn 2 of day 3 of one run."""

    capabilities = frozenset({"tools"})

    def __init__(self, inner: Tutor, run: str):
        self.inner, self.run, self.id = inner, run, inner.id

    def describe(self):
        return self.inner.describe()

    def start_day(self, run: LMSRun, day: int) -> None:
        self.inner.start_day(run, day)

    def act(self, run: LMSRun, day: int, turn: int) -> None:
        if run.plan.run == self.run and day == 3 and turn == 2:
            raise KeyboardInterrupt
        self.inner.act(run, day, turn)


def _bench_as_the_cli_builds_it(output, tutors, *, batch: int = 16) -> KTBench:
    """The KTBench `tutor-bench --learner kt-learner SMALL` builds (the sample parts, seed 0)."""
    from simhub.learners.kt import load_scenarios
    from simhub.learners.kt.student import LearnerSettings, StandInRolePlayer, assign_seeds, persona_seeds
    from simhub.tutoring.lms.bench import KTBenchOptions, learner_parts, plan_runs, run_id

    scenarios = load_scenarios(SMALL[1], days=int(SMALL[3]))
    settings = LearnerSettings()
    model, model_id, log, bank = learner_parts()
    seeds = assign_seeds(persona_seeds(log, model, n_warmup=settings.n_warmup),
                         [run_id(sc, "average", 0) for sc in scenarios], seed=0)
    return KTBench(tutors, plan_runs(scenarios, ["average"], 1, 0, seeds), model=model, model_id=model_id, bank=bank,
                   seeds=seeds, role_player=StandInRolePlayer(settings), settings=settings, output=output,
                   options=KTBenchOptions(no_cache=True, batch=batch))


def test_a_killed_run_resumes_to_the_uninterrupted_result_and_a_rerun_is_a_cache_copy(tmp_path, capsys):
    whole, killed, again = tmp_path / "whole", tmp_path / "killed", tmp_path / "again"
    assert main([*KT, *BOTH, *SMALL, "--output", str(whole)]) == 0
    assert _days_run(capsys.readouterr().out) == (16, 0)
    reference = _traces(whole)
    assert len(reference) == 4 and all(t["complete"] for t in reference.values())

    # One run at a time (a batch of one), plan by plan, each tutor in turn: the second run is the weakest
    # tutor on the first plan. (The resumed run below advances its runs in lockstep, a batch of 16.)
    first_plan = "help-seeker__after-school__average__r0"
    bench = _bench_as_the_cli_builds_it(killed, [SilentTutor(), DiesMidDay(WeakestTutor(), first_plan)], batch=1)
    days_seen: list[tuple[str, int]] = []
    with pytest.raises(KeyboardInterrupt):
        bench.run(on_day=lambda trace, record: days_seen.append((trace.tutor, record.day)))
    assert days_seen == [*(("scripted:silent", d) for d in range(1, 6)), ("scripted:weakest", 1),
                         ("scripted:weakest", 2)]
    partial = _traces(killed)
    assert len(partial) == 2
    stopped = partial[f"scripted-weakest__{first_plan}.json"]
    assert not stopped["complete"] and [d["day"] for d in stopped["days"]] == [1, 2]  # day 3 was never written

    # The rerun (no cache: nothing is copied) runs only what was left: 3 days there and 2 x 3 on the
    # second plan, and ends where the uninterrupted run did.
    assert main([*KT, *BOTH, *SMALL, "--output", str(killed), "--no-cache"]) == 0
    assert _days_run(capsys.readouterr().out) == (9, 0)
    assert _traces(killed) == reference
    assert _results(killed)["tutors"] == _results(whole)["tutors"]
    assert _results(killed)["comparisons"] == _results(whole)["comparisons"]

    # An identical run into a new folder is copied from the whole-run cache the first run filled.
    assert main([*KT, *BOTH, *SMALL, "--output", str(again)]) == 0
    assert _days_run(capsys.readouterr().out) == (0, 4)
    assert _traces(again) == reference

    # A folder resumes only under the settings it was started with.
    model = tmp_path / "model.json"
    bench.model.save(model)
    capsys.readouterr()
    assert main([*KT, *BOTH, *SMALL, "--output", str(whole), "--kt-model", str(model)]) == 2
    assert "another kt_model" in capsys.readouterr().err


def test_runs_advance_in_lockstep_and_a_killed_lockstep_run_resumes_to_the_same_result(tmp_path, capsys):
    """The kit's runner steps a batch of runs a day at a time: every run has its first day before any has
    its second, and a kill part way leaves every run of the batch resumable at its own day."""
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main([*KT, *BOTH, *SMALL, "--output", str(whole), "--no-cache"]) == 0
    reference = _traces(whole)
    first_plan = "help-seeker__after-school__average__r0"
    bench = _bench_as_the_cli_builds_it(killed, [SilentTutor(), DiesMidDay(WeakestTutor(), first_plan)])
    days_seen: list[tuple[str, str, int]] = []
    with pytest.raises(KeyboardInterrupt):
        bench.run(on_day=lambda trace, record: days_seen.append((trace.plan.run, trace.tutor, record.day)))
    firsts = days_seen[:4]
    assert sorted((p == first_plan, t) for p, t, _ in firsts) == sorted(
        (p == first_plan, t) for p in (first_plan, "other") for t in ("scripted:silent", "scripted:weakest"))
    assert all(d == 1 or p != first_plan for p, _, d in firsts)  # each run's first session day before any second
    partial = _traces(killed)
    assert len(partial) == 4 and not any(t["complete"] for t in partial.values())
    assert [d["day"] for d in partial[f"scripted-weakest__{first_plan}.json"]["days"]] == [1, 2]
    capsys.readouterr()
    assert main([*KT, *BOTH, *SMALL, "--output", str(killed), "--no-cache"]) == 0
    assert _traces(killed) == reference


def test_rescoring_recomputes_the_results_without_a_model(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*KT, *BOTH, *SMALL, "--output", str(out), "--no-cache"]) == 0
    first = _results(out)
    (out / "results.json").unlink()
    capsys.readouterr()
    assert main([*KT, "--rescore", "--output", str(out)]) == 0
    assert "no model was called" in capsys.readouterr().out
    again = _results(out)
    for key in ("tutors", "comparisons", "ranking", "stability", "failures", "runs"):
        assert again[key] == first[key], key
    assert list(again["tutors"]) == ["scripted:silent", "scripted:weakest"]  # the run's order, not the files'
    assert again["settings"] == {**first["settings"], "rescored": True}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*KT, "--rescore", "--output", str(empty)]) == 2
    assert "no KT-learner traces to rescore" in capsys.readouterr().err


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    out = str(tmp_path / "bad")
    run = [*KT, "--tutor", "scripted:weakest", "--output", out]

    def fails(*args: str) -> str:
        assert main([*run, *args]) == 2, args
        return capsys.readouterr().err

    err = fails("--scenarios", "gueser")
    assert "unknown scenario 'gueser' (did you mean 'guesser'?)" in err
    scenario_file = tmp_path / "mine.yaml"
    scenario_file.write_text("schema_version: 1\nscenarios:\n  - {personality: guesser, schedule: after-school, "
                             "dayz: 3}\n")
    err = fails("--scenarios", str(scenario_file))
    assert f"{scenario_file}: scenarios[0].dayz: unknown key (did you mean 'days'?)" in err
    assert "unknown ability 'medium'; known: weak, average, strong" in fails("--abilities", "medium")
    assert "--repeats: 0 must be at least 1" in fails("--repeats", "0")
    assert "a scenario lasts at least 1 day, not 0" in fails("--days", "0")
    responses = tmp_path / "log.csv"
    responses.write_text("student,item,kc,time\ns1,q1,Fractions,1\n")
    assert f"{responses}: missing column 'correct'" in fails("--scenarios", "guesser", "--responses", str(responses))
    model = tmp_path / "other-kcs.json"
    model.write_text(json.dumps({"schema_version": 1, "backend": "bkt", "kcs": {
        "Knitting": {"p_init": 0.2, "p_learn": 0.1, "p_guess": 0.25, "p_slip": 0.1}}}))
    err = fails("--scenarios", "guesser", "--kt-model", str(model))
    assert "--kt-items: none of the 40 KCs of the item bank is a KC of the KT model" in err
    err = fails("--scenarios", "guesser", "--role-player", "nobody")
    assert "unknown model 'nobody'" in err and "tiny-student-sft" in err  # the default profile's models
    err = fails("--tutor", "scripted:stepwise")
    assert "unknown tutor 'scripted:stepwise'" in err and "scripted:weakest" in err
    # a KT-learner flag for the other learners
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--days", "3", "--output", out]) == 2
    assert "--days: an option of the kt-learner learner family (--learner kt-learner), not of knowsim" in \
        capsys.readouterr().err
    assert not (tmp_path / "bad" / TRACES).exists()  # nothing ran


# ------------------------------------------------------------------------- endpoint doubles


def _profile(tmp_path, url: str, section: str, name: str, model: str):
    path = tmp_path / "kt-endpoints.yaml"
    endpoint = f"{{base_url: '{url}', api_key_env: none, max_retries: 0, cache: false}}"
    path.write_text(f"name: kt-endpoints\n{section}:\n  {name}: {{kind: openai, model: {model}, endpoint: {endpoint}}}\n")
    return path


def _completion(message: dict) -> dict:
    return {"id": "chatcmpl-kt", "object": "chat.completion", "created": 0, "model": "tutor-model",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _call(call_id: str, name: str, args: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_a_tool_calling_tutor_through_the_openai_client(tmp_path, fake_openai, capsys):
    pytest.importorskip("openai")
    asked: list[dict] = []

    def responder(body):
        asked.append(body)
        step = len(asked)
        if step == 1:
            return _completion({"content": None, "tool_calls": [_call("c1", "get_mastery", {}),
                                                                _call("c2", "get_unit_content", {})]})
        if step == 2:  # the first unit item, read from the tool result it was sent
            content = json.loads(next(m["content"] for m in body["messages"] if m.get("tool_call_id") == "c2"))
            return _completion({"content": None, "tool_calls": [
                _call("c3", "assign_items", {"item_ids": [content[0]["id"]]}),
                _call("c4", "assign_items", {"item_ids": ["no-such-item"]})]})
        if step == 3:
            return _completion({"content": "Let's practise these two together."})
        return _completion({"content": ""})  # nothing more to say: the turn is a silent one

    fake_openai.responder = responder
    profile = _profile(tmp_path, fake_openai.base_url, "tutors", "api-tutor", "tutor-model")
    out = tmp_path / "tools"
    # homework-only: 2 turns on day 1 (a Monday)
    assert main([*KT, "--profile", str(profile), "--tutor", "api-tutor", "--scenarios",
                 "steady-plodder__homework-only", "--days", "1", "--output", str(out), "--no-cache"]) == 0
    assert len(asked) == 4  # turn 1: three steps; turn 2: one
    for body in asked:
        assert body["model"] == "tutor-model"
        assert {t["function"]["name"] for t in body["tools"]} == set(ACTIONS) and len(body["tools"]) == 11
    assert [b["seed"] for b in asked] == [101, 101, 101, 102]
    mastery = json.loads(next(m["content"] for m in asked[1]["messages"] if m.get("tool_call_id") == "c1"))
    assert mastery and all(0.0 <= v <= 1.0 for v in mastery.values())
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in asked[2]["messages"] if m["role"] == "tool"}
    good = results["c3"]["queued"][0]
    assert results["c3"] == {"queued": [good]}
    assert set(results["c4"]) == {"error"} and results["c4"]["error"].startswith("item_ids: unknown item 'no-such-item'")
    # the model's own earlier tool calls are in the history it is sent back
    assert [c["id"] for c in asked[2]["messages"][-3]["tool_calls"]] == ["c3", "c4"]

    (file,) = (out / TRACES).glob("*.json")
    trace = read_kt_trace(file)
    assert trace.models["tutor"]["kind"] == "openai-tools" and trace.models["tutor"]["model"] == "tutor-model"
    (day,) = trace.days
    assert day.failed is None
    assert [(a.turn, a.name, a.args, a.error is not None) for a in day.actions] == [
        (1, "get_mastery", {}, False), (1, "get_unit_content", {}, False),
        (1, "assign_items", {"item_ids": [good]}, False), (1, "assign_items", {"item_ids": ["no-such-item"]}, True),
        (1, "send_message", {"text": "Let's practise these two together."}, False), (2, "stay_silent", {}, False)]
    assert "item_ids" in day.actions[3].error
    assert [(m.turn, m.role, m.text) for m in day.messages if m.role == "tutor"] == [
        (1, "tutor", "Let's practise these two together.")]
    assert [a.item for a in day.practice] + [good] * day.skipped == [good]
    results_json = _results(out)
    assert results_json["tutors"]["api-tutor"]["actions_per_run"]["assign_items"] == 1.0  # the failed one is not
    assert results_json["failures"] == []


def test_a_learner_endpoint_that_fails_mid_run(tmp_path, fake_openai, capsys):
    asked = {"n": 0}
    # Day 1 takes five requests (the pre probe, two practice batches, a reply, the post probe); the
    # sixth is day 2's pre probe, and from then on the endpoint is down.
    working = 6

    def responder(body):
        asked["n"] += 1
        if asked["n"] == working:  # every request after this one answers HTTP 500
            fake_openai.fail_next(10_000, 500)
        user = body["messages"][-1]["content"]
        if '"answers"' in user:
            ids = re.findall(r"^\[([^\]]+)\]$", user, flags=re.M)
            return json.dumps({"answers": {i: "A" for i in ids}})
        return json.dumps({"message": "OK, I'll try that."})

    fake_openai.responder = responder
    profile = _profile(tmp_path, fake_openai.base_url, "simulators", "api-learner", "learner-model")
    out = tmp_path / "flaky"
    # homework-only: days 1-4 (Monday to Thursday), 2 turns, 3 probe items
    assert main([*KT, "--profile", str(profile), "--tutor", "scripted:weakest", "--role-player", "api-learner",
                 "--scenarios", "steady-plodder__homework-only", "--days", "4", "--output", str(out),
                 "--no-cache"]) == 0
    (file,) = (out / TRACES).glob("*.json")
    trace = read_kt_trace(file)
    assert trace.complete and [d.day for d in trace.days] == [1, 2, 3, 4]
    assert trace.models["role_player"]["kind"] == "llm"
    first, *later = trace.days
    assert first.failed is None and len(first.pre) == len(first.post) == 3
    assert all(a.flag is None for a in (*first.pre, *first.post))  # valid JSON answers
    cause = f"learner: HTTP 500 at {fake_openai.base_url}"
    assert [d.failed for d in later] == [cause] * 3
    assert len(later[0].pre) == 3 and later[1].pre == []  # day 2 failed in its session, day 3 at once
    assert asked["n"] == working  # no answer after the endpoint went down was used
    results = _results(out)
    assert results["failures"] == [{"run": trace.id, "day": d.day, "cause": cause} for d in later]
    assert results["tutors"]["scripted:weakest"]["failed_days"] == 3
    assert results["tutors"]["scripted:weakest"]["delta_solve"]["n"] == 1  # the one good day is measured
    assert "failed days: 3" in capsys.readouterr().out
    # With every learner-day failed there is nothing to measure: exit 1, with the cause.
    assert main([*KT, "--profile", str(profile), "--tutor", "scripted:weakest", "--role-player", "api-learner",
                 "--scenarios", "steady-plodder__homework-only", "--days", "2", "--output", str(tmp_path / "down"),
                 "--no-cache"]) == 1
    assert f"every one of the 2 learner-days failed: {cause} (2)" in capsys.readouterr().err


def test_the_tool_tutor_goes_through_simhubs_client_cache_and_retries(tmp_path, fake_openai):
    """No module outside simhub.models.openai makes an openai client: the tool tutor's requests go through
    the shared client, so an identical rerun into another folder is answered from its on-disk cache,
    a failing endpoint is retried as every endpoint is, and the day it fails on names the cause."""
    asked: list[dict] = []

    def responder(body):
        asked.append(body)
        if body["messages"][-1]["role"] == "user":  # a turn's first step: read the mastery
            return _completion({"content": None, "tool_calls": [_call("c1", "get_mastery", {})]})
        return _completion({"content": "Keep going with the practice."})

    fake_openai.responder = responder
    path = tmp_path / "cached.yaml"
    endpoint = (f"{{base_url: '{fake_openai.base_url}', api_key_env: none, max_retries: 1, "
                f"cache_dir: '{tmp_path / 'answers'}'}}")
    path.write_text(f"name: kt-cached\ntutors:\n  api-tutor: {{kind: openai, model: tutor-model, endpoint: {endpoint}}}\n")
    args = [*KT, "--profile", str(path), "--tutor", "api-tutor", "--scenarios", "steady-plodder__homework-only",
            "--days", "1"]
    assert main([*args, "--output", str(tmp_path / "first")]) == 0
    sent = len(asked)
    assert sent == 4 and all("max_completion_tokens" in b and b["tools"] for b in asked)  # 2 turns x 2 steps
    assert main([*args, "--output", str(tmp_path / "again")]) == 0
    assert len(asked) == sent  # every answer came from the client's cache
    first, again = (read_kt_trace(next((tmp_path / d / TRACES).glob("*.json"))) for d in ("first", "again"))
    assert [(a.name, a.args) for a in again.days[0].actions] == [(a.name, a.args) for a in first.days[0].actions]

    fake_openai.fail_next(2, 500)  # the first try and its one retry
    assert main([*args, "--output", str(tmp_path / "down"), "--no-cache"]) == 1
    assert len(asked) == sent  # the two failed tries never reached the responder
    assert len(fake_openai.chat_requests()) == sent + 2
    (day,) = read_kt_trace(next((tmp_path / "down" / TRACES).glob("*.json"))).days
    assert day.failed == f"tutor: HTTP 500 at {fake_openai.base_url}"


def test_a_remote_tool_tutor_without_its_key_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TUTOR_KEY", raising=False)
    path = tmp_path / "remote.yaml"
    path.write_text("name: kt-remote\ntutors:\n  api-tutor: {kind: openai, model: m, endpoint: "
                    "{base_url: 'https://tutor.example.com/v1', api_key_env: TUTOR_KEY}}\n")
    assert main([*KT, "--profile", str(path), "--tutor", "api-tutor", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "tutors.api-tutor: no API key for tutor.example.com: set TUTOR_KEY" in err
    assert not (tmp_path / "out").exists()


def test_no_module_outside_the_endpoint_client_makes_an_openai_client():
    import ast

    root = Path(__file__).resolve().parents[2] / "simhub"
    makers = []
    for file in root.rglob("*.py"):
        if file.relative_to(root).parts[:2] == ("models", "openai"):
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("OpenAI", "AsyncOpenAI", "AzureOpenAI", "AsyncAzureOpenAI"):
                    makers.append(f"{file.relative_to(root)}:{node.lineno}")
    assert not makers, makers
