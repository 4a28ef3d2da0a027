"""The report's figures: matplotlib drawings of the distributions behind the numbers.

Figures are aggregates (bars, lines, binned lengths), never one mark per turn, so a page stays small
whatever the number of turns. Every label that comes from a run is escaped for matplotlib's mathtext
(:func:`_mpl_text`). Adding a figure is adding a :class:`FigureSpec` to :data:`TURN_FIGURES` or
:data:`DIALOGUE_FIGURES`; :func:`svg_markup` turns a drawn figure into inline SVG.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from simhub.evaluation.leaderboard import RankedRun, display_names, metric_order
from simhub.evaluation.rundir import Run, ScoredTurn
from simhub.metrics import label as metric_label
from simhub.plotting import RC as _RC
from simhub.plotting import RUN_COLOURS as _RUN_COLOURS
from simhub.plotting import legend_above as _legend_above
from simhub.plotting import new_figure as _new_figure
from simhub.plotting import svg_markup
from simhub.schema import ACTS, CORRECTNESS_LABELS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Student turns at this 0-based position or later are pooled into one "late" bucket in the
#: by-position figure: few dialogues are that long, and their per-position means are noise.
LATE_POSITION = 10

#: Labels outside the five acts (or the three correctness labels) are counted under this name.
OTHER = "Other"

#: One marker per run as well as one colour, so runs whose lines coincide (the same means at every
#: position) stay apart; see also :func:`_offset`.
_RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
_REAL_COLOUR = "#4D4D4D"
#: The "same length as real" reference of the length figure: a wide pale band under the runs' lines,
#: visible where a run's line lies on it (the real turns themselves do).
_REFERENCE_COLOUR = "#C8C8C8"
_OTHER_REAL_COLOURS = ("#999999", "#222222", "#777777")
_LABEL_COLOURS = {"correct": "#009E73", "incorrect": "#D55E00", "na": "#BBBBBB", OTHER: "#888888"}



@dataclass(frozen=True, slots=True)
class Series:
    """One thing a figure draws: the real data, or one run."""

    label: str
    colour: str
    turns: tuple[ScoredTurn, ...]
    real: bool = False
    marker: str = "o"


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What figure builders get: the runs in leaderboard order, their display names and colours,
    and the "real" series (one per distinct data file the runs were evaluated on)."""

    runs: tuple[Run, ...]
    names: Mapping[int, str]
    series: tuple[Series, ...]
    real: tuple[Series, ...]


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """A figure of the report. ``draw`` returns a matplotlib figure, or None when no run has the
    data it needs (the page then says so in its place). Adding a figure is adding a spec to
    :data:`TURN_FIGURES` or :data:`DIALOGUE_FIGURES`."""

    id: str
    title: str
    caption: str
    draw: Callable[[ReportContext], Figure | None]


def _real_colour(index: int) -> str:
    """The colour of the ``index``-th real series (one per distinct real data file)."""
    return _REAL_COLOUR if index == 0 else _OTHER_REAL_COLOURS[(index - 1) % len(_OTHER_REAL_COLOURS)]


