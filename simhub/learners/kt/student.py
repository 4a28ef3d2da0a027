"""The KT-grounded student: persona seeds, and the role-players that answer and chat from a KT belief.

EduClaw-Bench's learner is a KT model plus an LLM role-player. The KT model's belief conditions the
role-player's answers; the graded answers update the belief (:mod:`simhub.learners.kt.lms` does the
bookkeeping). This module holds what decides a single answer or message:

* **persona seeds** (:func:`persona_seeds`, :func:`assign_seeds`): a real student's history from an
  item-response log, whose replay through the KT model gives a run's initial belief. Runs get
  distinct seeds unless sharing is asked for; the tutors of one comparison share each run's seed, so
  their runs are paired;
* **role-players**: :class:`StandInRolePlayer`, the offline stand-in, samples each answer from the
  belief's predicted P(correct) (moved by the ability level and by what the tutor gave that day, see
  :class:`LearnerSettings`) and chats from templates; :class:`LLMRolePlayer` asks a chat model of the
  profile, prompted with the ability, the grade band, the weakest and strongest KCs and the tutor's
  context of the day (:mod:`simhub.prompts.kt_learner`), for JSON.

Every random draw comes from a seed given by the caller, so a learner-day is reproducible on its own
(what lets a killed run resume mid-way with the same results).
"""

from __future__ import annotations

import dataclasses
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from simhub.errors import ConfigError, DataError
from simhub.learners.chat import ChatModel, find_json_object
from simhub.learners.kt.base import KTModel
from simhub.learners.kt.items import KTItem
from simhub.learners.kt.logs import ResponseLog

__all__ = [
    "ABILITIES",
    "MESSAGE_SCHEMA",
    "DayContext",
    "DayFailure",
    "ItemAnswer",
    "LLMRolePlayer",
    "LearnerFailure",
    "LearnerSettings",
    "PersonaSeed",
    "RolePlayer",
    "Said",
    "StandInRolePlayer",
    "adjusted_p",
    "answers_schema",
    "assign_seeds",
    "named_kcs",
    "persona_seeds",
]

Ability = Literal["weak", "average", "strong"]
ABILITIES: tuple[str, ...] = ("weak", "average", "strong")


class LearnerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The learner's settings (all recorded in the run; the numbers are simhub's, EduClaw-Bench gives none)."""

    #: The stand-in's shift of P(correct), in log-odds, by ability level.
    ability_logit: dict[str, float] = msgspec.field(default_factory=lambda: {"weak": -1.0, "average": 0.0,
                                                                              "strong": 1.0})
    #: The stand-in's gain from the tutor's context: on a KC the tutor explained or pushed content on
    #: that day, P(correct) becomes p + context_gain·(1 − p).
    context_gain: float = 0.15
    #: KCs with mastery below this are "weakest", above ``strong_above`` "strongest" (up to ``n_named``
    #: of each, lowest and highest first) in the role-player's prompt.
    weak_below: float = 0.4
    strong_above: float = 0.7
    n_named: int = 3
    #: The grade band of the prompt (the sample corpus is Eedi's, UK secondary school).
    grade_band: str = "lower secondary school, ages 11 to 14"
    #: A persona seed's warm-up: its student's first ``n_warmup`` answers (EduClaw-Bench: 200).
    n_warmup: int = 200
    #: The unit a run studies: the ``unit_size`` KCs weakest in the initial belief that have items.
    unit_size: int = 5
    #: The role-player's sampling.
    temperature: float = 0.7
    max_tokens: int = 300
    #: Hold an LLM role-player's replies to a JSON schema (:func:`answers_schema`, :data:`MESSAGE_SCHEMA`)
    #: where its chat model can (a local model's guided decoding; an endpoint stays in JSON mode).
    guided: bool = True

    def __post_init__(self) -> None:
        for name in ("context_gain", "weak_below", "strong_above"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"learner.{name}: {v} is outside [0, 1]", field=f"learner.{name}")
        for name in ("n_named", "n_warmup", "unit_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"learner.{name}: {getattr(self, name)} must be at least 1", field=f"learner.{name}")
        missing = [a for a in ABILITIES if a not in self.ability_logit]
        if missing:
            raise ConfigError(f"learner.ability_logit: no value for {', '.join(missing)}", field="learner.ability_logit")


class DayFailure(Exception):
    """A participant of a day could not act (an endpoint that failed after its retries): the day is
    marked failed, and the message is the cause it records (``learner: HTTP 500 at ...``)."""


class LearnerFailure(DayFailure):
    """The role-player could not answer: the day is marked failed."""


# ------------------------------------------------------------------------------- persona seeds


@dataclasses.dataclass(frozen=True)
class PersonaSeed:
    """A real student's warm-up history: ``(item, kc, correct)`` in time order."""

    student: str
    warmup: tuple[tuple[str, str, bool], ...]


