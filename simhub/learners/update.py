"""One turn of the knowledge-state learner: a pure function of (graph, state, signals, preset).

Per IU and turn the signals say how the tutor taught it (``teaching_quality``) and what the learner
did with it (``user_attempt_type``); an extractor (an LLM judge, or an offline stand-in) produces
them, and :func:`update` turns them into the next state and the turn's bookkeeping:

1. **Load.** ``L = Σ_{mentioned} W_S(s) + Σ_{reasoning} W_R(s) + W_A · #articulation`` over pre-turn
   states (Table 6); the capacity is ``τ = max(2, round(0.55 · |G|))``.
2. **Proposal.** well_explained: +1 step; shallow: unaware -> struggling only; not_mentioned: none.
3. **Prerequisite ceiling**, walked in topological order with the *live* states, so a prerequisite
   that advanced earlier in the turn already lifts its dependents: all prerequisites at knows_well
   (or none) -> knows_well; weakest at partial -> partial; otherwise struggling.
4. **Dropoff.** Above capacity the proposed steps are scaled by ``η = 1/(1 + ((L-τ)/(kτ))²)``
   (the released preset: k = 1.3 and the per-IU hinge); the scaled step accumulates as fractional
   progress and the IU advances by its whole part.
5. **Monotonicity.** States never go down.

The teachable set (ZPD) and the absorbed set read the *pre-turn* snapshot instead. The rules and
the two presets are in ``docs/learners.md``; FIDELITY.md names the test pinning each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import msgspec

from simhub.errors import UnknownNameError
from simhub.learners.graph import ValidatedGraph
from simhub.learners.presets import Preset
from simhub.learners.state import (
    KNOWS_WELL,
    ORDINAL,
    PARTIAL,
    STATES,
    STRUGGLING,
    UNAWARE,
    KnowledgeState,
    check_state,
)

TeachingQuality = Literal["well_explained", "shallow", "not_mentioned"]
AttemptType = Literal["reasoning", "articulation", "none"]
TEACHING_QUALITIES: tuple[str, ...] = ("well_explained", "shallow", "not_mentioned")
ATTEMPT_TYPES: tuple[str, ...] = ("reasoning", "articulation", "none")


class IUSignal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What happened to one IU in one turn."""

    teaching_quality: TeachingQuality = "not_mentioned"
    user_attempt_type: AttemptType = "none"


#: The signals of a turn by IU id; an IU left out was not mentioned and not attempted.
Signals = Mapping[str, IUSignal]
SILENT = IUSignal()


class TurnRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The state after one turn and everything the metrics and termination rules read.

    ``explained`` (E_t: mentioned IUs), ``teachable`` (Z_t: not knows_well and pre-turn ceiling ≥
    partial), ``absorbed`` (A_t ⊆ E_t: advanced and in reach before the turn) and ``advanced`` (IUs
    whose state went up) are in graph order. ``eta`` is the turn's dropoff (1 at or below capacity);
    ``iu_eta`` the factor each damped IU actually got (with the hinge, ``hinge_tail · eta`` past the
    top N).
    """

    state: KnowledgeState
    comprehension_load: float
    attempt_load: float
    effective_load: float
    threshold: int
    overloaded: bool
    eta: float
    n_up: int
    gain: int
    explained: tuple[str, ...]
    teachable: tuple[str, ...]
    absorbed: tuple[str, ...]
    advanced: tuple[str, ...]
    iu_eta: dict[str, float] = msgspec.field(default_factory=dict)

    @property
    def silent(self) -> bool:
        """No IU was mentioned (teaching silence)."""
        return not self.explained


def capacity(n_ius: int, preset: Preset) -> int:
    """τ = max(capacity_min, round(capacity_ratio · |G|)), Python's round as in the released code."""
    return max(preset.capacity_min, round(n_ius * preset.capacity_ratio))


def dropoff(load: float, tau: int, preset: Preset) -> float:
    """The turn's η: 1 at or below capacity; above it the preset's curve (the sigmoid by default)."""
    if preset.dropoff == "none" or tau <= 0 or load <= tau:
        return 1.0
    if preset.dropoff == "saturating":
        return tau / load
    if preset.dropoff == "linear":
        return max(0.0, 1.0 - (load - tau) / tau)
    overage = (load - tau) / (tau * preset.softening)
    return 1.0 / (1.0 + overage**2.0)


def ceiling(prereq_ordinals) -> int:
    """The prerequisite ceiling: no prerequisites or all at knows_well -> knows_well; weakest at
    partial -> partial; otherwise struggling."""
    weakest = KNOWS_WELL
    for s in prereq_ordinals:
        if s <= STRUGGLING:
            return STRUGGLING
        weakest = min(weakest, s)
    return weakest


def _ceiling_in(states: Mapping[str, int], prereqs: tuple[str, ...]) -> int:
    # ceiling() over a state mapping, without a generator: the update's inner loops call it.
    weakest = KNOWS_WELL
    for p in prereqs:
        s = states[p]
        if s <= STRUGGLING:
            return STRUGGLING
        if s < weakest:
            weakest = s
    return weakest


def _loose_ceiling_reaches_partial(prereq_ordinals) -> bool:
    # The released metric code's ceiling: all knows_well, or any prerequisite at partial.
    values = list(prereq_ordinals)
    return all(v == KNOWS_WELL for v in values) or any(v == PARTIAL for v in values)


def propose(teaching_quality: str, previous: int, ceil: int, preset: Preset) -> int:
    """The state teaching proposes before the dropoff: capped at the ceiling, never below ``previous``."""
    if teaching_quality == "not_mentioned":
        return previous
    if teaching_quality == "shallow":
        if preset.shallow_unaware_only and previous != UNAWARE:
            return previous
        steps = 1
    else:
        steps = preset.well_explained_steps
    return max(min(previous + steps, ceil), previous)


