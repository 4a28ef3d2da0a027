"""The learner's knowledge state: one of four states per IU, and the initial state of a level.

States are ordered ``unaware < struggling < partial_understanding < knows_well`` (ordinals 0-3,
which every formula uses). The initial state of a level comes from the KnowSim paper's ratio table
(Table 5): each ratio becomes a count, and the counts are handed out along the topological order,
``knows_well`` to the shallowest IUs first, then ``partial_understanding``, then ``struggling``; the
rest stay ``unaware``. The released code's clamps keep at least one IU known, at least one not known,
and a partial frontier of at least one IU whenever two or more IUs are left (FIDELITY.md, "Learners").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from simhub.errors import ConfigError, DataError, UnknownNameError
from simhub.learners.graph import ValidatedGraph

State = Literal["unaware", "struggling", "partial_understanding", "knows_well"]
STATES: tuple[str, ...] = ("unaware", "struggling", "partial_understanding", "knows_well")
ORDINAL: dict[str, int] = {s: i for i, s in enumerate(STATES)}
UNAWARE, STRUGGLING, PARTIAL, KNOWS_WELL = range(4)

#: Names older knowsim logs use for ``unaware``.
STATE_ALIASES: dict[str, str] = {"unknown_unknown": "unaware", "not_introduced": "unaware"}

Level = Literal["novice", "intermediate", "advanced"]
LEVELS: tuple[str, ...] = ("novice", "intermediate", "advanced")


class LevelRatios(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Shares of the IUs that start in each state; what is left starts ``unaware``."""

    knows_well: float
    partial_understanding: float = 0.0
    struggling: float = 0.0

    def __post_init__(self) -> None:
        for name in ("knows_well", "partial_understanding", "struggling"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"ratios.{name}: {value} is outside [0, 1]", field=f"ratios.{name}")
        if self.knows_well + self.partial_understanding + self.struggling > 1.0 + 1e-9:
            raise ConfigError("ratios: knows_well + partial_understanding + struggling is more than 1",
                              field="ratios")

    @property
    def unaware(self) -> float:
        return max(0.0, 1.0 - self.knows_well - self.partial_understanding - self.struggling)


#: Table 5 of the paper (the released code's four-state table holds the same numbers).
PAPER_RATIOS: dict[str, LevelRatios] = {
    "novice": LevelRatios(knows_well=0.10, partial_understanding=0.10, struggling=0.30),
    "intermediate": LevelRatios(knows_well=0.55, partial_understanding=0.15, struggling=0.20),
    "advanced": LevelRatios(knows_well=0.80, partial_understanding=0.10, struggling=0.10),
}


class KnowledgeState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The state of every IU, and each IU's fractional progress toward its next state (0 if absent).

    Treat both mappings as read-only: the update returns a new state.
    """

    states: dict[str, State]
    progress: dict[str, float] = msgspec.field(default_factory=dict)

    def ordinals(self) -> dict[str, int]:
        return {iu: ORDINAL[s] for iu, s in self.states.items()}

    def count(self, state: str) -> int:
        return sum(1 for s in self.states.values() if s == state)


def check_state(graph: ValidatedGraph, state: KnowledgeState, *, field: str = "state") -> None:
    """Raise unless ``state`` gives a valid state to exactly the graph's IUs."""
    for iu, s in state.states.items():
        if iu not in graph.index:
            raise UnknownNameError("IU", iu, graph.ids, field=f"{field}.states")
        if s not in ORDINAL:
            raise UnknownNameError("knowledge state", s, STATES, field=f"{field}.states.{iu}")
    missing = [iu for iu in graph.ids if iu not in state.states]
    if missing:
        raise DataError(f"{field}: no state for IU {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} "
                        f"of graph {graph.name}", field=f"{field}.states")
    for iu in state.progress:
        if iu not in graph.index:
            raise UnknownNameError("IU", iu, graph.ids, field=f"{field}.progress")


def level_counts(n: int, ratios: LevelRatios, *, clamps: bool = True) -> dict[str, int]:
    """How many of ``n`` IUs start in each state.

    Counts are ``round(ratio · n)`` (Python's round, half to even, as the released code). With
    ``clamps``: known in [1, n - 1]; partial at least 1 and at most (what is left) - 1 when two or more
    IUs are left, else 0; struggling at most what is left.
    """
    known = round(ratios.knows_well * n)
    if clamps:
        known = max(1, min(n - 1, known))
    known = min(known, n)
    left = n - known
    partial = round(ratios.partial_understanding * n)
    if clamps:
        partial = max(1, min(left - 1, partial)) if left > 1 else 0
    partial = min(partial, left)
    left -= partial
    struggling = min(round(ratios.struggling * n), left)
    return {"knows_well": known, "partial_understanding": partial, "struggling": struggling,
            "unaware": left - struggling}


def initial_state(graph: ValidatedGraph, level: str | LevelRatios | Mapping[str, float] = "novice", *,
                  clamps: bool = True) -> KnowledgeState:
    """The state a learner of ``level`` starts in: a level name, or custom ratios replacing Table 5."""
    if isinstance(level, str):
        if level not in PAPER_RATIOS:
            raise UnknownNameError("knowledge level", level, LEVELS, field="level")
        ratios = PAPER_RATIOS[level]
    elif isinstance(level, LevelRatios):
        ratios = level
    else:
        try:
            ratios = msgspec.convert(dict(level), LevelRatios)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"ratios: {exc}", field="ratios") from None
    counts = level_counts(graph.size, ratios, clamps=clamps)
    bands = ["knows_well"] * counts["knows_well"] + ["partial_understanding"] * counts["partial_understanding"] + [
        "struggling"] * counts["struggling"]
    states = {iu: (bands[i] if i < len(bands) else "unaware") for i, iu in enumerate(graph.order)}
    return KnowledgeState(states={iu: states[iu] for iu in graph.ids})
