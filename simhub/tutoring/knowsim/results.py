"""A tutor bench's results: per level and level-marginalised KG, DC, CO with item-bootstrap CIs, ranks,
paired tutor comparisons, the tutor × level table and the failure modes; and rescoring from traces.

* Per level, each metric's mean over the level's conversations with a 95% percentile interval from
  resampling **items** (an item's conversations move together).
* Level-marginalised (KnowSim's convention): the mean of the level means, its interval from the same
  item resamples.
* Ranks per metric across tutors on the marginalised means (KG, NKG and DC higher is better, CO lower;
  ties share their mean rank) and the mean rank R̄ over KG, DC and CO.
* IQ (interaction quality, 1..10 from an LLM rater, higher is better) joins every one of these, R̄
  included, when any trace holds a score; flagged ratings are counted like flagged turns. Without IQ
  the results are the version-1 document, unchanged; with IQ they are version 2.
* A termination judge's end turns (stateless learners) decide which turns every metric is of; unusable
  judgements are counted (``flagged_stops``), and results with judged stops are version 3.
* Paired comparisons: every pair of tutors on the same (item, level) conversations where neither
  failed, per level and pooled: the mean difference, its paired item-bootstrap interval and a
  permutation test flipping whole items, Holm-adjusted over the whole family.
* Failures (conversations) and flagged turns are counted next to every aggregate.

:func:`rescore` recomputes every conversation's records and metrics from its trace's signals under
any preset, with no model call.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.errors import DataError, SimhubError
from simhub.learners.graph import validate_graph
from simhub.learners.metrics import FAILURE_MODES, ConversationMetrics, conversation_metrics
from simhub.learners.presets import Preset
from simhub.learners.state import LEVELS
from simhub.learners.termination import stop_decision
from simhub.learners.update import update
from simhub.schema import atomic_write_bytes
from simhub.stats import holm, paired_compare
from simhub.tutoring.estimates import Estimate, cluster_estimate, format_estimate, rank_values
from simhub.tutoring.family import BenchOutput
from simhub.tutoring.knowsim.trace import Trace, read_document

RESULTS_KIND = "simhub-tutor-bench-results"
RESULTS_VERSION = 3
#: The versions :func:`read_results` reads (1 has no IQ and no flagged-rating counts, 2 no flagged-stop counts).
RESULTS_READS = (1, 2, 3)
RESULTS_FILE = "results.json"
#: What the bench reports per tutor, declared once: the results, the ranks, the console table and the
#: report read these (IQ only when a trace holds a score).
OUTPUTS = (
    BenchOutput("kg", "KG", ranked=True, digits=1, description="knowledge gain: ordinal steps the IUs rose over the conversation"),
    BenchOutput("nkg", "normalised KG", digits=3, description="KG over the headroom (the steps left to knowing every IU well)"),
    BenchOutput("dc", "DC", ranked=True, digits=3, description="delivery calibration: F1 of absorbed over explained and over teachable IUs"),
    BenchOutput("co", "CO", higher_is_better=False, ranked=True, digits=3,
                description="cognitive overload: the mean over turns of min(1, load / capacity)"),
    BenchOutput("iq", "IQ", ranked=True, digits=1, description="interaction quality, 1-10 from an LLM rater"),
)
#: Interaction quality, reported and ranked only when a trace holds a score.
IQ = "iq"
#: Every metric a results document can hold, and whether higher is better.
ALL_METRICS: dict[str, bool] = {o.name: o.higher_is_better for o in OUTPUTS}
#: The metrics reported without IQ, and whether higher is better.
METRICS: dict[str, bool] = {o.name: o.higher_is_better for o in OUTPUTS if o.name != IQ}
#: The metrics R̄ is the mean rank over (without IQ).
RANKED = tuple(o.name for o in OUTPUTS if o.ranked and o.name != IQ)
#: The outputs by name.
OUTPUT = {o.name: o for o in OUTPUTS}


class LevelResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    conversations: int
    failed: int
    flagged_turns: int
    mean_turns: float | None
    metrics: dict[str, Estimate]
    stops: dict[str, int]
    failure_modes: dict[str, int]
    failure_shares: dict[str, float]
    #: Unusable IQ ratings (version 2; absent when no IQ rater ran).
    flagged_ratings: int | msgspec.UnsetType = msgspec.UNSET
    #: Unusable termination judgements (version 3; absent when no termination judge ran).
    flagged_stops: int | msgspec.UnsetType = msgspec.UNSET


class TutorResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tutor: str
    conversations: int
    failed: int
    flagged_turns: int
    levels: dict[str, LevelResult]
    marginal: dict[str, Estimate]
    ranks: dict[str, float]
    mean_rank: float | None
    flagged_ratings: int | msgspec.UnsetType = msgspec.UNSET
    flagged_stops: int | msgspec.UnsetType = msgspec.UNSET


class Comparison(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    a: str
    b: str
    metric: str
    level: str
    n: int
    a_mean: float | None
    b_mean: float | None
    diff: float | None
    ci95: tuple[float, float] | None
    p: float | None
    p_holm: float | None


class ExtractorAgreement(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Cohen's κ between the run's extractor and the comparison extractor, over every (turn, IU) label
    of turns where both answered (flagged turns left out)."""

    against: str
    labels: int
    teaching_quality: float | None
    user_attempt_type: float | None
    teaching_quality_accuracy: float | None


