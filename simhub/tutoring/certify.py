"""Would another learner rank the tutors the same way? The statistics of a certified tutor ranking.

Each learner family ranks the same tutors by its learning outcome (one value per episode, clustered by
item or scenario). This module puts the rankings side by side:

* **rank intervals**: each family's tutor means under the cluster bootstrap (a family's clusters are
  resampled with replacement, all tutors together, so the pairing by item stays; families are
  resampled independently), each tutor's rank in every resample, the 2.5th and 97.5th percentiles;
* **concordance**: Kendall's W over the families (ties corrected) and every pairwise Kendall τ-b,
  each with its bootstrap interval, and a permutation p for W (each family's tutor means shuffled
  across the tutors independently);
* **rank flips**: a pair of tutors that one family orders one way with interval support (the pair
  ordered so in at least 97.5% of its resamples) and another family the other way, with support;
* **known groups**: tutors whose order on learning is known by design, worst first; a family
  recovers the order when every adjacent pair's bootstrap difference interval lies above zero;
* **the verdict**: certified when every family recovers the known groups and the lower end of W's
  interval is at least :data:`W_THRESHOLD`; otherwise the reasons, named. Rank flips and tutors
  with failed episodes are notes beside the verdict, whatever it is.

A failed episode has no outcome: it is counted per tutor and family and shown beside every
estimate; a tutor whose failures exceed :data:`MAX_FAILED_SHARE` of its episodes under a family is
a note. It is never dropped silently.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simhub.errors import ConfigError

__all__ = ["MAX_FAILED_SHARE", "W_THRESHOLD", "Concordance", "FamilyOutcomes", "Flip", "KnownGroupPair",
           "certification_section", "certify", "draw_rank_intervals", "format_certification", "kendall_w", "rank_matrix", "tutor_means",
           "w_permutation_p"]

#: The lower end of W's 95% interval a certified ranking needs: the families agree more than they
#: disagree by a clear margin (W = 0.5 with two families is a mean Spearman ρ of 0).
W_THRESHOLD = 0.7
#: The share of a tutor's episodes that may fail under a family before the verdict names it.
MAX_FAILED_SHARE = 0.05
#: The bootstrap support a pair's order needs to count (a flip, a known-groups step).
SUPPORT = 0.975


@dataclasses.dataclass(frozen=True)
class FamilyOutcomes:
    """One family's outcome per episode: ``(tutor, cluster, value)``, value None for a failed episode."""

    family: str
    outcome: str
    episodes: Sequence[tuple[str, str, float | None]]
    higher_is_better: bool = True

    def tutors(self) -> list[str]:
        return sorted({t for t, _, _ in self.episodes})


@dataclasses.dataclass(frozen=True)
class Flip:
    """``first`` above ``second`` under ``family_a`` and below it under ``family_b``, each with support."""

    first: str
    second: str
    family_a: str
    family_b: str
    support_a: float
    support_b: float


@dataclasses.dataclass(frozen=True)
class KnownGroupPair:
    lower: str
    higher: str
    difference: float
    ci95: tuple[float, float]
    support: float

    @property
    def recovered(self) -> bool:
        return self.ci95[0] > 0


@dataclasses.dataclass(frozen=True)
class Concordance:
    """Everything :func:`certify` measured (see the module docstring)."""

    families: list[str]
    tutors: list[str]
    means: dict[str, dict[str, float]]
    ranks: dict[str, dict[str, float]]
    rank_ci95: dict[str, dict[str, tuple[float, float]]]
    failed: dict[str, dict[str, int]]
    w: float
    w_ci95: tuple[float, float]
    w_p: float
    tau: dict[tuple[str, str], tuple[float | None, tuple[float, float] | None]]
    flips: list[Flip]
    known_groups: dict[str, list[KnownGroupPair]]
    certified: bool
    #: Why it is not certified (empty when it is).
    reasons: list[str]
    #: What a reader should know whatever the verdict: rank flips, tutors with many failed episodes.
    notes: list[str]


