"""simhub tutor-bench end to end: the demo's two scripted tutors, endpoint doubles as tutor, learner and
extractor, resume after a kill, rescoring, and bad input."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from simhub.cli import main
from simhub.tutoring.knowsim import read_trace
from simhub.tutoring.knowsim.bench import TRACES
from simhub.tutoring.knowsim.results import RESULTS_FILE

FAST = ["--extractor", "offline:lexical", "--bootstrap", "500"]


def _results(folder) -> dict:
    return json.loads((folder / RESULTS_FILE).read_text())


def _tutor(results: dict, name: str) -> dict:
    return next(t for t in results["tutors"] if t["tutor"] == name)


def _pooled(results: dict, metric: str) -> dict:
    return next(c for c in results["comparisons"] if c["level"] == "all" and c["metric"] == metric)


def test_the_demo_tutors_separate_on_the_sample_items(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--items", "sample",
                 "--output", str(out), "--no-cache", "--batch", "64", *FAST]) == 0
    printed = capsys.readouterr().out
    assert "scripted:stepwise" in printed and "mean rank" in printed
    results = _results(out)
    assert results["schema_version"] == 1 and results["conversations"] == 2 * 46 * 3 and results["failed"] == 0
    step, dump = _tutor(results, "scripted:stepwise"), _tutor(results, "scripted:dump")
    # Teaching one teachable IU at a time: more learned per explanation and far less load than dumping.
    assert step["marginal"]["dc"]["mean"] > dump["marginal"]["dc"]["mean"]
    assert dump["marginal"]["co"]["mean"] > step["marginal"]["co"]["mean"]
    assert step["marginal"]["kg"]["mean"] > dump["marginal"]["kg"]["mean"]
    dc, co = _pooled(results, "dc"), _pooled(results, "co")
    assert dc["a"] == "scripted:stepwise" and dc["diff"] > 0 and dc["p_holm"] < 0.05 and dc["n"] == 138
    assert co["diff"] < 0 and co["p_holm"] < 0.05
    assert step["mean_rank"] < dump["mean_rank"]
    # The aptitude-treatment table: novices gain most, and dumping overloads them fully.
    assert step["levels"]["novice"]["metrics"]["kg"]["mean"] > step["levels"]["advanced"]["metrics"]["kg"]["mean"]
    assert dump["levels"]["novice"]["metrics"]["co"]["mean"] == pytest.approx(1.0)
    # Failure modes: an advanced learner hears mostly what it already knows from the dump.
    adv = dump["levels"]["advanced"]["failure_shares"]
    assert adv["REDUNDANT"] == max(adv.values())
    for r in (step, dump):
        for level in r["levels"].values():
            assert level["conversations"] == 46 and level["failed"] == 0
            lo, hi = level["metrics"]["kg"]["ci95"]
            assert lo <= level["metrics"]["kg"]["mean"] <= hi


def test_a_trace_holds_the_whole_conversation_and_rescoring_reproduces_it(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "3", "--output", str(out),
            "--no-cache", *FAST]
    assert main(args) == 0
    files = sorted((out / TRACES).glob("*.json"))
    assert len(files) == 2 * 3 * 3
    trace = read_trace(files[0])
    assert trace.schema_version == 3 and trace.turns and trace.stop_reason in ("mastery", "overload", "max_turns")
    first = trace.turns[0]
    assert first.turn == 1 and first.learner and first.tutor and set(first.signals) == set(n.id for n in trace.graph.nodes)
    assert first.record.threshold >= 2 and trace.models["extractor"]["id"] == "offline:lexical"
    assert trace.metrics is not None and trace.metrics.turns == len(trace.turns)
    if trace.stop_reason != "max_turns":
        assert trace.virtual_stop_turn == len(trace.turns)

    assert main(["tutor-bench", "--rescore", "--output", str(out), "--bootstrap", "500"]) == 0
    assert "no model was called" in capsys.readouterr().out
    again = json.loads((out / "rescored-paper.json").read_text())
    first_scoring = _results(out)
    assert again["tutors"] == first_scoring["tutors"] and again["comparisons"] == first_scoring["comparisons"]
    # Another preset gives another scoring from the same signals.
    assert main(["tutor-bench", "--rescore", "--output", str(out), "--preset", "released", "--bootstrap", "500"]) == 0
    released = json.loads((out / "rescored-released.json").read_text())
    assert released["preset"] == "released" and released["tutors"] != first_scoring["tutors"]


def test_a_killed_run_resumes_without_repeating_a_call(tmp_path, monkeypatch, capsys):
    import simhub.tutoring.knowsim.tutors as tutors

    real = tutors.StepwiseTutor.respond
    seen: list[str] = []

    def counting(self, requests, sampling):
        seen.extend(json.dumps([(t.role, t.content) for t in r.dialogue.turns]) + r.dialogue.id for r in requests)
        return real(self, requests, sampling)

    def dies_when_the_second_chunk_starts(self, requests, sampling):
        if seen and any(len(r.dialogue.turns) == 1 for r in requests):
            raise KeyboardInterrupt
        return counting(self, requests, sampling)

    base = ["tutor-bench", "--tutor", "scripted:stepwise", "--n", "6", "--levels", "novice,advanced", "--batch", "4",
            "--cache-dir", str(tmp_path / "cache"), *FAST]
    monkeypatch.setattr(tutors.StepwiseTutor, "respond", dies_when_the_second_chunk_starts)
    assert main([*base, "--output", str(tmp_path / "killed")]) == 130
    written = list((tmp_path / "killed" / TRACES).glob("*.json"))
    assert len(written) == 4  # the first chunk finished before the kill
    before = len(seen)
    monkeypatch.setattr(tutors.StepwiseTutor, "respond", counting)
    assert main([*base, "--output", str(tmp_path / "killed")]) == 0
    assert len(set(seen)) == len(seen)  # no tutor turn was asked for twice
    assert len(list((tmp_path / "killed" / TRACES).glob("*.json"))) == 12
    resumed = _results(tmp_path / "killed")
    total = len(seen)
    assert total > before
    # An identical run into a fresh folder is answered from the cache, and scores the same.
    assert main([*base, "--output", str(tmp_path / "again")]) == 0
    assert len(seen) == total
    assert _results(tmp_path / "again")["tutors"] == resumed["tutors"]
    assert "answered from the cache" in capsys.readouterr().out
    # A folder is resumed only with the settings it was started with.
    assert main([*base, "--output", str(tmp_path / "killed"), "--preset", "released"]) == 2
    assert "another preset" in capsys.readouterr().err


def _endpoint_profile(tmp_path, url: str, concurrency: int = 4):
    path = tmp_path / "tb.yaml"
    ep = f"{{base_url: '{url}', cache: false, max_retries: 1, concurrency: {concurrency}}}"
    path.write_text(f"name: tb\nsimulators:\n  api-learner: {{kind: openai, model: learner-model, endpoint: {ep}}}\n"
                    f"  api-extractor: {{kind: openai, model: extractor-model, endpoint: {ep}}}\n"
                    f"tutors:\n  api-tutor: {{kind: openai, model: tutor-model, endpoint: {ep}}}\n")
    return path


def _scripted_endpoints(broken_turn: int):
    calls = {"extractor": 0}

    def responder(body):
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        if system.startswith("You are playing a student"):
            return json.dumps({"thought": "the first idea is new to me", "message": "I think I add the tops?",
                               "attempt_verify": True})
        if system.startswith("You are an analyst"):
            calls["extractor"] += 1
            if calls["extractor"] == broken_turn:
                return "Sorry, I cannot label this."
            ius = re.findall(r"^- (IU\d+) \(", user, flags=re.M)
            labels = [{"id": iu, "teaching_quality": "well_explained" if k < 2 else "not_mentioned",
                       "user_attempt_type": "reasoning" if k == 0 else "none"} for k, iu in enumerate(ius)]
            return json.dumps({"ius": labels})
        return "Let's look at what a fraction is, step by step."

    return responder, calls


def test_a_whole_conversation_through_endpoint_doubles(tmp_path, fake_openai, capsys):
    responder, calls = _scripted_endpoints(broken_turn=2)
    fake_openai.responder = responder
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "api"
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--learner", "knowsim:api-learner",
                 "--extractor", "api-extractor", "--compare-extractor", "offline:lexical", "--n", "1", "--levels",
                 "novice", "--output", str(out), "--no-cache", "--bootstrap", "200"]) == 0
    (file,) = (out / TRACES).glob("*.json")
    trace = read_trace(file)
    assert trace.failed is None and trace.models["learner"]["kind"] == "roleplay"
    assert trace.models["extractor"]["model"]["model"] == "extractor-model"
    t1, t2 = trace.turns[0], trace.turns[1]
    assert t1.learner == "I think I add the tops?" and t1.learner_thought and t1.attempt_verify
    assert t1.tutor == "Let's look at what a fraction is, step by step."
    ids = [n.id for n in trace.graph.nodes]
    first_two = {iu for iu in ids[:2]}
    assert {iu for iu, s in t1.signals.items() if s.teaching_quality == "well_explained"} == first_two
    assert t1.signals[ids[0]].user_attempt_type == "reasoning"
    assert t1.record.explained == tuple(iu for iu in ids if iu in first_two)
    # The unparseable answer of turn 2 is a flagged turn that advances nothing.
    assert t2.extractor_flag == "not JSON" and t2.record.n_up == 0 and not t2.record.explained
    results = _results(out)
    assert results["flagged_turns"] >= 1 and results["failed"] == 0
    # The stand-in ran beside the LLM extractor on every turn; its agreement leaves the flagged turn out.
    assert t1.shadow_signals is not None and set(t1.shadow_signals) == set(ids)
    agreement = results["extractor_agreement"]
    assert agreement["against"] == "offline:lexical" and agreement["labels"] == (len(trace.turns) - 1) * len(ids)
    assert -1 <= agreement["teaching_quality"] <= 1
    # Each turn is one learner, one tutor and one extractor request.
    bodies = fake_openai.chat_requests()
    assert len(bodies) == 3 * len(trace.turns) and calls["extractor"] == len(trace.turns)
    learner_prompt = next(r.body for r in bodies if r.body["model"] == "learner-model")
    assert learner_prompt["response_format"] == {"type": "json_object"}
    # The first prompt is conditioned on the initial state: the novice's unaware IUs are listed as such.
    unaware = [n.concept for n in trace.graph.nodes if trace.initial.states[n.id] == "unaware"]
    listed = learner_prompt["messages"][-1]["content"].split("Ideas you are unaware of (never mention them):\n")[1]
    assert unaware and all(f"- {c}" in listed for c in unaware)


def test_endpoint_calls_of_a_step_run_concurrently(tmp_path, fake_openai):
    responder, _ = _scripted_endpoints(broken_turn=0)
    fake_openai.responder = responder
    fake_openai.latency_s = 0.05
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=4)
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--n", "4", "--levels", "novice",
                 "--set", "max_turns=2", "--output", str(tmp_path / "conc"), "--no-cache", *FAST]) == 0
    assert fake_openai.max_in_flight > 1


def test_a_tutor_that_fails_marks_its_conversation_failed_and_the_run_completes(tmp_path, fake_openai, capsys):
    responder, _ = _scripted_endpoints(broken_turn=0)
    fake_openai.responder = responder
    fake_openai.fail_next(2, 503)  # the first tutor request fails twice (try + retry)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=1)
    out = tmp_path / "failing"
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--tutor", "scripted:dump", "--n",
                 "2", "--levels", "novice", "--output", str(out), "--no-cache", *FAST]) == 0
    results = _results(out)
    api = _tutor(results, "api-tutor")
    assert results["failed"] == 1 and api["failed"] == 1 and api["levels"]["novice"]["failed"] == 1
    assert results["failures"][0]["cause"] == f"tutor: HTTP 503 at {fake_openai.base_url}"
    assert api["levels"]["novice"]["metrics"]["kg"]["n"] == 1
    assert _tutor(results, "scripted:dump")["failed"] == 0
    assert "1 failed" in capsys.readouterr().out


def test_a_run_in_which_every_conversation_failed_exits_1_with_the_causes(tmp_path, fake_openai, capsys):
    fake_openai.fail_next(100, 503)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=1)
    out = tmp_path / "down"
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--n", "2", "--levels", "novice",
                 "--output", str(out), "--no-cache", *FAST]) == 1
    assert f"every one of the 2 conversations failed: tutor: HTTP 503 at {fake_openai.base_url} (2)" in \
        capsys.readouterr().err
    assert _results(out)["failed"] == 2


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "bad"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--levels", "novice,expert", "--output", str(out)]) == 2
    assert "unknown knowledge level 'expert'" in capsys.readouterr().err
    assert main(["tutor-bench", "--tutor", "scripted:stepwize", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown tutor 'scripted:stepwize'" in err and "scripted:stepwise" in err
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--learner", "zs", "--output", str(out)]) == 2
    assert "--learner zs: the knowsim family takes zs:MODEL" in capsys.readouterr().err
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--learner", "kt-learnr", "--output", str(out)]) == 2
    err = capsys.readouterr().err  # one grammar over every family's forms
    assert "unknown learner 'kt-learnr'" in err and "kt-learner" in err and "zs-cot:MODEL" in err
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--batch", "0", "--output", str(out)]) == 2
    assert "--batch: 0" in capsys.readouterr().err
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--items", str(out / "missing.yaml"), "--output",
                 str(out)]) == 2
    assert "missing.yaml" in capsys.readouterr().err

    run = tmp_path / "run"
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--n", "1", "--levels", "novice", "--output", str(run),
                 "--no-cache", *FAST]) == 0
    (file,) = (run / TRACES).glob("*.json")
    raw = json.loads(file.read_text())
    raw["turns"][0]["signals"]["IU99"] = {"teaching_quality": "shallow", "user_attempt_type": "none"}
    file.write_text(json.dumps(raw))
    capsys.readouterr()
    assert main(["tutor-bench", "--rescore", "--output", str(run)]) == 2
    err = capsys.readouterr().err
    assert "IU99" in err and file.name in err
    raw["turns"][0]["signals"].pop("IU99")
    raw["schema_version"] = 4
    file.write_text(json.dumps(raw))
    assert main(["tutor-bench", "--rescore", "--output", str(run)]) == 2
    assert "schema_version 4" in capsys.readouterr().err
    assert main(["tutor-bench", "--rescore", "--output", str(tmp_path / "empty")]) == 2
    assert "no traces" in capsys.readouterr().err


def test_the_default_offline_extractor_runs_on_minilm(tmp_path):
    out = tmp_path / "minilm"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--n", "1", "--levels", "novice", "--output", str(out),
                 "--no-cache", "--bootstrap", "200"]) == 0
    (file,) = (out / TRACES).glob("*.json")
    trace = read_trace(file)
    assert trace.models["extractor"]["similarity"] == "embedding"
    assert trace.metrics.kg > 0 and trace.turns[0].record.explained
    assert msgspec.json.decode(file.read_bytes())["kind"] == "simhub-tutor-bench-trace"


def test_local_models_as_tutor_and_learner(tmp_path, tiny_profile):
    from tests.conftest import TINY_PROFILE

    out = tmp_path / "tiny"
    assert main(["tutor-bench", "--profile", TINY_PROFILE, "--tutor", "tiny-tutor", "--tutor", "scripted:dump",
                 "--learner", "knowsim:tiny-student", "--n", "2", "--levels", "novice", "--max-tokens", "12",
                 "--set", "max_turns=3", "--output", str(out), "--no-cache", *FAST]) == 0
    results = _results(out)
    assert results["failed"] == 0 and results["conversations"] == 4
    trace = read_trace(next(p for p in (out / TRACES).glob("*.json") if p.name.startswith("tiny-tutor")))
    assert trace.models["tutor"]["kind"] == "model" and trace.models["learner"]["model"]["kind"] == "model"
    assert len(trace.turns) == 3 and all(t.tutor is not None for t in trace.turns)
    # An untrained model cannot write the learner's JSON: its text is the message, and the turn is flagged.
    assert all(t.learner_flag for t in trace.turns) and results["flagged_turns"] >= 3


@pytest.mark.parametrize("style", ["zs", "zs-cot-prof"])
def test_stateless_baseline_learners_end_with_their_phrase(tmp_path, fake_openai, style):
    calls = {"learner": 0}

    def responder(body):
        if body["model"] == "learner-model":
            calls["learner"] += 1
            text = "Thanks, I get it now. Terminate conversation." if calls["learner"] == 3 else "How do I start?"
            return json.dumps({"thought": "hm", "message": text}) if style != "zs" else text
        return "Start with the common denominator."

    fake_openai.responder = responder
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / style
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--learner", f"{style}:api-learner",
                 "--n", "1", "--levels", "novice", "--output", str(out), "--no-cache", *FAST]) == 0
    (file,) = (out / TRACES).glob("*.json")
    trace = read_trace(file)
    assert trace.stop_reason == "learner_end" and trace.terminated and len(trace.turns) == 2
    assert trace.models["learner"] == {**trace.models["learner"], "kind": "stateless", "style": style}
    assert trace.turns[0].learner == "How do I start?" and trace.metrics is not None
    first = next(r.body for r in fake_openai.chat_requests() if r.body["model"] == "learner-model")
    system, user = first["messages"][0]["content"], first["messages"][-1]["content"]
    assert "you are new to this topic" in system.lower()
    if style == "zs":
        assert "response_format" not in first and "What you knew" not in user
    else:
        assert first["response_format"] == {"type": "json_object"} and "Who you are:" in system
        known = [n.concept for n in trace.graph.nodes if trace.initial.states[n.id] == "knows_well"]
        assert "What you knew when you started" in user and all(f"- {c}" in user for c in known)


def test_an_extractor_naming_an_unknown_iu_fails_its_conversation_with_the_cause(tmp_path):
    from simhub.learners import IUSignal, resolve_preset
    from simhub.learners.extract import Extraction, Extractor
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring.knowsim import Bench, BenchOptions, DumpTutor, load_items, summarize

    class Inventive(Extractor):
        id = "inventive"

        def extract(self, requests):
            return [Extraction(signals={"IU99": IUSignal(teaching_quality="shallow")}) for _ in requests]

    bench = Bench([DumpTutor()], ScriptedLearner(), Inventive(), resolve_preset("paper"), BenchOptions(no_cache=True),
                  tmp_path / "run")
    traces = bench.run(load_items("sample", 2), ["novice"])
    assert all(t.failed and "IU99" in t.failed and t.failed.startswith("extractor:") for t in traces)
    results = summarize(traces, preset="paper")
    assert results.failed == 2 and results.tutors[0].levels["novice"].failed == 2
    assert results.tutors[0].levels["novice"].metrics["kg"].n == 0


def test_advanced_learners_stop_after_one_turn_under_the_paper_preset_only(tmp_path):
    """KnowSim's starting ratios put 80% of an advanced learner's IUs at knows_well, which is the paper's
    mastery rule: every advanced conversation ends after turn 1 under the paper preset, whatever the
    tutor, and the report says so; the released code's rule (every IU known well) lets them go on."""
    from simhub.tutoring.knowsim.report import first_turn_stops, load_bench

    stops = {}
    for preset in ("paper", "released"):
        out = tmp_path / preset
        assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--n", "4", "--levels", "advanced", "--output",
                     str(out), "--no-cache", "--preset", preset, *FAST]) == 0
        bench = load_bench(out)
        stops[preset] = first_turn_stops(bench)
        if preset == "released":
            assert max(len(t.scored_turns) for t in bench.traces) > 1
    assert stops == {"paper": {"advanced": (4, 4)}, "released": {}}


