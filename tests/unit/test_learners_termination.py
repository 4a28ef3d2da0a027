"""Termination on constructed trajectories: the paper's rule, the released code's rule, the cap and
the virtual early stop; terminated and truncated kept apart (FIDELITY.md, "Learners")."""

from __future__ import annotations

from simhub.learners import PAPER, RELEASED, KnowledgeState, TurnRecord, early_stop, resolve_preset, stop_decision

N = 10


def turn(*, overloaded: bool = False, n_up: int = 0, silent: bool = False, known: int = 0) -> TurnRecord:
    """A turn record with only what termination reads filled in."""
    states = {f"X{i}": ("knows_well" if i <= known else "unaware") for i in range(1, N + 1)}
    return TurnRecord(
        state=KnowledgeState(states=states), comprehension_load=0.0, attempt_load=0.0,
        effective_load=9.0 if overloaded else 1.0, threshold=6, overloaded=overloaded, eta=1.0, n_up=n_up,
        gain=n_up, explained=() if silent else ("X10",), teachable=(), absorbed=(),
        advanced=tuple(f"X{i}" for i in range(1, n_up + 1)),
    )


def decisions(records, preset):
    return [stop_decision(records[:t], preset) for t in range(1, len(records) + 1)]


def test_paper_mastery_is_80_percent_released_mastery_is_all():
    eight = [turn(known=8)]
    assert stop_decision(eight, PAPER).reason == "mastery" and stop_decision(eight, PAPER).terminated
    assert stop_decision(eight, RELEASED).reason is None
    assert stop_decision([turn(known=7)], PAPER).reason is None
    assert stop_decision([turn(known=10)], RELEASED).reason == "mastery"


def test_paper_overload_needs_turn_5_and_two_of_three_votes_over_five_turns():
    # Votes: (i) ≥ 4 overloaded, (ii) no upward transition, (iii) every turn silent.
    overloaded_stuck = [turn(overloaded=True)] * 4 + [turn()]  # (i) and (ii)
    assert [d.reason for d in decisions(overloaded_stuck, PAPER)] == [None, None, None, None, "overload"]
    assert stop_decision(overloaded_stuck[:4] * 2, PAPER).reason == "overload"
    silent_stuck = [turn(silent=True)] * 5  # (ii) and (iii), no overload at all
    assert stop_decision(silent_stuck, PAPER).reason == "overload"
    one_vote = [turn(overloaded=True, n_up=1)] + [turn(overloaded=True)] * 4  # (i) only: one upward transition
    assert stop_decision(one_vote, PAPER).reason is None
    three_overloaded = [turn(overloaded=True)] * 3 + [turn(n_up=1), turn()]  # (i) fails, (ii) fails
    assert stop_decision(three_overloaded, PAPER).reason is None


def test_paper_window_is_the_last_five_turns():
    early_progress = [turn(n_up=3)] + [turn(overloaded=True)] * 4 + [turn()]
    assert [d.reason for d in decisions(early_progress, PAPER)][4:] == [None, "overload"]


def test_released_overload_is_two_of_three_overloaded_and_at_most_one_up_after_three_turns():
    stuck = [turn(overloaded=True), turn(overloaded=True, n_up=1), turn()]
    assert [d.reason for d in decisions(stuck, RELEASED)] == [None, None, "overload"]
    moving = [turn(overloaded=True, n_up=1), turn(overloaded=True, n_up=1), turn()]
    assert stop_decision(moving, RELEASED).reason is None
    one_overloaded = [turn(overloaded=True), turn(), turn()]
    assert stop_decision(one_overloaded, RELEASED).reason is None
    # Silence is no vote in the released rule.
    assert stop_decision([turn(silent=True)] * 3, RELEASED).reason is None


def test_the_two_rules_stop_the_same_run_at_different_turns():
    run = [turn(overloaded=True), turn(overloaded=True), turn(overloaded=True), turn(overloaded=True), turn(),
           turn(known=8)]
    assert early_stop(run, RELEASED).turn == 3
    assert early_stop(run, PAPER).turn == 5
    assert early_stop(run[:2], RELEASED) is None


def test_mastery_is_checked_before_overload_in_the_same_turn():
    run = [turn(overloaded=True)] * 4 + [turn(known=9)]
    d = stop_decision(run, PAPER)
    assert (d.reason, d.terminated, d.truncated) == ("mastery", True, False)


def test_the_cap_truncates_and_is_not_a_termination():
    run = [turn(n_up=1)] * 15
    d = stop_decision(run, PAPER)
    assert (d.reason, d.terminated, d.truncated, d.done) == ("max_turns", False, True, True)
    assert not stop_decision(run[:14], PAPER).done
    assert early_stop(run, PAPER) is None  # the virtual early stop ignores the cap
    short = resolve_preset("paper", {"max_turns": 3})
    assert stop_decision(run[:3], short).truncated


def test_virtual_early_stop_is_the_first_firing_turn_of_a_full_length_run():
    run = [turn(n_up=2)] * 6 + [turn(overloaded=True)] * 4 + [turn()] * 5
    # Paper: the window 6-10 still holds turn 6's progress; 7-11 has four overloaded turns and none up.
    stop = early_stop(run, PAPER)
    assert (stop.turn, stop.reason, stop.terminated) == (11, "overload", True)
    # Released: 6-8 holds two upward transitions; 7-9 is overloaded throughout with none.
    assert early_stop(run, RELEASED).turn == 9