class BenchResults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    schema_version: int = RESULTS_VERSION
    kind: str = RESULTS_KIND
    created: str
    simhub_version: str
    preset: str
    levels: list[str]
    items: int
    conversations: int
    failed: int
    flagged_turns: int
    tutors: list[TutorResult]
    comparisons: list[Comparison]
    failures: list[dict[str, str]]
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    extractor_agreement: ExtractorAgreement | None = None
    n_resamples: int = 2000
    seed: int = 0
    flagged_ratings: int | msgspec.UnsetType = msgspec.UNSET
    flagged_stops: int | msgspec.UnsetType = msgspec.UNSET

    def metric_names(self) -> list[str]:
        """The metrics this document reports: KG, NKG, DC, CO, and IQ when any tutor has it."""
        return [*METRICS, *([IQ] if any(IQ in t.marginal for t in self.tutors) else [])]

    def ranked(self) -> list[str]:
        """The metrics R̄ is the mean rank over."""
        return [*RANKED, *([IQ] if any(IQ in t.marginal for t in self.tutors) else [])]


def _value(m: ConversationMetrics, name: str) -> float:
    return float(getattr(m, name))


def _score(t: Trace, name: str) -> float | None:
    """A scored conversation's value of ``name`` (None for IQ when it has no rating)."""
    if name == IQ:
        return None if t.iq is None else float(t.iq)
    return _value(t.metrics, name)  # type: ignore[arg-type]


def _marginal(values: list[float], clusters: list[str], levels: list[str], n_resamples: int, seed: int) -> Estimate:
    """The mean of the level means, with an item-bootstrap percentile interval.

    Each resample draws the items with replacement (an item's conversations at every level move
    together) and recomputes every level's mean and their mean. It is computed from per-item,
    per-level sums and counts, so a resample is a weighted sum rather than a rebuilt dataset; a
    resample that misses a level entirely is dropped.
    """
    if not values:
        return Estimate(mean=None, ci95=None, n=0)
    names = sorted(set(levels))
    items = list(dict.fromkeys(clusters))
    code = {c: i for i, c in enumerate(items)}
    sums = np.zeros((len(items), len(names)))
    counts = np.zeros((len(items), len(names)))
    for v, c, lv in zip(values, clusters, levels, strict=True):
        sums[code[c], names.index(lv)] += v
        counts[code[c], names.index(lv)] += 1
    mean = float(np.mean(sums.sum(0) / counts.sum(0)))
    if len(items) < 2:  # one item: a mean, but nothing to resample
        return Estimate(mean=mean, ci95=None, n=len(values))
    rng = np.random.default_rng(seed)
    stats = []
    for start in range(0, n_resamples, 1000):
        k = min(1000, n_resamples - start)
        draws = rng.integers(0, len(items), size=(k, len(items)))
        weights = np.stack([np.bincount(row, minlength=len(items)) for row in draws]).astype(float)
        n = weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            level_means = (weights @ sums) / n
        stats.append(np.where((n > 0).all(axis=1), level_means.mean(axis=1), np.nan))
    s = np.concatenate(stats)
    s = s[np.isfinite(s)]
    ci = (float(np.percentile(s, 2.5)), float(np.percentile(s, 97.5))) if len(s) else None
    return Estimate(mean=mean, ci95=ci, n=len(values))


