"""The ``knowledge`` metric: knowledge-acquisition similarity from an LLM knowledge tracer (docs/protocol.md §3).

An LLMKT model (Scarlatos et al. 2025) reads the dialogue so far and answers, for each knowledge
component (KC), whether the student has mastered it; the KC's mastery is the softmax probability
of ``True`` over {``True``, ``False``} at the answer position.

For a real student turn ``i`` with a simulated candidate ``ŝ_i``:

* ``z_i``   mastery with the real history up to and including turn ``i``;
* ``ẑ_i``   the same with turn ``i``'s text replaced by the candidate;
* ``z_prev`` mastery up to and including the previous (real) student turn.

Deltas ``ΔZ = z_i − z_prev`` and ``ΔẐ = ẑ_i − z_prev`` are mapped to five mass-based bins whose
cutoffs are the 0.2/0.4/0.6/0.8 quantiles of real deltas, and the turn's score is
``1 − Σ_k |q_k − q̂_k| / (4·|C|)``. The first student turn of a dialogue has no delta (null).

Two cutoff modes:

* paper mode: cutoffs from the evaluated set itself (:func:`paper_cutoffs` on the pooled real
  deltas, after :func:`knowledge_deltas` has run over every item);
* service mode: cutoffs computed once on a reference set and shipped with the KT model as
  ``kt_cutoffs.json`` (:func:`save_cutoffs` / :func:`load_cutoffs`), so that a single turn can be
  scored.

Packing. All KCs of one prompt share a single forward pass: the token sequence is the context
followed by one question segment per KC. A 4-D additive attention mask lets the context attend
causally to itself and each KC segment attend to the whole context and causally to itself, but
never to another KC segment; position ids of every segment restart at ``len(context)``. Each
segment therefore sees exactly what it would see if it were alone after the context, which is why
the packed result equals running each KC separately.

Precision. ``kt_dtype: bfloat16`` reproduces the reference, whose bf16 model takes the True/False
softmax in bf16: each mastery is rounded to bf16 (:func:`true_probability`), so many real deltas
become exactly 0 (``benchmarks/bench_kt_dtype.py`` measures how many). Prompts are tokenised as
plain text (no chat template) with the BOS token first; the training code must build prompts with
the same :func:`build_kt_prompt` / :func:`collate_packed` so that train and evaluation inputs agree.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from simhub.config import KnowledgeConfig
from simhub.errors import ConfigError
from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem
from simhub.models import LanguageModel, load_lm
from simhub.models.packing import PackedPrompt, collate_packed
from simhub.prompts import kt_context, kt_question
from simhub.schema import Dialogue, Turn, atomic_write_bytes

__all__ = [
    "KT_CUTOFFS_FILE",
    "NUM_BINS",
    "QUANTILES",
    "KTPrompt",
    "Knowledge",
    "KnowledgeDeltas",
    "KnowledgeTracer",
    "NoDelta",
    "build_kt_prompt",
    "collate_packed",
    "knowledge_deltas",
    "knowledge_scores",
    "load_cutoffs",
    "paper_cutoffs",
    "pooled_real_deltas",
    "quadratic_weighted_kappa",
    "quantile_cutoffs",
    "quantize",
    "round_to_bfloat16",
    "save_cutoffs",
    "scores_from_details",
    "similarity",
    "true_false_ids",
    "true_probability",
]

#: Number of mass-based bins (quantile categories 0..4).
NUM_BINS = 5
#: Quantile levels of the bin cutoffs.
QUANTILES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
#: File name of the shipped service-mode cutoffs, next to the KT model.
KT_CUTOFFS_FILE = "kt_cutoffs.json"
#: Answer texts whose first tokens are compared. The question ends with ``"Answer:"`` and a
#: byte-level BPE tokenizer (Llama 3) writes the following word with its leading space as one
#: token (``"ĠTrue"``), so that space-prefixed token is what a model trained on
#: ``"... Answer: True"`` predicts; the bare ``"True"`` token would almost never follow ``":"``.
TRUE_TEXT = " True"
FALSE_TEXT = " False"

FIRST_TURN_REASON = "first student turn has no delta"


# ---------------------------------------------------------------------------------- binning


def quantile_cutoffs(deltas: np.ndarray | Sequence[float]) -> np.ndarray:
    """The 0.2/0.4/0.6/0.8 quantiles of ``deltas`` (numpy's default ``linear`` method).

    Raises:
        ValueError: if there are no deltas (or any is NaN), since no cutoffs can be derived.
    """
    values = np.asarray(deltas, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("cannot compute knowledge cutoffs from zero deltas")
    if np.isnan(values).any():
        raise ValueError("knowledge deltas contain NaN")
    return np.quantile(values, QUANTILES)


def quantize(
    values: np.ndarray | Sequence[float] | float, cutoffs: np.ndarray | Sequence[float]
) -> np.ndarray:
    """Bin of each value: the first index whose cutoff is strictly greater than it, else 4.

    A value equal to a cutoff therefore lands in the bin above it, as in the reference
    (``val < cutoff``). ``cutoffs`` must be sorted ascending, which quantiles always are; that
    makes the rule a right-sided ``searchsorted``.
    """
    cut = np.asarray(cutoffs, dtype=np.float64)
    return np.searchsorted(cut, np.asarray(values, dtype=np.float64), side="right").astype(np.int64)


def similarity(real_q: np.ndarray | Sequence[int], sim_q: np.ndarray | Sequence[int]) -> float:
    """``1 − Σ_k |q_k − q̂_k| / (4·|C|)``: 1 when every KC falls in the same bin, 0 at maximal distance."""
    a = np.asarray(real_q, dtype=np.int64).ravel()
    b = np.asarray(sim_q, dtype=np.int64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"real and simulated quantiles differ in length: {a.size} vs {b.size}")
    if a.size == 0:
        raise ValueError("similarity of zero knowledge components is undefined")
    return float(1.0 - np.abs(a - b).sum() / ((NUM_BINS - 1) * a.size))


def quadratic_weighted_kappa(a: np.ndarray | Sequence[int], b: np.ndarray | Sequence[int]) -> float:
    """Quadratic-weighted Cohen's kappa of two ratings of bins 0..4, as the reference computes it.

    The reference calls ``sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic")`` without
    ``labels`` (FIDELITY.md, knowledge QWK): the categories are the bins that occur in ``a`` or
    ``b``, sorted, and the quadratic weight is the squared difference of their *ranks* among those,
    not of the bin numbers. With all five bins present this is the kappa over 0..4; with a bin
    missing from both ratings (which the set's own cutoffs do not prevent: a cutoff shared by two
    quantiles leaves the bin between them empty) the ranks close up, and the value follows.

    Degenerate inputs: no ratings → NaN; a single category in both ratings → NaN, as sklearn gives
    (the chance-corrected formula is 0/0).
    """
    x = np.asarray(a, dtype=np.int64).ravel()
    y = np.asarray(b, dtype=np.int64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"ratings differ in length: {x.size} vs {y.size}")
    if x.size == 0:
        return math.nan
    if ((x < 0) | (x >= NUM_BINS) | (y < 0) | (y >= NUM_BINS)).any():
        raise ValueError(f"ratings must be integers in 0..{NUM_BINS - 1}")
    categories = np.union1d(x, y)
    n = categories.size
    if n < 2:
        return math.nan
    rx, ry = np.searchsorted(categories, x), np.searchsorted(categories, y)
    observed = np.zeros((n, n), dtype=np.float64)
    np.add.at(observed, (rx, ry), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / x.size
    idx = np.arange(n)
    weights = (idx[:, None] - idx[None, :]) ** 2
    return float(1.0 - (weights * observed).sum() / (weights * expected).sum())


# ---------------------------------------------------------------------------------- cutoffs file


def _check_cutoffs(values: Any, where: str) -> np.ndarray:
    if not isinstance(values, list | tuple | np.ndarray):
        raise ConfigError(f"{where}: 'cutoffs' must be a list of {len(QUANTILES)} numbers")
    if any(isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer) for v in values):
        raise ConfigError(f"{where}: 'cutoffs' must be a list of {len(QUANTILES)} numbers")
    cut = np.asarray(values, dtype=np.float64)
    if cut.shape != (len(QUANTILES),):
        raise ConfigError(f"{where}: 'cutoffs' must hold exactly {len(QUANTILES)} numbers, got {cut.size}")
    if not np.isfinite(cut).all():
        raise ConfigError(f"{where}: 'cutoffs' must be finite numbers")
    if (np.diff(cut) < 0).any():
        raise ConfigError(f"{where}: 'cutoffs' must be sorted ascending")
    return cut


def save_cutoffs(
    path: str | os.PathLike[str], cutoffs: np.ndarray | Sequence[float], meta: dict | None = None
) -> None:
    """Atomically write ``kt_cutoffs.json``.

    The file holds ``cutoffs`` (4 floats), ``quantiles``, ``n_deltas`` and ``source`` (taken from
    ``meta``, null when absent) and every other key of ``meta`` (e.g. the KT model's revision),
    so a shipped file says where its numbers came from.
    """
    meta = dict(meta or {})
    cut = _check_cutoffs(list(np.asarray(cutoffs, dtype=np.float64).ravel()), str(path))
    record = {
        "cutoffs": [float(c) for c in cut],
        "quantiles": list(QUANTILES),
        "n_deltas": meta.pop("n_deltas", None),
        "source": meta.pop("source", None),
        **meta,
    }
    try:
        data = json.dumps(record, indent=2, allow_nan=False).encode() + b"\n"
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: cutoffs metadata is not JSON-serialisable ({exc})") from None
    atomic_write_bytes(path, data)


def load_cutoffs(path: str | os.PathLike[str]) -> np.ndarray:
    """Read the 4 cutoffs from a ``kt_cutoffs.json``; a missing or invalid file raises ConfigError."""
    path = Path(path)
    how = (
        "create it with `simhub kt-cutoffs` on a reference set (it pools the real deltas), "
        "or score in paper mode, which derives cutoffs from the evaluated set"
    )
    if not path.is_file():
        raise ConfigError(f"{path}: knowledge cutoffs file not found; {how}")
    try:
        record = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a valid knowledge cutoffs file ({exc}); {how}") from None
    if not isinstance(record, dict) or "cutoffs" not in record:
        raise ConfigError(f"{path}: not a valid knowledge cutoffs file (no 'cutoffs' key); {how}")
    return _check_cutoffs(record["cutoffs"], str(path))


# ---------------------------------------------------------------------------------- prompts and tracer

#: A packed LLMKT prompt: the shared context, then one question segment per KC.
KTPrompt = PackedPrompt


def round_to_bfloat16(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """``values`` rounded to the nearest bfloat16 (ties to even), as float64: what a softmax taken in
    bf16 returns. Done on float32 bit patterns so that scoring does not need torch for it."""
    bits = np.asarray(values, dtype=np.float32).ravel().view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(np.float64).reshape(np.shape(values))


def true_probability(logp_true: np.ndarray | Sequence[float], logp_false: np.ndarray | Sequence[float],
                     dtype: str = "float32") -> np.ndarray:
    """A KC's mastery from the log-probabilities of the two answers: the softmax over {True, False}
    (the full-vocabulary normalisation cancels out), as float64. With ``dtype="bfloat16"`` it is
    rounded to bf16, what the reference's softmax of its bf16 model's two logits returns: a value of
    0.5 or more is then a multiple of 1/256."""
    p_true = 1.0 / (1.0 + np.exp(np.asarray(logp_false, dtype=np.float64) - np.asarray(logp_true, dtype=np.float64)))
    return round_to_bfloat16(p_true) if dtype == "bfloat16" else p_true


def true_false_ids(tokenizer) -> tuple[int, int]:
    """First token ids of ``" True"`` and ``" False"``; see :data:`TRUE_TEXT` for the choice of space."""
    t = tokenizer.encode(TRUE_TEXT, add_special_tokens=False)
    f = tokenizer.encode(FALSE_TEXT, add_special_tokens=False)
    if not t or not f or t[0] == f[0]:
        # A tokenizer that splits off the space would make both answers the same token and
        # every mastery exactly 0.5; fail loudly instead of reporting a meaningless metric.
        raise ConfigError(
            f"knowledge tracer: the tokenizer does not tell {TRUE_TEXT!r} from {FALSE_TEXT!r} by their "
            f"first token (ids {t} and {f})", field="knowledge.model"
        )
    return t[0], f[0]


def build_kt_prompt(tokenizer, dialogue: Dialogue, history: list[Turn], kcs: list[str], persona: str = "ocean") -> KTPrompt:
    """Token ids of the packed prompt asking about ``kcs`` after ``history`` (plain text, BOS first).

    The context lists all of the dialogue's KCs whatever ``kcs`` asks about (training asks about a
    turn's labelled KCs, evaluation about all). Context and questions are tokenised separately so
    that every KC segment has the same ids however many KCs are packed.
    """
    context = tokenizer.encode(kt_context(dialogue, history, persona=persona), add_special_tokens=False)
    if tokenizer.bos_token_id is not None:
        context = [tokenizer.bos_token_id, *context]
    ids = list(context)
    segments = []
    for kc in kcs:
        question = tokenizer.encode(kt_question(kc), add_special_tokens=False)
        segments.append((len(ids), len(ids) + len(question)))
        ids.extend(question)
    return KTPrompt(input_ids=ids, context_len=len(context), segments=segments)


MasteryRequest = tuple[Dialogue, list[Turn], list[str]]


class KnowledgeTracer:
    """An LLMKT model: KC mastery probabilities of a student after a dialogue history.

    Each KC question is its own sequence (context + question) read with
    :meth:`~simhub.models.LanguageModel.next_token_logprobs`; the transformers backend packs them
    as prefix trees, so the shared context is encoded once (a 4-D mask, positions restarting after
    the context), exactly the layout training uses.
    """

    def __init__(self, lm: LanguageModel, persona: str = "ocean", dtype: str = "float32"):
        if dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"knowledge tracer: kt_dtype {dtype!r} is not float32 or bfloat16", field="knowledge.kt_dtype")
        self.lm, self.persona, self.dtype = lm, persona, dtype
        if getattr(lm, "can_pack", True) is False:
            # Flash kernels take no arbitrary mask; packing would silently let KCs see each other.
            raise ConfigError("knowledge tracer: the model's attention implementation cannot take a 4-D mask; "
                              "use sdpa or eager", field="knowledge.model")
        self.true_id, self.false_id = true_false_ids(lm.tokenizer)

    def prompt(self, dialogue: Dialogue, history: list[Turn], kcs: list[str]) -> KTPrompt:
        return build_kt_prompt(self.lm.tokenizer, dialogue, history, kcs, persona=self.persona)

    def mastery(self, dialogue: Dialogue, history_turns: list[Turn], kcs: list[str]) -> np.ndarray:
        """P(True) per KC, shape ``(len(kcs),)``, float64."""
        return self.mastery_batch([(dialogue, history_turns, kcs)])[0]

    def mastery_batch(self, requests: Sequence[MasteryRequest]) -> list[np.ndarray]:
        """:meth:`mastery` for many ``(dialogue, history_turns, kcs)`` requests; requests that render
        to the same prompt (``z_prev`` of one turn is ``z_i`` of the previous one) run once."""
        unique: dict[tuple[int, ...], int] = {}
        prompts: list[KTPrompt] = []
        slot_of: list[int] = []
        for dialogue, history, kcs in requests:
            prompt = self.prompt(dialogue, list(history), list(kcs))
            key = (*prompt.input_ids, -1, *(s for span in prompt.segments for s in span))
            if key not in unique:
                unique[key] = len(prompts)
                prompts.append(prompt)
            slot_of.append(unique[key])
        results = self._run(prompts)
        return [results[s].copy() for s in slot_of]

    def _run(self, prompts: list[KTPrompt]) -> list[np.ndarray]:
        seqs, owners = [], []
        for i, p in enumerate(prompts):
            context = p.input_ids[: p.context_len]
            for start, end in p.segments:
                seqs.append(context + p.input_ids[start:end])
                owners.append(i)
        out: list[list[float]] = [[] for _ in prompts]
        if seqs:
            logp = self.lm.next_token_logprobs(seqs, [self.true_id, self.false_id])
            # The reference's softmax runs on the bf16 model's logits and returns bf16 (kt_dtype: bfloat16).
            p_true = true_probability(logp[:, 0], logp[:, 1], self.dtype)
            for owner, value in zip(owners, p_true, strict=True):
                out[owner].append(float(value))
        return [np.asarray(v, dtype=np.float64) for v in out]


# ---------------------------------------------------------------------------------- per-item metric


@dataclass(frozen=True)
class KnowledgeDeltas:
    """Mastery vectors (one entry per KC of ``kcs``) around one scored student turn."""

    kcs: list[str]
    z_prev: np.ndarray
    z_real: np.ndarray
    z_sim: np.ndarray

    @property
    def real(self) -> np.ndarray:
        """ΔZ = z_i − z_prev."""
        return self.z_real - self.z_prev

    @property
    def sim(self) -> np.ndarray:
        """ΔẐ = ẑ_i − z_prev."""
        return self.z_sim - self.z_prev


@dataclass(frozen=True)
class NoDelta:
    """The metric does not apply to this item; ``reason`` says why (becomes a null score)."""

    reason: str


DeltaResult = KnowledgeDeltas | NoDelta


def knowledge_deltas(
    tracer: KnowledgeTracer, items: Sequence[tuple[Dialogue, int, str]]
) -> list[DeltaResult]:
    """Phase 1: real and simulated mastery deltas of each ``(dialogue, turn_index, candidate)``.

    ``turn_index`` must be a real student turn (SchemaError otherwise). KCs are
    ``dialogue.all_kcs``. All mastery requests of all items go to one :meth:`mastery_batch`
    call, which runs each distinct prompt once.
    """
    requests: list[MasteryRequest] = []
    plan: list[tuple[list[str], int] | NoDelta] = []
    for dialogue, index, candidate in items:
        dialogue.check_student_turn(index)
        previous = [j for j in dialogue.student_turn_indices() if j < index]
        if not previous:
            plan.append(NoDelta(FIRST_TURN_REASON))
            continue
        kcs = dialogue.all_kcs
        turns = dialogue.turns
        simulated = msgspec.structs.replace(turns[index], content=candidate)
        plan.append((kcs, len(requests)))
        requests.append((dialogue, turns[: previous[-1] + 1], kcs))
        requests.append((dialogue, turns[: index + 1], kcs))
        requests.append((dialogue, [*turns[:index], simulated], kcs))
    masteries = tracer.mastery_batch(requests) if requests else []
    results: list[DeltaResult] = []
    for entry in plan:
        if isinstance(entry, NoDelta):
            results.append(entry)
            continue
        kcs, at = entry
        results.append(
            KnowledgeDeltas(kcs=kcs, z_prev=masteries[at], z_real=masteries[at + 1], z_sim=masteries[at + 2])
        )
    return results


def pooled_real_deltas(deltas_list: Sequence[DeltaResult]) -> np.ndarray:
    """All real deltas pooled over KCs and items (null items skipped), as the cutoffs use them."""
    parts = [d.real for d in deltas_list if isinstance(d, KnowledgeDeltas)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def paper_cutoffs(deltas_list: Sequence[DeltaResult]) -> np.ndarray:
    """Paper mode: cutoffs from the evaluated set's own real deltas (ValueError when there are none)."""
    return quantile_cutoffs(pooled_real_deltas(deltas_list))


def _floats(values: np.ndarray) -> list[float]:
    return [float(v) for v in values]


def knowledge_scores(
    deltas_list: Sequence[DeltaResult], cutoffs: np.ndarray | Sequence[float]
) -> tuple[list[dict], dict]:
    """Phase 2: per-item scores and details, and the dataset summary, given ``cutoffs``.

    Per item (JSON-ready): ``score`` (float, or None for a null item), ``kcs``, ``real_deltas``,
    ``sim_deltas``, ``real_quantiles``, ``sim_quantiles`` (lists; None for a null item), and
    ``reason`` on null items. Summary: ``qwk`` over the pooled quantiles of scored items (None
    when no item was scored), ``n_scored``, ``n_null`` and the ``cutoffs`` used.
    """
    cut = np.asarray(cutoffs, dtype=np.float64)
    per_item: list[dict] = []
    all_real: list[np.ndarray] = []
    all_sim: list[np.ndarray] = []
    for d in deltas_list:
        if isinstance(d, NoDelta):
            per_item.append(
                {
                    "score": None,
                    "reason": d.reason,
                    "kcs": None,
                    "real_deltas": None,
                    "sim_deltas": None,
                    "real_quantiles": None,
                    "sim_quantiles": None,
                }
            )
            continue
        real_q, sim_q = quantize(d.real, cut), quantize(d.sim, cut)
        all_real.append(real_q)
        all_sim.append(sim_q)
        per_item.append(
            {
                "score": similarity(real_q, sim_q),
                "kcs": list(d.kcs),
                "real_deltas": _floats(d.real),
                "sim_deltas": _floats(d.sim),
                "real_quantiles": [int(q) for q in real_q],
                "sim_quantiles": [int(q) for q in sim_q],
            }
        )
    qwk = (
        quadratic_weighted_kappa(np.concatenate(all_real), np.concatenate(all_sim)) if all_real else math.nan
    )
    summary = {
        # None rather than NaN keeps the summary valid JSON.
        "qwk": None if math.isnan(qwk) else qwk,
        "n_scored": len(all_real),
        "n_null": len(per_item) - len(all_real),
        "cutoffs": _floats(cut),
    }
    return per_item, summary


def scores_from_details(details: Sequence[dict | None], cutoffs: np.ndarray | Sequence[float] | None = None
                        ) -> tuple[list[float | None], dict]:
    """Re-score items from their stored ``details`` (``real_deltas``/``sim_deltas``) without the model.

    With ``cutoffs`` None they come from the given items' own real deltas, as in the paper; the
    evaluation's bootstrap calls this on each resample so the cutoffs are recomputed inside it.
    """
    deltas: list[DeltaResult] = []
    for d in details:
        if not d or d.get("real_deltas") is None:
            deltas.append(NoDelta(FIRST_TURN_REASON))
        else:
            real = np.asarray(d["real_deltas"], dtype=np.float64)
            sim = np.asarray(d["sim_deltas"], dtype=np.float64)
            zero = np.zeros_like(real)
            deltas.append(KnowledgeDeltas(kcs=list(d.get("kcs") or []), z_prev=zero, z_real=real, z_sim=sim))
    if not any(isinstance(d, KnowledgeDeltas) for d in deltas):
        return [None] * len(deltas), {"qwk": None, "cutoffs": None}
    cut = paper_cutoffs(deltas) if cutoffs is None else np.asarray(cutoffs, dtype=np.float64)
    per_item, summary = knowledge_scores(deltas, cut)
    return [p["score"] for p in per_item], summary


# ---------------------------------------------------------------------------------- the metric


class Knowledge(Metric):
    """``knowledge``: knowledge-acquisition similarity, binned with cutoffs from the scored set
    (paper) or shipped with the model (one turn at a time); see the module docstring.

    The KT model gives each item its real and simulated knowledge deltas; from those (kept in the
    items' details) the scores and the set's QWK follow without the model. With the paper's
    cutoffs, the quantiles of the set's own real deltas:

    >>> values, summary = scores_from_details([
    ...     {"kcs": ["add", "simplify"], "real_deltas": [0.1, 0.5], "sim_deltas": [0.1, 0.2]},
    ...     {"kcs": ["add", "simplify"], "real_deltas": [0.3, -0.2], "sim_deltas": [0.3, -0.2]},
    ...     None])  # a first student turn: no delta
    >>> values, summary["qwk"]
    ([0.75, 1.0, None], 0.75)
    """

    outputs = (Output("knowledge", "similarity of knowledge-acquisition quantiles from a KT model", FIRST_TURN_REASON,
                      label="Knowledge", summary={"qwk": "QWK", "cutoffs": "KT cutoffs", "cutoff_source": "cutoff source"}),)
    config_key = "knowledge"
    config: KnowledgeConfig

    def __init__(self, config: KnowledgeConfig, context):
        super().__init__(config, context)
        self._tracer: KnowledgeTracer | None = None
        self._stored: np.ndarray | None = None

    @property
    def cutoff_source(self) -> str:
        """``paper``, ``model`` or a path: the cutoffs that apply in this context's mode."""
        return self.config.eval_cutoffs if self.context.mode == "benchmark" else self.config.cutoffs

    @property
    def set_dependent(self) -> bool:
        return self.cutoff_source == "paper"

    def load(self) -> KnowledgeTracer:
        if self._tracer is None:
            options = self.context.load
            if self.config.kt_dtype == "bfloat16":
                options = dataclasses.replace(options, dtype="bfloat16")
            self._tracer = KnowledgeTracer(load_lm(self.config.plain(), options), persona=self.config.persona,
                                           dtype=self.config.kt_dtype)
        return self._tracer

    def stored_cutoffs(self) -> np.ndarray:
        """The stored cutoffs (``model``: ``kt_cutoffs.json`` of the KT model; else a path), read once."""
        if self._stored is None:
            self._stored = load_cutoffs(cutoffs_path(self.config, self.cutoff_source))
        return self._stored

    def skip(self, item: ScoreItem) -> dict[str, str]:
        earlier = any(t.role == "student" for t in item.dialogue.turns[: item.turn_index])
        return {} if earlier else {"knowledge": FIRST_TURN_REASON}

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        deltas = knowledge_deltas(self.load(), [(it.dialogue, it.turn_index, it.candidate) for it in items])
        out = []
        for d in deltas:
            if isinstance(d, NoDelta):
                out.append(MetricResult.null(["knowledge"], d.reason))
            else:
                # The value needs the cutoffs of the whole set: finalize() fills it in.
                out.append(MetricResult({"knowledge": None}, details={
                    "kcs": list(d.kcs), "real_deltas": _floats(d.real), "sim_deltas": _floats(d.sim)}))
        return out

    def finalize(self, items: Sequence[ScoreItem], results: list[MetricResult]) -> dict[str, dict]:
        pending = [r for r in results if "real_deltas" in r.details]
        source = self.cutoff_source
        if not pending:
            return {"knowledge": {"qwk": None, "cutoffs": None, "cutoff_source": source}}
        cutoffs = None if source == "paper" else self.stored_cutoffs()
        values, summary = scores_from_details([r.details for r in pending], cutoffs)
        cut = np.asarray(summary["cutoffs"], dtype=np.float64)
        for r, v in zip(pending, values, strict=True):
            r.values["knowledge"] = v
            r.details["real_quantiles"] = [int(q) for q in quantize(r.details["real_deltas"], cut)]
            r.details["sim_quantiles"] = [int(q) for q in quantize(r.details["sim_deltas"], cut)]
        return {"knowledge": {"qwk": summary["qwk"], "cutoffs": summary["cutoffs"], "cutoff_source": source}}

    def resample_statistic(self, output: str, details: Sequence[dict | None]):
        """Paper cutoffs come from the evaluated set, so each bootstrap resample bins with the quantiles
        of its own pooled real deltas (vectorised: one repeat and one quantile per resample)."""
        if not self.set_dependent:
            return None
        return resampled_similarity(details)

    def prompt(self, item: ScoreItem) -> str:
        tracer = self.load()
        history = [*item.history, msgspec.structs.replace(item.real, content=item.candidate)]
        p = tracer.prompt(item.dialogue, history, item.dialogue.all_kcs)
        return tracer.lm.tokenizer.decode(p.input_ids[: p.context_len]) + "\n".join(
            tracer.lm.tokenizer.decode(p.input_ids[a:b]) for a, b in p.segments)


def cutoffs_path(config: KnowledgeConfig, source: str) -> Path:
    """Where stored cutoffs live: ``model`` = ``kt_cutoffs.json`` beside the KT model (a folder, or
    downloaded from its Hub repo), else ``source`` is the file itself."""
    if source != "model":
        return Path(source)
    repo = config.adapter or config.model
    revision = config.adapter_revision if config.adapter else config.revision
    if Path(repo).is_dir():
        return Path(repo) / KT_CUTOFFS_FILE
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, KT_CUTOFFS_FILE, revision=revision))
    except Exception as exc:  # not published with the model, offline
        raise ConfigError(f"knowledge.cutoffs: {KT_CUTOFFS_FILE} not found for {repo!r} ({type(exc).__name__}); "
                          "compute it with simhub kt-cutoffs or use paper cutoffs", field="knowledge.cutoffs") from None


