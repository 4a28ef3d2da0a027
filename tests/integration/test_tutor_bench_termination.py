"""The termination judge of simhub tutor-bench: a stateless baseline learner's end turn is set after
the fact by an LLM judge (the fake OpenAI-compatible endpoint), as KnowSim does for its baselines;
the metrics, IQ and the results are then those of the turns up to the judged end."""

from __future__ import annotations

import json

import pytest

from simhub.cli import main
from simhub.learners.graph import validate_graph
from simhub.learners.metrics import conversation_metrics
from simhub.tutoring.knowsim import read_trace, rescore_trace
from simhub.tutoring.knowsim.bench import TRACES
from simhub.tutoring.knowsim.results import RESULTS_FILE
from simhub.tutoring.knowsim.termination import parse_stop
from tests.integration.test_tutor_bench import _endpoint_profile

FAST = ["--extractor", "offline:lexical", "--bootstrap", "300"]
TUTOR_TEXT = "A fraction names equal parts of a whole: the bottom says how many parts, the top how many you take."


def _is_judge(body: dict) -> bool:
    return body["messages"][0]["content"].startswith("You read a chat between a tutor and a student")


def _is_rater(body: dict) -> bool:
    return body["messages"][0]["content"].startswith("You review a finished chat")


def _responder(judge_answer, learner_text="So what do I do first?"):
    def responder(body):
        if _is_judge(body):
            return judge_answer(body["messages"][-1]["content"])
        if _is_rater(body):
            return json.dumps({"score": 6, "reason": "fine"})
        if body["model"] == "learner-model":
            return learner_text
        return TUTOR_TEXT

    return responder


def _judges(server) -> list:
    return [r for r in server.chat_requests() if _is_judge(r.body)]


def _bench(profile, out, *extra, learner="zs:api-learner"):
    return ["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--learner", learner, "--n", "3",
            "--levels", "novice,advanced", "--set", "max_turns=4", "--output", str(out), *FAST, *extra]


def _metrics_of(trace, turns: int):
    graph = validate_graph(trace.graph, name=trace.item)
    return conversation_metrics(graph, trace.initial, [t.record for t in trace.turns[:turns]])


def test_the_judge_sets_each_conversations_end_and_the_metrics_are_of_the_turns_up_to_it(tmp_path, fake_openai, capsys):
    fake_openai.responder = _responder(lambda user: json.dumps({"end_turn": 2, "reason": "the student got it"}))
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "judged"
    args = _bench(profile, out, "--termination-judge", "api-extractor", "--cache-dir", str(tmp_path / "cache"))
    assert main(args) == 0
    printed = capsys.readouterr().out
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert len(traces) == 3 * 2 and all(t.failed is None for t in traces)
    # One judgement per conversation, in JSON mode, reading every recorded turn.
    judged = _judges(fake_openai)
    assert len(judged) == len(traces)
    assert all(r.body["response_format"] == {"type": "json_object"} and r.body["model"] == "extractor-model"
               for r in judged)
    assert all("The conversation (4 turns)" in r.body["messages"][-1]["content"] for r in judged)
    for t in traces:
        # The state rules stopped nothing: the run went to the cap, and the rules' stop is only recorded.
        assert t.full_length and len(t.turns) == 4 and t.stop_reason == "max_turns"
        assert t.schema_version == 3 and t.judged_stop_turn == 2 and t.judged_stop_flag is None
        assert t.judged_stop_reason == "the student got it" and t.models["termination_judge"]["id"] == "api-extractor"
        assert len(t.scored_turns) == 2
        assert t.metrics == _metrics_of(t, 2) and t.metrics != _metrics_of(t, 4)
    results = json.loads((out / RESULTS_FILE).read_text())
    assert results["schema_version"] == 3 and results["flagged_stops"] == 0
    (tutor,) = results["tutors"]
    assert tutor["flagged_stops"] == 0 and all(lv["mean_turns"] == 2.0 for lv in tutor["levels"].values())
    kg = [t.metrics.kg for t in traces]
    assert tutor["marginal"]["kg"]["mean"] == pytest.approx(sum(kg) / len(kg))  # equal level sizes
    assert "0 flagged termination judgements" in printed
    from simhub.tutoring.knowsim.report import bench_section, load_bench

    assert "LLM termination judge" in bench_section([load_bench(out)])[2]

    # A resumed run asks the judge nothing more; rescoring keeps the judged end.
    assert main(args) == 0
    assert len(_judges(fake_openai)) == len(traces)
    for t in traces:
        assert rescore_trace(t, _preset()).metrics == t.metrics
    assert main(["tutor-bench", "--rescore", "--output", str(out), "--bootstrap", "300"]) == 0
    assert json.loads((out / "rescored-paper.json").read_text())["tutors"][0]["marginal"] == tutor["marginal"]


