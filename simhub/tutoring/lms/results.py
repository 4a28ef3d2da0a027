"""The KT-learner bench's results: per-run measures, per-tutor estimates with CIs, comparisons and the gate.

Per run (one tutor, one learner, its session days; failed days left out):

* **ΔSolve**: the mean over days of post − pre probe accuracy (:func:`~simhub.learners.kt.metrics.delta_solve`);
* **responsiveness**, overall and same-day: the share of the learner's help requests a tutor message
  came after (any later day, or the same day). A run with no request is a *silent run*: None, left
  out of the means and counted;
* **action profile**: how many of each action kind (EduClaw-Bench's five) the run logged;
* **failure modes**: ``no_gain`` (ΔSolve ≤ 0) and ``neglect`` (help requests, none ever answered);
  EduClaw-Bench's ``no_curriculum`` and answer disclosure need its judge panel, which is not built.

Per tutor: each axis's mean with a 95% bootstrap interval over runs clustered by scenario; pass^k
over the repeats of each (scenario, ability) (success: ΔSolve > 0); the learner's calibration (ECE
and Brier of every probe answer against the belief's predicted P(correct)); the deployment gate.
Between tutors: paired ΔSolve differences on the shared runs (sign-flip permutation p, Holm), and the
stability of the ranking (Kendall τ) under horizon truncation and leave-one-scenario-out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.learners.kt.lms import ACTION_KINDS
from simhub.learners.kt.metrics import (
    HelpRequest,
    calibration,
    delta_solve,
    kendall_tau,
    pass_hat_k,
    responsiveness,
)
from simhub.runformat import read_document
from simhub.stats import holm, paired_compare
from simhub.tutoring.estimates import Estimate, cluster_estimate
from simhub.tutoring.family import BenchOutput
from simhub.tutoring.lms.bench import KTRunTrace
from simhub.tutoring.lms.judges import run_axes

__all__ = ["KT_RESULTS_KIND", "OUTPUTS", "GateSettings", "KTBenchResults", "RunMeasures", "format_kt_results", "read_kt_results",
           "run_measures", "summarize_kt"]

#: What the bench reports per tutor, declared once: the results, the console table and the report read
#: these. The ranking is on ΔSolve; the judged axes are there when a judge panel ran.
OUTPUTS = (
    BenchOutput("delta_solve", "ΔSolve", ranked=True, digits=2, scale=100.0, unit="pp",
                description="the mean over session days of post- minus pre-session probe accuracy"),
    BenchOutput("responsiveness", "responsiveness", digits=2,
                description="the share of the learner's help requests a tutor message came after"),
    BenchOutput("responsiveness_same_day", "same-day responsiveness", digits=2,
                description="the share of help requests answered on the day they were made"),
    BenchOutput("helpfulness", "helpfulness", digits=2, description="the judge panel's helpfulness, 1-10"),
    BenchOutput("gagne", "Gagné", digits=2, description="the judge panel's count of Gagné's events of instruction"),
    BenchOutput("rosenshine", "Rosenshine", digits=2,
                description="the judge panel's count of Rosenshine's principles followed"),
    BenchOutput("handover_rate", "hand-over rate", higher_is_better=False, digits=2,
                description="the share of days the tutor handed over the answer"),
)
#: The outputs by name.
OUTPUT = {o.name: o for o in OUTPUTS}
#: The judge panel's axes.
JUDGED = ("helpfulness", "gagne", "rosenshine", "handover_rate")

KT_RESULTS_VERSION = 1
KT_RESULTS_KIND = "kt-learner-results"
#: The versions :func:`read_kt_results` reads.
KT_RESULTS_READS = (1,)


class GateSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """EduClaw-Bench's pre-deployment gate (its Table 15), thresholds as settings: a hand-over rate
    above the baseline blocks, Helpfulness below ``warn_helpfulness`` warns, a ΔSolve within
    ±``monitor_band`` is noise to monitor. Without a judge panel only the ΔSolve rule can fire."""

    block_handover_above: float = 0.0
    warn_helpfulness: float = 5.5
    monitor_band: float = 0.01


class RunMeasures(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    run: str
    tutor: str
    scenario: str
    ability: str
    days: int
    failed_days: int
    delta_solve: float | None
    responsiveness: float | None
    responsiveness_same_day: float | None
    help_requests: int
    actions: dict[str, int]
    no_gain: bool | None
    neglect: bool | None
    first_pre_accuracy: float | None
    persona_accuracy: float
    per_day: list[tuple[int, float, float]]


def _ok_days(trace: KTRunTrace):
    return [d for d in trace.days if d.failed is None and d.pre and d.post]


def run_measures(trace: KTRunTrace, *, first_days: int | None = None) -> RunMeasures:
    """The measures of one run (``first_days``: of its first N calendar days only)."""
    days = [d for d in _ok_days(trace) if first_days is None or d.day <= first_days]
    pre = [d.pre_accuracy for d in days]
    post = [d.post_accuracy for d in days]
    ds = delta_solve(pre, post) if days else None  # type: ignore[arg-type]
    helps = [h for h in trace.help if first_days is None or h.day <= first_days]
    # an answer after the horizon is not one yet
    requests = [HelpRequest(day=h.day, answered_day=h.answered_day if first_days is None or h.answered_day is None
                            or h.answered_day <= first_days else None) for h in helps]
    resp = responsiveness(requests)
    same = responsiveness(requests, same_day=True)
    counts = {k: 0 for k in ACTION_KINDS}
    for d in trace.days:
        if d.failed is not None or (first_days is not None and d.day > first_days):
            continue
        for a in d.actions:
            if a.name in counts and a.error is None:
                counts[a.name] += 1
    return RunMeasures(run=trace.plan.run, tutor=trace.tutor, scenario=trace.plan.scenario, ability=trace.plan.ability,
                       days=len(days), failed_days=trace.failed_days, delta_solve=ds, responsiveness=resp,
                       responsiveness_same_day=same, help_requests=len(requests), actions=counts,
                       no_gain=None if ds is None else ds <= 0, neglect=None if resp is None else resp == 0.0,
                       first_pre_accuracy=days[0].pre_accuracy if days else None,
                       persona_accuracy=trace.persona_accuracy,
                       per_day=[(d.day, d.pre_accuracy or 0.0, d.post_accuracy or 0.0) for d in days])


class CalibrationResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ece: float | None
    brier: float | None
    n: int
    bins: list[dict[str, Any]]


class TutorKTResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    runs: int
    #: The judge panel's axes (None when no judge ran): helpfulness, gagne, rosenshine, handover_rate.
    judged: dict[str, Estimate] | None = None
    silent_runs: int
    failed_days: int
    delta_solve: Estimate
    responsiveness: Estimate
    responsiveness_same_day: Estimate
    actions_per_run: dict[str, float]
    failure_modes: dict[str, float | None]
    pass_hat_k: dict[str, float | None]
    calibration: CalibrationResult
    gate: str
    gate_reasons: list[str]
    #: Per day of the calendar: mean pre and post probe accuracy and mean unit mastery over runs.
    by_day: list[dict[str, float]]


class KTComparison(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    a: str
    b: str
    metric: str
    diff: float | None
    ci95: tuple[float, float] | None
    p: float | None
    p_holm: float | None
    n: int


class KTBenchResults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    schema_version: int = KT_RESULTS_VERSION
    kind: str = KT_RESULTS_KIND
    runs: int
    tutors: dict[str, TutorKTResult]
    ranking: list[str]
    comparisons: list[KTComparison]
    stability: dict[str, Any]
    learner: dict[str, Any]
    settings: dict[str, Any]
    failures: list[dict[str, Any]]


def _estimate(values: Sequence[float | None], clusters: Sequence[str], n_resamples: int, seed: int) -> Estimate:
    """The tutor bench's cluster-bootstrap estimate over the non-null values."""
    pairs = [(float(v), c) for v, c in zip(values, clusters, strict=True) if v is not None]
    return cluster_estimate([v for v, _ in pairs], [c for _, c in pairs], n_resamples, seed)


