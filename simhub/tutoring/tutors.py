"""The tutors a tutor bench puts in front of a learner: any tutor of the profile, and two scripted ones.

A bench tutor sees the conversation (as a :class:`~simhub.schema.Dialogue`: the learner's turns are
``student`` turns) and, for the scripted tutors only, the item's IU graph and the learner's state.
The scripted tutors are offline references for the demo and tests, not tutors to rank:

* ``scripted:stepwise`` reads the learner's state (an oracle no real tutor has) and teaches one IU a
  turn: the first IU in topological order that is not known well and whose prerequisites all are,
  with a worked explanation built from the graph (its description, why it matters for what it leads
  to, the question as the example, and a check question);
* ``scripted:dump`` ignores the learner and sends every IU's description at once, every turn: the
  "knowledge dumping" that overloads a novice.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from simhub.config import Profile
from simhub.errors import UnknownNameError
from simhub.learners.graph import ValidatedGraph
from simhub.learners.state import KNOWS_WELL, KnowledgeState
from simhub.models import LoadOptions, Sampling
from simhub.schema import Dialogue
from simhub.simulation.tutor import Tutor, TutorRequest, TutorTurn, build_tutor, tutor_names

SCRIPTED = ("scripted:stepwise", "scripted:dump")


@dataclasses.dataclass(frozen=True)
class BenchRequest:
    dialogue: Dialogue
    graph: ValidatedGraph
    state: KnowledgeState


class BenchTutor(ABC):
    id: str = "tutor"
    #: Whether the scripted tutor's turns depend on the learner's state (part of its cache key).
    reads_state: bool = False

    def describe(self) -> dict[str, Any]:
        return {"id": self.id}

    @abstractmethod
    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:
        """The next tutor turn of each request; a failed turn has ``error`` set."""


def _lower_first(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def next_teachable(graph: ValidatedGraph, state: KnowledgeState) -> str | None:
    """The first IU in topological order not known well whose prerequisites all are known well."""
    s = state.ordinals()
    for iu in graph.order:
        if s[iu] < KNOWS_WELL and all(s[p] == KNOWS_WELL for p in graph.prereqs[iu]):
            return iu
    return None


class StepwiseTutor(BenchTutor):
    id = "scripted:stepwise"
    reads_state = True

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:
        return [TutorTurn(text=self.explain(r.graph, r.state, r.dialogue.question.text)) for r in requests]

    @staticmethod
    def explain(graph: ValidatedGraph, state: KnowledgeState, question: str) -> str:
        iu = next_teachable(graph, state)
        if iu is None:
            return "You have all the pieces now. Put them together and tell me your final answer."
        node = graph.node(iu)
        concept = _lower_first(node.concept)
        parts = [f"Let's take one idea at a time: {concept}.", node.description.strip()]
        if any(e.source == iu for e in graph.graph.edges):
            parts.append(f"This matters because the next step uses {concept}.")
        last_line = [line for line in question.splitlines() if line.strip()]
        if last_line:
            parts.append(f"For example, in this question: {last_line[-1].strip().rstrip('.')}.")
        parts.append(f"Can you tell me in your own words how {concept} works here?")
        return " ".join(p for p in parts if p)


class DumpTutor(BenchTutor):
    id = "scripted:dump"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:
        return [TutorTurn(text=self.dump(r.graph)) for r in requests]

    @staticmethod
    def dump(graph: ValidatedGraph) -> str:
        lines = ["Here is everything you need for this question:"]
        for iu in graph.order:
            node = graph.node(iu)
            lines.append(f"{node.concept.strip().rstrip('.')}: {node.description.strip()}")
        return "\n".join(lines)


class ProfileTutor(BenchTutor):
    """A tutor of the profile's ``tutors:`` section (a local model or an endpoint); it sees the dialogue only."""

    def __init__(self, tutor: Tutor):
        self.tutor, self.id = tutor, tutor.id

    def describe(self) -> dict[str, Any]:
        return {**self.tutor.describe(), "fingerprint": self.tutor.fingerprint()}

    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:
        try:
            return self.tutor.respond([TutorRequest(r.dialogue) for r in requests], sampling)
        except Exception as exc:  # a tutor that raises fails these conversations, with the cause; the run goes on
            return [TutorTurn(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in requests]


def bench_tutor_names(profile: Profile | None) -> list[str]:
    return [*SCRIPTED, *(tutor_names(profile) if profile is not None else [])]


def check_tutor_names(names: Sequence[str], profile: Profile | None) -> None:
    known = bench_tutor_names(profile)
    for name in names:
        if name not in known:
            raise UnknownNameError("tutor", name, known, field="tutor")


def build_bench_tutor(name: str, profile: Profile | None, options: LoadOptions | None = None) -> BenchTutor:
    if name == StepwiseTutor.id:
        return StepwiseTutor()
    if name == DumpTutor.id:
        return DumpTutor()
    check_tutor_names([name], profile)
    assert profile is not None
    return ProfileTutor(build_tutor(name, profile, options or LoadOptions(), mode="free"))