def summarize(traces: Sequence[Trace], *, preset: str, settings: dict[str, Any] | None = None,
              n_resamples: int = 2000, seed: int = 0, tutor_order: Sequence[str] | None = None) -> BenchResults:
    """The results of a run's traces. Tutors come in ``tutor_order`` (else first appearance); the
    traces are put in a canonical order first, because the bootstrap's draws index items in order of
    first appearance: the same traces then give the same intervals however they were read."""
    from simhub import __version__

    seen = list(dict.fromkeys(t.tutor for t in traces))
    tutors = [t for t in (tutor_order or ()) if t in seen] + [t for t in seen if t not in (tutor_order or ())]
    rank = {t: i for i, t in enumerate(tutors)}
    traces = sorted(traces, key=lambda t: (rank[t.tutor], t.item, LEVELS.index(t.level) if t.level in LEVELS else 9))
    levels = [lv for lv in LEVELS if any(t.level == lv for t in traces)]
    rated = any(t.rated for t in traces)
    judged = any(t.judged for t in traces)
    metrics = {**METRICS, **({IQ: True} if any(t.iq is not None for t in traces) else {})}
    ranked = [*RANKED, *([IQ] if IQ in metrics else [])]

    def flagged(ts: Sequence[Trace]) -> int | msgspec.UnsetType:
        return sum(1 for t in ts if t.iq_flag is not None) if rated else msgspec.UNSET

    def flagged_stops(ts: Sequence[Trace]) -> int | msgspec.UnsetType:
        return sum(1 for t in ts if t.judged_stop_flag is not None) if judged else msgspec.UNSET

    per_tutor: list[TutorResult] = []
    for tutor in tutors:
        mine = [t for t in traces if t.tutor == tutor]
        ok = [t for t in mine if t.failed is None and t.metrics is not None]
        level_results = {}
        for level in levels:
            at = [t for t in mine if t.level == level]
            good = [t for t in ok if t.level == level]
            modes = Counter()
            for t in good:
                modes.update(t.metrics.failure_modes)  # type: ignore[union-attr]
            total = sum(modes.values())
            estimates = {}
            for m in metrics:
                scored = [(v, t.item) for t in good if (v := _score(t, m)) is not None]
                estimates[m] = cluster_estimate([v for v, _ in scored], [i for _, i in scored], n_resamples, seed)
            level_results[level] = LevelResult(
                conversations=len(at), failed=len(at) - len(good), flagged_turns=sum(t.flagged_turns for t in at),
                mean_turns=float(np.mean([len(t.scored_turns) for t in good])) if good else None,
                metrics=estimates,
                stops=dict(Counter(t.stop_reason or "none" for t in at)),
                failure_modes={m: modes.get(m, 0) for m in FAILURE_MODES},
                failure_shares={m: (modes.get(m, 0) / total if total else 0.0) for m in FAILURE_MODES},
                flagged_ratings=flagged(at), flagged_stops=flagged_stops(at))
        marginal = {}
        for m in metrics:
            scored_t = [(v, t) for t in ok if (v := _score(t, m)) is not None]
            marginal[m] = _marginal([v for v, _ in scored_t], [t.item for _, t in scored_t],
                                    [t.level for _, t in scored_t], n_resamples, seed)
        per_tutor.append(TutorResult(tutor=tutor, conversations=len(mine), failed=len(mine) - len(ok),
                                     flagged_turns=sum(t.flagged_turns for t in mine), levels=level_results,
                                     marginal=marginal, ranks={}, mean_rank=None, flagged_ratings=flagged(mine),
                                     flagged_stops=flagged_stops(mine)))
    for m in ranked:
        ranks = rank_values({r.tutor: r.marginal[m].mean for r in per_tutor}, metrics[m])
        for r in per_tutor:
            if r.tutor in ranks:
                r.ranks[m] = ranks[r.tutor]
    for r in per_tutor:
        r.mean_rank = float(np.mean([r.ranks[m] for m in ranked])) if all(m in r.ranks for m in ranked) else None

    comparisons = _compare(traces, tutors, levels, metrics, n_resamples, seed)
    failures = [{"id": t.id, "cause": t.failed} for t in traces if t.failed is not None]
    return BenchResults(
        schema_version=RESULTS_VERSION if judged else 2 if rated else 1,
        created=datetime.now(UTC).isoformat(timespec="seconds"), simhub_version=__version__, preset=preset,
        levels=levels, items=len({t.item for t in traces}), conversations=len(traces), failed=len(failures),
        flagged_turns=sum(t.flagged_turns for t in traces), tutors=per_tutor, comparisons=comparisons,
        failures=failures, settings=dict(settings or {}), extractor_agreement=extractor_agreement(traces),
        n_resamples=n_resamples, seed=seed, flagged_ratings=flagged(traces), flagged_stops=flagged_stops(traces))


