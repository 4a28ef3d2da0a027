"""Dialogue-level realism: whole simulated dialogues (rollouts) against the real ones on the same questions.

The statistics are the registered dialogue-level metrics (:mod:`simhub.evaluation.dialogue_level`).
This module prepares what they read, once (:class:`~simhub.evaluation.dialogue_level.DialogueData`):
turn labels, embeddings (the cosine metric's embedder), knowledge-tracing trajectories, the judge's
realness verdicts and the tutor-sensitivity outcomes; then it runs every metric through the
dialogue bootstrap.

Both sides are labelled with the same models (the act classifier; the correctness classifier, or the
judge's model when the profile has none), so labelling noise cancels. Values come with
dialogue-bootstrap 95% intervals: real dialogues are resampled, each with its simulated dialogues,
and every statistic is recomputed on the resample. With several rollouts per dialogue
(``--samples K``) the between-sample standard deviation of each statistic is reported too.

``tutor_sensitivity`` needs the simulator (and a tutor for the turn in between): for real prefixes
that end where the real student then answered correctly, the next tutor turn is the real one
(helpful) or a generic off-task turn (unhelpful), the student is simulated for two turns, and
Δ = P(correct within 2 | helpful) − P(correct within 2 | unhelpful). Real students cannot be
intervened on; their target is observational: P(correct within 2 | the tutor turn poses a task, i.e.
has labelled KCs) − P(correct within 2 | it does not).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.cache import ContentCache, fingerprint
from simhub.config import EmbedderConfig, JudgeConfig, ModelRef, Profile, cache_root
from simhub.errors import DataError
from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level import DialogueData, DialogueMetric, dialogue_metric_classes
from simhub.executors import BatchFailure, Executor, runs_here
from simhub.metrics import MetricContext
from simhub.metrics.acts import Acts
from simhub.metrics.cosine import Cosine
from simhub.metrics.judge import final_answer, judge_endpoint
from simhub.metrics.knowledge import Knowledge
from simhub.models import LoadOptions, Sampling, load_lm
from simhub.models.endpoint_lm import Answer, endpoint_answers
from simhub.progress import tqdm
from simhub.prompts import correctness_messages, realness_messages
from simhub.runformat import DIALOGUE_RESULTS_FILE, DialogueLevelResults, DialogueStatistic, write_dialogue_results
from simhub.schema import CORRECTNESS_LABELS, Dialogue, Turn, read_jsonl
from simhub.simulation import Simulator, Target
from simhub.simulation.tutor import MirrorTutor, Tutor, TutorRequest

log = logging.getLogger("simhub.evaluation")

OFF_TASK_TURNS = (
    "By the way, did you watch any football at the weekend?",
    "Let's take a little break. What's your favourite colour?",
    "Hmm, I've forgotten what I was going to ask. Never mind.",
    "Anyway, how is your day going so far?",
)

@dataclasses.dataclass
class DialogueEvalOptions:
    n_resamples: int = 1000
    seed: int = 0
    chunk_tokens: int = dm.DEFAULT_CHUNK_TOKENS
    #: Real prefixes used by tutor_sensitivity (a seeded sample; each costs up to four generations).
    sensitivity_prefixes: int = 60
    max_tokens: int = 200
    cache_dir: str | None = None
    no_cache: bool = False
    progress: bool = True


def load_sim(path: str | os.PathLike[str]) -> tuple[list[Dialogue], dict]:
    """Simulated dialogues from a JSONL file of dialogues or a ``simhub rollout`` folder, with the
    folder's ``rollout.json`` as JSON values (empty without one). A folder's files are read checked
    (:mod:`simhub.runformat`); a file is read as dialogues, which checks a rollout line's version too."""
    p = Path(path)
    if p.is_dir():
        from simhub.runformat import ROLLOUT_SUMMARY_FILE, read_rollout_dialogues, read_rollout_summary

        has_summary = (p / ROLLOUT_SUMMARY_FILE).is_file()
        info = msgspec.to_builtins(read_rollout_summary(p)) if has_summary else {}
        return read_rollout_dialogues(p), info
    return read_jsonl(p), {}


