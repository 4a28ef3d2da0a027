"""Interaction quality (IQ) in simhub tutor-bench: an LLM rater (the fake OpenAI-compatible endpoint)
rates every finished conversation once; the scores live in the traces and join the results and R̄."""

from __future__ import annotations

import json

import pytest

from simhub.cli import main
from simhub.tutoring.knowsim import read_trace
from simhub.tutoring.knowsim.bench import TRACES
from simhub.tutoring.knowsim.iq import parse_rating
from simhub.tutoring.knowsim.results import RESULTS_FILE
from tests.integration.test_tutor_bench import _endpoint_profile

FAST = ["--extractor", "offline:lexical", "--bootstrap", "300"]
TUTOR_TEXT = "Let's look at what a fraction is, step by step."


def _is_rater(body: dict) -> bool:
    return body["messages"][0]["content"].startswith("You review a finished chat")


def _rater_answers(answer):
    """A responder: the tutor always says TUTOR_TEXT; the rater's answer is ``answer(user prompt)``."""

    def responder(body):
        if _is_rater(body):
            return answer(body["messages"][-1]["content"])
        return TUTOR_TEXT

    return responder


def _by_tutor(user: str) -> str:
    # The endpoint tutor is rated well, the dump poorly; the score varies with the item (its question).
    base = 7 if TUTOR_TEXT in user else 2
    return json.dumps({"score": base + len(user.split("\n\n")[0]) % 3, "reason": "clear and responsive"})


def _rater_requests(server) -> list:
    return [r for r in server.chat_requests() if _is_rater(r.body)]


def _tutor(results: dict, name: str) -> dict:
    return next(t for t in results["tutors"] if t["tutor"] == name)


def _bench(profile, out, *extra):
    return ["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--tutor", "scripted:dump", "--n", "4",
            "--levels", "novice,advanced", "--set", "max_turns=2", "--output", str(out), *FAST, *extra]


def test_an_iq_rater_scores_every_conversation_and_joins_the_ranks(tmp_path, fake_openai, capsys):
    fake_openai.responder = _rater_answers(_by_tutor)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    out = tmp_path / "iq"
    args = _bench(profile, out, "--iq-rater", "api-extractor", "--cache-dir", str(tmp_path / "cache"))
    assert main(args) == 0
    printed = capsys.readouterr().out
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert len(traces) == 2 * 4 * 2 and all(t.failed is None for t in traces)
    # One rating per conversation, through the JSON mode of the endpoint, stored in its trace.
    requests = _rater_requests(fake_openai)
    assert len(requests) == len(traces)
    assert all(r.body["response_format"] == {"type": "json_object"} and r.body["model"] == "extractor-model"
               for r in requests)
    assert any(TUTOR_TEXT in r.body["messages"][-1]["content"] for r in requests)
    for t in traces:
        assert t.schema_version == 3 and t.iq_flag is None and t.iq_reason == "clear and responsive"
        assert (7 <= t.iq <= 9) if t.tutor == "api-tutor" else (2 <= t.iq <= 4)
        assert t.models["iq_rater"]["id"] == "api-extractor" and t.models["iq_rater"]["prompt"].startswith("iq-")

    results = json.loads((out / RESULTS_FILE).read_text())
    assert results["schema_version"] == 2 and results["flagged_ratings"] == 0
    api, dump = _tutor(results, "api-tutor"), _tutor(results, "scripted:dump")
    iq = api["marginal"]["iq"]
    mine = [t.iq for t in traces if t.tutor == "api-tutor"]
    assert iq["n"] == 8 and iq["mean"] == pytest.approx(sum(mine) / len(mine))  # equal level sizes
    assert iq["ci95"] is not None and iq["ci95"][0] <= iq["mean"] <= iq["ci95"][1]
    novice = api["levels"]["novice"]["metrics"]["iq"]
    assert novice["n"] == 4 and novice["ci95"] is not None and api["levels"]["novice"]["flagged_ratings"] == 0
    # IQ is ranked (higher is better) and R̄ is the mean over KG, DC, CO and IQ.
    assert api["ranks"]["iq"] == 1.0 and dump["ranks"]["iq"] == 2.0
    for r in (api, dump):
        assert set(r["ranks"]) == {"kg", "dc", "co", "iq"}
        assert r["mean_rank"] == pytest.approx(sum(r["ranks"].values()) / 4)
    pooled = next(c for c in results["comparisons"] if c["metric"] == "iq" and c["level"] == "all")
    assert pooled["a"] == "api-tutor" and pooled["diff"] > 4 and pooled["n"] == 8 and pooled["p_holm"] is not None
    assert "IQ" in printed and "rank KG  DC  CO  IQ" in printed

    # A resumed run (the same command into the same folder) asks the rater nothing more.
    assert main(args) == 0
    assert len(_rater_requests(fake_openai)) == len(traces)
    assert json.loads((out / RESULTS_FILE).read_text())["tutors"] == results["tutors"]
    # Rescoring without a rater keeps the stored IQ.
    assert main(["tutor-bench", "--rescore", "--output", str(out), "--bootstrap", "300"]) == 0
    rescored = json.loads((out / "rescored-paper.json").read_text())
    assert rescored["schema_version"] == 2
    assert _tutor(rescored, "api-tutor")["marginal"]["iq"] == iq and _tutor(rescored, "api-tutor")["ranks"]["iq"] == 1.0
    assert len(_rater_requests(fake_openai)) == len(traces)


