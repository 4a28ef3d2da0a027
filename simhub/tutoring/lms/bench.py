"""``simhub tutor-bench --learner kt-learner``: tutors over many days with a KT-grounded learner.

One *run* is one (scenario, ability, repeat): a persona seed (a real student's history replayed
through the KT model) followed over the scenario's days. Every tutor gets every run, with the same
persona seed and the same per-day random draws, so the tutors' runs are paired. Per session day:
pre-session probe, the tutor's turns through the LMS actions, post-session probe
(:mod:`simhub.learners.kt.lms`). Days without a study block in the schedule have no session.

The kit's runner (:mod:`simhub.tutoring.runner`) drives the runs, a batch of them in lockstep a day
at a time. The run folder is the kit's: ``run.json`` (the settings every run must share), ``traces/``
(one :class:`KTRunTrace` per tutor and run, rewritten atomically after each day) and
``results.json``. A killed run resumes at the day it stopped: the finished days are read, the belief
is their answers replayed, and every draw of a day depends only on the day, so the result is that of
an uninterrupted run. A finished run's trace is also cached whole under the settings, the tutor,
the plan and a digest of the rules' source, so an identical run into another folder is a copy.
A day whose learner or tutor fails is recorded failed with the cause (its answers do not reach the
belief); the run goes on and the failures are counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from simhub.cache import ContentCache, fingerprint
from simhub.learners.kt.base import KTModel
from simhub.learners.kt.items import ItemBank
from simhub.learners.kt.lms import DayRecord, LMSRun, RunPlan, ToolError, check_failed
from simhub.learners.kt.runs import (
    KT_TRACE_READS,
    KT_TRACE_VERSION,
    KTRunTrace,
    _safe,
    is_kt_trace_file,
    learner_parts,
    new_trace,
    plan_runs,
    read_kt_trace,
    run_id,
    sample_log,
    write_kt_trace,
)
from simhub.learners.kt.student import ABILITIES, LearnerSettings, PersonaSeed, RolePlayer
from simhub.simulation.tutor import Tutor
from simhub.tutoring.estimates import parse_names
from simhub.tutoring.runner import RUN_FILE, TRACES, Episode, EpisodeBench, Runner

# The run record and its construction live with the learner (simhub.learners.kt.runs), shared with /lms;
# they are re-exported here for the bench's callers.
__all__ = ["KT_TRACE_READS", "KT_TRACE_VERSION", "RULE_MODULES", "RUN_FILE", "TRACES", "KTBench", "KTBenchOptions",
           "KTRunTrace", "is_kt_trace_file", "learner_parts", "new_trace", "plan_runs", "read_kt_trace", "run_id",
           "sample_log", "write_kt_trace"]


def check_abilities(text: str | Sequence[str]) -> list[str]:
    return parse_names(text, ABILITIES, kind="ability", field="abilities")


@dataclasses.dataclass
class KTBenchOptions:
    cache_dir: str | None = None
    no_cache: bool = False
    #: Runs advanced together, day by day (the kit runner's batch).
    batch: int = 16


#: The modules whose code decides a run from its draws: their source is part of a whole run's cache key.
RULE_MODULES = ("simhub.learners.kt.lms", "simhub.learners.kt.student", "simhub.learners.kt.items",
                "simhub.learners.kt.bkt", "simhub.learners.kt.scenarios", "simhub.prompts.kt_learner",
                "simhub.tutoring.lms.bench", "simhub.tutoring.lms.tutors", "simhub.tutoring.tutors",
                "simhub.tutoring.runner")


def model_digest(model: KTModel) -> str:
    """A hash of a KT model's parameters (its file's content where it has one)."""
    to_file = getattr(model, "to_file", None)
    return fingerprint(msgspec.to_builtins(to_file()) if to_file else [model.backend, list(model.kcs), repr(model)])


class KTBench(EpisodeBench[KTRunTrace]):
    """One KT-learner bench: tutors × run plans, into ``output``, through the kit's runner."""

    family = "kt-learner"
    rule_modules = RULE_MODULES
    trace_type = KTRunTrace

    def __init__(self, tutors: Sequence[Tutor], plans: Sequence[RunPlan], *, model: KTModel, model_id: str,
                 bank: ItemBank, seeds: Mapping[str, PersonaSeed], role_player: RolePlayer,
                 settings: LearnerSettings, output: str | os.PathLike[str], options: KTBenchOptions | None = None,
                 info: Mapping[str, Any] | None = None, judges: Sequence[Any] = ()):
        self.tutors, self.plans = list(tutors), list(plans)
        #: The judge panel (:class:`~simhub.tutoring.lms.judges.DayJudge`), run over every finished run.
        self.judges = list(judges)
        self.judge_calls = self.judge_hits = 0
        self.model, self.model_id, self.bank, self.seeds = model, model_id, bank, seeds
        self.role_player, self.learner_settings = role_player, settings
        self.output, self.options, self.info = Path(output), options or KTBenchOptions(), dict(info or {})
        from simhub.config import cache_root

        self.cache = None if self.options.no_cache else ContentCache(cache_root(self.options.cache_dir), "kt-bench")
        self.cache_hits = 0
        self.days_run = 0
        self.calls: dict[str, int] = {}
        self._on_day: Callable[[KTRunTrace, DayRecord], None] | None = None

    def settings(self) -> dict[str, Any]:
        return {"learner": "kt-learner", "kt_model": self.model_id, "kt_model_digest": model_digest(self.model),
                "role_player": self.role_player.describe(),
                "learner_settings": msgspec.to_builtins(self.learner_settings),
                "items": fingerprint(sorted(msgspec.to_builtins(list(self.bank.items.values())),
                                            key=lambda d: d["id"]))}

    def path(self, tutor: Tutor, plan: RunPlan) -> Path:
        return self.output / TRACES / self._name(tutor, plan)

    @staticmethod
    def _name(tutor: Tutor, plan: RunPlan) -> str:
        return f"{_safe(tutor.id)}__{_safe(plan.run)}.json"

    def run(self, on_day: Callable[[KTRunTrace, DayRecord], None] | None = None,
            on_run: Callable[[KTRunTrace], None] | None = None, *, progress: bool = False,
            executor: Any = None) -> list[KTRunTrace]:
        """Every (run plan, tutor) run through the kit's :class:`~simhub.tutoring.runner.Runner` (on
        ``executor``, :mod:`simhub.executors`; there ``on_day`` is not called and a run's trace is
        written when the run ends)."""
        self._on_day = on_day
        self.runner = Runner(self, batch=self.options.batch, on_trace=on_run, progress=progress, every=10,
                             unit="runs", executor=executor)
        return self.runner.run()

    # ---------------------------------------------------------------- the runner's episode interface

    def episodes(self) -> list[Episode]:
        return [Episode(tutor, plan, self._name(tutor, plan), msgspec.to_builtins(plan))
                for plan in self.plans for tutor in self.tutors]

    def read_trace(self, path: Path) -> KTRunTrace:
        return read_kt_trace(path)

    def write_trace(self, path: Path, trace: KTRunTrace) -> None:
        write_kt_trace(path, trace)

    def finished(self, trace: KTRunTrace) -> bool:
        return trace.complete

    def failures(self, trace: KTRunTrace) -> list[str]:
        return [d.failed for d in trace.days if d.failed]

    def run_batch(self, batch: list[tuple[Episode, KTRunTrace | None]],
                  save: Callable[[Episode, KTRunTrace], None]) -> list[KTRunTrace]:
        """The batch's runs in lockstep, a session day at a time; each run's trace is saved after each day
        (a killed run resumes at the day it stopped)."""
        runs, traces = [], []
        for ep, existing in batch:
            run = self.new_run(ep.unit)
            trace = existing or new_trace(ep.tutor.id, ep.tutor.describe(), run,
                                          role_player=self.role_player.describe(), kt_model=self.model_id)
            if existing is not None:
                run.restore(existing.days, existing.help)
            runs.append(run)
            traces.append(trace)
        horizon = max((len(ep.unit.session_days) for ep, _ in batch), default=0)
        for k in range(horizon):
            for (ep, _), run, trace in zip(batch, runs, traces, strict=True):
                days = ep.unit.session_days
                if k >= len(days) or days[k] in {d.day for d in trace.days}:
                    continue
                record = self._day(run, ep.tutor, days[k])
                self.days_run += 1
                trace.days, trace.help = list(run.days), [msgspec.structs.replace(h) for h in run.help]
                save(ep, trace)
                if self._on_day:
                    self._on_day(trace, record)
        for trace in traces:
            trace.complete = True
        return traces

    def finish(self, done: list[tuple[Episode, KTRunTrace]], save: Callable[[Episode, KTRunTrace], None]) -> None:
        """The panel's votes on every day not judged yet, written into the traces."""
        if not self.judges:
            return
        from simhub.tutoring.lms.judges import judge_runs

        traces = [t for _, t in done]
        before = [msgspec.json.encode(t.judgments) for t in traces]
        asked, hits = judge_runs(self.judges, traces, self.cache)
        self.judge_calls += asked
        self.judge_hits += hits
        for (ep, trace), old in zip(done, before, strict=True):
            if msgspec.json.encode(trace.judgments) != old:
                save(ep, trace)

    def new_run(self, plan: RunPlan) -> LMSRun:
        return LMSRun(plan, model=self.model, bank=self.bank, persona=self.seeds[plan.run],
                      role_player=self.role_player, settings=self.learner_settings)

    @staticmethod
    def _day(run: LMSRun, tutor: Tutor, day: int) -> DayRecord:
        """One session day on the run's own clock (:meth:`LMSRun.advance`), as ``/lms`` steps it."""
        # The days finished before a resume are a prefix of the session days, so the clock's next day is
        # this one; a mismatch is a bug here, not a failed day.
        if run.day_open or run.plan.session_days[len(run.days)] != day:
            raise RuntimeError(f"{run.plan.run}: the run's clock is not at day {day}")
        try:
            tick = run.advance()
            tutor.start_day(run, day)
            while not tick.day_ended:
                with contextlib.suppress(ToolError):  # a scripted tutor's bad call: logged by the run; the turn ends
                    tutor.act(run, day, tick.turn)
                tick = run.advance()
            return tick.record
        except Exception as exc:  # a learner, tutor or model call that failed: the day fails, the run goes on
            return run.fail_day(check_failed(exc))


