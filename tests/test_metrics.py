"""Model-backed metrics and the Scorer on the tiny models."""

from __future__ import annotations

import json
import math
import threading
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from simhub.backends.hf import ModelRef
from simhub.metrics.judge import (
    JudgeRequest,
    OpenAIJudge,
    build_chat_payload,
    parse_chat_completion,
    parse_verdict,
)
from simhub.metrics.registry import check_metric_names
from simhub.schema import ACTS, Dialogue, Question, Turn
from simhub.scoring import ScoreItem, Scorer, ScorerConfig

DIALOGUE = Dialogue(
    id="q1-i1",
    question=Question(text="Question Text: What is 5/8 divided by 1/6?", correct_option="A", solution="15/4"),
    kcs=["Dividing fractions"],
    turns=[
        Turn(role="tutor", content="What is 5/8 divided by 1/6?", kcs=["Dividing fractions"]),
        Turn(role="student", content="5/8 divided by 1/6?", act="Seek Information", correctness="na"),
        Turn(role="tutor", content="Yes. Flip the second fraction and multiply."),
        Turn(role="student", content="8/5", act="Math Answer", correctness="incorrect"),
        Turn(role="tutor", content="Not quite. Try again."),
        Turn(role="student", content="15/4", act="Math Answer", correctness="correct"),
    ],
)


# --------------------------------------------------------------------------- judge rules


@pytest.mark.parametrize(
    ("answer", "real", "correctness", "errors"),
    [
        ("correct", "correct", 1.0, None),
        ("Correct", "correct", 1.0, None),
        ("correct.", "correct", 0.0, None),  # reference: exactly "correct"
        ("incorrect", "correct", 0.0, None),
        ("na", "correct", 0.0, None),
        ("incorrect, same error", "incorrect", 1.0, 1.0),
        ("incorrect, different error", "incorrect", 1.0, 0.0),
        ("incorrect", "incorrect", 1.0, 0.0),
        ("correct", "incorrect", 0.0, 0.0),
        ("na", "incorrect", 0.0, 0.0),
        ("correct", "na", None, None),
        ("incorrect, same error", "na", None, None),
        ("I cannot tell", "incorrect", None, None),
        (None, "correct", None, None),
    ],
)
def test_judge_answer_forms(answer, real, correctness, errors):
    verdict = parse_verdict(answer, real)
    assert verdict.correctness == correctness
    assert verdict.errors == errors
    assert verdict.raw == answer


def test_unparseable_answer_keeps_raw_text_and_reason():
    verdict = parse_verdict("maybe?", "correct")
    assert verdict.raw == "maybe?" and verdict.reasons["correctness"] == "judge answer unparseable"


def test_chat_payload_and_parse_are_pure():
    messages = [{"role": "user", "content": "hi"}]
    assert build_chat_payload("m", messages) == {"model": "m", "messages": messages, "temperature": 0.0, "max_tokens": 4000}
    assert parse_chat_completion({"choices": [{"message": {"content": "correct"}}]}) == "correct"
    with pytest.raises(ValueError, match="choices"):
        parse_chat_completion({"error": "x"})