def _preset():
    from simhub.learners.presets import resolve_preset

    return resolve_preset("paper")


def test_iq_rates_only_the_judged_conversation(tmp_path, fake_openai):
    fake_openai.responder = _responder(lambda user: json.dumps({"end_turn": 1, "reason": "nothing new after"}))
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "rated"
    assert main(_bench(profile, out, "--termination-judge", "api-extractor", "--iq-rater", "api-extractor",
                       "--no-cache")) == 0
    rated = [r.body["messages"][-1]["content"] for r in fake_openai.chat_requests() if _is_rater(r.body)]
    assert len(rated) == 6 and all("[1] Student:" in u and "[2] Student:" not in u for u in rated)
    assert all(read_trace(f).iq == 6 for f in (out / TRACES).glob("*.json"))


def test_an_unusable_or_failed_judgement_is_flagged_counted_and_asked_again_on_resume(tmp_path, fake_openai, capsys):
    answers = iter(["The student would have stopped early.", json.dumps({"end_turn": 9})])
    fake_openai.responder = _responder(lambda user: next(answers, json.dumps({"end_turn": 3, "reason": "r"})))
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=1)
    out = tmp_path / "flagged"
    assert main(_bench(profile, out, "--termination-judge", "api-extractor", "--no-cache")) == 0
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert sorted(t.judged_stop_flag for t in traces if t.judged_stop_flag) == ["end_turn 9 outside 1..4", "not JSON"]
    for t in traces:
        # A flagged judgement leaves the metrics those of the whole conversation; the run does not fail.
        assert t.failed is None and t.metrics == _metrics_of(t, 3 if t.judged_stop_turn else 4)
    results = json.loads((out / RESULTS_FILE).read_text())
    assert results["flagged_stops"] == 2 and results["tutors"][0]["flagged_stops"] == 2
    assert "2 flagged termination judgements" in capsys.readouterr().out

    # A judge that is down flags its judgement with the cause; a resumed run asks again for it only.
    out2 = tmp_path / "down"
    tutor_calls = {"n": 0}
    judge_ok = _responder(lambda user: json.dumps({"end_turn": 2, "reason": "r"}))

    def down_after_the_talk(body):
        if body["model"] == "tutor-model":
            tutor_calls["n"] += 1
            if tutor_calls["n"] == 4:  # the conversation's last turn: the next request is the judge's
                fake_openai.fail_next(2)  # both of its attempts (max_retries 1)
        return judge_ok(body)

    fake_openai.responder = down_after_the_talk
    one = _bench(profile, out2, "--termination-judge", "api-extractor", "--no-cache", "--n", "1", "--levels", "novice")
    assert main(one) == 0
    (file,) = (out2 / TRACES).glob("*.json")
    trace = read_trace(file)
    assert trace.failed is None and trace.judged_stop_turn is None and trace.judged_stop_flag.startswith("judge: ")
    assert "500" in trace.judged_stop_flag and trace.metrics == _metrics_of(trace, 4)
    requests = len(fake_openai.chat_requests())
    assert main(one) == 0
    again = read_trace(file)
    assert again.judged_stop_turn == 2 and again.judged_stop_flag is None and again.metrics == _metrics_of(again, 2)
    assert len(fake_openai.chat_requests()) == requests + 1 and _is_judge(fake_openai.chat_requests()[-1].body)


def test_a_knowledge_state_learner_is_refused_a_judge_before_anything_runs(tmp_path, fake_openai, capsys):
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "refused"
    assert main(_bench(profile, out, "--termination-judge", "api-extractor", learner="knowsim")) == 2
    err = capsys.readouterr().err
    assert "--termination-judge" in err and "stateless baselines" in err
    assert not out.exists() and fake_openai.chat_requests() == []


