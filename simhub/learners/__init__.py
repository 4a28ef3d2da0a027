"""Learners whose knowledge changes with the teaching: KnowSim's knowledge-state learner.

The pieces, each usable alone: :mod:`~simhub.learners.graph` (the IU graph, its validator and files),
:mod:`~simhub.learners.presets` (every rule parameter, the ``paper`` and ``released`` presets),
:mod:`~simhub.learners.state` (states and the initial state of a level),
:mod:`~simhub.learners.update` (one turn, a pure function), :mod:`~simhub.learners.termination`,
:mod:`~simhub.learners.metrics` (KG, DC, CO, failure modes) and :mod:`~simhub.learners.replay`
(knowsim run logs). ``docs/learners.md`` describes the rules.

:mod:`simhub.learners.kt` (imported on its own) is the first part of a second learner, grounded in
knowledge tracing (``docs/kt-learner.md``).
"""

from simhub.learners.graph import (
    GraphError,
    GraphWarning,
    IUEdge,
    IUGraph,
    IUNode,
    ValidatedGraph,
    load_graphs,
    read_graphs,
    shipped_graphs,
    validate_graph,
    write_graphs,
)
from simhub.learners.metrics import ConversationMetrics, conversation_metrics, failure_modes
from simhub.learners.presets import PAPER, PRESETS, RELEASED, Preset, StateWeights, resolve_preset
from simhub.learners.state import LEVELS, PAPER_RATIOS, STATES, KnowledgeState, LevelRatios, initial_state
from simhub.learners.termination import StopDecision, early_stop, stop_decision
from simhub.learners.update import IUSignal, Signals, TurnRecord, capacity, dropoff, run_turns, update

__all__ = [
    "LEVELS",
    "PAPER",
    "PAPER_RATIOS",
    "PRESETS",
    "RELEASED",
    "STATES",
    "ConversationMetrics",
    "GraphError",
    "GraphWarning",
    "IUEdge",
    "IUGraph",
    "IUNode",
    "IUSignal",
    "KnowledgeState",
    "LevelRatios",
    "Preset",
    "Signals",
    "StateWeights",
    "StopDecision",
    "TurnRecord",
    "ValidatedGraph",
    "capacity",
    "conversation_metrics",
    "dropoff",
    "early_stop",
    "failure_modes",
    "initial_state",
    "load_graphs",
    "read_graphs",
    "resolve_preset",
    "run_turns",
    "shipped_graphs",
    "stop_decision",
    "update",
    "validate_graph",
    "write_graphs",
]
