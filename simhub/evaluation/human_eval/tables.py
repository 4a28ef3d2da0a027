"""The report: the human-evaluated scores of each run (Table 2) and the agreements of Table 3,
human–metric, human–label and human–human, from the ratings and the tasks' key.

Every statistic is computed as the reference analysis computes it. A human outcome is derived from
one rater's labels of a simulated turn *and of the real turn*: acts is 1 when the two acts are the
same; correctness is ``na`` when the rater called the real turn na, else 1 when the two correctness
labels are the same; errors is ``na`` unless the rater called the real turn incorrect, else 1 when
the simulated turn is incorrect with the same error; linguistic is (rating − 1) / 4. The metric's
outcome for κ is its value, with a null that means "does not apply" (real turn na, not incorrect,
or without a correctness label for errors) as the category ``na``; a null for any other reason (a
failed judge call, a missing act label) leaves the pair out. A turn rated by two raters counts
once per rater in Table 2 and in the human–metric and human–label agreements.

κ and r are computed here with the standard formulas (numpy only): κ = (p_o − p_e) / (1 − p_e) over
the categories either side used, as scikit-learn's ``cohen_kappa_score``; r is Pearson's
product-moment correlation, as SciPy's ``pearsonr``. Both are None where undefined (nothing to
compare, a single category on both sides, a constant series).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simhub.evaluation.human_eval.layout import NA, REPORT_KIND, SCHEMA_VERSION
from simhub.evaluation.human_eval.ratings import Rating, key_items
from simhub.evaluation.paper import TABLE2_HUMAN, TABLE3
from simhub.metrics.agreement import cohen_kappa
from simhub.schema import atomic_write_bytes

__all__ = ["cohen_kappa", "format_report", "human_eval_report", "pearson", "write_report"]


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r of two paired series; None with fewer than two pairs or a constant series."""
    if len(x) != len(y):
        raise ValueError("the two series differ in length")
    if len(x) < 2:
        return None
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = xa - xa.mean(), ya - ya.mean()
    denominator = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
    if denominator == 0.0:
        return None
    return max(-1.0, min(1.0, float(np.dot(dx, dy)) / denominator))


def _mean(values: Sequence[float]) -> dict[str, Any]:
    return {"mean": sum(values) / len(values) if values else None, "n": len(values)}


def _kappa(pairs: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """κ with the raw share of equal outcomes (which stays defined where κ is not) and n."""
    return {"kappa": cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]),
            "agreement": sum(a == b for a, b in pairs) / len(pairs) if pairs else None, "n": len(pairs)}


