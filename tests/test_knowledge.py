"""The knowledge metric: binning and scoring pinned to SPEC §3, packed LLMKT equal to unpacked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simhub.errors import ConfigError
from simhub.metrics.knowledge import (
    FIRST_TURN_REASON,
    KnowledgeDeltas,
    KnowledgeTracer,
    NoDelta,
    knowledge_deltas,
    knowledge_scores,
    load_cutoffs,
    paper_cutoffs,
    pooled_real_deltas,
    quadratic_weighted_kappa,
    quantile_cutoffs,
    quantize,
    save_cutoffs,
    similarity,
)
from simhub.prompts import kt_context, kt_question
from simhub.schema import Dialogue, Persona, Question, Turn

torch = pytest.importorskip("torch")

SPEC_CUTOFFS = [-0.0234, 0.0000, 0.0156, 0.0430]
SPEC_REAL = [0.0117, 0.0117, -0.0156, 0.0039, 0.0078, -0.0078]
SPEC_SIM = [0.0391, 0.0352, 0.0391, 0.0352, 0.0156, 0.0352]


# ---------------------------------------------------------------------------------- pure functions


def test_spec_worked_example():
    real_q = quantize(SPEC_REAL, SPEC_CUTOFFS)
    sim_q = quantize(SPEC_SIM, SPEC_CUTOFFS)
    assert real_q.tolist() == [2, 2, 1, 2, 2, 1]
    assert sim_q.tolist() == [3, 3, 3, 3, 3, 3]
    assert round(similarity(real_q, sim_q), 4) == 0.6667


def test_value_on_a_cutoff_goes_to_the_next_bin():
    cut = [-1.0, 0.0, 1.0, 2.0]
    assert quantize([-1.0, 0.0, 1.0, 2.0], cut).tolist() == [1, 2, 3, 4]
    assert quantize([-5.0, 9.0], cut).tolist() == [0, 4]
    # Equal cutoffs (a lot of zero deltas) leave the bins between them empty.
    assert quantize([0.0, -0.1, 0.1], [0.0, 0.0, 0.0, 0.5]).tolist() == [3, 0, 3]
    assert quantize(0.5, cut).item() == 2


def test_cutoffs_are_numpy_quantiles():
    rng = np.random.default_rng(0)
    deltas = rng.normal(size=101)
    assert np.array_equal(quantile_cutoffs(deltas), np.quantile(deltas, [0.2, 0.4, 0.6, 0.8]))
    with pytest.raises(ValueError):
        quantile_cutoffs([])


def test_similarity_bounds():
    assert similarity([0, 1, 2], [0, 1, 2]) == 1.0
    assert similarity([0, 0], [4, 4]) == 0.0
    with pytest.raises(ValueError):
        similarity([1], [1, 2])


def test_qwk_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, size=200)
    b = np.clip(a + rng.integers(-2, 3, size=200), 0, 4)
    expected = metrics.cohen_kappa_score(a, b, weights="quadratic", labels=list(range(5)))
    assert quadratic_weighted_kappa(a, b) == pytest.approx(expected, abs=1e-12)
    # With all five bins present the reference's call without labels gives the same number.
    assert quadratic_weighted_kappa(a, b) == pytest.approx(
        metrics.cohen_kappa_score(a, b, weights="quadratic")
    )
    # Bins missing from both ratings: the fixed 0..4 scale, not the ranks of present labels.
    c, d = np.array([0, 4, 4, 0, 2]), np.array([0, 4, 2, 0, 4])
    assert quadratic_weighted_kappa(c, d) == pytest.approx(
        metrics.cohen_kappa_score(c, d, weights="quadratic", labels=list(range(5)))
    )


def test_qwk_degenerate_inputs():
    assert quadratic_weighted_kappa([0, 3, 4, 1], [0, 3, 4, 1]) == 1.0
    assert quadratic_weighted_kappa([2, 2, 2], [2, 2, 2]) == 1.0
    assert np.isnan(quadratic_weighted_kappa([], []))


def test_cutoffs_file_round_trip(tmp_path):
    path = tmp_path / "model" / "kt_cutoffs.json"
    save_cutoffs(path, np.array(SPEC_CUTOFFS), {"n_deltas": 6, "source": "unit test", "model": "tiny"})
    record = json.loads(path.read_text())
    assert record["cutoffs"] == SPEC_CUTOFFS
    assert (record["n_deltas"], record["source"], record["model"]) == (6, "unit test", "tiny")
    assert load_cutoffs(path).tolist() == SPEC_CUTOFFS
    assert [p.name for p in path.parent.iterdir()] == ["kt_cutoffs.json"]  # no temp file left


def test_cutoffs_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"kt_cutoffs\.json.*simhub kt-cutoffs"):
        load_cutoffs(tmp_path / "kt_cutoffs.json")
    bad = tmp_path / "bad.json"
    for text in ("{not json", '{"cutoffs": [1, 2]}', '{"cutoffs": [3, 2, 1, 0]}', "[]"):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=r"bad\.json"):
            load_cutoffs(bad)


def test_scores_and_summary_from_deltas():
    kcs = [f"kc{i}" for i in range(6)]
    # z_prev = 0 keeps the deltas exact: 0.5 + 0.0156 - 0.5 falls just below the 0.0156 cutoff.
    prev = np.zeros(6)
    item = KnowledgeDeltas(kcs=kcs, z_prev=prev, z_real=prev + SPEC_REAL, z_sim=prev + SPEC_SIM)
    per_item, summary = knowledge_scores([NoDelta(FIRST_TURN_REASON), item], SPEC_CUTOFFS)
    assert per_item[0]["score"] is None and per_item[0]["reason"] == FIRST_TURN_REASON
    assert per_item[1]["real_quantiles"] == [2, 2, 1, 2, 2, 1]
    assert per_item[1]["sim_quantiles"] == [3, 3, 3, 3, 3, 3]
    assert round(per_item[1]["score"], 4) == 0.6667
    assert (summary["n_scored"], summary["n_null"]) == (1, 1)
    assert summary["qwk"] == pytest.approx(quadratic_weighted_kappa([2, 2, 1, 2, 2, 1], [3] * 6))
    json.dumps(per_item), json.dumps(summary)  # JSON-ready
    assert np.allclose(pooled_real_deltas([item]), SPEC_REAL)
    assert np.array_equal(paper_cutoffs([item]), np.quantile(item.real, [0.2, 0.4, 0.6, 0.8]))
    assert knowledge_scores([NoDelta("x")], SPEC_CUTOFFS)[1]["qwk"] is None


# ---------------------------------------------------------------------------------- tiny LLMKT


def _dialogue(kcs: list[str], persona: bool = True, student_first: bool = False) -> Dialogue:
    turns = [
        Turn(role="tutor", content="What is 1/2 + 1/4?"),
        Turn(role="student", content="It is 2/6."),
        Turn(role="tutor", content="Check the denominators. What is 1/2 in quarters?"),
        Turn(role="student", content="2/4, so the answer is 3/4."),
        Turn(role="tutor", content="Great! Which fraction is larger, 1/2 or 1/3?"),
        Turn(role="student", content="1/3 because 3 is bigger."),
    ]
    if student_first:
        turns = [Turn(role="student", content="Hi, I need help."), *turns]
    return Dialogue(
        id="d1" if not student_first else "d2",
        question=Question(
            text="What is 1/2 + 1/4?\nA: 3/4\nB: 2/6", correct_option="A", solution="1/2 = 2/4."
        ),
        kcs=kcs,
        persona=Persona(
            openness="high",
            conscientiousness="low",
            extraversion="neutral",
            agreeableness="high",
            neuroticism="low",
        )
        if persona
        else None,
        turns=turns,
    )


KCS3 = ["Add fractions", "Equivalent fractions", "Compare fractions"]


@pytest.fixture(scope="session")
def tracer(tmp_path_factory) -> KnowledgeTracer:
    from simhub.testing.tiny import build_causal_lm, build_tokenizer

    d = _dialogue(KCS3)
    texts = [kt_context(d, d.turns, d.all_kcs)] + [f"{kt_question(kc)} True" for kc in d.all_kcs] * 10
    texts += [f"{kt_question(kc)} False" for kc in d.all_kcs] * 10
    folder = tmp_path_factory.mktemp("llmkt") / "llama"
    build_causal_lm(folder, build_tokenizer(texts, vocab_size=400))
    return KnowledgeTracer(str(folder), device="cpu", batch_size=4)


def _separate(tracer: KnowledgeTracer, dialogue: Dialogue, history: list[Turn], kcs: list[str]) -> np.ndarray:
    """Each KC as its own unpacked sequence ``context + question`` with the model's default causal mask."""
    tok, model = tracer.lm.tokenizer, tracer.lm.model
    context = [tok.bos_token_id, *tok.encode(kt_context(dialogue, history, kcs), add_special_tokens=False)]
    out = []
    for kc in kcs:
        ids = torch.tensor([context + tok.encode(kt_question(kc), add_special_tokens=False)])
        with torch.inference_mode():
            logits = model(input_ids=ids).logits[0, -1, [tracer.true_id, tracer.false_id]]
        out.append(torch.softmax(logits.double(), dim=-1)[0].item())
    return np.array(out)


