"""The designed tutors: one pedagogy per tutor, written once, runnable under every learner family.

They are the known groups of ``simhub tutor-bench certify`` (``docs/guides/rank-tutors.md``): tutors
whose order on learning is known by construction, so a learner family that ranks them otherwise is
shown to be failing. Each has both capabilities: ``text`` (a turn of a conversation: the KnowSim
learner, the simulated-student family) and ``tools`` (a turn of the KT learner's LMS day).

A tutor teaches *units*: the item's knowledge units in the graph's order when the request carries
the item's IU graph (``request.graph``, :class:`~simhub.tutoring.tutors.BenchRequest`), else the
sentences of the question's solution; in the LMS, the day's unit KCs (an open help request's KC first,
then weakest mastery first). A *lesson* on a unit is its worked explanation and a check: the unit's
text and a question asking the learner to explain it back (``text``); a worked example pushed as
content, a message naming the KC and two practice items of it to answer (``tools``).

* ``designed:silent`` never teaches: a neutral nudge each turn (``text``), nothing (``tools``);
* ``designed:stepwise`` gives one lesson a turn, unit after unit, each with its check;
* ``designed:partial`` is ``stepwise`` for the first half of the units (of the LMS day's turns), then
  nudges (stays silent);
* ``designed:dump`` gives every unit at once on the first turn, with no check, then nudges.

By construction ``silent`` ⊂ ``partial`` ⊂ ``stepwise``: each teaches what the one before it teaches and
more, in the same words and order. Any learner for whom correct, well-ordered teaching never hurts must
rank them ``silent`` ≤ ``partial`` ≤ ``stepwise``, strictly as soon as it learns from a lesson at all:
that chain is the known-groups order (:data:`KNOWN_ORDER`). ``dump`` is *not* in the chain: it teaches
as much as ``stepwise`` but all at once and unchecked, which cognitive-load accounts expect to teach
less and a learner without load limits rewards; where each family puts it is a finding, not a check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from simhub.models import Sampling
from simhub.simulation.tutor import Tutor, TutorRequest, TutorTurn

__all__ = ["DESIGNED", "KNOWN_ORDER", "DesignedTutor", "lesson_units"]

#: The designed tutors, by name (every family's scripted tutors include them).
DESIGNED = {"designed:silent": "simhub.tutoring.designed:SilentDesign",
            "designed:partial": "simhub.tutoring.designed:PartialDesign",
            "designed:stepwise": "simhub.tutoring.designed:StepwiseDesign",
            "designed:dump": "simhub.tutoring.designed:DumpDesign"}

#: The order on learning known by construction, worst first (see the module docstring).
KNOWN_ORDER = ("designed:silent", "designed:partial", "designed:stepwise")

NUDGE = "Take your time with it. I'm here if you want to talk it through."
DONE = "You have every step now. Put them together and tell me your final answer."
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def lesson_units(graph: Any, question: Any) -> list[tuple[str, str]]:
    """The units a designed tutor teaches, as (name, explanation): the graph's IUs in its order, else
    the solution's sentences (a question with neither has none)."""
    if graph is not None:
        out = []
        for iu in graph.order:
            node = graph.node(iu)
            out.append((node.concept.strip().rstrip("."), node.description.strip()))
        return out
    solution = (getattr(question, "solution", None) or "").strip()
    return [(f"step {i}", s) for i, s in enumerate(_SENTENCE.split(solution), start=1) if s.strip()]


def _lesson(unit: tuple[str, str], k: int) -> str:
    name, text = unit
    return (f"Step {k}: {name}. {text} "
            f"Can you explain {'that' if name.startswith('step ') else name[:1].lower() + name[1:]} back to me "
            "in your own words?")


