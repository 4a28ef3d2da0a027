"""The Scorer and the model-backed metrics on the tiny models (transformers backend)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simhub.config import EmbedderConfig, JudgeConfig, MetricModels, ModelRef, ScoringConfig
from simhub.errors import ConfigError
from simhub.metrics import ScoreItem, check_metric_names
from simhub.schema import ACTS, Dialogue, Turn
from simhub.scoring import Scorer
from tests.examples import DIVIDING_FRACTIONS

DIALOGUE = DIVIDING_FRACTIONS


@pytest.fixture(scope="module")
def scorer(tiny_kit):
    llama = ModelRef(model=str(tiny_kit["llama"]))
    metrics = MetricModels(acts=llama, judge=JudgeConfig(kind="local", model=str(tiny_kit["llama"])), tutor_response=llama)
    return Scorer(ScoringConfig(metrics=metrics))


def test_tutor_response_matches_independent_computation(scorer, tiny_kit):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simhub.metrics.tutor_response import substitute
    from simhub.prompts import tutor_messages

    tok = AutoTokenizer.from_pretrained(tiny_kit["llama"])
    model = AutoModelForCausalLM.from_pretrained(tiny_kit["llama"]).eval()
    cases = [(1, "ok"), (3, "is it 15/4 because you flip and multiply?")]
    result = scorer.score([ScoreItem(DIALOGUE, i, c) for i, c in cases] + [ScoreItem(DIALOGUE, 5, "x")], ["tutor_response"])
    for (index, candidate), item in zip(cases, result.items, strict=False):
        simulated = substitute(DIALOGUE, index, candidate)
        prompt = tok.apply_chat_template(tutor_messages(simulated, upto=index + 1), add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        target = [*tok.encode(DIALOGUE.turns[index + 1].content, add_special_tokens=False), tok.convert_tokens_to_ids("<|eot_id|>")]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + target])).logits[0, len(prompt) - 1 : -1]
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(target))
        assert item.scores["tutor_response"] == pytest.approx(math.exp(-nll.item()), abs=1e-5)
    last = result.items[2]
    assert last.scores["tutor_response"] is None  # the last turn: no tutor turn follows
    assert last.details["null_reasons"]["tutor_response"] == "no tutor turn follows this student turn"


def test_acts_prediction_always_a_label(scorer):
    acts = scorer.instances["acts"]
    texts = ["", "15/4", "lol what is this", "I don't get it", "x" * 500]
    predicted = acts.predict([(DIALOGUE.turns[:3], t, DIALOGUE) for t in texts])
    assert all(p in ACTS for p in predicted) and len(predicted) == len(texts)


def test_acts_is_1_iff_the_predicted_act_equals_the_real_label(scorer, monkeypatch):
    """docs/protocol.md §3: acts scores 1 when the classifier's act of the simulated turn equals the real
    turn's label, else 0; the classifier's own predictions obey the same rule."""
    items = [ScoreItem(DIALOGUE, 1, "what?"), ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 5, "I don't know")]
    real = [DIALOGUE.turns[i].act for i in (1, 3, 5)]
    assert real == ["Seek Information", "Math Answer", "Math Answer"]
    predicted = scorer.score(items, ["acts"]).items
    assert [i.scores["acts"] for i in predicted] == [float(i.details["acts"]["predicted"] == r)
                                                      for i, r in zip(predicted, real, strict=True)]
    monkeypatch.setattr(scorer.instances["acts"], "predict",
                        lambda batch: ["Seek Information", "Acknowledge", "Math Answer"][: len(batch)])
    forced = scorer.score(items, ["acts"]).items
    assert [i.scores["acts"] for i in forced] == [1.0, 0.0, 1.0]
    assert [(i.details["acts"]["predicted"], i.details["acts"]["real"]) for i in forced] == [
        ("Seek Information", "Seek Information"), ("Acknowledge", "Math Answer"), ("Math Answer", "Math Answer")]


def test_scorer_null_rules_and_details(scorer):
    items = [ScoreItem(DIALOGUE, 1, "what?"), ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 5, "15/4")]
    result = scorer.score(items, ["acts", "correctness", "errors", "rouge_l", "tutor_response"])
    na, incorrect, last = result.items
    assert na.scores["correctness"] is None and na.scores["errors"] is None
    assert na.details["null_reasons"]["correctness"] == "real turn is na"
    assert incorrect.scores["correctness"] in (0.0, 1.0) and incorrect.scores["errors"] in (0.0, 1.0)
    assert incorrect.details["judge"]["answer"] in ("correct", "incorrect, same error", "incorrect, different error", "na")
    assert incorrect.scores["rouge_l"] == 1.0
    assert last.scores["errors"] is None and last.details["null_reasons"]["errors"] == "real turn is not incorrect"
    assert all(item.details["acts"]["predicted"] in ACTS for item in result.items)
    assert result.summary["correctness"]["count"] == 2 and result.summary["correctness"]["nulls"] == 1
    assert result.summary["tutor_response"]["count"] == 2 and result.summary["tutor_response"]["nulls"] == 1


def test_summary_is_the_mean_and_population_std_over_non_null_turns(scorer):
    """docs/protocol.md §3: a metric's score is mean ± (population) std over its non-null turns, as the
    reference's ``np.mean`` / ``np.std``. ROUGE-L against the real "5/8 divided by 1/6?" is the paper's
    sanity pair (1/4 for "8/5", 4/15 for "So, would I divide 1/6 by 5/8?"); the last turn has no
    tutor_response."""
    items = [ScoreItem(DIALOGUE, 1, "8/5"), ScoreItem(DIALOGUE, 1, "So, would I divide 1/6 by 5/8?"),
             ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 5, "x")]
    result = scorer.score(items, ["rouge_l", "tutor_response"])
    rouge = [1 / 4, 4 / 15, 1.0, 0.0]
    assert [item.scores["rouge_l"] for item in result.items] == pytest.approx(rouge, abs=1e-12)
    mean = (1 / 4 + 4 / 15 + 1 + 0) / 4  # 0.379166...
    std = math.sqrt(sum((v - mean) ** 2 for v in rouge) / 4)  # divided by n, not n - 1
    assert result.summary["rouge_l"] == {"mean": pytest.approx(mean, abs=1e-12), "std": pytest.approx(std, abs=1e-12),
                                         "count": 4, "nulls": 0}
    assert (round(mean, 4), round(std, 4)) == (0.3792, 0.3737)  # by hand; the sample std would be 0.4315

    tutor = [item.scores["tutor_response"] for item in result.items]
    assert tutor[3] is None and all(0.0 < v < 1.0 for v in tutor[:3]) and len(set(tutor[:3])) > 1
    kept = tutor[:3]
    summary = result.summary["tutor_response"]
    assert (summary["count"], summary["nulls"]) == (3, 1)
    assert summary["mean"] == pytest.approx(sum(kept) / 3, abs=1e-12)
    assert summary["std"] == pytest.approx(math.sqrt(sum((v - sum(kept) / 3) ** 2 for v in kept) / 3), abs=1e-12)


def test_bad_items_get_per_item_errors_and_empty_candidates_are_scored(scorer):
    items = [
        ScoreItem(DIALOGUE, 0, "x"),  # tutor turn
        ScoreItem(DIALOGUE, 99, "x"),  # out of range
        ScoreItem(DIALOGUE, 3, "y" * 20001),  # over the request limit
        ScoreItem(DIALOGUE, 3, ""),  # empty: scored, as the reference does
        ScoreItem(DIALOGUE, 3, "8/5"),
    ]
    result = scorer.score(items, ["rouge_l", "acts"])
    errors = [item.error for item in result.items]
    assert "tutor turn" in errors[0] and "out of range" in errors[1]
    assert "20001 characters" in errors[2]
    assert errors[3] is None and result.items[3].scores["rouge_l"] == 0.0 and result.items[3].scores["acts"] in (0.0, 1.0)
    assert errors[4] is None and result.items[4].scores["rouge_l"] == 1.0
    assert result.summary["rouge_l"]["count"] == 2


def test_candidates_are_cut_to_500_characters_and_the_marker_removed_not_stripped(tiny_profile, monkeypatch):
    """docs/protocol.md §8: the end-of-dialogue marker is removed and the candidate cut to 500
    characters, but not stripped. Every metric receives the text with its spaces, and the knowledge
    metric, whose KT prompt is plain text, scores it differently from the bare text; ROUGE-L's
    tokenisation cannot tell them apart."""
    scorer = Scorer(ScoringConfig(metrics=MetricModels(knowledge=tiny_profile.scoring.metrics.knowledge)), mode="benchmark")
    seen: dict[str, list[str]] = {}
    for name in ("rouge_l", "knowledge"):
        score = scorer.instances[name].score

        def spy(items, name=name, score=score):
            seen.setdefault(name, []).extend(it.candidate for it in items)
            return score(items)

        monkeypatch.setattr(scorer.instances[name], "score", spy)
    real = DIALOGUE.turns[3].content
    padded, long = f"  {real} \n[end of dialogue]", "8/5 " + "z" * 700
    result = scorer.score([ScoreItem(DIALOGUE, 3, padded), ScoreItem(DIALOGUE, 3, real), ScoreItem(DIALOGUE, 3, long)],
                          ["rouge_l", "knowledge"])
    marked, bare, cut = result.items
    assert seen["rouge_l"] == seen["knowledge"] == [f"  {real} \n", real, long[:500]]
    assert marked.details["candidate"] == {"end_marker": "remove"} and "candidate" not in bare.details
    assert cut.details["candidate"] == {"truncated_from": len(long)}
    assert marked.scores["rouge_l"] == bare.scores["rouge_l"] == 1.0  # ROUGE tokenisation ignores the spaces
    spaced, plain = marked.details["knowledge"], bare.details["knowledge"]
    assert plain["sim_deltas"] == plain["real_deltas"]  # the bare candidate is the real turn
    assert spaced["real_deltas"] == plain["real_deltas"] and spaced["sim_deltas"] != plain["sim_deltas"]


def test_unknown_and_unconfigured_metrics():
    with pytest.raises(ConfigError, match="did you mean 'rouge_l'"):
        check_metric_names(["rougel"])
    with pytest.raises(ConfigError, match="not configured") as info:
        Scorer(ScoringConfig()).score([ScoreItem(DIALOGUE, 3, "a")], ["acts"])
    assert info.value.field == "metrics"


def test_missing_labels_are_null(scorer):
    unlabelled = Dialogue(id="u", question=DIALOGUE.question, turns=[Turn(role="tutor", content="Hi"), Turn(role="student", content="hi")])
    item = scorer.score([ScoreItem(unlabelled, 1, "hello")], ["acts", "correctness"]).items[0]
    assert item.scores == {"acts": None, "correctness": None}
    assert item.details["null_reasons"]["acts"].startswith("real turn has no act label")
    assert item.details["null_reasons"]["correctness"].startswith("real turn has no correctness label")


def test_cosine_minilm_offline():
    scorer = Scorer(ScoringConfig(metrics=MetricModels(cosine=EmbedderConfig())))
    result = scorer.score([ScoreItem(DIALOGUE, 3, "8/5"), ScoreItem(DIALOGUE, 3, "I like football")], ["cosine"])
    same, different = (item.scores["cosine"] for item in result.items)
    assert same == pytest.approx(1.0, abs=1e-5)
    assert -1.0 <= different < 0.9


def test_a_failing_model_nulls_its_chunk_with_the_cause(scorer, monkeypatch, caplog):
    def boom(items):
        raise RuntimeError("the tutor model fell over")

    monkeypatch.setattr(scorer.instances["tutor_response"], "score", boom)
    result = scorer.score([ScoreItem(DIALOGUE, 3, "8/5")], ["tutor_response", "rouge_l"])
    item = result.items[0]
    assert item.scores == {"tutor_response": None, "rouge_l": 1.0}
    assert item.details["null_reasons"]["tutor_response"] == "failed: RuntimeError: the tutor model fell over"
    assert "metric tutor_response failed" in caplog.text


def test_packed_label_scoring_equals_separate(scorer):
    import torch

    lm = scorer.instances["acts"].load()
    prompts = [lm.chat_ids([{"role": "user", "content": t}]) for t in ("What is 3/4 of 20?", "ok", "Can you explain how you got 5/8 please?")]
    options = [[*lm.text_ids(label), lm.eot_id] for label in ACTS]
    best, packed = lm.choose(prompts, options)
    separate = np.zeros_like(packed)
    for i, prompt in enumerate(prompts):
        for k, option in enumerate(options):
            with torch.no_grad(), lm.active() as model:
                logits = model(torch.tensor([prompt + option])).logits[0, len(prompt) - 1 : -1]
            separate[i, k] = torch.log_softmax(logits, -1).gather(1, torch.tensor(option)[:, None]).sum().item()
    assert packed == pytest.approx(separate, abs=1e-4)
    assert best == [int(i) for i in separate.argmax(axis=1)]


@pytest.mark.parametrize("row_tokens", [2048, 40])
def test_prefix_tree_packing_equals_separate(scorer, row_tokens):
    """Shared prefixes, duplicates, a prefix of another sequence and row overflow all give the
    hidden states of each sequence run alone."""
    import torch

    lm = scorer.instances["acts"].load()
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
        with torch.no_grad(), lm.active() as model:
            alone = model.model(torch.tensor([seq])).last_hidden_state[0]
        assert torch.allclose(hidden, alone, atol=1e-4)
