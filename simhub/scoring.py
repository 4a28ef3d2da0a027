"""The Scorer: every realism metric for a batch of simulated turns, batched across items.

An item is a real dialogue, the index of a real student turn in it, and the simulated text for
that turn. Each metric runs once over all the items that it applies to (in chunks, with a
progress bar), each model is loaded once per process, and a bad item yields a per-item error
instead of failing the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.backends.hf import ModelRef
from simhub.errors import ConfigError, SimhubError
from simhub.metrics.registry import METRIC_NAMES, check_metric_names
from simhub.schema import Dialogue, SchemaError

#: Candidates longer than this are not scored (the models' context would be exceeded).
MAX_CANDIDATE_CHARS = 8000


class ScoreItem(msgspec.Struct, forbid_unknown_fields=True):
    """A real dialogue, the index of a real student turn in it, and the simulated text for that
    turn; also one line of a ``simhub score`` input file."""

    dialogue: Dialogue
    turn_index: int
    candidate: str


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
    summary: dict[str, dict[str, float | int | None]]

    def to_dict(self) -> dict:
        return {"items": [i.to_dict() for i in self.items], "summary": self.summary}


@dataclass
class ScorerConfig:
    """Which model backs each metric. A metric whose model is None is not configured."""

    acts: ModelRef | None = None
    judge: dict | None = None
    knowledge: ModelRef | None = None
    #: ``"paper"`` (cutoffs from the scored set itself) or a path to ``kt_cutoffs.json``;
    #: ``"model"`` reads ``kt_cutoffs.json`` from the knowledge model folder.
    knowledge_cutoffs: str = "paper"
    cosine: str | None = "minilm"
    tutor_response: ModelRef | None = None
    device: str | None = None
    #: Backend of the acts, local-judge and tutor models: ``transformers`` or ``vllm``.
    backend: str = "transformers"
    batch_size: int = 16
    chunk_size: int = 128
    max_candidate_chars: int = MAX_CANDIDATE_CHARS

    def configured(self) -> list[str]:
        have = {
            "acts": self.acts is not None,
            "correctness": self.judge is not None,
            "errors": self.judge is not None,
            "knowledge": self.knowledge is not None,
            "cosine": self.cosine is not None,
            "rouge_l": True,
            "tutor_response": self.tutor_response is not None,
        }
        return [m for m in METRIC_NAMES if have[m]]


def summarize(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean, (population) std and count over the non-null values."""
    xs = np.array([v for v in values if v is not None], dtype=np.float64)
    if xs.size == 0:
        return {"mean": None, "std": None, "count": 0}
    return {"mean": float(xs.mean()), "std": float(xs.std()), "count": int(xs.size)}


def format_summary(summary: dict[str, dict]) -> str:
    """The summary as a table: metric, mean, std, count (and QWK for knowledge)."""
    lines = [f"{'metric':<16}{'mean':>8}{'std':>8}{'count':>7}"]
    for name, s in summary.items():
        mean = "-" if s.get("mean") is None else f"{s['mean']:.4f}"
        std = "-" if s.get("std") is None else f"{s['std']:.4f}"
        line = f"{name:<16}{mean:>8}{std:>8}{s.get('count', 0):>7}"
        if s.get("qwk") is not None:
            line += f"  qwk={s['qwk']:.4f}"
        lines.append(line)
    return "\n".join(lines)


