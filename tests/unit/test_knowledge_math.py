"""The knowledge metric's arithmetic, pinned to docs/protocol.md §3 (pure numpy: these run on a core install)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simhub.errors import ConfigError
from simhub.metrics.knowledge import (
    FIRST_TURN_REASON,
    KnowledgeDeltas,
    NoDelta,
    knowledge_scores,
    load_cutoffs,
    paper_cutoffs,
    pooled_real_deltas,
    quadratic_weighted_kappa,
    quantile_cutoffs,
    quantize,
    save_cutoffs,
    similarity,
    true_probability,
)

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


def test_bf16_masteries_sit_on_the_1_256_grid_and_small_moves_round_to_a_zero_delta():
    """FIDELITY.md (bf16 masteries): with ``kt_dtype: bfloat16`` the two-way softmax is a bf16 number,
    so a mastery of 0.5 or more is a multiple of 1/256, and a move of less than half a step between
    two prompts is a delta of exactly 0; float32 keeps both."""
    gap = np.linspace(-6.0, 6.0, 4001)  # logit(True) - logit(False)
    p32 = true_probability(gap, np.zeros_like(gap))
    p16 = true_probability(gap, np.zeros_like(gap), "bfloat16")
    assert p32 == pytest.approx(1 / (1 + np.exp(-gap)), abs=1e-15)
    high = p16[p16 >= 0.5]
    assert high.size > 1000 and np.array_equal(high * 256, np.round(high * 256))
    assert np.abs(p16 - p32).max() <= 1 / 512  # rounded to the nearest step
    assert not np.array_equal(p32[p32 >= 0.5] * 256, np.round(p32[p32 >= 0.5] * 256))
    # Two histories whose masteries differ by about 0.001 (a tenth of the paper's deltas): the same bf16 value.
    before, after = true_probability([0.900, 0.905], [0.0, 0.0], "bfloat16")
    assert after - before == 0.0
    before32, after32 = true_probability([0.900, 0.905], [0.0, 0.0])
    assert 0.0005 < after32 - before32 < 1 / 512
    # The paper's worked example (docs/protocol.md §3) is made of such numbers: multiples of 1/256, to 4 decimals.
    example = np.array(SPEC_CUTOFFS + SPEC_REAL + SPEC_SIM) * 256
    assert np.abs(example - np.round(example)).max() < 0.02


def test_bf16_mastery_is_the_softmax_of_bf16_logits_in_bf16():
    """The reference's computation: softmax over the bf16 model's two logits, in bf16."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    logits = torch.tensor(rng.normal(0.0, 3.0, size=(20_000, 2)), dtype=torch.bfloat16)
    reference = torch.softmax(logits, dim=-1)[:, 0].double().numpy()
    as_float = logits.float().double().numpy()
    np.testing.assert_array_equal(true_probability(as_float[:, 0], as_float[:, 1], "bfloat16"), reference)


def test_qwk_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, size=200)
    b = np.clip(a + rng.integers(-2, 3, size=200), 0, 4)
    assert quadratic_weighted_kappa(a, b) == pytest.approx(
        metrics.cohen_kappa_score(a, b, weights="quadratic"), abs=1e-12)


def test_qwk_with_an_empty_bin_is_the_references_inferred_categories():
    """FIDELITY.md (knowledge QWK): the reference lets sklearn infer the categories from the data, so
    a bin that neither rating uses drops out and the weights are squared rank differences."""
    metrics = pytest.importorskip("sklearn.metrics")
    # Bins 2 and 3 are empty: the categories are 0, 1, 4 with ranks 0, 1, 2.
    a, b = np.array([0, 1, 4, 4, 1, 0, 4, 1]), np.array([0, 4, 4, 1, 1, 0, 0, 4])
    reference = metrics.cohen_kappa_score(a, b, weights="quadratic")
    fixed_scale = metrics.cohen_kappa_score(a, b, weights="quadratic", labels=list(range(5)))
    assert abs(reference - fixed_scale) > 0.05  # the two readings really differ here
    assert quadratic_weighted_kappa(a, b) == pytest.approx(reference, abs=1e-12)
    # Random sets with one or more bins left out, as a set's own cutoffs can leave them.
    rng = np.random.default_rng(7)
    for _ in range(200):
        present = rng.choice(5, size=int(rng.integers(2, 5)), replace=False)
        x, y = rng.choice(present, size=40), rng.choice(present, size=40)
        if np.union1d(x, y).size < 2:
            continue
        assert quadratic_weighted_kappa(x, y) == pytest.approx(
            metrics.cohen_kappa_score(x, y, weights="quadratic"), abs=1e-12)