def _real_of(sim: Sequence[Dialogue], real: Sequence[Dialogue]) -> list[str]:
    """The real dialogue each simulated one belongs to: ``meta.real_id``, else the first real dialogue
    on the same question."""
    by_id = {d.id for d in real}
    by_question: dict[str, str] = {}
    for d in real:
        by_question.setdefault(" ".join(d.question.text.split()), d.id)
    out = []
    for i, d in enumerate(sim):
        rid = d.meta.get("real_id") if d.meta else None
        if rid is None or rid not in by_id:
            rid = by_question.get(" ".join(d.question.text.split()))
        if rid is None:
            raise DataError(f"sim[{i}] ({d.id!r}) matches no real dialogue", field=f"sim[{i}]")
        out.append(rid)
    return out


def check_inputs(real: Sequence[Dialogue], sim: Sequence[Dialogue]) -> None:
    """Refuse real and simulated dialogues that :func:`eval_dialogues` cannot compare (a DataError),
    so a caller can check them before it builds any model. Failed rollouts are left out, as there."""
    _checked(real, [d for d in sim if not (d.meta and d.meta.get("failed"))])


def _checked(real: Sequence[Dialogue], sim: Sequence[Dialogue]) -> list[str]:
    dm.check_same_questions(real, sim)
    if len(real) < 2:
        raise DataError(f"real: {len(real)} dialogue(s); a dialogue-bootstrap CI needs at least two", field="real")
    return _real_of(sim, real)