class Scorer:
    def __init__(self, config: ScorerConfig | None = None):
        self.config = config or ScorerConfig()
        self._models: dict[str, Any] = {}
        self._refs: dict[str, ModelRef] = {}

    @property
    def metrics(self) -> list[str]:
        return self.config.configured()

    # ------------------------------------------------------------------ models (lazy, once)

    def _model(self, name: str, factory: Callable[[], Any]) -> Any:
        if name not in self._models:
            self._models[name] = factory()
        return self._models[name]

    def cosine_model(self):
        from simhub.metrics.cosine import CosineScorer

        return self._model("cosine", lambda: CosineScorer(self.config.cosine, self.config.device))

    def act_model(self):
        from simhub.metrics.acts import ActClassifier

        return self._model("acts", lambda: ActClassifier(self.model_ref("acts"), self.config.device, self.config.batch_size, self.config.backend))

    def judge_model(self):
        from simhub.metrics.judge import make_judge

        return self._model("judge", lambda: make_judge(self.judge_config(), self.config.device, self.config.batch_size, self.config.backend))

    def tutor_model(self):
        from simhub.metrics.tutor_response import TutorResponseScorer

        return self._model(
            "tutor_response", lambda: TutorResponseScorer(
                self.model_ref("tutor_response"), self.config.device, self.config.batch_size, self.config.backend
            )
        )

    def knowledge_model(self):
        from simhub.metrics.knowledge import KnowledgeTracer

        return self._model(
            "knowledge", lambda: KnowledgeTracer(self.model_ref("knowledge"), device=self.config.device, batch_size=self.config.batch_size)
        )

    def model_ref(self, metric: str) -> ModelRef:
        """The configured model of ``acts``, ``knowledge`` or ``tutor_response`` with ``tiny:``/``demo:``
        names resolved to folders. Resolution builds a missing demo model, so it happens on first
        use of the metric, not when a profile is read."""
        if metric not in self._refs:
            from simhub.profiles import resolve_ref

            self._refs[metric] = resolve_ref(getattr(self.config, metric))
        return self._refs[metric]

    def judge_config(self) -> dict:
        """The judge section with a local judge's model name resolved like :meth:`model_ref`."""
        from simhub.profiles import resolve_model

        judge = dict(self.config.judge or {})
        if judge.get("kind", "local") == "local" and "model" in judge:
            judge["model"] = resolve_model(judge["model"])
        return judge

    def prepare(self) -> None:
        """Resolve (and so build, for demo profiles) every configured model on disk, without loading it."""
        for metric in ("acts", "knowledge", "tutor_response"):
            if getattr(self.config, metric) is not None:
                self.model_ref(metric)
        if self.config.judge is not None:
            self.judge_config()

    def load(self, metrics: Sequence[str] | None = None) -> None:
        """Load every model the given metrics need (the service does this before it is ready)."""
        names = self.resolve_metrics(metrics)
        loaders = {"acts": self.act_model, "correctness": self.judge_model, "errors": self.judge_model,
                   "knowledge": self.knowledge_model, "cosine": self.cosine_model, "tutor_response": self.tutor_model}
        for name in names:
            if name in loaders:
                loaders[name]()

    def resolve_metrics(self, metrics: Sequence[str] | None) -> list[str]:
        """The metric names to compute: all configured ones for None, else ``metrics`` checked
        (known names, duplicates dropped) and configured in this profile; ConfigError naming ``metrics``."""
        if metrics is None:
            return self.metrics
        names = check_metric_names(metrics)
        missing = [m for m in names if m not in self.metrics]
        if missing:
            raise ConfigError(f"metrics: {', '.join(missing)} not configured in this profile (configured: {', '.join(self.metrics)})")
        return names

    # ------------------------------------------------------------------ scoring

    def validate(self, item: ScoreItem) -> str | None:
        """The reason an item cannot be scored at all, or None."""
        try:
            item.dialogue.check_student_turn(item.turn_index)
        except SchemaError as exc:
            return str(exc)
        if not isinstance(item.candidate, str):
            return f"candidate: expected a string, got {type(item.candidate).__name__}"
        if not item.candidate.strip():
            return "candidate: empty text"
        if len(item.candidate) > self.config.max_candidate_chars:
            return f"candidate: {len(item.candidate)} characters, more than the limit of {self.config.max_candidate_chars}"
        return None

    def score(self, items: Sequence[ScoreItem], metrics: Sequence[str] | None = None, progress: bool = False) -> ScoreResult:
        names = self.resolve_metrics(metrics)
        results = [ItemResult(scores=dict.fromkeys(names)) for _ in items]
        valid: list[int] = []
        for n, item in enumerate(items):
            reason = self.validate(item)
            if reason is None:
                valid.append(n)
                results[n].details["null_reasons"] = {}
            else:
                results[n].error = reason
        stages = [
            ("rouge_l", self._rouge_l),
            ("cosine", self._cosine),
            ("acts", self._acts),
            ("correctness", self._judge),
            ("knowledge", self._knowledge),
            ("tutor_response", self._tutor_response),
        ]
        summary_extra: dict[str, dict] = {}
        wanted = set(names)
        if "errors" in wanted:
            wanted.add("correctness")
        for name, stage in stages:
            if name not in wanted or not valid:
                continue
            extra = stage(items, valid, results, progress)
            if extra:
                summary_extra[name] = extra
        for n in valid:
            if not results[n].details["null_reasons"]:
                del results[n].details["null_reasons"]
        summary = {m: summarize([r.scores.get(m) for r in results]) for m in names}
        for m, extra in summary_extra.items():
            if m in summary:
                summary[m].update(extra)
        return ScoreResult(items=results, summary=summary)

    # ------------------------------------------------------------------ stages

    def _chunks(self, indices: list[int], desc: str, progress: bool):
        size = max(1, self.config.chunk_size)
        bar = None
        if progress and len(indices) > size:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(indices), desc=desc, unit="turn")
        for start in range(0, len(indices), size):
            chunk = indices[start : start + size]
            yield chunk
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()

    @staticmethod
    def _null(result: ItemResult, metric: str, reason: str) -> None:
        if metric in result.scores:
            result.scores[metric] = None
            result.details["null_reasons"][metric] = reason

    def _guard(self, metric_names: Sequence[str], chunk: list[int], results: list[ItemResult], fn: Callable[[], None]) -> None:
        """Run one chunk; a model failure nulls the chunk's scores with the error type, not the batch."""
        try:
            fn()
        except SimhubError as exc:
            for n in chunk:
                for m in metric_names:
                    self._null(results[n], m, f"failed: {exc}")
        except (RuntimeError, ValueError) as exc:
            for n in chunk:
                for m in metric_names:
                    self._null(results[n], m, f"failed: {type(exc).__name__}")

    def _real(self, item: ScoreItem) -> str:
        return item.dialogue.turns[item.turn_index].content

    def _rouge_l(self, items, valid, results, progress):
        from simhub.metrics.rouge_l import rouge_l_batch

        values = rouge_l_batch([self._real(items[n]) for n in valid], [items[n].candidate for n in valid])
        for n, v in zip(valid, values, strict=True):
            results[n].scores["rouge_l"] = float(v)

    def _cosine(self, items, valid, results, progress):
        model = self.cosine_model()
        for chunk in self._chunks(valid, "cosine", progress):
            def run(chunk=chunk):
                values = model.score([self._real(items[n]) for n in chunk], [items[n].candidate for n in chunk])
                for n, v in zip(chunk, values, strict=True):
                    results[n].scores["cosine"] = v
            self._guard(["cosine"], chunk, results, run)

    def _acts(self, items, valid, results, progress):
        model = self.act_model()
        todo = []
        for n in valid:
            real = items[n].dialogue.turns[items[n].turn_index].act
            if real is None:
                self._null(results[n], "acts", "real turn has no act label")
            else:
                todo.append(n)
        for chunk in self._chunks(todo, "acts", progress):
            def run(chunk=chunk):
                predicted, _ = model.predict(
                    [(items[n].dialogue, items[n].dialogue.turns[: items[n].turn_index], items[n].candidate) for n in chunk]
                )
                for n, act in zip(chunk, predicted, strict=True):
                    real = items[n].dialogue.turns[items[n].turn_index].act
                    results[n].scores["acts"] = float(act == real)
                    results[n].details["acts"] = {"predicted": act, "real": real}
            self._guard(["acts"], chunk, results, run)

    def _judge(self, items, valid, results, progress):
        from simhub.metrics.judge import JudgeRequest, parse_verdict

        todo = []
        for n in valid:
            label = items[n].dialogue.turns[items[n].turn_index].correctness
            if label in ("correct", "incorrect"):
                todo.append(n)
            else:
                verdict = parse_verdict(None, label)
                for m, reason in verdict.reasons.items():
                    self._null(results[n], m, reason)
        if not todo:
            return
        judge = self.judge_model()
        for chunk in self._chunks(todo, "judge", progress):
            def run(chunk=chunk):
                requests = []
                for n in chunk:
                    it = items[n]
                    turn = it.dialogue.turns[it.turn_index]
                    requests.append(JudgeRequest(it.dialogue, it.dialogue.turns[: it.turn_index], turn.content, turn.correctness, it.candidate))
                answers = judge.answer(requests)
                for n, answer, req in zip(chunk, answers, requests, strict=True):
                    verdict = parse_verdict(answer, req.real_label)
                    for m in ("correctness", "errors"):
                        if m in results[n].scores:
                            results[n].scores[m] = getattr(verdict, m)
                            if m in verdict.reasons:
                                results[n].details["null_reasons"][m] = verdict.reasons[m]
                    results[n].details["judge"] = {"answer": answer, "real_label": req.real_label}
            self._guard(["correctness", "errors"], chunk, results, run)

    def _tutor_response(self, items, valid, results, progress):
        model = self.tutor_model()
        for chunk in self._chunks(valid, "tutor_response", progress):
            def run(chunk=chunk):
                values = model.score([(items[n].dialogue, items[n].turn_index, items[n].candidate) for n in chunk])
                for n, v in zip(chunk, values, strict=True):
                    if v is None:
                        self._null(results[n], "tutor_response", "no tutor turn follows this student turn")
                    elif math.isfinite(v):
                        results[n].scores["tutor_response"] = v
            self._guard(["tutor_response"], chunk, results, run)

    def knowledge_cutoffs(self):
        """Service-mode cutoffs (a file, or ``kt_cutoffs.json`` of the KT model); None in paper mode."""
        from simhub.metrics.knowledge import KT_CUTOFFS_FILE, load_cutoffs

        mode = self.config.knowledge_cutoffs
        if mode == "paper":
            return None
        if mode != "model":
            return load_cutoffs(Path(mode))
        ref = self.model_ref("knowledge")
        source = ref.adapter or ref.model
        if Path(source).is_dir():
            return load_cutoffs(Path(source) / KT_CUTOFFS_FILE)
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(source, KT_CUTOFFS_FILE, revision=ref.adapter_revision if ref.adapter else ref.revision)
        except Exception as exc:
            raise ConfigError(f"knowledge cutoffs: {KT_CUTOFFS_FILE} not found for {source!r} ({type(exc).__name__})") from None
        return load_cutoffs(Path(path))

    def _knowledge(self, items, valid, results, progress):
        from simhub.metrics.knowledge import NoDelta, knowledge_deltas, knowledge_scores, paper_cutoffs

        tracer = self.knowledge_model()
        deltas: dict[int, object] = {}
        for chunk in self._chunks(valid, "knowledge", progress):
            def run(chunk=chunk):
                out = knowledge_deltas(tracer, [(items[n].dialogue, items[n].turn_index, items[n].candidate) for n in chunk])
                deltas.update(zip(chunk, out, strict=True))
            self._guard(["knowledge"], chunk, results, run)
        scored = [n for n in valid if n in deltas]
        for n in scored:
            if isinstance(deltas[n], NoDelta):
                self._null(results[n], "knowledge", deltas[n].reason)
        computed = [deltas[n] for n in scored]
        cutoffs = self.knowledge_cutoffs()
        if cutoffs is None:
            if not any(not isinstance(d, NoDelta) for d in computed):
                return {"qwk": None, "cutoffs": None, "cutoff_source": "paper"}
            cutoffs = paper_cutoffs(computed)
        per_item, summary = knowledge_scores(computed, cutoffs)
        for n, info in zip(scored, per_item, strict=True):
            if isinstance(deltas[n], NoDelta):
                continue
            results[n].scores["knowledge"] = info["score"]
            results[n].details["knowledge"] = {k: v for k, v in info.items() if k != "score"}
        summary = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in summary.items()}
        summary["cutoff_source"] = self.config.knowledge_cutoffs
        return summary


