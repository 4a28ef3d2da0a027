"""The numpy dummy model: the model interface without torch, for unit tests of scorers and simulators."""

from __future__ import annotations

import numpy as np

from simhub.config import MetricModels, ModelRef, ScoringConfig
from simhub.metrics import ScoreItem
from simhub.models import Sampling, load_lm
from simhub.models.dummy import DummyLM
from simhub.schema import ACTS, Dialogue, Question, Turn
from simhub.scoring import Scorer


def test_dummy_logprobs_are_normalised_and_deterministic():
    lm = DummyLM(seed=3)
    prompt = lm.chat_ids([{"role": "user", "content": "hello"}])
    everything = lm.next_token_logprobs([prompt], list(range(256)))
    assert np.logaddexp.reduce(everything[0]) <= 0.0  # a sub-distribution of a normalised one
    assert np.allclose(everything, DummyLM(seed=3).next_token_logprobs([prompt], list(range(256))))
    assert not np.allclose(everything, DummyLM(seed=4).next_token_logprobs([prompt], list(range(256))))


def test_dummy_generation_and_chat_template():
    lm = load_lm("dummy:1")
    out = lm.generate([[{"role": "user", "content": "hi"}]], Sampling(max_tokens=5, n=2))
    assert len(out[0].generations) == 2 and out[0].generations[0].text == out[0].generations[1].text
    assert lm.chat_text([{"role": "user", "content": "hi"}]) == "<|user|>hi<eot><|assistant|>"


def test_scorer_runs_model_metrics_on_the_dummy_without_torch_models():
    d = Dialogue(id="d", question=Question(text="q"), turns=[
        Turn(role="tutor", content="What is 2+2?"), Turn(role="student", content="4", act="Math Answer", correctness="correct"),
        Turn(role="tutor", content="Yes!")])
    scorer = Scorer(ScoringConfig(metrics=MetricModels(acts=ModelRef(model="dummy:0"), tutor_response=ModelRef(model="dummy:0"))))
    result = scorer.score([ScoreItem(d, 1, "4"), ScoreItem(d, 1, "five")], ["acts", "tutor_response", "rouge_l"])
    assert all(r.details["acts"]["predicted"] in ACTS for r in result.items)
    assert all(0.0 < r.scores["tutor_response"] <= 1.0 for r in result.items)
    assert result.items[0].scores["rouge_l"] == 1.0
