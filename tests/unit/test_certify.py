"""The statistics of a certified tutor ranking (simhub.tutoring.certify): Kendall's W and τ against
hand-worked cases and scipy, the permutation p, rank flips, the known-groups check and the verdict."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from simhub.errors import ConfigError
from simhub.tutoring.certify import (
    W_THRESHOLD,
    FamilyOutcomes,
    _tau_b,
    certify,
    kendall_w,
    rank_matrix,
    w_permutation_p,
)


def test_kendall_w_is_the_hand_worked_value():
    # three raters, four things, no ties: rank sums 4, 6, 8, 12 (mean 7.5), S = 35, W = 12·35 / (9·60)
    ranks = np.array([[1, 2, 3, 4], [1, 3, 2, 4], [2, 1, 3, 4]], dtype=float)
    assert kendall_w(ranks) == pytest.approx(12 * 35 / (9 * 60))
    # two raters, one with a tie: S = 6.5, tie term 2³ − 2 = 6, W = 12·6.5 / (4·24 − 2·6)
    tied = np.array([[1, 2.5, 2.5], [1, 2, 3]])
    assert kendall_w(tied) == pytest.approx(78 / 84)
    assert kendall_w(np.array([[1, 2, 3], [1, 2, 3]], dtype=float)) == pytest.approx(1.0)
    assert np.isnan(kendall_w(np.array([[2.0, 2.0], [1.5, 1.5]])))  # every rater ties everything


def test_kendall_w_agrees_with_the_mean_spearman_rho_of_scipy():
    rng = np.random.default_rng(3)
    for m, n in ((2, 5), (3, 7), (5, 4)):
        values = rng.normal(size=(m, n))
        ranks = rank_matrix(values)
        rho = np.mean([stats.spearmanr(values[i], values[j]).statistic for i, j in itertools.combinations(range(m), 2)])
        assert kendall_w(ranks) == pytest.approx(((m - 1) * rho + 1) / m)  # no ties: W = ((m − 1) ρ̄ + 1) / m


def test_tau_b_is_scipys_with_ties():
    a = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 4.0])
    b = np.array([2.0, 1.0, 3.0, 3.0, 6.0, 5.0])
    assert float(_tau_b(a, b)) == pytest.approx(stats.kendalltau(a, b).statistic)
    assert np.isnan(_tau_b(np.ones(4), np.arange(4.0)))


def test_ranks_share_ties_and_follow_the_direction():
    assert rank_matrix(np.array([0.3, 0.9, 0.3, 0.1])).tolist() == [2.5, 1.0, 2.5, 4.0]
    assert rank_matrix(np.array([0.3, 0.9, 0.1]), higher_is_better=False).tolist() == [2.0, 3.0, 1.0]


def test_the_permutation_p_of_w_is_small_for_agreement_and_not_for_noise():
    agree = np.array([[1.0, 2, 3, 4, 5, 6], [1.1, 2.1, 2.9, 4.2, 5, 6.3], [0.5, 2, 3.5, 4, 5.5, 7]])
    assert w_permutation_p(agree, [True] * 3, 999, seed=0) < 0.01
    noise = np.random.default_rng(1).normal(size=(3, 6))
    assert w_permutation_p(noise, [True] * 3, 999, seed=0) > 0.05


def _family(name: str, means: dict[str, float], *, clusters: int = 12, noise: float = 0.05, seed: int = 0,
            failed: dict[str, int] | None = None, higher: bool = True) -> FamilyOutcomes:
    """Episodes of each tutor on ``clusters`` items: the tutor's mean, an item effect and noise."""
    rng = np.random.default_rng(seed)
    item = rng.normal(scale=0.1, size=clusters)
    episodes = []
    for tutor, mean in means.items():
        for c in range(clusters):
            episodes.append((tutor, f"item-{c}", float(mean + item[c] + rng.normal(scale=noise))))
        for k in range((failed or {}).get(tutor, 0)):
            episodes.append((tutor, f"item-{k}", None))
    return FamilyOutcomes(name, "gain", episodes, higher_is_better=higher)