def test_an_unusable_rating_is_flagged_and_counted_not_a_crash(tmp_path, fake_openai, capsys):
    answers = iter(["I would say it went fine.", json.dumps({"score": 11, "reason": "great"})])

    def answer(user):
        return next(answers, json.dumps({"score": 6, "reason": "fine"}))

    fake_openai.responder = _rater_answers(answer)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=1)
    out = tmp_path / "flagged"
    assert main(_bench(profile, out, "--iq-rater", "api-extractor", "--no-cache")) == 0
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    flags = sorted(t.iq_flag for t in traces if t.iq_flag)
    assert flags == ["not JSON", "score 11 outside 1..10"]
    assert all(t.iq is None for t in traces if t.iq_flag) and all(t.failed is None for t in traces)
    assert sum(t.iq == 6 for t in traces) == len(traces) - 2
    results = json.loads((out / RESULTS_FILE).read_text())
    assert results["flagged_ratings"] == 2 and results["failed"] == 0
    assert sum(t["flagged_ratings"] for t in results["tutors"]) == 2
    assert sum(t["marginal"]["iq"]["n"] for t in results["tutors"]) == len(traces) - 2
    assert "2 flagged IQ ratings" in capsys.readouterr().out


@pytest.mark.parametrize(("text", "flag"), [("[7]", "not a JSON object"), ('{"score": "7"}', "no integer score"),
                                            ('{"score": true}', "no integer score"),
                                            ('{"score": 0}', "score 0 outside 1..10")])
def test_rating_answers_are_checked(text, flag):
    assert parse_rating(text).flagged == flag and parse_rating(text).score is None
    assert parse_rating('{"score": 10.0, "reason": "r"}').score == 10


