"""The AKT backend (pykt-toolkit's AKT network behind simhub's KT interface): its reads equal the pykt
model's own forward on the history plus a query step, the update is pure, the file round-trips, and
an unknown KC or a missing pykt is a clear error."""

from __future__ import annotations

import pytest

pytest.importorskip("pykt.models.akt")

import torch

from simhub.errors import MissingExtraError
from simhub.learners.kt import UnknownKCError, load_kt_model
from simhub.learners.kt.akt import AKTSettings, fit_akt
from simhub.tutoring.lms.bench import sample_log

SMALL = AKTSettings(d_model=16, heads=2, d_ff=32, final_fc_dim=32, epochs=3, dropout=0.0, seed=0)


@pytest.fixture(scope="module")
def model():
    return fit_akt(sample_log("train"), SMALL)


def _pykt_forward(model, steps, kc_index, item_index):
    """P(correct) at a query step, straight from the pykt network."""
    q = torch.tensor([[*(s[0] for s in steps), kc_index]])
    r = torch.tensor([[*(s[2] for s in steps), 0]])
    p = torch.tensor([[*(s[1] for s in steps), item_index]])
    with torch.inference_mode():
        preds, _ = model.net(q, r, p)
    return float(preds[0, -1])


def test_reads_equal_the_pykt_forward(model):
    kcs = list(model.kcs)
    belief = model.initial_belief()
    for item, kc, correct in [("4990", kcs[0], True), ("1057", kcs[3], False), ("4990", kcs[0], True)]:
        belief = model.update(belief, item, kc, correct)
    assert len(belief.steps) == 3 and belief.steps[1][2] == 0
    for k in (0, 3, 7):
        # mastery: the reserved average-difficulty item 0
        assert model.mastery(belief, kcs[k]) == pytest.approx(_pykt_forward(model, belief.steps, k, 0), abs=1e-6)
    item = model.items[5]
    expected = _pykt_forward(model, belief.steps, 3, model.items.index(item) + 1)
    assert model.predict(belief, kcs[3], item) == pytest.approx(expected, abs=1e-6)
    masteries = model.masteries(belief)
    assert list(masteries) == kcs and masteries[kcs[7]] == pytest.approx(model.mastery(belief, kcs[7]))


def test_update_is_pure_and_keeps_the_last_max_len_steps(model):
    kc = model.kcs[0]
    b0 = model.initial_belief()
    b1 = model.update(b0, "x", kc, True)
    assert b0.steps == () and len(b1.steps) == 1
    b = b0
    for i in range(SMALL.max_len + 5):
        b = model.update(b, "x", kc, i % 2 == 0)
    assert len(b.steps) == SMALL.max_len and b.steps[-1][2] == int((SMALL.max_len + 4) % 2 == 0)


def test_training_is_deterministic_and_learns(model):
    again = fit_akt(sample_log("train"), SMALL)
    b = again.update(again.initial_belief(), "4990", again.kcs[0], True)
    assert again.mastery(b, again.kcs[0]) == pytest.approx(model.mastery(b, model.kcs[0]), abs=1e-6)
    assert model.fit["final_loss"] < model.fit["first_loss"]


def test_save_and_load_round_trip(model, tmp_path):
    path = model.save(tmp_path / "akt.json")
    assert (tmp_path / "akt.safetensors").is_file()
    loaded = load_kt_model(path)
    assert loaded.backend == "akt" and list(loaded.kcs) == list(model.kcs)
    b = model.update(model.initial_belief(), "4990", model.kcs[2], False)
    assert loaded.masteries(b) == pytest.approx(model.masteries(b), abs=1e-6)


def test_an_unknown_kc_names_it(model):
    with pytest.raises(UnknownKCError, match="'Fractions of amonts'"):
        model.update(model.initial_belief(), "x", "Fractions of amonts", True)


def test_without_pykt_the_error_names_the_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pykt(name, *args, **kwargs):
        if name.startswith("pykt"):
            raise ImportError("no pykt")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pykt)
    from simhub.learners.kt.akt import _akt_class

    with pytest.raises(MissingExtraError, match=r"pip install --no-deps pykt-toolkit==0\.0\.38"):
        _akt_class()
