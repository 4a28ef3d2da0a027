"""The KT-learner bench's results on traces built by hand: per-run measures (ΔSolve, responsiveness,
actions, failure modes, the first-N-days view) and the per-tutor summary (silent runs, pass^k, the
paired comparison, ranking stability, failures)."""

from __future__ import annotations

import random

import msgspec
import pytest

from simhub.learners.kt.lms import Action, DayRecord, HelpRecord, ProbeAnswer, RunPlan
from simhub.tutoring.lms.bench import KTRunTrace
from simhub.tutoring.lms.results import run_measures, summarize_kt


def _answers(bits: list[int], predicted: float = 0.5) -> list[ProbeAnswer]:
    return [ProbeAnswer(item=f"q{k}", kc="Angles", answer="B" if b else "A", correct=bool(b), predicted=predicted)
            for k, b in enumerate(bits)]


def _day(day: int, pre: list[int], post: list[int], actions: list[str | tuple[str, str]] = (), *,
         failed: str | None = None) -> DayRecord:
    logged = [Action(turn=1, name=a) if isinstance(a, str) else Action(turn=1, name=a[0], error=a[1]) for a in actions]
    return DayRecord(day=day, pre=_answers(pre), post=_answers(post), actions=logged, mastery={"Angles": 0.5},
                     failed=failed)


def _help(day: int, answered: int | None) -> HelpRecord:
    return HelpRecord(day=day, kc="Angles", text="Help?", answered_day=answered,
                      answered_turn=None if answered is None else 1)


def _trace(tutor: str, run: str, days: list[DayRecord], helps: list[HelpRecord] = (), *, scenario: str = "s1",
           ability: str = "average", persona_accuracy: float = 0.5) -> KTRunTrace:
    plan = RunPlan(run=run, scenario=scenario, personality="p", personality_text="A learner.", help_trigger="any_day",
                   help_rate=1.0, engagement=1.0, replies=0.0, adversarial=False, session_days=(1, 2, 3), days=3,
                   turns=2, probe_items=4, ability=ability, persona="student", seed=0)
    return KTRunTrace(id=f"{tutor}|{run}", tutor=tutor, plan=plan, unit=["Angles"], initial_mastery={"Angles": 0.2},
                      persona_accuracy=persona_accuracy, days=days, help=list(helps), complete=True)


def _one_run() -> KTRunTrace:
    return _trace("t", "s1__average__r0", [
        _day(1, [1, 0, 0, 0], [1, 1, 0, 0], ["send_message", "assign_items", ("assign_items", "item_ids: unknown"),
                                             "get_mastery", "stay_silent"]),
        _day(2, [0, 0, 0, 0], [1, 1, 1, 1], ["send_message", "send_message", "send_message"],
             failed="learner: HTTP 500"),
        _day(3, [0, 0, 0, 0], [1, 1, 1, 0], ["stay_silent", "stay_silent", "provide_content", "adjust_level"]),
    ], [_help(1, 1), _help(1, 3), _help(3, None)])


def test_run_measures_by_hand():
    m = run_measures(_one_run())
    # Day 1: 0.50 - 0.25 = +0.25; day 3: 0.75 - 0 = +0.75; day 2 failed and is left out: mean +0.5.
    assert m.delta_solve == pytest.approx(0.5)
    assert m.days == 2 and m.failed_days == 1
    assert m.per_day == [(1, 0.25, 0.5), (3, 0.0, 0.75)]
    assert m.first_pre_accuracy == 0.25 and m.persona_accuracy == 0.5
    # Help: answered the same day, answered two days later, never: 2/3 overall, 1/3 the same day.
    assert m.help_requests == 3
    assert m.responsiveness == pytest.approx(2 / 3)
    assert m.responsiveness_same_day == pytest.approx(1 / 3)
    # The five kinds, counted without the failed call, the query and the failed day's actions.
    assert m.actions == {"send_message": 1, "stay_silent": 3, "assign_items": 1, "adjust_level": 1,
                         "provide_content": 1}
    assert m.no_gain is False and m.neglect is False


def test_the_first_days_view_stops_at_its_horizon():
    m = run_measures(_one_run(), first_days=2)
    assert m.delta_solve == pytest.approx(0.25) and m.days == 1 and m.per_day == [(1, 0.25, 0.5)]
    # Two requests by day 2: one answered on day 1, one only on day 3 (after the horizon).
    assert m.help_requests == 2
    assert m.responsiveness == pytest.approx(0.5) and m.responsiveness_same_day == pytest.approx(0.5)
    assert m.actions == {"send_message": 1, "stay_silent": 1, "assign_items": 1, "adjust_level": 0,
                         "provide_content": 0}
    assert run_measures(_one_run(), first_days=30) == run_measures(_one_run())