def test_without_a_rater_nothing_changes_and_a_version_1_trace_still_reads(tmp_path, fake_openai, capsys):
    fake_openai.responder = _rater_answers(_by_tutor)
    run = tmp_path / "plain"
    assert main(["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "2", "--levels",
                 "novice", "--output", str(run), "--no-cache", *FAST]) == 0
    assert "IQ" not in capsys.readouterr().out
    results = json.loads((run / RESULTS_FILE).read_text())
    assert results["schema_version"] == 1 and "flagged_ratings" not in results
    for t in results["tutors"]:
        assert "iq" not in t["marginal"] and set(t["ranks"]) == {"kg", "dc", "co"} and "flagged_ratings" not in t
    assert not any(c["metric"] == "iq" for c in results["comparisons"])
    files = sorted((run / TRACES).glob("*.json"))
    assert all(read_trace(f).iq is None and not read_trace(f).rated for f in files)

    # A version-1 trace (written before IQ existed: no IQ fields) reads as a trace without IQ.
    for f in files:
        raw = json.loads(f.read_text())
        for key in ("iq", "iq_reason", "iq_flag"):
            raw.pop(key)
        raw["schema_version"] = 1
        f.write_text(json.dumps(raw))
    old = read_trace(files[0])
    assert old.schema_version == 1 and old.iq is None and old.iq_flag is None
    assert main(["tutor-bench", "--rescore", "--output", str(run), "--bootstrap", "300"]) == 0
    assert json.loads((run / "rescored-paper.json").read_text())["tutors"] == results["tutors"]

    # Rescoring with a rater rates the old traces, stores the ratings, and a later rescore keeps them.
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    assert main(["tutor-bench", "--rescore", "--output", str(run), "--profile", str(profile), "--iq-rater",
                 "api-extractor", "--no-cache", "--bootstrap", "300"]) == 0
    assert len(_rater_requests(fake_openai)) == len(files)
    rated = [read_trace(f) for f in files]
    assert all(t.schema_version == 3 and 2 <= t.iq <= 4 for t in rated)
    first = json.loads((run / "rescored-paper.json").read_text())
    assert all("iq" in t["ranks"] for t in first["tutors"])
    assert main(["tutor-bench", "--rescore", "--output", str(run), "--bootstrap", "300"]) == 0
    again = json.loads((run / "rescored-paper.json").read_text())
    assert [read_trace(f).iq for f in files] == [t.iq for t in rated]
    assert again["tutors"] == first["tutors"] and len(_rater_requests(fake_openai)) == len(files)


def test_a_newer_trace_or_results_version_is_refused(tmp_path, capsys):
    from simhub.errors import DataError
    from simhub.tutoring.knowsim import read_results

    run = tmp_path / "run"
    assert main(["tutor-bench", "--tutor", "scripted:dump", "--n", "1", "--levels", "novice", "--output", str(run),
                 "--no-cache", *FAST]) == 0
    path = run / RESULTS_FILE
    assert read_results(path).schema_version == 1
    raw = json.loads(path.read_text())
    raw["schema_version"] = 4
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"results schema_version 4 is newer than this simhub reads \(1, 2 and 3\)"):
        read_results(path)


def test_the_report_section_shows_iq_only_when_it_was_rated(tmp_path, fake_openai):
    from simhub.tutoring.knowsim.report import bench_section, load_bench

    fake_openai.responder = _rater_answers(_by_tutor)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    base = ["tutor-bench", "--tutor", "scripted:stepwise", "--tutor", "scripted:dump", "--n", "2", "--levels",
            "novice", "--no-cache", *FAST]
    assert main([*base, "--output", str(tmp_path / "plain")]) == 0
    assert main([*base, "--output", str(tmp_path / "rated"), "--profile", str(profile), "--iq-rater",
                 "api-extractor"]) == 0
    _, _, plain = bench_section([load_bench(tmp_path / "plain")])
    _, _, rated = bench_section([load_bench(tmp_path / "rated")])
    assert "IQ ↑" not in plain and "mean rank over KG, DC and CO " in plain and "ratings were unusable" not in plain
    assert "<th>IQ ↑</th>" in rated and "mean rank over KG, DC, CO and IQ " in rated
    assert "0 ratings were unusable" in rated


