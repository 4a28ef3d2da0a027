"""The knowledge-state learner's parameters: one frozen struct of named fields, and two presets.

* ``paper``: the rules as the KnowSim paper's text states them (its §2.2 and appendices A.5-A.6);
* ``released``: what the knowsim repository's paper configs run (``weightabsorb_attempt_sigmoid``
  with ``minimal_rules``, ``cap_well_explained_at_one``, ``shallow_unaware_only``,
  ``fractional_accumulation``, ``sigmoid_softening: 1.3``, ``per_iu_hinge`` and no reset of the
  fractional progress), with the repository's termination rule.

FIDELITY.md ("Learners") lists each field with the test that pins it and says where the two differ.
Any field can be overridden by name (:func:`resolve_preset`); an unknown name fails with the closest
known one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from simhub.errors import ConfigError, UnknownNameError


class StateWeights(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A weight per pre-turn state (a column of the paper's Table 6)."""

    unaware: float
    struggling: float
    partial_understanding: float
    knows_well: float

    def by_ordinal(self) -> tuple[float, float, float, float]:
        return (self.unaware, self.struggling, self.partial_understanding, self.knows_well)


#: Table 6: W_S, the load of an IU mentioned in a turn, by its state before the turn.
TABLE6_MENTION = StateWeights(unaware=1.75, struggling=1.00, partial_understanding=0.70, knows_well=0.35)
#: Table 6: W_R, the load of an IU the learner reasoned about.
TABLE6_REASONING = StateWeights(unaware=1.75, struggling=1.40, partial_understanding=0.70, knows_well=0.35)

Dropoff = Literal["sigmoid", "saturating", "linear", "none"]
TerminationRule = Literal["paper", "released"]
AbsorbedCeiling = Literal["weakest", "any_partial"]


