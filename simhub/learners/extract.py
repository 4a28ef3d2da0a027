"""Per-IU signals of one turn: how the tutor taught each IU, and what the learner did with it.

An :class:`Extractor` reads one turn (the learner's message ``u_t`` and the tutor's reply ``a_t``, with
the state and the conversation before them) and labels **every** IU of the graph with an
:class:`~simhub.learners.update.IUSignal`: ``teaching_quality`` from the latest tutor turn only, and
``user_attempt_type`` from the learner's message. Two extractors:

* :class:`LLMExtractor`, KnowSim's path: a chat model (any OpenAI-compatible endpoint of the profile,
  in JSON mode) labels the IUs; the answer is schema-checked IU by IU. An answer that does not parse,
  leaves an IU out, names an IU outside the graph or uses an unknown label is a **flagged** turn whose
  signals are all silent, so it advances nothing; the run counts such turns.
* :class:`OfflineExtractor`, a deterministic stand-in for the demo and tests (FIDELITY.md,
  "Tutor bench"). Its rules, per turn:

  1. Both messages are split into sentences. A sentence *supports* an IU when its similarity to the
     IU's text (concept and description) is at least ``threshold`` and within ``margin`` of the best
     IU for that sentence (so a sentence counts toward the IUs it is most about, not every IU of the
     topic). Similarity is the cosine of MiniLM sentence embeddings (``embedding``) or, with
     ``lexical``, the share of the sentence's content words found in the IU's text.
  2. An IU no tutor sentence supports is ``not_mentioned``. It is ``well_explained`` when at least
     two tutor sentences support it, they hold at least ``min_words`` words, and at least one of them
     carries an elaboration cue: a reason (``because``, ``so``, ``which means``...), an example
     (``for example``, ``in this question``...), worked numbers (an operator or ``=`` between
     numbers), or a question aimed at it. Anything less (naming, a one-sentence treatment) is
     ``shallow``.
  3. A learner sentence that supports an IU and is not a question is an attempt: ``articulation``
     when most of its content words were in the tutor's previous turn (restating it), else
     ``reasoning`` (new content). A question is not an attempt.

  It cannot see factual errors, echoing or promises to explain later, which the LLM judge is asked to
  catch; its labels are a stand-in, not KnowSim's.
"""

from __future__ import annotations

import dataclasses
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from simhub.learners.chat import ChatModel, find_json_object
from simhub.learners.graph import ValidatedGraph
from simhub.learners.state import KnowledgeState
from simhub.learners.update import ATTEMPT_TYPES, SILENT, TEACHING_QUALITIES, IUSignal


@dataclasses.dataclass(frozen=True)
class ExtractRequest:
    """One turn to label: ``history`` is the conversation before it as (role, text) pairs, roles
    ``learner`` and ``tutor``; ``state`` the learner's state entering the turn."""

    graph: ValidatedGraph
    state: KnowledgeState
    history: tuple[tuple[str, str], ...]
    learner_message: str
    tutor_message: str
    question: str = ""

    @property
    def previous_tutor(self) -> str:
        for role, text in reversed(self.history):
            if role == "tutor":
                return text
        return ""


