"""Learning: |real - simulated| mean per-dialogue mastery gain, from the knowledge-tracing model's
trajectories (:func:`~simhub.evaluation.dialogue_metrics.kt_gain_diff`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from simhub.errors import DataError
from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput, fmt, number


class KTGain(DialogueMetric):
    outputs = (DialogueOutput("kt_gain_diff", "|real - simulated| mean mastery gain per dialogue (last student turn "
                              "minus first) from the knowledge-tracing model", "a side has no mastery trajectory",
                              high=2.0, label="Learning gain gap"),)
    requires = ("trajectories",)

    def prepare(self) -> None:
        self.real, sim = self.data.trajectories
        self.sim_of: dict[str, list[np.ndarray]] = defaultdict(list)
        for t, rid in zip(sim, self.data.real_ids, strict=True):
            self.sim_of[rid].append(t)

    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        ids = self.data.ids
        return dm.kt_gain_diff([self.real[i] for i in idx], [t for i in idx for t in self.sim_of[ids[i]]]).diff

    def details(self) -> dict[str, dict[str, Any]]:
        try:
            return {"kt_gain_diff": dm.kt_gain_diff(*self.data.trajectories).as_dict()}
        except DataError as exc:
            return {"kt_gain_diff": {"error": str(exc)}}

    @classmethod
    def detail_lines(cls, output: str, details: Mapping[str, Any]) -> list[str]:
        if number(details, "real_mean") is None:
            return []
        return [f"gain real {fmt(number(details, 'real_mean'))}, simulated {fmt(number(details, 'sim_mean'))}"]
