"""The published numbers of the paper, as data: Table 1, the validation of its metric models and the
human evaluation (Tables 2–3).

Why a module of constants: a report that prints simhub's numbers next to the paper's lets a reader
see at a glance whether a reproduction is in the right place, and every consumer (the HTML report,
``--json`` output, model cards) should quote the same, typed copy instead of retyping the table.

Everything here is copied from "Simulated Students in Tutoring Dialogues: Substance or Illusion?"
(Scarlatos, Lee, Woodhead, Lan), on the test split of Eedi QATD-2k (382 dialogues). These rows
were **not** produced by simhub; a report must say so wherever it shows them. The paper prints the
means only (no intervals and no turn counts), so that is all a published row carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from simhub.metrics import PAPER_METRICS

__all__ = [
    "HUMAN_AGREEMENT",
    "METRICS",
    "METRIC_MODEL_VALIDATION",
    "PAPER",
    "TABLE1",
    "TABLE1_SPLIT",
    "TABLE2_HUMAN",
    "TABLE3",
    "PublishedRow",
    "published_rows",
]

#: Short citation used wherever published numbers are shown.
PAPER = 'Scarlatos, Lee, Woodhead & Lan, "Simulated Students in Tutoring Dialogues: Substance or Illusion?"'

#: The data the published numbers were computed on.
TABLE1_SPLIT = "Eedi QATD-2k, test split (382 dialogues)"

#: The seven turn-level metrics in the paper's column order (docs/protocol.md §3): the registry's list,
#: not a copy. Every one is in [0, 1] and higher means more realistic; their headings are the paper's
#: wording, declared on each metric's outputs (:func:`simhub.metrics.label`).
METRICS: tuple[str, ...] = PAPER_METRICS

Family = Literal["fine-tuned", "prompted"]


@dataclass(frozen=True, slots=True)
class PublishedRow:
    """One method of the paper's Table 1.

    ``method`` is the paper's name for it, ``model`` the model behind it, ``family`` whether it is
    a LoRA-fine-tuned Llama student or a prompted API model, ``note`` what sets it apart, and
    ``metrics`` the published means keyed by the names of :data:`METRICS`.
    """

    method: str
    model: str
    family: Family
    note: str
    metrics: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"method": self.method, "model": self.model, "family": self.family, "note": self.note,
                "metrics": dict(self.metrics)}


def _row(method: str, model: str, family: Family, note: str, *values: float) -> PublishedRow:
    # Values are given in METRICS order, as the table prints them.
    assert len(values) == len(METRICS)
    return PublishedRow(method, model, family, note, MappingProxyType(dict(zip(METRICS, values, strict=True))))


_SFT = "LoRA SFT on the student turns of the training dialogues, greedy decoding, no persona"
_DPO = "the SFT student after one epoch of DPO on metric-ranked candidate pairs (offline RL)"

#: The paper's Table 1, in its row order.
TABLE1: tuple[PublishedRow, ...] = (
    _row("SFT 3B", "Llama-3.2-3B-Instruct", "fine-tuned", _SFT,
         0.6645, 0.5557, 0.0815, 0.8726, 0.7331, 0.3058, 0.2033),
    _row("DPO 3B", "Llama-3.2-3B-Instruct", "fine-tuned", _DPO,
         0.6762, 0.5748, 0.0584, 0.8745, 0.7345, 0.3109, 0.2037),
    _row("SFT 8B", "Llama-3.1-8B-Instruct", "fine-tuned", _SFT,
         0.6671, 0.5670, 0.0661, 0.8766, 0.7383, 0.3212, 0.2038),
    _row("DPO 8B", "Llama-3.1-8B-Instruct", "fine-tuned", _DPO,
         0.6840, 0.5761, 0.0529, 0.8787, 0.7390, 0.3212, 0.2039),
    _row("Zero-Shot", "GPT-4.1", "prompted", "student role-play instructions only; temperature 0",
         0.4998, 0.5926, 0.0220, 0.8078, 0.5460, 0.1648, 0.1911),
    _row("OCEAN", "GPT-4.1", "prompted", "adds the dialogue's OCEAN persona; temperature 0",
         0.5268, 0.6039, 0.0308, 0.8135, 0.5739, 0.1772, 0.1942),
    _row("ICL", "GPT-4.1", "prompted", "adds the training dialogue with the nearest profile as an example",
         0.5085, 0.5991, 0.0319, 0.8138, 0.5919, 0.1939, 0.1914),
    _row("Reasoning", "GPT-5 mini", "prompted", "a reasoning model told the evaluation criteria; temperature 1",
         0.5755, 0.5870, 0.0088, 0.8395, 0.5992, 0.2170, 0.1909),
    _row("Oracle", "GPT-4.1", "prompted",
         "adds the free-text profile of this very dialogue: an upper bound that leaks the answer",
         0.5097, 0.6755, 0.1872, 0.8063, 0.6032, 0.2109, 0.1942),
)

#: How well the paper's metric models did on held-out data (accuracy for the classifiers, AUC for
#: knowledge tracing). They bound how much a difference in the corresponding metric can mean.
METRIC_MODEL_VALIDATION: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "acts": {"statistic": "accuracy", "value": 0.9219, "model": "act classifier (Llama-3.1-8B-Instruct, LoRA)"},
    "correctness": {"statistic": "accuracy", "value": 0.9164,
                    "model": "correctness classifier (Llama-3.1-8B-Instruct, LoRA)"},
    "knowledge": {"statistic": "AUC", "value": 0.6557, "model": "LLMKT (Llama-3.1-8B-Instruct, LoRA)",
                  "note": "0.5940 without the OCEAN persona in the prompt"},
})

#: The paper's Table 2: each method's scores as the human raters' judgements give them, on the
#: 190 rated turns (38 dialogues, five consecutive student turns each, from turn 5 on). Acts: share of
#: simulated turns given the same act as the real one; Correctness: the same correctness, over turns
#: whose real turn the rater did not call na; Errors: the same error, over turns whose real turn the
#: rater called incorrect; Linguistic: the 1–5 similarity rating mapped to [0, 1] as (rating − 1) / 4.
#: "DPO" is the DPO-trained 8B student; Zero-Shot and Oracle are the GPT-4.1 baselines of Table 1.
TABLE2_HUMAN: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "DPO": MappingProxyType({"acts": 0.7905, "correctness": 0.6377, "errors": 0.0612, "linguistic": 0.5405}),
    "Zero-Shot": MappingProxyType({"acts": 0.6143, "correctness": 0.6087, "errors": 0.0408, "linguistic": 0.3155}),
    "Oracle": MappingProxyType({"acts": 0.6476, "correctness": 0.7101, "errors": 0.2449, "linguistic": 0.4071}),
})

#: The paper's Table 3. ``human_metric``: Cohen's κ between the raters' per-turn outcome and the
#: metric's (acts: same act or not; correctness and errors: 1, 0 or na, na a category of its own),
#: and for linguistic Pearson's r between the similarity ratings and a text-similarity metric (the
#: paper does not say whether cosine or ROUGE-L; simhub reports both). ``human_label``: κ between the
#: raters' act and correctness labels of the real turns and the LLM annotation. ``human_human``: κ
#: (Pearson for linguistic) between two raters on the turns both rated (acts and correctness: the
#: labels themselves, real and simulated turns; errors: the 1/0/na outcome). docs/human-eval.md.
TABLE3: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "human_metric": MappingProxyType({"acts": 0.7337, "correctness": 0.6891, "errors": 0.6127, "linguistic": 0.7397}),
    "human_label": MappingProxyType({"acts": 0.7993, "correctness": 0.7219}),
    "human_human": MappingProxyType({"acts": 0.4978, "correctness": 0.7187, "errors": 0.6154, "linguistic": 0.6910}),
})

#: Agreement of the metrics with human judgements, as published (Table 3's first row: Cohen's kappa
#: for the labels, Pearson correlation for "linguistic", which covers the text-similarity metrics).
HUMAN_AGREEMENT: Mapping[str, float] = TABLE3["human_metric"]


def published_rows() -> list[dict[str, Any]]:
    """Table 1 as plain dicts (for JSON output), in the paper's order."""
    return [row.as_dict() for row in TABLE1]
