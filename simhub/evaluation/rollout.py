"""Whole simulated dialogues: a simulated student and a tutor take turns from a real dialogue's opening.

``free`` mode is the reference's full-dialogue setting: sampling at temperature 0.6 with top-p 0.95
and no top-k on both sides, at most 40 turns, stopping at the end-of-dialogue marker from either
side. ``mirror`` mode keeps the pair
comparable like for like: the tutor reproduces the real tutor's moves (an endpoint tutor adapts
when the student deviates; a local one repeats the real turns) and the rollout stops after the real
dialogue's number of student turns.

All rollouts advance in lockstep, one turn at a time, so every step is one batched call per sample
and side. Each generated turn is cached under a hash of the model, its prompt and the decoding
settings (with a seed derived from the run seed, the sample and the step), so a killed run resumes
and an identical rerun calls nothing. A dialogue whose student or tutor fails is marked failed with
the cause; the run completes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from simhub.cache import ContentCache, fingerprint
from simhub.config import cache_root
from simhub.evaluation.runs import simulate
from simhub.executors import BatchFailure, Executor, runs_here
from simhub.models import Sampling
from simhub.progress import tqdm
from simhub.runformat import (
    ROLLOUT_SUMMARY_FILE,
    ROLLOUTS_FILE,
    RolloutFailure,
    RolloutSummary,
    write_rollout_dialogues,
    write_rollout_summary,
)
from simhub.schema import Dialogue, Turn
from simhub.simulation import Simulator, Target
from simhub.simulation.tutor import Tutor, TutorRequest, TutorTurn

ROLLOUTS = ROLLOUTS_FILE
SUMMARY = ROLLOUT_SUMMARY_FILE


@dataclasses.dataclass
class RolloutOptions:
    mode: str = "free"
    max_turns: int = 40
    temperature: float = 0.6
    #: The reference's full-dialogue sampling: nucleus 0.95 and no top-k, for both sides.
    top_p: float = 0.95
    top_k: int = 0
    max_tokens: int = 400
    samples: int = 1
    seed: int = 0
    #: Dialogues advanced in lockstep together (None: every one here; on another executor, an even
    #: share per actor). With the same batches, an executor's rollouts are the local ones.
    batch: int | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    progress: bool = True


@dataclasses.dataclass
class _State:
    real: Dialogue
    sample: int
    turns: list[Turn]
    done: bool = False
    end: str | None = None
    failed: str | None = None

    def dialogue(self) -> Dialogue:
        return msgspec.structs.replace(self.real, id=f"{self.real.id}~{self.sample}", turns=list(self.turns),
                                       failed_labels=[], meta={})

    def next_role(self) -> str:
        if not self.turns:
            return self.real.turns[0].role if self.real.turns else "tutor"
        return "tutor" if self.turns[-1].role == "student" else "student"

    def student_turns(self) -> int:
        return sum(1 for t in self.turns if t.role == "student")


def _step_seed(seed: int, sample: int, step: int, side: str) -> int:
    return int(fingerprint([seed, sample, step, side])[:8], 16)


class RolloutWork:
    """A worker's part of :func:`rollout` on another executor (:mod:`simhub.executors`): copies of the
    simulator and the tutor (their models loaded on the worker once) and the options; :meth:`run`
    rolls out one batch of dialogues."""

    def __init__(self, simulator: Simulator, tutor: Tutor, options: RolloutOptions):
        self.simulator, self.tutor = simulator, tutor
        self.options = dataclasses.replace(options, progress=False)

    def run(self, dialogues: list[Dialogue]) -> list[Dialogue]:
        return _rollout(self.simulator, self.tutor, dialogues, self.options)


def rollout(simulator: Simulator, tutor: Tutor, dialogues: Sequence[Dialogue], options: RolloutOptions | None = None,
            *, executor: Executor | None = None) -> list[Dialogue]:
    """``options.samples`` rollouts of each dialogue (see the module docstring), in the dialogues'
    order. ``options.batch`` dialogues advance in lockstep together (None: all of them here, an even
    share of the actors' elsewhere); on another ``executor`` each batch runs on a worker, which writes
    the per-turn cache, and a batch lost there fails its dialogues with the cause."""
    options = options or RolloutOptions()
    dialogues = list(dialogues)
    if runs_here(executor) and options.batch is None:
        return _rollout(simulator, tutor, dialogues, options)
    size = options.batch or max(1, -(-len(dialogues) // max(1, getattr(executor, "actors", 1))))
    batches = [dialogues[k:k + size] for k in range(0, len(dialogues), size)]
    out: list[list[Dialogue]] = [[] for _ in batches]
    bar = tqdm(total=len(dialogues), desc="rollout", unit="dialogue", disable=not options.progress, dynamic_ncols=True)
    if runs_here(executor):
        inner = dataclasses.replace(options, progress=False)
        finished = ((i, _rollout(simulator, tutor, batch, inner)) for i, batch in enumerate(batches))
    else:
        finished = executor.map(RolloutWork(simulator, tutor, options), "run", batches)  # type: ignore[union-attr]
    for i, outcome in finished:
        if isinstance(outcome, BatchFailure):
            lost = [_State(d, k, [], done=True, end="failed", failed=f"lost on the executor: {outcome.cause}")
                    for d in batches[i] for k in range(options.samples)]
            outcome = _finished(lost, simulator, tutor, options)
        out[i] = outcome
        bar.update(len(batches[i]))
    bar.close()
    return [d for batch in out for d in batch]


def _rollout(simulator: Simulator, tutor: Tutor, dialogues: Sequence[Dialogue], options: RolloutOptions) -> list[Dialogue]:
    """Every dialogue's rollouts, in lockstep."""
    mirror = options.mode == "mirror"
    cache = None if options.no_cache else ContentCache(cache_root(options.cache_dir), "rollouts")
    tutor_key = tutor.fingerprint() if tutor.cacheable else None
    states = [_State(d, k, []) for d in dialogues for k in range(options.samples)]
    for s in states:
        # The real opening: a tutor-first dialogue starts with the real tutor's first turn (the reference's choice).
        if s.real.turns and s.real.turns[0].role == "tutor":
            s.turns.append(Turn(role="tutor", content=s.real.turns[0].content))
    real_students = {d.id: len(d.student_turn_indices()) for d in dialogues}
    bar = tqdm(total=len(states), desc="rollout", unit="dialogue", disable=not options.progress, dynamic_ncols=True)
    finished = 0
    for step in range(options.max_turns):
        for s in states:
            if s.done:
                continue
            if len(s.turns) >= options.max_turns:
                s.done, s.end = True, "max_turns"
            elif mirror and s.student_turns() >= real_students[s.real.id] and s.next_role() == "tutor":
                s.done, s.end = True, "real_length"
        live = [s for s in states if not s.done]
        if not live:
            break
        for k in range(options.samples):
            students = [s for s in live if s.sample == k and s.next_role() == "student"]
            tutors = [s for s in live if s.sample == k and s.next_role() == "tutor"]
            if students:
                _student_step(simulator, students, options, step, k, cache)
            if tutors:
                _tutor_step(tutor, tutor_key, tutors, options, step, k, cache, mirror)
        now = sum(1 for s in states if s.done)
        bar.update(now - finished)
        finished = now
    for s in states:
        if not s.done:
            s.done, s.end = True, "max_turns"
    bar.close()
    return _finished(states, simulator, tutor, options)


def _finished(states: list[_State], simulator: Simulator, tutor: Tutor, options: RolloutOptions) -> list[Dialogue]:
    out = []
    for s in states:
        d = s.dialogue()
        meta: dict[str, Any] = {"real_id": s.real.id, "sample": s.sample, "seed": options.seed, "mode": options.mode,
                                "simulator": simulator.id, "tutor": tutor.id, "end": s.end}
        if s.failed:
            meta["failed"] = s.failed
        out.append(msgspec.structs.replace(d, meta=meta))
    return out


def _sampling(options: RolloutOptions, seed: int) -> Sampling:
    return Sampling(temperature=options.temperature, top_p=options.top_p, top_k=options.top_k,
                    max_tokens=options.max_tokens, seed=seed)


def _student_step(simulator: Simulator, states: list[_State], options: RolloutOptions, step: int, k: int,
                  cache: ContentCache | None) -> None:
    """The next student turn of each state: :func:`simhub.evaluation.runs.simulate` (cached the same way)."""
    sampling = _sampling(options, _step_seed(options.seed, k, step, "student"))
    targets = [Target(s.dialogue(), len(s.turns)) for s in states]
    for s, record in zip(states, simulate(simulator, targets, sampling=sampling, cache=cache, progress=False), strict=True):
        if record["candidate"] is None:
            s.done, s.failed, s.end = True, f"student: {record['error']}", "failed"
            continue
        s.turns.append(Turn(role="student", content=record["candidate"]))
        if record["end_of_dialogue"]:
            s.done, s.end = True, "marker"


def _tutor_step(tutor: Tutor, tutor_key: str | None, states: list[_State], options: RolloutOptions, step: int, k: int,
                cache: ContentCache | None, mirror: bool) -> None:
    sampling = _sampling(options, _step_seed(options.seed, k, step, "tutor"))
    requests = [TutorRequest(s.dialogue(), s.real if mirror else None) for s in states]
    keys = [fingerprint([tutor_key, [(t.role, t.content) for t in r.dialogue.turns], r.real.id if r.real else None,
                         dataclasses.asdict(sampling)]) if tutor_key and cache else None for r in requests]
    answers: list[TutorTurn | None] = []
    for key in keys:
        hit = cache.get(key) if key else None
        answers.append(TutorTurn(**hit) if hit else None)
    todo = [i for i, a in enumerate(answers) if a is None]
    if todo:
        for i, turn in zip(todo, tutor.respond([requests[i] for i in todo], sampling), strict=True):
            answers[i] = turn
            if keys[i] and turn.error is None:
                cache.put(keys[i], dataclasses.asdict(turn))
    for s, a in zip(states, answers, strict=True):
        if a.error is not None:
            s.done, s.failed, s.end = True, f"tutor: {a.error}", "failed"
            continue
        s.turns.append(Turn(role="tutor", content=a.text))
        if a.end_of_dialogue:
            s.done, s.end = True, "marker"


def write_rollouts(rollouts: Sequence[Dialogue], output: str | os.PathLike[str], info: dict[str, Any]) -> dict:
    """``rollouts.jsonl`` and a ``rollout.json`` summary (counts, ends, failures), written atomically
    through :mod:`simhub.runformat`'s structs; ``info`` is what was rolled out (the fields of
    :class:`~simhub.runformat.RolloutSummary` before the counts). Returns the summary as written."""
    out = Path(output)
    write_rollout_dialogues(out / ROLLOUTS, rollouts)
    ends: dict[str, int] = {}
    for d in rollouts:
        ends[d.meta.get("end", "?")] = ends.get(d.meta.get("end", "?"), 0) + 1
    failed = [d for d in rollouts if d.meta.get("failed")]
    summary = RolloutSummary(**info, rollouts=len(rollouts), ends=ends, failed=len(failed),
                             failures=[RolloutFailure(d.id, d.meta["failed"]) for d in failed[:50]],
                             mean_turns=sum(len(d.turns) for d in rollouts) / len(rollouts) if rollouts else 0.0)
    return write_rollout_summary(out / SUMMARY, summary)