class Labeller:
    """Labels single student turns (act; correctness) with the profile's models, cached by content."""

    def __init__(self, profile: Profile, cache: ContentCache | None, executor: Executor | None = None):
        #: Where the labels are computed (:mod:`simhub.executors`); None: here. Elsewhere each worker
        #: builds this labeller once (its models loaded there) and this process alone writes the cache.
        self.executor, self.profile = executor, profile
        self._work: LabelWork | None = None  # built on the first chunk sent to the executor
        s = profile.scoring
        self.load = LoadOptions(backend=s.backend, device=s.device, batch_size=s.batch_size, share_base=s.share_base)
        self.context = MetricContext(load=self.load, mode="benchmark")
        self.acts = Acts(s.metrics.acts, self.context) if s.metrics.acts is not None else None
        self.correctness_ref: ModelRef | None = s.metrics.correctness_classifier
        judge = s.metrics.judge
        self.judge = judge
        # A plain local judge model can answer the classifier's prompt; a judge adapter is trained
        # for the judge's prompt only.
        if self.correctness_ref is None and judge is not None and judge.kind == "local" and judge.adapter is None:
            self.correctness_ref = judge.plain()
        self.cache = cache

    @property
    def no_correctness(self) -> str | None:
        """Why no turn can get a correctness label (see :meth:`correctness_labels`), or None when one can."""
        if self.correctness_ref is not None or (self.judge is not None and self.judge.kind == "openai"):
            return None
        if self.judge is not None:
            return ("no correctness labels: needs a judge endpoint (scoring.metrics.judge kind openai) or a "
                    "correctness classifier (scoring.metrics.correctness_classifier); a local judge adapter "
                    "answers only the judge's prompt")
        return ("no correctness labels: needs a judge endpoint (scoring.metrics.judge kind openai) or a "
                "correctness classifier (scoring.metrics.correctness_classifier)")

    def _cached(self, kind: str, model_key: str, items: list[tuple[Dialogue, int]], compute,
                method: str) -> list[str | None]:
        keys = [fingerprint([kind, model_key, d.id, [(t.role, t.content) for t in d.turns[: i + 1]]]) for d, i in items]
        out: list[str | None] = [self.cache.get(k) if self.cache else None for k in keys]
        todo = [n for n, v in enumerate(out) if v is None]
        if todo:
            for n, label in zip(todo, self._computed(method, compute, [items[n] for n in todo]), strict=True):
                out[n] = label
                if self.cache is not None and label is not None:
                    self.cache.put(keys[n], label)
        return out

    def _computed(self, method: str, compute, items: list[tuple[Dialogue, int]]) -> list[str | None]:
        """``compute(items)`` here, or ``method`` over chunks of them on the executor's workers (a chunk
        lost there has no labels, as a failed judge answer has none)."""
        if runs_here(self.executor):
            return compute(items)
        if self._work is None:
            self._work = LabelWork(self.profile)
        chunks = [items[k:k + LABEL_CHUNK] for k in range(0, len(items), LABEL_CHUNK)]
        out: list[list[str | None]] = [[] for _ in chunks]
        for i, labels in self.executor.map(self._work, "run", [(method, c) for c in chunks], keep=True):  # type: ignore[union-attr]
            if isinstance(labels, BatchFailure):
                log.error("%s: %d turns lost on the executor: %s", method, len(chunks[i]), labels.cause)
                labels = [None] * len(chunks[i])
            out[i] = labels
        return [label for chunk in out for label in chunk]

    def act_labels(self, items: list[tuple[Dialogue, int]]) -> list[str | None]:
        if self.acts is None:
            return [None] * len(items)
        key = fingerprint(msgspec.to_builtins(self.acts.config))
        return self._cached("act", key, items, lambda xs: self.acts.predict(
            [(d.turns[:i], d.turns[i].content, d) for d, i in xs]), "act_labels")

    def correctness_labels(self, items: list[tuple[Dialogue, int]]) -> list[str | None]:
        if self.correctness_ref is not None:
            ref = self.correctness_ref
            from simhub.models.embedding_classifier import classifier_at

            clf = classifier_at(ref)
            if clf is not None:  # the demo's: MiniLM features
                key = fingerprint([msgspec.to_builtins(ref), clf.digest])
                return self._cached("correctness", key, items, lambda xs: clf.predict_turns(
                    [(d.turns[:i], d.turns[i].content, d) for d, i in xs], device=self.load.device),
                    "correctness_labels")

            def compute(xs):
                lm = load_lm(ref, self.load)
                options = [[*lm.text_ids(label), lm.eot_id] for label in CORRECTNESS_LABELS]
                prompts = [lm.chat_ids(correctness_messages(d.turns[:i], d.turns[i].content, d)) for d, i in xs]
                best, _ = lm.choose(prompts, options)
                return [CORRECTNESS_LABELS[b] for b in best]

            return self._cached("correctness", fingerprint(msgspec.to_builtins(ref)), items, compute, "correctness_labels")
        if self.judge is not None and self.judge.kind == "openai":
            judge = self.judge

            def ask(xs):
                answers = ask_judge(judge, [correctness_messages(d.turns[:i], d.turns[i].content, d) for d, i in xs])
                out = []
                for answer in answers:
                    word = final_answer(answer.text).split()[:1] if answer.text is not None else []
                    out.append(next((lab for lab in CORRECTNESS_LABELS if word and word[0].startswith(lab)), None))
                return out

            return self._cached("correctness-judge", fingerprint(judge.model), items, ask, "correctness_labels")
        return [None] * len(items)


#: Turns per chunk a worker labels (:meth:`Labeller._computed`).
LABEL_CHUNK = 64


class LabelWork:
    """A worker's part of the labelling on another executor: a :class:`Labeller` of the same profile,
    with no cache (the driver writes it), built on the worker on first use; :meth:`run` labels a chunk."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self._labeller: Labeller | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"profile": self.profile, "_labeller": None}

    def run(self, batch: tuple[str, list[tuple[Dialogue, int]]]) -> list[str | None]:
        method, items = batch
        if self._labeller is None:
            self._labeller = Labeller(self.profile, None)
        return getattr(self._labeller, method)(items)


def ask_judge(judge: JudgeConfig, prompts: Sequence[list[dict[str, str]]]) -> list[Answer]:
    """The judge endpoint's answer (or failure cause) to each of the labeller's and the realness test's
    prompts: live requests (never the Batch API) at the profile's token limit, default 4,000, its
    reasoning effort (none by default) and the server's default temperature."""
    lm = judge_endpoint(judge, reasoning_effort=judge.reasoning_effort or None, batch=False)
    return endpoint_answers(lm, prompts, Sampling(max_tokens=judge.max_completion_tokens or 4000), temperature=False)