ORDER = ["silent", "dump", "asked", "stepwise"]
GOOD = {"silent": 0.0, "dump": 0.2, "asked": 0.4, "stepwise": 0.6}


def test_agreeing_families_that_recover_the_known_order_are_certified():
    result = certify([_family("knowsim", GOOD, seed=1), _family("kt-learner", GOOD, seed=2)],
                     known_order=ORDER, n_resamples=500, n_permutations=500)
    assert result.certified and result.reasons == [] and result.flips == []
    assert result.w == pytest.approx(1.0) and result.w_ci95[0] >= W_THRESHOLD
    assert result.tau[("knowsim", "kt-learner")][0] == pytest.approx(1.0)
    assert result.ranks["knowsim"] == {"stepwise": 1.0, "asked": 2.0, "dump": 3.0, "silent": 4.0}
    lo, hi = result.rank_ci95["kt-learner"]["stepwise"]
    assert lo == hi == 1.0  # a tutor far ahead keeps its rank in every resample
    assert all(p.recovered and p.support > 0.975 for pairs in result.known_groups.values() for p in pairs)
    assert result.w_p < 0.05


def test_a_family_that_swaps_a_known_pair_is_named_and_the_ranking_not_certified():
    swapped = {**GOOD, "dump": 0.4, "asked": 0.2}
    result = certify([_family("knowsim", GOOD, seed=1), _family("kt-learner", swapped, seed=2)],
                     known_order=ORDER, n_resamples=500, n_permutations=200)
    assert not result.certified
    assert any(r.startswith("kt-learner does not recover the known order dump < asked (reversed")
               for r in result.reasons), result.reasons
    assert all(p.recovered for p in result.known_groups["knowsim"])
    # and the two families disagree on that pair with support on both sides: a flip, named
    assert [(f.first, f.second, f.family_a, f.family_b) for f in result.flips] == [
        ("asked", "dump", "knowsim", "kt-learner")]


def test_a_flip_needs_support_on_both_sides_and_a_mirror_has_none():
    close = {**GOOD, "asked": 0.21}  # asked barely above dump: no support for its order
    result = certify([_family("a", GOOD, seed=1), _family("b", close, noise=0.3, seed=2)],
                     n_resamples=500, n_permutations=100)
    assert result.flips == []
    mirror = certify([_family("a", GOOD, seed=1), _family("b", GOOD, seed=3)], n_resamples=500, n_permutations=100)
    assert mirror.flips == [] and "no known-groups check was given" in mirror.reasons


def test_a_lower_is_better_outcome_ranks_the_other_way():
    costs = {t: -v for t, v in GOOD.items()}  # e.g. days to mastery: less is better
    result = certify([_family("a", GOOD, seed=1), _family("b", costs, seed=2, higher=False)], known_order=ORDER,
                     n_resamples=300, n_permutations=100)
    assert result.w == pytest.approx(1.0) and result.certified


def test_failed_episodes_are_counted_and_named_never_dropped_silently():
    result = certify([_family("a", GOOD, seed=1, failed={"dump": 3}), _family("b", GOOD, seed=2)],
                     known_order=ORDER, n_resamples=300, n_permutations=100)
    assert result.failed["a"]["dump"] == 3 and result.failed["b"]["dump"] == 0
    assert "3 of 15 episodes of dump failed under a" in result.notes


def test_bad_inputs_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="1 learner family; a cross-learner check needs two"):
        certify([_family("a", GOOD)])
    with pytest.raises(ConfigError, match=r"ranked different tutors \(only a: stepwise; only b: tiny-tutor\)"):
        certify([_family("a", GOOD), _family("b", {**{k: v for k, v in GOOD.items() if k != "stepwise"},
                                                   "tiny-tutor": 0.1})])
    two = {"silent": 0.0, "dump": 0.2}
    with pytest.raises(ConfigError, match="2 tutors; a ranking to certify needs three"):
        certify([_family("a", two), _family("b", two)])
    with pytest.raises(ConfigError, match="known groups name tutors the runs do not have"):
        certify([_family("a", GOOD), _family("b", GOOD)], known_order=["silent", "oracle"])
