"""One self-contained HTML page over one or many ``simhub eval`` run directories.

Why an HTML page: a table of seven means hides most of what makes a simulated student realistic or
not. The page puts the numbers (the paper's Table 1, or a leaderboard when there are several runs)
next to the distributions behind them: which dialogue acts the simulator produces, how often it is
right, how realism changes along a dialogue, and how long its turns are compared with real students.

Design choices, and why:

* **Self-contained.** The page must open from disk, be mailed, attached to a pull request or kept
  as a CI artifact, and still render years later on a machine with no network. So it has no
  external script, font or stylesheet: CSS is inline, figures are inline SVG drawn by matplotlib's
  ``svg`` backend (no display needed), and there is no JavaScript at all.
* **Small.** Figures are aggregates (bars, lines, binned lengths), never one mark per turn, so the
  page stays a few hundred kilobytes whatever the number of turns. SVG text is kept as text (it is
  smaller than glyph outlines, and selectable), and matplotlib's unreferenced element ids and
  indentation are stripped.
* **Honest.** Published numbers are printed beside the runs for orientation only and are labelled
  "published (not reproduced here)": they come from :mod:`simhub.evaluation.paper`, not from runs.
* **Safe.** Every string that comes from a run (simulator names, candidates, config values) is
  HTML-escaped, and escaped for matplotlib's mathtext before it reaches a figure.

A run directory holds ``results.json`` (summary), ``scores.jsonl`` (one scored turn a line) and,
optionally, ``dialogue_results.json`` (dialogue-level realism). :func:`load_run` reads and checks
them (:mod:`simhub.evaluation.rundir`), :func:`write_report` writes the page, and
:func:`table1_data` gives the table as plain dicts. The leaderboard rule is
:data:`~simhub.evaluation.leaderboard.RANKING_RULE`; the figures live in
:mod:`simhub.evaluation.figures`.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any

from simhub.errors import ConfigError, require
from simhub.evaluation.dialogue_level import dialogue_output_metadata, dialogue_outputs
from simhub.evaluation.figures import (
    DIALOGUE_FIGURES,
    LATE_POSITION,
    TURN_FIGURES,
    FigureSpec,
    ReportContext,
    Series,
    draw_svg,
    report_context,
)
from simhub.evaluation.leaderboard import (
    RANKING_RULE,
    NullCounts,
    RankedRun,
    null_counts,
    rank_runs,
    ranked_columns,
    table1_data,
    table_metrics,
)
from simhub.evaluation.paper import (
    HUMAN_AGREEMENT,
    METRIC_MODEL_VALIDATION,
    PAPER,
    TABLE1,
    TABLE1_SPLIT,
)
from simhub.evaluation.rundir import (
    DIALOGUE_RESULTS_FILE,
    RESULTS_FILE,
    SCORES_FILE,
    DataInfo,
    DialogueResults,
    DialogueStatistic,
    Failures,
    MetricSummary,
    Run,
    ScoredTurn,
    load_run,
)
from simhub.metrics import label, output_metadata, outputs
from simhub.schema import atomic_write_bytes

__all__ = [
    "DIALOGUE_FIGURES",
    "DIALOGUE_RESULTS_FILE",
    "LATE_POSITION",
    "RANKING_RULE",
    "RESULTS_FILE",
    "SCORES_FILE",
    "TURN_FIGURES",
    "DataInfo",
    "DialogueResults",
    "DialogueStatistic",
    "Failures",
    "FigureSpec",
    "MetricSummary",
    "RankedRun",
    "ReportContext",
    "Run",
    "ScoredTurn",
    "Series",
    "load_run",
    "rank_runs",
    "render_report",
    "table1_data",
    "write_report",
]

#: How many turns the examples section shows (the same turns for every run).
N_EXAMPLES = 5

#: Longest text shown in the examples section, in characters.
EXAMPLE_CHARS = 400


# --------------------------------------------------------------------------------------------- HTML


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


_CSS = """
:root { color-scheme: light; --fg: #1a1a1a; --muted: #5b5b5b; --line: #d9d9d9; --accent: #0a5ea8; --best: #e7f3ea; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header, main, footer { max-width: 1320px; margin: 0 auto; padding: 0 1.25rem; }
header { padding-top: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p, li, dd { max-width: 80ch; }
.note { border-left: 3px solid var(--muted); padding-left: 0.6em; }
.muted, .empty { color: var(--muted); }
a { color: var(--accent); }
a:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
nav ol { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding: 0; margin: .8rem 0 0; list-style: none; }
.table-wrap { overflow-x: auto; }
.table-wrap + .table-wrap { margin-top: 1.4rem; }
table { border-collapse: collapse; font-size: .86rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: 0 0 .5rem; max-width: 110ch; }
th, td { padding: .35rem .45rem; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th[scope=col] { border-bottom: 2px solid var(--fg); white-space: nowrap; vertical-align: bottom; }
th.wrap { white-space: normal; max-width: 6.5rem; }
th[scope=row] { min-width: 8rem; }
td.text, th.text { text-align: left; }
th[scope=row] { text-align: left; font-weight: 600; }
tbody.published td, tbody.published th[scope=row] { color: var(--muted); font-weight: normal; }
tbody.published th[scope=rowgroup] { text-align: left; font-weight: 600; padding-top: 1rem;
  border-bottom: 2px solid var(--line); }
td.best { background: var(--best); }
.mean { font-weight: 600; }
.sub { display: block; font-size: .76rem; color: var(--muted); white-space: nowrap; }
.badge { display: inline-block; margin-left: .3rem; padding: 0 .3rem; border-radius: .6rem; font-size: .68rem;
  font-weight: 700; color: #fff; background: #1b7a3a; vertical-align: .1em; }
.warn { color: #a23b00; }
.nolabel, .reason { color: var(--muted); }
.reason { white-space: normal; max-width: 16rem; margin-left: auto; }
figure { margin: 1.6rem 0; }
figure svg { display: block; max-width: 100%; height: auto; }  /* each at its own size: one scale, one font size */
figure svg * { stroke-linejoin: round; stroke-linecap: butt; }
figcaption { font-size: .88rem; color: var(--muted); max-width: 100ch; margin-top: .4rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; font-size: .9rem; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
code { font-size: .85em; }
details { margin: .5rem 0; }
pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; font-size: .8rem; }
.example { border-top: 1px solid var(--line); padding: .6rem 0; }
.example dl { grid-template-columns: minmax(8rem, max-content) 1fr; }
footer { margin-top: 3rem; padding-bottom: 2rem; font-size: .82rem; color: var(--muted); }
""".strip()


def _bound(value: float) -> str:
    return ("−∞" if value < 0 else "∞") if math.isinf(value) else f"{value:g}".replace("-", "−")


def _metric_header(metric: str) -> str:
    """A metric's column heading, arrow and (on hover) description, range and null rule, all as the
    metric declares them (an output no registered metric gives is labelled by its name, ↑)."""
    out = output_metadata(metric)
    title = ""
    if metric in outputs():
        title = (f' title="{_e(out.description)}; range [{_bound(out.low)}, {_bound(out.high)}]; '
                 f'null when: {_e(out.null_rule)}"')
    return f'<th scope="col" class="metric"{title}>{_e(out.heading)} {out.arrow}</th>'


def _summary_extras(metric: str, summary: MetricSummary) -> list[str]:
    """The numeric summary statistics a metric adds (knowledge's QWK, a plug-in's own), labelled as
    the metric declares them; ``nulls`` has its own notes, and lists and texts stay in the file."""
    out = output_metadata(metric)
    return [f'<span class="sub">{_e(out.summary_label(key))} {value:.3f}</span>'
            for key, value in summary.extra.items()
            if key != "nulls" and isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value)]


def _null_notes(nulls: NullCounts) -> str:
    """Under a cell: failed scorings (red), and real turns without a label (grey: a gap in the data,
    the same for every run, not a failure)."""
    notes = ""
    if nulls.failed:
        notes += (f'<span class="sub warn" title="turns whose scoring failed (see scores.jsonl)">'
                  f"{nulls.failed:,} not scored</span>")
    if nulls.no_label:
        notes += (f'<span class="sub nolabel" title="real turns without a label to compare with (not failures)">'
                  f"{nulls.no_label:,} no label</span>")
    return notes


def _run_cell(run: Run, metric: str, best: bool, nulls: NullCounts) -> str:
    summary = run.metrics.get(metric)
    fail = _null_notes(nulls)
    if summary is None:
        return f'<td><span class="muted" title="not evaluated">—</span>{fail}</td>'
    badge = '<span class="badge">best</span>' if best else ""
    parts = [f'<span class="mean">{_f(summary.mean)}</span>{badge}']
    if summary.ci95:
        parts.append(f'<span class="sub" title="95% confidence interval">{_f(summary.ci95[0], 3)}–'
                     f"{_f(summary.ci95[1], 3)}</span>")
    stats = [f"n={summary.n:,}" if summary.n is not None else None,
             f"sd {_f(summary.std, 3)}" if summary.std is not None else None]
    if any(stats):
        parts.append(f'<span class="sub">{_e(" · ".join(s for s in stats if s))}</span>')
    parts += _summary_extras(metric, summary)
    cls = ' class="best"' if best else ""
    return f"<td{cls}>{''.join(parts)}{fail}</td>"


def _failed_simulations(run: Run) -> str:
    n = run.failures.simulation
    return f'<span class="sub warn">{n:,} simulation{"s" if n != 1 else ""} failed</span>' if n else ""


def _table1(ranked: Sequence[RankedRun], names: Mapping[int, str]) -> str:
    runs = [r.run for r in ranked]
    metrics = table_metrics(runs)
    many = len(runs) > 1
    note = (f'<p class="ranking-note" id="ranking-note">{_e(ranked_columns(runs).note(names))}</p>'
            if many else "")
    head = ('<tr><th scope="col">Rank</th><th scope="col" class="text">Simulator</th>'
            '<th scope="col" class="text">Profile / model</th>'
            + "".join(_metric_header(m) for m in metrics)
            + '<th scope="col" class="wrap">Mean rank</th></tr>')
    body = []
    for entry in ranked:
        run = entry.run
        nulls = null_counts(run)
        body.append(
            f'<tr data-kind="run" data-run="{_e(run.name)}">'
            f"<td>{entry.rank if entry.rank is not None else '—'}</td>"
            f'<th scope="row" class="text">{_e(names[id(run)])}{_failed_simulations(run)}'
            + (f'<span class="sub" data-unranked>unranked: {_e(entry.unranked)}</span>' if entry.unranked else "")
            + "</th>"
            f'<td class="text">{_e(run.profile or "—")}</td>'
            + "".join(_run_cell(run, m, m in entry.best, nulls.get(m, NullCounts())) for m in metrics)
            + f"<td>{_f(entry.mean_rank, 2)}</td></tr>"
        )
    published = [
        f'<tr><th scope="rowgroup" colspan="{len(metrics) + 4}">Published (not reproduced here): '
        f"{_e(PAPER)}, Table 1, {_e(TABLE1_SPLIT)}. Means only; shown for orientation.</th></tr>"
    ]
    for row in TABLE1:
        published.append(
            f'<tr data-kind="published"><td>—</td><th scope="row" class="text">{_e(row.method)}</th>'
            f'<td class="text" title="{_e(row.note)}">{_e(row.model)}</td>'
            + "".join(f"<td>{_f(row.metrics.get(m))}</td>" for m in metrics)
            + "<td>—</td></tr>"
        )
    what = "Leaderboard" if many else "Results"
    caption = (
        f"<strong>{what}.</strong> Each cell: the mean of the metric over the student turns where it applies; "
        "below it the 95% confidence interval, then the number of scored turns (n) and the standard deviation "
        "(sd), as written by simhub eval (for knowledge also the quadratic-weighted kappa, QWK, and for any "
        "metric the summary statistics it adds), turns whose "
        "simulation or scoring failed (in red), and real turns with no label to compare with ('no label', "
        "in grey: a gap in the data, not a failure). The arrow beside a metric says which way is more "
        "realistic (↑ higher, ↓ lower), as the metric declares it; the paper's seven lie in [0, 1], higher "
        "is more realistic. "
        + (_e(RANKING_RULE) + " " if many else "")
        + "The rows below the runs are the paper's published numbers, not produced by simhub: they are "
        "comparable only for runs on the same test split."
    )
    return (f'{note}<div class="table-wrap"><table id="table1"><caption>{caption}</caption>'
            f'<thead>{head}</thead><tbody id="table1-runs">{"".join(body)}</tbody>'
            f'<tbody id="table1-published" class="published">{"".join(published)}</tbody></table></div>'
            f"{_validation_note()}")


def _validation_note() -> str:
    """The paper's validation of its metric models: how far a difference in a metric can be trusted."""
    models = "; ".join(
        f"{label(name).lower()} {v['statistic']} {v['value']:.4f}"
        + (f" ({v['note']})" if v.get("note") else "")
        for name, v in METRIC_MODEL_VALIDATION.items()
    )
    agreement = ", ".join(f"{name} {value:.2f}" for name, value in HUMAN_AGREEMENT.items())
    return (f'<p class="muted">Published validation of the paper\'s metric models (not reproduced here): '
            f"{_e(models)}. Agreement with human judgements (Cohen's κ; Pearson for linguistic): "
            f"{_e(agreement)}.</p>")


def _dialogue_header(metric: str, known: Mapping[str, Any]) -> str:
    """A dialogue-level row heading: the label and arrow the metric declares (its description, range,
    direction and null rule on hover), with the name as the results file writes it."""
    out = dialogue_output_metadata(metric)
    title = ""
    if metric in known:
        title = (f' title="{_e(out.description)}; range [{_bound(out.low)}, {_bound(out.high)}]; '
                 f'{_e(out.direction)}; null when: {_e(out.null_rule)}"')
    arrow = f" {out.arrow}" if out.arrow else ""
    name = f'<span class="sub"><code>{_e(metric)}</code></span>' if out.heading != metric else ""
    return f'<th scope="row" class="text"{title}>{_e(out.heading + arrow)}{name}</th>'


def _dialogue_detail(metric: str, details: Any, known: Mapping[str, Any]) -> list[str]:
    """The numbers behind a dialogue-level value, where the file has them, as its metric summarises them."""
    d = details.get(metric) if isinstance(details, Mapping) else None
    if not isinstance(d, Mapping) or metric not in known:
        return []
    cls, _ = known[metric]
    return cls.detail_lines(metric, d)


def _dialogue_null_reason(raw: Mapping[str, Any], metric: str) -> str:
    """Why a dialogue-level value is null: ``null_reasons`` of dialogue_results.json, else the error
    its ``details`` entry records (files written before ``null_reasons``), else that none is known."""
    reasons = raw.get("null_reasons")
    reason = reasons.get(metric) if isinstance(reasons, Mapping) else None
    if not isinstance(reason, str):
        details = raw.get("details")
        detail = details.get(metric) if isinstance(details, Mapping) else None
        reason = detail.get("error") if isinstance(detail, Mapping) else None
    return reason if isinstance(reason, str) and reason else "no value; this file records no reason"


def _dialogue_section(ctx: ReportContext) -> str | None:
    runs = [r for r in ctx.runs if r.dialogue_results is not None]
    if not runs:
        return None
    metrics: list[str] = []
    for run in runs:
        metrics += [m for m in run.dialogue_results.metrics if m not in metrics]
    known = dialogue_outputs()
    head = '<tr><th scope="col" class="text">Metric</th>' + "".join(
        f'<th scope="col">{_e(ctx.names[id(r)])}</th>' for r in runs) + "</tr>"
    rows = []
    for metric in metrics:
        cells = []
        for run in runs:
            value = run.dialogue_results.metrics.get(metric)
            if value is None:
                cells.append('<td class="muted" title="not computed in this run">—</td>')
                continue
            if value.value is None:
                reason = _dialogue_null_reason(run.dialogue_results.raw, metric)
                cells.append(f'<td><span class="muted">—</span><span class="sub reason">{_e(reason)}</span></td>')
                continue
            sub = []
            if value.ci95:
                sub.append(f"95% CI {_f(value.ci95[0], 3)}–{_f(value.ci95[1], 3)}")
            if value.n is not None:
                sub.append(f"n={value.n:,} dialogues")
            failed = run.dialogue_results.raw.get("failed_rollouts")
            if isinstance(failed, int) and failed:
                sub.append(f"{failed:,} failed rollouts left out")
            sub += _dialogue_detail(metric, run.dialogue_results.raw.get("details"), known)
            stability = run.dialogue_results.raw.get("stability_sd")
            sd = stability.get(metric) if isinstance(stability, Mapping) else None
            if isinstance(sd, int | float):
                sub.append(f"between-sample SD {_f(sd, 3)}")
            cells.append(f'<td><span class="mean">{_f(value.value)}</span>'
                         + "".join(f'<span class="sub">{_e(s)}</span>' for s in sub) + "</td>")
        rows.append(f'<tr>{_dialogue_header(metric, known)}{"".join(cells)}</tr>')
    table = (
        '<div class="table-wrap"><table id="dialogue-table"><caption>Dialogue-level realism from '
        "dialogue_results.json: each number compares whole simulated dialogues with the real ones. The arrow "
        "beside a metric says which way is more realistic, as the metric declares it: ↑ higher, ↓ lower, →x "
        "closer to x (most are distances from the real dialogues, lower is better).</caption>"
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    figures = "".join(_render_figure(spec, ctx) for spec in DIALOGUE_FIGURES)
    return ('<section id="dialogue-level" aria-labelledby="dialogue-level-h"><h2 id="dialogue-level-h">'
            f"Dialogue-level realism</h2>{table}{figures}</section>")


def _clip(text: str | None) -> str:
    if text is None:
        return '<span class="muted">(none)</span>'
    shown = text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + "…"
    return _e(shown) if shown.strip() else '<span class="muted">(empty)</span>'


def _examples(ctx: ReportContext) -> str:
    """A few turns, the same for every run, so a reader can see what the numbers are about."""
    keyed = [{(t.dialogue_id, t.turn_index): t for t in run.turns} for run in ctx.runs]
    common = set(keyed[0]).intersection(*keyed[1:]) if keyed else set()
    keys = sorted(common, key=lambda k: (k[0], k[1]))
    if len(keys) > N_EXAMPLES:
        keys = [keys[round(i * (len(keys) - 1) / (N_EXAMPLES - 1))] for i in range(N_EXAMPLES)]
    if not keys:
        return '<p class="empty">The runs have no scored turn in common.</p>'
    items = []
    for dialogue_id, turn_index in keys:
        first = keyed[0][(dialogue_id, turn_index)]
        real_note = " · ".join(x for x in (first.real_act, first.real_label) if x)
        real_sub = f'<span class="sub">{_e(real_note)}</span>' if real_note else ""
        rows = [f"<dt>Real{real_sub}</dt><dd>{_clip(first.real)}</dd>"]
        for run, turns in zip(ctx.runs, keyed, strict=True):
            t = turns[(dialogue_id, turn_index)]
            note = " · ".join(x for x in (t.predicted_act, t.verdict) if x)
            if t.error:
                note = f"{note} · error: {t.error}" if note else f"error: {t.error}"
            sub = f'<span class="sub">{_e(note)}</span>' if note else ""
            rows.append(f"<dt>{_e(ctx.names[id(run)])}{sub}</dt><dd>{_clip(t.candidate)}</dd>")
        items.append(f'<div class="example"><h3>Dialogue {_e(dialogue_id)}, turn {turn_index} '
                     f'(student turn {first.position + 1})</h3><dl>{"".join(rows)}</dl></div>')
    return "".join(items)


def _provenance(run: Run, name: str) -> str:
    d = run.data
    nulls = null_counts(run)
    knowledge = run.metrics.get("knowledge")
    items: list[tuple[str, str]] = [
        ("Run directory", f"<code>{_e(run.name)}</code>"),
        ("Simulator", _e(run.simulator)),
        ("Profile", _e(run.profile or "—")),
        ("Data", f"<code>{_e(d.path or '—')}</code>"),
        ("Data sha256", f"<code>{_e(d.sha256 or '—')}</code>"),
        ("Dialogues / turns", f"{'—' if d.dialogues is None else f'{d.dialogues:,}'} / "
                              f"{'—' if d.turns is None else f'{d.turns:,}'}"),
        ("Scored turns (scores.jsonl)", f"{len(run.turns):,}"),
        ("Failed simulations", f"{run.failures.simulation:,}"),
        ("Failed scoring", _e(", ".join(f"{k}: {v.failed:,}" for k, v in nulls.items() if v.failed) or "none")),
        ("Real turns without a label", _e(", ".join(f"{k}: {v.no_label:,}" for k, v in nulls.items() if v.no_label)
                                          or "none")),
        ("simhub version", _e(run.simhub_version or "—")),
        ("Created", _e(run.created or "—")),
    ]
    if knowledge is not None:
        items.append(("Knowledge cutoffs", _e(knowledge.extra.get("cutoff_source") or "—")))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items)
    config = ""
    if run.config:
        config = (f"<details><summary>Configuration</summary><pre>"
                  f"{_e(json.dumps(dict(run.config), indent=2, sort_keys=True, default=str))}</pre></details>")
    return f"<h3>{_e(name)}</h3><dl>{dl}</dl>{config}"


def _version() -> str:
    from simhub import __version__

    return __version__


def _render_figure(spec: FigureSpec, ctx: ReportContext) -> str:
    """A figure with its caption; a figure no run has the data for is its title and that sentence, in
    its caption's place (no empty box)."""
    svg = draw_svg(spec, ctx)
    if svg is None:
        return (f'<figure id="{_e(spec.id)}" class="empty"><figcaption><strong>{_e(spec.title)}.</strong> '
                "No run in this report has the data for this figure.</figcaption></figure>")
    return (f'<figure id="{_e(spec.id)}">{svg}'
            f"<figcaption><strong>{_e(spec.title)}.</strong> {_e(spec.caption)}</figcaption></figure>")


def _page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], sections: Sequence[str], footer: str) -> str:
    """The self-contained HTML page: head with the inline CSS, the title, ``subtitle`` (HTML) with the
    generation time and simhub's version, the contents ``nav`` of (id, heading), the sections (HTML)."""
    version = _version()
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    nav_html = "".join(f'<li><a href="#{_e(sid)}">{_e(head)}</a></li>' for sid, head in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="simhub {_e(version)}"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><p class="muted">{subtitle}generated {generated} by simhub {_e(version)}</p>'
        f'<nav aria-label="Contents"><ol>{nav_html}</ol></nav></header>'
        f"<main>{''.join(sections)}</main>"
        f"<footer>This page is self-contained: it loads nothing from the network.{footer}</footer></body></html>\n"
    )


def render_report(runs: Sequence[Run], *, title: str | None = None,
                  sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """The report page for already loaded runs, as a string (see :func:`write_report`).

    ``sections`` are more sections, each ``(id, heading, html)`` with ``html`` a whole ``<section
    id=...>`` (the tutor-bench section, :func:`simhub.tutoring.knowsim.report.bench_section`), put after the
    realism sections and linked from the contents; with no run they are the whole page.
    """
    require("matplotlib", "report")
    if not runs and sections:
        return _page(title or ", ".join(head for _, head, _ in sections), "",
                     [(sid, head) for sid, head, _ in sections], [body for _, _, body in sections], "")
    if not runs:
        raise ConfigError("a report needs at least one run directory", field="run_dirs")
    ranked = rank_runs(runs)
    ctx = report_context(ranked)
    names = ctx.names
    if title is None:  # every run, in leaderboard order: a reader should not have to guess what is compared
        title = f"Simulated-student realism: {', '.join(names[id(r)] for r in ctx.runs)}"
    core = [
        ("table1-section", "Leaderboard" if len(runs) > 1 else "Table 1", _table1(ranked, names)),
        ("figures", "Distributions", "".join(_render_figure(spec, ctx) for spec in TURN_FIGURES)),
    ]
    dialogue = _dialogue_section(ctx)
    nav = [(sid, head) for sid, head, _ in core] + ([("dialogue-level", "Dialogue-level realism")] if dialogue else [])
    sections_html = [
        f'<section id="{sid}" aria-labelledby="{sid}-h"><h2 id="{sid}-h">{_e(head)}</h2>{body}</section>'
        for sid, head, body in core
    ]
    if dialogue:
        sections_html.append(dialogue)
    for sid, head, body in sections:
        sections_html.append(body)
        nav.append((sid, head))
    sections_html.append('<section id="examples" aria-labelledby="examples-h"><h2 id="examples-h">Examples</h2>'
                         "<p>The same real turns for every run, with each simulator's turn in their place "
                         f"(real act · correctness label; predicted act · judge verdict).</p>{_examples(ctx)}"
                         "</section>")
    sections_html.append('<section id="provenance" aria-labelledby="provenance-h"><h2 id="provenance-h">'
                         "Provenance</h2>" + "".join(_provenance(r, names[id(r)]) for r in ctx.runs) + "</section>")
    nav += [("examples", "Examples"), ("provenance", "Provenance")]
    plural = "s" if len(runs) > 1 else ""
    subtitle = (f"{len(runs)} run{plural} · turn-level realism of simulated students against the real student turns "
                "they replace (teacher forcing) · ")
    return _page(title, subtitle, nav, sections_html, f" Published rows: {_e(PAPER)}.")


def write_report(run_dirs: Sequence[str | PathLike[str] | Run], output: str | PathLike[str], *,
                 title: str | None = None, sections: Sequence[tuple[str, str, str]] = ()) -> Path:
    """Write the HTML report over ``run_dirs`` (folders, or runs already read by :func:`load_run`) and
    any more ``sections`` (see :func:`render_report`) to ``output`` atomically; returns the file
    written.

    ``output`` may be an existing directory, in which case the page is ``report.html`` inside it.
    Raises :class:`~simhub.errors.DataError` for a broken run directory and
    :class:`~simhub.errors.MissingExtraError` when matplotlib (``simhub[report]``) is missing,
    before anything is written.
    """
    require("matplotlib", "report")
    if not run_dirs and not sections:
        raise ConfigError("a report needs at least one run directory", field="run_dirs")
    runs = [d if isinstance(d, Run) else load_run(d) for d in run_dirs]
    page = render_report(runs, title=title, sections=sections)
    target = Path(output)
    if target.is_dir():
        target = target / "report.html"
    atomic_write_bytes(target, page.encode("utf-8"))
    return target
