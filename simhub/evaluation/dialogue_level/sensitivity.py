"""Tutor sensitivity: does the simulated student respond to helpful and unhelpful tutor turns the way
real students do (:func:`~simhub.evaluation.dialogue_metrics.tutor_sensitivity`)? The outcomes come
from running the simulator (see :mod:`simhub.evaluation.dialogue_eval`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simhub.errors import DataError
from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput, fmt, number


class TutorSensitivityMetric(DialogueMetric):
    outputs = (DialogueOutput("tutor_sensitivity", "|Δ simulated - Δ real|, Δ = P(correct within two student turns | "
                              "helpful tutor turn) - P(... | unhelpful)", "a condition has no prefix with a known "
                              "outcome", high=2.0, label="Tutor sensitivity gap"),)
    requires = ("sensitivity",)
    labels = ("correctness",)

    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        counts = self.data.draws(idx)

        def pick(d):
            return {k: [o for rid, o in vs for _ in range(counts.get(rid, 0))] for k, vs in d.items()}

        r, s = (pick(side) for side in self.data.sensitivity)
        return dm.tutor_sensitivity(r["helpful"], r["unhelpful"], s["helpful"], s["unhelpful"]).abs_diff

    def details(self) -> dict[str, dict[str, Any]]:
        real, sim = self.data.sensitivity
        try:
            return {"tutor_sensitivity": dm.tutor_sensitivity(
                [o for _, o in real["helpful"]], [o for _, o in real["unhelpful"]],
                [o for _, o in sim["helpful"]], [o for _, o in sim["unhelpful"]]).as_dict()}
        except DataError as exc:
            return {"tutor_sensitivity": {"error": str(exc)}}

    @classmethod
    def detail_lines(cls, output: str, details: Mapping[str, Any]) -> list[str]:
        if number(details, "real_delta") is None:
            return []
        return [f"Δ real {fmt(number(details, 'real_delta'))}, simulated {fmt(number(details, 'sim_delta'))}"]
