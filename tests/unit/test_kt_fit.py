"""BKT fitting: EM and the grid recover parameters from simulated students; fits are deterministic."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest

from simhub.errors import ConfigError, DataError
from simhub.learners.kt import BKT, BKTParams
from simhub.learners.kt.bkt_fit import Bounds, FitSettings, fit_bkt, fit_kc, log_likelihood

TRUE = BKTParams(p_init=0.3, p_learn=0.2, p_guess=0.2, p_slip=0.1)


def simulate(params: BKTParams, n_students: int, length: int, seed: int) -> list[list[int]]:
    """Students drawn from the BKT generative model with numpy's seeded generator."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_students):
        learned = rng.random() < params.p_init
        answers = []
        for _ in range(length):
            answers.append(int(rng.random() < (1 - params.p_slip if learned else params.p_guess)))
            learned = (rng.random() >= params.p_forget) if learned else (rng.random() < params.p_learn)
        out.append(answers)
    return out


@pytest.fixture(scope="module")
def students() -> list[list[int]]:
    return simulate(TRUE, 400, 20, seed=7)


def close(fitted: BKTParams, true: BKTParams, tol: float) -> None:
    for name in ("p_init", "p_learn", "p_guess", "p_slip", "p_forget"):
        assert getattr(fitted, name) == pytest.approx(getattr(true, name), abs=tol), name


def test_em_recovers_the_parameters(students):
    params, fit = fit_kc(students, FitSettings(seed=0))
    close(params, TRUE, 0.05)
    assert fit.converged and fit.n_students == 400 and fit.n_observations == 8000
    # EM reaches at least the likelihood of the parameters that generated the data.
    assert fit.log_likelihood >= log_likelihood(students, TRUE) - 1e-6
    assert fit.log_likelihood == pytest.approx(log_likelihood(students, params))


def test_the_grid_recovers_the_parameters(students):
    params, fit = fit_kc(students, FitSettings(method="grid", grid_step=0.1))
    close(params, TRUE, 0.1 + 1e-9)
    assert fit.log_likelihood == pytest.approx(log_likelihood(students, params))


def test_em_with_forgetting():
    true = BKTParams(p_init=0.3, p_learn=0.25, p_guess=0.15, p_slip=0.1, p_forget=0.1)
    data = simulate(true, 600, 20, seed=3)
    params, _ = fit_kc(data, FitSettings(seed=0, forgetting=True))
    close(params, true, 0.06)
    assert fit_kc(data, FitSettings(seed=0))[0].p_forget == 0.0


def test_the_likelihood_is_that_of_the_sequential_predictions(students):
    # The fit's log-likelihood is the sum over answers of log P(answer | earlier answers), with the
    # predictions of BKT.update / BKT.predict.
    model = BKT({"k": TRUE})
    total = 0.0
    for answers in students[:50]:
        belief = model.initial_belief()
        for y in answers:
            p = model.predict(belief, "k")
            total += math.log(p if y else 1 - p)
            belief = model.update(belief, None, "k", bool(y))
    assert log_likelihood(students[:50], TRUE) == pytest.approx(total)


def test_fits_are_deterministic(students):
    data = {"b": students[:100], "a": students[100:200]}
    for method in ("em", "grid"):
        settings = FitSettings(method=method, seed=11, grid_step=0.1)
        one, two = fit_bkt(data, settings), fit_bkt(data, settings)
        assert list(one.kcs) == ["a", "b"]
        assert msgspec.to_builtins(one.to_file()) == msgspec.to_builtins(two.to_file())
    assert one.fit.method == "grid" and one.fit.seed == 11 and one.fit.settings["grid_step"] == 0.1


def test_the_bounds_hold():
    always = [[1] * 10 for _ in range(30)]
    for method in ("em", "grid"):
        params, _ = fit_kc(always, FitSettings(method=method, grid_step=0.1))
        assert params.p_guess < 0.5 and params.p_slip < 0.5
        assert 0.001 <= params.p_init <= 0.999
    tight = FitSettings(seed=0, bounds=Bounds(guess=(0.05, 0.1), slip=(0.05, 0.1)))
    params, _ = fit_kc(simulate(BKTParams(p_init=0.3, p_learn=0.2, p_guess=0.3, p_slip=0.3), 100, 10, 1), tight)
    assert 0.05 <= params.p_guess <= 0.1 and 0.05 <= params.p_slip <= 0.1


def test_a_saved_fit_round_trips(tmp_path, students):
    model = fit_bkt({"k": students[:100]}, FitSettings(seed=0))
    again = BKT.load(model.save(tmp_path / "fit.json"))
    assert again.params == model.params and again.fit == model.fit and again.kc_fits == model.kc_fits


def test_bad_settings_and_data():
    with pytest.raises(ConfigError, match=r"below 0\.5"):
        FitSettings(bounds=Bounds(guess=(0.0, 0.6)))
    with pytest.raises(ConfigError, match="method"):
        FitSettings(method="mcmc")
    with pytest.raises(DataError, match="no observations"):
        fit_bkt({})
    with pytest.raises(DataError, match=r"'k'.*no observations"):
        fit_kc([[], []], kc="k")
    with pytest.raises(DataError, match="0 or 1"):
        fit_kc([[0, 2]])
    with pytest.raises(DataError, match="0 or 1"):
        fit_kc([[0, 0.5]])
    with pytest.raises(DataError, match="0 or 1"):
        fit_kc([[0, "yes"]])