def _mpl_text(text: str, limit: int = 40) -> str:
    """A run-supplied label made safe for matplotlib: shortened, ``$`` not read as mathtext, and
    a leading underscore (which legends would hide) kept visible."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _shares(labels: Iterable[str | None], categories: Sequence[str]) -> tuple[list[float], int]:
    """Share of each category among the non-null labels (anything else counts as :data:`OTHER`)."""
    counts = Counter(label if label in categories else OTHER for label in labels if label is not None)
    total = sum(counts.values())
    return [counts[c] / total if total else 0.0 for c in categories], total


def _offset(index: int, count: int, span: float = 0.3) -> float:
    """A small horizontal shift of the ``index``-th of ``count`` line series on a categorical axis:
    lines with the same values then run side by side instead of one hiding the others."""
    return 0.0 if count < 2 else (index - (count - 1) / 2) * min(0.06, span / (count - 1))


def _act_bars(rows: Sequence[tuple[Series, Sequence[str | None]]], ylabel: str) -> Figure | None:
    """Grouped bars: the share of each act among each row's labels (real rows hatched). A row with no
    label (a run scored without the act metric) is left out, not drawn as an empty "(n=0)" entry."""
    rows = [(s, labels) for s, labels in rows if any(label is not None for label in labels)]
    if not rows:
        return None
    has_other = any(label is not None and label not in ACTS for _, labels in rows for label in labels)
    categories = [*ACTS, OTHER] if has_other else list(ACTS)
    fig = _new_figure(7.5, 3.2 + 0.18 * math.ceil(len(rows) / 3))
    ax = fig.subplots()
    width = 0.8 / len(rows)
    for i, (s, labels) in enumerate(rows):
        shares, n = _shares(labels, categories)
        xs = [c + (i - (len(rows) - 1) / 2) * width for c in range(len(categories))]
        ax.bar(xs, [100 * v for v in shares], width=width * 0.95, color=s.colour,
               hatch="//" if s.real else None, edgecolor="white" if s.real else None, linewidth=0,
               label=_mpl_text(f"{s.label} (n={n:,})", 60))
    ax.set_xticks(range(len(categories)), categories)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, max(ax.get_ylim()[1], 5) * 1.05)  # headroom: the tallest bar never touches the frame
    _legend_above(fig, ax)
    return fig


def _draw_acts(ctx: ReportContext) -> Figure | None:
    rows = [(s, [t.real_act for t in s.turns]) for s in ctx.real]
    rows += [(s, [t.predicted_act for t in s.turns]) for s in ctx.series]
    return _act_bars(rows, "share of turns (%)")


def _draw_correctness(ctx: ReportContext) -> Figure | None:
    rows = [(s, [t.real_label for t in s.turns]) for s in ctx.real]
    rows += [(s, [t.verdict for t in s.turns]) for s in ctx.series]
    rows = [(s, labels) for s, labels in rows if any(label is not None for label in labels)]
    if not rows:
        return None
    has_other = any(label not in CORRECTNESS_LABELS for _, labels in rows for label in labels if label is not None)
    categories = [*CORRECTNESS_LABELS, OTHER] if has_other else list(CORRECTNESS_LABELS)
    fig = _new_figure(7.5, 0.9 + 0.42 * len(rows))
    ax = fig.subplots()
    ticks = []
    for y, (s, labels) in enumerate(rows):
        shares, n = _shares(labels, categories)
        ticks.append(_mpl_text(f"{s.label} (n={n:,})", 48))
        left = 0.0
        for category, share in zip(categories, shares, strict=True):
            ax.barh(y, 100 * share, left=left, height=0.7, color=_LABEL_COLOURS[category],
                    label=category if y == 0 else None)
            if share >= 0.06:
                ax.text(left + 50 * share, y, f"{100 * share:.0f}%", ha="center", va="center", fontsize=8,
                        color="white" if category != "na" else "black")
            left += 100 * share
    ax.set_yticks(range(len(rows)), ticks)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of turns (%)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(categories), fontsize=8)
    return fig


def _position_bucket(position: int) -> int:
    return min(position, LATE_POSITION)


def _draw_positions(ctx: ReportContext) -> Figure | None:
    metrics = metric_order({m for s in ctx.series for t in s.turns for m, v in t.scores.items() if v is not None})
    if not metrics:
        return None
    cols = min(4, len(metrics) + 1)  # one panel is left for the legend
    rows = math.ceil((len(metrics) + 1) / cols)
    fig = _new_figure(2.45 * cols, 2.05 * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    buckets = [b for b in range(LATE_POSITION + 1)
               if any(_position_bucket(t.position) == b for s in ctx.series for t in s.turns)]
    labels = [f"{b + 1}+" if b == LATE_POSITION else str(b + 1) for b in buckets]
    handles = []
    for ax, metric in zip(axes, metrics, strict=False):
        for n, s in enumerate(ctx.series):
            sums: dict[int, float] = defaultdict(float)
            counts: dict[int, int] = defaultdict(int)
            for t in s.turns:
                value = t.scores.get(metric)
                if value is not None:
                    b = _position_bucket(t.position)
                    sums[b] += value
                    counts[b] += 1
            xs = [i for i, b in enumerate(buckets) if counts[b]]
            ys = [sums[buckets[i]] / counts[buckets[i]] for i in xs]
            (line,) = ax.plot([x + _offset(n, len(ctx.series)) for x in xs], ys, marker=s.marker, markersize=3.5,
                              linewidth=1.2, alpha=0.85, color=s.colour)
            if metric == metrics[0]:
                handles.append(line)
        ax.set_title(_mpl_text(metric_label(metric)))
        step = max(1, math.ceil(len(buckets) / 6))
        ax.set_xticks(range(0, len(buckets), step), labels[::step])
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    for ax in axes[len(metrics):]:
        ax.axis("off")
    axes[len(metrics)].legend(handles, [_mpl_text(s.label) for s in ctx.series], loc="center", fontsize=8)
    fig.supxlabel("student turn in the dialogue", fontsize=9)
    return fig


#: Word-count bins [edge, next edge) of the length figure: about two bins per doubling, so short
#: real turns and long generated ones are both resolved.
_LENGTH_EDGES = (0, 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)


def _length_bin(words: int) -> int:
    return max(i for i, edge in enumerate(_LENGTH_EDGES) if words >= edge)


def _length_labels() -> list[str]:
    labels = []
    for i, lo in enumerate(_LENGTH_EDGES):
        hi = _LENGTH_EDGES[i + 1] - 1 if i + 1 < len(_LENGTH_EDGES) else None
        labels.append(f"{lo}+" if hi is None else str(lo) if hi == lo else f"{lo}–{hi}")
    return labels


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _length_histogram(ax, words: Sequence[int], s: Series, label: str, n_bins: int) -> Any:
    """One step line (returned): the share of ``words`` (turn lengths) in each length bin; real series dashed."""
    counts = Counter(_length_bin(w) for w in words)
    (line,) = ax.plot(range(n_bins), [100 * counts[b] / len(words) for b in range(n_bins)], drawstyle="steps-mid",
                      color=s.colour, linewidth=2.2 if s.real else 1.4, linestyle="--" if s.real else "-", label=label)
    return line


def _length_axis(ax, n_bins: int) -> None:
    ax.set_xticks(range(n_bins), _length_labels()[:n_bins], rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.5, n_bins - 0.5)
    ax.tick_params(labelsize=8)


def _draw_lengths(ctx: ReportContext) -> Figure | None:
    real_words = [[_words(t.real) for t in s.turns if t.real is not None] for s in ctx.real]
    sim_pairs = [[(_words(t.real), _words(t.candidate)) for t in s.turns if t.real is not None
                  and t.candidate is not None] for s in ctx.series]
    if not any(real_words) and not any(sim_pairs):
        return None
    n_bins = 1 + max([_length_bin(w) for ws in real_words for w in ws]
                     + [_length_bin(w) for ps in sim_pairs for p in ps for w in p] + [0])
    from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter

    entries = len(ctx.real) + len(ctx.series) + 1
    fig = _new_figure(9.0, 3.4 + 0.17 * math.ceil(entries / 3))
    hist_ax, cond_ax = fig.subplots(1, 2)
    # One legend below both panels, outside them: the real series (dashed, left), the reference band
    # (right) and each run with the median length of its turns (the same colour in both panels).
    legend: list[tuple[Any, str]] = []
    medians: dict[str, str] = {}
    for s, words in zip(ctx.real, real_words, strict=True):
        if words:
            label = _mpl_text(f"{s.label} (median {_median(words):g})", 48)
            legend.append((_length_histogram(hist_ax, words, s, label, n_bins), label))
    for s, pairs in zip(ctx.series, sim_pairs, strict=True):
        if pairs:
            words = [c for _, c in pairs]
            medians[s.label] = _mpl_text(f"{s.label} (median {_median(words):g})", 48)
            _length_histogram(hist_ax, words, s, medians[s.label], n_bins)
    hist_ax.set_title("Length of turns")
    hist_ax.set_xlabel("words")
    hist_ax.set_ylabel("share of turns (%)")

    # Conditional on the real turn's length: does the simulator answer long turns at length and
    # short ones briefly? The grey band is where a simulator matching the real length would be.
    reference = defaultdict(list)
    for pairs in sim_pairs:
        for real, _ in pairs:
            reference[_length_bin(real)].append(real)
    xs = sorted(reference)
    if xs:
        # Wide and pale, under the runs' lines, with square markers so that it shows even with one length
        # bin: a thin dashed line vanished under a run that matches it (the real turns themselves do).
        (band,) = cond_ax.plot(xs, [max(_median(reference[b]), 0.5) for b in xs], color=_REFERENCE_COLOUR,
                               linewidth=6, solid_capstyle="round", marker="s", markersize=7, zorder=1,
                               label="same length as real")
        legend.append((band, "same length as real"))
    for n, (s, pairs) in enumerate(zip(ctx.series, sim_pairs, strict=True)):
        if not pairs:
            continue
        by_bin = defaultdict(list)
        for real, cand in pairs:
            by_bin[_length_bin(real)].append(cand)
        xs = sorted(by_bin)
        (line,) = cond_ax.plot([x + _offset(n, len(ctx.series)) for x in xs],
                               [max(_median(by_bin[b]), 0.5) for b in xs], marker=s.marker, markersize=3.5,
                               linewidth=1.3, alpha=0.85, color=s.colour, zorder=2, label=_mpl_text(s.label))
        legend.append((line, medians[s.label]))
    cond_ax.set_yscale("log")
    cond_ax.yaxis.set_major_locator(FixedLocator([1, 2, 5, 10, 20, 50, 100, 200, 500]))
    cond_ax.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    cond_ax.yaxis.set_minor_formatter(NullFormatter())
    cond_ax.set_title("Simulated length by real length")
    cond_ax.set_xlabel("words in the real turn")
    cond_ax.set_ylabel("median words, simulated")
    for ax in (hist_ax, cond_ax):
        _length_axis(ax, n_bins)
    fig.legend([h for h, _ in legend], [label for _, label in legend], loc="outside lower center",
               ncols=min(3, len(legend)), fontsize=7)
    return fig


#: Turn-level figures, in page order.
TURN_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig-acts", "Dialogue acts",
        "Share of each dialogue act among student turns: the annotated act of the real turns (hatched) "
        "and the act classifier's label of each simulator's turns. From details.acts of scores.jsonl.",
        _draw_acts,
    ),
    FigureSpec(
        "fig-correctness", "Correctness",
        "Correctness of student turns: the real turns' labels and the judge's verdict on each "
        "simulator's turns (na: no task to answer, or a purely conversational turn). From details.judge.",
        _draw_correctness,
    ),
    FigureSpec(
        "fig-position", "Metrics by turn position",
        f"Mean of each metric by the position of the student turn in its dialogue (1 = first student "
        f"turn); turns from position {LATE_POSITION + 1} on are pooled. One line and one marker shape per run, "
        "shifted slightly sideways so that runs with the same values stay visible.",
        _draw_positions,
    ),
    FigureSpec(
        "fig-length", "Turn length",
        "Left: distribution of turn lengths in words, real (dashed) and simulated. Right: median "
        "length of the simulated turn for real turns of each length; the wide grey band is the real length.",
        _draw_lengths,
    ),
)

def _dialogue_figure_data(ctx: ReportContext, key: str) -> tuple[list[tuple[Series, Any]], list[tuple[Series, Any]]]:
    """``figures.<key>`` of each run's dialogue_results.json: one real entry per distinct real file
    (the first run's colour scheme), and one simulated entry per run."""
    real: list[tuple[Series, Any]] = []
    sim: list[tuple[Series, Any]] = []
    seen: dict[str, int] = {}
    for run, s in zip(ctx.runs, ctx.series, strict=True):
        if run.dialogue_results is None:
            continue
        figures = run.dialogue_results.raw.get("figures")
        entry = figures.get(key) if isinstance(figures, Mapping) else None
        if not isinstance(entry, Mapping):
            continue
        source = str(run.dialogue_results.raw.get("real") or "")
        if source not in seen and entry.get("real"):
            seen[source] = len(seen)
            label = "Real" if not seen[source] else f"Real · {Path(source).name}"
            real.append((Series(label, _real_colour(seen[source]), (), real=True), entry["real"]))
        if entry.get("sim"):
            sim.append((s, entry["sim"]))
    return real, sim


def _draw_dialogue_acts(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "acts")
    rows = [(s, [label for label, k in counts.items() for _ in range(int(k))])
            for s, counts in real + sim if isinstance(counts, Mapping)]
    return _act_bars([(s, labels) for s, labels in rows if labels], "share of student turns (%)")


def _draw_dialogue_lengths(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "lengths")
    rows = [(s, [int(w) for w in v]) for s, v in real + sim if isinstance(v, list) and v]
    if not rows:
        return None
    n_bins = 1 + max(_length_bin(w) for _, words in rows for w in words)
    fig = _new_figure(7.5, 3.2)
    ax = fig.subplots()
    for s, words in rows:
        _length_histogram(ax, words, s, _mpl_text(f"{s.label} (median {_median(words):g}, n={len(words):,})", 60),
                          n_bins)
    _length_axis(ax, n_bins)
    ax.set_xlabel("words per student turn")
    ax.set_ylabel("share of student turns (%)")
    _legend_above(fig, ax, ncols=2)
    return fig


def _draw_mastery(ctx: ReportContext) -> Figure | None:
    real, sim = _dialogue_figure_data(ctx, "mastery")
    rows = [(s, [float(v) for v in curve]) for s, curve in real + sim if isinstance(curve, list) and curve]
    if not rows:
        return None
    fig = _new_figure(7.5, 3.2)
    ax = fig.subplots()
    for n, (s, curve) in enumerate(rows):
        ax.plot([k + 1 + _offset(n, len(rows), span=0.2) for k in range(len(curve))], curve, marker=s.marker,
                markersize=3.5, color=s.colour, alpha=0.85, linewidth=2.2 if s.real else 1.3,
                linestyle="--" if s.real else "-", label=_mpl_text(s.label, 60))
    ax.set_xlabel("student turn in the dialogue")
    ax.set_ylabel("mean predicted mastery")
    ax.set_ylim(0, 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    _legend_above(fig, ax)
    return fig


#: Figures of the dialogue-level section (``figures`` of ``dialogue_results.json``), in page order.
DIALOGUE_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig-dialogue-acts", "Act mix over whole dialogues",
        "Share of each dialogue act among the student turns of the real dialogues (hatched) and of each "
        "simulator's rollouts, both labelled by the same act classifier (acts_jsd compares them).",
        _draw_dialogue_acts,
    ),
    FigureSpec(
        "fig-dialogue-length", "Student turn length over whole dialogues",
        "Distribution of words per student turn, real (dashed) and in each simulator's rollouts "
        "(length_w1 compares them on log1p(words)).",
        _draw_dialogue_lengths,
    ),
    FigureSpec(
        "fig-mastery", "Knowledge trajectories",
        "Mean mastery the knowledge-tracing model predicts after each student turn, averaged over the "
        "knowledge components of the question and over dialogues still running at that turn; real dashed "
        "(kt_gain_diff compares the gains). Shown when the profile configures the knowledge metric.",
        _draw_mastery,
    ),
)


