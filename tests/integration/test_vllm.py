"""The vLLM backend in the real server: one AsyncLLM with enable_lora serves both simulators of
tests/profiles/tiny.yaml (the base, and the random rank-32 LoRA as a LoRARequest); the
OpenAI-compatible student on it (log-probabilities, streaming, usage) gives the transformers
backend's numbers. The served tests share one engine start (~40 s on 2 CPU cores)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")
pytest.importorskip("litestar")
httpx = pytest.importorskip("httpx")

from tests.conftest import TESTS, TINY_PROFILE  # noqa: E402
from tests.doubles.server_process import ServerProcess, metric_total  # noqa: E402
from tests.integration.test_serving_openai import BODY, events  # noqa: E402

HISTORY = {"id": "v", "question": {"text": "What is 5/8 divided by 1/6?"},
           "turns": [{"role": "tutor", "content": "What calculation do we need to do here?"}]}


# The in-process engine runs first, before the served tests start theirs: the tests of
# TestInProcessEngine share one engine start (every one loads the tiny Llama with the same options),
# which is freed when the last of them is done.


@pytest.fixture(scope="class")
def unload():
    yield
    from simhub.models import unload_models

    unload_models()


@pytest.mark.usefixtures("unload")
class TestInProcessEngine:
    def test_the_offline_engine_runs_in_this_process_and_leaves_it_as_it_found_it(self, tiny_kit):
        """On a CPU the offline engine's core and worker run in this process (no child processes to
        start, each importing torch and vLLM again). Torch's thread count and ``set_num_threads``
        (which vLLM's CPU worker replaces), the random state it seeds, the garbage collector it
        freezes and its multiprocessing switch are as they were; a second engine starts after the
        first is closed (its process group ended) and decodes the same."""
        import gc
        import os
        import random

        import numpy as np
        import psutil
        import torch

        from simhub.config import ModelRef
        from simhub.models import LoadOptions, Sampling, load_lm, unload_models

        torch.set_num_threads(2)
        setter = torch.set_num_threads
        random.seed(5), np.random.seed(5), torch.manual_seed(5)
        expected = (random.random(), np.random.rand(), torch.rand(1).item())
        random.seed(5), np.random.seed(5), torch.manual_seed(5)
        texts = []
        for start in range(2):
            lm = load_lm(ModelRef(model=str(tiny_kit["llama"])), LoadOptions(backend="vllm"))
            texts.append(lm.generate([[{"role": "user", "content": "What is 3/4 of 20?"}]], Sampling(max_tokens=8))[0]
                         .generations[0].text)
            assert lm.engine.in_process and psutil.Process().children(recursive=True) == []
            assert torch.set_num_threads is setter and torch.get_num_threads() == 2
            assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ and gc.get_freeze_count() == 0
            if start == 0:  # what the caller draws next is what it would have drawn without vLLM
                assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
            unload_models()
        assert texts[0] == texts[1]  # greedy: the same continuation from the second engine

    def test_prompt_logprobs_match_transformers(self, tiny_kit):
        from simhub.config import MetricModels, ModelRef, ScoringConfig
        from simhub.metrics import ScoreItem
        from simhub.models import LoadOptions, load_lm
        from simhub.scoring import Scorer
        from tests.integration.test_scorer import DIALOGUE

        ref = ModelRef(model=str(tiny_kit["llama"]))
        hf = load_lm(ref, LoadOptions(backend="transformers"))
        vl = load_lm(ref, LoadOptions(backend="vllm"))
        pairs = [(hf.chat_ids([{"role": "user", "content": "What is 3/4 of 20?"}]), [*hf.text_ids("It is 15."), hf.eot_id])]
        pairs.append((pairs[0][0][:5], pairs[0][1]))
        for a, b in zip(hf.continuation_logprobs(pairs), vl.continuation_logprobs(pairs), strict=True):
            assert a.shape == b.shape
            assert a == pytest.approx(b, abs=2e-3)

        # The same Scorer on both backends: tutor_response within 1%, the same acts.
        config = ScoringConfig(metrics=MetricModels(acts=ref, tutor_response=ref))
        items = [ScoreItem(DIALOGUE, 1, "ok"), ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 5, "x")]
        on_hf = Scorer(config, load=LoadOptions(backend="transformers")).score(items)
        on_vllm = Scorer(config, load=LoadOptions(backend="vllm")).score(items)
        for a, b in zip(on_hf.items, on_vllm.items, strict=True):
            assert (a.scores["tutor_response"] is None) == (b.scores["tutor_response"] is None)
            if a.scores["tutor_response"] is not None:
                assert math.isclose(a.scores["tutor_response"], b.scores["tutor_response"], rel_tol=1e-2)
            assert a.details["acts"]["predicted"] == b.details["acts"]["predicted"]

    def test_structured_outputs_follow_the_schema(self, tiny_kit):
        """Schema-guided JSON on vLLM (its structured outputs): every sampled reply parses and matches
        the schema, compact as the transformers backend writes it; a schema the decoder cannot follow
        is a ConfigError naming json_schema."""
        from simhub.config import ModelRef
        from simhub.errors import ConfigError
        from simhub.models import LoadOptions, Sampling, load_lm
        from tests.integration.test_guided_json import ASK, SCHEMA, compact, matches, parses

        lm = load_lm(ModelRef(model=str(tiny_kit["llama"])), LoadOptions(backend="vllm"))
        results = lm.generate([ASK, ASK], Sampling(temperature=1.0, max_tokens=80, n=2, seed=3, json_schema=SCHEMA))
        for g in (g for r in results for g in r.generations):
            value = parses(g.text)
            assert value is not None and matches(value, SCHEMA), g.text
            assert compact(g.text)  # as the transformers backend writes it
        with pytest.raises(ConfigError, match="json_schema"):
            lm.generate([ASK], Sampling(max_tokens=8, json_schema={"type": "frobnicate"}))


@pytest.fixture(scope="module")
def vllm_server(simhub_home, tiny_profile, tmp_path_factory):
    """``simhub serve`` of the tiny profile on the vLLM backend, started once for this module: the URL."""
    env = {"SIMHUB_HOME": str(simhub_home), "VLLM_CPU_KVCACHE_SPACE": "1", "SIMHUB_MAX_TOKENS": "32"}
    server = ServerProcess(TINY_PROFILE, env=env, args=["--backend", "vllm"],
                           log_path=tmp_path_factory.mktemp("vllm") / "vllm.log", cwd=str(TESTS.parent),
                           ready_timeout=240)
    with server as url:
        yield url


def test_vllm_backend_multi_lora_greedy_and_batching(vllm_server):
    url = vllm_server
    with httpx.Client(base_url=url, timeout=120) as c:
        models = {m["id"]: m for m in c.get("/models").json()["simulators"] if m["id"].startswith("tiny")}
        assert {m["backend"] for m in models.values()} == {"vllm"}

        def sim(model, **sampling):
            r = c.post("/simulate", json={"model": model, "dialogues": [HISTORY, HISTORY], "sampling": {"max_tokens": 12, **sampling}})
            assert r.status_code == 200, r.text
            return r.json()["results"]

        base, lora = sim("tiny-student", n=2), sim("tiny-student-lora", n=2)
        assert base == sim("tiny-student", n=2)  # greedy is deterministic
        assert base[0] == base[1] and base[0]["candidates"][0] == base[0]["candidates"][1]
        assert base[0]["candidates"][0]["text"] != lora[0]["candidates"][0]["text"]  # the adapter is applied
        # Seeded n>1 sampling gives distinct candidates (vLLM alone would repeat one seed n times).
        # The random LoRA makes the distribution nearly one-hot, so diversity is checked on the base.
        sampled = sim("tiny-student", temperature=1.0, top_p=1.0, n=4, seed=5)
        assert len(sampled[0]["candidates"]) == 4
        assert len({x["text"] for x in sampled[0]["candidates"]}) > 1

        async def burst():  # concurrent requests share the engine's continuous batch
            async with httpx.AsyncClient(base_url=url, timeout=120) as ac:
                bodies = [{"model": m, "dialogues": [HISTORY], "sampling": {"max_tokens": 8}}
                          for m in ("tiny-student", "tiny-student-lora") * 8]
                return await asyncio.gather(*(ac.post("/simulate", json=b) for b in bodies))

        responses = asyncio.run(burst())
        assert all(r.status_code == 200 for r in responses)
        metrics = c.get("/metrics").text
        assert "simhub_generated_tokens_total" in metrics
        # 4 calls of sim() and the 16-request burst: 20 answered /simulate requests, on both simulators.
        assert metric_total(metrics, "simhub_http_requests_total", method="POST", route="/simulate", status="200") == 20
        for model in ("tiny-student", "tiny-student-lora"):
            assert metric_total(metrics, "simhub_generated_tokens_total", model=model) > 0
            assert metric_total(metrics, "simhub_prompt_tokens_total", model=model) > 0
        assert metric_total(metrics, "simhub_http_request_duration_seconds_count", route="/simulate") == 20
        assert metric_total(metrics, "simhub_ready") == 1.0


def test_vllm_chat_logprobs_stream_and_usage(vllm_server, tiny_profile):
    from simhub.config import ModelRef
    from simhub.models import Sampling, load_lm, unload_models
    from simhub.prompts import student_messages
    from simhub.serving.chat import chat_to_dialogue
    from simhub.serving.schemas import ChatMessage

    body = {**BODY, "logprobs": True, "top_logprobs": 3}
    with httpx.Client(base_url=vllm_server, timeout=120) as c:
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


def test_an_in_process_engine_that_fails_to_start_leaves_the_process_as_it_found_it(monkeypatch):
    """vLLM refusing to build (here: an engine that raises) reaches the caller as it is, with vLLM's
    switch, torch's thread setter and the garbage collector restored."""
    import gc
    import os

    import torch
    import vllm

    from simhub.models import vllm as backend

    def refuse(**kwargs):
        torch.set_num_threads = lambda n: None  # as vLLM's CPU worker does before it fails
        gc.freeze()
        raise ValueError("no memory for the KV cache")

    setter = torch.set_num_threads
    monkeypatch.setattr(vllm, "LLM", refuse)
    with pytest.raises(ValueError, match="KV cache"):
        backend._in_process_llm({"model": "x"})
    assert torch.set_num_threads is setter and gc.get_freeze_count() == 0
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ


def test_engines_on_a_cpu_size_their_kv_cache_explicitly():
    """An engine's start must not depend on the memory another process (the other test worker) holds:
    vLLM-cpu's own sizing asks for a share of the machine's memory less what this process holds, which
    fails in a large process. simhub names the size: 1 GiB on a CPU unless the profile says otherwise."""
    from simhub.config import VLLMOptions
    from simhub.models.vllm import CPU_KV_CACHE_BYTES, engine_args

    assert engine_args("m", None, VLLMOptions())["kv_cache_memory_bytes"] == CPU_KV_CACHE_BYTES == 1 << 30
    assert engine_args("m", None, VLLMOptions(kv_cache_memory_bytes=5 << 20))["kv_cache_memory_bytes"] == 5 << 20


def test_an_engine_that_cannot_get_its_kv_cache_says_which_setting_to_change(tiny_kit):
    """A KV cache larger than the machine's memory: vLLM refuses it, and the caller gets simhub's
    message naming the profile setting (and vLLM's own words), not vLLM's alone."""
    from simhub.config import ModelRef, VLLMOptions
    from simhub.errors import ConfigError
    from simhub.models import LoadOptions, Sampling, load_lm, unload_models

    huge = 1 << 50  # a pebibyte
    try:
        with pytest.raises(ConfigError, match=r"kv_cache_memory_bytes.*vLLM said: Available memory") as err:
            lm = load_lm(ModelRef(model=str(tiny_kit["llama"])),
                         LoadOptions(backend="vllm", vllm=VLLMOptions(kv_cache_memory_bytes=huge, seed=1)))
            lm.generate([[{"role": "user", "content": "hi"}]], Sampling(max_tokens=2))
        assert err.value.field == "vllm.kv_cache_memory_bytes"
    finally:
        unload_models()
