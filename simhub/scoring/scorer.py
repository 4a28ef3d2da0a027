"""The Scorer: every configured realism metric for a batch of simulated turns.

It loops over the metric registry. For each metric it asks which items do not apply (and why),
scores the rest chunk by chunk with a progress bar, lets the metric finish with the whole set
(knowledge cutoffs), and summarises. A bad item yields a per-item error instead of failing the
batch; a failing model nulls its chunk with the cause, logged, never silently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from simhub.cache import ContentCache, fingerprint_of_json
from simhub.config import CandidateRules, Limits, Profile, ScoringConfig
from simhub.errors import ConfigError, SchemaError
from simhub.executors import BatchFailure, Executor, runs_here
from simhub.metrics import Metric, MetricContext, MetricResult, ScoreItem, check_metric_names, metric_classes
from simhub.models import LoadOptions
from simhub.prompts import cut_end_marker, remove_end_marker
from simhub.schema import to_json

log = logging.getLogger("simhub.scoring")


@dataclass
class ItemResult:
    scores: dict[str, float | None]
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"scores": self.scores, "details": self.details}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class ScoreResult:
    items: list[ItemResult]
    summary: dict[str, dict[str, Any]]

    def to_dict(self) -> dict:
        return {"items": [i.to_dict() for i in self.items], "summary": self.summary}


def apply_candidate_rules(text: str, rules: CandidateRules) -> tuple[str, dict[str, Any]]:
    """The candidate as scored (docs/protocol.md §8: end-of-dialogue marker removed, cut to ``max_chars``, not
    stripped) and what was done to it (empty when nothing)."""
    changed: dict[str, Any] = {}
    marker = remove_end_marker if rules.end_marker == "remove" else cut_end_marker
    text, seen = marker(text)
    if seen:
        changed["end_marker"] = rules.end_marker
    if len(text) > rules.max_chars:
        changed["truncated_from"] = len(text)
        text = text[: rules.max_chars]
    return text, changed


class Scorer:
    """Scores :class:`ScoreItem` batches with every configured metric (see the module docstring).

    ``mode`` is ``service`` (one turn at a time: stored knowledge cutoffs) or ``benchmark`` (a whole
    split, the evaluated set's own cutoffs by default); see :class:`simhub.config.KnowledgeConfig`.
    """

    def __init__(self, scoring: ScoringConfig | None = None, *, load: LoadOptions | None = None,
                 mode: str = "service", limits: Limits | None = None, cache: ContentCache | None = None,
                 executor: Executor | None = None):
        self.config = scoring or ScoringConfig()
        load = load or LoadOptions(backend=self.config.backend, device=self.config.device,
                                   batch_size=self.config.batch_size, share_base=self.config.share_base)
        self.context = MetricContext(load=load, mode=mode)
        self.limits = limits or Limits()
        #: Per-item metric results by content (None: no cache); a rerun scores nothing twice.
        self.cache = cache
        #: Where the chunks are scored (:mod:`simhub.executors`); None: here. Elsewhere each worker
        #: builds this scorer's metrics once, and this process alone writes the cache.
        self.executor = executor
        self._work: ScoreWork | None = None
        #: Metric instances by registry name, for the metrics this profile configures.
        self.instances: dict[str, Metric] = {}
        for name, cls in metric_classes().items():
            metric = cls.from_scoring(self.config, self.context)
            if metric is not None:
                self.instances[name] = metric

    @classmethod
    def from_profile(cls, profile: Profile, *, mode: str = "service", cache: ContentCache | None = None,
                     executor: Executor | None = None) -> Scorer:
        s = profile.scoring
        load = LoadOptions(backend=s.backend, device=s.device, batch_size=s.batch_size, share_base=s.share_base,
                           vllm=profile.serving.vllm)
        return cls(s, load=load, mode=mode, limits=profile.serving.limits, cache=cache, executor=executor)

    # ------------------------------------------------------------------ metrics

    @property
    def metrics(self) -> list[str]:
        """The output names this scorer can compute, in registry order."""
        return [o.name for m in self.instances.values() for o in m.outputs]

    def owner(self, output: str) -> str:
        """The registry name of the metric giving ``output``."""
        for name, metric in self.instances.items():
            if output in metric.output_names():
                return name
        raise ConfigError(f"metrics: {output} is not configured", field="metrics")

    def resolve_metrics(self, metrics: Sequence[str] | None) -> list[str]:
        """All configured outputs for None, else ``metrics`` checked (known, configured; duplicates
        dropped); a ConfigError naming ``metrics`` otherwise."""
        if metrics is None:
            return self.metrics
        names = check_metric_names(metrics)
        missing = [m for m in names if m not in self.metrics]
        if missing:
            raise ConfigError(f"metrics: {', '.join(missing)} not configured in this profile "
                              f"(configured: {', '.join(self.metrics)})", field="metrics")
        return names

    def set_dependent(self, metrics: Sequence[str] | None = None) -> bool:
        """Whether any of ``metrics`` depends on the whole scored set (requests must not be merged)."""
        return any(self.instances[self.owner(m)].set_dependent for m in self.resolve_metrics(metrics))

    def load(self, metrics: Sequence[str] | None = None) -> None:
        """Load every model the given metrics need (the service does this before it is ready)."""
        for name in dict.fromkeys(self.owner(m) for m in self.resolve_metrics(metrics)):
            self.instances[name].load()

    # ------------------------------------------------------------------ scoring

    def validate(self, item: ScoreItem) -> str | None:
        """The reason an item cannot be scored at all, or None."""
        try:
            item.dialogue.check_student_turn(item.turn_index)
        except SchemaError as exc:
            return str(exc)
        if not isinstance(item.candidate, str):
            return f"candidate: expected a string, got {type(item.candidate).__name__}"
        if len(item.candidate) > self.limits.max_candidate_chars:
            return (f"candidate: {len(item.candidate)} characters, more than the limit of "
                    f"{self.limits.max_candidate_chars}")
        if len(item.dialogue.turns) > self.limits.max_turns:
            return f"dialogue.turns: {len(item.dialogue.turns)} turns, more than the limit of {self.limits.max_turns}"
        return None

    def score(self, items: Sequence[ScoreItem], metrics: Sequence[str] | None = None, progress: bool = False) -> ScoreResult:
        names = self.resolve_metrics(metrics)
        results = [ItemResult(scores=dict.fromkeys(names)) for _ in items]
        prepared: dict[int, ScoreItem] = {}
        for n, item in enumerate(items):
            reason = self.validate(item)
            if reason is not None:
                results[n].error = reason
                continue
            text, changed = apply_candidate_rules(item.candidate, self.config.candidates)
            prepared[n] = ScoreItem(item.dialogue, item.turn_index, text) if changed else item
            if changed:
                results[n].details["candidate"] = changed
        extras: dict[str, dict] = {}
        dialogues: dict[int, str] = {}  # each dialogue's part of the cache keys, encoded once for every metric
        for name in dict.fromkeys(self.owner(m) for m in names):
            metric = self.instances[name]
            wanted = [o for o in metric.output_names() if o in names]
            extras.update(self._run(name, metric, wanted, prepared, results, progress, dialogues))
        for r in results:
            reasons = r.details.get("null_reasons")
            if reasons is not None and not reasons:
                del r.details["null_reasons"]
        summary = {}
        unscored = sum(1 for r in results if r.error is not None)  # items not scored at all (a tutor turn, ...)
        for m in names:
            metric = self.instances[self.owner(m)]
            values = [r.scores.get(m) for r in results]
            summary[m] = {**metric.summary(values), "nulls": sum(1 for n in prepared if results[n].scores.get(m) is None),
                          **({"unscored": unscored} if unscored else {}), **extras.get(m, {})}
        return ScoreResult(items=results, summary=summary)

    def _run(self, name: str, metric: Metric, wanted: list[str], prepared: dict[int, ScoreItem],
             results: list[ItemResult], progress: bool, dialogues: dict[int, str]) -> dict[str, dict]:
        todo: list[int] = []
        for n, item in prepared.items():
            skipped = {o: why for o, why in metric.skip(item).items() if o in wanted}
            for output, why in skipped.items():
                self._set(results[n], output, None, why)
            if len(skipped) < len(wanted):
                todo.append(n)
        done: dict[int, MetricResult] = {}
        keys: dict[int, str] = {}
        if self.cache is not None and todo:
            metric_key = json.dumps(metric.cache_key())
            for n in todo:
                item = prepared[n]
                dialogue = dialogues.get(id(item.dialogue))  # (the items, which hold them, keep the ids unique)
                if dialogue is None:
                    dialogue = dialogues[id(item.dialogue)] = json.dumps(to_json(item.dialogue).decode(), ensure_ascii=False)
                # = fingerprint([metric key, turn index, candidate, the dialogue's JSON])
                keys[n] = fingerprint_of_json([metric_key, json.dumps(item.turn_index, default=str),
                                               json.dumps(item.candidate, ensure_ascii=False, default=str), dialogue])
                hit = self.cache.get(keys[n])
                if hit is not None:
                    done[n] = MetricResult.from_json(hit)
            todo = [n for n in todo if n not in done]
        size = max(1, self.config.chunk_size)
        bar = _bar(len(todo), name, progress and len(todo) > size)
        chunks = [todo[start : start + size] for start in range(0, len(todo), size)]
        for chunk, out in self._scored(name, metric, wanted, prepared, chunks):
            for n, r in zip(chunk, out, strict=True):
                done[n] = r
                if self.cache is not None and not r.transient:
                    self.cache.put(keys[n], r.to_json())
            bar.update(len(chunk))
        bar.close()
        order = sorted(done)
        try:
            extras = metric.finalize([prepared[n] for n in order], [done[n] for n in order])
        except Exception as exc:
            log.exception("metric %s failed to finalize", name)
            reason = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
            for n in order:
                done[n] = MetricResult.null(wanted, reason)
            extras = {}
        for n in order:
            r = done[n]
            for output in wanted:
                if output in metric.skip(prepared[n]):
                    continue
                self._set(results[n], output, r.values.get(output), r.reasons.get(output))
            if r.details:
                results[n].details[name] = r.details
        return {o: e for o, e in extras.items() if o in wanted}

    def _scored(self, name: str, metric: Metric, wanted: list[str], prepared: dict[int, ScoreItem],
                chunks: list[list[int]]) -> Iterator[tuple[list[int], list[MetricResult]]]:
        """Each chunk with its results as they finish, here or on the executor's workers. A model
        failure (or a chunk the executor lost) nulls the chunk with its cause, and is logged."""
        if runs_here(self.executor):
            for chunk in chunks:
                try:
                    yield chunk, metric.score([prepared[n] for n in chunk])
                except Exception as exc:
                    log.exception("metric %s failed on %d items", name, len(chunk))
                    reason = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                    yield chunk, [MetricResult.null(wanted, reason, transient=True) for _ in chunk]
            return
        if self._work is None:  # one worker state for every metric: the actors build the scorer once
            self._work = ScoreWork(self.config, self.context.load, self.context.mode, self.limits)
        batches = [(name, [prepared[n] for n in chunk]) for chunk in chunks]
        for i, out in self.executor.map(self._work, "run", batches, keep=True):  # type: ignore[union-attr]
            if isinstance(out, BatchFailure):
                log.error("metric %s failed on %d items on the executor: %s", name, len(chunks[i]), out.cause)
                out = [MetricResult.null(wanted, f"failed: {out.cause[:200]}", transient=True) for _ in chunks[i]]
            yield chunks[i], out

    @staticmethod
    def _set(result: ItemResult, output: str, value: float | None, reason: str | None) -> None:
        result.scores[output] = value
        if value is None:
            result.details.setdefault("null_reasons", {})[output] = reason or "no value"


class ScoreWork:
    """A worker's part of :meth:`Scorer.score` on another executor (:mod:`simhub.executors`): a scorer
    of the same settings, built on the worker on first use (its models loaded there once); :meth:`run`
    scores one chunk with one metric."""

    def __init__(self, scoring: ScoringConfig, load: LoadOptions, mode: str, limits: Limits):
        self.settings = (scoring, load, mode, limits)
        self._scorer: Scorer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "_scorer": None}

    def run(self, batch: tuple[str, list[ScoreItem]]) -> list[MetricResult]:
        name, items = batch
        if self._scorer is None:
            scoring, load, mode, limits = self.settings
            self._scorer = Scorer(scoring, load=load, mode=mode, limits=limits)
        return self._scorer.instances[name].score(items)


def _bar(total: int, desc: str, show: bool):
    """A progress bar of ``total`` turns; tqdm is imported only when there is work to show."""
    if not total:
        return _NoBar()
    from simhub.progress import tqdm

    return tqdm(total=total, desc=desc, unit="turn", disable=not show)


class _NoBar:
    def update(self, n: int) -> None:
        return None

    def close(self) -> None:
        return None


#: The columns of :func:`format_summary`; every other key of a metric's summary is one of its extras
#: (``unscored``, the items not scored at all, is printed after the columns when there are any).
_SUMMARY_COLUMNS = ("mean", "std", "count", "nulls", "unscored")


def format_summary(summary: dict[str, dict]) -> str:
    """The summary as a table: metric, mean, std, count, nulls, then each numeric extra the metric's
    summary holds (``qwk`` for knowledge, a plug-in's own statistics) as ``key=value``.

    >>> print(format_summary({"rouge_l": {"mean": 0.5, "std": 0.25, "count": 4, "nulls": 1, "unscored": 1},
    ...                       "knowledge": {"mean": 0.9, "std": 0.0, "count": 2, "nulls": 0, "qwk": 0.75,
    ...                                     "cutoff_source": "paper"}}))
    metric              mean     std  count  nulls
    rouge_l           0.5000  0.2500      4      1  unscored=1 (items with an error: see each)
    knowledge         0.9000  0.0000      2      0  qwk=0.7500
    """
    lines = [f"{'metric':<16}{'mean':>8}{'std':>8}{'count':>7}{'nulls':>7}"]
    for name, s in summary.items():
        mean = "-" if s.get("mean") is None else f"{s['mean']:.4f}"
        std = "-" if s.get("std") is None else f"{s['std']:.4f}"
        line = f"{name:<16}{mean:>8}{std:>8}{s.get('count', 0):>7}{s.get('nulls', 0):>7}"
        if s.get("unscored"):
            line += f"  unscored={s['unscored']} (items with an error: see each)"
        for key, value in s.items():
            if key not in _SUMMARY_COLUMNS and isinstance(value, int | float) and not isinstance(value, bool):
                line += f"  {key}={value:.4f}"
        lines.append(line)
    return "\n".join(lines)
