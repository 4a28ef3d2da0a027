"""Detectability: how well a classifier tells simulated student turns from real ones (ROC AUC).

The classifier is fitted once (:func:`~simhub.evaluation.dialogue_metrics.detect_auroc`, folds
grouped so that a real dialogue and its rollouts stay together); a resample recomputes the AUC of
its dialogues' out-of-fold scores.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput


class Detectability(DialogueMetric):
    outputs = (DialogueOutput("detect_auroc", "out-of-fold ROC AUC of a logistic regression on sentence embeddings "
                              "and surface features telling simulated turns from real ones (0.5: indistinguishable)",
                              "fewer than two dialogues with student turns on a side", better="closer", target=0.5,
                              label="Detectability (AUROC)"),)
    requires = ("embed",)

    def prepare(self) -> None:
        data = self.data
        real, sim = data.whole
        owner_of_sim = {d.id: rid for d, rid in zip(data.sim, data.real_ids, strict=True)}
        sim_groups = [owner_of_sim[g] for g in sim.groups]
        self.result = dm.detect_auroc(real.texts, real.groups, sim.texts, sim_groups, embed=data.embed,
                                      seed=data.seed)
        self.scores = np.asarray(self.result.scores)
        self.y = np.array([0] * len(real.texts) + [1] * len(sim.texts))
        self.rows_of: dict[str, list[int]] = defaultdict(list)
        for n, g in enumerate([*real.groups, *sim_groups]):
            self.rows_of[g].append(n)

    def estimate(self, output: str) -> float | None:
        return self.result.auroc

    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        from sklearn.metrics import roc_auc_score

        rows = [n for i in idx for n in self.rows_of[self.data.ids[i]]]
        y = self.y[rows]
        return float(roc_auc_score(y, self.scores[rows])) if 0 < y.sum() < len(y) else None