def reference_cutoffs(tracer, dialogues: Sequence[Dialogue], target: str | Path, meta: dict,
                      chunk_size: int = 128, where: str = "data") -> tuple[np.ndarray, int]:
    """Knowledge cutoffs from the real deltas of every student turn of ``dialogues``, saved to ``target``.

    ``meta`` (e.g. ``source``, ``model``) is stored next to ``n_deltas``; ``where`` names the
    dialogues in the error raised when they hold no student turn. Returns (cutoffs, real deltas pooled).
    """
    from tqdm.auto import tqdm

    from simhub.metrics.knowledge import knowledge_deltas, paper_cutoffs, pooled_real_deltas, save_cutoffs

    items = [(d, i, d.turns[i].content) for d in dialogues for i in d.student_turn_indices()]
    if not items:
        raise ConfigError(f"{where}: no student turns to compute cutoffs from")
    deltas = []
    size = max(1, chunk_size)
    for start in tqdm(range(0, len(items), size), desc="kt-cutoffs", unit="chunk"):
        deltas.extend(knowledge_deltas(tracer, items[start : start + size]))
    cutoffs = paper_cutoffs(deltas)
    count = int(pooled_real_deltas(deltas).size)
    save_cutoffs(target, cutoffs, {"n_deltas": count, **meta})
    return cutoffs, count


def compute_reference_cutoffs(profile: str, data: str, output: str | None = None, limit: int | None = None):
    """Compute knowledge cutoffs once on a reference split (real deltas) and store them.

    Returns (path written, cutoffs, number of real deltas pooled).
    """
    from simhub.metrics.knowledge import KT_CUTOFFS_FILE
    from simhub.profiles import load_profile, scorer_config
    from simhub.schema import read_jsonl

    config = scorer_config(load_profile(profile))
    if config.knowledge is None:
        raise ConfigError(f"profile {profile!r} has no knowledge model (scoring.metrics.knowledge)")
    dialogues = read_jsonl(data)[:limit] if limit else read_jsonl(data)
    scorer = Scorer(config)
    tracer = scorer.knowledge_model()
    ref = scorer.model_ref("knowledge")
    target = Path(output) if output else Path(ref.adapter or ref.model) / KT_CUTOFFS_FILE
    cutoffs, count = reference_cutoffs(tracer, dialogues, target,
                                       {"source": str(data), "model": config.knowledge.describe()},
                                       chunk_size=config.chunk_size, where=str(data))
    return target, cutoffs, count