def _student_items(dialogues: Sequence[Dialogue]) -> list[tuple[Dialogue, int]]:
    return [(d, i) for d in dialogues for i in d.student_turn_indices()]


def _labelled(dialogues: Sequence[Dialogue], labeller: Labeller) -> list[Dialogue]:
    """Copies whose student turns carry the labeller's act and correctness (the same labeller on both sides)."""
    items = _student_items(dialogues)
    acts = labeller.act_labels(items)
    correct = labeller.correctness_labels(items)
    turns = {d.id: [msgspec.structs.replace(t, act=None, correctness=None) for t in d.turns] for d in dialogues}
    for (d, i), a, c in zip(items, acts, correct, strict=True):
        turns[d.id][i] = msgspec.structs.replace(turns[d.id][i], act=a, correctness=c)
    return [msgspec.structs.replace(d, turns=turns[d.id]) for d in dialogues]


def _trajectories(profile: Profile, dialogues: Sequence[Dialogue]) -> list[np.ndarray] | None:
    """Mastery (over all KCs) after each student turn, per dialogue; None without a KT model."""
    config = profile.scoring.metrics.knowledge
    if config is None:
        return None
    s = profile.scoring
    tracer = Knowledge(config, MetricContext(load=LoadOptions(backend="transformers", device=s.device,
                                                              batch_size=s.batch_size, share_base=s.share_base))).load()
    requests, owners = [], []
    for n, d in enumerate(dialogues):
        for i in d.student_turn_indices():
            requests.append((d, d.turns[: i + 1], d.all_kcs))
            owners.append(n)
    masteries = tracer.mastery_batch(requests) if requests else []
    out: list[list[np.ndarray]] = [[] for _ in dialogues]
    for n, m in zip(owners, masteries, strict=True):
        out[n].append(m)
    return [np.asarray(t) if t else np.zeros((0, 1)) for t in out]


def _pi_verdicts(profile: Profile, real: Sequence[Dialogue], sim: Sequence[Dialogue], real_ids: list[str],
                 seed: int) -> dict[str, list[tuple[str, str]]] | None:
    """Judge verdicts of PS (real vs its simulated), HH (real vs real, same question) and PP (sim vs sim,
    same real dialogue) pairs, each with the real dialogue id it belongs to; None without an endpoint judge."""
    judge = profile.scoring.metrics.judge
    if judge is None or judge.kind != "openai":
        return None
    by_id = {d.id: d for d in real}
    by_question: dict[str, list[Dialogue]] = defaultdict(list)
    for d in real:
        by_question[" ".join(d.question.text.split())].append(d)
    sims_of: dict[str, list[Dialogue]] = defaultdict(list)
    for d, rid in zip(sim, real_ids, strict=True):
        sims_of[rid].append(d)
    pairs: list[tuple[str, str, Dialogue, Dialogue, int]] = []  # kind, real id, under test, other, sample
    for rid, sims in sims_of.items():
        real_d = by_id[rid]
        for k, s in enumerate(sims):
            pairs.append(("ps", rid, s, real_d, k))
        others = [o for o in by_question[" ".join(real_d.question.text.split())] if o.id != rid]
        if others:
            pairs.append(("hh", rid, others[0], real_d, 0))
        if len(sims) > 1:
            pairs.append(("pp", rid, sims[1], sims[0], 0))
    messages, firsts = [], []
    for kind, rid, test, other, k in pairs:
        first = dm.under_test_first(seed, f"{kind}:{test.id}", k)
        a, b = (test, other) if first else (other, test)
        messages.append(realness_messages(by_id[rid].question.text, a.turns, b.turns))
        firsts.append(first)
    # The pair's kind, dialogue and sample index are written into the request, so two judgements of
    # identical texts (two samples that happen to agree) are two requests, never one cached answer.
    for m, (kind, _, test, _, k) in zip(messages, pairs, strict=True):
        m[-1] = {**m[-1], "content": f"(pair {kind}:{test.id}:{k})\n\n{m[-1]['content']}"}
    out: dict[str, list[tuple[str, str]]] = {"ps": [], "hh": [], "pp": []}
    for (kind, rid, *_), first, answer in zip(pairs, firsts, ask_judge(judge, messages), strict=True):
        if answer.text is None:
            continue
        word = final_answer(answer.text).strip(".")
        choice = "tie" if word.startswith("tie") else word[:1].upper()
        try:
            out[kind].append((rid, dm.verdict_from_choice(choice, first)))
        except DataError:
            out[kind].append((rid, "tie"))
    return out