def test_qwk_degenerate_inputs():
    assert quadratic_weighted_kappa([0, 3, 4, 1], [0, 3, 4, 1]) == 1.0
    # One category in both ratings: 0/0, which sklearn (the reference's call) reports as NaN.
    assert np.isnan(quadratic_weighted_kappa([2, 2, 2], [2, 2, 2]))
    assert np.isnan(quadratic_weighted_kappa([], []))
    with pytest.raises(ValueError, match=r"integers in 0\.\.4"):
        quadratic_weighted_kappa([0, 5], [0, 1])


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


def test_rescoring_from_details_recomputes_the_sets_own_cutoffs():
    """The bootstrap re-scores resamples from stored deltas: cutoffs come from the given items."""
    from simhub.metrics.knowledge import scores_from_details

    details = [None, {"kcs": ["a"], "real_deltas": [0.1], "sim_deltas": [0.1]},
               {"kcs": ["a"], "real_deltas": [-0.2], "sim_deltas": [0.3]},
               {"kcs": ["a"], "real_deltas": [0.0], "sim_deltas": [0.0]}]
    values, summary = scores_from_details(details)
    cut = quantile_cutoffs([0.1, -0.2, 0.0])
    assert summary["cutoffs"] == pytest.approx(list(cut))
    assert values[0] is None and values[1] == 1.0 and values[3] == 1.0
    assert values[2] == similarity(quantize([-0.2], cut), quantize([0.3], cut))
    fixed, _ = scores_from_details(details, SPEC_CUTOFFS)
    assert fixed[2] == similarity(quantize([-0.2], SPEC_CUTOFFS), quantize([0.3], SPEC_CUTOFFS))


def test_resampled_similarity_equals_rescoring_the_resample():
    """The bootstrap's vectorised statistic equals re-scoring the resampled items from scratch."""
    from simhub.metrics.knowledge import resampled_similarity, scores_from_details

    rng = np.random.default_rng(0)
    details = [None] + [{"kcs": ["a", "b"], "real_deltas": list(rng.normal(0, 0.02, 2)),
                         "sim_deltas": list(rng.normal(0, 0.02, 2))} for _ in range(30)]
    statistic = resampled_similarity(details)
    for _ in range(5):
        idx = rng.integers(0, len(details), len(details))
        values, _ = scores_from_details([details[i] for i in idx])
        expected = np.mean([v for v in values if v is not None])
        assert statistic(idx) == pytest.approx(expected, abs=1e-12)
    assert statistic(np.array([0, 0])) is None


def test_the_bootstraps_batched_statistic_is_bit_identical_to_one_resample_at_a_time():
    """``of_draws`` (all resamples at once) gives exactly the floats of ``statistic(indices)``, so a
    cluster bootstrap's interval is the same either way: ties, items without deltas, items with
    several KCs, resamples that draw no delta at all."""
    from simhub.metrics.knowledge import resampled_similarity
    from simhub.stats import cluster_bootstrap

    rng = np.random.default_rng(7)
    for trial in range(6):
        n = int(rng.integers(20, 120))
        details = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15:
                details.append(None)
            elif r < 0.2:
                details.append({"kcs": [], "real_deltas": [], "sim_deltas": []})
            else:
                k = int(rng.integers(1, 5))
                real = rng.normal(0, 0.02, k)
                details.append({"kcs": ["kc"] * k, "real_deltas": list(np.round(real, 2) if trial % 2 else real),
                                "sim_deltas": list(rng.normal(0, 0.02, k))})
        clusters = [f"d{i // int(rng.integers(1, 12))}" for i in range(n)]
        statistic = resampled_similarity(details)
        one_at_a_time = cluster_bootstrap(clusters, lambda idx, f=statistic: f(idx), n_resamples=200, seed=trial)
        assert cluster_bootstrap(clusters, statistic, n_resamples=200, seed=trial) == one_at_a_time
        counts = rng.integers(0, 3, (40, n))
        counts[0] = 0
        batched = statistic.of_draws(counts, np.arange(n))
        single = [statistic(np.repeat(np.arange(n), row)) for row in counts]
        assert np.array_equal(batched, np.array([np.nan if v is None else v for v in single]), equal_nan=True)
