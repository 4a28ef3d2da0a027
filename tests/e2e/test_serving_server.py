"""The service as a real uvicorn process (``simhub serve``) on a free loopback port: the official
OpenAI client, bad input that must not kill it, a bounded load test and a schemathesis run."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

pytest.importorskip("litestar")
httpx = pytest.importorskip("httpx")

from tests.doubles.server_process import ServerProcess, metric_total  # noqa: E402
from tests.integration.test_serving import HISTORY, PAPER_DIALOGUE, QUESTION, rouge_items  # noqa: E402  (one copy)

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "tests" / "profiles" / "tiny.yaml"
API_KEY = "test-key-0123456789"


SERVER_ENV = {"SIMHUB_API_KEY": API_KEY, "SIMHUB_MAX_TOKENS": "16", "SIMHUB_MAX_DIALOGUES": "4", "SIMHUB_MAX_ITEMS": "8",
              "SIMHUB_MAX_TURNS": "40", "SIMHUB_MAX_REQUEST_CHARS": "20000", "SIMHUB_MAX_BODY_BYTES": "200000"}


@pytest.fixture(scope="module")
def server(simhub_home, tiny_profile, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    proc = ServerProcess(str(DEMO), env={"SIMHUB_HOME": str(simhub_home), **SERVER_ENV}, log_path=log_path, cwd=str(ROOT))
    with proc as url:
        yield url, log_path
    assert API_KEY not in log_path.read_text()


def auth() -> dict:
    return {"Authorization": f"Bearer {API_KEY}"}


def test_openai_client_against_live_server(server):
    openai = pytest.importorskip("openai")
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0)
    ids = [m.id for m in client.models.list().data]
    assert ids[:2] == ["tiny-student", "tiny-student-lora"] and "baseline:zero-shot" in ids
    messages = [{"role": "system", "content": QUESTION["text"]}, {"role": "user", "content": "What is 5/8 divided by 1/6?"}]
    first = client.chat.completions.create(model="tiny-student-lora", messages=messages, max_tokens=8, n=2)
    again = client.chat.completions.create(model="tiny-student-lora", messages=messages, max_tokens=8, n=2)
    assert len(first.choices) == 2 and first.choices[0].message.role == "assistant"
    assert first.choices[0].message.content == again.choices[0].message.content  # greedy by default
    assert first.usage.completion_tokens > 0
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4.1", messages=messages)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).models.list()


def test_openai_compatible_simulator_against_live_server(server, monkeypatch, tmp_path):
    """An OpenAI-compatible simulator (kind: openai) whose upstream is this very service's /v1 endpoint."""
    from simhub.config import EndpointSettings, SimulatorConfig
    from simhub.models import Sampling
    from simhub.schema import dialogue_from_dict
    from simhub.simulation import Target
    from simhub.simulation.endpoint import EndpointSimulator

    url, _ = server
    monkeypatch.setenv("SIMHUB_TEST_UPSTREAM_KEY", API_KEY)
    config = SimulatorConfig(kind="openai", model="tiny-student", endpoint=EndpointSettings(
        base_url=f"{url}/v1", api_key_env="SIMHUB_TEST_UPSTREAM_KEY", cache_dir=str(tmp_path / "cache")))
    simulator = EndpointSimulator("prompted", config)
    dialogue = dialogue_from_dict(HISTORY)
    results = simulator.simulate([Target(dialogue, len(dialogue.turns))] * 2, Sampling(max_tokens=8, n=2))
    assert len(results) == 2 and all(len(r.candidates) == 2 for r in results)
    assert results[0].candidates[0].text == results[1].candidates[0].text  # greedy upstream
    assert results[0].prompt_tokens > 0 and results[0].candidates[0].tokens > 0
    assert results[0].candidates[0].finish_reason in ("stop", "length")
    again = asyncio.run(simulator.asimulate([Target(dialogue, len(dialogue.turns))], Sampling(max_tokens=8, n=2)))
    assert again[0].candidates[0].text == results[0].candidates[0].text


