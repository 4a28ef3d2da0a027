"""The shared OpenAI-compatible client: exact payloads, parsing, retries, cache, concurrency,
secrecy of the key, and the Batch API, all against the local fake endpoint (no network)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openai")

from simhub.errors import ConfigError, EndpointError, NotSupportedError, UnknownNameError
from simhub.models.base import TokenLogprob
from simhub.models.openai import (
    ChatResult,
    Choice,
    EndpointConfig,
    EndpointFailure,
    OpenAIClient,
    ToolCall,
    Usage,
    chat_payload,
    is_reasoning_model,
    parse_chat_response,
    request_key,
)
from tests.doubles.openai_server import FakeOpenAIServer, default_answer, endpoint

pytestmark = pytest.mark.timeout(60)

KEY_ENV = "SIMHUB_TEST_OPENAI_KEY"
REPO = Path(__file__).resolve().parents[2]

JUDGE_MESSAGES = [
    {"role": "system", "content": "You compare a simulated student turn with the real one."},
    {"role": "user", "content": "Real turn (incorrect): 3/4. Candidate: 0.75. Verdict?"},
]


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return key


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def make_client(server: FakeOpenAIServer, cache_dir: Path | None = None, **options) -> OpenAIClient:
    settings = {
        "key_names": (KEY_ENV,),
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        "timeout_s": 10.0,
        **options,
    }
    return OpenAIClient(endpoint(server.base_url, cache_dir=cache_dir, **settings))


def questions(client: OpenAIClient, count: int, prefix: str = "q") -> list[dict]:
    return [
        client.payload([{"role": "user", "content": f"{prefix}{i}"}], temperature=0, max_tokens=50)
        for i in range(count)
    ]


# --------------------------------------------------------------------------- pure payloads


@pytest.mark.parametrize(
    ("name", "reasoning"),
    [
        ("gpt-5-mini-2025-08-07", True),
        ("gpt-5", True),
        ("o1-mini", True),
        ("o3", True),
        ("o4-mini", True),
        ("openai/gpt-5-nano", True),
        ("GPT-5-mini", True),
        ("gpt-4.1", False),
        ("gpt-4o-mini", False),
        ("meta-llama/Llama-3.1-8B-Instruct", False),
    ],
)
def test_is_reasoning_model(name, reasoning):
    assert is_reasoning_model(name) is reasoning


def test_paper_judge_payload_is_exact():
    """GPT-5 mini judge (docs/protocol.md §3): effort low, 15,000 completion tokens; temperature 1 is the
    default and is left out."""
    payload = chat_payload(
        "gpt-5-mini-2025-08-07", JUDGE_MESSAGES, temperature=1.0, reasoning_effort="low", max_tokens=15000
    )
    assert payload == {
        "model": "gpt-5-mini-2025-08-07",
        "messages": JUDGE_MESSAGES,
        "max_completion_tokens": 15000,
        "reasoning_effort": "low",
    }


def test_gpt41_baseline_payload_is_exact():
    """Prompted baselines on GPT-4.1 (docs/protocol.md §5, §8): temperature 0, at most 4,000 tokens."""
    messages = [
        {"role": "system", "content": "You are a student."},
        {"role": "user", "content": "Turn 1 (Tutor): hi"},
    ]
    payload = chat_payload("gpt-4.1", messages, temperature=0, max_tokens=4000)
    assert payload == {
        "model": "gpt-4.1",
        "messages": messages,
        "temperature": 0,
        "max_completion_tokens": 4000,
    }
    assert "max_tokens" not in payload


def test_reasoning_baseline_payload_drops_sampling_settings():
    """Reasoning baseline (docs/protocol.md §8): medium effort; temperature and top-p never reach a reasoning model."""
    payload = chat_payload(
        "gpt-5-mini-2025-08-07",
        JUDGE_MESSAGES,
        temperature=0.0,
        top_p=0.5,
        reasoning_effort="medium",
        max_tokens=15000,
    )
    assert payload == {
        "model": "gpt-5-mini-2025-08-07",
        "messages": JUDGE_MESSAGES,
        "max_completion_tokens": 15000,
        "reasoning_effort": "medium",
    }


def test_optional_fields_only_when_asked():
    messages = [{"role": "user", "content": "x"}]
    assert chat_payload("gpt-4.1", messages) == {"model": "gpt-4.1", "messages": messages}
    full = chat_payload(
        "gpt-4.1",
        messages,
        temperature=0.6,
        top_p=0.95,
        max_tokens=400,
        n=4,
        seed=7,
        response_format={"type": "json_object"},
        top_logprobs=3,
        stop=["</s>"],
    )
    assert full == {
        "model": "gpt-4.1",
        "messages": messages,
        "temperature": 0.6,
        "top_p": 0.95,
        "max_completion_tokens": 400,
        "n": 4,
        "seed": 7,
        "response_format": {"type": "json_object"},
        "logprobs": True,
        "top_logprobs": 3,
        "stop": ["</s>"],
    }
    assert chat_payload("gpt-4.1", messages, logprobs=True)["logprobs"] is True


def test_payload_copies_messages():
    messages = [{"role": "user", "content": "x"}]
    payload = chat_payload("gpt-4.1", messages)
    messages[0]["content"] = "changed"
    assert payload["messages"][0]["content"] == "x"


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"model": "gpt-4.1", "reasoning_effort": "low"}, NotSupportedError, "reasoning_effort"),
        ({"model": "gpt-5-mini", "logprobs": True}, NotSupportedError, "logprobs"),
        ({"model": "gpt-5-mini", "reasoning_effort": "lowest"}, UnknownNameError, "reasoning_effort"),
        ({"model": "gpt-4.1", "temperature": 3.0}, ConfigError, "temperature"),
        ({"model": "gpt-4.1", "max_tokens": 0}, ConfigError, "max_tokens"),
        ({"model": "gpt-4.1", "n": 0}, ConfigError, "n"),
        ({"model": "gpt-4.1", "logprobs": False, "top_logprobs": 2}, ConfigError, "top_logprobs"),
        ({"model": "gpt-4.1", "messages": []}, ConfigError, "messages"),
        ({"model": "gpt-4.1", "messages": [{"content": "no role"}]}, ConfigError, "messages[0]"),
        ({"model": ""}, ConfigError, "model"),
    ],
)
def test_payload_rejects_what_the_api_would(kwargs, error, field):
    kwargs = {"messages": [{"role": "user", "content": "x"}], **kwargs}
    with pytest.raises(error) as info:
        chat_payload(kwargs.pop("model"), kwargs.pop("messages"), **kwargs)
    assert info.value.field == field


def test_integer_and_float_temperatures_give_one_request():
    messages = [{"role": "user", "content": "x"}]
    as_int, as_float = (
        chat_payload("gpt-4.1", messages, temperature=0),
        chat_payload("gpt-4.1", messages, temperature=0.0),
    )
    assert json.dumps(as_int) == json.dumps(as_float)


def test_importing_the_module_does_not_import_the_sdk():
    code = "import sys, simhub.models.openai; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_request_key_ignores_trailing_slash_and_key_order():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    reordered = {"messages": body["messages"], "model": "m"}
    assert request_key("http://h/v1", body) == request_key("http://h/v1/", reordered)
    assert request_key("http://h/v1", body) != request_key("http://other/v1", body)
    assert request_key("http://h/v1", body) != request_key("http://h/v1", {**body, "temperature": 0})


# --------------------------------------------------------------------------- parsing


def test_parse_full_response():
    body = {
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {"index": 1, "message": {"role": "assistant", "content": "second"}, "finish_reason": "length"},
            {
                "index": 0,
                "message": {"role": "assistant", "content": "first"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "first",
                            "logprob": -0.25,
                            "top_logprobs": [
                                {"token": "first", "logprob": -0.25},
                                {"token": "1st", "logprob": -2},
                            ],
                        }
                    ]
                },
            },
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 40,
            "total_tokens": 52,
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
    }
    result = parse_chat_response(body)
    assert result == ChatResult(
        choices=(
            Choice("first", "stop", (TokenLogprob("first", -0.25, [("first", -0.25), ("1st", -2.0)]),)),
            Choice("second", "length", None),
        ),
        usage=Usage(12, 40, 30),
        model="gpt-4.1-2025-04-14",
    )
    assert result.text == "first" and result.ok


def test_parse_null_content_and_missing_usage():
    result = parse_chat_response(
        {
            "choices": [
                {"message": {"role": "assistant", "content": None, "refusal": "no"}, "finish_reason": "stop"}
            ]
        }
    )
    assert result.text is None and result.usage is None and result.model is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([1, 2], "$"),
        ("a string", "$"),
        ({}, "choices"),
        ({"choices": []}, "choices"),
        ({"error": {"message": "Incorrect API key provided: sk-SECRET"}}, "choices"),
        ({"choices": [{"text": "legacy completion"}]}, "choices[0].message"),
        ({"choices": [{"message": {"content": 42}}]}, "choices[0].message.content"),
        ({"choices": [{"message": {"content": "x"}, "finish_reason": 3}]}, "choices[0].finish_reason"),
        (
            {"choices": [{"message": {"content": "x"}, "logprobs": {"content": "sk-SECRET"}}]},
            "choices[0].logprobs.content",
        ),
        (
            {"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"token": "x"}]}}]},
            "choices[0].logprobs.content[0]",
        ),
    ],
)
def test_parse_malformed_bodies_clearly(body, field):
    with pytest.raises(EndpointError) as info:
        parse_chat_response(body)
    assert info.value.cause == "malformed response"
    assert info.value.field == field
    assert "SECRET" not in str(info.value)


# --------------------------------------------------------------------------- configuration


def test_config_is_derived_from_profile_settings(tmp_path):
    from simhub.config import EndpointSettings, convert
    from simhub.models.endpoints import endpoint_config

    settings = convert({"base_url": "https://api.openai.com/v1", "api_key_env": "SIMHUB_JUDGE_API_KEY",
                        "cache_dir": str(tmp_path), "timeout_s": 5}, EndpointSettings, "p.yaml")
    config = endpoint_config(settings, "gpt-5-mini", kind="judge", default_cache=None)
    assert config.cache_dir == tmp_path and config.timeout_s == 5.0 and config.base_url == settings.base_url
    # The low-level config searches exactly what it is given: no implicit OPENAI_API_KEY fallback.
    assert config.key_names == ("SIMHUB_JUDGE_API_KEY",) and config.api_key_env == "SIMHUB_JUDGE_API_KEY"
    assert EndpointConfig(EndpointSettings(base_url="https://api.openai.com/v1"), "m").key_names == ()
    with pytest.raises(ConfigError, match=r"p.yaml: timeout: unknown key \(did you mean 'timeout_s'\?\)") as info:
        convert({"base_url": "https://x/v1", "timeout": 5}, EndpointSettings, "p.yaml")
    assert info.value.field == "timeout"
    with pytest.raises(ConfigError, match=r"p\.yaml: concurrency: must be an integer >= 1, got 0") as info:
        convert({"base_url": "https://x/v1", "concurrency": 0}, EndpointSettings, "p.yaml")
    assert info.value.field == "concurrency"
    with pytest.raises(ConfigError) as info:
        endpoint_config(EndpointSettings(), "m", kind="judge", default_cache=None)
    assert info.value.field == "judge.base_url"
    with pytest.raises(ConfigError) as info:
        EndpointSettings(base_url="api.openai.com/v1")
    assert info.value.field == "base_url"
    with pytest.raises(ConfigError) as info:
        endpoint_config(EndpointSettings(base_url="http://localhost/v1"), " ", kind="judge", default_cache=None)
    assert info.value.field == "judge.model"


def test_sections_that_differ_only_in_what_the_client_never_reads_share_a_client(tmp_path):
    from simhub.config import EndpointSettings
    from simhub.models.endpoints import client_for

    url = "http://localhost:9/v1"
    one = client_for(EndpointSettings(base_url=url, cache_dir=str(tmp_path)), "m", kind="tutor")
    assert client_for(EndpointSettings(base_url=url, cache_dir=str(tmp_path), batch_api=True, api_key_env="none"),
                      "m", kind="simulator") is one  # one concurrency limit for both
    assert client_for(EndpointSettings(base_url=url, cache_dir=str(tmp_path), concurrency=2), "m", kind="tutor") is not one


# --------------------------------------------------------------------------- live requests


def test_sends_exact_body_with_key_read_at_request_time(server, api_key, monkeypatch):
    client = make_client(server)
    payload = chat_payload("gpt-5-mini-2025-08-07", JUDGE_MESSAGES, reasoning_effort="low", max_tokens=15000)
    [result] = client.complete([payload])
    assert result.ok and result.text == default_answer(payload)
    [seen] = server.chat_requests()
    assert seen.body == payload
    assert seen.authorization == f"Bearer {api_key}"

    monkeypatch.setenv(KEY_ENV, "sk-rotated")
    client.complete([{**payload, "seed": 1}])
    assert server.chat_requests()[-1].authorization == "Bearer sk-rotated"


def test_fallback_key_variable_and_keyless_endpoint(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    make_client(server, key_names=(KEY_ENV, "OPENAI_API_KEY")).complete([{"model": "m", "messages": []}])
    assert server.chat_requests()[-1].authorization == "Bearer sk-fallback"

    keyless = make_client(server, key_names=())
    [result] = keyless.complete([{"model": "m", "messages": [], "seed": 2}])
    assert result.ok
    assert "sk-fallback" not in (server.chat_requests()[-1].authorization or "")


def test_missing_key_fails_before_any_call(server, monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = make_client(server, tmp_path)
    with pytest.raises(ConfigError) as info:
        client.complete(questions(client, 2))
    assert KEY_ENV in str(info.value) and info.value.field == KEY_ENV
    assert server.requests == []


def test_payloads_may_be_any_iterable_but_not_a_lone_body(server, api_key):
    client = make_client(server)
    results = client.complete(p for p in questions(client, 2))
    assert [r.text for r in results] == [default_answer(p) for p in questions(client, 2)]
    with pytest.raises(ConfigError) as info:
        client.complete(questions(client, 1)[0])
    assert info.value.field == "payloads"
    with pytest.raises(ConfigError) as info:
        client.complete(["not a body"])
    assert info.value.field == "payloads[0]"


def test_retries_then_success(server, api_key):
    client = make_client(server, max_retries=3)
    server.fail_next(2, 503)
    [result] = client.complete(questions(client, 1))
    assert result.ok
    assert len(server.chat_requests()) == 3
    assert client.stats.calls == 3 and client.stats.retries == 2 and client.stats.failures == 0


@pytest.mark.parametrize("status", [500, 429, 401, 408, 409, 502])
def test_retries_exhausted_gives_failure_with_cause(server, api_key, status):
    client = make_client(server, max_retries=2)
    server.fail_next(10, status)
    [failure] = client.complete(questions(client, 1))
    assert isinstance(failure, EndpointFailure) and not failure.ok
    assert (failure.cause, failure.status, failure.attempts) == (f"HTTP {status} at {server.base_url}", status, 3)
    assert len(server.chat_requests()) == 3  # the SDK's own retries are off
    assert client.stats.failures == 1
    error = failure.to_error()
    assert isinstance(error, EndpointError) and error.cause == failure.cause and error.status == status


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_are_not_retried(server, api_key, status):
    client = make_client(server, max_retries=4)
    server.fail_next(1, status)
    [failure] = client.complete(questions(client, 1))
    assert failure.cause == f"HTTP {status} at {server.base_url}" and failure.attempts == 1
    assert len(server.chat_requests()) == 1


def test_timeout_gives_failure_with_cause(server, api_key):
    client = make_client(server, timeout_s=0.3, max_retries=1)
    server.stall_next(2, seconds=1.5)
    [failure] = client.complete(questions(client, 1))
    assert (failure.cause, failure.status, failure.attempts) == (f"no answer within 0.3 s at {server.base_url}", None, 2)


def test_connection_error_gives_failure_with_cause(api_key):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIClient(
        endpoint(f"http://127.0.0.1:{port}/v1", key_names=(KEY_ENV,), max_retries=1, backoff_s=0.001)
    )
    [failure] = client.complete(questions(client, 1))
    # What the operating system said, and where: not the SDK's "APIConnectionError".
    assert failure.cause == f"connection refused at http://127.0.0.1:{port}/v1" and failure.attempts == 2
    assert failure.message == f"chat completion failed after 2 attempt(s): {failure.cause}"


def test_an_unknown_host_is_named(api_key):
    client = OpenAIClient(endpoint("http://simhub-test.invalid/v1", key_names=(KEY_ENV,), max_retries=0))
    [failure] = client.complete(questions(client, 1))
    assert failure.cause == "host not found at http://simhub-test.invalid/v1"


@pytest.mark.parametrize(
    "answer", [42, {"choices": []}, {"error": {"message": "overloaded"}}, {"object": "chat.completion"}]
)
def test_malformed_answer_is_a_failure_not_an_exception(server, api_key, tmp_path, answer):
    server.responder = lambda body: answer
    client = make_client(server, tmp_path, max_retries=3)
    server.fail_next(1, 502)
    [failure] = client.complete(questions(client, 1))
    assert failure.cause == f"malformed response at {server.base_url}" and failure.attempts == 2  # not retried
    assert len(server.chat_requests()) == 2
    assert not list(tmp_path.rglob("*.json"))  # a bad answer is asked again next time


def test_one_failure_does_not_sink_the_batch(server, api_key):
    client = make_client(server, max_retries=0, concurrency=1)
    server.fail_next(1, 503)
    results = client.complete(questions(client, 4), progress=True, desc="judge")
    assert [r.ok for r in results] == [False, True, True, True]
    assert results[0].cause == f"HTTP 503 at {server.base_url}"
    assert [r.text for r in results[1:]] == [default_answer(p) for p in questions(client, 4)[1:]]


# --------------------------------------------------------------------------- cache


def test_rerun_makes_zero_calls_with_identical_results(server, api_key, tmp_path):
    client = make_client(server, tmp_path)
    payloads = questions(client, 5)
    first = client.complete(payloads)
    assert client.stats.calls == 5 and all(r.ok and not r.cached for r in first)

    rerun_client = make_client(server, tmp_path)  # a fresh process reading the same cache
    second = rerun_client.complete(payloads)
    assert rerun_client.stats.calls == 0 and rerun_client.stats.cache_hits == 5
    assert second == first and all(r.cached for r in second)
    assert len(server.chat_requests()) == 5
    assert not list(tmp_path.rglob("*.tmp"))  # written atomically, no leftovers


def test_cached_rerun_needs_no_key(server, api_key, tmp_path, monkeypatch):
    client = make_client(server, tmp_path)
    payloads = questions(client, 2)
    client.complete(payloads)
    monkeypatch.delenv(KEY_ENV)
    assert all(r.cached for r in make_client(server, tmp_path).complete(payloads))


def test_failures_are_not_cached(server, api_key, tmp_path):
    client = make_client(server, tmp_path, max_retries=0)
    server.fail_next(1, 500)
    [failure] = client.complete(questions(client, 1))
    assert not failure.ok
    [result] = client.complete(questions(client, 1))
    assert result.ok and not result.cached
    assert len(server.chat_requests()) == 2


def test_cache_is_keyed_by_endpoint_and_body(api_key, tmp_path):
    with FakeOpenAIServer() as one, FakeOpenAIServer() as two:
        payload = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        make_client(one, tmp_path).complete([payload])
        make_client(two, tmp_path).complete([payload])
        make_client(two, tmp_path).complete([{**payload, "temperature": 0}])
        assert len(one.chat_requests()) == 1 and len(two.chat_requests()) == 2


# --------------------------------------------------------------------------- concurrency and async


def test_concurrency_limit_holds(api_key):
    with FakeOpenAIServer(latency_s=0.15) as server:
        client = make_client(server, concurrency=3)
        results = client.complete(questions(client, 12))
        assert all(r.ok for r in results)
        assert 1 < server.max_in_flight <= 3


def test_async_concurrency_limit_holds(api_key):
    with FakeOpenAIServer(latency_s=0.15) as server:
        client = make_client(server, concurrency=2)

        async def main():
            try:
                return await client.acomplete(questions(client, 8))
            finally:
                await client.aclose()

        results = asyncio.run(main())
        assert [r.text for r in results] == [default_answer(p) for p in questions(client, 8)]
        assert 1 < server.max_in_flight <= 2


def test_async_retries_cache_and_failures(server, api_key, tmp_path):
    client = make_client(server, tmp_path, max_retries=1)

    async def main():
        server.fail_next(1, 429)
        first = await client.acomplete(questions(client, 1))
        server.fail_next(2, 500)
        second = await client.acomplete(questions(client, 1, prefix="other"))
        again = await client.acomplete(questions(client, 1))
        return first, second, again

    (first,), (second,), (again,) = asyncio.run(main())
    assert first.ok and second.cause == f"HTTP 500 at {server.base_url}" and again.cached
    assert len(server.chat_requests()) == 4


def test_sync_complete_works_inside_a_running_loop(server, api_key):
    """A sync caller inside an event loop (a notebook, an async app calling sync code) is not broken."""
    client = make_client(server)

    async def main():
        return client.complete(questions(client, 2))

    assert all(r.ok for r in asyncio.run(main()))


# --------------------------------------------------------------------------- the key stays secret


def test_key_never_in_logs_cache_failures_or_reprs(api_key, tmp_path, caplog):
    for name in ("", "openai", "httpx", "httpx2", "httpcore", "httpcore2", "simhub"):
        caplog.set_level(logging.DEBUG, logger=name or None)
    with FakeOpenAIServer() as server:
        client = make_client(server, tmp_path, max_retries=1, timeout_s=0.3)
        server.fail_next(2, 401)  # OpenAI's 401 body quotes the key it was given
        server.fail_next(2, 500)
        server.stall_next(2, seconds=1.0)
        payloads = questions(client, 4)
        results = [*client.complete(payloads[:1], progress=True)]
        results += (
            client.complete(payloads[1:2]) + client.complete(payloads[2:3]) + client.complete(payloads[3:])
        )
        results += asyncio.run(client.acomplete(questions(client, 2, prefix="async")))
        results += client.complete_batch(questions(client, 2, prefix="batch"), poll_interval_s=0.01)
        assert [r.ok for r in results] == [False, False, False, True, True, True, True, True]
        assert [r.cause.split(" at ")[0] for r in results[:3]] == ["HTTP 401", "HTTP 500", "no answer within 0.3 s"]
        assert server.chat_requests()[0].authorization == f"Bearer {api_key}"
        server.fail_next(1, 401)
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions", data=b"{}", headers={"Authorization": f"Bearer {api_key}"}
        )
        with pytest.raises(urllib.error.HTTPError) as quoted:
            urllib.request.urlopen(request, timeout=5)
        assert api_key in quoted.value.read().decode()  # so the checks below are not vacuous

    logged = [record.getMessage() + repr(record.args) + repr(record.__dict__) for record in caplog.records]
    assert any(record.name.startswith("openai") for record in caplog.records)  # the SDK did log at DEBUG
    assert all(api_key not in line for line in logged)
    assert api_key not in caplog.text
    for failure in results[:3]:
        assert api_key not in repr(failure) and api_key not in failure.message
        assert api_key not in str(failure.to_error()) and api_key not in repr(failure.to_error())
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(api_key.encode() not in p.read_bytes() for p in files)
    assert (
        api_key not in repr(client)
        and api_key not in repr(client.config)
        and api_key not in repr(vars(client))
    )


# --------------------------------------------------------------------------- Batch API


def test_batch_end_to_end(server, api_key, tmp_path):
    client = make_client(server, tmp_path)
    payloads = questions(client, 5)
    client.complete(payloads[:2])  # already answered: must not be re-sent
    server.fail_next(1, 500)  # the first batch line fails
    jobs = [*payloads, payloads[4]]  # a duplicate is sent once
    results = client.complete_batch(jobs, poll_interval_s=0.01, progress=True)

    [upload] = server.requests_to("POST", "/v1/files")
    [create] = server.requests_to("POST", "/v1/batches")
    assert create.body["endpoint"] == "/v1/chat/completions" and create.body["completion_window"] == "24h"
    assert upload.authorization == create.authorization == f"Bearer {api_key}"
    lines = [json.loads(line) for line in server.file_content(create.body["input_file_id"]).splitlines()]
    assert [line["body"] for line in lines] == payloads[2:]
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert [line["custom_id"] for line in lines] == [request_key(server.base_url, p) for p in payloads[2:]]
    assert b"purpose" in upload.body and b"batch" in upload.body

    assert [r.ok for r in results] == [True, True, False, True, True, True]
    assert results[2].cause == f"HTTP 500 at {server.base_url}" and results[2].status == 500
    assert [r.text for r in results if r.ok] == [
        default_answer(p) for p in (*payloads[:2], *payloads[3:], payloads[4])
    ]
    assert results[0].cached and not results[3].cached
    assert client.stats.batched == 3 and client.stats.failures == 1
    assert server.chat_requests()[2:] == []  # no live call for batched requests
    assert not list((tmp_path / "batches").glob("*.json"))  # finished batches are forgotten

    rerun = make_client(server, tmp_path)
    again = rerun.complete_batch(jobs[:2] + jobs[3:], poll_interval_s=0.01)
    assert rerun.stats.calls == 0 and all(r.cached for r in again)


def test_batch_that_expires_reports_missing_requests(api_key, tmp_path):
    with FakeOpenAIServer(batch_final_status="failed") as server:
        client = make_client(server, tmp_path)
        results = client.complete_batch(questions(client, 2), poll_interval_s=0.01)
        assert [r.cause for r in results] == ["batch failed", "batch failed"]
        assert not list((tmp_path / "batches").glob("*.json"))
        client.complete_batch(questions(client, 2), poll_interval_s=0.01)
        assert len(server.requests_to("POST", "/v1/batches")) == 2  # a failed batch is submitted anew


def test_batch_wait_limit_then_resume_without_resubmitting(api_key, tmp_path):
    with FakeOpenAIServer(batch_polls=10**6) as server:
        client = make_client(server, tmp_path)
        payloads = questions(client, 3)
        pending = client.complete_batch(payloads, poll_interval_s=0.01, max_wait_s=0.05)
        assert {r.cause for r in pending} == {"batch in_progress"}
        assert len(list((tmp_path / "batches").glob("*.json"))) == 1

        server.batch_polls = 0
        results = make_client(server, tmp_path).complete_batch(payloads, poll_interval_s=0.01)
        assert [r.text for r in results] == [default_answer(p) for p in payloads]
        assert len(server.requests_to("POST", "/v1/batches")) == 1
        assert len(server.requests_to("POST", "/v1/files")) == 1


def test_batch_resumes_after_the_process_is_killed(api_key, tmp_path):
    """A run killed while polling leaves its batch id behind; the next run polls that batch."""
    with FakeOpenAIServer(batch_polls=10**6) as server:
        client = make_client(server, tmp_path)
        payloads = questions(client, 3)
        script = textwrap.dedent("""
            import json, sys
            from simhub.models.openai import OpenAIClient
            from tests.doubles.openai_server import endpoint
            base_url, cache_dir, key_env, payloads = sys.argv[1:4] + [json.loads(sys.argv[4])]
            config = endpoint(base_url, key_names=(key_env,), cache_dir=cache_dir)
            client = OpenAIClient(config)
            client.complete_batch(payloads, poll_interval_s=0.02)
        """)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", script, server.base_url, str(tmp_path), KEY_ENV, json.dumps(payloads)],
            env=env,
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 45
            while len(server.requests_to("GET", "/v1/batches/")) < 2:
                assert proc.poll() is None, "the batch run ended before it could be killed"
                assert time.monotonic() < deadline, "the batch run never polled"
                time.sleep(0.02)
        finally:
            proc.kill()
            proc.wait()
        assert len(list((tmp_path / "batches").glob("*.json"))) == 1

        server.batch_polls = 0
        resumed = make_client(server, tmp_path)
        results = resumed.complete_batch(payloads, poll_interval_s=0.01)
        assert [r.text for r in results] == [default_answer(p) for p in payloads]
        assert len(server.requests_to("POST", "/v1/batches")) == 1  # not submitted twice
        assert len(server.requests_to("POST", "/v1/files")) == 1
        assert not list((tmp_path / "batches").glob("*.json"))


TOOL = {"type": "function", "function": {"name": "get_mastery", "parameters": {"type": "object", "properties": {}}}}


def test_tools_are_sent_as_given_and_their_calls_parsed():
    """The tool-calling tutor's requests: the tools and the tool choice go into the body as given, and
    the answer's calls come back in order, their arguments as the model wrote them."""
    body = chat_payload("gpt-4.1", [{"role": "user", "content": "Day 1, turn 1."}], tools=[TOOL], tool_choice="auto")
    assert body["tools"] == [TOOL] and body["tool_choice"] == "auto"
    assert "tools" not in chat_payload("gpt-4.1", [{"role": "user", "content": "x"}])  # only when asked
    with pytest.raises(ConfigError) as bad:
        chat_payload("gpt-4.1", [{"role": "user", "content": "x"}], tools=[TOOL, {"type": "function"}])
    assert bad.value.field == "tools[1]"
    answer = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_mastery", "arguments": "{}"}},
                             {"id": "c2", "type": "function", "function": {"name": "assign_items",
                                                                           "arguments": '{"item_ids": ["'}}]}}]}
    choice = parse_chat_response(answer).choices[0]
    assert choice.text is None and choice.tool_calls == (ToolCall("c1", "get_mastery", "{}"),
                                                          ToolCall("c2", "assign_items", '{"item_ids": ["'))
    assert parse_chat_response({"choices": [{"message": {"content": "hi"}}]}).choices[0].tool_calls == ()
    answer["choices"][0]["message"]["tool_calls"][1]["function"] = {"arguments": "{}"}  # no name
    with pytest.raises(EndpointError) as malformed:
        parse_chat_response(answer)
    assert malformed.value.field == "choices[0].message.tool_calls[1]" and '"item_ids"' not in str(malformed.value)
