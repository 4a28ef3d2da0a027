"""`simhub rollout` and `simhub eval-dialogues` on the tiny models and a fake OpenAI-compatible tutor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simhub.cli import main
from simhub.schema import read_jsonl, write_jsonl

TINY = "tests/profiles/tiny.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory, sample_corpus):
    path = tmp_path_factory.mktemp("data") / "real.jsonl"
    write_jsonl(path, sample_corpus["test"][:4])
    return path


def _rollout(*args, expect=0):
    # The untrained tiny models rarely stop by themselves: short turns keep the tests quick.
    assert main(["rollout", "--profile", TINY, "--simulator", "tiny-student", "--max-tokens", "16", *args]) == expect


def test_free_rollouts_alternate_stop_and_are_canonical_dialogues(data, tmp_path, tiny_profile):
    out = tmp_path / "roll"
    _rollout("--tutor", "tiny-tutor", "--data", str(data), "--output", str(out), "--max-turns", "8", "--samples", "2")
    rollouts = read_jsonl(out / "rollouts.jsonl")
    real = {d.id: d for d in read_jsonl(data)}
    assert len(rollouts) == 2 * len(real)
    for r in rollouts:
        assert all(a.role != b.role for a, b in zip(r.turns, r.turns[1:], strict=False))  # roles alternate
        assert len(r.turns) <= 8 and r.meta["end"] in ("max_turns", "marker")
        if r.meta["end"] == "max_turns":
            assert len(r.turns) == 8
        source = real[r.meta["real_id"]]
        assert r.question == source.question and r.id == f"{source.id}~{r.meta['sample']}"
        if source.turns[0].role == "tutor":  # the real opening
            assert r.turns[0].content == source.turns[0].content
        assert {"seed", "mode", "simulator", "tutor"} <= set(r.meta)
    summary = json.loads((out / "rollout.json").read_text())
    assert summary["rollouts"] == len(rollouts) and summary["failed"] == 0
    # A rollout is a canonical dialogue: simhub eval accepts it as data.
    assert main(["eval", "--profile", TINY, "--simulator", "reference:real", "--data", str(out / "rollouts.jsonl"),
                 "--output", str(tmp_path / "run"), "--metrics", "rouge_l", "--bootstrap", "200"]) == 0


def test_mirror_rollouts_stop_after_the_real_number_of_student_turns(data, tmp_path, tiny_profile):
    out = tmp_path / "mirror"
    _rollout("--tutor", "tiny-tutor", "--data", str(data), "--output", str(out), "--mode", "mirror", "--max-turns", "60")
    real = {d.id: d for d in read_jsonl(data)}
    for r in read_jsonl(out / "rollouts.jsonl"):
        source = real[r.meta["real_id"]]
        students = sum(t.role == "student" for t in r.turns)
        if r.meta["end"] == "real_length":
            assert students == len(source.student_turn_indices())
        else:
            assert r.meta["end"] == "marker" and students <= len(source.student_turn_indices())
        # The local mirror tutor says what the real tutor said at each point.
        tutor_turns = [t.content for t in r.turns if t.role == "tutor"]
        real_tutor = [t.content for t in source.turns if t.role == "tutor"]
        assert tutor_turns == real_tutor[: len(tutor_turns)]


def _tutor_profile(tmp_path, url, retries=1):
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {TINY}\nname: p\ntutors:\n  api-tutor: {{kind: openai, model: tutor-model, "
                    f"endpoint: {{base_url: '{url}', cache: false, max_retries: {retries}, concurrency: 1}}}}\n")
    return path


def test_a_tutor_that_fails_marks_its_dialogues_failed_and_the_run_completes(data, tmp_path, fake_openai, monkeypatch,
                                                                            tiny_profile, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    fake_openai.fail_next(2, 500)  # the first tutor request fails twice (try + retry)
    out = tmp_path / "roll"
    assert main(["rollout", "--profile", str(_tutor_profile(tmp_path, fake_openai.base_url)), "--simulator",
                 "tiny-student", "--tutor", "api-tutor", "--data", str(data), "--output", str(out), "--max-turns", "6",
                 "--max-tokens", "16", "--no-cache"]) == 0
    rollouts = read_jsonl(out / "rollouts.jsonl")
    failed = [r for r in rollouts if r.meta.get("failed")]
    assert len(failed) == 1 and failed[0].meta["failed"] == f"tutor: HTTP 500 at {fake_openai.base_url}" and failed[0].meta["end"] == "failed"
    summary = json.loads((out / "rollout.json").read_text())
    assert summary["failed"] == 1 and summary["failures"][0]["cause"] == failed[0].meta["failed"]
    assert "1 failed" in capsys.readouterr().out
    # eval-dialogues leaves failed rollouts out and counts them.
    res = tmp_path / "dl"
    assert main(["eval-dialogues", "--profile", TINY, "--real", str(data), "--sim", str(out), "--output", str(res),
                 "--bootstrap", "100", "--no-sensitivity"]) == 0
    results = json.loads((res / "dialogue_results.json").read_text())
    assert results["failed_rollouts"] == 1 and results["sim_dialogues"] == len(rollouts) - 1


def test_a_killed_rollout_resumes_without_repeating_a_call(data, tmp_path, fake_openai, monkeypatch, tiny_profile):
    import simhub.simulation.tutor as tutor_module

    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    profile = _tutor_profile(tmp_path, fake_openai.base_url)
    args = ["rollout", "--profile", str(profile), "--simulator", "tiny-student", "--tutor", "api-tutor", "--data", str(data),
            "--max-turns", "6", "--max-tokens", "16", "--cache-dir", str(tmp_path / "cache")]
    real = tutor_module.EndpointTutor.respond
    calls = {"n": 0}

    def dies_on_the_second_tutor_step(self, requests, sampling):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, requests, sampling)

    monkeypatch.setattr(tutor_module.EndpointTutor, "respond", dies_on_the_second_tutor_step)
    assert main([*args, "--output", str(tmp_path / "killed")]) == 130
    first = len(fake_openai.chat_requests())
    assert first > 0
    monkeypatch.setattr(tutor_module.EndpointTutor, "respond", real)
    assert main([*args, "--output", str(tmp_path / "resumed")]) == 0
    bodies = [json.dumps(r.body, sort_keys=True) for r in fake_openai.chat_requests()]
    assert len(set(bodies)) == len(bodies)  # no request was sent twice
    total = len(bodies)
    assert main([*args, "--output", str(tmp_path / "again")]) == 0
    assert len(fake_openai.chat_requests()) == total  # an identical rerun sends nothing
    a, b = (read_jsonl(tmp_path / d / "rollouts.jsonl") for d in ("resumed", "again"))
    assert [x.turns for x in a] == [x.turns for x in b]


def test_eval_dialogues_writes_every_statistic_with_a_ci(data, tmp_path, tiny_profile):
    roll = tmp_path / "roll"
    _rollout("--tutor", "tiny-tutor", "--data", str(data), "--output", str(roll), "--max-turns", "8", "--samples", "2")
    out = tmp_path / "dl"
    assert main(["eval-dialogues", "--profile", TINY, "--real", str(data), "--sim", str(roll), "--output", str(out),
                 "--bootstrap", "200", "--max-tokens", "16", "--sensitivity-prefixes", "12"]) == 0
    results = json.loads((out / "dialogue_results.json").read_text())
    names = {"acts_jsd", "correctness_rate_diff", "length_w1", "question_rate_w1", "turns_w1", "mattr_z", "hdd_z",
             "yule_z", "detect_auroc", "kt_gain_diff", "tutor_sensitivity"}
    assert names <= set(results["metrics"])
    assert "pi_calibrated" not in results["metrics"]  # only with an endpoint judge
    for name in names:
        m = results["metrics"][name]
        assert set(m) == {"value", "ci95", "n"} and m["n"] == 4 and m["value"] is not None
    assert 0.0 <= results["metrics"]["acts_jsd"]["value"] <= 1.0
    assert results["null_reasons"] == {}  # written for the report; nothing is null here
    assert set(results["stability_sd"]) >= {"acts_jsd", "length_w1"}  # two samples per dialogue
    assert not (out / "results.json").exists() and results["figures"]["acts"]["real"]
    # Behind the single numbers: both sides of tutor sensitivity and of the KT gain.
    sens = results["details"]["tutor_sensitivity"]
    assert "error" in sens or (results["metrics"]["tutor_sensitivity"]["value"]
                               == pytest.approx(abs(sens["sim_delta"] - sens["real_delta"])))
    gain = results["details"]["kt_gain_diff"]
    assert results["metrics"]["kt_gain_diff"]["value"] == pytest.approx(abs(gain["real_mean"] - gain["sim_mean"]))
    # The report reads the folder: the dialogue-level table and its three figures, drawn from real output.
    page = tmp_path / "page.html"
    assert main(["report", str(out), "--output", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert 'id="dialogue-table"' in text and "kt_gain_diff" in text
    for figure in ("fig-dialogue-acts", "fig-dialogue-length", "fig-mastery"):
        assert f'<figure id="{figure}"><svg' in text, figure


def test_eval_dialogues_says_why_a_statistic_is_null(data, tmp_path, tiny_profile):
    # The demo's judge is a local adapter trained for the judge's prompt: it cannot label a single turn's
    # correctness, so correctness_rate_diff is null, and the file says why (the report shows it).
    text = Path(TINY).read_text(encoding="utf-8").replace(
        "judge: {kind: local, model: tiny:llama}", "judge: {kind: local, model: tiny:llama, adapter: random-lora:judge}")
    assert "random-lora:judge" in text
    profile = tmp_path / "adapter-judge.yaml"
    profile.write_text(text, encoding="utf-8")
    roll = tmp_path / "roll"
    _rollout("--tutor", "tiny-tutor", "--data", str(data), "--output", str(roll), "--max-turns", "4")
    out = tmp_path / "dl"
    assert main(["eval-dialogues", "--profile", str(profile), "--real", str(data), "--sim", str(roll), "--output",
                 str(out), "--bootstrap", "100", "--no-sensitivity"]) == 0
    results = json.loads((out / "dialogue_results.json").read_text())
    assert results["metrics"]["correctness_rate_diff"]["value"] is None
    assert results["null_reasons"]["correctness_rate_diff"].startswith("no correctness labels: needs a judge endpoint")
    assert set(results["null_reasons"]) == {m for m, v in results["metrics"].items() if v["value"] is None}
    page = tmp_path / "page.html"
    assert main(["report", str(out), "--output", str(page)]) == 0
    assert "no correctness labels: needs a judge endpoint" in page.read_text(encoding="utf-8")


def test_eval_dialogues_bad_input(data, tmp_path, sample_corpus, tiny_profile, capsys):
    other = tmp_path / "other.jsonl"
    write_jsonl(other, sample_corpus["test"][10:12])
    assert main(["eval-dialogues", "--profile", TINY, "--real", str(data), "--sim", str(other), "--output", str(tmp_path / "x"),
                 "--no-sensitivity"]) == 2
    assert "none of the 4 real dialogues asks" in capsys.readouterr().err
    one = tmp_path / "one.jsonl"
    write_jsonl(one, sample_corpus["test"][:1])
    assert main(["eval-dialogues", "--profile", TINY, "--real", str(one), "--sim", str(one), "--output", str(tmp_path / "y"),
                 "--no-sensitivity"]) == 2
    assert "needs at least two" in capsys.readouterr().err
    assert main(["rollout", "--profile", TINY, "--simulator", "tiny-student", "--tutor", "nobody", "--data", str(data),
                 "--output", str(tmp_path / "z")]) == 2
    assert "unknown tutor 'nobody'" in capsys.readouterr().err
    for top_p in ("0", "1.5"):  # checked before the profile or any model is touched
        assert main(["rollout", "--profile", TINY, "--simulator", "tiny-student", "--tutor", "nobody", "--data", str(data),
                     "--output", str(tmp_path / "z"), "--top-p", top_p]) == 2
        assert f"top_p: must be in (0, 1], got {float(top_p)}" in capsys.readouterr().err


def test_pi_calibrated_with_an_endpoint_judge(tmp_path, sample_corpus, fake_openai, monkeypatch, tiny_profile):
    """PS, HH and PP pairs reach the judge once each (sample index in the request), the verdicts give
    PI and its anchors, and a rerun asks nothing again."""
    import msgspec

    from simhub.evaluation import dialogue_metrics as dm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    by_question: dict[str, list] = {}
    for d in sample_corpus["test"]:
        by_question.setdefault(d.question.text, []).append(d)
    real = [d for ds in by_question.values() if len(ds) >= 2 for d in ds[:2]][:6]
    assert len(real) >= 4
    mark = "I really do not know."

    def faked(d, k):
        turns = [msgspec.structs.replace(t, content=mark) if t.role == "student" else t for t in d.turns]
        return msgspec.structs.replace(d, id=f"{d.id}~{k}", turns=turns, meta={"real_id": d.id, "sample": k})

    write_jsonl(tmp_path / "real.jsonl", real)
    write_jsonl(tmp_path / "sim.jsonl", [faked(d, k) for d in real for k in (0, 1)])

    def judge(body):  # spots the fake student whenever exactly one side has it
        text = body["messages"][-1]["content"]
        if "Which student is real" not in text:
            return "correct"
        a, b = text.split("Dialogue B:")
        fake_a, fake_b = mark in a, mark in b
        return "tie" if not (fake_a or fake_b) else "A" if fake_b or (fake_a and fake_b) else "B"

    fake_openai.responder = judge
    profile = tmp_path / "pi.yaml"
    profile.write_text(f"extends: {TINY}\nname: pi\nscoring:\n  metrics:\n    judge: {{kind: openai, model: judge-model, "
                       f"endpoint: {{base_url: '{fake_openai.base_url}', api_key_env: OPENAI_API_KEY}}}}\n")
    args = ["eval-dialogues", "--profile", str(profile), "--real", str(tmp_path / "real.jsonl"), "--sim",
            str(tmp_path / "sim.jsonl"), "--no-sensitivity", "--bootstrap", "100", "--cache-dir", str(tmp_path / "cache")]

    def realness_requests():
        return [r for r in fake_openai.chat_requests() if "Which student is real" in r.body["messages"][-1]["content"]]

    assert main([*args, "--output", str(tmp_path / "a")]) == 0
    results = json.loads((tmp_path / "a" / "dialogue_results.json").read_text())
    d = results["details"]["pi_calibrated"]
    assert (d["pi"], d["tie_rate"], d["n_ps"]) == (0.0, 0.0, 2 * len(real))  # the fake is always caught
    assert (d["hh"], d["hh_tie_rate"], d["n_hh"]) == (0.5, 1.0, len(real))  # two real students: a tie
    assert d["n_pp"] == len(real) and d["pp_tie_rate"] == 0.0
    expected = dm.pi_calibrated(["loss"] * d["n_ps"], ["tie"] * d["n_hh"],
                                ["win"] * round(d["pp"] * d["n_pp"]) + ["loss"] * (d["n_pp"] - round(d["pp"] * d["n_pp"])))
    assert d["calibrated"] == expected.calibrated
    value = results["metrics"]["pi_calibrated"]["value"]
    assert value == (d["calibrated"] if d["calibrated"] is not None else d["pi"])
    asked = realness_requests()
    assert len(asked) == d["n_ps"] + d["n_hh"] + d["n_pp"]
    assert len({r.body["messages"][-1]["content"].split(")")[0] for r in asked}) == len(asked)  # one per pair
    assert main([*args, "--output", str(tmp_path / "b")]) == 0
    assert len(realness_requests()) == len(asked)  # the rerun asks nothing again
    assert json.loads((tmp_path / "b" / "dialogue_results.json").read_text())["details"] == results["details"]


def test_a_rollout_run_in_which_every_dialogue_failed_exits_non_zero(data, tmp_path, monkeypatch, tiny_profile,
                                                                     capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    assert main(["rollout", "--profile", str(_tutor_profile(tmp_path, down, retries=0)), "--simulator", "tiny-student",
                 "--tutor", "api-tutor", "--data", str(data), "--output", str(tmp_path / "roll"), "--max-turns", "4",
                 "--max-tokens", "8", "--no-cache"]) == 1
    assert f"every one of the 4 rollouts failed: tutor: connection refused at {down} (4)" in capsys.readouterr().err


def test_free_rollouts_sample_both_sides_with_top_p_095_and_top_p_changes_it(data, tmp_path, fake_openai, monkeypatch):
    """FIDELITY.md (sampling): the reference's full dialogues sample at temperature 0.6 with top-p 0.95
    on both sides; ``--top-p`` changes it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    path = tmp_path / "both.yaml"
    endpoint = f"endpoint: {{base_url: '{fake_openai.base_url}', cache: false, max_retries: 1, concurrency: 1}}"
    path.write_text(f"extends: {TINY}\nname: both\n"
                    f"simulators:\n  api-student: {{kind: openai, model: student-model, {endpoint}}}\n"
                    f"tutors:\n  api-tutor: {{kind: openai, model: tutor-model, {endpoint}}}\n")
    for flags, top_p in (([], 0.95), (["--top-p", "0.8"], 0.8)):
        before = len(fake_openai.chat_requests())
        out = tmp_path / f"roll{top_p}"
        assert main(["rollout", "--profile", str(path), "--simulator", "api-student", "--tutor", "api-tutor",
                     "--data", str(data), "--output", str(out), "--max-turns", "4", "--no-cache", *flags]) == 0
        bodies = [r.body for r in fake_openai.chat_requests()[before:]]
        assert {b["model"] for b in bodies} == {"student-model", "tutor-model"}
        assert all(b["top_p"] == top_p and b["temperature"] == 0.6 and "top_k" not in b for b in bodies)
        assert json.loads((out / "rollout.json").read_text())["top_p"] == top_p