def _kappa_with_na(pairs: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    applicable = [(a, b) for a, b in pairs if a != NA and b != NA]
    return {**_kappa(pairs), "n_na": len(pairs) - len(applicable),
            "kappa_without_na": cohen_kappa([a for a, _ in applicable], [b for _, b in applicable]),
            "n_without_na": len(applicable)}


def _pearson(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    return {"pearson": pearson([a for a, _ in pairs], [b for _, b in pairs]), "n": len(pairs)}


def _human_outcomes(candidate: Rating, real: Rating) -> dict[str, Any]:
    """One rater's outcome for a simulated turn, against the same rater's labels of the real turn."""
    assert candidate.linguistic is not None
    return {
        "acts": int(candidate.act == real.act),
        "correctness": NA if real.correctness == "na" else int(candidate.correctness == real.correctness),
        "errors": NA if real.correctness != "incorrect"
        else int(candidate.correctness == "incorrect" and candidate.same_error is True),
        "linguistic": (candidate.linguistic - 1) / 4,
    }


def human_eval_report(key: Mapping[str, Any], ratings: Sequence[Rating], *, unrated: int = 0) -> dict[str, Any]:
    """Tables 2 and 3 from the ratings (this module's docstring defines every number)."""
    items = key_items(key)
    by_item_rater = {(r.item, r.rater): r for r in ratings}
    run_names = [r["name"] for r in key.get("runs") or []]
    table2: dict[str, dict[str, list[float]]] = {name: {m: [] for m in ("acts", "correctness", "errors",
                                                                           "linguistic")} for name in run_names}
    metric_pairs: dict[str, list[tuple[Any, Any]]] = {m: [] for m in ("acts", "correctness", "errors", "cosine",
                                                                      "rouge_l")}
    label_pairs: dict[str, list[tuple[Any, Any]]] = {"acts": [], "correctness": []}
    outcomes: dict[tuple[str, str], dict[str, Any]] = {}
    for rating in ratings:
        group, candidate = items[rating.item]
        if candidate is None:
            labels = group["real"].get("labels") or {}
            if labels.get("act") is not None:
                label_pairs["acts"].append((rating.act, labels["act"]))
            if labels.get("correctness") is not None:
                label_pairs["correctness"].append((rating.correctness, labels["correctness"]))
            continue
        real = by_item_rater[(group["real"]["item"], rating.rater)]
        human = outcomes[(rating.item, rating.rater)] = _human_outcomes(rating, real)
        scores = table2.setdefault(candidate.get("run", "?"), {m: [] for m in human})
        for name, value in human.items():
            if value != NA:
                scores[name].append(float(value))
        auto = candidate["auto"]
        for name in ("acts", "correctness", "errors"):
            if auto.get(name) is not None:
                metric_pairs[name].append((human[name], auto[name]))
        for name in ("cosine", "rouge_l"):
            value = auto.get(name)
            if isinstance(value, int | float) and math.isfinite(value):
                metric_pairs[name].append((human["linguistic"], float(value)))

    # Human-human: the first two raters (in the tasks' rater order, then by name) of each rated turn.
    order = {r: n for n, r in enumerate((key.get("options") or {}).get("raters") or [])}
    raters_of: dict[str, list[str]] = {}
    for rating in ratings:
        raters_of.setdefault(rating.item, []).append(rating.rater)
    pair_values: dict[str, list[tuple[Any, Any]]] = {"acts": [], "correctness": [], "errors": [], "linguistic": []}
    shared_turns, shared_raters = 0, Counter()
    for item, who in raters_of.items():
        if len(who) < 2:
            continue
        first, second = sorted(who, key=lambda r: (order.get(r, len(order)), r))[:2]
        a, b = by_item_rater[(item, first)], by_item_rater[(item, second)]
        shared_turns += 1
        shared_raters[f"{first}+{second}"] += 1
        pair_values["acts"].append((a.act, b.act))
        pair_values["correctness"].append((a.correctness, b.correctness))
        if items[item][1] is not None:
            oa, ob = outcomes[(item, first)], outcomes[(item, second)]
            pair_values["errors"].append((oa["errors"], ob["errors"]))
            pair_values["linguistic"].append((oa["linguistic"], ob["linguistic"]))

    raters = Counter(r.rater for r in ratings)
    return {
        "kind": REPORT_KIND, "schema_version": SCHEMA_VERSION,
        "ratings": {"rated": len(ratings), "unrated_rows": unrated, "raters": dict(sorted(raters.items())),
                    "real_turns": sum(1 for r in ratings if items[r.item][1] is None),
                    "candidates": sum(1 for r in ratings if items[r.item][1] is not None),
                    "shared_turns": shared_turns, "shared_by": dict(shared_raters)},
        "table2": {name: {m: _mean(v) for m, v in scores.items()} for name, scores in table2.items()},
        "table3": {
            "human_metric": {
                "acts": _kappa(metric_pairs["acts"]),
                "correctness": _kappa_with_na(metric_pairs["correctness"]),
                "errors": _kappa_with_na(metric_pairs["errors"]),
                "linguistic_cosine": _pearson(metric_pairs["cosine"]),
                "linguistic_rouge_l": _pearson(metric_pairs["rouge_l"]),
            },
            "human_label": {"acts": _kappa(label_pairs["acts"]), "correctness": _kappa(label_pairs["correctness"])},
            "human_human": {"acts": _kappa(pair_values["acts"]), "correctness": _kappa(pair_values["correctness"]),
                            "errors": _kappa(pair_values["errors"]), "linguistic": _pearson(pair_values["linguistic"])},
        },
        "paper": {"table2": {m: dict(v) for m, v in TABLE2_HUMAN.items()},
                  "table3": {row: dict(v) for row, v in TABLE3.items()}},
    }


def write_report(report: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the report as JSON, atomically."""
    path = Path(path)
    atomic_write_bytes(path, json.dumps(report, indent=2, ensure_ascii=False).encode() + b"\n")
    return path


def format_report(report: Mapping[str, Any]) -> str:
    """The report as two small tables, the paper's figures beside simhub's."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    def cell(entry: Mapping[str, Any] | None, stat: str) -> str:
        if entry is None:
            return "-"
        return f"{num(entry.get(stat))} ({entry.get('n', 0)})"

    r = report["ratings"]
    raters = ", ".join(f"{name} {n}" for name, n in r["raters"].items())
    lines = [f"ratings: {r['rated']} rated turns ({r['real_turns']} real, {r['candidates']} simulated) by "
             f"{len(r['raters'])} rater(s) ({raters}); {r['shared_turns']} turns rated by two or more"
             + (f"; {r['unrated_rows']} rows left unrated" if r["unrated_rows"] else "")]
    columns = ("acts", "correctness", "errors", "linguistic")
    head = f"{'':<24}" + "".join(f"{c:>18}" for c in ("acts", "corr.", "errors", "linguistic"))
    if report["table2"]:
        lines += ["", "Human-evaluated scores (Table 2; mean (n), 1 is best)", head]
        for name, scores in report["table2"].items():
            lines.append(f"{name[:23]:<24}" + "".join(f"{cell(scores.get(c), 'mean'):>18}" for c in columns))
        lines.append("paper (190 turns; DPO 8B, Zero-Shot, Oracle):")
        for name, scores in report["paper"]["table2"].items():
            lines.append(f"{'  ' + name:<24}" + "".join(f"{num(scores.get(c)):>18}" for c in columns))
    t3 = report["table3"]
    hm, hl, hh = t3["human_metric"], t3["human_label"], t3["human_human"]
    lines += ["", "Agreement (Table 3; Cohen's kappa, Pearson for linguistic; (n) pairs)", head]
    rows = [
        ("human-metric", [cell(hm["acts"], "kappa"), cell(hm["correctness"], "kappa"), cell(hm["errors"], "kappa"),
                          "cos " + cell(hm["linguistic_cosine"], "pearson")]),
        ("", ["", "", "", "rouge-L " + cell(hm["linguistic_rouge_l"], "pearson")]),
        ("human-label", [cell(hl["acts"], "kappa"), cell(hl["correctness"], "kappa"), "-", "-"]),
        ("human-human", [cell(hh["acts"], "kappa"), cell(hh["correctness"], "kappa"), cell(hh["errors"], "kappa"),
                         cell(hh["linguistic"], "pearson")]),
    ]
    for label, cells in rows:
        lines.append(f"{label:<24}" + "".join(f"{c:>18}" for c in cells))
    paper = report["paper"]["table3"]
    lines.append("paper:")
    for row, label in (("human_metric", "human-metric"), ("human_label", "human-label"), ("human_human", "human-human")):
        lines.append(f"{'  ' + label:<24}" + "".join(f"{num(paper[row].get(c)):>18}" for c in columns))
    lines.append("(na counts as a category in correctness and errors; 'kappa_without_na' in the JSON leaves it out)")
    return "\n".join(lines)