class _FakeChat(BaseHTTPRequestHandler):
    answers: typing.ClassVar[list] = []
    seen: typing.ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        status, text = type(self).answers.pop(0) if type(self).answers else (200, "correct")
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_openai():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    _FakeChat.answers, _FakeChat.seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_judge_retries_caches_and_hides_key(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-secret-123")
    _FakeChat.answers = [(429, ""), (503, ""), (200, "incorrect, same error")]
    judge = OpenAIJudge(fake_openai, "gpt-test", backoff=0.01, cache_dir=tmp_path / "cache", concurrency=1)
    request = JudgeRequest(DIALOGUE, DIALOGUE.turns[:3], "8/5", "incorrect", "8 over 5")
    assert judge.answer([request]) == ["incorrect, same error"]
    assert len(_FakeChat.seen) == 3
    path, auth, body = _FakeChat.seen[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-secret-123"
    assert body == build_chat_payload("gpt-test", request.messages())
    # The second call is served from the on-disk cache, which never stores the key.
    assert judge.answer([request]) == ["incorrect, same error"]
    assert len(_FakeChat.seen) == 3
    assert all("sk-secret" not in p.read_text() for p in (tmp_path / "cache").rglob("*.json"))


def test_openai_judge_failure_is_null_not_crash(fake_openai, monkeypatch):
    monkeypatch.setenv("SIMHUB_JUDGE_API_KEY", "sk-secret-123")
    _FakeChat.answers = [(401, "")]
    judge = OpenAIJudge(fake_openai, "gpt-test", backoff=0.01, max_retries=2)
    from simhub.metrics.judge import JudgeAPIError

    with pytest.raises(JudgeAPIError) as info:
        judge._post(build_chat_payload("gpt-test", []))
    assert "HTTP 401" in str(info.value) and "sk-secret" not in str(info.value)
    assert len(_FakeChat.seen) == 1  # 401 is not retried

    # Through the Scorer: a failing judge gives null scores with a reason, the batch still scores.
    _FakeChat.answers = [(500, "")] * 3
    scorer = Scorer(ScorerConfig(judge={"kind": "openai", "base_url": fake_openai, "model": "gpt-test", "backoff": 0.01, "max_retries": 2}))
    result = scorer.score([ScoreItem(DIALOGUE, 3, "8/5")], ["correctness", "errors", "rouge_l"])
    item = result.items[0]
    assert item.scores == {"correctness": None, "errors": None, "rouge_l": 1.0}
    assert item.details["null_reasons"]["correctness"] == "judge gave no answer"
    assert "sk-secret" not in json.dumps(result.to_dict())
    assert len(_FakeChat.seen) == 1 + 3  # 500 is retried: one try and two retries


# --------------------------------------------------------------------------- model metrics


@pytest.fixture(scope="module")
def scorer(tiny_kit):
    llama = ModelRef(str(tiny_kit["llama"]))
    return Scorer(ScorerConfig(acts=llama, judge={"kind": "local", "model": str(tiny_kit["llama"])}, tutor_response=llama))


def test_tutor_response_matches_independent_computation(scorer, tiny_kit):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simhub.metrics.tutor_response import substitute
    from simhub.prompts import tutor_messages

    tok = AutoTokenizer.from_pretrained(tiny_kit["llama"])
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()
    items = [(DIALOGUE, 1, "ok"), (DIALOGUE, 3, "is it 15/4 because you flip and multiply?"), (DIALOGUE, 5, "x")]
    got = scorer.tutor_model().score(items)
    for (dialogue, index, candidate), value in zip(items[:2], got[:2], strict=True):
        simulated = substitute(dialogue, index, candidate)
        prompt = tok.apply_chat_template(tutor_messages(simulated, upto=index + 1), add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        target = [*tok.encode(dialogue.turns[index + 1].content, add_special_tokens=False), tok.convert_tokens_to_ids("<|eot_id|>")]
        ids = torch.tensor([prompt + target])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1 : -1]
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(target))
        assert value == pytest.approx(math.exp(-nll.item()), abs=1e-5)
    assert got[2] is None  # last turn: no tutor turn follows


def test_acts_prediction_always_a_label(scorer):
    model = scorer.act_model()
    texts = ["", "15/4", "lol what is this", "I don't get it", "x" * 500]
    predicted, scores = model.predict([(DIALOGUE, DIALOGUE.turns[:3], t) for t in texts])
    assert all(p in ACTS for p in predicted)
    assert scores.shape == (len(texts), len(ACTS))


def test_scorer_null_rules_and_details(scorer):
    items = [ScoreItem(DIALOGUE, 1, "what?"), ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 5, "15/4")]
    result = scorer.score(items, ["acts", "correctness", "errors", "rouge_l", "tutor_response"])
    na, incorrect, last = result.items
    assert na.scores["correctness"] is None and na.scores["errors"] is None
    assert na.details["null_reasons"]["correctness"] == "real turn is na"
    assert incorrect.scores["correctness"] in (0.0, 1.0) and incorrect.scores["errors"] in (0.0, 1.0)
    assert incorrect.details["judge"]["answer"] in ("correct", "incorrect, same error", "incorrect, different error", "na")
    assert incorrect.scores["rouge_l"] == 1.0
    assert last.scores["tutor_response"] is None
    assert last.details["null_reasons"]["tutor_response"] == "no tutor turn follows this student turn"
    assert last.scores["errors"] is None  # real turn is correct
    assert all(item.details["acts"]["predicted"] in ACTS for item in result.items)
    assert result.summary["correctness"]["count"] == 2
    assert result.summary["tutor_response"]["count"] == 2


