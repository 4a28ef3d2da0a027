"""Lexical diversity (MATTR, HD-D, Yule's K) of simulated against real student text: z-scores over
pooled, length-matched chunks of the real side (:func:`~simhub.evaluation.dialogue_metrics.lexical_diversity_z`)."""

from __future__ import annotations

import math

import numpy as np

from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput

_TOO_FEW = "a side has fewer word tokens than one chunk"
_Z_SCORES = {"mattr_z": dm.mattr_z, "hdd_z": dm.hdd_z, "yule_z": dm.yule_z}


class LexicalDiversity(DialogueMetric):
    outputs = (
        DialogueOutput("mattr_z", "MATTR (window 50) of simulated chunks, as a z-score against the real chunks",
                       _TOO_FEW, low=-math.inf, high=math.inf, better="closer", target=0.0, label="MATTR z"),
        DialogueOutput("hdd_z", "HD-D (sample 42) of simulated chunks, as a z-score against the real chunks",
                       _TOO_FEW, low=-math.inf, high=math.inf, better="closer", target=0.0, label="HD-D z"),
        DialogueOutput("yule_z", "Yule's K of simulated chunks, as a z-score against the real chunks (positive: "
                       "more repetitive)", _TOO_FEW, low=-math.inf, high=math.inf, better="closer", target=0.0,
                       label="Yule's K z"),
    )
    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        real, sim = self.data.inputs(idx)
        return _Z_SCORES[output](real.texts, sim.texts, chunk_tokens=self.data.chunk_tokens).z
