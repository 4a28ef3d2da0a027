"""When a knowledge-state conversation ends: mastery, persistent overload, or the turn cap.

Following Gymnasium, *terminated* (the learner stopped: mastery or overload) is kept apart from
*truncated* (the turn cap ended a conversation no rule stopped). Two overload rules exist:

* ``paper``: from turn ``stop_min_turn`` (5) on, over the last ``stop_window`` (5) turns, at least two
  of three votes: ≥ ``stop_overloaded_turns`` (4) turns overloaded; at most ``stop_max_up`` (0)
  upward transitions in total; every turn silent (no IU mentioned);
* ``released``: from turn 3 on, over the last 3 turns, ≥ 2 overloaded **and** ≤ 1 upward transition.

Mastery is ``mastery_fraction`` of the IUs at knows_well (the paper: 80 %; the released code: all).
It is checked first, so a turn that meets both reports mastery. The *virtual early stop* of a run
that went to full length is the first turn at which a rule would have stopped it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from simhub.learners.presets import Preset
from simhub.learners.update import TurnRecord

StopReason = Literal["mastery", "overload", "max_turns"]


@dataclass(frozen=True)
class StopDecision:
    """The decision after ``turn`` turns (1-based). ``reason`` is None while the conversation goes on."""

    turn: int
    terminated: bool
    truncated: bool
    reason: StopReason | None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def mastered(record: TurnRecord, preset: Preset) -> bool:
    states = record.state.states
    known = sum(1 for s in states.values() if s == "knows_well")
    return bool(states) and known >= preset.mastery_fraction * len(states) - 1e-9


def overload_stop(records: Sequence[TurnRecord], preset: Preset) -> bool:
    """Whether the overload rule fires after the last of ``records``."""
    turn = len(records)
    if turn < preset.stop_min_turn or turn < preset.stop_window:
        return False
    window = records[-preset.stop_window:]
    many_overloaded = sum(r.overloaded for r in window) >= preset.stop_overloaded_turns
    no_progress = sum(r.n_up for r in window) <= preset.stop_max_up
    if preset.termination == "released":
        return many_overloaded and no_progress
    silence = all(r.silent for r in window)
    return many_overloaded + no_progress + silence >= 2


def stop_decision(records: Sequence[TurnRecord], preset: Preset) -> StopDecision:
    """Whether a conversation with these turns so far should stop now, and why."""
    turn = len(records)
    if records and mastered(records[-1], preset):
        return StopDecision(turn, True, False, "mastery")
    if overload_stop(records, preset):
        return StopDecision(turn, True, False, "overload")
    if turn >= preset.max_turns:
        return StopDecision(turn, False, True, "max_turns")
    return StopDecision(turn, False, False, None)


def early_stop(records: Sequence[TurnRecord], preset: Preset) -> StopDecision | None:
    """The first turn at which the rules (not the cap) would have stopped this run, or None."""
    for t in range(1, len(records) + 1):
        decision = stop_decision(records[:t], preset)
        if decision.terminated:
            return decision
    return None