def test_packed_equals_separate(tracer):
    d = _dialogue(KCS3)
    kcs = d.all_kcs
    assert len(kcs) == 4  # three level-3 KCs plus Default
    packed = tracer.mastery(d, d.turns[:4], kcs)
    assert packed.shape == (4,)
    assert np.all((packed > 0) & (packed < 1))
    np.testing.assert_allclose(packed, _separate(tracer, d, d.turns[:4], kcs), atol=1e-5, rtol=0)


def test_batch_with_padding_equals_separate(tracer):
    long, short = _dialogue(KCS3), _dialogue(["Add fractions"], persona=False)
    requests = [(short, short.turns[:2], short.all_kcs), (long, long.turns, long.all_kcs)]
    prompts = [tracer.prompt(*r) for r in requests]
    assert len(prompts[0].input_ids) < len(prompts[1].input_ids)  # the short one is right-padded
    batched = tracer.mastery_batch(requests)
    for (dialogue, history, kcs), got in zip(requests, batched, strict=True):
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, _separate(tracer, dialogue, history, kcs), atol=1e-5, rtol=0)


def _count_runs(tracer, monkeypatch) -> list[int]:
    counts: list[int] = []
    run = tracer._run

    def counting(prompts):
        counts.append(len(prompts))
        return run(prompts)

    monkeypatch.setattr(tracer, "_run", counting)
    return counts


