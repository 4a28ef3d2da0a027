"""The correctness/errors judge (docs/protocol.md §3, §8): the reference's scoring table, the paper's request,
and an OpenAI-compatible judge through the Scorer against a local fake endpoint."""

from __future__ import annotations

import json

import pytest

from simhub.config import EndpointSettings, JudgeConfig, MetricModels, ScoringConfig
from simhub.metrics import MetricContext, ScoreItem
from simhub.metrics.judge import JUDGE_OPTIONS, Judge, final_answer, parse_verdict
from simhub.prompts import judge_messages
from simhub.scoring import Scorer
from tests.examples import DIVIDING_FRACTIONS

DIALOGUE = DIVIDING_FRACTIONS


@pytest.mark.parametrize(
    ("answer", "real", "correctness", "errors"),
    [
        # Real "correct": correctness 1 iff the answer is exactly "correct" (after lower/strip).
        ("correct", "correct", 1.0, None),
        ("  Correct\n", "correct", 1.0, None),
        ("correct.", "correct", 0.0, None),
        ("incorrect", "correct", 0.0, None),
        ("na", "correct", 0.0, None),
        # Real "incorrect": correctness iff "incorrect" occurs, errors iff "same error" occurs.
        ("incorrect, same error", "incorrect", 1.0, 1.0),
        ("Incorrect, Same Error", "incorrect", 1.0, 1.0),
        ("incorrect, different error", "incorrect", 1.0, 0.0),
        ("incorrect", "incorrect", 1.0, 0.0),
        ("correct", "incorrect", 0.0, 0.0),
        ("na", "incorrect", 0.0, 0.0),
        # An answer that matches nothing scores 0 (the reference has no special case).
        ("I cannot tell", "incorrect", 0.0, 0.0),
        ("", "correct", 0.0, None),
        # A reasoning block before the verdict is dropped first.
        ("<think>they flipped the wrong one</think>incorrect, same error", "incorrect", 1.0, 1.0),
    ],
)
def test_reference_verdict_table(answer, real, correctness, errors):
    verdict = parse_verdict(answer, real)
    assert (verdict.correctness, verdict.errors) == (correctness, errors)


def test_verdict_label_reads_the_candidates_correctness():
    assert parse_verdict("correct", "incorrect").label == "correct"
    assert parse_verdict("incorrect, same error", "incorrect").label == "incorrect"
    assert parse_verdict("na", "correct").label == "na"
    assert parse_verdict("maybe", "correct").label is None
    assert final_answer("reasoning... assistantfinal  NA ") == "na"


def test_judge_prompt_carries_the_papers_definitions():
    system, user = judge_messages(DIALOGUE, DIALOGUE.turns[:3], "8/5", "incorrect", "2/3")
    text = system["content"].lower()
    # "says they don't know" is incorrect; na covers conversational turns; same error = equivalent.
    assert "do not know" in text and "conversational" in text and "mathematically equivalent" in text
    assert "incorrect, same error" in text and "incorrect, different error" in text
    assert "Turn 3 (Tutor): Yes. Flip the second fraction and multiply." in user["content"]
    assert "8/5" in user["content"] and "incorrect" in user["content"] and "2/3" in user["content"]


def _judge(**kw) -> Judge:
    config = JudgeConfig(kind="openai", endpoint=EndpointSettings(base_url="http://127.0.0.1:9/v1"), **kw)
    return Judge(config, MetricContext())


def test_paper_judge_request_is_gpt5_mini_low_effort():
    judge = _judge(model="gpt-5-mini-2025-08-07", reasoning_effort="low", max_completion_tokens=15000)
    messages = judge_messages(DIALOGUE, DIALOGUE.turns[:3], "8/5", "incorrect", "2/3")
    assert judge.payload(messages) == {"model": "gpt-5-mini-2025-08-07", "messages": messages,
                                       "max_completion_tokens": 15000, "reasoning_effort": "low"}
    # Defaults for a reasoning model are the paper's too: low effort, 15,000 tokens, no temperature.
    assert _judge(model="gpt-5-mini").payload(messages) == {
        "model": "gpt-5-mini", "messages": messages, "max_completion_tokens": 15000, "reasoning_effort": "low"}


def test_gpt41_judge_request_is_greedy_with_max_completion_tokens():
    messages = [{"role": "user", "content": "x"}]
    assert _judge(model="gpt-4.1").payload(messages) == {
        "model": "gpt-4.1", "messages": messages, "temperature": 0.0, "max_completion_tokens": 4000}


def _scorer(base_url: str, tmp_path, **endpoint) -> Scorer:
    judge = JudgeConfig(kind="openai", model="gpt-5-mini",
                        endpoint=EndpointSettings(base_url=base_url, cache_dir=str(tmp_path / "cache"), **endpoint))
    return Scorer(ScoringConfig(metrics=MetricModels(judge=judge)))