def test_a_failing_rater_flags_the_rating_with_its_cause_and_a_resumed_run_asks_again(tmp_path, fake_openai, capsys):
    fake_openai.responder = _rater_answers(_by_tutor)
    fake_openai.fail_next(2, 503)  # the first rating request fails twice (try + retry); only the rater is an endpoint
    profile = _endpoint_profile(tmp_path, fake_openai.base_url, concurrency=1)
    out = tmp_path / "down"
    args = ["tutor-bench", "--profile", str(profile), "--tutor", "scripted:dump", "--n", "2", "--levels", "novice",
            "--output", str(out), "--no-cache", "--iq-rater", "api-extractor", *FAST]
    assert main(args) == 0
    traces = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert [t.iq_flag for t in traces].count(f"rater: HTTP 503 at {fake_openai.base_url}") == 1
    assert all(t.failed is None and t.metrics is not None for t in traces)
    assert json.loads((out / RESULTS_FILE).read_text())["flagged_ratings"] == 1
    asked = len(_rater_requests(fake_openai))
    # Resumed: only the conversation whose rater failed is rated again.
    assert main(args) == 0
    assert len(_rater_requests(fake_openai)) == asked + 1
    again = [read_trace(f) for f in sorted((out / TRACES).glob("*.json"))]
    assert all(t.iq is not None and t.iq_flag is None for t in again)
    assert json.loads((out / RESULTS_FILE).read_text())["flagged_ratings"] == 0
    # The rater is one of the folder's settings, both ways.
    capsys.readouterr()
    assert main([a for a in args if a not in ("--iq-rater", "api-extractor")]) == 2
    assert "another iq_rater" in capsys.readouterr().err


def test_agree_checks_the_rater_against_human_iq_ratings(tmp_path, fake_openai, capsys):
    fake_openai.responder = _rater_answers(_by_tutor)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    run = tmp_path / "run"
    assert main(["tutor-bench", "--profile", str(profile), "--tutor", "api-tutor", "--tutor", "scripted:dump", "--n",
                 "2", "--levels", "novice", "--set", "max_turns=2", "--output", str(run), "--no-cache",
                 "--iq-rater", "api-extractor", *FAST]) == 0
    rows = ["level,condition,metric,value", *(f"novice,api-tutor,iq,{v}" for v in (8, 9)),
            *(f"novice,scripted:dump,iq,{v}" for v in (3, 2))]
    human = tmp_path / "human.csv"
    human.write_text("\n".join(rows) + "\n")
    assert main(["tutor-bench", "agree", str(human), str(run)]) == 0
    result = json.loads((run / "agreement.json").read_text())
    (contrast,) = [c for c in result["contrasts"] if c["metric"] == "iq"]
    assert contrast["high_signal"] and contrast["agrees"] and contrast["sim_delta"] == 1.0


def test_a_role_names_a_model_of_the_models_section_and_a_simulator_entry_still_works_with_a_note(
        tmp_path, fake_openai, capsys):
    """Profiles name the models every role uses under ``models:``; a ``simulators:``/``tutors:`` entry is still
    read in a role, with a deprecation note on stderr, and rates the same."""
    fake_openai.responder = _rater_answers(_by_tutor)
    profile = _endpoint_profile(tmp_path, fake_openai.base_url)
    ep = f"{{base_url: '{fake_openai.base_url}', cache: false, max_retries: 1, concurrency: 4}}"
    profile.write_text(profile.read_text() + f"models:\n  rater: {{kind: openai, model: extractor-model, endpoint: {ep}}}\n")
    assert main(_bench(profile, tmp_path / "new", "--iq-rater", "rater", "--no-cache")) == 0
    assert "simhub: note" not in capsys.readouterr().err
    assert main(_bench(profile, tmp_path / "old", "--iq-rater", "api-extractor", "--no-cache")) == 0
    err = capsys.readouterr().err
    assert "--iq-rater api-extractor names a simulators: entry" in err and "models: section" in err

    def scores(folder):
        return {f.name: read_trace(f).iq for f in sorted((folder / TRACES).glob("*.json"))}

    assert scores(tmp_path / "new") == scores(tmp_path / "old") and any(scores(tmp_path / "new").values())
    assert main(_bench(profile, tmp_path / "bad", "--iq-rater", "ratr")) == 2
    err = capsys.readouterr().err
    assert "unknown model 'ratr'" in err and "rater" in err  # the models: section's names are offered first