class Preset(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every rule parameter of the knowledge-state update, the metrics and termination."""

    name: str = "custom"

    # -- load L_t = Σ_mentioned W_S + Σ_reasoning W_R + W_A · #articulation (Table 6)
    mention_weights: StateWeights = TABLE6_MENTION
    reasoning_weights: StateWeights = TABLE6_REASONING
    articulation_weight: float = 0.35
    #: Whether the learner's own reasoning and articulation add to the load (the attempt load).
    attempt_load: bool = True

    # -- capacity τ = max(capacity_min, round(capacity_ratio · |G|)), the same for every level
    capacity_ratio: float = 0.55
    capacity_min: int = 2
    #: The turn's overload flag (termination, failure modes): L ≥ τ when true, L > τ when false.
    #: The dropoff η applies only above τ either way.
    overload_at_capacity: bool = False

    # -- absorption
    #: The prerequisite states the update's ceiling reads: ``live`` (a prerequisite that advanced
    #: earlier in the same turn already lifts its dependents: the released code, and simhub's reading
    #: of the paper) or ``pre_turn`` (the states entering the turn, the other reading of the paper's
    #: "pre-turn prerequisite states processed in topological order"; FIDELITY.md).
    ceiling_states: Literal["live", "pre_turn"] = "live"
    #: Steps a well-explained IU advances (before the ceiling and the dropoff).
    well_explained_steps: int = 1
    #: Shallow teaching lifts only unaware -> struggling (and nothing above).
    shallow_unaware_only: bool = True

    # -- overload dropoff η = 1 / (1 + ((L - τ) / (softening · τ))²) when L > τ
    dropoff: Dropoff = "sigmoid"
    softening: float = 1.0
    #: The per-IU hinge: in an overloaded turn only the top max(1, round(hinge_ratio · |G|)) mentioned
    #: IUs (highest W_S, then shallower, then graph order) keep η; the others get hinge_tail · η.
    hinge: bool = False
    hinge_ratio: float = 0.143
    hinge_tail: float = 0.5

    # -- fractional carry-forward: progress += steps · η, the IU advances floor(progress)
    #: False: a damped step is rounded (half to even) instead, with nothing carried.
    fractional: bool = True
    #: The accumulator restarts at 0 when the IU changes state.
    reset_progress_on_transition: bool = True
    #: Progress survives a turn in which the IU gets no damped step (not taught, or taught in a turn
    #: without overload). The released code zeroes it then.
    keep_idle_progress: bool = True

    # -- metrics
    #: When an explained IU that advanced counts as absorbed (A_t of DC), read from the pre-turn
    #: prerequisites: ``weakest`` (the update's own ceiling reaches partial: every prerequisite at
    #: partial or above) or ``any_partial`` (all at knows_well, or at least one at partial: the ceiling
    #: function of the released metric code, which is looser).
    absorbed_ceiling: AbsorbedCeiling = "weakest"

    #: DC's numerator |A_t| per turn: ``definition`` (the explained, teachable IUs that advanced), or
    #: ``legacy_proxy``, min(|E_t ∩ Z_t|, n_up), which the released code falls back to for a log
    #: without per-turn |A_t| (its example logs, flagged ``absorbed_ic_uses_legacy_proxy``); ``auto``:
    #: the proxy for a replayed log so flagged, the definition everywhere else.
    dc_numerator: Literal["auto", "definition", "legacy_proxy"] = "auto"

    #: How a log's initial-state keys name IUs: ``id_or_label`` (``"IU3"`` or the knowsim label
    #: ``"IU3: Concept"``), or ``label`` only, as the released code looks them up: a bare-id key of an
    #: IU that has a label then names nothing, and the IU starts unaware (with a warning).
    state_keys: Literal["id_or_label", "label"] = "id_or_label"

    # -- graphs
    #: A cyclic graph: ``refuse`` it (an error naming the cycle: the paper's graphs are DAGs), or order
    #: it as the ``released`` code does and go on (a warning naming the cycle; two graphs of its
    #: MathQA cache have one).
    cycles: Literal["refuse", "released"] = "refuse"

    # -- termination
    termination: TerminationRule = "paper"
    #: Mastery: this share of the IUs at knows_well (the released code: all of them).
    mastery_fraction: float = 0.8
    #: The first turn (1-based) at which the overload rule is checked, and its window of turns.
    stop_min_turn: int = 5
    stop_window: int = 5
    #: Overload votes over the window: at least this many overloaded turns ...
    stop_overloaded_turns: int = 4
    #: ... and at most this many upward transitions in total.
    stop_max_up: int = 0
    max_turns: int = 15

    def __post_init__(self) -> None:
        checks = [
            ("capacity_ratio", self.capacity_ratio > 0, "must be > 0"),
            ("capacity_min", self.capacity_min >= 1, "must be ≥ 1"),
            ("well_explained_steps", 1 <= self.well_explained_steps <= 3, "must be 1, 2 or 3"),
            ("softening", self.softening > 0, "must be > 0"),
            ("hinge_ratio", self.hinge_ratio >= 0, "must be ≥ 0"),
            ("hinge_tail", 0 <= self.hinge_tail <= 1, "must be in [0, 1]"),
            ("mastery_fraction", 0 < self.mastery_fraction <= 1, "must be in (0, 1]"),
            ("stop_min_turn", self.stop_min_turn >= 1, "must be ≥ 1"),
            ("stop_window", self.stop_window >= 1, "must be ≥ 1"),
            ("stop_overloaded_turns", self.stop_overloaded_turns >= 0, "must be ≥ 0"),
            ("max_turns", self.max_turns >= 1, "must be ≥ 1"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ConfigError(f"preset.{name}: {rule}, got {getattr(self, name)!r}", field=f"preset.{name}")
        for name in ("mention_weights", "reasoning_weights"):
            if min(getattr(self, name).by_ordinal()) < 0:
                raise ConfigError(f"preset.{name}: weights must be ≥ 0", field=f"preset.{name}")


PAPER = Preset(name="paper")

RELEASED = Preset(
    name="released",
    overload_at_capacity=True,
    softening=1.3,
    hinge=True,
    reset_progress_on_transition=False,
    keep_idle_progress=False,
    absorbed_ceiling="any_partial",
    state_keys="label",
    cycles="released",
    termination="released",
    mastery_fraction=1.0,
    stop_min_turn=3,
    stop_window=3,
    stop_overloaded_turns=2,
    stop_max_up=1,
)

PRESETS: dict[str, Preset] = {"paper": PAPER, "released": RELEASED}


def preset_fields() -> tuple[str, ...]:
    return tuple(f for f in Preset.__struct_fields__ if f != "name")


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` pairs as preset overrides (each value read as YAML: ``0.5``, ``true``...)."""
    import yaml

    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"preset override {pair!r}: expected FIELD=VALUE", field="preset")
        out[key.strip()] = yaml.safe_load(value)
    return out


def resolve_preset(preset: str | Preset = "paper", overrides: Mapping[str, Any] | None = None) -> Preset:
    """A shipped preset by name (or ``preset`` itself), with ``overrides`` applied by field name.

    A weight table can be replaced whole (``{"mention_weights": {...}}``) or one entry at a time
    (``{"mention_weights.unaware": 2.0}``). The result's ``name`` is ``"paper+softening=1.3"`` style.
    """
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise UnknownNameError("preset", preset, PRESETS, field="preset")
        base = PRESETS[preset]
    else:
        base = preset
    if not overrides:
        return base
    data = msgspec.to_builtins(base)
    known = preset_fields()
    for key, value in overrides.items():
        head, _, sub = key.partition(".")
        if head not in known:
            raise UnknownNameError("preset field", head, known, field=f"preset.{head}")
        if sub:
            table = data[head]
            if not isinstance(table, dict) or sub not in table:
                raise UnknownNameError(f"entry of preset.{head}", sub, list(table) if isinstance(table, dict) else [],
                                       field=f"preset.{key}")
            table[sub] = value
        else:
            data[head] = value
    data["name"] = base.name + "+" + ",".join(f"{k}={v}" for k, v in overrides.items())
    try:
        return msgspec.convert(data, Preset)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if message.startswith("preset."):  # a range check of __post_init__, already naming its field
            raise ConfigError(message, field=message.split(":", 1)[0]) from None
        field = message.split("at `$.", 1)[1].rstrip("`") if "at `$." in message else None
        raise ConfigError(f"preset{'.' + field if field else ''}: {message}",
                          field=f"preset.{field}" if field else "preset") from None
