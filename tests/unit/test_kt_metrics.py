"""The KT learner's measures against hand-computed values; Kendall's τ-b against scipy; the doctests."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

from simhub.errors import ConfigError, DataError
from simhub.learners.kt.metrics import (
    HelpRequest,
    brier_score,
    calibration,
    delta_solve,
    expected_calibration_error,
    kendall_tau,
    mean_pairwise_kendall,
    pass_hat_k,
    responsiveness,
    summarize_responsiveness,
)

KT_MODULES = ["simhub.learners.kt.base", "simhub.learners.kt.bkt", "simhub.learners.kt.bkt_fit",
              "simhub.learners.kt.logs", "simhub.learners.kt.metrics", "simhub.learners.kt.registry"]


@pytest.mark.parametrize("name", KT_MODULES)
def test_docstring_examples_run(name, capsys):
    failed, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0, capsys.readouterr().out


def test_delta_solve_by_hand():
    # (0.1 + 0.0 + 0.3) / 3
    assert delta_solve([0.2, 0.4, 0.5], [0.3, 0.4, 0.8]) == pytest.approx(0.4 / 3)
    # (−0.25 + 0) / 2
    assert delta_solve([0.5, 0.5], [0.25, 0.5]) == pytest.approx(-0.125)
    with pytest.raises(DataError, match="2 days of post-session accuracy for 3"):
        delta_solve([0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(DataError, match="at least one day"):
        delta_solve([], [])
    with pytest.raises(DataError, match=r"post\[1\]: 1.5 is not in \[0, 1\]"):
        delta_solve([0.1, 0.2], [0.1, 1.5])


def test_responsiveness_by_hand():
    run = [HelpRequest(1, 1), HelpRequest(1, 3), HelpRequest(2, None), HelpRequest(4, 4)]
    assert responsiveness(run) == 3 / 4               # three answered at some time
    assert responsiveness(run, same_day=True) == 2 / 4  # two on the day asked
    assert responsiveness([]) is None                  # a silent run
    with pytest.raises(DataError, match=r"requests\[1\]: answered on day 1, before its request on day 2"):
        responsiveness([HelpRequest(1, 1), HelpRequest(2, 1)])


def test_silent_runs_are_left_out_not_scored_zero():
    runs = [[HelpRequest(1, 1)], [], [HelpRequest(2, None), HelpRequest(2, 2)], [HelpRequest(3, 5)]]
    overall = summarize_responsiveness(runs)
    # Runs: 1, silent, 1/2, 1 -> (1 + 0.5 + 1) / 3; scoring the silent run 0 would give 2.5 / 4.
    assert overall.mean == pytest.approx(2.5 / 3) and overall.n_scored == 3 and overall.n_silent == 1
    assert overall.silent_rate == 0.25
    same = summarize_responsiveness(runs, same_day=True)
    assert same.mean == pytest.approx((1 + 0.5 + 0) / 3)
    nothing = summarize_responsiveness([[], []])
    assert nothing.mean is None and nothing.n_silent == 2 and nothing.silent_rate == 1.0
    assert summarize_responsiveness([]).silent_rate is None


def test_calibration_by_hand():
    predicted = [0.05, 0.15, 0.15, 0.95, 1.0, 0.5]
    observed = [0, 0, 1, 1, 1, 0]
    c = calibration(predicted, observed)  # 10 bins
    # bin 0: 0.05 vs 0     -> |0 − 0.05|    × 1/6
    # bin 1: 0.15, 0.15    -> |0.5 − 0.15|  × 2/6
    # bin 5: 0.5 (left edge is in the bin) -> |0 − 0.5| × 1/6
    # bin 9: 0.95, 1.0 (1 is in the last bin) -> |1 − 0.975| × 2/6
    assert c.ece == pytest.approx((0.05 + 0.7 + 0.5 + 0.05) / 6)
    # Brier: (0.0025 + 0.0225 + 0.7225 + 0.0025 + 0 + 0.25) / 6 = 1 / 6
    assert c.brier == pytest.approx(1 / 6)
    assert [b.n for b in c.bins] == [1, 2, 0, 0, 0, 1, 0, 0, 0, 2]
    assert c.bins[4].confidence is None and c.bins[4].accuracy is None
    assert (c.bins[5].low, c.bins[5].high) == (0.5, 0.6)
    assert c.bins[9].confidence == pytest.approx(0.975) and c.bins[9].accuracy == 1.0
    assert expected_calibration_error(predicted, observed) == c.ece
    assert brier_score(predicted, observed) == c.brier


def test_weighted_calibration_of_day_accuracies():
    # Two (run, day) pairs: mastery 0.2 with 2 attempts at accuracy 0.5, mastery 0.8 with 6 at 0.75.
    c = calibration([0.2, 0.8], [0.5, 0.75], n_bins=2, weights=[2, 6])
    assert c.ece == pytest.approx(0.3 * 2 / 8 + 0.05 * 6 / 8)
    assert c.brier == pytest.approx((2 * 0.09 + 6 * 0.0025) / 8)
    assert c.n == 8
    perfect = calibration([0.0, 1.0, 0.5, 0.5], [0, 1, 0, 1], n_bins=4)
    assert perfect.ece == 0.0 and perfect.brier == pytest.approx(0.125)


def test_calibration_errors():
    with pytest.raises(ConfigError, match="n_bins"):
        calibration([0.5], [1], n_bins=0)
    with pytest.raises(DataError, match="1 outcomes for 2 predictions"):
        calibration([0.5, 0.5], [1])
    with pytest.raises(DataError, match="nothing to calibrate"):
        calibration([], [])
    with pytest.raises(DataError, match=r"predicted\[0\]"):
        calibration([-0.1], [1])
    with pytest.raises(DataError, match="weights"):
        calibration([0.5], [1], weights=[0])


def test_pass_hat_k_by_hand():
    runs = [[True, True, True, False], [True, True, True, True], [False, True, False, False]]
    assert pass_hat_k(runs, 1) == pytest.approx((3 / 4 + 1 + 1 / 4) / 3)   # the mean success rate
    assert pass_hat_k(runs, 2) == pytest.approx((3 / 6 + 1 + 0) / 3)       # C(c,2)/C(4,2)
    assert pass_hat_k(runs, 3) == pytest.approx((1 / 4 + 1 + 0) / 3)       # C(c,3)/C(4,3)
    assert pass_hat_k(runs, 4) == pytest.approx(1 / 3)                     # all four succeed
    assert pass_hat_k({"s1": [True, False], "s2": [True, True]}, 2) == 0.5
    with pytest.raises(DataError, match="4 runs, fewer than k = 5"):
        pass_hat_k(runs, 5)
    with pytest.raises(ConfigError, match="k"):
        pass_hat_k(runs, 0)
    with pytest.raises(DataError, match="no scenarios"):
        pass_hat_k([], 1)


def test_kendall_tau_by_hand():
    # One discordant pair of six: (5 − 1) / 6.
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # Ties: pairs tied in x (1,2) and in y (2,3) count for neither; S = 4, 5 untied in each: 4 / 5.
    assert kendall_tau([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert kendall_tau([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau([1], [2]) is None
    assert kendall_tau({"a": 1, "b": 2, "c": 3}, {"c": 30, "a": 10, "b": 20}) == pytest.approx(1.0)
    with pytest.raises(DataError, match="different things"):
        kendall_tau({"a": 1, "b": 2}, {"a": 1, "c": 2})
    with pytest.raises(DataError, match="2 scores for 3"):
        kendall_tau([1, 2, 3], [1, 2])


def test_kendall_tau_b_equals_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 10, 30):
        for _ in range(20):
            x = rng.integers(0, 4, n).astype(float)   # many ties
            y = rng.integers(0, 4, n).astype(float)
            z = rng.normal(size=n)                     # no ties
            for a, b in ((x, y), (z, y), (z, -z)):
                ours = kendall_tau(a, b)
                theirs = stats.kendalltau(a, b, variant="b").statistic
                if ours is None:
                    assert np.isnan(theirs)
                else:
                    assert ours == pytest.approx(theirs, abs=1e-12)


def test_mean_pairwise_kendall():
    # τ(1,2) = 1, τ(1,3) = −1, τ(2,3) = −1.
    assert mean_pairwise_kendall([[1, 2, 3], [1, 2, 3], [3, 2, 1]]) == pytest.approx(-1 / 3)
    # The undefined pair (a constant scoring) is left out.
    assert mean_pairwise_kendall([[1, 2, 3], [1, 3, 2], [5, 5, 5]]) == pytest.approx(1 / 3)
    assert mean_pairwise_kendall([[1, 2]]) is None