def _sensitivity(simulator: Simulator, tutor: Tutor | None, real: Sequence[Dialogue], labeller: Labeller,
                 options: DialogueEvalOptions) -> dict[str, list[tuple[str, bool | None]]]:
    """Outcomes (correct within two student turns) per condition, each with its real dialogue id."""
    rng = random.Random(options.seed)
    helpful_sites = [(d, j) for d in real for j in range(len(d.turns) - 1)
                     if d.turns[j].role == "tutor" and d.turns[j + 1].role == "student"
                     and d.turns[j + 1].correctness == "correct" and j > 0]
    rng.shuffle(helpful_sites)
    sites = helpful_sites[: options.sensitivity_prefixes]
    tutor = tutor or MirrorTutor("real-tutor")
    out: dict[str, list[tuple[str, bool | None]]] = {"helpful": [], "unhelpful": []}
    sampling = Sampling(temperature=0.0, max_tokens=options.max_tokens)
    for condition in ("helpful", "unhelpful"):
        starts = []
        for n, (d, j) in enumerate(sites):
            turn = d.turns[j] if condition == "helpful" else Turn(role="tutor", content=OFF_TASK_TURNS[n % len(OFF_TASK_TURNS)])
            starts.append(msgspec.structs.replace(d, id=f"{d.id}@{j}:{condition}", turns=[*d.turns[:j], turn]))
        first = simulator.simulate([Target(s, len(s.turns)) for s in starts], sampling)
        after_first = [msgspec.structs.replace(s, turns=[*s.turns, Turn(role="student", content=r.candidates[0].text if r.candidates else "")])
                       for s, r in zip(starts, first, strict=True)]
        reals = [d for d, _ in sites]
        tutor_turns = tutor.respond([TutorRequest(s, r) for s, r in zip(after_first, reals, strict=True)], sampling)
        with_tutor = [msgspec.structs.replace(s, turns=[*s.turns, Turn(role="tutor", content=t.text or "Can you try again?")])
                      for s, t in zip(after_first, tutor_turns, strict=True)]
        second = simulator.simulate([Target(s, len(s.turns)) for s in with_tutor], sampling)
        done = [msgspec.structs.replace(s, turns=[*s.turns, Turn(role="student", content=r.candidates[0].text if r.candidates else "")])
                for s, r in zip(with_tutor, second, strict=True)]
        items = [(s, len(s.turns) - 3) for s in done] + [(s, len(s.turns) - 1) for s in done]
        labels = labeller.correctness_labels(items)
        half = len(done)
        for n, (d, _) in enumerate(sites):
            a, b = labels[n], labels[half + n]
            outcome = None if a is None and b is None else ("correct" in (a, b))
            out[condition].append((d.id, outcome))
    return out


def _real_sensitivity(real: Sequence[Dialogue]) -> dict[str, list[tuple[str, bool | None]]]:
    out: dict[str, list[tuple[str, bool | None]]] = {"helpful": [], "unhelpful": []}
    for d in real:
        for j in range(len(d.turns) - 1):
            if d.turns[j].role != "tutor" or d.turns[j + 1].role != "student" or j == 0:
                continue
            nxt = [t.correctness for t in d.turns[j + 1 :] if t.role == "student"][:2]
            known = [c for c in nxt if c is not None]
            outcome = None if not known else "correct" in known
            out["helpful" if d.turns[j].kcs else "unhelpful"].append((d.id, outcome))
    return out


