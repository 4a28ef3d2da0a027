"""The realism reward: as trl's reward function (``simhub.rewards``) and as ``POST /v1/reward``.

Its values are the Scorer's, combined as documented (the weighted mean of the non-null values), on
the packaged MiniLM (cosine) and ROUGE-L, which need no trained model.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from simhub.config import EmbedderConfig, MetricModels, ModelRef, Profile, ScoringConfig, load_profile
from simhub.errors import ConfigError, DataError
from simhub.metrics import ScoreItem
from simhub.schema import to_builtins
from simhub.scoring import Scorer
from simhub.scoring.rewards import RealismReward, combine


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    return Scorer(ScoringConfig(metrics=MetricModels(cosine=EmbedderConfig())))


@pytest.fixture(scope="module")
def turns(sample_corpus):
    """Eight real student turns of the test split, each with a made-up completion."""
    out = []
    for d in sample_corpus["test"][:4]:
        for i in d.student_turn_indices()[:2]:
            out.append((d, i, f"I think the answer is {len(out)} because of the first step."))
    return out


def _expected(scorer: Scorer, turns, weights: dict[str, float]) -> tuple[list[float], list[dict]]:
    result = scorer.score([ScoreItem(d, i, c) for d, i, c in turns], list(weights))
    values = [r.scores for r in result.items]
    return [sum(w * v[m] for m, w in weights.items()) / sum(weights.values()) for v in values], values


def test_the_reward_is_the_weighted_mean_of_the_scorers_values(scorer, turns):
    weights = {"rouge_l": 1.0, "cosine": 3.0}
    reward = RealismReward(scorer, weights=weights)
    expected, values = _expected(scorer, turns, weights)
    # trl's call: prompts, completions and the dataset's columns as keyword arguments
    got = reward(prompts=["p"] * len(turns), completions=[c for _, _, c in turns],
                 dialogue=[to_builtins(d) for d, _, _ in turns], turn_index=[i for _, i, _ in turns],
                 completion_ids=[[1, 2]] * len(turns), trainer_state=None)
    assert got == expected  # exactly: the same numbers, combined as documented
    assert reward.score([ScoreItem(d, i, c) for d, i, c in turns]) == (expected, values)
    assert reward.__name__ == "realism" and reward.describe() == {"metrics": ["rouge_l", "cosine"], "weights": weights}


def test_trls_other_column_forms_give_the_same_rewards(scorer, turns, sample_corpus):
    reward = RealismReward(scorer, metrics=["rouge_l", "cosine"], dialogues=sample_corpus["test"])
    expected, _ = _expected(scorer, turns, {"rouge_l": 1.0, "cosine": 1.0})
    chat = [[{"role": "assistant", "content": c}] for _, _, c in turns]  # the conversational format
    assert reward(prompts=None, completions=chat, dialogue_id=[d.id for d, _, _ in turns],
                  turn_index=[i for _, i, _ in turns]) == expected
    # the real turn's text alone serves the metrics that read no dialogue
    real = [d.turns[i].content for d, i, _ in turns]
    assert reward(completions=[c for _, _, c in turns], real=real) == expected


def test_a_null_metric_leaves_the_mean_and_all_null_is_no_reward():
    assert combine({"a": 0.5, "b": None}, {"a": 1.0, "b": 3.0}) == 0.5
    assert combine({"a": None, "b": None}, {"a": 1.0, "b": 1.0}) is None
    assert combine({"a": 0.2, "b": 0.6}, {"a": 1.0, "b": 0.0}) == 0.2
    assert combine({"a": 0.2, "b": 0.6}, {"a": 1.0, "b": 1.0}, {"b": False}) == pytest.approx(-0.2)  # lower is better


def test_bad_settings_and_columns_are_errors_naming_the_field(scorer, turns):
    with pytest.raises(ConfigError, match=r"metrics: .*rouge") as e:
        RealismReward(scorer, metrics=["rouge"])
    assert e.value.field == "metrics"
    for weights, message in (({"acts": 1.0}, "not configured"), ({"rouge_l": -1.0}, "at least 0"),
                             ({"rouge_l": 0.0, "cosine": 0.0}, "every weight is 0")):
        with pytest.raises(ConfigError, match=message):
            RealismReward(scorer, metrics=["rouge_l", "cosine"] if "acts" not in weights else None, weights=weights)
    reward = RealismReward(scorer, metrics=["rouge_l"])
    completions = [c for _, _, c in turns]
    with pytest.raises(DataError, match="turn_index: required") as e:
        reward(completions=completions, dialogue=[to_builtins(d) for d, _, _ in turns])
    with pytest.raises(DataError, match="real: 1 values for 8 completions"):
        reward(completions=completions, real=["x"])
    with pytest.raises(DataError, match="dialogue_id: this reward was given no dialogues"):
        reward(completions=completions, dialogue_id=["a"] * 8, turn_index=[1] * 8)
    with pytest.raises(DataError, match="give dialogue and turn_index"):
        reward(completions=completions)
    # a metric that reads the dialogue cannot score a bare real turn
    acts = Scorer(ScoringConfig(metrics=MetricModels(acts=ModelRef(model="never-loaded"))))
    with pytest.raises(DataError, match="real: acts read the dialogue"):
        RealismReward(acts, metrics=["acts", "rouge_l"])(completions=["a"], real=["b"])


def test_realism_reward_builds_from_a_profile_and_checks_names_first():
    from simhub.rewards import realism_reward

    reward = realism_reward("demo", metrics=["rouge_l"])
    assert reward.metrics == ["rouge_l"]
    assert reward(completions=["6/8, so it is A."], real=["6/8, so it is A."]) == [1.0]
    with pytest.raises(ConfigError, match="weights: errors not among the reward metrics"):
        realism_reward("demo", metrics=["rouge_l"], weights={"errors": 1.0})


# ------------------------------------------------------------------------------------------ POST /v1/reward


@pytest.fixture(scope="module")
def client():
    from litestar.testing import TestClient

    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings
    from tests.integration.test_serving import wait_ready

    demo = load_profile("demo")
    profile = msgspec.structs.replace(demo, name="reward", source=None, simulators={}, tutors={},
                                      scoring=msgspec.structs.replace(demo.scoring, metrics=MetricModels(
                                          cosine=EmbedderConfig())))
    assert isinstance(profile, Profile)
    with TestClient(create_app(ServiceSettings.load(profile, environ={}), profile)) as c:
        wait_ready(c)
        yield c


def test_v1_reward_gives_the_scorers_values(client, scorer, turns):
    weights = {"rouge_l": 1.0, "cosine": 3.0}
    expected, values = _expected(scorer, turns, weights)
    prompts = [f"<prompt {k}>\n" for k in range(len(turns))]
    labels = [{"dialogue": to_builtins(d), "turn_index": i} for d, i, _ in turns]
    labels[1] = json.dumps(labels[1])  # OpenRLHF sends a dataset column as text
    body = {"query": [p + c for p, (_, _, c) in zip(prompts, turns, strict=True)], "prompts": prompts,
            "labels": labels, "metrics": ["rouge_l", "cosine"], "weights": weights}
    r = client.post("/v1/reward", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == pytest.approx(expected, abs=1e-9) and out["scores"] == out["rewards"]
    assert out["extra_logs"]["rouge_l"] == [v["rouge_l"] for v in values]
    assert out["extra_logs"]["cosine"] == pytest.approx([v["cosine"] for v in values], abs=1e-9)


@pytest.mark.parametrize(("change", "status", "field"), [
    ({"labels": []}, 400, "labels"),
    ({"prompts": ["not the start "]}, 400, "prompts[0]"),
    ({"labels": ["{not json"]}, 400, "labels[0]"),
    ({"labels": [{"turn_index": 1}]}, 400, "labels[0]"),
    ({"labels": [{"real": "x", "turn_index": 1}]}, 400, "labels[0].turn_index"),
    ({"metrics": ["rouge"]}, 400, "metrics"),
    ({"weights": {"cosine": 1.0}}, 400, "weights"),
    ({"query": []}, 422, "query"),
    ({"query": "a text"}, 422, "query"),
    ({"labels": [{"real": 3}]}, 422, "labels"),
    ({"extra": 1}, 422, None),
])
def test_v1_reward_refuses_malformed_bodies_naming_the_field(client, change, status, field):
    body = {"query": ["<p>I think it is A."], "prompts": ["<p>"], "labels": [{"real": "6/8, so it is A."}],
            "metrics": ["rouge_l"], **change}
    r = client.post("/v1/reward", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    if field is not None:
        assert error["field"] is not None and error["field"].startswith(field), error
    assert client.get("/health").status_code == 200
