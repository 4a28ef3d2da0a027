"""Tests of the cluster-aware statistics: each checks a number against an independent computation
(hand enumeration, scipy, a known table) rather than against the implementation itself."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from simhub import stats
from simhub.errors import ConfigError, DataError
from simhub.stats import (
    cluster_bootstrap,
    cluster_mean_ci,
    compare_metrics,
    holm,
    is_binary,
    mcnemar_exact,
    paired_compare,
    permutation_test,
    summarize_metrics,
)

# Five dialogues of different sizes, with nulls; dialogue "z" has no non-null value, so 1 in 5**5
# resamples (only "z" drawn five times) is undefined.
TINY_VALUES = [1.0, None, 0.0, 0.2, 0.9, None, 0.1, 0.35, 0.6, 0.75, 0.5]
TINY_CLUSTERS = ["x", "x", "x", "x", "y", "z", "w", "w", "w", "v", "v"]


def _exact_distribution(values, clusters):
    """All K**K equally likely ordered draws of K clusters, each with its exact mean over non-null values."""
    ids = list(dict.fromkeys(clusters))
    pairs = list(zip(values, clusters, strict=True))
    sums = {c: sum(Fraction(str(v)) for v, k in pairs if k == c and v is not None) for c in ids}
    counts = {c: sum(1 for v, k in pairs if k == c and v is not None) for c in ids}
    outcomes: Counter = Counter()
    for draw in itertools.product(ids, repeat=len(ids)):
        total, count = sum(sums[c] for c in draw), sum(counts[c] for c in draw)
        outcomes[None if count == 0 else total / count] += 1
    return outcomes, len(ids) ** len(ids)


def _exact_quantile(outcomes: Counter, q: float) -> float:
    """Smallest value whose probability of not being exceeded, given a defined statistic, reaches q."""
    total = sum(n for v, n in outcomes.items() if v is not None)
    cdf = 0.0
    for value in sorted(v for v in outcomes if v is not None):
        cdf += outcomes[value] / total
        if cdf >= q:
            return float(value)
    return float(max(v for v in outcomes if v is not None))


# ------------------------------------------------------------------------------ cluster bootstrap


def test_mean_ci_matches_exact_enumeration_of_a_tiny_set():
    outcomes, n_draws = _exact_distribution(TINY_VALUES, TINY_CLUSTERS)
    n_resamples = 200_000
    for confidence in (0.95, 0.8, 0.5):
        result = cluster_mean_ci(TINY_VALUES, TINY_CLUSTERS, n_resamples=n_resamples, seed=7,
                                 confidence=confidence)
        # A Monte Carlo q-quantile lies between the exact (q - d) and (q + d) quantiles, d five standard
        # errors of an empirical CDF value (plus rounding); the exact distribution has 90 values, so that is tight.
        for q, got in zip(((1 - confidence) / 2, (1 + confidence) / 2), result.ci, strict=True):
            d = 5 * math.sqrt(q * (1 - q) / n_resamples)
            assert _exact_quantile(outcomes, q - d) - 1e-12 <= got <= _exact_quantile(outcomes, q + d) + 1e-12
            assert _exact_quantile(outcomes, q + d) - _exact_quantile(outcomes, q - d) < 0.02
        # Undefined resamples (only dialogue "z" drawn) are dropped; expected count R/3125.
        expected = n_resamples * outcomes[None] / n_draws
        assert abs(result.n_dropped - expected) < 5 * math.sqrt(expected)
    values = np.array([v for v in TINY_VALUES if v is not None])
    assert result.mean == pytest.approx(values.mean())
    assert result.std == pytest.approx(values.std())
    assert result.n == 9 and result.n_clusters == 5 and result.n_resamples == n_resamples


def test_resampled_clusters_are_uniform_draws_with_replacement():
    clusters = ["a", "a", "b", "c", "c", "c"]
    sizes = Counter(clusters)
    seen: Counter = Counter()

    def record(idx: np.ndarray) -> float:
        # Every drawn dialogue brings all its items, so item counts are multiples of dialogue sizes.
        counts = Counter(clusters[i] for i in idx)
        assert all(counts[c] % sizes[c] == 0 for c in counts)
        times = tuple(sorted((c, counts[c] // sizes[c]) for c in counts))
        assert sum(n for _, n in times) == 3  # three dialogues drawn, as many as there are
        seen[times] += 1
        return float(len(idx))

    n_resamples = 27_000
    cluster_bootstrap(clusters, record, n_resamples=n_resamples, seed=3)
    seen[(("a", 1), ("b", 1), ("c", 1))] -= 1  # the estimate's call, on all items once
    assert sum(seen.values()) == n_resamples
    expected: Counter = Counter()
    for draw in itertools.product("abc", repeat=3):
        expected[tuple(sorted(Counter(draw).items()))] += 1
    assert set(seen) == set(expected)
    for multiset, ways in expected.items():
        p = ways / 27
        assert abs(seen[multiset] - n_resamples * p) < 5 * math.sqrt(n_resamples * p * (1 - p))


def test_callback_receives_whole_dialogues_in_ascending_item_order():
    clusters = [2, 1, 2, 1, 3, 2]  # interleaved on purpose
    blocks = []
    cluster_bootstrap(clusters, lambda idx: blocks.append(idx.copy()) or 0.0, n_resamples=50, seed=1)
    assert len(blocks) == 51 and list(blocks[0]) == list(range(6))  # the estimate, on all items, first
    members = {c: [i for i, k in enumerate(clusters) if k == c] for c in set(clusters)}
    for idx in blocks[1:]:
        assert idx.dtype.kind == "i"
        pos = 0
        while pos < len(idx):
            run = members[clusters[idx[pos]]]
            assert list(idx[pos:pos + len(run)]) == run
            pos += len(run)


def test_same_seed_same_output_and_seed_matters():
    rng = np.random.default_rng(0)
    values = rng.random(60).tolist()
    clusters = np.repeat(np.arange(12), 5).tolist()
    first = cluster_mean_ci(values, clusters, n_resamples=2000, seed=11)
    assert cluster_mean_ci(values, clusters, n_resamples=2000, seed=11) == first
    assert cluster_mean_ci(values, clusters, n_resamples=2000, seed=12).ci != first.ci


def test_generic_bootstrap_uses_the_same_resamples_as_the_mean_ci():
    rng = np.random.default_rng(1)
    clusters = np.repeat(np.arange(40), rng.integers(1, 15, size=40)).tolist()
    x = rng.random(len(clusters))
    x[rng.random(len(x)) < 0.3] = np.nan
    values = [None if math.isnan(v) else float(v) for v in x]

    def mean(idx: np.ndarray) -> float | None:
        kept = x[idx][~np.isnan(x[idx])]
        return float(kept.mean()) if kept.size else None

    direct = cluster_mean_ci(values, clusters, n_resamples=3000, seed=5, confidence=0.9)
    generic = cluster_bootstrap(clusters, mean, n_resamples=3000, seed=5, confidence=0.9)
    assert generic.ci == pytest.approx(direct.ci, rel=1e-12)
    assert generic.estimate == pytest.approx(direct.mean)
    assert generic.n_dropped == direct.n_dropped
    # A statistic that is undefined is dropped, not propagated.
    half = cluster_bootstrap(clusters, lambda idx: None if idx[0] % 2 else 1.0, n_resamples=400, seed=5)
    assert 0 < half.n_dropped < 400 and half.ci == (1.0, 1.0)


def test_clustering_widens_the_interval_by_root_cluster_size():
    rng = np.random.default_rng(2)
    per_dialogue, n_dialogues = 11, 300
    dialogue_values = rng.normal(size=n_dialogues)
    values = np.repeat(dialogue_values, per_dialogue)  # perfectly correlated within dialogues
    clusters = np.repeat(np.arange(n_dialogues), per_dialogue).tolist()
    clustered = cluster_mean_ci(values, clusters, n_resamples=4000, seed=0)
    naive = cluster_mean_ci(values, list(range(len(values))), n_resamples=4000, seed=0)
    ratio = (clustered.ci[1] - clustered.ci[0]) / (naive.ci[1] - naive.ci[0])
    assert ratio == pytest.approx(math.sqrt(per_dialogue), rel=0.12)
    # And the clustered interval has about the right width: 2 * 1.96 * sd / sqrt(K).
    expected = 2 * 1.96 * dialogue_values.std() / math.sqrt(n_dialogues)
    assert clustered.ci[1] - clustered.ci[0] == pytest.approx(expected, rel=0.1)


def test_paper_sized_input_drops_null_turns_but_keeps_every_dialogue():
    # 400 dialogues of 11 turns with every ninth turn null: no dialogue is all-null, so none is dropped.
    # (The time 10,000 resamples take is measured in benchmarks/bench_eval.py, not asserted here.)
    rng = np.random.default_rng(3)
    values = rng.random(4400).tolist()
    values[::9] = [None] * len(values[::9])
    clusters = [f"d{i // 11}" for i in range(4400)]
    result = cluster_mean_ci(values, clusters, n_resamples=10_000, seed=0)
    assert result.n_clusters == 400 and result.n_dropped == 0
    assert result.n == 4400 - len(values[::9])
    kept = [v for v in values if v is not None]
    assert result.mean == pytest.approx(sum(kept) / len(kept))
    assert result.ci[0] < result.mean < result.ci[1]


def test_all_null_metric_and_null_dialogues():
    result = cluster_mean_ci([None, None, None], ["a", "b", "b"], n_resamples=100)
    assert (result.mean, result.std, result.n, result.ci) == (None, None, 0, None)
    assert result.n_dropped == 100 and result.n_clusters == 2
    # A dialogue with only nulls is still a resampling unit (it shifts the others' weights).
    with_null = cluster_mean_ci([1.0, 0.0, None, float("nan")], ["a", "b", "c", "c"], n_resamples=5000, seed=1)
    assert with_null.n == 2 and with_null.n_clusters == 3 and with_null.mean == 0.5
    assert 0 < with_null.n_dropped < 5000  # P(only "c" drawn) = 1/27


# ------------------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    ("b", "c"),
    [(0, 0), (1, 0), (0, 5), (5, 0), (3, 3), (2, 3), (3, 17), (12, 4), (40, 61), (400, 460),
     (1, 2000), (2500, 2600), (19_000, 19_990), (30_000, 30_900), (1_000_000, 1_004_000)],
)
def test_mcnemar_matches_scipy_binomtest(b, c):
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = 1.0 if b + c == 0 else scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-10, abs=1e-300)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


def test_mcnemar_small_tables_by_exact_arithmetic():
    for b, c in [(0, 1), (0, 7), (2, 9), (6, 20), (1, 1)]:
        n, k = b + c, min(b, c)
        tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
        assert mcnemar_exact(b, c) == pytest.approx(float(min(Fraction(1), 2 * tail)), rel=1e-14)
    assert mcnemar_exact(0, 0) == 1.0


def test_saddle_point_pmf_agrees_with_exact_integers():
    for n, k in [(20, 3), (1000, 470), (25_000, 12_300), (25_000, 10), (50_001, 24_950)]:
        exact = float(Fraction(math.comb(n, k), 2**n))
        assert math.exp(stats._log_binom_half_pmf(k, n)) == pytest.approx(exact, rel=1e-11)


def test_mcnemar_rejects_bad_counts():
    for b, c in [(-1, 2), (1.5, 2), (True, 2)]:
        with pytest.raises(ConfigError):
            mcnemar_exact(b, c)


# ----------------------------------------------------------------------------------------- Holm


def test_holm_known_table():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_ties_none_cap_and_monotonicity():
    out = holm([0.02, None, 0.02, 0.5, 0.001])
    assert out[1] is None
    # m = 4: 0.001*4 = 0.004; the tied 0.02s get 0.02*3 and max(0.06, 0.02*2) = 0.06; 0.5*1 -> 0.5.
    assert out == pytest.approx([0.06, None, 0.06, 0.5, 0.004])
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped: 0.6*2 = 1.2
    assert holm([]) == [] and holm([None]) == [None]
    rng = np.random.default_rng(4)
    raw = rng.random(30) ** 3
    adjusted = np.array(holm(raw.tolist()))
    order = np.argsort(raw)
    assert np.all(np.diff(adjusted[order]) >= 0) and np.all(adjusted >= raw) and np.all(adjusted <= 1)


def test_holm_rejects_non_p_values():
    for bad in ([0.1, 1.5], [float("nan")], [-0.01], ["0.1"]):
        with pytest.raises(DataError):
            holm(bad)


# ---------------------------------------------------------------------------------- permutation


def test_permutation_exact_by_hand():
    # Per-dialogue sums 1, 2, 4: of the 8 sign patterns only +++ and --- reach |7| -> p = 2/8.
    diffs = [0.5, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0]
    clusters = ["a", "a", "b", "c", "c", "c", "c"]
    assert permutation_test(diffs, clusters) == 0.25
    # Sums 1, 2, -4: the observed |-1| is the smallest possible -> p = 1.
    assert permutation_test([1.0, 2.0, -4.0], ["a", "b", "c"]) == 1.0
    # Nulls are dropped, and a dialogue summing to zero changes nothing.
    assert permutation_test([0.5, 0.5, None, 2.0, 4.0, 0.3, -0.3], list("aabbcdd")) == 0.25


def test_permutation_exact_matches_brute_force():
    rng = np.random.default_rng(5)
    clusters = np.repeat(np.arange(10), 4)
    diffs = rng.normal(0.3, 1.0, size=40)
    sums = np.array([diffs[clusters == k].sum() for k in range(10)])
    observed = abs(sums.sum())
    hits = sum(abs(np.dot(signs, sums)) >= observed - 1e-12 for signs in itertools.product((1, -1), repeat=10))
    assert permutation_test(diffs, clusters.tolist()) == pytest.approx(hits / 2**10, abs=1e-15)


def test_permutation_monte_carlo_close_to_exact():
    rng = np.random.default_rng(6)
    clusters = np.repeat(np.arange(14), 6).tolist()
    diffs = rng.normal(0.15, 1.0, size=len(clusters))
    exact = permutation_test(diffs, clusters, exact_max_clusters=16)
    n = 20_000
    mc = permutation_test(diffs, clusters, exact_max_clusters=0, n_permutations=n, seed=9)
    assert 0.01 < exact < 0.99  # a p-value where the comparison means something
    assert abs(mc - exact) < 4 * math.sqrt(exact * (1 - exact) / n) + 1 / n
    assert permutation_test(diffs, clusters, exact_max_clusters=0, n_permutations=n, seed=9) == mc
    # The +1 correction: never zero, however extreme the data.
    extreme = permutation_test(np.full(60, 1.0), list(range(60)), n_permutations=999)
    assert extreme == 1 / 1000


def test_permutation_is_one_when_runs_agree():
    assert permutation_test([0.0] * 10, list("aabbccddee")) == 1.0
    rng = np.random.default_rng(7)
    a = rng.random(200)
    clusters = np.repeat(np.arange(20), 10).tolist()
    result = paired_compare(a, a, clusters)
    assert result.p == 1.0 and result.diff == 0.0 and result.ci95 == (0.0, 0.0)


# ---------------------------------------------------------------------------------- paired runs


def test_paired_binary_uses_exact_mcnemar_on_paired_items():
    # A right / B wrong on 9 turns, the reverse on 2, concordant on 6, plus unpaired turns.
    a = [1] * 9 + [0] * 2 + [1] * 3 + [0] * 3 + [1, None]
    b = [0] * 9 + [1] * 2 + [1] * 3 + [0] * 3 + [None, 0]
    clusters = [i // 3 for i in range(len(a))]
    result = paired_compare(a, b, clusters)
    assert result.test == "mcnemar-exact" and result.n == 17
    assert result.p == mcnemar_exact(9, 2)
    assert result.a == pytest.approx(12 / 17) and result.b == pytest.approx(5 / 17)
    assert result.diff == pytest.approx(7 / 17)
    assert result.ci95[0] <= result.diff <= result.ci95[1]
    forced = paired_compare(a, b, clusters, test="permutation")
    assert forced.test == "permutation" and forced.ci95 == result.ci95 and 0 < forced.p <= 1


def test_paired_continuous_uses_cluster_permutation():
    rng = np.random.default_rng(8)
    clusters = np.repeat(np.arange(30), 11).tolist()
    a = rng.random(330)
    b = a - 0.05 + rng.normal(0, 0.02, size=330)
    result = paired_compare(a, b, clusters, seed=2)
    assert result.test == "permutation" and result.n == 330
    assert result.diff == pytest.approx(float(np.mean(a - b)))
    assert result.p < 0.001 and result.ci95[0] > 0
    with pytest.raises(DataError, match="binary"):
        paired_compare(a, b, clusters, test="mcnemar-exact")


def test_paired_interval_uses_the_same_resamples_as_the_mean_ci():
    rng = np.random.default_rng(9)
    clusters = np.repeat(np.arange(25), 7).tolist()
    a = rng.random(175)
    zero = np.zeros(175)
    paired = paired_compare(a, zero, clusters, n_resamples=3000, seed=4)
    single = cluster_mean_ci(a, clusters, n_resamples=3000, seed=4)
    assert paired.ci95 == pytest.approx(single.ci, rel=1e-12)


def test_paired_with_nothing_paired():
    result = paired_compare([1.0, None], [None, 0.5], ["a", "b"])
    assert (result.a, result.b, result.diff, result.ci95, result.p, result.n) == (None,) * 5 + (0,)


# ------------------------------------------------------------------------------ dict-level helpers


def test_is_binary():
    assert is_binary([0, 1, None, 1.0, True])
    assert not is_binary([0, 0.5, 1])
    assert not is_binary([None, float("nan")])
    assert is_binary(np.array([0.0, 1.0]))


def test_summarize_metrics_equals_per_metric_calls():
    rng = np.random.default_rng(10)
    clusters = np.repeat(np.arange(15), 4).tolist()
    metrics = {"acts": rng.integers(0, 2, 60).tolist(), "cosine": rng.random(60).tolist()}
    summary = summarize_metrics(metrics, clusters, n_resamples=500, seed=3)
    assert list(summary) == ["acts", "cosine"]
    for name, values in metrics.items():
        assert summary[name] == cluster_mean_ci(values, clusters, n_resamples=500, seed=3)
    json.dumps({k: v.as_dict() for k, v in summary.items()})
    with pytest.raises(DataError, match="cosine") as info:
        summarize_metrics({"cosine": [0.1, "x"]}, ["a", "b"])
    assert info.value.field == "cosine.values[1]"


def test_compare_metrics_adjusts_with_holm():
    rng = np.random.default_rng(11)
    clusters = np.repeat(np.arange(20), 5).tolist()
    a = {"acts": rng.integers(0, 2, 100).tolist(), "cosine": rng.random(100).tolist(), "only_a": [0.0] * 100}
    b = {"cosine": (np.array(a["cosine"]) - 0.1).tolist(), "acts": rng.integers(0, 2, 100).tolist()}
    result = compare_metrics(a, b, clusters, n_resamples=500, seed=1)
    assert list(result) == ["acts", "cosine"]
    assert result["acts"].test == "mcnemar-exact" and result["cosine"].test == "permutation"
    assert [r.p_holm for r in result.values()] == holm([r.p for r in result.values()])
    forced = compare_metrics(a, b, clusters, binary=(), n_resamples=500)
    assert forced["acts"].test == "permutation"
    with pytest.raises(ConfigError, match="only_a") as info:
        compare_metrics(a, b, clusters, metrics=["cosine", "only_a"])
    assert info.value.field == "b.only_a"
    json.dumps(result["acts"].as_dict())


# -------------------------------------------------------------------------------------- errors


def test_errors_name_the_problem():
    with pytest.raises(DataError, match="one dialogue id per item") as info:
        cluster_mean_ci([0.1, 0.2, 0.3], ["a", "b"])
    assert info.value.field == "clusters"
    with pytest.raises(DataError, match=r"at least 2 dialogues \(clusters\) needed"):
        cluster_mean_ci([0.1, 0.2, 0.3], ["a", "a", "a"])
    with pytest.raises(DataError, match=r"at least 2 dialogues \(clusters\) needed"):
        cluster_bootstrap([], lambda idx: 0.0)
    with pytest.raises(DataError, match="same items"):
        paired_compare([0.1, 0.2], [0.1], ["a", "b"])
    with pytest.raises(DataError, match="infinite"):
        cluster_mean_ci([0.1, float("inf")], ["a", "b"])
    with pytest.raises(DataError, match=r"values\[1\]"):
        cluster_mean_ci([0.1, "high"], ["a", "b"])
    with pytest.raises(DataError, match="hashable"):
        cluster_mean_ci([0.1, 0.2], [["a"], ["b"]])
    for kwargs in ({"confidence": 1.0}, {"confidence": 0}, {"n_resamples": 0}, {"seed": -1}, {"seed": 1.5}):
        with pytest.raises(ConfigError):
            cluster_mean_ci([0.1, 0.2], ["a", "b"], **kwargs)
    with pytest.raises(ConfigError, match="test must be"):
        paired_compare([0.1, 0.2], [0.1, 0.2], ["a", "b"], test="t-test")
    with pytest.raises(ConfigError, match="exact_max_clusters"):
        permutation_test([0.1, 0.2], ["a", "b"], exact_max_clusters=21)


def test_mean_and_population_std_over_the_non_null_values_by_hand():
    """docs/protocol.md §3 (mean ± std): the reference prints ``np.mean`` ± ``np.std`` (ddof 0) of the
    non-null values. Over 0, 1, 0.5, 1 that is 0.625 ± sqrt(0.171875) (the sample std would be 0.4787);
    ``simhub score`` (``summarize``) and ``simhub eval`` (``cluster_mean_ci``) report the same pair."""
    from simhub.metrics import summarize

    values = [None, 0.0, 1.0, 0.5, None, 1.0]
    mean, std = 0.625, math.sqrt((0.625**2 + 0.375**2 + 0.125**2 + 0.375**2) / 4)
    assert (round(std, 4), round(math.sqrt(0.6875 / 3), 4)) == (0.4146, 0.4787)
    assert summarize(values) == {"mean": mean, "std": pytest.approx(std, abs=1e-15), "count": 4}
    result = cluster_mean_ci(values, ["a", "a", "b", "b", "c", "c"], n_resamples=100)
    assert (result.mean, result.n) == (mean, 4) and result.std == pytest.approx(std, abs=1e-15)
    assert summarize([None, None]) == {"mean": None, "std": None, "count": 0}