# ---------------------------------------------------------------------------------- the knowledge-state learner


@pytest.fixture(scope="module")
def knowsim_rollouts(data, tmp_path_factory, tiny_profile):
    """Mirror rollouts of the knowledge-state learner with the tiny profile's tutor (the real tutor's turns)."""
    out = tmp_path_factory.mktemp("knowsim") / "roll"
    assert main(["rollout", "--profile", TINY, "--simulator", "knowsim:intermediate", "--tutor", "tiny-tutor", "--mode",
                 "mirror", "--data", str(data), "--output", str(out), "--max-turns", "12", "--no-cache"]) == 0
    return out


def test_knowsim_rollouts_are_written_by_the_learner(data, knowsim_rollouts):
    from simhub.evaluation.runs import simulate
    from simhub.simulation import Target
    from simhub.tutoring.knowsim.simulator import knowsim_simulator

    rollouts = read_jsonl(knowsim_rollouts / "rollouts.jsonl")
    real = {d.id: d for d in read_jsonl(data)}
    assert len(rollouts) == len(real)
    summary = json.loads((knowsim_rollouts / "rollout.json").read_text())
    assert summary["simulator"] == "knowsim:intermediate" and summary["failed"] == 0
    learner = knowsim_simulator("knowsim:intermediate")
    for r in rollouts:
        source = real[r.meta["real_id"]]
        assert r.meta["simulator"] == "knowsim:intermediate" and r.meta["end"] in ("real_length", "max_turns")
        assert learner.graph_for(r) is not None and learner.graph_for(r) is learner.graph_for(source)
        students = [i for i, t in enumerate(r.turns) if t.role == "student"]
        assert students
        # Each student turn is what the learner says after the rollout's own turns before it (not the real student's).
        records = simulate(learner, [Target(r, i) for i in students], progress=False)
        assert [rec["candidate"] for rec in records] == [r.turns[i].content for i in students]
        said = [r.turns[i].content for i in students]
        assert said != [t.content for t in source.turns if t.role == "student"][: len(said)]
        if source.turns[0].role == "tutor":  # the learner's opening query names the question
            assert " ".join(source.question.text.split())[:40] in r.turns[1].content