def test_knowledge_deltas(tracer, monkeypatch):
    d = _dialogue(KCS3)
    counts = _count_runs(tracer, monkeypatch)
    results = knowledge_deltas(tracer, [(d, 1, "3/4"), (d, 3, d.turns[3].content), (d, 5, "1/2 is larger.")])
    # One forward pass: z_prev(5) is z(3), and candidate == real text makes ẑ(3) == z(3).
    assert counts == [4]
    first, same, other = results
    assert isinstance(first, NoDelta) and first.reason == FIRST_TURN_REASON
    assert isinstance(same, KnowledgeDeltas) and isinstance(other, KnowledgeDeltas)
    assert same.kcs == d.all_kcs
    np.testing.assert_array_equal(same.real, same.sim)
    np.testing.assert_array_equal(other.z_prev, same.z_real)
    np.testing.assert_allclose(other.z_real, tracer.mastery(d, d.turns[:6], d.all_kcs), atol=1e-6, rtol=0)
    changed = [*d.turns[:5], Turn(role="student", content="1/2 is larger.")]
    np.testing.assert_allclose(other.z_sim, tracer.mastery(d, changed, d.all_kcs), atol=1e-6, rtol=0)
    np.testing.assert_allclose(same.z_prev, tracer.mastery(d, d.turns[:2], d.all_kcs), atol=1e-6, rtol=0)

    cutoffs = paper_cutoffs(results)
    per_item, summary = knowledge_scores(results, cutoffs)
    assert per_item[0]["score"] is None
    assert per_item[1]["score"] == 1.0
    assert 0.0 <= per_item[2]["score"] <= 1.0
    assert summary["n_scored"] == 2


def test_default_only_and_student_first(tracer):
    plain = _dialogue([], persona=False)
    assert plain.all_kcs == ["Default"]
    (res,) = knowledge_deltas(tracer, [(plain, 3, "I don't know.")])
    assert isinstance(res, KnowledgeDeltas) and res.real.shape == (1,) and res.sim.shape == (1,)
    first = _dialogue(KCS3, student_first=True)
    out = knowledge_deltas(tracer, [(first, 0, "hello"), (first, 2, "2/6")])
    assert isinstance(out[0], NoDelta) and isinstance(out[1], KnowledgeDeltas)
    assert knowledge_deltas(tracer, []) == []
