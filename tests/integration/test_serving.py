"""The HTTP service through Litestar's TestClient (in-process): contract, errors, limits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("litestar")

from litestar.testing import TestClient

from simhub.config import EmbedderConfig, MetricModels, Profile, ScoringConfig, load_profile
from simhub.serving.app import create_app
from simhub.serving.settings import ServiceSettings
from tests.doubles.server_process import metric_total

DEMO = Path(__file__).parents[1] / "profiles" / "tiny.yaml"
QUESTION = {"text": "Question Text: What is 5/8 divided by 1/6?\nAnswer A Text: 15/4"}
PAPER_DIALOGUE = {
    "id": "paper-example",
    "question": QUESTION,
    "kcs": ["Divide fractions"],
    "turns": [
        {"role": "tutor", "content": "What calculation do we need to do here?"},
        {"role": "student", "content": "5/8 divided by 1/6?", "act": "Math Answer", "correctness": "correct"},
        {"role": "tutor", "content": "Yes! How do we divide fractions?"},
        {"role": "student", "content": "flip the second one and multiply", "act": "Math Answer", "correctness": "correct"},
    ],
}
HISTORY = {**PAPER_DIALOGUE, "turns": PAPER_DIALOGUE["turns"][:3]}
ROUGE_CASES = [("8/5", 0.25), ("So, would I divide 1/6 by 5/8?", 0.2667), ("5/8 divided by 1/6", 1.0)]
MINI_PROFILE = Profile(name="mini")


def wait_ready(client, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = client.get("/ready")
        if r.status_code == 200:
            return r.json()
        assert r.status_code == 503, r.text
        assert r.json().get("error") is None, r.json()
        time.sleep(0.2)
    raise AssertionError("service never became ready")


@pytest.fixture(scope="module")
def client(tiny_profile):
    profile = load_profile(DEMO)
    settings = ServiceSettings.load(profile, max_items=8, max_body_bytes=300_000, max_tokens=64)
    with TestClient(create_app(settings, profile)) as c:
        wait_ready(c)
        yield c


def mini_client(**overrides) -> TestClient:
    """An app with no models (ROUGE-L only, no simulators): for auth, limits and queue tests."""
    return TestClient(create_app(ServiceSettings.load(MINI_PROFILE, **overrides), MINI_PROFILE))


def rouge_items():
    return [{"dialogue": PAPER_DIALOGUE, "turn_index": 1, "candidate": c} for c, _ in ROUGE_CASES]


def assert_error(r, status: int, field: str | None = None, words: str = ""):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"type", "message", "field"}
    if field is not None:
        assert err["field"] == field, err
        assert field.split("[")[0] in err["message"]
    assert words.lower() in err["message"].lower()
    assert "Traceback" not in r.text and "/tmp/" not in r.text and "site-packages" not in r.text
    return err


# ---------------------------------------------------------------------------------------- endpoints


def test_health_ready_models_docs(client):
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/ready").json()["ready"] is True
    models = client.get("/models").json()
    sims = {m["id"]: m for m in models["simulators"]}
    assert set(sims) == {"tiny-student", "tiny-student-lora", "baseline:zero-shot", "baseline:ocean", "baseline:icl",
                         "baseline:reasoning", "baseline:oracle"}  # the paper's baselines are in every profile
    assert sims["tiny-student"]["base_model"] == "tiny:llama" and sims["tiny-student"]["backend"] == "transformers"
    assert sims["tiny-student"]["persona"] == "none"  # docs/protocol.md §8: trained students see no persona
    assert sims["tiny-student-lora"]["adapter"] == "random-lora:tiny-student-lora"
    assert sims["baseline:reasoning"]["base_model"] == "gpt-5-mini" and sims["baseline:oracle"]["baseline"] == "oracle"
    assert "/tmp" not in json.dumps(models) and "simhub-test-home" not in json.dumps(models)  # no server paths
    # every metric of the profile, rouge_l (no model) too
    assert {m["id"] for m in models["metrics"]} == {"acts", "judge", "knowledge", "cosine", "tutor_response", "rouge_l"}
    assert all("base_model" in m for m in models["metrics"] if m["id"] != "rouge_l")
    assert all(m["available"] for m in models["metrics"])
    # the paper's baselines are OpenAI models and no key is set here: unavailable, naming the variables
    assert sims["baseline:zero-shot"]["available"] is False and sims["tiny-student"]["available"] is True
    assert sims["baseline:zero-shot"]["unavailable_reason"] == (
        "no API key for api.openai.com: set SIMHUB_BASELINE_API_KEY or OPENAI_API_KEY")
    outputs = {o["name"]: o for m in models["metrics"] for o in m["outputs"]}  # each output's declared metadata
    assert set(outputs) == {"acts", "correctness", "errors", "knowledge", "cosine", "tutor_response", "rouge_l"}
    assert outputs["cosine"] | {"description": ""} == {
        "name": "cosine", "label": "Cosine", "description": "", "null_rule": "never", "low": -1.0, "high": 1.0,
        "higher_is_better": True, "binary": False, "summary": {}}
    assert outputs["knowledge"]["summary"]["qwk"] == "QWK" and outputs["errors"]["binary"] is True
    schema = client.get("/schema/openapi.json").json()
    ops = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {"simulate", "score", "listModels", "health", "ready", "createChatCompletion"} <= ops
    page = client.get("/schema/swagger")
    assert page.status_code == 200 and "/schema/assets/swagger-ui-bundle.js" in page.text
    assert "cdn." not in page.text and "https://" not in page.text.split("SwaggerUIBundle({spec:")[0]  # nothing from outside
    assert client.get("/schema").text == page.text
    bundle = client.get("/schema/assets/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("text/javascript")
    assert client.get("/schema/assets/LICENSE").text.lstrip().startswith("Apache License")
    assert client.get("/schema/assets/..%2Fprofiles%2Fdemo.yaml").status_code == 404


def test_simulate_n_candidates_and_greedy_is_deterministic(client):
    body = {"model": "tiny-student", "dialogues": [HISTORY, {**HISTORY, "turns": HISTORY["turns"][:1]}],
            "sampling": {"n": 3, "max_tokens": 12}}
    first = client.post("/simulate", json=body)
    assert first.status_code == 200, first.text
    out = first.json()
    assert out["model"] == "tiny-student" and len(out["results"]) == 2
    for result in out["results"]:
        assert len(result["candidates"]) == 3
        assert len({c["text"] for c in result["candidates"]}) == 1  # greedy: n identical candidates
        assert all(c["finish_reason"] in ("stop", "length") for c in result["candidates"])
        assert isinstance(result["end_of_dialogue"], bool)
    assert out["usage"]["completion_tokens"] > 0
    assert client.post("/simulate", json=body).json()["results"] == out["results"]


def test_simulate_lora_and_seeded_sampling(client):
    base = client.post("/simulate", json={"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"max_tokens": 12}}).json()
    lora = client.post("/simulate", json={"model": "tiny-student-lora", "dialogues": [HISTORY], "sampling": {"max_tokens": 12}}).json()
    assert base["results"][0]["candidates"][0]["text"] != lora["results"][0]["candidates"][0]["text"]
    body = {"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"temperature": 1.0, "top_p": 0.95, "n": 3, "seed": 7,
                                                                              "max_tokens": 12}}
    a, b = client.post("/simulate", json=body).json(), client.post("/simulate", json=body).json()
    assert a["results"] == b["results"]
    assert len({c["text"] for c in a["results"][0]["candidates"]}) > 1


def test_score_rouge_l_paper_values(client):
    r = client.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l"]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["metrics"] == ["rouge_l"]
    for item, (_, expected) in zip(out["items"], ROUGE_CASES, strict=True):
        assert item["scores"]["rouge_l"] == pytest.approx(expected, abs=1e-4)
    assert out["summary"]["rouge_l"]["count"] == 3


def test_score_all_configured_metrics_contract(client):
    items = [*rouge_items(), {"dialogue": PAPER_DIALOGUE, "turn_index": 3, "candidate": "times by 6/1"}]
    out = client.post("/score", json={"items": items}).json()
    names = ["acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"]
    assert out["metrics"] == names
    for item in out["items"]:
        assert set(item["scores"]) == set(names)
        assert all(v is None or 0.0 <= v <= 1.0 for v in item["scores"].values())
    assert out["items"][0]["scores"]["knowledge"] is None  # first student turn: no delta
    assert out["items"][3]["scores"]["tutor_response"] is None  # last turn: no tutor reply
    assert set(out["summary"]) == set(names) and out["summary"]["cosine"]["count"] == 4


def test_concurrent_score_requests_are_batched(client):
    import concurrent.futures

    scorer = client.app.state.services.scoring.scorer
    original = scorer.score
    # Each Scorer call takes at least 50 ms, so requests sent meanwhile (8 at a time) queue and must merge.
    scorer.score = lambda *a, **k: (time.sleep(0.05), original(*a, **k))[1]
    before = client.get("/metrics").text
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            rs = list(pool.map(lambda _: client.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l", "cosine"]}),
                               range(16)))
    finally:
        scorer.score = original
    assert all(r.status_code == 200 for r in rs)
    assert all(r.json()["items"][2]["scores"]["rouge_l"] == 1.0 for r in rs)
    after = client.get("/metrics").text

    def delta(name, **labels):
        return metric_total(after, name, **labels) - metric_total(before, name, **labels)

    assert delta("simhub_score_batch_items_sum") == 48
    calls = delta("simhub_score_batch_items_count")
    assert 1 <= calls < 16  # at least two requests shared a Scorer call
    assert delta("simhub_score_batch_requests_sum") == 16
    assert 'simhub_http_requests_total{method="POST",route="/score",status="200"}' in after
    assert delta("simhub_http_requests_total", method="POST", route="/score", status="200") == 16
    assert delta("simhub_http_request_duration_seconds_count", route="/score") == 16


def test_openai_compatible_chat_in_process(client):
    body = {"model": "tiny-student", "max_tokens": 8, "messages": [
        {"role": "system", "content": QUESTION["text"]},
        {"role": "user", "content": "What calculation do we need to do here?"},
        {"role": "assistant", "content": "5/8 divided by 1/6?"},
        {"role": "user", "content": "Yes! How do we divide fractions?"}]}
    out = client.post("/v1/chat/completions", json=body).json()
    assert out["object"] == "chat.completion" and out["choices"][0]["message"]["role"] == "assistant"
    direct = client.post("/simulate", json={"model": "tiny-student", "dialogues": [HISTORY | {"kcs": [], "question": {"text": QUESTION["text"]}}],
                                            "sampling": {"max_tokens": 8}}).json()
    assert out["choices"][0]["message"]["content"] == direct["results"][0]["candidates"][0]["text"]
    assert client.get("/v1/models").json()["data"][0]["object"] == "model"
    assert_error(client.post("/v1/chat/completions", json={**body, "messages": body["messages"][:3]}), 400, "messages[2].role")
    choice = out["choices"][0]
    assert choice["end_of_dialogue"] is False and choice["logprobs"] is None  # documented extension; no logprobs unasked
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]
    assert out["usage"]["prompt_tokens"] > 0 and out["usage"]["completion_tokens"] > 0


# ---------------------------------------------------------------------------------------- bad input


BAD_SCORE = [
    ({"items": [{"dialogue": PAPER_DIALOGUE, "turn_index": "one", "candidate": "x"}]}, 422, "items[0].turn_index", "int"),
    ({"items": []}, 422, "items", "length"),
    ({"items": rouge_items(), "metrics": ["rouge"]}, 400, "metrics", "did you mean 'rouge_l'"),
    ({"items": [{"dialogue": {**PAPER_DIALOGUE, "turns": [{"role": "teacher", "content": "hi"}]}, "turn_index": 0, "candidate": "x"}]},
     422, "items[0].dialogue.turns[0].role", "teacher"),
    ({"items": rouge_items() * 3}, 400, "items", "cap of 8"),
    ({"items": rouge_items(), "extra": 1}, 422, None, "extra"),
]


@pytest.mark.parametrize(("body", "status", "field", "words"), BAD_SCORE)
def test_bad_score_requests(client, body, status, field, words):
    assert_error(client.post("/score", json=body), status, field, words)
    assert client.get("/health").status_code == 200


BAD_SIMULATE = [
    ({"model": "nope", "dialogues": [HISTORY]}, 404, "model", "unknown simulator"),
    ({"model": "tiny-student", "dialogues": []}, 422, "dialogues", "length"),
    ({"model": "tiny-student", "dialogues": [PAPER_DIALOGUE]}, 400, "dialogues[0].turns", "student turn"),
    ({"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"n": 0}}, 422, "sampling.n", ">= 1"),
    ({"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"n": 9}}, 400, "sampling.n", "cap of 8"),
    ({"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"max_tokens": 65}}, 400, "sampling.max_tokens", "cap of 64"),
    ({"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"temperature": "hot"}}, 422, "sampling.temperature", "float"),
    ({"model": "tiny-student", "dialogues": [{"id": "x"}]}, 422, "dialogues[0]", "question"),
]


@pytest.mark.parametrize(("body", "status", "field", "words"), BAD_SIMULATE)
def test_bad_simulate_requests(client, body, status, field, words):
    assert_error(client.post("/simulate", json=body), status, field, words)
    assert client.get("/health").status_code == 200


def test_malformed_and_oversized_bodies(client):
    r = client.post("/score", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] in ("invalid_json", "invalid_request")
    big = {"items": [{"dialogue": {**PAPER_DIALOGUE, "profile": "x" * 400_000}, "turn_index": 1, "candidate": "x"}]}
    assert_error(client.post("/score", json=big), 413, words="limit of 300000 bytes")
    assert client.get("/health").status_code == 200


# ---------------------------------------------------------------------------------------- security and limits


def test_api_key_auth():
    with mini_client(api_key="s3cret-key") as c:
        assert c.get("/health").status_code == 200  # probes stay public
        assert_error(c.get("/models"), 401, words="API key")
        assert c.get("/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/models", headers={"Authorization": "Bearer s3cret-key"}).status_code == 200
        r = c.post("/score", json={"items": rouge_items()}, headers={"X-API-Key": "s3cret-key"})
        assert r.status_code == 200 and r.json()["metrics"] == ["rouge_l"]


def test_key_never_logged(capsys, caplog):
    with mini_client(api_key="s3cret-key") as c:
        c.get("/models", headers={"Authorization": "Bearer s3cret-key"})
        c.get("/models", headers={"Authorization": "Bearer guess-123"})
    captured = capsys.readouterr()
    logs = captured.out + captured.err + caplog.text
    assert "s3cret-key" not in logs and "guess-123" not in logs


def test_rate_limit():
    with mini_client(rate_limit_per_minute=3) as c:
        codes = [c.get("/v1/models").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3] == 429
        r = c.get("/v1/models")
        assert_error(r, 429, words="rate limit")
        assert int(r.headers["retry-after"]) > 0
        assert c.get("/health").status_code == 200


def test_full_queue_answers_503_with_retry_after():
    with mini_client(queue_size=0) as c:
        r = c.post("/score", json={"items": rouge_items()})
        assert_error(r, 503, words="queue is full")
        assert r.headers["retry-after"] == "1"


def test_request_timeout_answers_504():
    with mini_client(request_timeout_s=0.2) as c:
        wait_ready(c)  # the loaded scorer replaces the one built from the profile text
        scorer = c.app.state.services.scoring.scorer
        original = scorer.score
        scorer.score = lambda *a, **k: (time.sleep(0.6), original(*a, **k))[1]
        assert_error(c.post("/score", json={"items": rouge_items()}), 504, words="longer than")
        scorer.score = original
        time.sleep(0.6)  # the timed-out batch still finishes in the worker thread
        assert c.post("/score", json={"items": rouge_items()}).status_code == 200


def test_ready_gauge_is_set_when_loading_ends():
    with mini_client() as c:
        services = c.app.state.services
        deadline = time.time() + 60
        while not services.loaded and time.time() < deadline:
            time.sleep(0.05)
        assert services.ready
        assert metric_total(c.get("/metrics").text, "simhub_ready") == 1.0  # without anyone polling /ready


def test_a_request_for_a_model_still_loading_gets_503_at_once(monkeypatch):
    from simhub.metrics.cosine import Cosine

    release = threading.Event()
    monkeypatch.setattr(Cosine, "load", lambda self: release.wait(30))
    profile = Profile(name="mini-cosine", scoring=ScoringConfig(metrics=MetricModels(cosine=EmbedderConfig())))
    with TestClient(create_app(ServiceSettings.load(profile, preload=False, request_timeout_s=30), profile)) as c:
        services = c.app.state.services
        assert services._thread is None
        started = time.perf_counter()
        r = c.post("/score", json={"items": rouge_items(), "metrics": ["cosine"]})  # starts loading; does not wait
        assert time.perf_counter() - started < 5
        err = assert_error(r, 503, field="metrics", words="cosine is not ready")
        assert err["type"] == "not_ready" and r.headers["retry-after"] == "1"
        assert c.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l"]}).status_code == 200  # needs no model
        deadline = time.time() + 30
        while services.components[("metric", "cosine")].status != "loading" and time.time() < deadline:
            time.sleep(0.05)
        ready = c.get("/ready")
        body = ready.json()
        assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
        assert body["ready"] is False and body["status"] == "loading" and body["loading"] == ["cosine"]
        assert body["step"] == {"k": 0, "n": 0, "what": None, "done": None, "total": None, "eta_s": None}
        status = {x["id"]: x["status"] for x in body["components"] if x["kind"] == "metric"}
        assert status == {"rouge_l": "ready", "cosine": "loading"}
        # The endpoint baselines need no build, and no key is set here: listed as unavailable from the start.
        assert {x["status"] for x in body["components"] if x["kind"] == "simulator"} == {"unavailable"}
        assert metric_total(c.get("/metrics").text, "simhub_ready") == 0.0
        release.set()
        deadline = time.time() + 30
        while not services.loaded and time.time() < deadline:
            time.sleep(0.05)
        assert c.post("/score", json={"items": rouge_items(), "metrics": ["cosine"]}).status_code == 200
        assert metric_total(c.get("/metrics").text, "simhub_ready") == 1.0


def test_a_fresh_start_serves_the_student_and_rouge_before_the_judge_is_built(tiny_kit, monkeypatch, tmp_path):
    """Per-capability readiness: what is built is served while a slow build (the judge) goes on."""
    import simhub.provision as provision

    real_build, release, building = provision.build_random_lora, threading.Event(), threading.Event()

    def slow_build(base, output, *args, **kwargs):
        building.set()
        assert release.wait(60)
        return real_build(base, output, *args, **kwargs)

    monkeypatch.setattr(provision, "build_random_lora", slow_build)
    path = tmp_path / "fresh.yaml"
    path.write_text("name: fresh\nscoring:\n  device: cpu\n  metrics:\n"
                    "    judge: {kind: local, model: 'tiny:llama', adapter: 'random-lora:fresh-judge'}\n"
                    "simulators:\n  tiny-student: {model: 'tiny:llama'}\nserving: {backend: transformers}\n")
    profile = load_profile(path)
    with TestClient(create_app(ServiceSettings.load(profile, max_tokens=8), profile)) as c:
        assert building.wait(60)  # the student is loaded first, then the judge's build starts and hangs
        body = c.get("/ready").json()
        components = {x["id"]: x for x in body["components"]}
        assert components["tiny-student"]["status"] == "ready" and components["rouge_l"]["status"] == "ready"
        assert components["judge"]["status"] == "building"
        assert components["judge"]["waits_for"] == ["random-lora:fresh-judge"]
        assert body["building"] == "random-lora:fresh-judge" and body["step"]["k"] == 1 and body["step"]["n"] == 1
        assert c.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l"]}).status_code == 200
        r = c.post("/simulate", json={"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"max_tokens": 4}})
        assert r.status_code == 200, r.text
        started = time.perf_counter()
        r = c.post("/score", json={"items": rouge_items(), "metrics": ["correctness"]})
        assert time.perf_counter() - started < 5
        err = assert_error(r, 503, field="metrics", words="judge is not ready yet; waits for random-lora:fresh-judge")
        assert "building random-lora:fresh-judge, step 1 of 1" in err["message"] and r.headers["retry-after"] == "1"
        release.set()
        done = wait_ready(c)
        assert done["built"] == ["random-lora:fresh-judge"] and done["loading"] == [] and done["building"] is None
        r = c.post("/score", json={"items": rouge_items()[:1], "metrics": ["correctness"]})
        assert r.status_code == 200, r.text


def test_settings_from_env_and_profile(monkeypatch, tmp_path):
    from simhub.errors import ConfigError

    path = tmp_path / "p.yaml"
    path.write_text("name: p\nserving: {backend: vllm, limits: {max_items: 9, max_dialogues: 3}}\n")
    monkeypatch.setenv("SIMHUB_MAX_ITEMS", "5")
    monkeypatch.setenv("SIMHUB_API_KEY", "k-secret-value")
    s = ServiceSettings.load(load_profile(path))
    assert (s.max_items, s.max_dialogues, s.api_key) == (5, 3, "k-secret-value")
    assert s.limits.max_items == 5 and "k-secret-value" not in repr(s)
    path.write_text("name: p\nserving: {max_itemz: 1}\n")
    with pytest.raises(ConfigError, match=r"serving.max_itemz: unknown key"):
        load_profile(path)
    path.write_text("name: p\nserving: {api_key: from-a-file}\n")
    with pytest.raises(ConfigError, match=r"serving.api_key: unknown key"):  # secrets never come from files
        load_profile(path)
    monkeypatch.setenv("SIMHUB_MAX_ITEMS", "many")
    with pytest.raises(ConfigError, match="SIMHUB_MAX_ITEMS"):
        ServiceSettings.load()


def test_candidates_cut_at_the_end_marker():
    from simhub.simulation import candidate_from_text

    c = candidate_from_text("Okay thanks[end of dialogue] extra", "length")
    assert (c.text, c.finish_reason, c.end_of_dialogue) == ("Okay thanks", "stop", True)
    assert candidate_from_text(" 3/4 ", "length").text == " 3/4 "  # not stripped (the reference scores it as is)


def test_chat_to_dialogue_roles():
    from simhub.serving.chat import chat_to_dialogue
    from simhub.serving.schemas import ChatMessage, ContentPart

    d = chat_to_dialogue([ChatMessage(role="system", content="Q?"), ChatMessage(role="user", content="t1"),
                          ChatMessage(role="assistant", content="s1"),
                          ChatMessage(role="user", content=[ContentPart(type="text", text="t"), ContentPart(type="text", text="2")])])
    assert d.question.text == "Q?" and [t.role for t in d.turns] == ["tutor", "student", "tutor"]
    assert d.turns[-1].content == "t2"


def test_micro_batcher_merges_and_bounds():
    from simhub.serving.batching import MicroBatcher
    from simhub.serving.schemas import Overloaded

    calls, keys = [], []

    def run(jobs):
        calls.append([len(j.items) for j in jobs])
        keys.append({j.key for j in jobs})
        return [sum(j.items) for j in jobs]

    async def main():
        b = MicroBatcher(run, window_s=0.01, max_items=100, max_pending=10)
        out = await asyncio.gather(*(b.submit("k", [i, i]) for i in range(4)))
        with pytest.raises(Overloaded):
            await b.submit("k", list(range(11)))
        unmerged = await asyncio.gather(b.submit(None, [1]), b.submit(None, [2]))
        await b.close()
        return out, unmerged

    out, unmerged = asyncio.run(main())
    assert out == [0, 2, 4, 6] and unmerged == [1, 2]
    assert calls[0] == [2, 2, 2, 2] and calls[1:] == [[1], [1]]
    assert keys == [{"k"}, {None}, {None}]
