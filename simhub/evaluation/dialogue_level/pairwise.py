"""Pairwise indistinguishability: the judge's "which student is real?" on same-question pairs,
calibrated by real-vs-real (HH) and simulated-vs-simulated (PP) control pairs
(:func:`~simhub.evaluation.dialogue_metrics.pi_calibrated`). Needs an endpoint judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simhub.evaluation import dialogue_metrics as dm
from simhub.evaluation.dialogue_level.base import DialogueMetric, DialogueOutput, fmt, number


class PairwiseIndistinguishability(DialogueMetric):
    outputs = (DialogueOutput("pi_calibrated", "the judge's score of the simulated side on real-vs-simulated pairs, "
                              "calibrated by the HH and PP controls (raw PI where they do not separate); "
                              "1: as real as real students", "no real-vs-simulated pair got a verdict",
                              better="higher", label="Indistinguishability (PI)"),)
    requires = ("verdicts",)

    def statistic(self, output: str, idx: np.ndarray) -> float | None:
        counts = self.data.draws(idx)
        pick = {k: [v for rid, v in vs for _ in range(counts.get(rid, 0))] for k, vs in self.data.verdicts.items()}
        if not pick["ps"]:
            return None
        r = dm.pi_calibrated(pick["ps"], pick["hh"] or None, pick["pp"] or None)
        return r.calibrated if r.calibrated is not None else r.pi

    def details(self) -> dict[str, dict[str, Any]]:
        verdicts = self.data.verdicts
        if not verdicts["ps"]:
            return {}
        return {"pi_calibrated": dm.pi_calibrated([v for _, v in verdicts["ps"]], [v for _, v in verdicts["hh"]] or None,
                                                  [v for _, v in verdicts["pp"]] or None).as_dict()}

    @classmethod
    def detail_lines(cls, output: str, details: Mapping[str, Any]) -> list[str]:
        if number(details, "pi") is None:
            return []
        parts = [f"PI {fmt(number(details, 'pi'))}", f"ties {fmt(number(details, 'tie_rate'))}"]
        if number(details, "hh") is not None and number(details, "pp") is not None:
            parts.append(f"HH {fmt(number(details, 'hh'))}, PP {fmt(number(details, 'pp'))}")
        return [" · ".join(parts)]