def _calibration(traces: Sequence[KTRunTrace]) -> CalibrationResult:
    pred, obs = [], []
    for t in traces:
        for d in _ok_days(t):
            for a in (*d.pre, *d.post):
                pred.append(a.predicted)
                obs.append(float(a.correct))
    if not pred:
        return CalibrationResult(ece=None, brier=None, n=0, bins=[])
    c = calibration(pred, obs)
    return CalibrationResult(ece=c.ece, brier=c.brier, n=len(pred),
                             bins=[{"low": b.low, "high": b.high, "n": b.n, "confidence": b.confidence,
                                    "accuracy": b.accuracy} for b in c.bins])


def _by_day(traces: Sequence[KTRunTrace]) -> list[dict[str, float]]:
    acc: dict[int, list[tuple[float, float, float]]] = {}
    for t in traces:
        for d in _ok_days(t):
            m = float(np.mean(list(d.mastery.values()))) if d.mastery else 0.0
            acc.setdefault(d.day, []).append((d.pre_accuracy or 0.0, d.post_accuracy or 0.0, m))
    return [{"day": day, "pre": float(np.mean([x[0] for x in v])), "post": float(np.mean([x[1] for x in v])),
             "mastery": float(np.mean([x[2] for x in v])), "runs": len(v)} for day, v in sorted(acc.items())]


