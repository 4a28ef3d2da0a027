"""The KT-learner bench's judge panel and LLM role-player, against the fake OpenAI-compatible endpoint:
every session day judged once per judge, the panel's mean and majority, EduClaw-Bench's run formulas
(Help over all days, Gagné and Rosenshine from day 2, hand-over over help-request days), the gate,
a flagged answer left out, and the role-player's JSON answers graded."""

from __future__ import annotations

import json

from simhub.cli import main
from simhub.learners.kt.lms import DayRecord, HelpRecord, ProbeAnswer
from simhub.tutoring.lms.bench import TRACES, read_kt_trace
from simhub.tutoring.lms.judges import panel, parse_judgement, run_axes


def _profile(tmp_path, url: str):
    path = tmp_path / "kt.yaml"
    ep = f"{{base_url: '{url}', cache: false, max_retries: 0, concurrency: 2}}"
    path.write_text(f"name: kt\nsimulators:\n  judge-a: {{kind: openai, model: judge-a, endpoint: {ep}}}\n"
                    f"  judge-b: {{kind: openai, model: judge-b, endpoint: {ep}}}\n"
                    f"  student: {{kind: openai, model: student, endpoint: {ep}}}\n")
    return path


def _is_judge(body: dict) -> bool:
    return body["messages"][0]["content"].startswith("You are an experienced teacher")


def _judges(body: dict) -> str:
    user = body["messages"][-1]["content"]
    active = "[tutor action] assigned items" in user
    if body["model"] == "judge-a":
        return json.dumps({"helpfulness": 7 if active else 2, "gagne": 3 if active else 1, "rosenshine": 2,
                           "handover": False, "reason": "targeted practice"})
    return json.dumps({"helpfulness": 5 if active else 2, "gagne": 2 if active else 1, "rosenshine": 2,
                       "handover": not active, "reason": "ok"})


def _bench(tmp_path, profile, out, *extra):
    return ["tutor-bench", "--learner", "kt-learner", "--profile", str(profile), "--tutor", "scripted:weakest",
            "--tutor", "scripted:silent", "--scenarios", "help-seeker__after-school", "--days", "3",
            "--output", str(out), "--bootstrap", "100", "--cache-dir", str(tmp_path / "cache"), *extra]