def test_bad_input_keeps_server_alive(server):
    url, _ = server
    bad = [
        ("/score", {"items": [{"dialogue": PAPER_DIALOGUE, "turn_index": [1], "candidate": "x"}]}, 422),
        ("/score", {"items": [{"dialogue": PAPER_DIALOGUE, "turn_index": 0, "candidate": "x"}]}, 400),
        ("/score", {"items": rouge_items(), "metrics": ["bleu"]}, 400),
        ("/score", {"items": rouge_items() * 3}, 400),
        ("/simulate", {"model": "nobody", "dialogues": [HISTORY]}, 404),
        ("/simulate", {"model": "tiny-student", "dialogues": []}, 422),
        ("/simulate", {"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"max_tokens": 17}}, 400),
        ("/simulate", {"model": "tiny-student", "dialogues": [{**HISTORY, "profile": "x" * 250_000}]}, 413),
    ]
    with httpx.Client(base_url=url, headers=auth(), timeout=30) as c:
        for path, body, status in bad:
            r = c.post(path, json=body)
            assert r.status_code == status, (path, r.text)
            assert r.json()["error"]["message"]
        assert c.post("/score", content=b"\xff\x00", headers={"content-type": "application/json"}).status_code == 400
        assert c.get("/health").json() == {"status": "ok"}
        assert c.post("/score", json={"items": rouge_items(), "metrics": ["rouge_l"]}).status_code == 200


@pytest.mark.slow
def test_bounded_load(server):
    """300 mixed requests, 16 at a time: every one answered, none with a 5xx."""
    url, _ = server
    kinds = [
        ("POST", "/score", {"items": rouge_items(), "metrics": ["rouge_l", "cosine"]}),
        ("POST", "/score", {"items": rouge_items()[:1]}),
        ("POST", "/simulate", {"model": "tiny-student", "dialogues": [HISTORY], "sampling": {"max_tokens": 4}}),
        ("POST", "/v1/chat/completions", {"model": "tiny-student-lora", "max_tokens": 4,
                                          "messages": [{"role": "system", "content": "Q"}, {"role": "user", "content": "hi"}]}),
        ("GET", "/models", None),
        ("GET", "/health", None),
        ("POST", "/score", {"items": [], "metrics": ["rouge_l"]}),  # a client error in the mix
    ]

    async def main():
        sem = asyncio.Semaphore(16)
        async with httpx.AsyncClient(base_url=url, headers=auth(), timeout=120) as c:
            async def one(i):
                method, path, body = kinds[i % len(kinds)]
                async with sem:
                    r = await c.request(method, path, json=body)
                    return path, r.status_code

            return await asyncio.gather(*(one(i) for i in range(300)))

    start = time.time()
    results = asyncio.run(main())
    assert len(results) == 300
    assert not [r for r in results if r[1] >= 500]
    assert sum(1 for _, code in results if code == 422) == sum(1 for i in range(300) if i % len(kinds) == 6)
    assert time.time() - start < 180
    metrics = httpx.get(f"{url}/metrics", headers=auth()).text
    assert "simhub_score_batch_requests_count" in metrics and "simhub_generated_tokens_total" in metrics
    # This test alone sent 86 /score requests that reach the scorer (kinds 0 and 1: 43 each, 3 and 1 items),
    # 43 /simulate, and 42 /score refused with 422 (kind 6).
    assert metric_total(metrics, "simhub_score_batch_requests_count") > 0
    assert metric_total(metrics, "simhub_score_batch_requests_sum") >= 43 + 43
    assert metric_total(metrics, "simhub_score_batch_items_sum") >= 3 * 43 + 1 * 43
    assert metric_total(metrics, "simhub_generated_tokens_total", model="tiny-student") > 0
    assert metric_total(metrics, "simhub_generated_tokens_total", model="tiny-student-lora") > 0
    assert metric_total(metrics, "simhub_prompt_tokens_total", model="tiny-student") > 0
    assert metric_total(metrics, "simhub_http_requests_total", method="POST", route="/simulate", status="200") >= 43
    assert metric_total(metrics, "simhub_http_requests_total", method="POST", route="/score", status="422") >= 42
    assert metric_total(metrics, "simhub_http_request_duration_seconds_count", route="/score") >= 43 + 43 + 42


def test_schemathesis_finds_no_server_errors(server):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    url, _ = server
    schema = schemathesis.openapi.from_url(f"{url}/schema/openapi.json")
    failures = []
    statuses: dict[tuple[str, int], int] = {}

    def run(operation):
        @settings(max_examples=20, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case):
            response = case.call(base_url=url, headers=auth(), timeout=60)
            statuses[(operation.label, response.status_code)] = statuses.get((operation.label, response.status_code), 0) + 1
            if response.status_code >= 500:
                failures.append((operation.label, response.status_code, response.text[:300]))

        check()

    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path != "/metrics":
            labels.append(operation.label)
            run(operation)
    assert "POST /score" in labels and "POST /simulate" in labels
    print(sorted(statuses.items()))
    assert not failures, failures
    assert httpx.get(f"{url}/health").status_code == 200