class DesignedTutor(Tutor):
    """The base of the designed tutors (see the module docstring): :meth:`say` writes the ``k``-th turn
    (0-based: the tutor turns already in the dialogue) from the units, :meth:`teach` picks the KCs to
    give lessons on at an LMS turn."""

    capabilities = frozenset({"text", "tools"})
    #: Its turns depend on the item's graph (KnowSim's tutor cache key then holds it).
    reads_state = True
    design: ClassVar[str]

    def __init__(self) -> None:
        self.id = f"designed:{self.design}"
        #: KCs taught so far today, per (run, day) (one tutor acts on many runs of a batch).
        self._taught: dict[tuple[str, int], list[str]] = {}

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "designed", "version": 1}

    # text
    def respond(self, requests: Sequence[TutorRequest], sampling: Sampling) -> list[TutorTurn]:
        out = []
        for r in requests:
            k = sum(1 for t in r.dialogue.turns if t.role == "tutor")
            out.append(TutorTurn(text=self.say(lesson_units(getattr(r, "graph", None), r.dialogue.question), k)))
        return out

    def say(self, units: list[tuple[str, str]], k: int) -> str:
        raise NotImplementedError

    # tools
    def start_day(self, env: Any, day: int) -> None:
        self._taught.pop((env.plan.run, day), None)

    def act(self, env: Any, day: int, turn: int) -> None:
        if not self.teaches_at(turn, env.plan.turns):  # no query either: a turn it stays silent reads nothing
            return
        taught = self._taught.setdefault((env.plan.run, day), [])
        for kc in self.teach(self._order(env), taught, turn):
            self._lesson_on(env, kc)
            taught.append(kc)

    def teach(self, order: list[str], taught: list[str], turn: int) -> list[str]:
        raise NotImplementedError

    def teaches_at(self, turn: int, turns: int) -> bool:
        """Whether it may give a lesson at LMS turn ``turn`` of a day of ``turns``."""
        return True

    @staticmethod
    def _order(env: Any) -> list[str]:
        """The unit's KCs to teach: an open help request's KC first, then the weakest mastery first."""
        mastery: dict[str, float] = env.call("get_mastery")
        asked = [h["kc"] for h in env.call("get_messages")["open_help_requests"] if h["kc"] in mastery]
        rest = sorted(mastery, key=lambda kc: (mastery[kc], kc))
        return list(dict.fromkeys([*asked[::-1], *rest]))

    @staticmethod
    def _example(env: Any, kc: str) -> str:
        item = next((i for i in env.bank.by_kc.get(kc, []) if i.explanation), None)
        return f"Worked example. {item.question} {item.explanation}" if item else f"The key idea of {kc}."

    def _lesson_on(self, env: Any, kc: str) -> None:
        env.call("provide_content", {"kc": kc, "kind": "example", "text": self._example(env, kc)})
        env.call("send_message", {"text": f"Let's work on {kc}. Study the worked example, then answer the two "
                                          "check items."})
        items = [it["id"] for it in env.call("get_unit_content") if it["kc"] == kc][:2]
        if items:
            env.call("assign_items", {"item_ids": items})


class SilentDesign(DesignedTutor):
    design = "silent"

    def say(self, units: list[tuple[str, str]], k: int) -> str:
        return NUDGE

    def teaches_at(self, turn: int, turns: int) -> bool:
        return False

    def teach(self, order: list[str], taught: list[str], turn: int) -> list[str]:
        return []


class PartialDesign(DesignedTutor):
    design = "partial"

    def say(self, units: list[tuple[str, str]], k: int) -> str:
        return _lesson(units[k], k + 1) if k < _half(len(units)) else NUDGE

    def teaches_at(self, turn: int, turns: int) -> bool:
        return turn <= _half(turns)

    def teach(self, order: list[str], taught: list[str], turn: int) -> list[str]:
        return [kc for kc in order if kc not in taught][:1]


def _half(n: int) -> int:
    """The partial tutor's share: the first half (rounded up), so at least one lesson whenever there is one."""
    return (n + 1) // 2


class StepwiseDesign(DesignedTutor):
    design = "stepwise"

    def say(self, units: list[tuple[str, str]], k: int) -> str:
        return _lesson(units[k], k + 1) if k < len(units) else DONE

    def teach(self, order: list[str], taught: list[str], turn: int) -> list[str]:
        return [kc for kc in order if kc not in taught][:1]


class DumpDesign(DesignedTutor):
    design = "dump"

    def say(self, units: list[tuple[str, str]], k: int) -> str:
        if k > 0 or not units:
            return NUDGE
        return "\n".join(["Here is the whole method at once:", *(f"{name}: {text}" for name, text in units)])

    def teach(self, order: list[str], taught: list[str], turn: int) -> list[str]:
        return []

    def act(self, env: Any, day: int, turn: int) -> None:
        if turn != 1:
            return
        kcs = self._order(env)
        for kc in kcs:
            env.call("provide_content", {"kc": kc, "kind": "example", "text": self._example(env, kc)})
        env.call("send_message", {"text": "Here is everything in this unit at once: " + "; ".join(kcs) + "."})