def test_a_learner_that_ends_the_conversation_ends_its_rollout(data, tmp_path, tiny_profile, monkeypatch):
    import dataclasses

    from simhub.learners.roleplay import ScriptedLearner

    speak = ScriptedLearner.speak

    def ends_on_its_second_turn(self, requests):
        return [dataclasses.replace(t, end=r.turn >= 2) for r, t in zip(requests, speak(self, requests), strict=True)]

    monkeypatch.setattr(ScriptedLearner, "speak", ends_on_its_second_turn)
    out = tmp_path / "roll"
    assert main(["rollout", "--profile", TINY, "--simulator", "knowsim", "--tutor", "tiny-tutor", "--mode", "mirror",
                 "--data", str(data), "--limit", "2", "--output", str(out), "--max-turns", "30", "--no-cache"]) == 0
    rollouts = read_jsonl(out / "rollouts.jsonl")
    assert len(rollouts) == 2
    for r in rollouts:
        assert r.meta["end"] == "marker" and sum(t.role == "student" for t in r.turns) == 2
        assert r.turns[-1].role == "student"
    assert json.loads((out / "rollout.json").read_text())["ends"] == {"marker": 2}


def test_eval_dialogues_runs_tutor_sensitivity_through_the_learner(data, knowsim_rollouts, tmp_path, monkeypatch):
    from simhub.tutoring.knowsim.simulator import KnowledgeStateSimulator

    calls = []
    real_simulate = KnowledgeStateSimulator.simulate

    def spy(self, targets, sampling=None, *, progress=False):
        results = real_simulate(self, targets, sampling, progress=progress)
        calls.append((self.id, [t.dialogue.id for t in targets], results))
        return results

    monkeypatch.setattr(KnowledgeStateSimulator, "simulate", spy)
    out = tmp_path / "dl"
    assert main(["eval-dialogues", "--profile", TINY, "--real", str(data), "--sim", str(knowsim_rollouts), "--output",
                 str(out), "--simulator", "knowsim", "--bootstrap", "100", "--max-tokens", "16",
                 "--sensitivity-prefixes", "8", "--no-cache"]) == 0
    results = json.loads((out / "dialogue_results.json").read_text())
    assert results["simulator"] == "knowsim" and results["tutor"] == "tiny-tutor"  # --simulator over the rollout's
    # Both conditions' prefixes, both simulated student turns of each: the learner answered every one.
    assert len(calls) == 4 and {c[0] for c in calls} == {"knowsim"}
    assert all("@" in i for _, ids, _ in calls for i in ids)
    assert all(r.error is None and r.candidates for _, _, rs in calls for r in rs)
    assert results["metrics"]["tutor_sensitivity"]["value"] is not None
    assert "error" not in results["details"]["tutor_sensitivity"]
    assert "tutor_sensitivity" not in results["null_reasons"]


def test_an_unknown_knowsim_level_is_refused_before_anything_runs(data, tmp_path, capsys):
    missing = str(tmp_path / "no-such-profile.yaml")  # never read: the level is checked first
    for argv in (["rollout", "--tutor", "tiny-tutor", "--data", str(data)],
                 ["eval-dialogues", "--real", str(data), "--sim", str(data)],
                 ["eval", "--data", str(data)]):
        assert main([*argv, "--profile", missing, "--simulator", "knowsim:expert", "--output", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert "unknown knowsim level 'expert'" in err and "known: novice, intermediate, advanced" in err, argv
    assert not (tmp_path / "out").exists()