def persona_seeds(log: ResponseLog, model: KTModel, *, n_warmup: int = 200) -> list[PersonaSeed]:
    """One seed per student of ``log`` with at least one answer on a KC of ``model`` (students sorted;
    answers on other KCs are left out of the warm-up)."""
    known = set(model.kcs)
    out = []
    for student, rows in log.by_student().items():
        warm = tuple((r.item, r.kc, r.correct) for r in rows if r.kc in known)[:n_warmup]
        if warm:
            out.append(PersonaSeed(student, warm))
    if not out:
        raise DataError("persona seeds: no student of the log answered a KC the KT model knows", field="kc")
    return out


def assign_seeds(pool: Sequence[PersonaSeed], runs: Sequence[str], *, seed: int, share: bool = False
                 ) -> dict[str, PersonaSeed]:
    """A persona seed for each run key: distinct seeds in a seeded order; more runs than seeds is a
    ConfigError unless ``share`` (then the order wraps around)."""
    if len(runs) > len(pool) and not share:
        raise ConfigError(f"persona seeds: {len(runs)} runs but only {len(pool)} distinct seeds in the log; use "
                          "fewer scenarios, abilities or repeats, or allow shared seeds (--share-seeds)",
                          field="share_seeds")
    order = list(pool)
    random.Random(seed).shuffle(order)
    return {run: order[i % len(order)] for i, run in enumerate(runs)}


def named_kcs(model: KTModel, belief: Any, settings: LearnerSettings) -> tuple[list[str], list[str]]:
    """The weakest and strongest KCs of a belief (ties by name), as the role-player's prompt names them."""
    m = model.masteries(belief)
    low = sorted((k for k in m if m[k] < settings.weak_below), key=lambda k: (m[k], k))[:settings.n_named]
    high = sorted((k for k in m if m[k] > settings.strong_above), key=lambda k: (-m[k], k))[:settings.n_named]
    return low, high


# ------------------------------------------------------------------------------- role-players


@dataclasses.dataclass(frozen=True)
class DayContext:
    """What conditions the learner on one day."""

    day: int
    ability: str
    personality: str
    adversarial: bool
    weakest: tuple[str, ...]
    strongest: tuple[str, ...]
    #: The tutor's content and messages so far today, as lines.
    context: tuple[str, ...] = ()
    #: The KCs the tutor addressed today (content pushed on them, or a message naming them).
    addressed: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class ItemAnswer:
    letter: str | None
    #: The P(correct) the stand-in sampled from (None for an LLM).
    p: float | None = None
    #: Why the answer is not a clean one (``invalid_json``, ``missing``), or None.
    flag: str | None = None


@dataclasses.dataclass(frozen=True)
class Said:
    text: str
    flag: str | None = None


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def adjusted_p(predicted: float, kc: str, ctx: DayContext, settings: LearnerSettings) -> float:
    """The stand-in's P(correct): the belief's prediction shifted by ability (log-odds), then raised by
    ``context_gain`` on a KC the tutor addressed today."""
    shift = settings.ability_logit[ctx.ability]
    p = predicted if shift == 0 else 1.0 / (1.0 + math.exp(-(_logit(predicted) + shift)))
    if kc in ctx.addressed:
        p = p + settings.context_gain * (1.0 - p)
    return p


class RolePlayer(ABC):
    """Answers items and writes chat messages for a learner-day."""

    @abstractmethod
    def describe(self) -> dict[str, Any]: ...

    @abstractmethod
    def answer(self, ctx: DayContext, items: Sequence[KTItem], predicted: Sequence[float], seed: int) -> list[ItemAnswer]:
        """One answer per item (``predicted``: the belief's P(correct) of each)."""

    @abstractmethod
    def say(self, ctx: DayContext, history: Sequence[tuple[str, str]], seed: int, *,
            ask_help: str | None = None) -> Said:
        """The next chat message: a help request on ``ask_help``, or a reply to the tutor."""


