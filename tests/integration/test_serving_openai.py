"""The OpenAI-compatible student in process: streaming events, log-probabilities from the
transformers backend, end of dialogue, usage, and the policy for OpenAI parameters a simulated
student cannot honour."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("litestar")

from litestar.testing import TestClient

from simhub.config import load_profile
from simhub.serving.app import create_app
from simhub.serving.settings import ServiceSettings
from tests.integration.test_serving import DEMO, QUESTION, assert_error, wait_ready

MESSAGES = [{"role": "system", "content": QUESTION["text"]},
            {"role": "user", "content": "What calculation do we need to do here?"},
            {"role": "assistant", "content": "5/8 divided by 1/6?"},
            {"role": "user", "content": "Yes! How do we divide fractions?"}]
BODY = {"model": "tiny-student", "max_tokens": 8, "messages": MESSAGES}


@pytest.fixture(scope="module")
def client(tiny_profile):
    profile = load_profile(DEMO)
    settings = ServiceSettings.load(profile, max_tokens=64, max_n=4)
    with TestClient(create_app(settings, profile)) as c:
        wait_ready(c)
        yield c


def events(response) -> list:
    """The ``data:`` payloads of a server-sent event stream, decoded (``[DONE]`` kept as a string)."""
    out = []
    for block in response.text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block.removeprefix("data: ")
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_stream_sends_openai_chunks_then_done(client):
    plain = client.post("/v1/chat/completions", json={**BODY, "n": 2}).json()
    r = client.post("/v1/chat/completions", json={**BODY, "n": 2, "stream": True, "stream_options": {"include_usage": True}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = events(r)
    assert chunks[-1] == "[DONE]"
    chunks = chunks[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["index"] == index]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}
        assert "".join(c["delta"].get("content") or "" for c in mine) == plain["choices"][index]["message"]["content"]
        assert [c["finish_reason"] for c in mine[:-1]] == [None] * (len(mine) - 1)
        assert mine[-1]["finish_reason"] == plain["choices"][index]["finish_reason"]
        assert mine[-1]["end_of_dialogue"] is False
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == plain["usage"]
    assert all(c["usage"] is None for c in chunks[:-1])
    # Without include_usage there is no usage chunk and no usage key.
    bare = events(client.post("/v1/chat/completions", json={**BODY, "stream": True}))
    assert bare[-1] == "[DONE]" and all("usage" not in c and c["choices"] for c in bare[:-1])


def test_logprobs_from_the_transformers_backend(client):
    out = client.post("/v1/chat/completions", json={**BODY, "logprobs": True, "top_logprobs": 3}).json()
    choice = out["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"] > 0  # one entry per generated token
    # the tokens are the text's: the end-of-turn token that stopped it is neither listed nor counted
    assert content[-1]["token"] != "<|eot_id|>"
    for entry in content:
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and all(v <= 0 for v in tops)
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        # Greedy: the chosen token is the most likely one.
        assert entry["logprob"] == pytest.approx(tops[0], abs=1e-5) and entry["token"] == entry["top_logprobs"][0]["token"]
    only = client.post("/v1/chat/completions", json={**BODY, "logprobs": True}).json()["choices"][0]["logprobs"]["content"]
    assert [e["logprob"] for e in only] == pytest.approx([e["logprob"] for e in content], abs=1e-6)
    assert all(e["top_logprobs"] == [] for e in only)
    sampled = client.post("/v1/chat/completions", json={**BODY, "logprobs": True, "top_logprobs": 2, "n": 2,
                                                        "temperature": 1.0, "seed": 3}).json()
    assert len(sampled["choices"]) == 2
    for c in sampled["choices"]:
        for e in c["logprobs"]["content"]:  # sampled tokens: each is at most as likely as the best alternative
            assert len(e["top_logprobs"]) == 2 and e["logprob"] <= e["top_logprobs"][0]["logprob"] + 1e-5
    assert sum(len(c["logprobs"]["content"]) for c in sampled["choices"]) == sampled["usage"]["completion_tokens"]
    stream = events(client.post("/v1/chat/completions", json={**BODY, "stream": True, "logprobs": True, "top_logprobs": 3}))
    streamed = [e for c in stream[:-1] for ch in c["choices"] if ch.get("logprobs") for e in ch["logprobs"]["content"]]
    assert [e["logprob"] for e in streamed] == pytest.approx([e["logprob"] for e in content], abs=1e-6)


def test_transformers_logprobs_equal_teacher_forced_scores(tiny_kit):
    """The generated tokens' log-probabilities are those of scoring the same tokens afterwards, and
    recording them changes nothing that is generated."""
    from simhub.config import ModelRef
    from simhub.models import Sampling, load_lm

    lm = load_lm(ModelRef(model=str(tiny_kit["llama"])))
    prompts = [lm.chat_ids([{"role": "user", "content": "What is 5/8 divided by 1/6?"}]), lm.chat_ids([{"role": "user", "content": "ok"}])]
    for sampling in (Sampling(max_tokens=12, logprobs=4), Sampling(max_tokens=12, temperature=1.0, n=2, seed=1, logprobs=0)):
        plain = dataclasses.replace(sampling, logprobs=None)
        results, again, ids = lm.generate(prompts, sampling), lm.generate(prompts, plain), lm.generate_ids(prompts, plain)
        for prompt, result, other, seqs in zip(prompts, results, again, ids, strict=True):
            assert [g.text for g in result.generations] == [g.text for g in other.generations]
            assert all(g.logprobs is None for g in other.generations)
            for g, seq in zip(result.generations, seqs, strict=True):
                # the end-of-turn token that stopped it is not in the text: not counted, not listed
                kept = seq[:-1] if seq and seq[-1] in lm.stop_ids else seq
                assert g.logprobs is not None and len(g.logprobs) == g.tokens == len(kept)
                scored = lm.continuation_logprobs([(prompt, seq)])[0][: len(kept)]
                assert np.allclose([e.logprob for e in g.logprobs], scored, atol=1e-4)
                assert [e.token for e in g.logprobs] == [lm.tokenizer.decode([t]) for t in kept]
                if sampling.logprobs:
                    assert all(len(e.top) == 4 and e.top[0][1] >= e.logprob - 1e-5 for e in g.logprobs)
                    assert all(e.top[0][1] == pytest.approx(e.logprob, abs=1e-5) for e in g.logprobs)  # greedy
                else:
                    assert all(e.top == [] for e in g.logprobs)


def test_end_of_dialogue_is_reported_on_the_choice():
    from simhub.models import Sampling
    from simhub.serving import chat
    from simhub.serving.schemas import ChatCompletionRequest
    from simhub.simulation import SimulationResult, candidate_from_text

    request = ChatCompletionRequest(model="m", messages=[])
    result = SimulationResult([candidate_from_text("Thanks, bye![end of dialogue]", "length", tokens=7)], prompt_tokens=20)
    out = chat.completion(request, Sampling(), result)
    choice = out.choices[0]
    assert (choice.message.content, choice.finish_reason, choice.end_of_dialogue) == ("Thanks, bye!", "stop", True)
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.total_tokens) == (20, 7, 27)
    last = json.loads(list(chat.stream_events(request, Sampling(), result))[-2].removeprefix(b"data: "))
    assert last["choices"][0]["finish_reason"] == "stop" and last["choices"][0]["end_of_dialogue"] is True


@pytest.mark.parametrize("extra", [
    {"frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}, "response_format": {"type": "text"},
     "tool_choice": "none", "modalities": ["text"], "stop": [], "store": False},
    {"user": "u-1", "metadata": {"k": "v"}, "service_tier": "auto", "parallel_tool_calls": True},
    {"some_vendor_extension": {"x": 1}, "top_k": 5},  # not OpenAI's: ignored
])
def test_neutral_and_harmless_parameters_are_accepted(client, extra):
    r = client.post("/v1/chat/completions", json={**BODY, **extra})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(("extra", "field", "named"), [
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", ["tools"]),
    ({"logit_bias": {"50256": -100}, "presence_penalty": 0.5}, "presence_penalty", ["presence_penalty", "logit_bias"]),
    ({"response_format": {"type": "json_object"}}, "response_format", ["response_format"]),
    ({"functions": [], "stop": ["\n"], "reasoning_effort": "low"}, "functions", ["functions", "reasoning_effort", "stop"]),
    ({"top_logprobs": 2}, "top_logprobs", ["logprobs"]),
    ({"max_completion_tokens": 65}, "max_completion_tokens", ["cap of 64"]),
    ({"n": 5}, "n", ["cap of 4"]),
])
def test_unsupported_parameters_are_refused_by_name(client, extra, field, named):
    err = assert_error(client.post("/v1/chat/completions", json={**BODY, **extra}), 400, field)
    for name in named:
        assert name in err["message"]


def test_text_content_parts_only(client):
    parts = [{"type": "text", "text": "What is 5/8 divided by 1/6?"}]
    assert client.post("/v1/chat/completions", json={**BODY, "messages": [MESSAGES[0], {"role": "user", "content": parts}]}
                       ).status_code == 200
    image = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    assert_error(client.post("/v1/chat/completions", json={**BODY, "messages": [MESSAGES[0], {"role": "user", "content": image}]}),
                 400, "messages[1].content[0].type", "only text")


# The user_proxy convention: a harness sends its own transcript (user = the simulated user, here the
# student; assistant = the AI under test, here the tutor) with its own system prompt.
HARNESS = [{"role": "system", "content": "You are simulating a user. Stay in character and be brief."},
           {"role": "assistant", "content": "What calculation do we need to do here?"},
           {"role": "user", "content": "5/8 divided by 1/6?"},
           {"role": "assistant", "content": "Yes! How do we divide fractions?"}]


def test_user_proxy_roles_from_the_profile_default_and_the_request(tiny_profile):
    profile = load_profile(DEMO)
    settings = ServiceSettings.load(profile, max_tokens=64, chat_roles="user_proxy")
    with TestClient(create_app(settings, profile)) as proxy_client:
        wait_ready(proxy_client)
        # The request field overrides the default: student roles give the reference answer.
        reference = proxy_client.post("/v1/chat/completions", json={**BODY, "roles": "student", "logprobs": True}).json()
        by_default = proxy_client.post("/v1/chat/completions", json={
            **BODY, "messages": HARNESS, "metadata": {"question": QUESTION["text"]}, "logprobs": True}).json()
        # The same dialogue, so the same greedy turn, token for token, and the same prompt (the harness's
        # system prompt never reaches the model).
        assert by_default["choices"][0]["message"]["content"] == reference["choices"][0]["message"]["content"]
        assert by_default["usage"] == reference["usage"]
        assert ([e["logprob"] for e in by_default["choices"][0]["logprobs"]["content"]]
                == pytest.approx([e["logprob"] for e in reference["choices"][0]["logprobs"]["content"]], abs=1e-6))
        other_system = [{"role": "system", "content": "Completely different instructions."}, *HARNESS[1:]]
        again = proxy_client.post("/v1/chat/completions", json={**BODY, "messages": other_system,
                                                                 "question": QUESTION["text"]}).json()
        assert again["choices"][0]["message"]["content"] == reference["choices"][0]["message"]["content"]
        # The student speaks next: a transcript ending with the student's own (user) message is refused.
        assert_error(proxy_client.post("/v1/chat/completions", json={**BODY, "messages": HARNESS[:3]}), 400,
                     "messages[2].role", "user_proxy")
        assert_error(proxy_client.post("/v1/chat/completions", json={**BODY, "messages": HARNESS,
                                                                      "metadata": {"question": 7}}),
                     400, "metadata.question")


def test_user_proxy_role_mapping():
    from simhub.serving.chat import chat_to_dialogue
    from simhub.serving.schemas import ChatMessage

    d = chat_to_dialogue([ChatMessage(**m) for m in HARNESS], "user_proxy", "Q?")
    assert d.question.text == "Q?"
    assert [(t.role, t.content) for t in d.turns] == [("tutor", HARNESS[1]["content"]), ("student", HARNESS[2]["content"]),
                                                       ("tutor", HARNESS[3]["content"])]
    # Without a question the harness's system prompt is still not taken for one.
    assert chat_to_dialogue([ChatMessage(**m) for m in HARNESS], "user_proxy").question.text == "(no question given)"


def test_bad_chat_roles_setting_names_the_variable():
    from simhub.errors import ConfigError

    with pytest.raises(ConfigError, match="SIMHUB_CHAT_ROLES"):
        ServiceSettings.load(None, {"SIMHUB_CHAT_ROLES": "tutor"})