def resampled_similarity(details: Sequence[dict | None]) -> ResampledSimilarity:
    """``f(indices) -> mean similarity`` over the resampled items, with cutoffs from the resample's
    own real deltas (items without deltas are skipped; None when a resample has none). Its
    :meth:`~ResampledSimilarity.of_draws` gives the same numbers for many resamples at once."""
    return ResampledSimilarity(details)


class ResampledSimilarity:
    """The knowledge metric's bootstrap statistic (see :func:`resampled_similarity`).

    ``self(indices)`` computes it for one resample. A resample is a multiset of items, so the
    statistic depends only on each item's multiplicity; :meth:`of_draws` computes it for many
    resamples of a cluster bootstrap at once, from how often each cluster was drawn. Every
    floating-point operation of the one-resample path is done there on the same numbers in the same
    order (numpy's linear quantile and its two-sided interpolation, the division, the pairwise sum
    of the weighted mean), so both give bit-identical values; only exact integer work (counting,
    ranks, small sums) is organised differently.
    """

    #: Cells (resamples x KC entries, then resamples x items) handled at once by :meth:`of_draws`.
    CHUNK_CELLS = 1 << 16

    def __init__(self, details: Sequence[dict | None]):
        owners, real, sim, kcs = [], [], [], np.zeros(len(details), dtype=np.int64)
        for i, d in enumerate(details):
            if d and d.get("real_deltas") is not None:
                k = len(d["real_deltas"])
                kcs[i] = k
                owners.extend([i] * k)
                real.extend(d["real_deltas"])
                sim.extend(d["sim_deltas"])
        self.n_items = len(details)
        self.owner = np.asarray(owners, dtype=np.int64)
        self.real = np.asarray(real, dtype=np.float64)
        self.sim = np.asarray(sim, dtype=np.float64)
        self.kcs = kcs
        self.has = kcs > 0

    def __call__(self, indices: np.ndarray) -> float | None:
        weights = np.bincount(indices, minlength=self.n_items)
        if not (weights * self.has).any():
            return None
        per_entry = weights[self.owner]
        cut = np.quantile(np.repeat(self.real, per_entry), QUANTILES)
        diff = np.abs(quantize(self.real, cut) - quantize(self.sim, cut)).astype(np.float64)
        sums = np.bincount(self.owner, weights=diff, minlength=self.n_items)
        chosen = self.has & (weights > 0)
        sims = 1.0 - sums[chosen] / ((NUM_BINS - 1) * self.kcs[chosen])
        return float(np.average(sims, weights=weights[chosen]))

    def of_draws(self, counts: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """The statistic of each resample, NaN where undefined: ``counts[r, c]`` is how often
        resample ``r`` drew cluster ``c``, ``codes[i]`` the cluster of item ``i`` (so item ``i``
        counts ``counts[r, codes[i]]`` times, as in ``self(indices)`` of that resample)."""
        counts = np.asarray(counts, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64)
        out = np.full(len(counts), np.nan)
        if not len(self.owner) or not len(counts):
            return out
        plan = _DrawPlan(self, codes)
        valid = (counts[:, np.unique(plan.item_cluster)] > 0).any(axis=1)  # some item with deltas drawn
        counts = counts[valid]
        # The cutoffs in chunks of resamples x KC entries that stay in cache, then the per-item work
        # in chunks of resamples x items.
        rows = max(1, self.CHUNK_CELLS // len(self.owner))
        cut = np.concatenate([plan.cutoffs(counts[i : i + rows]) for i in range(0, len(counts), rows)])
        rows = max(1, self.CHUNK_CELLS // len(plan.items))
        out[valid] = np.concatenate([plan.means(counts[i : i + rows], cut[i : i + rows])
                                     for i in range(0, len(counts), rows)])
        return out


class _DrawPlan:
    """What :meth:`ResampledSimilarity.of_draws` precomputes for one clustering of the items."""

    def __init__(self, stat: ResampledSimilarity, codes: np.ndarray):
        # Entries (KCs) sorted by real delta: the repeated real deltas of a resample, in order, are
        # these values, each as often as its cluster was drawn.
        order = np.argsort(stat.real, kind="stable")
        self.values = stat.real[order]
        self.entry_cluster = codes[stat.owner[order]]
        # Comparisons with a cutoff, as ranks among every delta: c <= v iff rank(c) <= rank(v), where a
        # rank is the number of deltas strictly below. An entry adds |bin(real) - bin(sim)| =
        # #{cutoffs c: lo < c <= hi} to its item, lo/hi the smaller/larger of its two deltas.
        self.everything = np.sort(np.concatenate([stat.real, stat.sim]))
        self.lo = np.searchsorted(self.everything, np.minimum(stat.real, stat.sim), side="left")
        self.hi = np.searchsorted(self.everything, np.maximum(stat.real, stat.sim), side="left")
        self.items = np.unique(stat.owner)
        self.column = np.searchsorted(self.items, stat.owner)  # each entry's item, as a column
        self.item_cluster = codes[self.items]
        self.denominator = (NUM_BINS - 1) * stat.kcs[self.items]
        self.quantiles = np.asarray(QUANTILES, dtype=np.float64)

    def cutoffs(self, counts: np.ndarray) -> np.ndarray:
        """np.quantile(repeated real deltas, QUANTILES) of each resample: the virtual index
        (n - 1) * q, its floor and floor + 1 (both the last element at or past the end), gamma =
        index - floor, and numpy's two-sided linear interpolation between the two elements."""
        rows, width = counts.shape[0], len(self.values)
        # Running counts of every resample laid end to end: one non-decreasing sequence, so element k
        # of resample r (the first entry whose running count exceeds k) is one search away.
        # (As float64, exact for counts below 2**53, and numpy's fastest running sum.)
        drawn = np.take(counts.astype(np.float64), self.entry_cluster, axis=1)  # C-ordered: ravel makes no copy
        running = np.cumsum(drawn.ravel())
        ends = running[width - 1 :: width].astype(np.int64)
        base = np.concatenate([[0], ends[:-1]])
        n = ends - base
        last = (n - 1)[:, None]
        virtual = last * self.quantiles[None, :]
        below = np.floor(virtual).astype(np.int64)
        above = virtual >= last
        prev = np.where(above, last, below)
        nxt = np.where(above, last, below + 1)
        gamma = virtual - np.where(above, -1, below)

        def element(k: np.ndarray) -> np.ndarray:
            pos = np.searchsorted(running, (k + base[:, None]).astype(np.float64).ravel(), side="right")
            return self.values[pos.reshape(k.shape) - (np.arange(rows) * width)[:, None]]

        a, b = element(prev), element(nxt)
        diff_b_a = b - a
        cut = a + diff_b_a * gamma
        late = gamma >= 0.5
        cut[late] = (b - diff_b_a * (1 - gamma))[late]
        return cut

    def means(self, counts: np.ndarray, cut: np.ndarray) -> np.ndarray:
        """np.average of the items' similarities with the cutoffs ``cut``, weighted by multiplicity."""
        weights = counts[:, self.item_cluster]  # the multiplicity of every item with deltas
        sims = 1.0 - self._sums(cut) / self.denominator[None, :]
        products = np.multiply(sims, weights, dtype=np.float64)
        return _pairwise_sums(products, weights > 0) / weights.sum(axis=1, dtype=np.float64)

    def _sums(self, cut: np.ndarray) -> np.ndarray:
        """Per resample and item, the sum over the item's entries of |bin(real) - bin(sim)| (exact
        small integers, as float64), from a table of every rank the resamples' cutoffs take."""
        rank = np.searchsorted(self.everything, cut.ravel(), side="left")
        taken, where = np.unique(rank, return_inverse=True)
        where = where.reshape(cut.shape)
        # table[t, item] = #{entries e of item: lo_e < taken[t] <= hi_e}, by a difference array over t.
        width = len(self.items)
        size = (len(taken) + 1) * width
        starts = np.searchsorted(taken, self.lo, side="right") * width + self.column
        stops = np.searchsorted(taken, self.hi, side="right") * width + self.column
        steps = np.bincount(starts, minlength=size) - np.bincount(stops, minlength=size)
        # A KC adds at most one per cutoff, so an item's sum is at most its denominator (4 per KC): in
        # 16 bits unless an item has thousands of KCs, which halves the memory traffic.
        small = int(self.denominator.max()) < 1 << 15
        table = np.cumsum(steps.reshape(len(taken) + 1, width), axis=0).astype(np.int16 if small else np.int64)
        sums = table[where[:, 0]]
        for j in range(1, where.shape[1]):
            sums += table[where[:, j]]
        return sums.astype(np.float64)


def _pairwise_sums(products: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Each row's sum of its ``chosen`` entries, as numpy sums that row's chosen entries as one
    contiguous vector (its pairwise summation depends on the length): rows with as many chosen
    entries are packed into one matrix of contiguous rows of that length and summed together."""
    m = chosen.sum(axis=1)
    by_size = np.argsort(m, kind="stable")
    packed = products[by_size][chosen[by_size]]
    ends = np.cumsum(m[by_size])
    sizes, first, members = np.unique(m[by_size], return_index=True, return_counts=True)
    totals = np.empty(len(products))
    for size, start, count in zip(sizes.tolist(), first.tolist(), members.tolist(), strict=True):
        begin = int(ends[start]) - size
        totals[by_size[start : start + count]] = packed[begin : begin + count * size].reshape(count, size).sum(axis=1)
    return totals
