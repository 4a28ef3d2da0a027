"""The ``sim-student`` family's bench: any simhub simulator in front of a tutor, probed before and after.

An episode is one tutor and one item (a multiple-choice question of the item bank, with its IU graph
when one is shipped for it). It runs in three parts, each a batched call per model:

1. **pre-probe**: before the conversation the simulator answers the item's probes (the question
   itself, then up to ``probes - 1`` other items of the bank with the same KC), each asked as a tutor
   turn that opens an otherwise empty dialogue. It depends on the student and the item only, so
   every tutor's episode on an item shares it (answered once, then from the cache);
2. **the conversation**: the student opens (its own first turn on the problem), then ``turns``
   rounds of a tutor turn and a student turn. The student sees the question and its options, never
   the key or the solution; the tutor sees those too (and a scripted or designed tutor the IU graph);
3. **post-probe**: after the conversation the same probes, each asked as one more tutor turn.

Every probe is graded exactly (:func:`simhub.learners.kt.items.grade`: the first standalone option
letter of the answer must be the key). The outcome is the post accuracy minus the pre accuracy, per
conversation. The simulator speaks with its own prompt (:meth:`~simhub.simulation.Simulator.simulate`
on a :class:`~simhub.simulation.Target`); its answers and the tutor's turns are cached by content, so
a killed run resumes and an identical rerun calls nothing.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from simhub.cache import ContentCache, cached_answers, fingerprint
from simhub.errors import DataError
from simhub.learners.kt.items import ItemBank, KTItem, grade, read_items, sample_item_bank
from simhub.models import Sampling
from simhub.schema import Dialogue, Question, Turn, atomic_write_bytes
from simhub.simulation import Simulator, Target
from simhub.simulation.tutor import Tutor, TutorTurn
from simhub.tutoring.runner import Episode, EpisodeBench, Runner, safe_name
from simhub.tutoring.tutors import BenchRequest

__all__ = ["PROBE_TRACE_KIND", "ProbeBench", "ProbeGrade", "ProbeItem", "ProbeTrace", "load_probe_items",
           "probe_dialogues", "read_probe_trace"]

PROBE_TRACE_KIND = "simhub-probe-trace"
PROBE_TRACE_VERSION = 1
RULE_MODULES = ("simhub.tutoring.probe.bench", "simhub.learners.kt.items", "simhub.tutoring.designed")
#: New tokens of a profile tutor's turn at most.
TUTOR_TOKENS = 200
PRE, POST = "Before we start, try this one on your own.", "Now try this one on your own."
ASK = "Answer with the letter of the option you choose."


@dataclasses.dataclass(frozen=True)
class ProbeItem:
    """A conversation's question (a bank item), its IU graph when shipped, and its probes (itself first)."""

    item: KTItem
    graph: Any
    probes: tuple[KTItem, ...]

    @property
    def id(self) -> str:
        return self.item.id


def load_probe_items(spec: str, *, n: int | None = None, probes: int = 3) -> list[ProbeItem]:
    """The bank's items (``sample``: the sample corpus's questions, or a JSON Lines item file) in its
    order, the first ``n``; each probed by itself and up to ``probes - 1`` items of its KC."""
    from simhub.learners.graph import shipped_graphs, validate_graph

    if probes < 1:
        raise DataError(f"--probes: {probes} must be at least 1", field="probes")
    if n is not None and n < 1:
        raise DataError(f"--questions: {n} must be at least 1", field="questions")
    bank: ItemBank = sample_item_bank() if spec == "sample" else read_items(spec)
    graphs = shipped_graphs()
    out = []
    for item in bank.items.values():
        graph = validate_graph(graphs[item.id], name=item.id) if item.id in graphs else None
        same = [o for o in bank.by_kc.get(item.kc, []) if o.id != item.id][:probes - 1]
        out.append(ProbeItem(item, graph, (item, *same)))
    if not out:
        raise DataError(f"{spec}: no items", field="probe_items")
    return out[:n] if n else out


class ProbeGrade(msgspec.Struct, kw_only=True, frozen=True):
    """One probe answered: the probe item, the student's answer, whether it chose the key."""

    item: str
    answer: str
    correct: bool


