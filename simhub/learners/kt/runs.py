"""A KT-learner run as a record: its plan, its trace, and how one is built.

The bench (``simhub tutor-bench --learner kt-learner``) and the HTTP service (``/lms``) build runs
the same way (:func:`plan_runs`, :func:`learner_parts`, :func:`new_trace`), drive them on the same
clock (:meth:`simhub.learners.kt.lms.LMSRun.advance`) and write the same trace
(:class:`KTRunTrace`, versioned, written atomically). Nothing here knows a bench.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from simhub.errors import DataError
from simhub.learners.kt.base import KTModel
from simhub.learners.kt.items import ItemBank
from simhub.learners.kt.lms import DayRecord, HelpRecord, LMSRun, RunPlan
from simhub.learners.kt.scenarios import Scenario
from simhub.learners.kt.student import PersonaSeed
from simhub.runformat import read_document
from simhub.schema import atomic_write_bytes

__all__ = ["KT_TRACE_READS", "KT_TRACE_VERSION", "RUN_FILE", "TRACES", "KTRunTrace", "is_kt_trace_file",
           "learner_parts", "new_trace", "plan_runs", "read_kt_trace", "run_id", "sample_log", "write_kt_trace"]

KT_TRACE_VERSION = 1
KT_TRACE_READS = (1,)
TRACES = "traces"
RUN_FILE = "run.json"


class KTRunTrace(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One tutor's run with one learner: the plan, the learner's start, and every day so far."""

    schema_version: int = KT_TRACE_VERSION
    kind: str = "kt-learner-run"
    id: str
    tutor: str
    plan: RunPlan
    unit: list[str]
    initial_mastery: dict[str, float]
    #: The persona seed's own warm-up accuracy (the real student's share of correct answers).
    persona_accuracy: float
    days: list[DayRecord] = msgspec.field(default_factory=list)
    help: list[HelpRecord] = msgspec.field(default_factory=list)
    models: dict[str, Any] = msgspec.field(default_factory=dict)
    complete: bool = False
    #: The judge panel's votes: ``{day: {judge: {helpfulness, gagne, rosenshine, handover} or {flagged}}}``.
    judgments: dict[str, dict[str, dict[str, Any]]] = msgspec.field(default_factory=dict)

    @property
    def failed_days(self) -> int:
        return sum(d.failed is not None for d in self.days)


def read_kt_trace(path: str | os.PathLike[str]) -> KTRunTrace:
    """A KT-learner run's trace (a DataError naming the file when it is not one, or broken)."""
    return read_document(path, KTRunTrace, "kt-learner-run", KT_TRACE_READS, "KT-learner trace ",
                         "not a KT-learner trace (kind 'kt-learner-run' expected)")


def write_kt_trace(path: Path, trace: KTRunTrace) -> None:
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(trace), indent=1))


def is_kt_trace_file(path: Path) -> bool:
    try:
        head = path.read_bytes()[:200]
    except OSError:
        return False
    return b'"kind":"kt-learner-run"' in head.replace(b" ", b"")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "x"


def plan_runs(scenarios: Sequence[Scenario], abilities: Sequence[str], repeats: int, seed: int,
              seeds: Mapping[str, PersonaSeed]) -> list[RunPlan]:
    """One plan per (scenario, ability, repeat), ``seeds`` giving each run's persona seed by run id."""
    plans = []
    for sc in scenarios:
        for ability in abilities:
            for r in range(repeats):
                run = run_id(sc, ability, r)
                p, s = sc.personality, sc.schedule
                plans.append(RunPlan(run=run, scenario=sc.id, personality=p.id, personality_text=p.description,
                                     help_trigger=p.help_trigger, help_rate=p.help_rate, engagement=p.engagement,
                                     replies=p.replies, adversarial=p.adversarial,
                                     session_days=tuple(sc.session_days()), days=sc.days, turns=s.turns,
                                     probe_items=s.probe_items, ability=ability, persona=seeds[run].student,
                                     seed=seed))
    return plans


def run_id(scenario: Scenario, ability: str, repeat: int) -> str:
    return f"{scenario.id}__{ability}__r{repeat}"


def new_trace(tutor: str, tutor_description: Mapping[str, Any], run: LMSRun, *, role_player: Mapping[str, Any],
              kt_model: str) -> KTRunTrace:
    """The trace of ``run`` before its first day: the plan, the unit, the learner's start."""
    warmup = run.persona.warmup
    return KTRunTrace(id=f"{tutor}|{run.plan.run}", tutor=tutor, plan=run.plan, unit=list(run.unit),
                      initial_mastery=run.masteries(),
                      persona_accuracy=round(sum(c for _, _, c in warmup) / len(warmup), 6),
                      models={"tutor": dict(tutor_description), "role_player": dict(role_player), "kt_model": kt_model})


def sample_log(split: str = "train"):
    """The sample corpus's graded answers (one split)."""
    from simhub.data.sample import load_sample_corpus
    from simhub.learners.kt.logs import responses_from_dialogues

    return responses_from_dialogues(load_sample_corpus()[split])


def learner_parts(kt_model: str = "sample", responses: str = "sample", items: str = "sample"
                  ) -> tuple[KTModel, str, Any, ItemBank]:
    """The KT model (``sample``: BKT, one pooled EM fit on the sample corpus's train split, seed 0; or
    a saved model file), its id, the persona log (``sample`` or a response CSV) and the item bank
    (``sample``: the sample corpus's questions; or an item JSONL file)."""
    from simhub.learners.kt.bkt_fit import FitSettings, fit_bkt
    from simhub.learners.kt.items import read_items, sample_item_bank
    from simhub.learners.kt.logs import read_responses
    from simhub.learners.kt.registry import load_kt_model

    train = sample_log("train") if "sample" in (kt_model, responses) else None
    if kt_model == "sample":
        model: KTModel = fit_bkt(train, FitSettings(method="em", seed=0), pooled=True)
    else:
        model = load_kt_model(kt_model)
    log = train if responses == "sample" else read_responses(responses)
    bank = sample_item_bank() if items == "sample" else read_items(items)
    known = set(model.kcs)
    if not any(kc in known for kc in bank.kcs):
        raise DataError(f"--kt-items: none of the {len(bank.kcs)} KCs of the item bank is a KC of the KT model "
                        f"(--kt-model; e.g. {bank.kcs[0]!r})", field="kt_items")
    return model, (kt_model if kt_model != "sample" else "bkt:sample-pooled-em"), log, bank
