"""The knowledge-state learner as a simulated student: a :class:`~simhub.simulation.Simulator`.

For a target (a real dialogue and the student turn to write) the learner starts in its level's
initial state, and its state is replayed through the real dialogue before the target. Each real
tutor turn, with the student turn before it, goes through the extractor and the update. Then the
learner writes the next student turn from the replayed state. This gives the learner a Table-1 row
(turn-level realism against real students) through the same scoring as every other simulator.

In a rollout (``simhub rollout``) the history is the rollout so far, so each step replays the state
from the start through every turn before it: quadratic in a dialogue's length, which is cheap with
the offline extractor (it embeds each distinct text once). A learner turn that ends the
conversation is the candidate's ``end_of_dialogue``, and ends the rollout like the marker does.

The IU graph of a dialogue is found by the question id that prefixes the dialogue id (the sample
corpus's ``QuestionId_DQ``; a rollout's ``REALID~SAMPLE`` and a tutor-sensitivity prefix's
``REALID@TURN:CONDITION`` keep that prefix), else by the graph's question text appearing in the
dialogue's question. A dialogue with no graph is a per-target error, and the run counts it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from simhub.config import Profile
from simhub.errors import UnknownNameError
from simhub.learners.extract import Extractor, ExtractRequest
from simhub.learners.graph import ValidatedGraph
from simhub.learners.presets import Preset
from simhub.learners.roleplay import Learner, LearnerRequest
from simhub.learners.state import LEVELS, KnowledgeState, initial_state
from simhub.learners.update import TurnRecord, update
from simhub.models import LoadOptions, Sampling
from simhub.schema import Dialogue
from simhub.simulation.base import Candidate, SimulationResult, Simulator, Target


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


class KnowledgeStateSimulator(Simulator):
    kind = "knowledge-state"

    def __init__(self, learner: Learner, extractor: Extractor, graphs: Mapping[str, ValidatedGraph], preset: Preset, *,
                 level: str = "novice", name: str = "knowsim"):
        self.learner, self.extractor, self.preset, self.level, self.id = learner, extractor, preset, level, name
        self.graphs = dict(graphs)
        self._by_text = [(_norm(g.graph.question or ""), g) for g in self.graphs.values() if g.graph.question]
        if level not in LEVELS:
            raise UnknownNameError("knowledge level", level, LEVELS, field="level")

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "level": self.level, "learner": self.learner.describe(),
                "extractor": self.extractor.describe(), "graphs": sorted(self.graphs)}

    def graph_for(self, dialogue: Dialogue) -> ValidatedGraph | None:
        head = re.split(r"[-~@]", dialogue.id, maxsplit=1)[0]
        if head in self.graphs:
            return self.graphs[head]
        text = _norm(dialogue.question.text)
        for question, graph in self._by_text:
            if question and question in text:
                return graph
        return None

    def messages(self, target: Target) -> list[dict[str, str]]:
        from simhub.learners.roleplay import state_view
        from simhub.prompts.learners import learner_messages

        graph = self.graph_for(target.dialogue)
        if graph is None:
            return [{"role": "user", "content": "(no IU graph for this question)"}]
        state, history, _ = self._replay([target])[0]
        v = state_view(graph, state)
        concepts = lambda ius: [graph.node(iu).concept for iu in ius]  # noqa: E731
        return learner_messages(target.dialogue.question.text, history, known=concepts(v.known),
                                struggling=concepts(v.struggling), unaware=concepts(v.unaware),
                                connectable=concepts(v.connectable), mode=v.mode, turn=len(history) // 2 + 1)

    def _replay(self, targets: Sequence[Target]) -> list[tuple[KnowledgeState, tuple[tuple[str, str], ...],
                                                                 TurnRecord | None]]:
        """Each target's state after the real turns before it, its history, and the last turn's record."""
        out = []
        for t in targets:
            graph = self.graph_for(t.dialogue)
            assert graph is not None
            state = initial_state(graph, self.level)
            history: list[tuple[str, str]] = []
            last: TurnRecord | None = None
            pending = ""
            for turn in t.history:
                if turn.role == "student":
                    pending = turn.content
                    history.append(("learner", turn.content))
                    continue
                request = ExtractRequest(graph, state, tuple(history[:-1] if pending else history), pending,
                                         turn.content, t.dialogue.question.text)
                (extraction,) = self.extractor.extract([request])
                if extraction.error is None:
                    last = update(graph, state, extraction.signals, self.preset)
                    state = last.state
                history.append(("tutor", turn.content))
                pending = ""
            out.append((state, tuple(history), last))
        return out

    def simulate(self, targets: Sequence[Target], sampling: Sampling | None = None, *,
                 progress: bool = False) -> list[SimulationResult]:
        sampling = sampling or self.default_sampling
        results: list[SimulationResult | None] = [None] * len(targets)
        known = [i for i, t in enumerate(targets) if self.graph_for(t.dialogue) is not None]
        for i, t in enumerate(targets):
            if i not in known:
                results[i] = SimulationResult(error=f"no IU graph for the question of dialogue {t.dialogue.id}")
        try:
            replayed = self._replay([targets[i] for i in known])
        except Exception as exc:  # the extractor or the update failed: these targets fail with the cause
            for i in known:
                results[i] = SimulationResult(error=f"{type(exc).__name__}: {str(exc)[:200]}")
            return [r for r in results if r is not None]
        for i, (state, history, last) in zip(known, replayed, strict=True):
            t = targets[i]
            graph = self.graph_for(t.dialogue)
            assert graph is not None
            turn = sum(1 for role, _ in history if role == "learner") + 1
            requests = [LearnerRequest(graph, state, t.dialogue.question.text, history, turn, last,
                                       seed=(sampling.seed or 0) + k, level=self.level,
                                       initial=initial_state(graph, self.level)) for k in range(sampling.n)]
            said = self.learner.speak(requests)
            errors = [s.error for s in said if s.error]
            if errors:
                results[i] = SimulationResult(error=errors[0])
                continue
            results[i] = SimulationResult(candidates=[Candidate(text=s.message, finish_reason="stop",
                                                                end_of_dialogue=s.end) for s in said])
        return [r for r in results if r is not None]


def knowsim_level(name: str) -> str:
    """The knowledge level of ``knowsim`` (novice) or ``knowsim:LEVEL``; an unknown level is an
    UnknownNameError that lists the levels (checked before any graph or model is touched)."""
    level = name.partition(":")[2] or "novice"
    if level not in LEVELS:
        raise UnknownNameError("knowsim level", level, LEVELS, field="simulator")
    return level


def knowsim_simulator(name: str, profile: Profile | None = None, options: LoadOptions | None = None):
    """``knowsim`` or ``knowsim:LEVEL`` as a simulated student (``simhub simulate``, ``eval``, ``rollout``,
    ``eval-dialogues``): the knowledge-state learner on the shipped graphs, voiced by the scripted
    stand-in, its state replayed by the offline extractor under the paper preset. None for any other name."""
    if name != "knowsim" and not name.startswith("knowsim:"):
        return None
    from simhub.learners.graph import shipped_graphs, validate_graph
    from simhub.learners.presets import resolve_preset
    from simhub.learners.roleplay import ScriptedLearner
    from simhub.tutoring.knowsim.components import build_extractor

    level = knowsim_level(name)
    graphs = {k: validate_graph(g, name=k) for k, g in shipped_graphs().items()}
    return KnowledgeStateSimulator(ScriptedLearner(), build_extractor("offline", profile, options), graphs,
                                   resolve_preset("paper"), level=level, name=name)


class _KnowSimStudent:
    """``knowsim[:LEVEL]`` as a simulated student, registered in
    :data:`simhub.simulation.registry.LEARNER_SIMULATORS` (so ``simhub eval`` and the others build it as
    they build any simulator): ``check`` a name before anything is read, ``build`` it."""

    @staticmethod
    def check(name: str) -> None:
        knowsim_level(name)

    @staticmethod
    def build(name: str, profile: Any = None, options: Any = None) -> KnowledgeStateSimulator:
        sim = knowsim_simulator(name, profile, options)
        assert sim is not None
        return sim


KNOWSIM_STUDENT = _KnowSimStudent()