def test_canonical_starting_states_replace_the_ratio_table_where_the_file_has_them(tmp_path, capsys):
    """`--initial-states FILE` reads KnowSim's canonical starts (its init_ks_cache.json layout: task ->
    item -> level -> label -> {"state"}): an (item, level) the file has starts there, the others from the
    level's ratios; the file is named in the run's settings; a file with none of the items exits 2, and
    the KT learner refuses the flag."""
    from simhub.learners.state import initial_state
    from simhub.tutoring.knowsim.bench import load_items

    first, second = load_items("sample", 2)
    given = {first.graph.label(iu): {"state": "knows_well" if k == 0 else "unaware"}
             for k, iu in enumerate(first.graph.ids)}
    starts = tmp_path / "init_ks_cache.json"
    starts.write_text(json.dumps({"_meta": {"description": "test"}, "competition_math": {first.id: {"novice": given}}}))
    out = tmp_path / "run"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--n", "2", "--levels", "novice", "--output",
                 str(out), "--no-cache", "--initial-states", str(starts), *FAST]) == 0
    assert "starting states from" in capsys.readouterr().err
    by_item = {t.item: t for t in map(read_trace, sorted((out / TRACES).glob("*.json")))}
    assert by_item[first.id].initial.states == {iu: "knows_well" if k == 0 else "unaware"
                                                for k, iu in enumerate(first.graph.ids)}
    assert by_item[second.id].initial.states == initial_state(second.graph, "novice").states
    settings = _results(out)["settings"]["initial_states"]
    assert settings["file"] == "init_ks_cache.json" and settings["pairs"] == [f"{first.id}/novice"]
    elsewhere = tmp_path / "other.json"
    elsewhere.write_text(json.dumps({"expertqa": {"expertqa_001": {"novice": {}}}}))
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--n", "2", "--levels", "novice", "--output",
                 str(tmp_path / "none"), "--initial-states", str(elsewhere), *FAST]) == 2
    assert "has a starting state there" in capsys.readouterr().err
    assert main(["tutor-bench", "--learner", "kt-learner", "--tutor", "scripted:silent", "--output",
                 str(tmp_path / "kt"), "--initial-states", str(starts)]) == 2
    err = capsys.readouterr().err  # an option of the other family is refused, naming its family
    assert "--initial-states: an option of the knowsim learner family (--learner knowsim), not of kt-learner" in err
