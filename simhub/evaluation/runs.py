"""From a simulated student to a Table-1 row: batch simulation, scoring, confidence intervals, comparison.

* :func:`simulate` generates every real student turn of every dialogue with teacher forcing (the
  history is the real turns before it), in one batched pass per chunk, each answer cached by content
  the moment it is finished: a rerun makes no model or endpoint call, a killed run resumes.
* :func:`run_eval` simulates, scores with the paper protocol (the evaluated set's own knowledge
  cutoffs, the candidate rules), and writes a run directory: ``simulations.jsonl``, ``scores.jsonl``
  (one line per student turn) and ``results.json`` (means with dialogue-bootstrap 95% CIs; anything
  the set determines, such as the knowledge cutoffs, is recomputed inside each resample).
* :func:`compare_runs` compares two runs over the same data, turn by turn: paired bootstrap CIs of
  the differences, exact McNemar for binary metrics, paired permutation tests for the others, Holm
  across the metrics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simhub.cache import ContentCache, fingerprint
from simhub.config import Profile, cache_root
from simhub.errors import ConfigError, DataError
from simhub.evaluation.rundir import RESULTS_FILE, SCORES_FILE, is_missing_label, load_run
from simhub.executors import Executor
from simhub.metrics import Metric, ScoreItem, outputs
from simhub.models import Sampling
from simhub.runformat import (
    SIMULATIONS_FILE,
    DataInfo,
    EvalResults,
    Failures,
    MetricSummary,
    ScoreLine,
    write_eval_results,
    write_scores,
    write_simulations,
)
from simhub.schema import Dialogue, read_jsonl
from simhub.scoring import Scorer
from simhub.simulation import SimulationResult, Simulator, Target
from simhub.simulation.work import simulated

SIMULATIONS = SIMULATIONS_FILE
#: Seed of the reference's random test subsample (the paper's ablation table).
SUBSAMPLE_SEED = 221


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def subsample_split(dialogues: Sequence[Dialogue], fraction: float | None) -> list[Dialogue]:
    """The reference's ``--test_subsample``: ``random.Random(221).sample`` of ``int(fraction · n)``
    dialogues of the split, in the order it draws them (FIDELITY.md); None keeps the whole split."""
    if fraction is None:
        return list(dialogues)
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"test_subsample: {fraction} is not a fraction in (0, 1]", field="test_subsample")
    return random.Random(SUBSAMPLE_SEED).sample(list(dialogues), int(len(dialogues) * fraction))


def student_targets(dialogues: Sequence[Dialogue], where: str = "data") -> list[Target]:
    """Every real student turn, in order; a DataError when there is none."""
    targets = [Target(d, i) for d in dialogues for i in d.student_turn_indices()]
    if not targets:
        raise DataError(f"{where}: no student turns to simulate ({len(dialogues)} dialogues)", file=where)
    return targets


# ---------------------------------------------------------------------------------- simulation


def simulate(simulator: Simulator, targets: Sequence[Target], *, sampling: Sampling | None = None,
             cache: ContentCache | None = None, chunk_size: int = 64, progress: bool = True,
             executor: Executor | None = None) -> list[dict]:
    """One record per target: ``{dialogue_id, turn_index, candidate, simulator, finish_reason,
    end_of_dialogue}``, or ``candidate: null`` with ``error`` when the simulator failed on it (the
    fields of a :class:`~simhub.runformat.SimulationLine`, which ``simulations.jsonl`` holds).

    Answers are cached under a hash of the simulator, its prompt and the decoding settings as soon as
    each chunk finishes; failures are not cached, so a rerun retries them. The ICL baseline's
    retrieved examples are cached with them, so that a rerun needs no embedder to build its prompts.
    On another ``executor`` (:mod:`simhub.executors`) the chunks run on its workers, each loading the
    simulator's model once; this process alone writes the cache. A chunk lost there fails its turns.
    """
    retriever = getattr(simulator, "retriever", None)
    if retriever is None or cache is None or not cache.enabled or not simulator.cacheable:
        return _simulate(simulator, targets, sampling, cache, chunk_size, progress, executor)
    saved, retriever.store = retriever.store, cache
    try:
        return _simulate(simulator, targets, sampling, cache, chunk_size, progress, executor)
    finally:
        retriever.store = saved


def _simulate(simulator: Simulator, targets: Sequence[Target], sampling: Sampling | None, cache: ContentCache | None,
              chunk_size: int, progress: bool, executor: Executor | None = None) -> list[dict]:
    use_cache = cache is not None and cache.enabled and simulator.cacheable
    base_key = simulator.fingerprint() if use_cache else ""
    decoding = dataclasses.asdict(sampling) if sampling is not None else "default"
    records: list[dict | None] = [None] * len(targets)
    keys: list[str] = [""] * len(targets)
    todo = []
    for n, target in enumerate(targets):
        if use_cache:
            keys[n] = fingerprint([base_key, simulator.messages(target), decoding])
            hit = cache.get(keys[n])
            if hit is not None:
                # The key is the prompt: another dialogue with the same turns so far may have stored it.
                records[n] = {**hit, "dialogue_id": target.dialogue.id, "turn_index": target.turn_index,
                              "simulator": simulator.id}
                continue
        todo.append(n)
    if not todo:  # every answer came from the cache: no model is loaded, nothing is shown
        return [r for r in records if r is not None]
    from simhub.progress import tqdm

    bar = tqdm(total=len(targets), initial=len(targets) - len(todo), desc=f"simulate {simulator.id}", unit="turn",
               disable=not progress, dynamic_ncols=True)
    chunks = [todo[start : start + max(1, chunk_size)] for start in range(0, len(todo), max(1, chunk_size))]
    for chunk, results in simulated(simulator, targets, chunks, sampling, executor):
        for n, result in zip(chunk, results, strict=True):
            record = _record(simulator.id, targets[n], result)
            records[n] = record
            if use_cache and record.get("error") is None:
                cache.put(keys[n], record)
        bar.update(len(chunk))
    bar.close()
    return [r for r in records if r is not None]


def _record(simulator: str, target: Target, result: SimulationResult) -> dict:
    base = {"dialogue_id": target.dialogue.id, "turn_index": target.turn_index, "simulator": simulator}
    if result.error is not None or not result.candidates:
        return {**base, "candidate": None, "error": result.error or "no candidate"}
    first = result.candidates[0]
    return {**base, "candidate": first.text, "finish_reason": first.finish_reason, "end_of_dialogue": first.end_of_dialogue}


# ---------------------------------------------------------------------------------- eval


@dataclasses.dataclass
class EvalOptions:
    """Options of :func:`run_eval` (the CLI's flags)."""

    metrics: list[str] | None = None
    n_resamples: int = 10_000
    seed: int = 0
    #: Root of the content-addressed caches (generations, scores); None: ``$SIMHUB_HOME/cache``.
    cache_dir: str | None = None
    no_cache: bool = False
    sampling: Sampling | None = None
    progress: bool = True
    chunk_size: int = 64
    #: Evaluate the reference's random subsample of this fraction of ``data`` (:func:`subsample_split`).
    test_subsample: float | None = None


def _caches(options: EvalOptions) -> tuple[ContentCache | None, ContentCache | None]:
    if options.no_cache:
        return None, None
    root = cache_root(options.cache_dir)
    return ContentCache(root, "generations"), ContentCache(root, "scores")


def run_eval(profile: Profile, simulator: Simulator, data: str | os.PathLike[str], output: str | os.PathLike[str],
             options: EvalOptions | None = None, *, record: dict | None = None, executor: Executor | None = None) -> dict:
    """Simulate and score every student turn of ``data`` with ``simulator``; write the run directory.

    ``profile`` must be provisioned (concrete model references). ``record`` is what ``results.json``
    says about the configuration (by default the simulator's and the profile's scoring section; the
    command line passes them as written, with Hub ids and ``demo:`` names instead of local folders).
    Returns ``results.json``'s content. ``options.no_cache`` also keeps endpoint clients off their
    response caches for the run. ``executor`` (:mod:`simhub.executors`; default: this process) runs
    the simulation's and every metric's chunks; the files are the ones a local run writes.
    """
    options = options or EvalOptions()
    if not options.no_cache:  # (the endpoint clients' module is imported only to switch their caches off)
        return _run_eval(profile, simulator, data, output, options, record, executor)
    from simhub.models.openai import response_cache_off

    with response_cache_off():
        return _run_eval(profile, simulator, data, output, options, record, executor)


def _run_eval(profile: Profile, simulator: Simulator, data: str | os.PathLike[str], output: str | os.PathLike[str],
              options: EvalOptions, record: dict | None, executor: Executor | None = None) -> dict:
    data, output = Path(data), Path(output)
    dialogues = subsample_split(read_jsonl(data), options.test_subsample)
    targets = student_targets(dialogues, str(data))
    generations, scores_cache = _caches(options)
    scorer = Scorer.from_profile(profile, mode="benchmark", cache=scores_cache, executor=executor)
    metrics = scorer.resolve_metrics(options.metrics)

    sims = simulate(simulator, targets, sampling=options.sampling, cache=generations, chunk_size=options.chunk_size,
                    progress=options.progress, executor=executor)
    output.mkdir(parents=True, exist_ok=True)
    write_simulations(output / SIMULATIONS, sims)

    scorable = [(n, ScoreItem(t.dialogue, t.turn_index, s["candidate"]))
                for n, (t, s) in enumerate(zip(targets, sims, strict=True)) if s["candidate"] is not None]
    result = scorer.score([item for _, item in scorable], metrics, progress=options.progress)
    by_target = dict(zip([n for n, _ in scorable], result.items, strict=True))
    lines = []
    positions: dict[str, int] = {}
    for n, (target, sim) in enumerate(zip(targets, sims, strict=True)):
        d = target.dialogue
        position = positions.get(d.id, 0)
        positions[d.id] = position + 1
        line = ScoreLine(dialogue_id=d.id, turn_index=target.turn_index, position=position,
                         real=d.turns[target.turn_index].content, candidate=sim["candidate"])
        item = by_target.get(n)
        if item is None:
            line.scores, line.error = dict.fromkeys(metrics), f"simulation failed: {sim.get('error')}"
        else:
            line.scores, line.details = item.scores, item.details
            if item.error:
                line.error = item.error
        lines.append(line)
    write_scores(output / SCORES_FILE, lines)

    summary = _with_intervals(scorer, metrics, lines, result.summary, options, scores_cache)
    def scoring_failed(line: ScoreLine, m: str) -> bool:
        reason = str((line.details.get("null_reasons") or {}).get(m, ""))
        return line.scores.get(m) is None and "failed" in reason and not is_missing_label(reason)

    failures = Failures(simulation=sum(1 for s in sims if s["candidate"] is None),
                        scoring={m: sum(1 for line in lines if scoring_failed(line, m)) for m in metrics})
    results = EvalResults(
        simulator=simulator.id,
        profile=profile.source or profile.name,
        data=DataInfo(path=str(data), sha256=sha256_of(data), dialogues=len(dialogues), turns=len(targets),
                      **({"test_subsample": options.test_subsample} if options.test_subsample is not None else {})),
        metrics=summary,
        failures=failures,
        config={
            **(record or {"simulator": simulator.config_record(), "scoring": _builtins(profile.scoring)}),
            "sampling": dataclasses.asdict(options.sampling) if options.sampling else "the simulator's default",
            "bootstrap": {"resamples": options.n_resamples, "seed": options.seed, "unit": "dialogue"},
        },
        simhub_version=_version(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return write_eval_results(output / RESULTS_FILE, results)


def _builtins(struct) -> Any:
    import msgspec

    return msgspec.to_builtins(struct)


def _version() -> str:
    from simhub import __version__

    return __version__


def _with_intervals(scorer: Scorer, metrics: Sequence[str], lines: list[ScoreLine], summary: dict[str, dict],
                    options: EvalOptions, cache: ContentCache | None = None) -> dict[str, MetricSummary]:
    """Mean, std, n and the dialogue-bootstrap 95% CI of each metric (plus the scorer's extras); a
    metric whose value is a statistic of the whole set (knowledge) takes its CI from resampling that.

    The numbers are a function of the scores, the dialogues, the resampling settings and simhub's
    version alone, so they are cached like the scores (``cache``): a rerun resamples nothing."""
    clusters = [line.dialogue_id for line in lines]
    values = {m: [line.scores.get(m) for line in lines] for m in metrics}
    owners = {m: scorer.owner(m) for m in metrics}
    details = {m: [line.details.get(owners[m]) for line in lines] for m in metrics}
    key = None
    if cache is not None and cache.enabled:
        resampled = {m: [type(scorer.instances[owners[m]]).__qualname__, details[m]]  # (statistics of the details)
                     for m in metrics if type(scorer.instances[owners[m]]).resample_statistic is not Metric.resample_statistic}
        key = fingerprint(["intervals", _version(), options.n_resamples, options.seed, clusters, values, resampled])
        stats = cache.get(key)
        if isinstance(stats, dict) and set(stats) == set(metrics):
            return {m: _summary(stats[m], summary, m) for m in metrics}
    stats = _intervals(scorer, metrics, clusters, values, owners, details, options)
    if key is not None:
        cache.put(key, stats)  # type: ignore[union-attr]
    return {m: _summary(stats[m], summary, m) for m in metrics}


def _summary(stat: dict, summary: dict[str, dict], m: str) -> MetricSummary:
    """One metric's summary struct: the resampled numbers and the scorer's extras for it."""
    extras = {k: v for k, v in summary.get(m, {}).items() if k not in ("mean", "std", "count")}
    return MetricSummary(mean=stat["mean"], std=stat["std"], n=stat["n"],
                         ci95=tuple(stat["ci95"]) if stat["ci95"] else None, extra=extras)


def _intervals(scorer: Scorer, metrics: Sequence[str], clusters: list[str], values: dict[str, list],
               owners: dict[str, str], details: dict[str, list], options: EvalOptions) -> dict[str, dict]:
    from simhub.stats import cluster_bootstrap, summarize_metrics

    cis = summarize_metrics(values, clusters, n_resamples=options.n_resamples, seed=options.seed)
    out: dict[str, dict] = {}
    for m in metrics:
        ci = cis[m]
        statistic = scorer.instances[owners[m]].resample_statistic(m, details[m])
        interval = ci.ci
        if statistic is not None:
            interval = cluster_bootstrap(clusters, statistic, n_resamples=options.n_resamples, seed=options.seed).ci
        out[m] = {"mean": ci.mean, "std": ci.std, "n": ci.n, "ci95": list(interval) if interval else None}
    return out


# ---------------------------------------------------------------------------------- compare


def compare_runs(run_a: str | os.PathLike[str], run_b: str | os.PathLike[str], *, n_resamples: int = 10_000,
                 seed: int = 0) -> dict:
    """Paired comparison of two runs over the same data, on the turns both scored (see the module docstring)."""
    from simhub.stats import compare_metrics

    ra, rb = load_run(run_a), load_run(run_b)
    if ra.data.sha256 != rb.data.sha256:
        raise DataError(f"the runs are over different data: {run_a} has {ra.data.path} (sha256 {str(ra.data.sha256)[:12]}), "
                        f"{run_b} has {rb.data.path} (sha256 {str(rb.data.sha256)[:12]}); compare runs of the same "
                        "data file", field="data")
    b_by_key = {(t.dialogue_id, t.turn_index): t for t in rb.turns}
    common = [(t, b_by_key[(t.dialogue_id, t.turn_index)]) for t in ra.turns if (t.dialogue_id, t.turn_index) in b_by_key]
    names = [m for m in ra.metrics if m in rb.metrics]
    if not common or not names:
        raise DataError("the runs share no scored turn or no metric", field="data")
    table = outputs()
    binary = [m for m in names if m in table and table[m][1].binary]
    a_values = {m: [x.scores.get(m) for x, _ in common] for m in names}
    b_values = {m: [y.scores.get(m) for _, y in common] for m in names}
    clusters = [x.dialogue_id for x, _ in common]
    compared = compare_metrics(a_values, b_values, clusters, metrics=names, binary=binary, n_resamples=n_resamples,
                               seed=seed)
    metrics = {}
    for m, c in compared.items():
        d = c.as_dict()
        metrics[m] = {k: d.get(k) for k in ("a", "b", "diff", "ci95", "p", "p_holm", "test", "n")}
    return {"a": {"run": str(run_a), "simulator": ra.simulator}, "b": {"run": str(run_b), "simulator": rb.simulator},
            "data": {"path": ra.data.path, "sha256": ra.data.sha256, "dialogues": ra.data.dialogues,
                     "turns": ra.data.turns},
            "metrics": metrics}


def format_comparison(result: dict) -> str:
    a, b = result["a"]["simulator"], result["b"]["simulator"]
    lines = [f"A = {a}, B = {b}; paired over the turns both scored (dialogue bootstrap, Holm across metrics)",
             f"{'metric':<16}{'A':>8}{'B':>8}{'A-B':>9}  {'95% CI':<20}{'p':>8}{'p (Holm)':>10}  test"]
    for m, r in result["metrics"].items():
        def f(v, w=8):
            return f"{v:>{w}.4f}" if isinstance(v, int | float) else f"{'-':>{w}}"

        ci = r["ci95"]
        ci_text = f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else "-"
        lines.append(f"{m:<16}{f(r['a'])}{f(r['b'])}{f(r['diff'], 9)}  {ci_text:<20}{f(r['p'])}{f(r['p_holm'], 10)}  "
                     f"{r['test'] or '-'}")
    return "\n".join(lines)


def format_results(results: dict) -> str:
    """A run's Table-1 row as a small table."""
    lines = [f"{results['simulator']} on {Path(results['data']['path']).name} ({results['data']['dialogues']} dialogues, "
             f"{results['data']['turns']} student turns)",
             f"{'metric':<16}{'mean':>8}{'std':>8}  {'95% CI':<18}{'n':>6}"]
    for m, s in results["metrics"].items():
        mean = "-" if s.get("mean") is None else f"{s['mean']:.4f}"
        std = "-" if s.get("std") is None else f"{s['std']:.4f}"
        ci = s.get("ci95")
        ci_text = f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-"
        lines.append(f"{m:<16}{mean:>8}{std:>8}  {ci_text:<18}{s.get('n', 0):>6}")
    failed = results["failures"]["simulation"]
    if failed:
        lines.append(f"{failed} of {results['data']['turns']} turns could not be simulated (see scores.jsonl errors)")
    unscored = {m: n for m, n in results["failures"].get("scoring", {}).items() if n}
    if unscored:
        lines.append("failed to score: " + ", ".join(f"{m} {n} turns" for m, n in unscored.items())
                     + " (see scores.jsonl null_reasons)")
    return "\n".join(lines)


def check_options(options: EvalOptions) -> None:
    if options.n_resamples < 100:
        raise ConfigError("bootstrap: use at least 100 resamples", field="bootstrap")