def _judged(traces: Sequence[KTRunTrace], clusters: list[str], n_resamples: int, seed: int
            ) -> dict[str, Estimate] | None:
    if not any(t.judgments for t in traces):
        return None
    axes = [run_axes(t) for t in traces]
    return {name: _estimate([a[name] for a in axes], clusters, n_resamples, seed)
            for name in JUDGED}


def _gate(ds: float | None, gate: GateSettings, judged: dict[str, Estimate] | None = None) -> tuple[str, list[str]]:
    """The strictest rule that fires: block (hand-over above the baseline), warn (low helpfulness),
    monitor (ΔSolve within the noise band), else pass."""
    handover = judged["handover_rate"].mean if judged else None
    helpful = judged["helpfulness"].mean if judged else None
    if handover is not None and handover > gate.block_handover_above:
        return "block", [f"hand-over rate {handover:.3f} is above {gate.block_handover_above}"]
    if helpful is not None and helpful < gate.warn_helpfulness:
        return "warn", [f"helpfulness {helpful:.2f} is below {gate.warn_helpfulness}"]
    if ds is not None and abs(ds) <= gate.monitor_band:
        return "monitor", [f"ΔSolve {ds * 100:+.2f} pp is within ±{gate.monitor_band * 100:.1f} pp (noise)"]
    return "pass", []


def _ranking(means: dict[str, float | None]) -> list[str]:
    return sorted((t for t in means if means[t] is not None), key=lambda t: -(means[t] or 0.0))


def summarize_kt(traces: Sequence[KTRunTrace], *, settings: dict[str, Any] | None = None,
                 tutor_order: Sequence[str] | None = None, n_resamples: int = 2000, seed: int = 0,
                 gate: GateSettings | None = None) -> KTBenchResults:
    gate = gate or GateSettings()
    tutors = list(dict.fromkeys([*(tutor_order or []), *(t.tutor for t in traces)]))
    # one order whatever the caller's (the bootstrap numbers its clusters by first appearance)
    traces = sorted(traces, key=lambda t: (t.plan.run, tutors.index(t.tutor)))
    measures = {t.id: run_measures(t) for t in traces}
    out: dict[str, TutorKTResult] = {}
    means: dict[str, float | None] = {}
    for tutor in tutors:
        mine = [t for t in traces if t.tutor == tutor]
        ms = [measures[t.id] for t in mine]
        clusters = [m.scenario for m in ms]
        if len(set(clusters)) < 2:  # one scenario: each run is its own cluster
            clusters = [m.run for m in ms]
        ds = _estimate([m.delta_solve for m in ms], clusters, n_resamples, seed)
        means[tutor] = ds.mean
        groups: dict[tuple[str, str], list[bool]] = {}
        for m in ms:
            if m.delta_solve is not None:
                groups.setdefault((m.scenario, m.ability), []).append(m.delta_solve > 0)
        kmax = min((len(v) for v in groups.values()), default=0)
        passk = {f"pass^{k}": pass_hat_k(list(groups.values()), k) for k in range(1, kmax + 1)}
        modes = {name: (float(np.mean(vals)) if vals else None) for name, vals in
                 (("no_gain", [m.no_gain for m in ms if m.no_gain is not None]),
                  ("neglect", [m.neglect for m in ms if m.neglect is not None]))}
        judged = _judged(mine, clusters, n_resamples, seed)
        if judged is not None:
            axes = [run_axes(t) for t in mine]
            for name, test in (("no_curriculum", lambda a: a["gagne"] < 1.5),
                               ("disclosure", lambda a: a["handover_rate"] > 0)):
                key = "gagne" if name == "no_curriculum" else "handover_rate"
                vals = [test(a) for a in axes if a[key] is not None]
                modes[name] = float(np.mean(vals)) if vals else None
        g, reasons = _gate(ds.mean, gate, judged)
        out[tutor] = TutorKTResult(
            runs=len(ms), silent_runs=sum(m.responsiveness is None for m in ms),
            failed_days=sum(m.failed_days for m in ms), delta_solve=ds,
            responsiveness=_estimate([m.responsiveness for m in ms], clusters, n_resamples, seed),
            responsiveness_same_day=_estimate([m.responsiveness_same_day for m in ms], clusters, n_resamples, seed),
            actions_per_run={k: float(np.mean([m.actions[k] for m in ms])) if ms else 0.0 for k in ACTION_KINDS},
            failure_modes=modes, pass_hat_k=passk, calibration=_calibration(mine), gate=g, gate_reasons=reasons,
            by_day=_by_day(mine), judged=judged)
    comparisons = _comparisons(tutors, measures, n_resamples, seed)
    failures = [{"run": t.id, "day": d.day, "cause": d.failed} for t in traces for d in t.days if d.failed]
    return KTBenchResults(runs=len({t.plan.run for t in traces}), tutors=out, ranking=_ranking(means),
                          comparisons=comparisons, stability=_stability(traces, tutors, means),
                          learner=_learner(traces, measures), settings=dict(settings or {}), failures=failures)