class ProbeTrace(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One conversation with its probes (``traces/TUTOR__ITEM.json``)."""

    schema_version: int = PROBE_TRACE_VERSION
    kind: str = PROBE_TRACE_KIND
    tutor: str
    item: str
    kc: str
    turns: list[Turn] = msgspec.field(default_factory=list)
    pre: list[ProbeGrade] = msgspec.field(default_factory=list)
    post: list[ProbeGrade] = msgspec.field(default_factory=list)
    #: Why the conversation failed (a student or tutor call), or None: it counts as failed everywhere.
    failed: str | None = None

    def _accuracy(self, grades: list[ProbeGrade]) -> float | None:
        return sum(g.correct for g in grades) / len(grades) if grades and not self.failed else None

    @property
    def pre_accuracy(self) -> float | None:
        return self._accuracy(self.pre)

    @property
    def post_accuracy(self) -> float | None:
        return self._accuracy(self.post)

    @property
    def gain(self) -> float | None:
        pre, post = self.pre_accuracy, self.post_accuracy
        return None if pre is None or post is None else post - pre


def read_probe_trace(path: str | os.PathLike[str]) -> ProbeTrace:
    """A trace file; a DataError naming it (and the field) when it is not one, or of another version."""
    from simhub.runformat import read_document

    return read_document(path, ProbeTrace, PROBE_TRACE_KIND, (PROBE_TRACE_VERSION,), "trace ",
                         "not a sim-student trace")


def _student_question(item: KTItem) -> Question:
    """What the student sees: the question and its options, never the key or the solution."""
    return Question(text=item.source_text or item.text())


def _tutor_question(item: KTItem) -> Question:
    return Question(text=item.source_text or item.text(), correct_option=item.answer, solution=item.explanation)


def _probe_turn(probe: KTItem, when: str) -> Turn:
    return Turn(role="tutor", content=f"{PRE if when == 'pre' else POST}\n{probe.text()}\n{ASK}")


@dataclasses.dataclass
class _ProbeConv:
    """An episode in progress: its unit and the trace it fills."""

    episode: Episode
    unit: ProbeItem
    trace: ProbeTrace


class ProbeBench(EpisodeBench[ProbeTrace]):
    """One ``sim-student`` run: the student (any simulator), the tutors, the items and the options."""

    family = "sim-student"
    rule_modules = RULE_MODULES
    trace_type = ProbeTrace

    def __init__(self, tutors: Sequence[Tutor], student: Simulator, items: Sequence[ProbeItem], *, turns: int = 4,
                 seed: int = 0, batch: int = 16, output: str | os.PathLike[str], info: dict[str, Any] | None = None,
                 cache_dir: str | None = None, no_cache: bool = False):
        from simhub.config import cache_root

        if turns < 1:
            raise DataError(f"--turns: {turns} must be at least 1", field="turns")
        self.tutors, self.student, self.items = list(tutors), student, list(items)
        self.turns, self.seed, self.batch = turns, seed, batch
        self.output, self.info = Path(output), dict(info or {})
        self.cache = None if no_cache else ContentCache(cache_root(cache_dir), "tutor-bench")
        self.calls: dict[str, int] = {"student": 0, "tutor": 0}
        self.cache_hits = 0

    def settings(self) -> dict[str, Any]:
        return {"student": {"id": self.student.id, "fingerprint": self.student.fingerprint()}, "turns": self.turns,
                "seed": self.seed, "probes": {i.id: [p.id for p in i.probes] for i in self.items}}

    def run(self, *, progress: bool = False, executor: Any = None,
            on_trace: Callable[[ProbeTrace], None] | None = None) -> list[ProbeTrace]:
        self.runner = Runner(self, batch=self.batch, on_trace=on_trace, progress=progress, unit="conversations",
                             executor=executor)
        return self.runner.run()

    # the runner's interface
    def episodes(self) -> list[Episode]:
        return [Episode(t, i, f"{safe_name(t.id)}__{safe_name(i.id)}-{fingerprint([t.id, i.id])[:8]}.json",
                        [i.id, i.item.source_text or i.item.text(), [p.id for p in i.probes], i.item.answer])
                for t in self.tutors for i in self.items]

    def read_trace(self, path: Path) -> ProbeTrace:
        return read_probe_trace(path)

    def write_trace(self, path: Path, trace: ProbeTrace) -> None:
        atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(trace), indent=2))

    def finished(self, trace: ProbeTrace) -> bool:
        return True

    def cacheable(self, trace: ProbeTrace) -> bool:
        return trace.failed is None

    def failures(self, trace: ProbeTrace) -> list[str]:
        return [f"{trace.tutor} on {trace.item}: {trace.failed}"] if trace.failed else []

    def run_batch(self, batch: list[tuple[Episode, ProbeTrace | None]],
                  save: Callable[[Episode, ProbeTrace], None]) -> list[ProbeTrace]:
        convs = [_ProbeConv(ep, ep.unit, ProbeTrace(tutor=ep.tutor.id, item=ep.unit.id, kc=ep.unit.item.kc))
                 for ep, _ in batch]
        self._probe(convs, "pre")
        self._student([c for c in convs if c.trace.failed is None])  # the opening
        for turn in range(1, self.turns + 1):
            for tutor in self.tutors:
                mine = [c for c in convs if c.episode.tutor is tutor and c.trace.failed is None]
                if mine:
                    self._tutor(tutor, mine, turn)
            self._student([c for c in convs if c.trace.failed is None])
        self._probe([c for c in convs if c.trace.failed is None], "post")
        return [c.trace for c in convs]

    # the steps
    def _ask(self, dialogues: list[Dialogue]) -> list[tuple[str | None, str | None]]:
        """The student's next turn after each dialogue: (text, error), asked once per distinct prompt."""
        keys = [fingerprint(["probe-student", self.student.fingerprint(), d.question.text,
                             [(t.role, t.content) for t in d.turns]]) for d in dialogues]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        distinct = list(first.values())

        def compute(todo: list[int]) -> list[Any]:
            results = self.student.simulate([Target(dialogues[distinct[i]], len(dialogues[distinct[i]].turns))
                                             for i in todo])
            return [{"text": r.candidates[0].text.strip()} if r.candidates and r.error is None
                    else {"error": r.error or "no candidate"} for r in results]

        answers, hits, asked = cached_answers(self.cache, [keys[i] for i in distinct], compute,
                                              ok=lambda a: "error" not in a, encode=lambda a: a, decode=lambda a: a)
        self.cache_hits += hits
        self.calls["student"] += asked
        by_key = {keys[i]: a for i, a in zip(distinct, answers, strict=True)}
        return [(by_key[k].get("text"), by_key[k].get("error")) for k in keys]

    def _dialogue(self, c: _ProbeConv, turns: list[Turn]) -> Dialogue:
        return Dialogue(id=f"probe-{c.unit.id}", question=_student_question(c.unit.item), kcs=[c.unit.item.kc],
                        turns=turns)

    def _probe(self, convs: list[_ProbeConv], when: str) -> None:
        asks = [(c, p, self._dialogue(c, [*(c.trace.turns if when == "post" else []), _probe_turn(p, when)]))
                for c in convs for p in c.unit.probes]
        for (c, p, _), (text, error) in zip(asks, self._ask([d for _, _, d in asks]), strict=True):
            if error is not None:
                c.trace.failed = c.trace.failed or f"student ({when}-probe): {error}"
                continue
            getattr(c.trace, when).append(ProbeGrade(item=p.id, answer=text or "", correct=grade(p, text)))

    def _student(self, convs: list[_ProbeConv]) -> None:
        for c, (text, error) in zip(convs, self._ask([self._dialogue(c, c.trace.turns) for c in convs]), strict=True):
            if error is not None:
                c.trace.failed = f"student: {error}"
            else:
                c.trace.turns.append(Turn(role="student", content=text or ""))

    def _tutor(self, tutor: Tutor, convs: list[_ProbeConv], turn: int) -> None:
        sampling = Sampling(temperature=0.0, max_tokens=TUTOR_TOKENS, seed=self.seed * 1000 + turn)
        requests = [BenchRequest(Dialogue(id=f"probe-{c.unit.id}", question=_tutor_question(c.unit.item),
                                          kcs=[c.unit.item.kc], turns=list(c.trace.turns)), graph=c.unit.graph)
                    for c in convs]
        me = tutor.describe()
        keys = [fingerprint(["probe-tutor", me, r.dialogue.question.text, [(t.role, t.content) for t in r.dialogue.turns],
                             c.unit.id, dataclasses.asdict(sampling)]) for c, r in zip(convs, requests, strict=True)]

        def compute(todo: list[int]) -> list[TutorTurn]:
            try:
                return tutor.respond([requests[i] for i in todo], sampling)
            except Exception as exc:  # a tutor that raises fails these conversations; the run goes on
                return [TutorTurn(error=f"{type(exc).__name__}: {str(exc)[:200]}") for _ in todo]

        answers, hits, asked = cached_answers(self.cache, keys, compute, ok=lambda a: a.error is None,
                                              encode=dataclasses.asdict, decode=lambda d: TutorTurn(**d))
        self.cache_hits += hits
        self.calls["tutor"] += asked
        for c, a in zip(convs, answers, strict=True):
            if a.error is not None:
                c.trace.failed = f"tutor: {a.error}"
            else:
                c.trace.turns.append(Turn(role="tutor", content=a.text.strip()))


def probe_dialogues(traces: Sequence[ProbeTrace], items: Sequence[ProbeItem]) -> list[Dialogue]:
    """The finished conversations as dialogues (the student's side of the bench, for realism checks)."""
    by_id = {i.id: i for i in items}
    return [Dialogue(id=f"{t.tutor}__{t.item}", question=_tutor_question(by_id[t.item].item), kcs=[t.kc],
                     turns=list(t.turns), meta={"tutor": t.tutor, "item": t.item})
            for t in traces if t.failed is None and t.item in by_id]