def _run_metrics(data: DialogueData) -> tuple[dict[str, float | None], dict[str, Callable], dict[str, str], dict]:
    """Every registered dialogue metric that applies to ``data``, in registry order: the whole-sample
    value of each output, per output a function of resampled real-dialogue indices, why each null
    value is null (where known) and the details behind the values."""
    values: dict[str, float | None] = {}
    fns: dict[str, Callable[[np.ndarray], float | None]] = {}
    reasons: dict[str, str] = {}
    details: dict[str, dict] = {}
    for cls in dialogue_metric_classes().values():
        if not cls.applies(data):
            continue
        metric = cls(data)
        try:
            metric.prepare()
        except DataError as exc:
            values.update(dict.fromkeys(cls.output_names()))
            reasons.update(dict.fromkeys(cls.output_names(), str(exc)))
            continue
        for name in cls.output_names():
            fns[name] = _undefined_on_error(metric, name)
            try:
                values[name] = metric.estimate(name)
            except DataError as exc:
                values[name] = None
                reasons[name] = str(exc)
            # The cause behind a label missing everywhere (e.g. "no student turn is labelled correct").
            missing = next((data.unavailable[label] for label in cls.labels if label in data.unavailable), None)
            if values[name] is None and missing:
                reasons[name] = missing
        details.update(metric.details())
    return values, fns, reasons, details


def _undefined_on_error(metric: DialogueMetric, output: str) -> Callable[[np.ndarray], float | None]:
    def statistic(idx: np.ndarray) -> float | None:
        try:
            return metric.statistic(output, idx)
        except DataError:
            return None
    return statistic


def eval_dialogues(profile: Profile, real: list[Dialogue], sim: list[Dialogue], options: DialogueEvalOptions | None = None,
                   *, simulator: Simulator | None = None, tutor: Tutor | None = None,
                   executor: Executor | None = None) -> dict:
    """Every registered dialogue-level statistic with its dialogue-bootstrap 95% CI (see the module
    docstring and :mod:`simhub.evaluation.dialogue_level`). ``executor`` (:mod:`simhub.executors`;
    default: this process) labels the turns; the statistics are computed here."""
    from simhub.stats import cluster_bootstrap

    options = options or DialogueEvalOptions()
    failed = [d for d in sim if d.meta and d.meta.get("failed")]
    sim = [d for d in sim if not (d.meta and d.meta.get("failed"))]
    real_ids = _checked(real, sim)
    cache = None if options.no_cache else ContentCache(cache_root(options.cache_dir), "labels")
    labeller = Labeller(profile, cache, executor)
    bar = tqdm(total=5, desc="eval-dialogues", disable=not options.progress)
    real_l, sim_l = _labelled(real, labeller), _labelled(sim, labeller)
    bar.update(1)
    # The turn-level cosine metric's embedder (its model, device and batch size), for detectability.
    embedder = Cosine(profile.scoring.metrics.cosine or EmbedderConfig(), labeller.context).load()
    trajectories = None
    traj_real = _trajectories(profile, real_l)
    if traj_real is not None:
        trajectories = (traj_real, _trajectories(profile, sim_l))
    bar.update(1)
    verdicts = _pi_verdicts(profile, real, sim, real_ids, options.seed)
    bar.update(1)
    sensitivity = None
    if simulator is not None:
        sensitivity = (_real_sensitivity(real), _sensitivity(simulator, tutor, real, labeller, options))
    bar.update(1)
    embed = _memo_encode(embedder.encode)  # the stability pass below embeds the same real texts again
    unavailable = {"correctness": labeller.no_correctness} if labeller.no_correctness else {}
    data = DialogueData(real_l, sim_l, real_ids, seed=options.seed, chunk_tokens=options.chunk_tokens, embed=embed,
                        trajectories=trajectories, verdicts=verdicts, sensitivity=sensitivity, unavailable=unavailable)
    values, fns, null_reasons, details = _run_metrics(data)
    clusters = data.ids
    metrics: dict[str, dict] = {}
    for name, value in values.items():
        ci = None
        if name in fns and value is not None:
            ci = cluster_bootstrap(clusters, fns[name], n_resamples=options.n_resamples, seed=options.seed).ci
        metrics[name] = {"value": value, "ci95": list(ci) if ci else None, "n": len(real)}
    bar.update(1)
    bar.close()
    # Stability over rollout samples: each statistic recomputed on each sample's dialogues alone (those
    # that need only the labelled dialogues and the embedder).
    samples = sorted({d.meta.get("sample", 0) for d in sim if d.meta})
    stability: dict[str, float | None] = {}
    if len(samples) > 1:
        per_sample: dict[str, list[float]] = defaultdict(list)
        for k in samples:
            keep = [n for n, d in enumerate(sim_l) if d.meta.get("sample", 0) == k]
            vals, *_ = _run_metrics(DialogueData(real_l, [sim_l[n] for n in keep], [real_ids[n] for n in keep],
                                                 seed=options.seed, chunk_tokens=options.chunk_tokens, embed=embed))
            for name, v in vals.items():
                if v is not None:
                    per_sample[name].append(v)
        stability = {name: (dm.stability_sd(v) if len(v) > 1 else None) for name, v in per_sample.items()}
    figures = _figure_data(real_l, sim_l, trajectories)
    # null_reasons: why a statistic is null, for the report (optional: older files lack it).
    return {"metrics": metrics, "null_reasons": null_reasons, "details": details, "stability_sd": stability,
            "failed_rollouts": len(failed), "failures": [{"id": d.id, "cause": d.meta.get("failed")} for d in failed[:50]],
            "real_dialogues": len(real), "sim_dialogues": len(sim), "samples": len(samples) or 1,
            "bootstrap": {"resamples": options.n_resamples, "seed": options.seed, "unit": "real dialogue"},
            "figures": figures}


