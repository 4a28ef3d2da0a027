"""Distances between the two sides' distributions of per-turn and per-dialogue quantities: the act
mix, the share of correct answers, turn length, question rate and dialogue length.

Each is recomputed on every resample from the drawn dialogues' inputs
(:meth:`~simhub.evaluation.dialogue_level.base.DialogueData.inputs`).
"""

from __future__ import annotations

import math

import numpy as np

from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput


class _Distance(DialogueMetric):
    """One output, a function of the real and the simulated side's inputs."""

    @staticmethod
    def distance(real: dm.DialogueInputs, sim: dm.DialogueInputs) -> float:
        raise NotImplementedError

    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        return self.distance(*self.data.inputs(idx))


class ActsJSD(_Distance):
    outputs = (DialogueOutput("acts_jsd", "Jensen-Shannon distance (base 2) of the student-turn act mixes, both "
                              "sides labelled by the same act classifier", "no student turn has an act label",
                              label="Act mix (JSD)"),)
    labels = ("acts",)

    @staticmethod
    def distance(real, sim):
        return dm.acts_jsd(real.acts, sim.acts)


class CorrectnessRateDiff(_Distance):
    outputs = (DialogueOutput("correctness_rate_diff", "|real - simulated| share of correct answers, both sides "
                              "labelled by the same model", "no student turn is labelled correct or incorrect",
                              label="Correct-answer rate gap"),)
    labels = ("correctness",)

    @staticmethod
    def distance(real, sim):
        return dm.correctness_rate_diff(real.correctness, sim.correctness)


class LengthW1(_Distance):
    outputs = (DialogueOutput("length_w1", "W1 of log1p(words per student turn), divided by the real values' range",
                              "a side has no student turn", high=math.inf, label="Turn length (W1)"),)

    @staticmethod
    def distance(real, sim):
        return dm.length_w1(real.texts, sim.texts)


class QuestionRateW1(_Distance):
    outputs = (DialogueOutput("question_rate_w1", "W1 of each dialogue's share of student turns asking a question, "
                              "divided by the real range", "a side has no dialogue with a student turn",
                              high=math.inf, label="Question rate (W1)"),)

    @staticmethod
    def distance(real, sim):
        return dm.question_rate_w1(real.per_dialogue, sim.per_dialogue)


class TurnsW1(_Distance):
    outputs = (DialogueOutput("turns_w1", "W1 of student turns per dialogue, divided by the real range", "never",
                              high=math.inf, label="Dialogue length (W1)"),)

    @staticmethod
    def distance(real, sim):
        return dm.turns_w1(real.turn_counts, sim.turn_counts)
