"""The role-player's weakest and strongest KCs: thresholded from the belief (EduClaw-Bench takes them
from the initial belief b₁), lowest and highest first, ties by name, and fixed for the whole run."""

from __future__ import annotations

from simhub.learners.kt import BKT, BKTParams
from simhub.learners.kt.items import ItemBank, KTItem
from simhub.learners.kt.lms import LMSRun, RunPlan
from simhub.learners.kt.student import LearnerSettings, PersonaSeed, StandInRolePlayer, named_kcs


def _model() -> BKT:
    def p(init):
        return BKTParams(p_init=init, p_learn=0.5, p_guess=0.2, p_slip=0.1)

    return BKT({"a": p(0.1), "b": p(0.3), "c": p(0.3), "d": p(0.5), "e": p(0.8), "f": p(0.9)})


def test_named_kcs_by_threshold_and_order():
    model = _model()
    weakest, strongest = named_kcs(model, model.initial_belief(), LearnerSettings(n_named=2))
    assert weakest == ["a", "b"]          # 0.1, then 0.3 (b before c by name); d (0.5) is not below 0.4
    assert strongest == ["f", "e"]        # 0.9, 0.8; d is not above 0.7


def test_the_run_names_the_kcs_of_its_initial_belief_all_run_long():
    model = _model()
    items = [KTItem(id=f"q{k}", kc=k, question=f"about {k}", options={"A": "x", "B": "y"}, answer="A")
             for k in model.kcs]
    plan = RunPlan(run="r", scenario="s__t", personality="s", personality_text="", help_trigger="never", help_rate=0.0,
                   engagement=1.0, replies=0.0, adversarial=False, session_days=(1,), days=1, turns=1, probe_items=3,
                   ability="average", persona="p", seed=0)
    run = LMSRun(plan, model=model, bank=ItemBank(items), persona=PersonaSeed("p", (("q0", "a", False),)),
                 role_player=StandInRolePlayer(), settings=LearnerSettings(n_named=2))
    run.start_day(1)
    before = run._ctx()
    run.begin_turn(1)
    run.call("assign_items", {"item_ids": ["qa", "qb"]})
    run.end_turn()
    after = run._ctx()
    assert before.weakest == after.weakest == tuple(named_kcs(model, run.initial, LearnerSettings(n_named=2))[0])
    assert before.strongest == ("f", "e")