def draw_svg(spec: FigureSpec, ctx: ReportContext) -> str | None:
    """``spec`` drawn for ``ctx`` as inline SVG (:func:`svg_markup`), or None when no run has its data."""
    import matplotlib as mpl

    with mpl.rc_context(_RC):
        fig = spec.draw(ctx)
    return None if fig is None else svg_markup(fig, spec.id, spec.title)


def report_context(ranked: Sequence[RankedRun]) -> ReportContext:
    """The figures' view of ranked runs: display names, one colour per run, one real series per data file."""
    runs = tuple(r.run for r in ranked)
    names = display_names(runs)
    series = tuple(Series(names[id(run)], _RUN_COLOURS[i] if i < len(_RUN_COLOURS) else f"C{i % 10}", run.turns,
                          marker=_RUN_MARKERS[i % len(_RUN_MARKERS)])
                   for i, run in enumerate(runs))
    # Real turns are the same for runs on the same data file: one real series per file.
    groups: dict[str, Run] = {}
    for run in runs:
        groups.setdefault(run.data.sha256 or run.data.path or str(run.path), run)
    real = []
    for i, run in enumerate(groups.values()):
        label = "Real"
        if len(groups) > 1:
            label = f"Real · {Path(run.data.path).name if run.data.path else names[id(run)]}"
        real.append(Series(label, _real_colour(i), run.turns, real=True))
    return ReportContext(runs, MappingProxyType(names), series, tuple(real))