def test_the_panel_judges_every_day_once_and_its_axes_reach_the_results(tmp_path, fake_openai, capsys):
    fake_openai.responder = _judges
    profile = _profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "run"
    assert main(_bench(tmp_path, profile, out, "--judge", "judge-a", "--judge", "judge-b")) == 0
    judge_calls = [r for r in fake_openai.chat_requests() if _is_judge(r.body)]
    traces = [read_kt_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    days = sum(len(t.days) for t in traces)
    assert days == 2 * 3 and len(judge_calls) == 2 * days  # days 1-3 are weekdays: every day judged by both
    assert all(r.body["temperature"] == 0.3 for r in judge_calls)
    results = json.loads((out / "results.json").read_text())
    weakest, silent = results["tutors"]["scripted:weakest"], results["tutors"]["scripted:silent"]
    # weakest assigns items every day: panel means (7+5)/2 = 6 and (3+2)/2 = 2.5; silent: 2 and 1
    assert weakest["judged"]["helpfulness"]["mean"] == 6.0 and weakest["judged"]["gagne"]["mean"] == 2.5
    assert silent["judged"]["helpfulness"]["mean"] == 2.0 and silent["judged"]["gagne"]["mean"] == 1.0
    # the hand-over vote is 1 of 2 for silent: a tie is no majority
    assert silent["judged"]["handover_rate"]["mean"] == 0.0
    assert silent["failure_modes"]["no_curriculum"] == 1.0 and weakest["failure_modes"]["no_curriculum"] == 0.0
    assert silent["gate"] == "warn" and "helpfulness 2.00 is below 5.5" in silent["gate_reasons"][0]
    assert weakest["gate"] in ("pass", "monitor")
    # a second run judges nothing again: the votes are in the traces
    before = len(fake_openai.chat_requests())
    assert main(_bench(tmp_path, profile, out, "--judge", "judge-a", "--judge", "judge-b")) == 0
    assert len(fake_openai.chat_requests()) == before


def test_parse_and_panel_rules():
    assert parse_judgement('{"helpfulness": 11, "gagne": 2, "rosenshine": 2, "handover": false}') == {
        "flagged": "helpfulness: 11 is not an integer in 1..10"}
    assert parse_judgement("no idea")["flagged"] == "not JSON"
    assert parse_judgement('{"helpfulness": 4, "gagne": 2, "rosenshine": 3, "handover": "no"}')["flagged"].startswith(
        "handover")
    votes = {"a": {"helpfulness": 4, "gagne": 2, "rosenshine": 3, "handover": True},
             "b": {"helpfulness": 8, "gagne": 4, "rosenshine": 1, "handover": True},
             "c": {"flagged": "not JSON"}}
    assert panel(votes) == {"helpfulness": 6.0, "gagne": 3.0, "rosenshine": 2.0, "handover": True, "judges": 2}
    assert panel({"c": {"flagged": "x"}}) is None


def test_run_axes_follow_educlaw_formulas():
    from types import SimpleNamespace

    def day(d):
        return DayRecord(day=d, pre=[ProbeAnswer(item="q", kc="k", answer="A", correct=True, predicted=0.5)],
                         post=[ProbeAnswer(item="q", kc="k", answer="A", correct=True, predicted=0.5)])

    vote = {1: (2, 5, 5, True), 2: (4, 1, 2, False), 3: (6, 3, 4, True)}
    trace = SimpleNamespace(days=[day(1), day(2), day(3)], help=[HelpRecord(day=1, kc="k", text="help"),
                                                                  HelpRecord(day=3, kc="k", text="help")],
                            judgments={str(d): {"j": {"helpfulness": h, "gagne": g, "rosenshine": r, "handover": o}}
                                       for d, (h, g, r, o) in vote.items()})
    axes = run_axes(trace)
    assert axes["helpfulness"] == 4.0            # (2 + 4 + 6) / 3, every day
    assert axes["gagne"] == 2.0                  # (1 + 3) / 2, days 2..D only
    assert axes["rosenshine"] == 3.0             # (2 + 4) / 2
    assert axes["handover_rate"] == 1.0          # help days 1 and 3, both hand-overs
    assert run_axes(trace, first_days=2)["handover_rate"] == 1.0 and run_axes(trace, first_days=2)["gagne"] == 1.0


def _student(body: dict) -> str:
    user = body["messages"][-1]["content"]
    if "multiple-choice" in user:
        ids = [line[1:-1] for line in user.splitlines() if line.startswith("[") and line.endswith("]")]
        return json.dumps({"answers": {i: "A" for i in ids}})
    return json.dumps({"message": "Can you show me one more example?"})


def test_an_llm_role_player_answers_in_json_and_is_graded(tmp_path, fake_openai):
    fake_openai.responder = _student
    profile = _profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "llm"
    assert main(_bench(tmp_path, profile, out, "--role-player", "student", "--days", "1")) == 0
    traces = [read_kt_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    answers = [a for t in traces for d in t.days for a in (*d.pre, *d.post)]
    assert answers and all(a.answer == "A" and a.p is None for a in answers)
    from simhub.tutoring.lms.bench import learner_parts

    bank = learner_parts()[3]
    assert [a.correct for a in answers] == [bank.items[a.item].answer == "A" for a in answers]
    results = json.loads((out / "results.json").read_text())
    assert results["learner"]["valid_answer_rate"] == 1.0
    system = next(r.body for r in fake_openai.chat_requests())["messages"][0]["content"]
    assert "Topics you are weakest at" in system and "middling maths student" in system  # ability: average
    learner = [m.text for t in traces for d in t.days for m in d.messages if m.role == "learner"]
    assert learner and set(learner) == {"Can you show me one more example?"}


def test_rescore_with_judges_judges_a_finished_run_offline(tmp_path, fake_openai, capsys):
    fake_openai.responder = _judges
    profile = _profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "run"
    assert main(_bench(tmp_path, profile, out, "--no-cache")) == 0
    assert not fake_openai.chat_requests()                      # the stand-in and scripted tutors call nothing
    before = json.loads((out / "results.json").read_text())
    assert before["tutors"]["scripted:silent"]["judged"] is None
    assert main(["tutor-bench", "--learner", "kt-learner", "--rescore", "--output", str(out), "--profile", str(profile),
                 "--judge", "judge-a", "--bootstrap", "100", "--no-cache"]) == 0
    assert len(fake_openai.chat_requests()) == 6                # 2 tutors x 3 days, one judge
    after = json.loads((out / "results.json").read_text())
    assert after["tutors"]["scripted:silent"]["judged"]["helpfulness"]["mean"] == 2.0
    assert after["tutors"]["scripted:weakest"]["delta_solve"] == before["tutors"]["scripted:weakest"]["delta_solve"]
    traces = [read_kt_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert all(set(t.judgments) == {"1", "2", "3"} for t in traces)


def test_stability_of_the_ranking_across_runs(tmp_path, capsys):
    dirs = []
    for seed in (0, 1):
        out = tmp_path / f"s{seed}"
        assert main(["tutor-bench", "--learner", "kt-learner", "--tutor", "scripted:weakest", "--tutor",
                     "scripted:silent", "--scenarios", "confused-productive,help-seeker", "--days", "5", "--seed",
                     str(seed), "--output", str(out), "--bootstrap", "100", "--no-cache"]) == 0
        dirs.append(str(out))
    capsys.readouterr()
    assert main(["tutor-bench", "stability", *dirs]) == 0
    text = capsys.readouterr().out
    r = [json.loads((tmp_path / f"s{s}" / "results.json").read_text())["tutors"] for s in (0, 1)]
    same = [(x["scripted:weakest"]["delta_solve"]["mean"] > x["scripted:silent"]["delta_solve"]["mean"]) for x in r]
    expected = "1.00" if same[0] == same[1] else "-1.00"
    assert f"delta_solve: mean pairwise Kendall tau {expected}, worst pair {expected}" in text
    assert main(["tutor-bench", "stability", dirs[0]]) == 2