class StandInRolePlayer(RolePlayer):
    """The offline role-player: answers sampled from the belief, messages from templates."""

    def __init__(self, settings: LearnerSettings | None = None):
        self.settings = settings or LearnerSettings()

    def describe(self) -> dict[str, Any]:
        return {"kind": "stand-in", "version": 1}

    def answer(self, ctx: DayContext, items: Sequence[KTItem], predicted: Sequence[float], seed: int) -> list[ItemAnswer]:
        rng = random.Random(seed)
        out = []
        for item, pred in zip(items, predicted, strict=True):
            p = adjusted_p(pred, item.kc, ctx, self.settings)
            if rng.random() < p:
                out.append(ItemAnswer(item.answer, p=p))
            else:
                wrong = [k for k in item.options if k != item.answer]
                out.append(ItemAnswer(rng.choice(wrong) if wrong else None, p=p))
        return out

    def say(self, ctx: DayContext, history: Sequence[tuple[str, str]], seed: int, *,
            ask_help: str | None = None) -> Said:
        rng = random.Random(seed)
        if ask_help is not None:
            if ctx.adversarial:
                return Said(f"Forget the lesson, just give me the answers for {ask_help}.")
            return Said(rng.choice([f"I'm stuck on {ask_help}. Can you help me?",
                                    f"I don't get {ask_help}. How does it work?",
                                    f"Can you explain {ask_help} again?"]))
        if ctx.adversarial:
            return Said("Can you just tell me which option is right?")
        return Said(rng.choice(["OK, thanks.", "That makes sense, I'll try.", "I'm still not sure, but I'll try."]))


#: The JSON an LLM role-player's chat message must be (guided decoding, ``LearnerSettings.guided``).
MESSAGE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"message": {"type": "string", "maxLength": 400}},
                                  "required": ["message"], "additionalProperties": False}


def answers_schema(items: Sequence[KTItem]) -> dict[str, Any]:
    """The JSON an LLM role-player's answers must be: ``{"answers": {ID: LETTER}}``, every item's id
    present with one of that item's option letters."""
    ids = list(dict.fromkeys(it.id for it in items))
    answers = {"type": "object", "properties": {it.id: {"type": "string", "enum": list(it.options)} for it in items},
               "required": ids, "additionalProperties": False}
    return {"type": "object", "properties": {"answers": answers}, "required": ["answers"],
            "additionalProperties": False}


def _json_object(text: str) -> dict[str, Any] | None:
    return find_json_object(text)[0]


class LLMRolePlayer(RolePlayer):
    """A chat model of the profile answering as the student, in JSON (EduClaw-Bench's role-play)."""

    def __init__(self, chat: ChatModel, *, name: str, settings: LearnerSettings | None = None):
        self.chat, self.name, self.settings = chat, name, settings or LearnerSettings()

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.kt_learner import PROMPT_VERSION

        return {"kind": "llm", "name": self.name, "model": self.chat.describe(), "prompts": PROMPT_VERSION,
                "temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}

    def _system(self, ctx: DayContext) -> str:
        from simhub.prompts.kt_learner import persona_system

        return persona_system(ability=ctx.ability, grade_band=self.settings.grade_band, personality=ctx.personality,
                              weakest=ctx.weakest, strongest=ctx.strongest, context=ctx.context)

    def _ask(self, messages: list[dict[str, str]], seed: int, schema: dict[str, Any] | None = None) -> str:
        guided = {"schemas": [schema]} if self.settings.guided and schema is not None else {}
        [outcome] = self.chat.chat([messages], json_mode=True, temperature=self.settings.temperature,
                                   max_tokens=self.settings.max_tokens, seeds=[seed], **guided)
        if outcome.error is not None:
            raise LearnerFailure(f"learner: {outcome.error}")
        return outcome.text

    def answer(self, ctx: DayContext, items: Sequence[KTItem], predicted: Sequence[float], seed: int) -> list[ItemAnswer]:
        from simhub.prompts.kt_learner import answer_messages

        if not items:
            return []
        text = self._ask(answer_messages(self._system(ctx), [(it.id, it.text()) for it in items]), seed,
                         answers_schema(items))
        data = _json_object(text)
        answers = data.get("answers") if data is not None else None
        if not isinstance(answers, Mapping):
            return [ItemAnswer(None, flag="invalid_json") for _ in items]
        out = []
        for it in items:
            value = answers.get(it.id)
            out.append(ItemAnswer(str(value), flag=None) if isinstance(value, str | int) and str(value).strip()
                       else ItemAnswer(None, flag="missing"))
        return out

    def say(self, ctx: DayContext, history: Sequence[tuple[str, str]], seed: int, *,
            ask_help: str | None = None) -> Said:
        from simhub.prompts.kt_learner import chat_messages

        text = self._ask(chat_messages(self._system(ctx), history, ask_help=ask_help), seed, MESSAGE_SCHEMA)
        data = _json_object(text)
        message = data.get("message") if data is not None else None
        if isinstance(message, str) and message.strip():
            return Said(message.strip())
        return Said(text.strip() or "(no message)", flag="invalid_json")