def test_bad_items_get_per_item_errors(scorer):
    items = [
        ScoreItem(DIALOGUE, 0, "x"),  # tutor turn
        ScoreItem(DIALOGUE, 99, "x"),  # out of range
        ScoreItem(DIALOGUE, 3, ""),  # empty
        ScoreItem(DIALOGUE, 3, "y" * 20000),  # too long
        ScoreItem(DIALOGUE, 3, "8/5"),  # fine
    ]
    result = scorer.score(items, ["rouge_l", "acts"])
    errors = [item.error for item in result.items]
    assert "tutor turn" in errors[0]
    assert "out of range" in errors[1]
    assert errors[2] == "candidate: empty text"
    assert "20000 characters" in errors[3]
    assert errors[4] is None and result.items[4].scores["rouge_l"] == 1.0
    assert result.summary["rouge_l"]["count"] == 1


def test_unknown_and_unconfigured_metrics():
    from simhub.errors import ConfigError

    with pytest.raises(ConfigError, match="did you mean 'rouge_l'"):
        check_metric_names(["rougel"])
    with pytest.raises(ConfigError, match="not configured"):
        Scorer(ScorerConfig(cosine=None)).score([ScoreItem(DIALOGUE, 3, "a")], ["acts"])


def test_missing_act_label_is_null(scorer):
    unlabelled = Dialogue(id="u", question=DIALOGUE.question, turns=[Turn(role="tutor", content="Hi"), Turn(role="student", content="hi")])
    result = scorer.score([ScoreItem(unlabelled, 1, "hello")], ["acts", "correctness"])
    item = result.items[0]
    assert item.scores == {"acts": None, "correctness": None}
    assert item.details["null_reasons"]["acts"] == "real turn has no act label"
    assert item.details["null_reasons"]["correctness"] == "real turn has no correctness label"


def test_cosine_minilm_offline():
    result = Scorer(ScorerConfig()).score(
        [ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 3, "I like football")], ["cosine"]
    )
    same, different = (item.scores["cosine"] for item in result.items)
    assert same == pytest.approx(1.0, abs=1e-5)
    assert -1.0 <= different < 0.9


def test_packed_label_scoring_equals_separate(scorer):
    import torch

    lm = scorer.act_model().lm
    prompts = [lm.chat_ids([{"role": "user", "content": t}]) for t in ("What is 3/4 of 20?", "ok", "Can you explain how you got 5/8 please?")]
    options = [[*lm.text_ids(label), lm.eot_id] for label in ACTS]
    best, packed = lm.choose(prompts, options)
    separate = np.zeros_like(packed)
    for i, prompt in enumerate(prompts):
        for k, option in enumerate(options):
            with torch.no_grad():
                logits = lm.model(torch.tensor([prompt + option])).logits[0, len(prompt) - 1 : -1]
            separate[i, k] = torch.log_softmax(logits, -1).gather(1, torch.tensor(option)[:, None]).sum().item()
    assert packed == pytest.approx(separate, abs=1e-4)
    assert best == [int(i) for i in separate.argmax(axis=1)]


@pytest.mark.parametrize("row_tokens", [2048, 40])
def test_prefix_tree_packing_equals_separate(scorer, row_tokens):
    """Shared prefixes, duplicates, a prefix of another sequence and row overflow all give the
    hidden states of each sequence run alone."""
    import torch

    lm = scorer.act_model().lm
    base = lm.text_ids("Turn 1 (Tutor): What is 3/4 of 20? Turn 2 (Student): 15 Turn 3 (Tutor): Well done!")
    seqs = [base, base[:12], [*base[:12], 7, 8, 9], base, [*base[:20], 5], [3, 4, 5], base[:12]]
    readouts = [list(range(len(s))) for s in seqs]
    old = lm.row_tokens
    lm.row_tokens = row_tokens
    try:
        got = lm.hidden_at(seqs, readouts)
    finally:
        lm.row_tokens = old
    for seq, hidden in zip(seqs, got, strict=True):
        with torch.no_grad():
            alone = lm.model.model(torch.tensor([seq])).last_hidden_state[0]
        assert torch.allclose(hidden, alone, atol=1e-4)