def test_openai_judge_through_the_scorer_caches_and_hides_the_key(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-secret-123")
    fake_openai.responder = lambda body: "incorrect, same error"
    items = [ScoreItem(DIALOGUE, 1, "hm"), ScoreItem(DIALOGUE, 3, "8 over 5"), ScoreItem(DIALOGUE, 5, "15/4")]
    result = _scorer(fake_openai.base_url, tmp_path, api_key_env="SIMHUB_JUDGE_API_KEY").score(items, ["correctness", "errors"])
    na, incorrect, correct = result.items
    assert na.scores == {"correctness": None, "errors": None} and na.details["null_reasons"]["correctness"] == "real turn is na"
    assert incorrect.scores == {"correctness": 1.0, "errors": 1.0}
    assert incorrect.details["judge"] == {"answer": "incorrect, same error", "real_label": "incorrect", "verdict": "incorrect"}
    assert correct.scores == {"correctness": 0.0, "errors": None}
    assert len(fake_openai.chat_requests()) == 2  # the na turn is never sent
    assert all(r.authorization == "Bearer sk-secret-123" for r in fake_openai.chat_requests())
    # A rerun is answered from the cache: no request, identical scores; the key is nowhere on disk.
    again = _scorer(fake_openai.base_url, tmp_path, api_key_env="SIMHUB_JUDGE_API_KEY").score(items, ["correctness", "errors"])
    assert [i.scores for i in again.items] == [i.scores for i in result.items]
    assert len(fake_openai.chat_requests()) == 2
    assert all("sk-secret" not in p.read_text() for p in (tmp_path / "cache").rglob("*") if p.is_file())


def test_failed_judge_request_is_null_with_its_cause(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-secret-123")
    fake_openai.fail_next(10, 503)
    scorer = _scorer(fake_openai.base_url, tmp_path, max_retries=1, cache=False, api_key_env="SIMHUB_JUDGE_API_KEY")
    result = scorer.score([ScoreItem(DIALOGUE, 3, "8/5")], ["correctness", "errors", "rouge_l"])
    item = result.items[0]
    assert item.scores == {"correctness": None, "errors": None, "rouge_l": 1.0}
    assert item.details["null_reasons"]["correctness"] == f"judge request failed: HTTP 503 at {fake_openai.base_url}"
    assert "sk-secret" not in json.dumps(result.to_dict())
    assert len(fake_openai.chat_requests()) == 2  # one try, one retry


def test_judge_endpoint_override_from_the_environment(monkeypatch):
    from simhub.config import load_profile

    monkeypatch.setenv("SIMHUB_JUDGE_BASE_URL", "http://localhost:8001/v1")
    profile = load_profile("paper-8b")
    assert profile.scoring.metrics.judge.endpoint.base_url == "http://localhost:8001/v1"
    assert profile.scoring.metrics.judge.model == "gpt-5-mini-2025-08-07"
    # The key goes with the URL: only SIMHUB_JUDGE_API_KEY, and only when it is set.
    assert profile.scoring.metrics.judge.endpoint.api_key_env is None
    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-judge")
    assert load_profile("paper-8b").scoring.metrics.judge.endpoint.api_key_env == "SIMHUB_JUDGE_API_KEY"


def test_local_judge_options_cover_every_verdict():
    assert {parse_verdict(o, "incorrect").label for o in JUDGE_OPTIONS} == {"correct", "incorrect", "na"}


@pytest.mark.parametrize("model", ["gpt-5-mini", "gpt-4.1"])
def test_the_dialogue_level_labels_ask_the_judge_endpoint_with_their_own_unchanged_bodies(model, fake_openai, tmp_path,
                                                                                          monkeypatch):
    """One judge endpoint for the metric and the dialogue-level labeller: the same shared client, but
    the labeller's requests stay what they were (live, never the Batch API; no temperature; no
    default reasoning effort; 4,000 tokens) and a failed request is an unlabelled turn."""
    from simhub.config import load_profile
    from simhub.evaluation.dialogue_eval import Labeller
    from simhub.metrics.judge import judge_endpoint
    from simhub.prompts import correctness_messages

    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-judge-456")
    fake_openai.responder = lambda body: "Correct, they flipped and multiplied"
    path = tmp_path / "j.yaml"
    path.write_text(f"name: j\nscoring:\n  metrics:\n    judge: {{kind: openai, model: {model}, endpoint: "
                    f"{{base_url: '{fake_openai.base_url}', cache: false, batch_api: true, max_retries: 0, "
                    "api_key_env: SIMHUB_JUDGE_API_KEY}}\n")
    profile = load_profile(path)
    config = profile.scoring.metrics.judge
    labeller = Labeller(profile, None)
    items = [(DIALOGUE, i) for i in DIALOGUE.student_turn_indices()[:2]]
    fake_openai.fail_next(1, 503)
    labels = labeller.correctness_labels(items)
    assert sorted(labels, key=str) == [None, "correct"]
    assert fake_openai.requests_to("POST", "/v1/batches") == []
    bodies = sorted((r.body for r in fake_openai.chat_requests()), key=json.dumps)
    expected = sorted(({"model": model, "max_completion_tokens": 4000,
                        "messages": correctness_messages(d.turns[:i], d.turns[i].content, d)} for d, i in items),
                      key=json.dumps)
    # The failed request and the answered one: each prompt sent once, with the labeller's exact body.
    assert bodies == expected
    assert {r.authorization for r in fake_openai.chat_requests()} == {"Bearer sk-judge-456"}
    judge = Judge(config, MetricContext())
    assert judge.endpoint().client is judge_endpoint(config, reasoning_effort=None).client
    assert judge.endpoint().batch and not judge_endpoint(config, reasoning_effort=None, batch=False).batch
