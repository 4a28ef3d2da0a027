"""Tutor benchmarks: tutors in front of a learner whose knowledge changes, ranked by what it learned.

The kit, shared by every learner family:

* :mod:`~simhub.tutoring.family`: the :class:`LearnerFamily` interface, the :data:`FAMILIES`
  registry, the outputs a family declares (:class:`BenchOutput`), the one grammar of learner names;
* :mod:`~simhub.tutoring.runner`: the one runner (lockstep batches of episodes, resume, the
  whole-episode and per-call caches, the run folder);
* :mod:`~simhub.tutoring.tutors`: building a bench's tutors (one base, two capabilities);
* :mod:`~simhub.tutoring.estimates`: estimates with intervals, ranks, name lists, report helpers;
* :mod:`~simhub.tutoring.report`: every family's folders in ``simhub report``, and the kit's
  results and leaderboard for a family without its own.

One wing per family holds only what differs: :mod:`simhub.tutoring.knowsim` (KnowSim's
knowledge-state learner, ``docs/tutor-bench.md``) and :mod:`simhub.tutoring.lms` (the KT-grounded
learner with an LMS, ``docs/kt-learner.md``).
"""

from simhub.tutoring.family import (
    FAMILIES,
    BenchContext,
    BenchOutput,
    LearnerFamily,
    LearnerName,
    families,
    family,
    family_of_folder,
    parse_learner,
    ranking_stability,
)
from simhub.tutoring.runner import Episode, EpisodeBench, Runner, RunReport

__all__ = [
    "FAMILIES",
    "BenchContext",
    "BenchOutput",
    "Episode",
    "EpisodeBench",
    "LearnerFamily",
    "LearnerName",
    "RunReport",
    "Runner",
    "families",
    "family",
    "family_of_folder",
    "parse_learner",
    "ranking_stability",
]
