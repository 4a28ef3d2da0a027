"""The ``knowsim`` wing: KnowSim's knowledge-state learner (and its stateless baselines) as a tutor bench.

:mod:`~simhub.tutoring.knowsim.family` (the family: options, run, rescore, report),
:mod:`~simhub.tutoring.knowsim.bench` (the conversation loop the kit's runner drives),
:mod:`~simhub.tutoring.knowsim.tutors` (the scripted tutors), :mod:`~simhub.tutoring.knowsim.trace`
(one versioned file per conversation), :mod:`~simhub.tutoring.knowsim.results` (CIs, ranks, paired
tests, rescoring), :mod:`~simhub.tutoring.knowsim.report`, the IQ rater and the termination judge.
``docs/tutor-bench.md`` describes the command.
"""

from simhub.tutoring.knowsim.bench import Bench, BenchOptions, Item, load_items, parse_levels
from simhub.tutoring.knowsim.results import (
    BenchResults,
    format_results,
    read_results,
    rescore_trace,
    summarize,
    write_results,
)
from simhub.tutoring.knowsim.simulator import KnowledgeStateSimulator
from simhub.tutoring.knowsim.trace import TRACE_VERSION, Trace, TraceTurn, read_trace, write_trace
from simhub.tutoring.knowsim.tutors import SCRIPTED, BenchRequest, DumpTutor, StepwiseTutor

__all__ = [
    "SCRIPTED",
    "TRACE_VERSION",
    "Bench",
    "BenchOptions",
    "BenchRequest",
    "BenchResults",
    "DumpTutor",
    "Item",
    "KnowledgeStateSimulator",
    "StepwiseTutor",
    "Trace",
    "TraceTurn",
    "format_results",
    "load_items",
    "parse_levels",
    "read_results",
    "read_trace",
    "rescore_trace",
    "summarize",
    "write_results",
    "write_trace",
]