@pytest.mark.parametrize(("text", "flag"), [("[2]", "not a JSON object"), ('{"end_turn": "2"}', "no integer end_turn"),
                                            ('{"end_turn": true}', "no integer end_turn"),
                                            ('{"end_turn": 0}', "end_turn 0 outside 1..4")])
def test_judgements_are_checked(text, flag):
    assert parse_stop(text, 4).flagged == flag and parse_stop(text, 4).turn is None
    assert parse_stop('{"end_turn": 4.0, "reason": "r"}', 4).turn == 4


def test_run_json_is_versioned_and_an_unversioned_one_still_resumes(tmp_path, capsys):
    from simhub.errors import DataError
    from simhub.tutoring.runner import RUN_VERSION, read_run_info

    run = tmp_path / "run"
    args = ["tutor-bench", "--tutor", "scripted:dump", "--n", "1", "--levels", "novice", "--output", str(run),
            "--no-cache", *FAST]
    assert main(args) == 0
    info = read_run_info(run / "run.json")
    assert info.schema_version == RUN_VERSION and info.tutors == ["scripted:dump"] and info.levels == ["novice"]
    assert info.settings["preset"] == "paper" and info.learner_name == "knowsim"
    # A run.json written before it was versioned (no schema_version, no kind) reads as version 0 and resumes.
    raw = json.loads((run / "run.json").read_text())
    del raw["schema_version"], raw["kind"]
    (run / "run.json").write_text(json.dumps(raw))
    assert read_run_info(run / "run.json").settings == info.settings
    assert main(args) == 0
    assert json.loads((run / "run.json").read_text())["schema_version"] == RUN_VERSION
    # A newer one is refused, naming the file and the versions read; a resumed run says so and stops.
    raw["schema_version"], raw["kind"] = RUN_VERSION + 1, "simhub-tutor-bench-run"
    (run / "run.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"run\.json schema_version 2 is newer than this simhub reads \(0 and 1; 0 is a file without schema_version"):
        read_run_info(run / "run.json")
    capsys.readouterr()
    assert main(args) == 2 and "run.json" in capsys.readouterr().err


def test_a_library_callers_own_info_goes_into_run_json_extra(tmp_path):
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring.knowsim import Bench, BenchOptions, DumpTutor, load_items
    from simhub.tutoring.knowsim.components import build_extractor
    from simhub.tutoring.runner import read_run_info

    bench = Bench([DumpTutor()], ScriptedLearner(), build_extractor("offline:lexical", None), resolve_preset("paper"),
                  BenchOptions(no_cache=True), tmp_path / "run", info={"tutors": ["scripted:dump"], "note": "pilot"})
    bench.run(load_items("sample", 1), ["novice"])
    info = read_run_info(tmp_path / "run" / "run.json")
    assert info.tutors == ["scripted:dump"] and info.extra == {"note": "pilot"}


def test_rescore_with_a_judge_judges_a_finished_baseline_run_and_refuses_a_knowsim_one(tmp_path, fake_openai, capsys):
    fake_openai.responder = _responder(lambda user: json.dumps({"end_turn": 3, "reason": "done by then"}))
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "plain"
    assert main(_bench(profile, out, "--full-length", "--no-cache")) == 0
    assert not _judges(fake_openai)
    assert main(["tutor-bench", "--rescore", "--output", str(out), "--profile", str(profile), "--termination-judge",
                 "api-extractor", "--no-cache", "--bootstrap", "300"]) == 0
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert len(_judges(fake_openai)) == len(traces) == 6
    assert all(t.judged_stop_turn == 3 and t.metrics == _metrics_of(t, 3) for t in traces)
    rescored = json.loads((out / "rescored-paper.json").read_text())
    assert rescored["schema_version"] == 3 and rescored["flagged_stops"] == 0
    # A knowledge-state learner's run is stopped by its rules: a judge is refused, naming a trace.
    ks = tmp_path / "ks"
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--n", "1", "--levels", "novice", "--output", str(ks),
                 "--no-cache", *FAST]) == 0
    capsys.readouterr()
    assert main(["tutor-bench", "--rescore", "--output", str(ks), "--profile", str(profile), "--termination-judge",
                 "api-extractor", "--no-cache"]) == 2
    assert "knowledge-state learner" in capsys.readouterr().err
