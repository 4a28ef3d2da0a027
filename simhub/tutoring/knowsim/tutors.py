"""The KnowSim bench's scripted tutors, and what a tutor of it is given.

A tutor of this bench (any ``text`` :class:`~simhub.simulation.tutor.Tutor`; the kit builds profile
tutors, :mod:`simhub.tutoring.tutors`) sees the conversation as a :class:`BenchRequest` (a
:class:`~simhub.simulation.tutor.TutorRequest` whose learner turns are ``student`` turns) and, for
the scripted tutors only, the item's IU graph and the learner's state. The scripted tutors are
offline references for the demo and tests, not tutors to rank:

* ``scripted:stepwise`` reads the learner's state (an oracle no real tutor has) and teaches one IU a
  turn: the first IU in topological order that is not known well and whose prerequisites all are,
  with a worked explanation built from the graph (its description, why it matters for what it leads
  to, the question as the example, and a check question);
* ``scripted:dump`` ignores the learner and sends every IU's description at once, every turn: the
  "knowledge dumping" that overloads a novice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simhub.learners.graph import ValidatedGraph
from simhub.learners.state import KNOWS_WELL, KnowledgeState
from simhub.models import Sampling
from simhub.simulation.tutor import Tutor, TutorTurn
from simhub.tutoring.designed import DESIGNED
from simhub.tutoring.tutors import BenchRequest

#: The scripted tutors, by name (the kit builds them: :func:`simhub.tutoring.tutors.build_bench_tutor`), with
#: the kit's designed tutors (:mod:`simhub.tutoring.designed`).
SCRIPTED = {"scripted:stepwise": "simhub.tutoring.knowsim.tutors:StepwiseTutor",
            "scripted:dump": "simhub.tutoring.knowsim.tutors:DumpTutor", **DESIGNED}


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


class StepwiseTutor(Tutor):
    id = "scripted:stepwise"
    reads_state = True

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:  # type: ignore[override]
        return [TutorTurn(text=self.explain(r.graph, r.state, r.dialogue.question.text)) for r in requests]  # type: ignore[arg-type]

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


class DumpTutor(Tutor):
    id = "scripted:dump"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def respond(self, requests: Sequence[BenchRequest], sampling: Sampling) -> list[TutorTurn]:  # type: ignore[override]
        return [TutorTurn(text=self.dump(r.graph)) for r in requests]  # type: ignore[arg-type]

    @staticmethod
    def dump(graph: ValidatedGraph) -> str:
        lines = ["Here is everything you need for this question:"]
        for iu in graph.order:
            node = graph.node(iu)
            lines.append(f"{node.concept.strip().rstrip('.')}: {node.description.strip()}")
        return "\n".join(lines)
