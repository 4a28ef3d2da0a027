"""The OpenAI-compatible student on the vLLM backend: log-probabilities, streaming and usage, and
the same numbers as the transformers backend (both report the model's own distribution). One
engine start (~40 s on 2 CPU cores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")
pytest.importorskip("litestar")
httpx = pytest.importorskip("httpx")

from tests.doubles.server_process import ServerProcess  # noqa: E402
from tests.integration.test_serving_openai import BODY, events  # noqa: E402

DEMO = Path(__file__).parents[1] / "profiles" / "tiny.yaml"


def test_vllm_chat_logprobs_stream_and_usage(simhub_home, tiny_profile, tmp_path):
    from simhub.config import ModelRef
    from simhub.models import Sampling, load_lm, unload_models
    from simhub.prompts import student_messages
    from simhub.serving.chat import chat_to_dialogue
    from simhub.serving.schemas import ChatMessage

    env = {"SIMHUB_HOME": str(simhub_home), "VLLM_CPU_KVCACHE_SPACE": "1", "SIMHUB_MAX_TOKENS": "32"}
    server = ServerProcess(str(DEMO), env=env, args=["--backend", "vllm"], log_path=tmp_path / "vllm.log",
                           cwd=str(DEMO.parent.parent.parent), ready_timeout=240)
    body = {**BODY, "logprobs": True, "top_logprobs": 3}
    with server as url, httpx.Client(base_url=url, timeout=120) as c:
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        stream = events(c.post("/v1/chat/completions", json={**body, "stream": True, "stream_options": {"include_usage": True}}))
    choice = out["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"] > 0 and out["usage"]["prompt_tokens"] > 0
    for entry in content:
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert entry["logprob"] == pytest.approx(tops[0], abs=1e-4)  # greedy: the most likely token
    assert stream[-1] == "[DONE]" and stream[-2]["usage"] == out["usage"]
    assert "".join(ch["delta"].get("content") or "" for e in stream[:-2] for ch in e["choices"]) == choice["message"]["content"]

    # The transformers backend, on the same prompt, gives the same tokens and log-probabilities.
    dialogue = chat_to_dialogue([ChatMessage(**m) for m in BODY["messages"]])
    lm = load_lm(ModelRef(model=str(tiny_profile.simulators["tiny-student"].model)))
    try:
        generation = lm.generate([student_messages(dialogue, upto=len(dialogue.turns))],
                                 Sampling(max_tokens=BODY["max_tokens"], logprobs=3))[0].generations[0]
    finally:
        unload_models()
    assert [e.token for e in generation.logprobs] == [e["token"] for e in content]
    assert [e.logprob for e in generation.logprobs] == pytest.approx([e["logprob"] for e in content], abs=1e-3)
    assert json.dumps(out)  # plain JSON: no NaN or infinities