def update(graph: ValidatedGraph, state: KnowledgeState, signals: Signals, preset: Preset) -> TurnRecord:
    """Apply one turn's ``signals`` to ``state`` under ``preset``; see the module docstring.

    ``state`` must hold every IU of ``graph`` (:func:`simhub.learners.state.check_state`); signals
    naming an IU outside the graph raise :class:`~simhub.errors.UnknownNameError`.
    """
    index = graph.index
    for iu in signals:
        if iu not in index:
            raise UnknownNameError("IU", iu, graph.ids, field=f"signals.{iu}")
    try:
        pre = {iu: ORDINAL[s] for iu, s in state.states.items()}
    except KeyError:
        pre = {}
    if pre.keys() != index.keys():
        check_state(graph, state)  # raises, naming the IU or state at fault
    w_mention = preset.mention_weights.by_ordinal()
    w_reason = preset.reasoning_weights.by_ordinal()

    # Loads are summed in the signals' order, IUs not yet known first, as the released code sums
    # them, so a replayed log gives bit-identical loads (and the same side of a tie with τ).
    comprehension = 0.0
    for iu, sig in signals.items():
        if sig.teaching_quality != "not_mentioned" and pre[iu] != KNOWS_WELL:
            comprehension += w_mention[pre[iu]]
    for iu, sig in signals.items():
        if sig.teaching_quality != "not_mentioned" and pre[iu] == KNOWS_WELL:
            comprehension += w_mention[KNOWS_WELL]
    attempt = 0.0
    if preset.attempt_load:
        for iu, sig in signals.items():
            if sig.user_attempt_type == "reasoning":
                attempt += w_reason[pre[iu]]
            elif sig.user_attempt_type == "articulation":
                attempt += preset.articulation_weight
    load = comprehension + attempt
    tau = capacity(graph.size, preset)
    overloaded = load >= tau if preset.overload_at_capacity else load > tau
    eta = dropoff(load, tau, preset)

    explained = [iu for iu in graph.ids if signals.get(iu, SILENT).teaching_quality != "not_mentioned"]
    iu_eta: dict[str, float] = {}
    if eta < 1.0:
        if preset.hinge:
            keep = max(1, round(preset.hinge_ratio * graph.size))
            ranked = sorted(explained, key=lambda iu: (-w_mention[pre[iu]], graph.depth[iu], index[iu]))
            iu_eta = {iu: eta if rank < keep else preset.hinge_tail * eta for rank, iu in enumerate(ranked)}
        else:
            iu_eta = dict.fromkeys(explained, eta)

    prereqs = graph.prereqs
    teachable = [iu for iu in graph.ids if pre[iu] != KNOWS_WELL and _ceiling_in(pre, prereqs[iu]) >= PARTIAL]

    live = dict(pre)
    ceiling_from = pre if preset.ceiling_states == "pre_turn" else live  # live: the cascade inside the turn
    progress: dict[str, float] = {}
    old_progress = state.progress
    for iu in graph.order:
        previous = pre[iu]
        sig = signals.get(iu)
        if sig is None or sig.teaching_quality == "not_mentioned":
            intended = 0
        else:
            intended = propose(sig.teaching_quality, previous, _ceiling_in(ceiling_from, prereqs[iu]), preset) - previous
        old = old_progress.get(iu, 0.0)
        if intended > 0 and eta < 1.0:
            factor = iu_eta.get(iu, eta)
            if preset.fractional:
                total = old + intended * factor
                steps = math.floor(total)
                carry = 0.0 if steps > 0 and preset.reset_progress_on_transition else total - steps
            else:
                steps, carry = max(0, round(intended * factor)), 0.0
            new = min(previous + steps, KNOWS_WELL)
        elif intended > 0:  # a whole step, undamped: the carried progress was not needed for it
            new = previous + intended
            carry = old if preset.keep_idle_progress and not preset.reset_progress_on_transition else 0.0
        else:
            new = previous
            carry = old if preset.keep_idle_progress else 0.0
        live[iu] = new
        if carry:
            progress[iu] = carry

    ids = graph.ids
    advanced = [iu for iu in ids if live[iu] > pre[iu]]
    if preset.absorbed_ceiling == "weakest":
        teachable_set = set(teachable)
        absorbed = [iu for iu in explained if iu in teachable_set and live[iu] > pre[iu]]
    else:
        absorbed = [iu for iu in explained if pre[iu] != KNOWS_WELL and live[iu] > pre[iu]
                    and _loose_ceiling_reaches_partial(pre[p] for p in prereqs[iu])]
    return TurnRecord(
        state=KnowledgeState(states={iu: STATES[live[iu]] for iu in ids}, progress=progress),
        comprehension_load=comprehension,
        attempt_load=attempt,
        effective_load=load,
        threshold=tau,
        overloaded=overloaded,
        eta=eta,
        n_up=len(advanced),
        gain=sum(live[iu] - pre[iu] for iu in advanced),
        explained=tuple(explained),
        teachable=tuple(teachable),
        absorbed=tuple(absorbed),
        advanced=tuple(advanced),
        iu_eta=iu_eta,
    )


def run_turns(graph: ValidatedGraph, initial: KnowledgeState, turns, preset: Preset) -> list[TurnRecord]:
    """Chain :func:`update` over a sequence of per-turn signals, starting from ``initial``."""
    records: list[TurnRecord] = []
    state = initial
    for signals in turns:
        record = update(graph, state, signals, preset)
        records.append(record)
        state = record.state
    return records