# ------------------------------------------------------------------------- the learner's parts


def heldout_calibration(model: KTModel, log: Any) -> dict[str, Any] | None:
    """The KT model's own calibration on real answers it was not fitted on: every student of ``log``
    replayed from the model's initial belief, each answer predicted before it is seen."""
    from simhub.learners.kt.metrics import calibration

    pred, obs = [], []
    known = set(model.kcs)
    for rows in log.by_student().values():
        b = model.initial_belief()
        for r in rows:
            if r.kc not in known:
                continue
            pred.append(model.predict(b, r.kc, r.item))
            obs.append(float(r.correct))
            b = model.update(b, r.item, r.kc, r.correct)
    if not pred:
        return None
    c = calibration(pred, obs)
    return {"ece": c.ece, "brier": c.brier, "n": len(pred)}


def learner_dialogues(traces: Sequence[KTRunTrace], bank: ItemBank | None = None) -> list[Any]:
    """Each (run, day) chat with at least one learner message, as a :class:`~simhub.schema.Dialogue`
    (the tutor's messages as tutor turns), for ``simhub eval-dialogues``. The dialogue's question is
    that of the day's first probe item on the KC the learner asked about (else its first probe item),
    in the text of the item's source dialogues, so the chat is compared with real dialogues about it."""
    from simhub.schema import Dialogue, Question, Turn

    out = []
    for t in traces:
        for d in t.days:
            if d.failed or not any(m.role == "learner" for m in d.messages):
                continue
            turns = [Turn(role="student" if m.role == "learner" else "tutor", content=m.text) for m in d.messages]
            help_kc = next((h.kc for h in t.help if h.day == d.day), None)
            first = next((a for a in d.pre if a.kc == help_kc), d.pre[0] if d.pre else None)
            item = bank.items.get(first.item) if bank is not None and first is not None else None
            text = (item.source_text or item.text()) if item is not None else ", ".join(t.unit)
            out.append(Dialogue(id=f"{_safe(t.tutor)}~{t.plan.run}~d{d.day}", question=Question(text=text),
                                turns=turns, meta={"tutor": t.tutor, "run": t.plan.run, "day": d.day,
                                                   **({"question_id": item.id} if item is not None else {})}))
    return out