def _comparisons(tutors: list[str], measures: dict[str, RunMeasures], n_resamples: int, seed: int
                 ) -> list[KTComparison]:
    by = {(m.tutor, m.run): m for m in measures.values()}
    runs = sorted({m.run for m in measures.values()})
    out = []
    for i, a in enumerate(tutors):
        for b in tutors[i + 1:]:
            shared = [r for r in runs if (a, r) in by and (b, r) in by]
            va = [by[(a, r)].delta_solve for r in shared]
            vb = [by[(b, r)].delta_solve for r in shared]
            # Runs are clustered by scenario; with a single scenario each run is its own cluster.
            clusters = [by[(a, r)].scenario for r in shared]
            if len(set(clusters)) < 2:
                clusters = list(shared)
            pairs = [(x, y) for x, y in zip(va, vb, strict=True) if x is not None and y is not None]
            if len(set(clusters)) < 2 or len(pairs) < 2:
                diff = float(np.mean([x - y for x, y in pairs])) if pairs else None
                out.append(KTComparison(a=a, b=b, metric="delta_solve", diff=diff, ci95=None, p=None, p_holm=None,
                                        n=len(pairs)))
                continue
            c = paired_compare(va, vb, clusters, test="permutation", n_resamples=n_resamples,
                               n_permutations=n_resamples, seed=seed)
            out.append(KTComparison(a=a, b=b, metric="delta_solve", diff=c.diff, ci95=c.ci95, p=c.p, p_holm=None,
                                    n=c.n))
    for c, p in zip(out, holm([c.p for c in out]), strict=True):
        c.p_holm = p
    return out


def _stability(traces: Sequence[KTRunTrace], tutors: list[str], means: dict[str, float | None]) -> dict[str, Any]:
    """Kendall τ of the ΔSolve ranking: first-N-days against all days, and leave-one-scenario-out."""
    full = {t: v for t, v in means.items() if v is not None}
    if len(full) < 2:
        return {"horizon": {}, "leave_one_scenario_out": None}
    last = max((d.day for t in traces for d in t.days), default=0)
    horizon = {}
    for n in (5, 10, 15, 20):
        if n >= last:
            break
        per: dict[str, float] = {}
        for tutor in full:
            vals = [run_measures(t, first_days=n).delta_solve for t in traces if t.tutor == tutor]
            vals = [v for v in vals if v is not None]
            if vals:
                per[tutor] = float(np.mean(vals))
        horizon[str(n)] = kendall_tau(full, per) if len(per) == len(full) else None
    scenarios = sorted({t.plan.scenario for t in traces})
    taus = []
    if len(scenarios) > 1:
        for s in scenarios:
            per = {}
            for tutor in full:
                vals = [run_measures(t).delta_solve for t in traces if t.tutor == tutor and t.plan.scenario != s]
                vals = [v for v in vals if v is not None]
                if vals:
                    per[tutor] = float(np.mean(vals))
            if len(per) == len(full):
                tau = kendall_tau(full, per)
                if tau is not None:
                    taus.append(tau)
    loso = {"mean": float(np.mean(taus)), "min": float(np.min(taus)), "n": len(taus)} if taus else None
    return {"horizon": horizon, "leave_one_scenario_out": loso}


