"""Two reference simulators that put every report on a scale.

* ``reference:previous-turn`` answers with the student's previous real turn (an empty turn for the
  first student turn): a floor any simulator should beat.
* ``reference:real`` answers with the real turn itself: the metrics' ceiling (cosine and ROUGE-L
  are 1 by construction; the model-based metrics show their own noise).

They read the real turn, so they only run on real dialogues (not over HTTP).
"""

from __future__ import annotations

from collections.abc import Sequence

from simhub.models import Sampling
from simhub.simulation.base import Candidate, SimulationResult, Simulator, Target

REFERENCE_SIMULATORS = ("reference:previous-turn", "reference:real")


class ReferenceSimulator(Simulator):
    kind = "reference"
    serves_http = False
    cacheable = False

    def __init__(self, sid: str):
        if sid not in REFERENCE_SIMULATORS:
            raise ValueError(sid)
        self.id = sid

    def describe(self) -> dict:
        what = "the student's previous real turn (a floor)" if self.id.endswith("previous-turn") else \
            "the real turn itself (the metrics' ceiling)"
        return {"id": self.id, "kind": self.kind, "description": what}

    def messages(self, target: Target) -> list[dict[str, str]]:
        return [{"role": "system", "content": f"{self.id} uses no model: {self.describe()['description']}"}]

    def answer(self, target: Target) -> str:
        if self.id == "reference:real":
            return target.dialogue.turns[target.turn_index].content
        earlier = [t for t in target.history if t.role == "student"]
        return earlier[-1].content if earlier else ""

    def simulate(self, targets: Sequence[Target], sampling: Sampling | None = None, *,
                 progress: bool = False) -> list[SimulationResult]:
        n = (sampling or self.default_sampling).n
        return [SimulationResult([Candidate(self.answer(t), "stop") for _ in range(n)]) for t in targets]