def _compare(traces: Sequence[Trace], tutors: list[str], levels: list[str], metrics: dict[str, bool],
             n_resamples: int, seed: int) -> list[Comparison]:
    index = {(t.tutor, t.item, t.level): t for t in traces if t.failed is None and t.metrics is not None}
    out: list[Comparison] = []
    for a, b in itertools.combinations(tutors, 2):
        for level in [*levels, "all"]:
            common = sorted({(i, lv) for (tu, i, lv) in index if tu == a and (level == "all" or lv == level)
                             and (b, i, lv) in index})
            for m in metrics:
                # A pair counts for a metric where both conversations have it (IQ may be unrated).
                keys = [k for k in common if _score(index[(a, *k)], m) is not None
                        and _score(index[(b, *k)], m) is not None]
                if not keys:
                    out.append(Comparison(a=a, b=b, metric=m, level=level, n=0, a_mean=None, b_mean=None, diff=None,
                                          ci95=None, p=None, p_holm=None))
                    continue
                xa = [float(_score(index[(a, i, lv)], m)) for i, lv in keys]  # type: ignore[arg-type]
                xb = [float(_score(index[(b, i, lv)], m)) for i, lv in keys]  # type: ignore[arg-type]
                if len({i for i, _ in keys}) < 2:  # one item: a difference, but no test
                    diff = float(np.mean(xa) - np.mean(xb))
                    out.append(Comparison(a=a, b=b, metric=m, level=level, n=len(keys), a_mean=float(np.mean(xa)),
                                          b_mean=float(np.mean(xb)), diff=diff, ci95=None, p=None, p_holm=None))
                    continue
                r = paired_compare(xa, xb, [i for i, _ in keys], test="permutation", n_resamples=n_resamples,
                                   n_permutations=n_resamples, seed=seed)
                out.append(Comparison(a=a, b=b, metric=m, level=level, n=r.n, a_mean=r.a, b_mean=r.b, diff=r.diff,
                                      ci95=r.ci95, p=r.p, p_holm=None))
    adjusted = holm([c.p for c in out])
    for c, p in zip(out, adjusted, strict=True):
        c.p_holm = p
    return out


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Cohen's κ of two label sequences (None when empty; 1.0 when both use one and the same label)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if expected >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - expected) / (1 - expected)


def extractor_agreement(traces: Sequence[Trace]) -> ExtractorAgreement | None:
    pairs_tq: tuple[list[str], list[str]] = ([], [])
    pairs_at: tuple[list[str], list[str]] = ([], [])
    against = None
    for t in traces:
        if t.failed is not None:
            continue
        against = against or (t.models.get("shadow_extractor") or {}).get("id")
        for turn in t.turns:
            if turn.shadow_signals is None or turn.extractor_flag:
                continue
            for iu, s in turn.signals.items():
                other = turn.shadow_signals.get(iu)
                if other is None:
                    continue
                pairs_tq[0].append(s.teaching_quality)
                pairs_tq[1].append(other.teaching_quality)
                pairs_at[0].append(s.user_attempt_type)
                pairs_at[1].append(other.user_attempt_type)
    if not pairs_tq[0]:
        return None
    n = len(pairs_tq[0])
    return ExtractorAgreement(against=against or "shadow", labels=n, teaching_quality=cohen_kappa(*pairs_tq),
                              user_attempt_type=cohen_kappa(*pairs_at),
                              teaching_quality_accuracy=sum(x == y for x, y in zip(*pairs_tq, strict=True)) / n)


# ------------------------------------------------------------------------------------------ rescoring