def _learner(traces: Sequence[KTRunTrace], measures: dict[str, RunMeasures]) -> dict[str, Any]:
    """The learner's realism checks that need no model: its first pre-probe accuracy by ability,
    beside its persona seeds' own real accuracy, and its role-player's valid-answer rate."""
    by_ability: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for t in traces:
        if t.plan.run in seen:
            continue
        seen.add(t.plan.run)
        m = measures[t.id]
        if m.first_pre_accuracy is None:
            continue
        e = by_ability.setdefault(t.plan.ability, {"runs": 0, "simulated": [], "real": []})
        e["runs"] += 1
        e["simulated"].append(m.first_pre_accuracy)
        e["real"].append(m.persona_accuracy)
    answers = [a for t in traces for d in t.days for a in (*d.pre, *d.practice, *d.post)]
    flagged = sum(a.flag is not None for a in answers)
    return {"probe_accuracy_by_ability": {k: {"runs": v["runs"], "simulated_day1_pre": float(np.mean(v["simulated"])),
                                              "real_persona": float(np.mean(v["real"]))}
                                          for k, v in by_ability.items()},
            "answers": len(answers), "valid_answer_rate": (1 - flagged / len(answers)) if answers else None}


def write_kt_results(results: KTBenchResults, output: str | os.PathLike[str]) -> Path:
    from simhub.schema import atomic_write_bytes

    path = Path(output) / "results.json"
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
    return path


def read_kt_results(path: str | os.PathLike[str]) -> KTBenchResults:
    """A KT-learner bench's ``results.json`` (a DataError naming the file when it is not one, or broken)."""
    return read_document(path, KTBenchResults, KT_RESULTS_KIND, KT_RESULTS_READS, "KT-learner results ",
                         f"not KT-learner bench results (kind {KT_RESULTS_KIND!r} expected)")


def _fmt(e: Estimate, scale: float = 1.0, digits: int = 2) -> str:
    if e.mean is None:
        return "n/a"
    s = f"{e.mean * scale:+.{digits}f}" if scale != 1.0 else f"{e.mean:.{digits}f}"
    if e.ci95 is not None:
        s += f" [{e.ci95[0] * scale:.{digits}f}, {e.ci95[1] * scale:.{digits}f}]"
    return s


def format_kt_results(r: KTBenchResults) -> str:
    lines = [f"KT-learner bench: {r.runs} runs per tutor", "",
             f"tutor | {OUTPUT['delta_solve'].label} {OUTPUT['delta_solve'].unit} [95% CI] | resp. | same-day | no help request "
             "(runs) | message/stay silent/assign/adjust/content per run | ECE | gate"]
    ds = OUTPUT["delta_solve"]
    for name in [*r.ranking, *(t for t in r.tutors if t not in r.ranking)]:
        t = r.tutors[name]
        acts = "/".join(f"{t.actions_per_run[k]:.1f}" for k in ACTION_KINDS)
        ece = f"{t.calibration.ece:.3f}" if t.calibration.ece is not None else "n/a"
        lines.append(f"{name} | {_fmt(t.delta_solve, ds.scale, ds.digits)} | {_fmt(t.responsiveness)} | "
                     f"{_fmt(t.responsiveness_same_day)} | {t.silent_runs} | {acts} | {ece} | {t.gate}")
    for c in r.comparisons:
        if c.diff is not None and c.p is None:
            lines.append(f"{c.a} − {c.b}: ΔSolve {c.diff * 100:+.2f} pp over {c.n} paired run(s) (too few to test)")
        elif c.diff is not None:
            lines.append(f"{c.a} − {c.b}: ΔSolve {c.diff * 100:+.2f} pp, p = {c.p:.4f} (Holm {c.p_holm:.4f}), "
                         f"n = {c.n} paired runs")
    for name, t in r.tutors.items():
        if t.judged:
            lines.append(f"{name} (judged): " + ", ".join(f"{OUTPUT[a].label} {_fmt(t.judged[a], digits=OUTPUT[a].digits)}"
                                                         for a in JUDGED))
    fails = sum(t.failed_days for t in r.tutors.values())
    if fails:
        lines.append(f"failed days: {fails} (see results.json failures)")
    return "\n".join(lines)