class Extraction(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The signals of a turn by IU (every IU of the graph). ``flagged`` says why the extractor's answer
    could not be used (the signals are then all silent); ``error`` that the extractor itself failed
    (an endpoint down after its retries), which fails the conversation."""

    signals: dict[str, IUSignal] = msgspec.field(default_factory=dict)
    flagged: str | None = None
    error: str | None = None
    raw: str | None = None


class Extractor(ABC):
    id: str = "extractor"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id}

    @abstractmethod
    def extract(self, requests: Sequence[ExtractRequest]) -> list[Extraction]:
        """The signals of each turn; never raises for one turn (see :class:`Extraction`)."""


def silent(graph: ValidatedGraph) -> dict[str, IUSignal]:
    return dict.fromkeys(graph.ids, SILENT)


# ------------------------------------------------------------------------------------------- offline

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "there", "here", "we", "you", "i", "he", "she", "they", "them", "our", "your", "my", "me", "us", "so", "do", "does", "did", "can", "could", "will", "would", "should", "may", "might", "must", "not", "no", "yes", "than", "then", "just", "also", "very", "much", "more", "most", "some", "any", "each", "every", "all", "one", "what", "which", "who", "how", "why", "when", "where", "let's", "lets", "let", "ok", "okay"])
_REASON = re.compile(r"\b(because|since|so|therefore|thus|which means|this means|that means|that is why|that's why|"
                     r"hence|in other words)\b")
_EXAMPLE = re.compile(r"\b(for example|for instance|e\.g\.|such as|in this question|here we|like this)\b")
_WORKED = re.compile(r"\d\s*[-+×x*/÷=^]\s*\(?-?\d|=")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


def content_words(text: str) -> list[str]:
    words = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP:
            continue
        words.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return words


def has_cue(sentence: str) -> bool:
    low = sentence.lower()
    return bool(_REASON.search(low) or _EXAMPLE.search(low) or _WORKED.search(low) or low.rstrip().endswith("?"))


class OfflineExtractor(Extractor):
    """The deterministic stand-in described in the module docstring."""

    def __init__(self, similarity: Literal["embedding", "lexical"] = "embedding", *, threshold: float | None = None,
                 margin: float = 0.08, min_words: int = 20, articulation_overlap: float = 0.7,
                 embedder: str = "minilm", device: str | None = None):
        if similarity not in ("embedding", "lexical"):
            from simhub.errors import UnknownNameError

            raise UnknownNameError("offline similarity", similarity, ("embedding", "lexical"), field="extractor")
        self.similarity = similarity
        self.threshold = threshold if threshold is not None else (0.55 if similarity == "embedding" else 0.25)
        self.margin, self.min_words, self.articulation_overlap = margin, min_words, articulation_overlap
        self.embedder_name, self.device = embedder, device
        self.id = "offline" if similarity == "embedding" else "offline:lexical"
        self._embedder = None
        self._vectors: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "offline", "similarity": self.similarity, "threshold": self.threshold,
                "margin": self.margin, "min_words": self.min_words, "articulation_overlap": self.articulation_overlap,
                **({"embedder": self.embedder_name} if self.similarity == "embedding" else {})}

    @staticmethod
    def iu_text(graph: ValidatedGraph, iu: str) -> str:
        node = graph.node(iu)
        return f"{node.concept}. {node.description}".strip()

    def _encode(self, texts: Sequence[str]):
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            if self._embedder is None:
                from simhub.models.embeddings import load_embedder

                self._embedder = load_embedder(self.embedder_name, self.device)
            for t, v in zip(todo, self._embedder.encode(todo), strict=True):
                self._vectors[t] = v
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 1))

    def _similarities(self, sents: Sequence[str], ius: Sequence[str]) -> list[list[float]]:
        if not sents:
            return []
        if self.similarity == "embedding":
            s, v = self._encode(list(sents)), self._encode(list(ius))
            return (s @ v.T).tolist()
        iu_words = [set(content_words(t)) for t in ius]
        out = []
        for sent in sents:
            words = set(content_words(sent))
            out.append([len(words & iw) / math.sqrt(len(words) * len(iw)) if words and iw else 0.0 for iw in iu_words])
        return out

    def _support(self, sims: list[list[float]]) -> list[list[int]]:
        """For each sentence, the IU indices it supports (threshold, and within margin of its best)."""
        out = []
        for row in sims:
            best = max(row) if row else 0.0
            out.append([j for j, x in enumerate(row) if x >= self.threshold and x >= best - self.margin])
        return out

    def extract(self, requests: Sequence[ExtractRequest]) -> list[Extraction]:
        if self.similarity == "embedding":
            # One encoder call for the whole batch: per-call overhead dominates short texts.
            texts: list[str] = []
            for r in requests:
                texts += [self.iu_text(r.graph, iu) for iu in r.graph.ids]
                texts += sentences(r.tutor_message) + sentences(r.learner_message)
            try:
                self._encode(texts)
            except Exception as exc:  # the embedder cannot load: these conversations fail with the cause
                return [Extraction(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in requests]
        out = []
        for r in requests:
            try:
                out.append(Extraction(signals=self._one(r)))
            except Exception as exc:  # e.g. the embedder cannot load: the conversation fails with the cause
                out.append(Extraction(error=f"{type(exc).__name__}: {str(exc)[:200]}"))
        return out

    def _one(self, r: ExtractRequest) -> dict[str, IUSignal]:
        graph = r.graph
        ids = graph.ids
        texts = [self.iu_text(graph, iu) for iu in ids]
        tutor = sentences(r.tutor_message)
        learner = sentences(r.learner_message)
        tutor_support = self._support(self._similarities(tutor, texts))
        learner_support = self._support(self._similarities(learner, texts))
        by_iu: dict[int, list[str]] = {}
        for sent, js in zip(tutor, tutor_support, strict=True):
            for j in js:
                by_iu.setdefault(j, []).append(sent)
        previous = set(content_words(r.previous_tutor))
        attempts: dict[int, str] = {}
        for sent, js in zip(learner, learner_support, strict=True):
            if sent.rstrip().endswith("?") or not js:
                continue
            words = content_words(sent)
            restated = bool(words) and sum(w in previous for w in words) / len(words) >= self.articulation_overlap
            kind = "articulation" if restated else "reasoning"
            for j in js:
                if attempts.get(j) != "reasoning":  # new content in any sentence makes it reasoning
                    attempts[j] = kind
        signals: dict[str, IUSignal] = {}
        for j, iu in enumerate(ids):
            support = by_iu.get(j, [])
            if not support:
                quality = "not_mentioned"
            elif (len(support) >= 2 and sum(len(s.split()) for s in support) >= self.min_words
                  and any(has_cue(s) for s in support)):
                quality = "well_explained"
            else:
                quality = "shallow"
            signals[iu] = IUSignal(teaching_quality=quality, user_attempt_type=attempts.get(j, "none"))  # type: ignore[arg-type]
        return signals


# ----------------------------------------------------------------------------------------------- LLM


def parse_signals(graph: ValidatedGraph, text: str) -> dict[str, IUSignal]:
    """The signals of an extractor's JSON answer, checked IU by IU; raises ValueError saying what is wrong.

    The answer is ``{"ius": [{"id", "teaching_quality", "user_attempt_type"}, ...]}`` with every IU of
    the graph exactly once.
    """
    data, flag = find_json_object(text)
    if flag == "not JSON":
        raise ValueError(flag)
    entries = data.get("ius") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no 'ius' list")
    out: dict[str, IUSignal] = {}
    for k, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"ius[{k}]: not an object")
        iu, tq, at = e.get("id"), e.get("teaching_quality"), e.get("user_attempt_type")
        if iu not in graph.index:
            raise ValueError(f"ius[{k}].id: unknown IU {iu!r}")
        if iu in out:
            raise ValueError(f"ius[{k}].id: IU {iu} twice")
        if tq not in TEACHING_QUALITIES:
            raise ValueError(f"ius[{k}].teaching_quality: {tq!r} is not one of {', '.join(TEACHING_QUALITIES)}")
        if at not in ATTEMPT_TYPES:
            raise ValueError(f"ius[{k}].user_attempt_type: {at!r} is not one of {', '.join(ATTEMPT_TYPES)}")
        out[iu] = IUSignal(teaching_quality=tq, user_attempt_type=at)
    missing = [iu for iu in graph.ids if iu not in out]
    if missing:
        raise ValueError(f"no label for IU {', '.join(missing[:5])}")
    return {iu: out[iu] for iu in graph.ids}


def extraction_schema(graph: ValidatedGraph) -> dict[str, Any]:
    """The JSON an extraction must be for ``graph``: one entry per IU (a local model's decoding is held
    to it; :func:`parse_signals` still checks that each IU appears once)."""
    n = len(graph.ids)
    entry = {"type": "object",
             "properties": {"id": {"type": "string", "enum": list(graph.ids)},
                            "teaching_quality": {"type": "string", "enum": list(TEACHING_QUALITIES)},
                            "user_attempt_type": {"type": "string", "enum": list(ATTEMPT_TYPES)}},
             "required": ["id", "teaching_quality", "user_attempt_type"], "additionalProperties": False}
    return {"type": "object", "properties": {"ius": {"type": "array", "items": entry, "minItems": n, "maxItems": n}},
            "required": ["ius"], "additionalProperties": False}


class LLMExtractor(Extractor):
    """KnowSim's signal extraction through a chat model, with simhub's own prompt (``simhub.prompts.learners``)."""

    def __init__(self, chat: ChatModel, *, name: str = "llm", temperature: float = 0.0, max_tokens: int = 2000):
        self.chat, self.temperature, self.max_tokens = chat, temperature, max_tokens
        self.id = name

    def describe(self) -> dict[str, Any]:
        from simhub.prompts.learners import PROMPT_VERSION

        return {"id": self.id, "kind": "llm", "model": self.chat.describe(), "prompt": PROMPT_VERSION,
                "temperature": self.temperature}

    def extract(self, requests: Sequence[ExtractRequest]) -> list[Extraction]:
        from simhub.prompts.learners import extractor_messages

        prompts = [extractor_messages(r.question, [(n.id, n.concept, n.description) for n in r.graph.graph.nodes],
                                      r.state.states, r.history, r.learner_message, r.tutor_message)
                   for r in requests]
        answers = self.chat.chat(prompts, json_mode=True, temperature=self.temperature, max_tokens=self.max_tokens,
                                 seeds=[0] * len(prompts), schemas=[extraction_schema(r.graph) for r in requests])
        out = []
        for r, a in zip(requests, answers, strict=True):
            if not a.ok:
                out.append(Extraction(error=f"extractor: {a.error}"))
                continue
            try:
                out.append(Extraction(signals=parse_signals(r.graph, a.text)))
            except ValueError as exc:
                out.append(Extraction(signals=silent(r.graph), flagged=str(exc), raw=a.text[:2000]))
        return out
