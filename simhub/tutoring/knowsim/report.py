"""The tutor-bench section of ``simhub report`` (the command line puts it on the page,
:func:`simhub.evaluation.report.render_report`'s ``sections``): a ``simhub tutor-bench`` run directory (its
``results.json`` and ``traces/``) as a leaderboard with intervals (IQ a column of its own when an IQ
rater ran), the tutor × level table, the paired comparisons, and three figures drawn from the traces:

* knowledge gain along the conversation, per level (the mean KG after each turn, a conversation that
  has ended keeping its final value);
* the failure modes of the explained IUs, per tutor and level (stacked shares);
* the learner's effective load against its capacity τ, per turn (the mean over conversations still
  running at that turn).

Like the rest of the report it is static HTML and inline SVG; every string from a run is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from simhub.learners.metrics import FAILURE_MODES, knowledge_gain
from simhub.learners.state import LEVELS
from simhub.plotting import legend_above as _legend_above
from simhub.plotting import new_figure as _new_figure
from simhub.tutoring.estimates import Estimate, cell_html, figure_html
from simhub.tutoring.estimates import colour as _colour
from simhub.tutoring.estimates import escape as _e
from simhub.tutoring.knowsim.results import OUTPUT, RESULTS_FILE, RESULTS_KIND, BenchResults, read_results
from simhub.tutoring.knowsim.trace import Trace, read_trace
from simhub.tutoring.report import results_kind

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The section's id and heading on the report page.
SECTION = ("tutor-bench", "Tutor bench")

#: Colours of the failure modes, in FAILURE_MODES order (colour-blind safe).
_MODE_COLOURS = ("#BBBBBB", "#CC79A7", "#009E73", "#D55E00", "#E69F00")


@dataclass(frozen=True)
class BenchRun:
    """One tutor-bench run directory, read."""

    name: str
    results: BenchResults
    traces: tuple[Trace, ...]


def is_tutor_bench(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a tutor-bench run directory (its ``results.json`` says so)."""
    return results_kind(path) == RESULTS_KIND


def load_bench(path: str | PathLike[str]) -> BenchRun:
    """The results and traces of a tutor-bench run directory (checked readers: a broken file is a
    DataError naming it)."""
    path = Path(path)
    traces = tuple(read_trace(p) for p in sorted((path / "traces").glob("*.json")))
    return BenchRun(path.name or str(path), read_results(path / RESULTS_FILE), traces)


def _estimate(e: Estimate | None, digits: int = 2) -> str:
    return cell_html(e, digits)


def _label(metric: str) -> str:
    return OUTPUT[metric].label if metric in OUTPUT else metric


def _arrow(metric: str) -> str:
    return OUTPUT[metric].arrow if metric in OUTPUT else "↑"


