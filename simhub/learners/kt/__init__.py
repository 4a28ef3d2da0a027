"""Knowledge tracing for the KT-grounded learner (EduClaw-Bench, U. Lee et al., arXiv 2608.03206).

The first part, with no language model: the backbone interface (:mod:`~simhub.learners.kt.base`),
the backends by name (:mod:`~simhub.learners.kt.registry`), BKT (:mod:`~simhub.learners.kt.bkt`) and
its fitting by EM or grid search (:mod:`~simhub.learners.kt.bkt_fit`), and item-response logs read
from CSV or built from QATD-2k dialogues (:mod:`~simhub.learners.kt.logs`). The benchmark's
deterministic measures (ΔSolve, responsiveness, ECE and Brier, pass^k, Kendall τ) are in
:mod:`~simhub.learners.kt.metrics`, and its scenarios (a learner personality on a study schedule for a
number of days) in :mod:`~simhub.learners.kt.scenarios`.
``docs/kt-learner.md`` describes them.
"""

from simhub.learners.kt.base import KTModel, UnknownKCError
from simhub.learners.kt.bkt import BKT, BKTBelief, BKTFile, BKTParams
from simhub.learners.kt.bkt_fit import Bounds, FitSettings, fit_bkt
from simhub.learners.kt.logs import Response, ResponseLog, read_responses, responses_from_dialogues, write_responses
from simhub.learners.kt.registry import kt_backend, kt_backend_names, load_kt_model, register_kt_backend
from simhub.learners.kt.scenarios import (
    PERSONALITIES,
    SCHEDULES,
    Personality,
    Scenario,
    Schedule,
    load_scenarios,
    shipped_personalities,
    shipped_schedules,
)

__all__ = [
    "BKT",
    "PERSONALITIES",
    "SCHEDULES",
    "BKTBelief",
    "BKTFile",
    "BKTParams",
    "Bounds",
    "FitSettings",
    "KTModel",
    "Personality",
    "Response",
    "ResponseLog",
    "Scenario",
    "Schedule",
    "UnknownKCError",
    "fit_bkt",
    "kt_backend",
    "kt_backend_names",
    "load_kt_model",
    "load_scenarios",
    "read_responses",
    "register_kt_backend",
    "responses_from_dialogues",
    "shipped_personalities",
    "shipped_schedules",
    "write_responses",
]
