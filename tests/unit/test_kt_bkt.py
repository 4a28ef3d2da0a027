"""BKT, the KT backbone and its registry: the update against hand computations, the saved file."""

from __future__ import annotations

import json

import pytest

from simhub.errors import DataError, UnknownNameError
from simhub.learners.kt import (
    BKT,
    BKTParams,
    KTModel,
    UnknownKCError,
    kt_backend,
    kt_backend_names,
    load_kt_model,
    register_kt_backend,
)
from simhub.learners.kt.bkt import BKT_FILE_VERSION, posterior, predict_correct, transition
from simhub.learners.kt.registry import _BACKENDS

P = BKTParams(p_init=0.2, p_learn=0.1, p_guess=0.25, p_slip=0.1)


def model(**extra: BKTParams) -> BKT:
    return BKT({"fractions": P, "decimals": BKTParams(p_init=0.5, p_learn=0.3, p_guess=0.2, p_slip=0.2), **extra})


def test_one_correct_answer_by_hand():
    # Prediction before: 0.2 * 0.9 + 0.8 * 0.25 = 0.18 + 0.20 = 0.38.
    # Posterior: 0.18 / 0.38 = 9/19. Transition: 9/19 + (1 - 9/19) * 0.1 = 9/19 + 1/19 = 10/19.
    # Prediction after: (10/19) * 0.9 + (9/19) * 0.25 = 11.25/19.
    m = model()
    b0 = m.initial_belief()
    assert m.mastery(b0, "fractions") == pytest.approx(0.2)
    assert m.predict(b0, "fractions") == pytest.approx(0.38)
    assert posterior(0.2, True, P) == pytest.approx(9 / 19)
    b1 = m.update(b0, "q1", "fractions", True)
    assert m.mastery(b1, "fractions") == pytest.approx(10 / 19)
    assert m.predict(b1, "fractions") == pytest.approx(11.25 / 19)


def test_then_a_wrong_answer_by_hand():
    # From P(L) = 10/19: posterior = (10/19)(0.1) / ((10/19)(0.1) + (9/19)(0.75)) = 1 / (1 + 6.75) = 4/31.
    # Transition: 4/31 + (27/31)(0.1) = 6.7/31.
    m = model()
    b = m.update(m.update(m.initial_belief(), "q1", "fractions", True), "q2", "fractions", False)
    assert posterior(10 / 19, False, P) == pytest.approx(4 / 31)
    assert m.mastery(b, "fractions") == pytest.approx(6.7 / 31)


def test_forgetting_in_the_transition():
    # 9/19 mastered keeps 95 %; 10/19 unmastered learns at 0.1: (8.55 + 1) / 19.
    forgetful = BKTParams(p_init=0.2, p_learn=0.1, p_guess=0.25, p_slip=0.1, p_forget=0.05)
    assert transition(9 / 19, forgetful) == pytest.approx(9.55 / 19)
    assert predict_correct(0.5, forgetful) == pytest.approx(0.5 * 0.9 + 0.5 * 0.25)


def test_an_impossible_answer_leaves_the_prior():
    sure = BKTParams(p_init=0.0, p_learn=0.0, p_guess=0.0, p_slip=0.1)
    assert posterior(0.0, True, sure) == 0.0


def test_update_is_pure_and_touches_one_kc():
    m = model()
    b0 = m.initial_belief()
    b1 = m.update(b0, "q1", "fractions", True)
    assert m.mastery(b0, "fractions") == pytest.approx(0.2)  # the old belief is unchanged
    assert m.mastery(b1, "decimals") == pytest.approx(0.5)
    with pytest.raises(TypeError):
        b1.p_learned["fractions"] = 1.0  # read-only
    assert m.masteries(b1) == {"fractions": pytest.approx(10 / 19), "decimals": pytest.approx(0.5)}


def test_replay_is_the_updates_in_order():
    m = model()
    history = [("q1", "fractions", True), ("q2", "decimals", False), ("q3", "fractions", False)]
    b = m.initial_belief()
    for item, kc, correct in history:
        b = m.update(b, item, kc, correct)
    assert m.replay(history).p_learned == b.p_learned


def test_an_unknown_kc_is_named():
    m = model()
    for call in (lambda: m.update(m.initial_belief(), "q", "fraction", True),
                 lambda: m.mastery(m.initial_belief(), "fraction"),
                 lambda: m.predict(m.initial_belief(), "fraction")):
        with pytest.raises(UnknownKCError, match=r"'fraction'.*did you mean 'fractions'") as info:
            call()
        assert info.value.kc == "fraction" and info.value.field == "kc"
        assert isinstance(info.value, DataError)


def test_a_model_needs_kcs_and_params():
    with pytest.raises(ValueError, match="at least one KC"):
        BKT({})
    with pytest.raises(ValueError, match=r"params\.x"):
        BKT({"x": (0.1, 0.1, 0.1, 0.1)})


def test_save_and_load_round_trip(tmp_path):
    m = model()
    path = m.save(tmp_path / "bkt.json")
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == BKT_FILE_VERSION and raw["backend"] == "bkt"
    assert list(raw["kcs"]) == ["fractions", "decimals"]
    again = BKT.load(path)
    assert again.params == m.params and again.kcs == m.kcs
    generic = load_kt_model(path)
    assert isinstance(generic, BKT) and generic.params == m.params


def test_a_newer_file_is_refused(tmp_path):
    path = model().save(tmp_path / "bkt.json")
    raw = json.loads(path.read_text())
    raw["schema_version"] = BKT_FILE_VERSION + 1
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match="newer than this simhub reads") as info:
        BKT.load(path)
    assert info.value.file == str(path) and info.value.field == "schema_version"


def test_a_bad_file_names_the_field(tmp_path):
    path = tmp_path / "bkt.json"
    path.write_text(json.dumps({"schema_version": 1, "backend": "bkt",
                                "kcs": {"x": {"p_init": 1.5, "p_learn": 0.1, "p_guess": 0.1, "p_slip": 0.1}}}))
    with pytest.raises(DataError, match=r"kcs\.x\.p_init") as info:
        BKT.load(path)
    assert info.value.file == str(path)
    path.write_text(json.dumps({"schema_version": 1, "kcs": {}}))
    with pytest.raises(DataError, match="at least one KC"):
        BKT.load(path)
    with pytest.raises(DataError, match="no such file"):
        load_kt_model(tmp_path / "absent.json")
    path.write_text(json.dumps({"schema_version": 1}))
    with pytest.raises(DataError, match="backend: missing"):
        load_kt_model(path)


def test_the_registry_is_lazy_and_extensible(tmp_path):
    assert "bkt" in kt_backend_names()
    assert kt_backend("bkt") is BKT
    with pytest.raises(UnknownNameError, match="did you mean 'bkt'"):
        kt_backend("bk")

    class Constant(KTModel):
        backend = "constant"
        kcs = ("a",)

        def initial_belief(self):
            return 0

        def update(self, belief, item, kc, correct):
            self.check_kc(kc)
            return belief + 1

        def mastery(self, belief, kc):
            self.check_kc(kc)
            return 0.5

        def predict(self, belief, kc, item=None):
            return 0.5

        @classmethod
        def load(cls, path):
            return cls()

    register_kt_backend("constant", Constant)
    try:
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"backend": "constant"}))
        loaded = load_kt_model(path)
        assert isinstance(loaded, Constant) and loaded.replay([("i", "a", True)] * 3) == 3
        with pytest.raises(UnknownKCError, match="constant model"):
            loaded.update(0, "i", "b", True)
    finally:
        _BACKENDS.unregister("constant")