def test_failure_modes_and_a_silent_run():
    neglected = run_measures(_trace("t", "r", [_day(1, [1, 1, 0, 0], [1, 0, 0, 0])], [_help(1, None)]))
    assert neglected.delta_solve == pytest.approx(-0.25) and neglected.no_gain is True
    assert neglected.responsiveness == 0.0 and neglected.neglect is True
    flat = run_measures(_trace("t", "r", [_day(1, [1, 0, 0, 0], [0, 1, 0, 0])]))
    assert flat.delta_solve == 0.0 and flat.no_gain is True  # no gain is ΔSolve <= 0
    # no help request: a silent run, left out of responsiveness rather than scored 0
    assert flat.responsiveness is None and flat.responsiveness_same_day is None and flat.neglect is None
    every_day_failed = run_measures(_trace("t", "r", [_day(1, [1], [1], failed="tutor: down")]))
    assert every_day_failed.delta_solve is None and every_day_failed.no_gain is None
    assert every_day_failed.days == 0 and every_day_failed.failed_days == 1


# ----------------------------------------------------------------------------------- summary

PRE = [0, 0, 1, 1]
POST = {0.5: [1, 1, 1, 1], 0.25: [0, 1, 1, 1], 0.0: [0, 0, 1, 1], -0.25: [0, 0, 0, 1]}


def _bench() -> list[KTRunTrace]:
    """Two tutors over 2 scenarios x 2 repeats, paired by run."""
    good = {("s1", 0): 0.5, ("s1", 1): 0.25, ("s2", 0): 0.25, ("s2", 1): 0.0}
    bad = {("s1", 0): 0.0, ("s1", 1): -0.25, ("s2", 0): 0.0, ("s2", 1): -0.25}
    good_help = {("s1", 0): [_help(1, 1)], ("s1", 1): [_help(1, 2)]}  # the s2 runs are silent
    traces = []
    for (scenario, r), ds in good.items():
        run = f"{scenario}__average__r{r}"
        traces.append(_trace("good", run, [_day(1, PRE, POST[ds], ["send_message", "assign_items"])],
                             good_help.get((scenario, r), []), scenario=scenario))
        days = [_day(1, PRE, POST[bad[(scenario, r)]], ["stay_silent", "stay_silent"])]
        if (scenario, r) == ("s1", 0):
            days.append(_day(2, [1], [1], ["stay_silent"], failed="learner: HTTP 500 at there"))
        traces.append(_trace("bad", run, days, [_help(1, None)], scenario=scenario))
    return traces


def test_the_summary_by_hand():
    r = summarize_kt(_bench(), tutor_order=["good", "bad"], n_resamples=200)
    assert r.schema_version == 1 and r.kind == "kt-learner-results" and r.runs == 4
    good, bad = r.tutors["good"], r.tutors["bad"]
    assert good.runs == bad.runs == 4
    assert good.delta_solve.mean == pytest.approx(0.25) and bad.delta_solve.mean == pytest.approx(-0.125)
    assert good.delta_solve.n == 4 and good.delta_solve.ci95 is not None
    lo, hi = good.delta_solve.ci95
    assert lo <= 0.25 <= hi
    assert r.ranking == ["good", "bad"]
    # Responsiveness: two scored runs (answered the same day; the next day), two silent ones.
    assert good.silent_runs == 2 and bad.silent_runs == 0
    assert good.responsiveness.mean == pytest.approx(1.0) and good.responsiveness.n == 2
    assert good.responsiveness_same_day.mean == pytest.approx(0.5)
    assert good.responsiveness.ci95 is None  # both scored runs are in one scenario: no interval over clusters
    assert bad.responsiveness.mean == 0.0 and bad.responsiveness.n == 4
    # Failure modes: one of good's runs has ΔSolve 0; bad gains in none and answers nothing.
    assert good.failure_modes == {"no_gain": 0.25, "neglect": 0.0}
    assert bad.failure_modes == {"no_gain": 1.0, "neglect": 1.0}
    # pass^k over the two repeats: s1 both succeed, s2 one of two; (1 + 1/2) / 2 and (1 + 0) / 2.
    assert good.pass_hat_k == {"pass^1": 0.75, "pass^2": 0.5}
    assert bad.pass_hat_k == {"pass^1": 0.0, "pass^2": 0.0}
    # Actions per run; the failed day's stay_silent is not counted.
    assert good.actions_per_run == {"send_message": 1.0, "stay_silent": 0.0, "assign_items": 1.0,
                                    "adjust_level": 0.0, "provide_content": 0.0}
    assert bad.actions_per_run["stay_silent"] == 2.0
    assert good.failed_days == 0 and bad.failed_days == 1
    assert r.failures == [{"run": "bad|s1__average__r0", "day": 2, "cause": "learner: HTTP 500 at there"}]
    # Calibration: the 8 probe answers of each ok day, all predicted 0.5.
    assert good.calibration.n == 32 and bad.calibration.n == 32
    good_right = sum(2 + sum(POST[ds]) for ds in (0.5, 0.25, 0.25, 0.0))
    assert good.calibration.ece == pytest.approx(abs(good_right / 32 - 0.5))
    assert good.calibration.brier == pytest.approx(0.25)
    assert good.by_day == [{"day": 1, "pre": 0.5, "post": pytest.approx(0.75), "mastery": 0.5, "runs": 4}]
    assert good.gate == "pass" and bad.gate == "pass"


