"""Tutor benchmarks: tutors in front of a learner whose knowledge changes, ranked by what it learned.

:mod:`~simhub.tutoring.tutors` (the bench's tutors: any tutor of the profile, two scripted
references), :mod:`~simhub.tutoring.bench` (the conversation loop, caching and resume),
:mod:`~simhub.tutoring.trace` (one versioned file per conversation) and
:mod:`~simhub.tutoring.results` (CIs, ranks, paired tests, rescoring). ``docs/tutor-bench.md``
describes the command.
"""

from simhub.tutoring.bench import Bench, BenchOptions, Item, load_items, parse_levels
from simhub.tutoring.results import BenchResults, format_results, read_results, rescore_trace, summarize, write_results
from simhub.tutoring.simulator import KnowledgeStateSimulator
from simhub.tutoring.trace import TRACE_VERSION, Trace, TraceTurn, read_trace, write_trace
from simhub.tutoring.tutors import SCRIPTED, BenchRequest, BenchTutor, DumpTutor, StepwiseTutor, build_bench_tutor

__all__ = [
    "SCRIPTED",
    "TRACE_VERSION",
    "Bench",
    "BenchOptions",
    "BenchRequest",
    "BenchResults",
    "BenchTutor",
    "DumpTutor",
    "Item",
    "KnowledgeStateSimulator",
    "StepwiseTutor",
    "Trace",
    "TraceTurn",
    "build_bench_tutor",
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