def rescore_trace(trace: Trace, preset: Preset, *, file: str | None = None) -> Trace:
    """The trace's records and metrics recomputed from its signals under ``preset`` (no model call).

    The recorded turns are replayed up to the first turn at which ``preset``'s rules stop the
    conversation (all of them for a full-length run): a preset that stops earlier scores the shorter
    conversation, one that would have gone on scores what was recorded. A judged stop (a termination judge's
    end turn) keeps deciding: the metrics are of the turns up to it.
    """
    if trace.failed is not None:
        return trace
    where = file or trace.id
    try:
        graph = validate_graph(trace.graph, name=trace.item, file=file)
        state = trace.initial
        records, turns = [], []
        for t in trace.turns:
            record = update(graph, state, t.signals, preset)
            records.append(record)
            turns.append(msgspec.structs.replace(t, record=record))
            state = record.state
            if not trace.full_length and stop_decision(records, preset).done:
                break
    except SimhubError as exc:
        raise DataError(f"{where}: {exc}", file=file, field=exc.field) from None
    scored = records[:trace.judged_stop_turn] if trace.judged_stop_turn is not None else records
    return msgspec.structs.replace(trace, turns=turns, metrics=conversation_metrics(graph, trace.initial, scored))


def write_results(results: BenchResults, output: str | os.PathLike[str]) -> Path:
    path = Path(output) / RESULTS_FILE
    atomic_write_bytes(path, msgspec.json.format(msgspec.json.encode(results), indent=2))
    return path


def read_results(path: str | os.PathLike[str]) -> BenchResults:
    return read_document(path, BenchResults, RESULTS_KIND, RESULTS_READS, "results ", "not tutor-bench results")


# -------------------------------------------------------------------------------------------- console


def format_results(results: BenchResults) -> str:
    width = max([len(r.tutor) for r in results.tutors] + [5])
    has_iq = IQ in results.metric_names()
    ranked = results.ranked()
    shown = [(m, OUTPUT[m].digits) for m in (*RANKED, *([IQ] if has_iq else []))]
    head = f"{'tutor':<{width}}  {'level':<12}{'n':>4}{'fail':>5}  " + "".join(f"{OUTPUT[m].label:<22}" for m, _ in shown)
    lines = [head, "-" * len(head)]

    def cells(estimates: dict[str, Estimate]) -> str:
        return "".join(f"{format_estimate(estimates.get(m), d):<22}" for m, d in shown)

    for r in results.tutors:
        for level, lr in r.levels.items():
            lines.append(f"{r.tutor:<{width}}  {level:<12}{lr.conversations:>4}{lr.failed:>5}  {cells(lr.metrics)}")
        lines.append(f"{r.tutor:<{width}}  {'(marginal)':<12}{r.conversations:>4}{r.failed:>5}  {cells(r.marginal)}")
    lines.append("")
    lines.append(f"{'tutor':<{width}}  rank {'  '.join(OUTPUT[m].label for m in ranked)}   mean rank")
    for r in sorted(results.tutors, key=lambda r: (r.mean_rank is None, r.mean_rank or 0)):
        rk = "  ".join(f"{r.ranks.get(m, float('nan')):.1f}" for m in ranked)
        lines.append(f"{r.tutor:<{width}}  {rk}   {r.mean_rank:.2f}" if r.mean_rank is not None else f"{r.tutor}  -")
    pooled = [c for c in results.comparisons if c.level == "all" and c.metric in ranked]
    if pooled:
        lines.append("")
        lines.append("paired (all levels, items as clusters; permutation test, Holm over every comparison)")
        for c in pooled:
            if c.diff is None:
                continue
            p = "-" if c.p is None else f"{c.p:.4f}"
            ph = "-" if c.p_holm is None else f"{c.p_holm:.4f}"
            lines.append(f"  {c.a} - {c.b}  {c.metric}: {c.diff:+.3f}  p={p}  p_holm={ph}  n={c.n}")
    ea = results.extractor_agreement
    if ea is not None:
        def k(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        lines.append("")
        lines.append(f"extractor agreement with {ea.against} over {ea.labels} labels: kappa teaching_quality "
                     f"{k(ea.teaching_quality)}, user_attempt_type {k(ea.user_attempt_type)}")
    lines.append("")
    ratings = "" if isinstance(results.flagged_ratings, msgspec.UnsetType) else \
        f", {results.flagged_ratings} flagged IQ ratings"
    if not isinstance(results.flagged_stops, msgspec.UnsetType):
        ratings += f", {results.flagged_stops} flagged termination judgements"
    lines.append(f"{results.conversations} conversations, {results.failed} failed, {results.flagged_turns} flagged turns"
                 f"{ratings}")
    return "\n".join(lines)