def _leaderboard(r: BenchResults) -> str:
    ordered = sorted(r.tutors, key=lambda t: (t.mean_rank is None, t.mean_rank or 0.0))
    metrics = r.metric_names()
    over = ", ".join(_label(m) for m in r.ranked()[:-1]) + f" and {_label(r.ranked()[-1])}"
    head = "".join(f"<th>{_label(m)} {_arrow(m)}</th>" for m in metrics)
    rows = []
    for t in ordered:
        cells = "".join(f"<td>{_estimate(t.marginal.get(m))}</td>" for m in metrics)
        rank = "—" if t.mean_rank is None else f"{t.mean_rank:.2f}"
        failed = f' <span class="warn">{t.failed} failed</span>' if t.failed else ""
        rows.append(f"<tr><th scope=\"row\">{_e(t.tutor)}</th>{cells}<td>{rank}</td>"
                    f"<td>{t.conversations}{failed}</td></tr>")
    return (f'<div class="table-wrap"><table class="bench-leaderboard"><caption>Level-marginalised means (the mean of the level means) '
            f"with item-bootstrap 95% intervals ({r.n_resamples} resamples); R̄ is the mean rank over {over} "
            f"(lower is better). Preset {_e(r.preset)}, {r.items} items, levels {_e(', '.join(r.levels))}.</caption>"
            f"<thead><tr><th>tutor</th>{head}<th>R̄ ↓</th><th>conversations</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _level_table(r: BenchResults) -> str:
    head = "".join(f"<th>{_e(level)}</th>" for level in r.levels)
    rows = []
    for t in r.tutors:
        cells = "".join(f"<td>{_estimate(t.levels[level].metrics.get('kg')) if level in t.levels else '—'}</td>"
                        for level in r.levels)
        rows.append(f'<tr><th scope="row">{_e(t.tutor)}</th>{cells}</tr>')
    return (f'<div class="table-wrap"><table class="bench-levels"><caption>KG per tutor and level (aptitude–treatment interaction), '
            f"95% intervals.</caption><thead><tr><th>tutor</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _comparisons(r: BenchResults) -> str:
    pooled = [c for c in r.comparisons if c.level == "all"] or list(r.comparisons)
    if not pooled:
        return '<p class="empty">One tutor: no paired comparison.</p>'
    rows = []
    for c in pooled:
        diff = "—" if c.diff is None else f"{c.diff:+.2f}"
        ci = f" [{c.ci95[0]:+.2f}, {c.ci95[1]:+.2f}]" if c.ci95 else ""
        p = "—" if c.p_holm is None else f"{c.p_holm:.4f}"
        rows.append(f"<tr><td>{_e(c.a)} − {_e(c.b)}</td><td>{_e(_label(c.metric))}</td>"
                    f"<td>{_e(c.level)}</td><td>{c.n}</td><td>{diff}{ci}</td><td>{p}</td></tr>")
    return ('<div class="table-wrap"><table class="bench-comparisons"><caption>Paired comparisons on the same items and levels: mean '
            "difference with its paired item-bootstrap interval, and the permutation test's p-value, Holm-adjusted "
            "over the family.</caption><thead><tr><th>pair</th><th>metric</th><th>level</th><th>n</th>"
            f"<th>difference</th><th>p (Holm)</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _ok(traces: Sequence[Trace]) -> list[Trace]:
    return [t for t in traces if t.failed is None and t.turns]


def kg_trajectories(traces: Sequence[Trace]) -> dict[str, dict[str, list[float]]]:
    """Level (novice, intermediate, advanced order) -> tutor -> the mean KG after turns 1..T (T the
    longest conversation of the level); a conversation that ended keeps its final KG."""
    out: dict[str, dict[str, list[float]]] = {}
    good = _ok(traces)
    present = {t.level for t in good}
    for level in [lv for lv in LEVELS if lv in present] + sorted(present - set(LEVELS)):
        at = [t for t in good if t.level == level]
        longest = max(len(t.scored_turns) for t in at)
        out[level] = {}
        for tutor in dict.fromkeys(t.tutor for t in at):
            curves = []
            for t in (x for x in at if x.tutor == tutor):
                gains = [float(knowledge_gain(t.initial, turn.record.state)) for turn in t.scored_turns]
                curves.append(gains + [gains[-1]] * (longest - len(gains)))
            out[level][tutor] = [sum(c[k] for c in curves) / len(curves) for k in range(longest)]
    return out


def load_per_turn(traces: Sequence[Trace]) -> dict[str, tuple[list[float], list[float]]]:
    """Tutor -> (mean effective load, mean capacity τ) at turns 1..T over the conversations still running."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    good = _ok(traces)
    for tutor in dict.fromkeys(t.tutor for t in good):
        mine = [t for t in good if t.tutor == tutor]
        longest = max(len(t.scored_turns) for t in mine)
        loads, caps = [], []
        for k in range(longest):
            running = [t.scored_turns[k].record for t in mine if len(t.scored_turns) > k]
            loads.append(sum(r.effective_load for r in running) / len(running))
            caps.append(sum(r.threshold for r in running) / len(running))
        out[tutor] = (loads, caps)
    return out


def _turn_axis(ax, turns: int) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(0.5, max(turns, 2) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_kg(bench: BenchRun, tutors: list[str]) -> Figure | None:
    curves = kg_trajectories(bench.traces)
    if not curves:
        return None
    fig = _new_figure(3.2 * len(curves) + 0.6, 3.0)
    axes = fig.subplots(1, len(curves), sharey=True, squeeze=False)[0]
    for ax, (level, by_tutor) in zip(axes, curves.items(), strict=True):
        for tutor, ys in by_tutor.items():
            i = tutors.index(tutor)
            ax.plot(range(1, len(ys) + 1), ys, marker="o", markersize=3, color=_colour(i),
                    linestyle=("-", "--", ":", "-.")[i % 4], label=tutor)
        ax.set_title(level, fontsize=9)
        ax.set_xlabel("turn")
        _turn_axis(ax, max(len(ys) for ys in by_tutor.values()))
    axes[0].set_ylabel("mean KG (IU levels gained)")
    _legend_above(fig, axes[0], ncols=len(tutors))
    return fig


def _draw_modes(bench: BenchRun) -> Figure | None:
    rows = [(f"{t.tutor} · {level}", lr.failure_shares) for t in bench.results.tutors
            for level, lr in t.levels.items() if sum(lr.failure_modes.values())]
    if not rows:
        return None
    fig = _new_figure(9.0, 0.4 * len(rows) + 1.4)
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for mode, colour in zip(FAILURE_MODES, _MODE_COLOURS, strict=True):
        widths = [100 * shares.get(mode, 0.0) for _, shares in rows]
        ax.barh(ys, widths, left=left, height=0.7, color=colour, label=mode)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(ys, [label for label, _ in rows], fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of explained IUs (%)")
    _legend_above(fig, ax, ncols=3)
    return fig


def _draw_load(bench: BenchRun, tutors: list[str]) -> Figure | None:
    per = load_per_turn(bench.traces)
    if not per:
        return None
    fig = _new_figure(9.0, 3.4)
    ax = fig.subplots()
    # The same items and levels give every tutor the same capacity at each turn they share (conversations
    # end at different turns): one capacity line then, the longest, rather than lines hiding each other.
    curves = [caps for _, caps in per.values()]
    shared = all(abs(a - b) < 1e-9 for c in curves for d in curves for a, b in zip(c, d, strict=False))
    for tutor, (loads, caps) in per.items():
        i = tutors.index(tutor)
        xs = range(1, len(loads) + 1)
        ax.plot(xs, loads, marker="o", markersize=3, color=_colour(i), label=f"{tutor}: load")
        if not shared:  # each tutor's its own dash and marker, nudged apart: equal capacities stay visible
            nudge = (i - (len(per) - 1) / 2) * 0.06
            ax.plot([x + nudge for x in xs], caps, color=_colour(i), linestyle=(":", "--", "-.")[i % 3], linewidth=1.4,
                    marker=("s", "^", "v", "D")[i % 4], markersize=3, markerfacecolor="white",
                    label=f"{tutor}: capacity τ")
    if shared:
        caps = max(curves, key=len)
        ax.plot(range(1, len(caps) + 1), caps, color="#555555", linestyle=":", linewidth=1.4,
                label="capacity τ (every tutor)")
    ax.set_xlabel("turn")
    ax.set_ylabel("effective load")
    _turn_axis(ax, max(len(loads) for loads, _ in per.values()))
    _legend_above(fig, ax, ncols=3)
    return fig


def first_turn_stops(bench: BenchRun) -> dict[str, tuple[int, int]]:
    """Level -> (conversations that ended at turn 1 on the mastery rule, conversations of the level),
    for the levels where any did. Under the paper preset an advanced learner starts with 80% of its IUs
    at knows_well (KnowSim's Table 5), which already meets the paper's mastery rule (80%), so every
    advanced conversation ends after its first turn: a property of KnowSim's rules and starts, not of
    the tutor."""
    out: dict[str, tuple[int, int]] = {}
    good = _ok(bench.traces)
    for level in dict.fromkeys(t.level for t in good):
        at = [t for t in good if t.level == level]
        ended = sum(1 for t in at if len(t.scored_turns) == 1 and t.stop_reason == "mastery")
        if ended:
            out[level] = (ended, len(at))
    return out


def _first_turn_note(bench: BenchRun) -> str:
    stops = first_turn_stops(bench)
    if not stops:
        return ""
    counts = "; ".join(f"{level}: {ended} of {n}" for level, (ended, n) in stops.items())
    return (f'<p class="note" data-first-turn-stops>Conversations that ended after their first turn on the mastery '
            f"rule ({_e(counts)}). Under the paper preset, mastery is 80% of the IUs at knows_well, and an advanced "
            "learner starts with 80% of them there (KnowSim's starting ratios), so an advanced conversation ends "
            "after one turn whatever the tutor: its KG, DC and CO are those of one turn, and the level-marginalised "
            "means weigh them as any other level. The released preset's mastery rule (every IU at knows_well) lets "
            "them go on (simhub tutor-bench --preset released).</p>")


def bench_title(benches: Sequence[BenchRun]) -> str:
    """A page title naming what the runs compare (rather than the section's heading again)."""
    tutors = list(dict.fromkeys(t.tutor for b in benches for t in b.results.tutors))
    return f"Tutor bench, knowledge-state learner: {', '.join(tutors)}"


def _heading(bench: BenchRun) -> str:
    r = bench.results
    tutors = " vs ".join(t.tutor for t in r.tutors)
    return (f"{_e(tutors)}: KnowSim learner, {_e(r.preset)} preset, {r.items} items × {len(r.levels)} levels "
            f'<span class="muted">({_e(bench.name)})</span>')


def bench_section(benches: Sequence[BenchRun]) -> tuple[str, str, str]:
    """The report section over tutor-bench runs (one sub-section each), as ``(id, heading, html)``
    for :func:`simhub.evaluation.report.render_report`'s ``sections``."""
    parts = []
    for k, bench in enumerate(benches):
        r = bench.results
        tutors = [t.tutor for t in r.tutors]
        sid = f"bench-{k}"
        failed = (f' <span class="warn">{r.failed} of {r.conversations} conversations failed; they are left out of '
                  f"every aggregate and counted beside it.</span>") if r.failed else ""
        ratings = "" if isinstance(r.flagged_ratings, msgspec.UnsetType) else \
            f" IQ was rated by an LLM rater; {r.flagged_ratings} ratings were unusable and are left out of IQ."
        if not isinstance(r.flagged_stops, msgspec.UnsetType):
            ratings += (f" Each conversation ends where an LLM termination judge said a real student would have left "
                        f"it; {r.flagged_stops} judgements were unusable, and those conversations count whole.")
        parts.append(
            f'<h3 id="{sid}">{_heading(bench)}</h3>'
            f"<p>{r.conversations} conversations, {r.flagged_turns} flagged turns (an unusable learner or extractor "
            f"answer, kept and advancing nothing).{ratings}{failed}</p>"
            + _first_turn_note(bench) + _leaderboard(r) + _level_table(r) + _comparisons(r)
            + figure_html(f"{sid}-kg", "Knowledge gain along the conversation",
                      "Mean KG after each turn, per level; a conversation that has ended keeps its final KG.",
                      "knowledge gain along the conversation, per level", _draw_kg, bench, tutors)
            + figure_html(f"{sid}-modes", "Failure modes",
                      "What happened to each explained IU (REDUNDANT > PREREQ-BLOCKED > EFFECTIVE > OVERLOAD-WASTED "
                      "> UNDER-ABSORBED), as shares per tutor and level.",
                      "failure modes of the explained IUs, per tutor and level", _draw_modes, bench)
            + figure_html(f"{sid}-load", "Load against capacity",
                      "The learner's mean effective load per turn (solid) and its capacity τ (dotted), over the "
                      "conversations still running.", "effective load against capacity, per turn",
                      _draw_load, bench, tutors))
    sid, head = SECTION
    return sid, head, (f'<section id="{sid}" aria-labelledby="{sid}-h"><h2 id="{sid}-h">{head}</h2>'
                       "<p>Tutors ranked by what a knowledge-state learner learned from them (KG, DC, CO; "
                       "docs/tutor-bench.md).</p>" + "".join(parts) + "</section>")