# ------------------------------------------------------------------------------------------ statistics


def rank_matrix(values: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """Ranks along the last axis (1 = best), ties sharing their mean rank."""
    v = values if higher_is_better else -values
    better = (v[..., None, :] > v[..., :, None]).sum(axis=-1)
    tied = (v[..., None, :] == v[..., :, None]).sum(axis=-1)
    return 1.0 + better + (tied - 1) / 2.0


def kendall_w(ranks: np.ndarray) -> np.ndarray:
    """Kendall's W of ``ranks`` (``(..., m raters, n things)``), corrected for ties:
    ``12 S / (m²(n³ − n) − m Σ_j Σ_groups (t³ − t))``; NaN where every rater ties every thing."""
    m, n = ranks.shape[-2], ranks.shape[-1]
    totals = ranks.sum(axis=-2)
    s = ((totals - totals.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    ties = np.zeros(ranks.shape[:-1])
    for value in np.unique(ranks):
        t = (ranks == value).sum(axis=-1)
        ties = ties + np.where(t > 1, t ** 3 - t, 0)
    denominator = m * m * (n ** 3 - n) - m * ties.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 12.0 * s / denominator, np.nan)


def w_permutation_p(values: np.ndarray, higher_is_better: Sequence[bool], n_permutations: int, seed: int) -> float:
    """The permutation p of W for ``values`` (m families × n tutors): each family's values shuffled
    across the tutors independently; ``(1 + #{W* ≥ W}) / (1 + n_permutations)``."""
    rng = np.random.default_rng(seed)
    observed = float(kendall_w(_ranks(values, higher_is_better)))
    perms = np.stack([np.stack([row[rng.permutation(values.shape[1])] for row in values])
                      for _ in range(n_permutations)])
    w = kendall_w(_ranks(perms, higher_is_better))
    return float((1 + np.count_nonzero(w >= observed - 1e-12)) / (1 + n_permutations))


def _ranks(values: np.ndarray, higher_is_better: Sequence[bool]) -> np.ndarray:
    """Each family's ranks (``values``: ``(..., m, n)``), by its own direction."""
    out = np.empty(values.shape)
    for i, hib in enumerate(higher_is_better):
        out[..., i, :] = rank_matrix(values[..., i, :], hib)
    return out


def _tau_b(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's τ-b along the last axis (NaN when a side is constant)."""
    da = np.sign(a[..., :, None] - a[..., None, :])
    db = np.sign(b[..., :, None] - b[..., None, :])
    n = a.shape[-1]
    upper = np.triu_indices(n, k=1)
    sa, sb = da[..., upper[0], upper[1]], db[..., upper[0], upper[1]]
    s = (sa * sb).sum(axis=-1)
    denominator = np.sqrt(np.count_nonzero(sa, axis=-1) * np.count_nonzero(sb, axis=-1).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, s / denominator, np.nan)


def _bootstrap_means(f: FamilyOutcomes, tutors: list[str], n_resamples: int, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The tutor means (point, and ``n_resamples`` × tutors under the cluster bootstrap)."""
    clusters = sorted({c for _, c, _ in f.episodes})
    ci = {c: k for k, c in enumerate(clusters)}
    ti = {t: k for k, t in enumerate(tutors)}
    sums = np.zeros((len(tutors), len(clusters)))
    counts = np.zeros((len(tutors), len(clusters)))
    for t, c, v in f.episodes:
        if v is not None:
            sums[ti[t], ci[c]] += v
            counts[ti[t], ci[c]] += 1
    if (counts.sum(axis=1) == 0).any():
        empty = [t for t in tutors if counts[ti[t]].sum() == 0]
        raise ConfigError(f"certify: {', '.join(empty)} has no finished episode under {f.family}", field="runs")
    point = sums.sum(axis=1) / counts.sum(axis=1)
    picks = rng.integers(0, len(clusters), size=(n_resamples, len(clusters)))
    weights = np.zeros((n_resamples, len(clusters)))
    np.add.at(weights, (np.arange(n_resamples)[:, None], picks), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (weights @ sums.T) / (weights @ counts.T)
    # a resample that draws no cluster of a tutor: its mean is the point estimate (rare, tiny data)
    boot = np.where(np.isfinite(boot), boot, point[None, :])
    return point, boot


def _interval(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return (float(lo), float(hi))


def certify(families: Sequence[FamilyOutcomes], *, known_order: Sequence[str] | None = None,
            n_resamples: int = 2000, n_permutations: int = 2000, seed: int = 0) -> Concordance:
    """Rank intervals, concordance, flips, known groups and the verdict (see the module docstring).

    At least two families and three tutors, the same tutors under every family: otherwise a
    ConfigError saying which. ``known_order``: tutors of the known-groups check, worst first.
    """
    if len(families) < 2:
        raise ConfigError(f"certify: {len(families)} learner family; a cross-learner check needs two or more",
                          field="runs")
    names = [f.family for f in families]
    if len(set(names)) < len(names):
        raise ConfigError(f"certify: a family given twice ({', '.join(names)}); combine one family's runs first",
                          field="runs")
    tutors = families[0].tutors()
    for f in families[1:]:
        if f.tutors() != tutors:
            only_a = sorted(set(tutors) - set(f.tutors()))
            only_b = sorted(set(f.tutors()) - set(tutors))
            raise ConfigError(f"certify: {families[0].family} and {f.family} ranked different tutors (only "
                              f"{families[0].family}: {', '.join(only_a) or 'none'}; only {f.family}: "
                              f"{', '.join(only_b) or 'none'})", field="runs")
    if len(tutors) < 3:
        raise ConfigError(f"certify: {len(tutors)} tutors; a ranking to certify needs three or more", field="runs")
    if known_order is not None:
        missing = [t for t in known_order if t not in tutors]
        if missing or len(known_order) < 2:
            raise ConfigError(f"certify: the known groups name tutors the runs do not have ({', '.join(missing)})"
                              if missing else "certify: the known groups need two tutors or more", field="known_order")
    rng = np.random.default_rng(seed)
    points, boots = [], []
    for f in families:
        p, b = _bootstrap_means(f, tutors, n_resamples, rng)
        points.append(p)
        boots.append(b)
    point = np.stack(points)                 # m × n
    boot = np.stack(boots, axis=1)           # B × m × n
    directions = [f.higher_is_better for f in families]
    ranks, boot_ranks = _ranks(point, directions), _ranks(boot, directions)
    w, boot_w = float(kendall_w(ranks)), kendall_w(boot_ranks)
    tau: dict[tuple[str, str], tuple[float | None, tuple[float, float] | None]] = {}
    for i, j in itertools.combinations(range(len(families)), 2):
        signed = [1 if d else -1 for d in directions]
        t = float(_tau_b(signed[i] * point[i], signed[j] * point[j]))
        bt = _tau_b(signed[i] * boot[:, i], signed[j] * boot[:, j])
        tau[(names[i], names[j])] = (None if np.isnan(t) else t, _interval(bt) if np.isfinite(bt).any() else None)
    # support[f][a][b]: the share of resamples where a is better than b under f (ties half)
    support = []
    for k, d in enumerate(directions):
        v = boot[:, k] if d else -boot[:, k]
        support.append(((v[:, :, None] > v[:, None, :]) + 0.5 * (v[:, :, None] == v[:, None, :])).mean(axis=0))
    flips = []
    for a, b in itertools.combinations(range(len(tutors)), 2):
        for x, y in itertools.permutations(range(len(families)), 2):
            if support[x][a, b] >= SUPPORT and support[y][b, a] >= SUPPORT:
                flips.append(Flip(tutors[a], tutors[b], names[x], names[y], float(support[x][a, b]),
                                  float(support[y][b, a])))
    groups: dict[str, list[KnownGroupPair]] = {}
    if known_order is not None:
        for k, f in enumerate(families):
            sign = 1.0 if f.higher_is_better else -1.0
            pairs = []
            for lo, hi in itertools.pairwise(known_order):
                li, hi_i = tutors.index(lo), tutors.index(hi)
                diff = sign * (boot[:, k, hi_i] - boot[:, k, li])
                pairs.append(KnownGroupPair(lo, hi, float(sign * (point[k, hi_i] - point[k, li])), _interval(diff),
                                            float(support[k][hi_i, li])))
            groups[f.family] = pairs
    failed = {f.family: {t: sum(1 for tt, _, v in f.episodes if tt == t and v is None) for t in tutors}
              for f in families}
    reasons = []
    w_ci = _interval(boot_w)
    if not (np.isfinite(w_ci[0]) and w_ci[0] >= W_THRESHOLD):
        reasons.append(f"the families' concordance is not established: W = {w:.3f}, 95% interval "
                       f"[{w_ci[0]:.3f}, {w_ci[1]:.3f}], whose lower end is below {W_THRESHOLD}")
    if known_order is None:
        reasons.append("no known-groups check was given")
    for fam, pairs in groups.items():
        for pair in pairs:
            if not pair.recovered:
                how = "reversed" if pair.difference < 0 else "not supported by its interval"
                reasons.append(f"{fam} does not recover the known order {pair.lower} < {pair.higher} ({how}: "
                               f"difference {pair.difference:+.3f} [{pair.ci95[0]:+.3f}, {pair.ci95[1]:+.3f}])")
    notes = []
    for f in families:
        for t in tutors:
            total = sum(1 for tt, _, _ in f.episodes if tt == t)
            if failed[f.family][t] > MAX_FAILED_SHARE * total:
                notes.append(f"{failed[f.family][t]} of {total} episodes of {t} failed under {f.family}")
    for flip in flips:
        notes.append(f"rank flip: {flip.first} above {flip.second} under {flip.family_a}, below it under "
                     f"{flip.family_b}")
    return Concordance(
        families=names, tutors=tutors,
        means={names[k]: {t: float(point[k, i]) for i, t in enumerate(tutors)} for k in range(len(families))},
        ranks={names[k]: {t: float(ranks[k, i]) for i, t in enumerate(tutors)} for k in range(len(families))},
        rank_ci95={names[k]: {t: _interval(boot_ranks[:, k, i]) for i, t in enumerate(tutors)}
                   for k in range(len(families))},
        failed=failed, w=w, w_ci95=w_ci,
        w_p=w_permutation_p(point, directions, n_permutations, seed), tau=tau, flips=flips,
        known_groups=groups, certified=not reasons, reasons=reasons, notes=notes)


# ------------------------------------------------------------------------------------------ run folders

CERTIFICATION_KIND = "certification"
CERTIFICATION_VERSION = 1


def tutor_means(outcomes: FamilyOutcomes) -> dict[str, float]:
    """Each tutor's mean outcome over its finished episodes."""
    sums: dict[str, list[float]] = {}
    for t, _, v in outcomes.episodes:
        if v is not None:
            sums.setdefault(t, []).append(v)
    return {t: float(np.mean(v)) for t, v in sums.items()}


def format_certification(doc: Mapping) -> str:
    """The certification as the command prints it."""
    c = doc["concordance"]
    lines = [f"tutor ranking under {len(doc['families'])} learner families ({', '.join(doc['families'])}), "
             f"{len(doc['tutors'])} tutors"]
    for f in doc["families"]:
        order = sorted(doc["tutors"], key=lambda t: doc["ranks"][f][t])
        lines.append(f"  {f} ({doc['outcomes'][f]}): " + ", ".join(
            f"{t} {doc['ranks'][f][t]:g} [{doc['rank_ci95'][f][t][0]:g}, {doc['rank_ci95'][f][t][1]:g}]" for t in order))
    lines.append(f"Kendall's W {c['kendall_w']:.3f} [{c['w_ci95'][0]:.3f}, {c['w_ci95'][1]:.3f}], permutation p "
                 f"{c['w_permutation_p']:.4f}")
    for t in c["kendall_tau"]:
        ci = f" [{t['ci95'][0]:.2f}, {t['ci95'][1]:.2f}]" if t["ci95"] else ""
        tau = "n/a" if t["tau"] is None else f"{t['tau']:.2f}"
        lines.append(f"  tau {t['families'][0]} ~ {t['families'][1]}: {tau}{ci}")
    for name, floor in c["run_to_run_floor"].items():
        tau = "n/a" if floor["mean_tau"] is None else f"{floor['mean_tau']:.2f}"
        lines.append(f"  run-to-run floor, {name} ({len(floor['folders'])} runs): mean tau {tau}")
    verdict = doc["verdict"]
    lines.append("verdict: certified" if verdict["certified"] else "verdict: not certified")
    lines += [f"  - {r}" for r in verdict["reasons"]] + [f"  note: {n}" for n in verdict["notes"]]
    for fam, cert in doc.get("realism", {}).items():
        if "reason" in cert:
            lines.append(f"realism of the learner of {fam}: none ({cert['reason']})")
            continue
        lines.append(f"realism of the learner of {fam} ({cert['dialogues']} dialogues vs {cert['real']} real on "
                     f"{cert['questions']} questions; real vs real in brackets after):")
        for m, v in cert["metrics"].items():
            ref = (cert.get("reference") or {}).get(m)
            lines.append(f"  {m}: {_stat_text(v)}  (real vs real: {_stat_text(ref)})")
    return "\n".join(lines)


def _stat_text(v: Mapping | None) -> str:
    if not v or v.get("value") is None:
        return "n/a"
    ci = v.get("ci95")
    return f"{v['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def draw_rank_intervals(doc: dict[str, Any]) -> Any:
    """The certification's rank intervals as a figure: one row per tutor (best mean rank on top), one
    marker per family at its rank with the 95% interval as a bar (None: nothing ranked)."""
    import matplotlib.pyplot as plt

    from simhub.tutoring.estimates import colour

    fams, tutors = doc["families"], doc["tutors"]
    if not fams or not tutors:
        return None
    order = sorted(tutors, key=lambda t: sum(doc["ranks"][f][t] for f in fams), reverse=True)
    fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(order) + 1.2))
    step = 0.6 / max(len(fams), 1)
    for k, f in enumerate(fams):
        ys = [i + (k - (len(fams) - 1) / 2) * step for i in range(len(order))]
        ranks = [doc["ranks"][f][t] for t in order]
        lo = [r - doc["rank_ci95"][f][t][0] for r, t in zip(ranks, order, strict=True)]
        hi = [doc["rank_ci95"][f][t][1] - r for r, t in zip(ranks, order, strict=True)]
        ax.errorbar(ranks, ys, xerr=[lo, hi], fmt="o", color=colour(k), label=f, capsize=3)
    ax.set_yticks(range(len(order)), order)
    ax.set_xlabel("rank (1 = best)")
    ax.set_xlim(len(tutors) + 0.5, 0.5)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def certification_section(folder: str) -> tuple[str, str, str]:
    """The ``simhub report`` section of a certification folder: (id, heading, HTML): the verdict and
    its reasons, the rankings side by side with rank intervals, concordance, flips and known groups."""
    import json
    from pathlib import Path

    from simhub.tutoring.estimates import escape, figure_html

    doc = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
    fams, tutors, c = doc["families"], doc["tutors"], doc["concordance"]
    verdict = doc["verdict"]
    parts = [f'<p class="verdict"><strong>{"Certified" if verdict["certified"] else "Not certified"}</strong>'
             f' ({escape(", ".join(fams))}; {len(tutors)} tutors)</p>']
    if verdict["reasons"]:
        parts.append("<ul>" + "".join(f"<li>{escape(r)}</li>" for r in verdict["reasons"]) + "</ul>")
    if verdict["notes"]:
        parts.append("<p>Notes:</p><ul>" + "".join(f"<li>{escape(n)}</li>" for n in verdict["notes"]) + "</ul>")
    head = "".join(f"<th>{escape(f)} ({escape(doc['outcomes'][f])}): mean, rank [95% interval]</th>" for f in fams)
    rows = []
    for t in sorted(tutors, key=lambda t: sum(doc["ranks"][f][t] for f in fams)):
        cells = "".join(f"<td>{doc['means'][f][t]:.3f}, {doc['ranks'][f][t]:g} "
                        f"<span class=\"ci\">[{doc['rank_ci95'][f][t][0]:g}, {doc['rank_ci95'][f][t][1]:g}]</span>"
                        + (f" ({doc['failed'][f][t]} failed)" if doc["failed"][f][t] else "") + "</td>" for f in fams)
        rows.append(f"<tr><th>{escape(t)}</th>{cells}</tr>")
    parts.append(f'<table class="certification"><tr><th>tutor</th>{head}</tr>{"".join(rows)}</table>')
    parts.append(figure_html("certification-ranks", "Rank intervals by learner family",
                             "Each tutor's rank (1 is best) under each learner family, with its 95% cluster-bootstrap "
                             "interval; a tutor whose intervals do not overlap across families is ranked differently by "
                             "them.", "Rank intervals", draw_rank_intervals, doc))
    taus = "; ".join(f"τ {escape(x['families'][0])} ~ {escape(x['families'][1])} "
                     + ("n/a" if x["tau"] is None else f"{x['tau']:.2f}")
                     + (f" [{x['ci95'][0]:.2f}, {x['ci95'][1]:.2f}]" if x["ci95"] else "") for x in c["kendall_tau"])
    floors = "; ".join(f"run-to-run floor of {escape(n)}: τ "
                       + ("n/a" if f["mean_tau"] is None else f"{f['mean_tau']:.2f}")
                       for n, f in c["run_to_run_floor"].items())
    parts.append(f"<p>Kendall's W {c['kendall_w']:.3f} [{c['w_ci95'][0]:.3f}, {c['w_ci95'][1]:.3f}] "
                 f"(certified from {c['w_threshold']}), permutation p {c['w_permutation_p']:.4f}; {taus}"
                 + (f"; {floors}" if floors else "") + ".</p>")
    groups = doc["known_groups"]
    if groups["order"]:
        items = []
        for f, pairs in groups["families"].items():
            steps = ", ".join(f"{escape(p['lower'])} &lt; {escape(p['higher'])} {p['difference']:+.3f} "
                              f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] {'✓' if p['recovered'] else '✗'}"
                              for p in pairs)
            items.append(f"<li>{escape(f)}: {steps}</li>")
        parts.append("<p>Known groups (worst first):</p><ul>" + "".join(items) + "</ul>")
    realism = doc.get("realism") or {}
    if realism:
        metrics = list(dict.fromkeys(m for cert in realism.values() for m in cert.get("metrics", {})))
        head = "".join(f"<th>{escape(m)}</th>" for m in metrics)
        rows = []
        for fam, cert in realism.items():
            if "reason" in cert:
                rows.append(f'<tr><th>{escape(fam)}</th><td colspan="{max(len(metrics), 1)}">none: '
                            f"{escape(cert['reason'])}</td></tr>")
                continue
            ref = cert.get("reference") or {}
            cells = "".join(f"<td>{escape(_stat_text(cert['metrics'].get(m)))}<br><span class=\"ci\">real vs real "
                            f"{escape(_stat_text(ref.get(m)))}</span></td>" for m in metrics)
            rows.append(f"<tr><th>{escape(fam)} ({cert['dialogues']} vs {cert['real']} real)</th>{cells}</tr>")
        parts.append("<p>Realism of each learner: its dialogues against real ones on the same questions "
                     "(detectability AUROC: 0.5 is indistinguishable; distances: 0 is identical), each beside two "
                     "halves of the real dialogues against each other.</p>"
                     f'<table class="certification-realism"><tr><th>learner</th>{head}</tr>{"".join(rows)}</table>')
    return "certification", "Tutor ranking certification", "\n".join(parts)
