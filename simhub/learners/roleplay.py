"""The knowledge-state learner's turns: what it says, given what it knows.

The state conditions every turn through a few derived views (:func:`state_view`):

* the IUs known well, the ones it struggles with (``struggling`` and ``partial_understanding``) and
  the ones it is unaware of;
* the *connectable unknowns*: IUs below partial whose prerequisite ceiling is at least partial (every
  prerequisite at partial or better), the ones it can be curious about;
* the *neighbourhood density* ``d``: the mean over IUs of the share of an IU's graph neighbours (in-
  and out-edges) at partial or better, an IU with no neighbour counting 1.0; and the articulation
  mode it sets: ``explicit`` at d ≥ 0.6, ``vague`` at d ≥ 0.3, ``deferential`` below.

Two learners speak from it, both answering ``{thought, message, attempt_verify}``:

* :class:`RolePlayLearner`: a chat model (an OpenAI-compatible endpoint, or a local model) prompted
  with the state (``simhub.prompts.learners``), answering JSON. An answer that is not that JSON is
  used as the message as it is and flagged;
* :class:`ScriptedLearner`: a deterministic stand-in for the offline demo, where a tiny untrained
  model cannot write JSON. Its turns are templates filled from the state (FIDELITY.md, "Tutor bench").
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from simhub.learners.chat import ChatModel, find_json_object
from simhub.learners.graph import ValidatedGraph
from simhub.learners.state import KNOWS_WELL, ORDINAL, PARTIAL, KnowledgeState
from simhub.learners.update import TurnRecord, _ceiling_in

Mode = Literal["explicit", "vague", "deferential"]
EXPLICIT_AT, VAGUE_AT = 0.6, 0.3


def neighbourhood_density(graph: ValidatedGraph, state: KnowledgeState) -> float:
    """Mean over IUs of the share of their neighbours at partial or better (1.0 for an IU with none)."""
    s = state.ordinals()
    shares = []
    for iu in graph.ids:
        ns = graph.neighbours[iu]
        shares.append(sum(s[n] >= PARTIAL for n in ns) / len(ns) if ns else 1.0)
    return sum(shares) / len(shares) if shares else 1.0


def articulation_mode(density: float) -> Mode:
    if density >= EXPLICIT_AT:
        return "explicit"
    return "vague" if density >= VAGUE_AT else "deferential"


@dataclasses.dataclass(frozen=True)
class StateView:
    known: tuple[str, ...]
    struggling: tuple[str, ...]
    unaware: tuple[str, ...]
    connectable: tuple[str, ...]
    density: float
    mode: Mode


def state_view(graph: ValidatedGraph, state: KnowledgeState) -> StateView:
    s = state.ordinals()
    d = neighbourhood_density(graph, state)
    return StateView(
        known=tuple(iu for iu in graph.order if s[iu] == KNOWS_WELL),
        struggling=tuple(iu for iu in graph.order if 0 < s[iu] < KNOWS_WELL),
        unaware=tuple(iu for iu in graph.order if s[iu] == 0),
        connectable=tuple(iu for iu in graph.order if s[iu] < PARTIAL and _ceiling_in(s, graph.prereqs[iu]) >= PARTIAL),
        density=d, mode=articulation_mode(d))


@dataclasses.dataclass(frozen=True)
class LearnerRequest:
    """The learner's next turn: ``turn`` is 1-based (1: the opening query); ``history`` the conversation
    so far as (role, text) pairs; ``last`` the record of the previous turn (None at turn 1)."""

    graph: ValidatedGraph
    state: KnowledgeState
    question: str
    history: tuple[tuple[str, str], ...]
    turn: int
    last: TurnRecord | None = None
    seed: int = 0
    #: For stateless baselines: the level, the state the conversation started from, a profile draw.
    level: str = "novice"
    initial: KnowledgeState | None = None
    profile_seed: int = 0


@dataclasses.dataclass(frozen=True)
class LearnerTurn:
    message: str = ""
    thought: str = ""
    attempt_verify: bool = False
    mode: str = ""
    #: Why the model's answer was not the JSON asked for (its text is then the message).
    flagged: str | None = None
    #: The learner could not speak (an endpoint down): the conversation fails with this cause.
    error: str | None = None
    #: The learner ended the conversation (a stateless baseline's end phrase).
    end: bool = False


class Learner(ABC):
    id: str = "learner"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id}

    @abstractmethod
    def speak(self, requests: Sequence[LearnerRequest]) -> list[LearnerTurn]:
        """The next message of each request; never raises for one of them."""


def _concept(graph: ValidatedGraph, iu: str) -> str:
    c = graph.node(iu).concept.strip().rstrip(".")
    return c[:1].lower() + c[1:] if c[:2] != c[:2].upper() else c


def _concepts(graph: ValidatedGraph, ius: Sequence[str]) -> list[str]:
    return [graph.node(iu).concept for iu in ius]


def _first_sentence(text: str) -> str:
    from simhub.learners.extract import sentences

    s = sentences(text)
    return s[0] if s else text


class ScriptedLearner(Learner):
    """A deterministic learner for the offline demo: each turn a template chosen from the state.

    * Turn 1 (the opening query): the question, and in ``explicit`` mode what it knows and the first
      connectable unknown it asks about; ``vague``: a half-remembered known concept; ``deferential``:
      a plea for help.
    * Later turns: when the last turn advanced an IU, the learner tries it out (``explicit``: restates
      the IU's first description sentence and asks to verify; ``vague``: says it half gets it);
      otherwise it says what still confuses it (the explained IU that did not advance) or asks about
      the next connectable unknown; ``deferential`` learners just acknowledge.
    """

    id = "scripted"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "scripted", "version": 1}

    def speak(self, requests: Sequence[LearnerRequest]) -> list[LearnerTurn]:
        return [self._one(r) for r in requests]

    def _one(self, r: LearnerRequest) -> LearnerTurn:
        g, view = r.graph, state_view(r.graph, r.state)
        thought = (f"I know {len(view.known)} of {g.size} ideas, struggle with {len(view.struggling)}; "
                   f"density {view.density:.2f}, {view.mode}.")
        question = " ".join(r.question.split())
        if r.turn == 1:
            if view.mode == "explicit" and view.known and view.connectable:
                msg = (f"I'm stuck on this: {question} I know that {_concept(g, view.known[-1])}, "
                       f"but what about {_concept(g, view.connectable[0])}?")
            elif view.mode != "deferential" and view.known:
                msg = f"Can you help me with {question} I think it has to do with {_concept(g, view.known[-1])}, maybe?"
            else:
                msg = f"I don't know how to start this one: {question} Can you help?"
            return LearnerTurn(message=msg, thought=thought, mode=view.mode)
        last = r.last
        advanced = [iu for iu in (last.advanced if last else ()) if iu in last.explained] if last else []
        stuck = [iu for iu in (last.explained if last else ()) if iu not in (last.advanced if last else ())
                 and ORDINAL[r.state.states[iu]] < KNOWS_WELL]
        if view.mode == "deferential":
            return LearnerTurn(message="Okay. What should I do next?", thought=thought, mode=view.mode)
        if advanced:
            iu = advanced[0]
            if view.mode == "explicit":
                msg = f"Let me check I follow: {_first_sentence(g.node(iu).description)} Is that right?"
                return LearnerTurn(message=msg, thought=thought, attempt_verify=True, mode=view.mode)
            return LearnerTurn(message=f"I sort of get the part about {_concept(g, iu)} now.", thought=thought,
                               attempt_verify=True, mode=view.mode)
        if stuck:
            return LearnerTurn(message=f"I'm still confused about {_concept(g, stuck[0])}. Why is that?",
                               thought=thought, mode=view.mode)
        if view.connectable:
            return LearnerTurn(message=f"What about {_concept(g, view.connectable[0])}?", thought=thought,
                               mode=view.mode)
        return LearnerTurn(message="I think I understand it now.", thought=thought, mode=view.mode)


class RolePlayLearner(Learner):
    """KnowSim's state-conditioned learner on a chat model, with simhub's own prompts."""

    def __init__(self, chat: ChatModel, *, name: str = "roleplay", temperature: float = 0.7, max_tokens: int = 400,
                 json_mode: bool = True):
        self.chat, self.temperature, self.max_tokens, self.json_mode = chat, temperature, max_tokens, json_mode
        self.id = name

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.learners import PROMPT_VERSION

        return {"id": self.id, "kind": "roleplay", "model": self.chat.describe(), "prompt": PROMPT_VERSION,
                "temperature": self.temperature}

    def speak(self, requests: Sequence[LearnerRequest]) -> list[LearnerTurn]:
        from simhub.prompts.learners import learner_messages

        views = [state_view(r.graph, r.state) for r in requests]
        prompts = [learner_messages(r.question, r.history, known=_concepts(r.graph, v.known),
                                    struggling=_concepts(r.graph, v.struggling), unaware=_concepts(r.graph, v.unaware),
                                    connectable=_concepts(r.graph, v.connectable), mode=v.mode, turn=r.turn)
                   for r, v in zip(requests, views, strict=True)]
        answers = self.chat.chat(prompts, json_mode=self.json_mode, temperature=self.temperature,
                                 max_tokens=self.max_tokens, seeds=[r.seed for r in requests],
                                 schemas=[LEARNER_TURN_SCHEMA] * len(prompts) if self.json_mode else None)
        out = []
        for view, a in zip(views, answers, strict=True):
            if not a.ok:
                out.append(LearnerTurn(error=f"learner: {a.error}", mode=view.mode))
                continue
            out.append(parse_learner_turn(a.text, view.mode))
        return out


#: The JSON a role-played turn must be; a local model's decoding is held to it (an endpoint is asked
#: for JSON mode only).
LEARNER_TURN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"thought": {"type": "string", "maxLength": 300}, "message": {"type": "string", "maxLength": 500},
                   "attempt_verify": {"type": "boolean"}},
    "required": ["thought", "message", "attempt_verify"], "additionalProperties": False}


def parse_learner_turn(text: str, mode: str = "") -> LearnerTurn:
    """``{thought, message, attempt_verify}`` from a model's answer; free text becomes a flagged message."""
    data, _ = find_json_object(text)
    if data is not None and isinstance(data.get("message"), str) and data["message"].strip():
        return LearnerTurn(message=data["message"].strip(), thought=str(data.get("thought") or ""),
                           attempt_verify=bool(data.get("attempt_verify", False)), mode=mode)
    message = " ".join(text.split())[:1000]
    return LearnerTurn(message=message or "...", mode=mode, flagged="the answer is not {thought, message, attempt_verify} JSON")


BASELINE_STYLES = ("zs", "zs-cot", "zs-cot-prof")


class StatelessLearner(Learner):
    """KnowSim's baselines: a prompted learner that never sees its state change.

    ``zs`` knows its level only; ``zs-cot`` adds a hidden thought; ``zs-cot-prof`` adds a profile and
    the initial state, never updated. It ends the conversation with an end phrase. The bench still
    tracks the knowledge state through the extractor, so KG, DC and CO say what the rules make of
    the conversation it had (KnowSim reports only IQ for its baselines).
    """

    def __init__(self, chat: ChatModel, style: str, *, name: str | None = None, temperature: float = 0.7,
                 max_tokens: int = 400):
        if style not in BASELINE_STYLES:
            from simhub.errors import UnknownNameError

            raise UnknownNameError("baseline learner", style, BASELINE_STYLES, field="learner")
        self.chat, self.style, self.temperature, self.max_tokens = chat, style, temperature, max_tokens
        self.id = name or style

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.learners import PROMPT_VERSION

        return {"id": self.id, "kind": "stateless", "style": self.style, "model": self.chat.describe(),
                "prompt": PROMPT_VERSION, "temperature": self.temperature}

    def speak(self, requests: Sequence[LearnerRequest]) -> list[LearnerTurn]:
        from simhub.prompts.learners import END_PHRASE, LEARNER_PROFILES, baseline_learner_messages

        prompts = []
        for r in requests:
            start = r.initial or r.state
            s = start.ordinals()
            g = r.graph
            prompts.append(baseline_learner_messages(
                r.question, r.history, level=r.level, style=self.style, turn=r.turn,
                profile=LEARNER_PROFILES[r.profile_seed % len(LEARNER_PROFILES)],
                known=[g.node(iu).concept for iu in g.order if s[iu] == KNOWS_WELL],
                shaky=[g.node(iu).concept for iu in g.order if 0 < s[iu] < KNOWS_WELL],
                unknown=[g.node(iu).concept for iu in g.order if s[iu] == 0]))
        answers = self.chat.chat(prompts, json_mode=self.style != "zs", temperature=self.temperature,
                                 max_tokens=self.max_tokens, seeds=[r.seed for r in requests])
        out = []
        for a in answers:
            if not a.ok:
                out.append(LearnerTurn(error=f"learner: {a.error}"))
                continue
            turn = parse_learner_turn(a.text) if self.style != "zs" else LearnerTurn(message=" ".join(a.text.split()))
            message, end = turn.message, END_PHRASE in turn.message.lower()
            if end:
                cut = message.lower().rfind(END_PHRASE)
                message = (message[:cut] + message[cut + len(END_PHRASE):]).strip(" .") or "Thanks."
            out.append(dataclasses.replace(turn, message=message or "...", end=end))
        return out