def _memo_encode(encode: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    """``encode`` that embeds each distinct text once per run."""
    seen: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in seen))
        if todo:
            seen.update(zip(todo, encode(todo), strict=True))
        return np.stack([seen[t] for t in texts]) if texts else encode(texts)

    return embed


def _figure_data(real: list[Dialogue], sim: list[Dialogue], trajectories) -> dict:
    ri, si = dm.dialogue_inputs(real), dm.dialogue_inputs(sim)

    def counts(labels):
        out: dict[str, int] = defaultdict(int)
        for a in labels:
            out[a] += 1
        return dict(out)

    data: dict[str, Any] = {"acts": {"real": counts(ri.acts), "sim": counts(si.acts)},
                            "lengths": {"real": [dm.word_count(t) for t in ri.texts], "sim": [dm.word_count(t) for t in si.texts]}}
    if trajectories is not None:
        def mean_curve(trajs):
            longest = max((len(t) for t in trajs), default=0)
            return [float(np.mean([t[k].mean() for t in trajs if len(t) > k])) for k in range(min(longest, 20))]

        data["mastery"] = {"real": mean_curve(trajectories[0]), "sim": mean_curve(trajectories[1])}
    return data


def write_results(results: dict, output: str | os.PathLike[str], info: dict) -> Path:
    """Write ``dialogue_results.json`` into ``output`` and return it. ``--output`` may name a
    ``simhub eval`` run directory, whose files stay as they are: the report then shows both levels
    for that simulator; a folder with only this file is a dialogue-level run of its own. ``info`` and
    ``results`` are fields of :class:`~simhub.runformat.DialogueLevelResults`."""
    target = Path(output) / DIALOGUE_RESULTS_FILE
    fields = {**info, **results}
    metrics = {name: DialogueStatistic(value=m.get("value"), ci95=tuple(m["ci95"]) if m.get("ci95") else None, n=m.get("n"))
               for name, m in fields.pop("metrics", {}).items()}
    write_dialogue_results(target, DialogueLevelResults(**fields, metrics=metrics))
    return target
