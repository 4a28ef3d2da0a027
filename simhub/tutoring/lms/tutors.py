"""The KT-learner bench's scripted tutors: ``tools`` tutors acting through the LMS actions of
:mod:`simhub.learners.kt.lms`.

* ``scripted:silent`` never acts (every turn records ``stay_silent``): the floor;
* ``scripted:weakest`` reads the mastery and works the weakest KCs: it answers an open help request,
  pushes a worked example on the weakest KC, and assigns practice items on the two weakest.

Any ``tutors:`` entry of the profile with ``kind: openai`` acts as a
:class:`~simhub.tutoring.tutors.ToolTutor` (the kit's). The two scripted tutors are references for
the demo and tests, not tutors to rank.
"""

from __future__ import annotations

from typing import Any

from simhub.learners.kt.lms import LMSRun
from simhub.simulation.tutor import Tutor
from simhub.tutoring.designed import DESIGNED

#: The scripted tutors, by name (the kit builds them: :func:`simhub.tutoring.tutors.build_bench_tutor`).
SCRIPTED = {"scripted:weakest": "simhub.tutoring.lms.tutors:WeakestTutor",
            "scripted:silent": "simhub.tutoring.lms.tutors:SilentTutor", **DESIGNED}


class SilentTutor(Tutor):
    id = "scripted:silent"
    capabilities = frozenset({"tools"})

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def act(self, run: LMSRun, day: int, turn: int) -> None:  # type: ignore[override]
        return None


class WeakestTutor(Tutor):
    id = "scripted:weakest"
    capabilities = frozenset({"tools"})

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def act(self, run: LMSRun, day: int, turn: int) -> None:  # type: ignore[override]
        mastery: dict[str, float] = run.call("get_mastery")
        weakest = sorted(mastery, key=lambda k: (mastery[k], k))[:2]
        items = run.call("get_unit_content")
        by_kc: dict[str, list[str]] = {}
        for it in items:
            by_kc.setdefault(it["kc"], []).append(it["id"])
        if turn == 1:
            open_requests = run.call("get_messages")["open_help_requests"]
            kc = open_requests[-1]["kc"] if open_requests else weakest[0]
            example = next((i for i in run.bank.by_kc.get(kc, []) if i.explanation), None)
            if example is not None:
                run.call("provide_content", {"kc": kc, "kind": "example",
                                             "text": f"Worked example. {example.question} {example.explanation}"})
            run.call("send_message", {"text": f"Today we work on {kc}. Look at the example, then try the practice."})
        assign = [i for kc in weakest for i in by_kc.get(kc, [])[:2]]
        if assign:
            run.call("assign_items", {"item_ids": assign})