def test_the_paired_comparison_has_the_sign_of_the_order():
    traces = _bench()
    ab = summarize_kt(traces, tutor_order=["good", "bad"], n_resamples=200)
    ba = summarize_kt(traces, tutor_order=["bad", "good"], n_resamples=200)
    (c,) = ab.comparisons
    # paired differences 0.5, 0.5, 0.25, 0.25
    assert (c.a, c.b, c.metric, c.n) == ("good", "bad", "delta_solve", 4)
    assert c.diff == pytest.approx(0.375) and c.ci95[0] > 0
    (d,) = ba.comparisons
    assert (d.a, d.b) == ("bad", "good") and d.diff == pytest.approx(-0.375)
    assert d.p == c.p and d.p_holm == c.p_holm
    assert d.ci95 == pytest.approx((-c.ci95[1], -c.ci95[0]))
    assert ab.ranking == ba.ranking == ["good", "bad"]


def test_the_summary_does_not_depend_on_the_order_of_the_traces():
    # (the bootstrap numbers its clusters in order of appearance: the same traces read in another
    # order, as --rescore reads them from the folder, must give the same intervals)
    gains = {"s1": (0.5, 0.0), "s2": (0.25, 0.0), "s3": (0.0, -0.25), "s4": (0.25, -0.25), "s5": (0.5, 0.25)}
    traces = [_trace(tutor, f"{sc}__average__r0", [_day(1, PRE, POST[ds[k]])], scenario=sc)
              for sc, ds in gains.items() for k, tutor in enumerate(("good", "bad"))]
    shuffled = list(traces)
    random.Random(3).shuffle(shuffled)
    a = msgspec.to_builtins(summarize_kt(traces, tutor_order=["good", "bad"], n_resamples=200))
    for other in (shuffled, traces[::-1]):
        assert msgspec.to_builtins(summarize_kt(other, tutor_order=["good", "bad"], n_resamples=200)) == a


def test_a_flat_tutor_is_gated_for_monitoring():
    flat = [_trace("flat", f"s{k}__average__r0", [_day(1, PRE, POST[0.0])], scenario=f"s{k}") for k in (1, 2)]
    r = summarize_kt(flat, n_resamples=200)
    assert r.tutors["flat"].delta_solve.mean == 0.0 and r.tutors["flat"].gate == "monitor"
    assert r.tutors["flat"].gate_reasons and r.comparisons == []


def test_ranking_stability_under_horizon_truncation_and_leaving_a_scenario_out():
    # A is ahead for the first week (day 1: +0.25 against 0) and collapses on day 8 (-1 against 0):
    # the full ranking is B, A, and the first-5-days one A, B (tau -1).
    a = [_trace("A", f"{s}__average__r0", [_day(1, PRE, POST[0.25]), _day(8, [1, 1, 1, 1], [0, 0, 0, 0])],
                scenario=s) for s in ("s1", "s2")]
    b = [_trace("B", f"{s}__average__r0", [_day(1, PRE, POST[0.0]), _day(8, PRE, POST[0.0])], scenario=s)
         for s in ("s1", "s2")]
    r = summarize_kt([*a, *b], n_resamples=200)
    assert r.ranking == ["B", "A"]
    assert r.stability["horizon"] == {"5": -1.0}  # 10 days and more are past the last day, 8
    assert r.stability["leave_one_scenario_out"] == {"mean": 1.0, "min": 1.0, "n": 2}
    # with one tutor there is no ranking to be stable
    assert summarize_kt(a, n_resamples=200).stability == {"horizon": {}, "leave_one_scenario_out": None}
