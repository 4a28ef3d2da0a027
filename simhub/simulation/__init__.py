"""Simulated students: our models, OpenAI-compatible endpoints, the paper's prompted baselines and
two reference simulators, behind one interface (:class:`Simulator`)."""

from simhub.simulation.base import Candidate, SimulationResult, Simulator, Target, candidate_from_text
from simhub.simulation.endpoint import with_icl_pool
from simhub.simulation.reference import REFERENCE_SIMULATORS
from simhub.simulation.registry import (
    BUILTIN_BASELINES,
    build_simulator,
    load_options,
    simulator_names,
)

__all__ = [
    "BUILTIN_BASELINES",
    "REFERENCE_SIMULATORS",
    "Candidate",
    "SimulationResult",
    "Simulator",
    "Target",
    "build_simulator",
    "candidate_from_text",
    "load_options",
    "simulator_names",
    "with_icl_pool",
]
