"""The KT-learner section of ``simhub report``: a ``simhub tutor-bench --learner kt-learner`` run folder
(its ``results.json``, or its ``traces/`` summarised afresh when the results file is missing) as

* a leaderboard: ΔSolve in percentage points with its interval, responsiveness overall and same-day
  (runs with no help request counted beside), the action profile per run, the failure
  modes, pass^k, the learner's ECE and Brier score, and the gate;
* the paired ΔSolve comparisons between tutors;
* the stability of the ranking (Kendall τ against shorter horizons and leaving one scenario out);
* the learner's realism checks: its first probe's accuracy by ability beside the real persona
  seeds', the KT model's calibration on held-out real answers when the run has it, and the share
  of valid answers;
* three figures from the results: mean unit mastery per calendar day, ΔSolve per day, and the
  reliability diagram of the learner's answers against its own KT model.

Static HTML and inline SVG like the rest of the report; every string from a run is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simhub.learners.kt.lms import ACTION_KINDS
from simhub.plotting import legend_above as _legend_above
from simhub.plotting import new_figure as _new_figure
from simhub.tutoring.estimates import Estimate, cell_html, figure_html
from simhub.tutoring.estimates import colour as _colour
from simhub.tutoring.estimates import escape as _e
from simhub.tutoring.estimates import number as _num
from simhub.tutoring.lms.bench import RUN_FILE, TRACES, is_kt_trace_file, read_kt_trace
from simhub.tutoring.lms.results import KT_RESULTS_KIND, OUTPUT, KTBenchResults, read_kt_results, summarize_kt
from simhub.tutoring.report import results_kind
from simhub.tutoring.runner import RunInfo, read_run_info

RESULTS_FILE = "results.json"

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["SECTION", "KTReportRun", "is_kt_bench", "kt_bench_section", "load_kt_bench"]

#: The section's id and heading on the report page.
SECTION = ("kt-learner-bench", "KT-learner bench")

_ACTION_HEADS = {"send_message": "message", "stay_silent": "stay silent", "assign_items": "assign",
                 "adjust_level": "adjust", "provide_content": "content"}


@dataclass(frozen=True)
class KTReportRun:
    """One KT-learner bench folder, read."""

    name: str
    results: KTBenchResults
    info: RunInfo | None = None
    #: The results were summarised from the traces for this report (the folder has no results.json).
    from_traces: bool = False


def _trace_files(path: Path) -> list[Path]:
    folder = path / TRACES
    return sorted(f for f in folder.glob("*.json") if is_kt_trace_file(f)) if folder.is_dir() else []


def is_kt_bench(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a KT-learner bench folder: its ``results.json`` says so, or, without one,
    its traces are KT-learner runs."""
    path = Path(path)
    if not path.is_dir():
        return False
    results = path / RESULTS_FILE
    if results.is_file():
        return results_kind(path) == KT_RESULTS_KIND
    return bool(_trace_files(path))


def load_kt_bench(path: str | PathLike[str], *, n_resamples: int = 2000, seed: int = 0) -> KTReportRun:
    """The results (and run.json, when there is one) of a KT-learner bench folder; without a
    results.json its traces are summarised (``n_resamples``, ``seed``). A broken file is a DataError
    naming it."""
    path = Path(path)
    name = path.name or str(path)
    info = read_run_info(path / RUN_FILE) if (path / RUN_FILE).is_file() else None
    if (path / RESULTS_FILE).is_file():
        return KTReportRun(name, read_kt_results(path / RESULTS_FILE), info)
    traces = [read_kt_trace(f) for f in _trace_files(path)]
    order = info.tutors if info is not None else None
    return KTReportRun(name, summarize_kt(traces, tutor_order=order, n_resamples=n_resamples, seed=seed), info,
                       from_traces=True)


# ------------------------------------------------------------------------------------------ tables


def _est(e: Estimate | None, *, scale: float = 1.0, digits: int = 2, sign: bool = False) -> str:
    return cell_html(e, digits, scale=scale, sign=sign, ci_class="sub ci")


def _head(name: str) -> str:
    """An output's column heading: its label, unit and better direction, as declared."""
    o = OUTPUT[name]
    return f"{o.label}{' ' + o.unit if o.unit else ''} {o.arrow}"


def _share(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _order(r: KTBenchResults) -> list[str]:
    return [*r.ranking, *(t for t in r.tutors if t not in r.ranking)]


def _leaderboard(r: KTBenchResults) -> str:
    rows, notes = [], []
    ds = OUTPUT["delta_solve"]
    for name in _order(r):
        t = r.tutors[name]
        acts = "".join(f"<td>{t.actions_per_run.get(k, 0.0):.1f}</td>" for k in ACTION_KINDS)
        passk = "".join(f'<span class="sub">{_e(k)} {v:.2f}</span>' for k, v in t.pass_hat_k.items()
                        if v is not None) or "—"
        ece = "—" if t.calibration.ece is None else f"{t.calibration.ece:.3f}"
        brier = "" if t.calibration.brier is None else f'<span class="sub">Brier {t.calibration.brier:.3f}</span>'
        if t.gate_reasons:
            notes.append(f'<p class="muted">Gate {_e(t.gate)} for {_e(name)}: {_e("; ".join(t.gate_reasons))}.</p>')
        failed = f' <span class="warn">{t.failed_days} failed days</span>' if t.failed_days else ""
        gate = f'<td class="text">{_e(t.gate)}</td>'
        rows.append(
            f'<tr><th scope="row">{_e(name)}</th><td>{_est(t.delta_solve, scale=ds.scale, digits=ds.digits, sign=True)}</td>'
            f"<td>{_est(t.responsiveness)}</td><td>{_est(t.responsiveness_same_day)}</td>"
            f"<td>{t.silent_runs} of {t.runs}{failed}</td>{acts}"
            f"<td>{_share(t.failure_modes.get('no_gain'))}</td><td>{_share(t.failure_modes.get('neglect'))}</td>"
            f"<td>{passk}</td><td>{ece}{brier}</td>{gate}</tr>")
    acts_head = "".join(f'<th scope="col">{_ACTION_HEADS.get(k, _e(k))}</th>' for k in ACTION_KINDS)
    return ('<div class="table-wrap"><table class="kt-leaderboard"><caption>Tutors ranked by ΔSolve (the mean over '
            "session days of post- minus pre-session probe accuracy, in percentage points) with 95% intervals "
            "from a bootstrap over runs clustered by scenario. Responsiveness is the share of the learner's help "
            "requests a tutor message came after (on any later day, or the same day); a run in which the learner "
            "never asked for help is left out of both means and counted under 'no help request'. Actions are the "
            "mean logged tool calls per run ('stay silent': turns the tutor chose to do nothing). No gain: "
            "runs with ΔSolve ≤ 0; neglect: runs whose help requests were never answered. ECE and Brier compare "
            "the learner's probe answers with its own KT model's predictions (consistency, not realism). The gate is "
            "EduClaw-Bench's pre-deployment check: block, warn or monitor when one of its rules fires (the reason is "
            "given below the table), else pass.</caption>"
            f'<thead><tr><th rowspan="2" scope="col">tutor</th><th rowspan="2" scope="col">{_head("delta_solve")}</th>'
            f'<th colspan="2" scope="colgroup">{_head("responsiveness")}</th><th rowspan="2" scope="col">no help request (runs)</th>'
            f'<th colspan="{len(ACTION_KINDS)}" scope="colgroup">actions per run</th>'
            '<th colspan="2" scope="colgroup">failure modes ↓</th>'
            '<th rowspan="2" scope="col">pass^k</th><th rowspan="2" scope="col">ECE ↓</th>'
            '<th rowspan="2" scope="col" class="text">gate</th></tr>'
            f'<tr><th scope="col">overall</th><th scope="col">same day</th>{acts_head}'
            '<th scope="col">no gain</th><th scope="col">neglect</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>{''.join(notes)}")


def _comparisons(r: KTBenchResults) -> str:
    if not r.comparisons:
        return '<p class="empty">One tutor: no paired comparison.</p>'
    rows = []
    for c in r.comparisons:
        diff = "—" if c.diff is None else _num(100 * c.diff, 2, sign=True)
        ci = f" [{_num(100 * c.ci95[0], 2)}, {_num(100 * c.ci95[1], 2)}]" if c.ci95 else ""
        p = "—" if c.p is None else f"{c.p:.4f}"
        ph = "—" if c.p_holm is None else f"{c.p_holm:.4f}"
        metric = f"{OUTPUT[c.metric].label} {OUTPUT[c.metric].unit}".strip() if c.metric in OUTPUT else c.metric
        rows.append(f"<tr><td>{_e(c.a)} − {_e(c.b)}</td><td>{_e(metric)}</td><td>{c.n}</td>"
                    f"<td>{diff}{ci}</td><td>{p}</td><td>{ph}</td></tr>")
    return ('<div class="table-wrap"><table class="kt-comparisons"><caption>Paired comparisons on the runs both '
            "tutors had (the same persona seed and daily draws): the mean ΔSolve difference with its paired "
            "bootstrap interval, and the sign-flip permutation test's p-value, Holm-adjusted over the family."
            "</caption><thead><tr><th>pair</th><th>metric</th><th>paired runs</th><th>difference</th><th>p</th>"
            f"<th>p (Holm)</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _stability(r: KTBenchResults) -> str:
    horizon: dict[str, Any] = r.stability.get("horizon") or {}
    loso = r.stability.get("leave_one_scenario_out")
    if not horizon and not loso:
        return ('<p class="empty">Fewer than two tutors have a ΔSolve, so there is no ranking to check.</p>')
    rows = [f'<tr><th scope="row">first {_e(n)} days</th><td>{"—" if tau is None else _num(float(tau), 2)}</td>'
            f'<td class="text">the ranking over days 1–{_e(n)} only</td></tr>' for n, tau in horizon.items()]
    if loso:
        rows.append(f'<tr><th scope="row">leave one scenario out</th><td>{_num(float(loso["mean"]), 2)}'
                    f'<span class="sub">lowest {_num(float(loso["min"]), 2)}</span></td>'
                    f'<td class="text">the mean over {int(loso["n"])} rankings, each without one scenario</td></tr>')
    notes = []
    if not horizon:
        notes.append("The runs are too short for a shorter horizon (it starts at 5 days).")
    if not loso:
        notes.append("Leaving one scenario out needs at least two scenarios.")
    note = f'<p class="empty">{" ".join(notes)}</p>' if notes else ""
    return ('<div class="table-wrap"><table class="kt-stability"><caption>How stable the ΔSolve ranking is: '
            "Kendall τ between the ranking over every day and every scenario and the ranking under each check "
            "(1: the same order; −1: reversed).</caption>"
            '<thead><tr><th scope="col">check</th><th scope="col">Kendall τ</th><th scope="col" class="text">compared ranking</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>{note}")


def _learner(r: KTBenchResults) -> str:
    block = r.learner or {}
    by_ability: dict[str, Any] = block.get("probe_accuracy_by_ability") or {}
    parts = []
    if by_ability:
        rows = []
        for ability, v in by_ability.items():
            sim, real = float(v["simulated_day1_pre"]), float(v["real_persona"])
            rows.append(f'<tr><th scope="row">{_e(ability)}</th><td>{int(v["runs"])}</td><td>{sim:.3f}</td>'
                        f"<td>{real:.3f}</td><td>{_num(sim - real, 3, sign=True)}</td></tr>")
        parts.append('<div class="table-wrap"><table class="kt-realism"><caption>The learner against the real students '
                     "it starts from: the accuracy of its first pre-session probe, per ability, beside the real "
                     "accuracy of the persona seeds' warm-up answers (one value per run, averaged).</caption>"
                     "<thead><tr><th>ability</th><th>runs</th><th>simulated day-1 probe</th><th>real persona</th>"
                     f"<th>difference</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
    held = block.get("kt_heldout_calibration")
    if held:
        parts.append(f"<p>The KT model on real answers it was not fitted on (the sample corpus's test split, each "
                     f"answer predicted before it is seen): ECE {float(held['ece']):.3f}, Brier "
                     f"{float(held['brier']):.3f}, {int(held['n'])} answers. This, not the leaderboard's ECE, is the "
                     "realism check of the model behind the learner.</p>")
    else:
        parts.append('<p class="empty">No held-out calibration of the KT model in this run (it is computed for the '
                     "sample model and persona log only).</p>")
    rate = block.get("valid_answer_rate")
    if rate is not None:
        parts.append(f"<p>Valid answers: {100 * float(rate):.1f}% of {int(block.get('answers') or 0)} probe and "
                     "practice answers could be graded (the rest were flagged and left out of the belief).</p>")
    return "<h4>Learner realism</h4>" + "".join(parts)


# ----------------------------------------------------------------------------------------- figures


def _label(text: str) -> str:
    """A run's name made safe for matplotlib: ``$`` is not mathtext, a leading underscore stays visible."""
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _day_axis(ax, days: Sequence[float]) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(min(days) - 0.5, max(max(days), min(days) + 1) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("calendar day")


def _draw_days(r: KTBenchResults, value: str) -> Figure | None:
    tutors = _order(r)
    series = {t: r.tutors[t].by_day for t in tutors if r.tutors[t].by_day}
    if not series:
        return None
    fig = _new_figure(9.0, 3.4)
    ax = fig.subplots()
    days: list[float] = []
    for i, tutor in enumerate(tutors):
        rows = series.get(tutor)
        if not rows:
            continue
        xs = [float(row["day"]) for row in rows]
        ys = ([float(row["mastery"]) for row in rows] if value == "mastery"
              else [100.0 * (float(row["post"]) - float(row["pre"])) for row in rows])
        days += xs
        ax.plot(xs, ys, marker="o", markersize=3, color=_colour(i), linestyle=("-", "--", ":", "-.")[i % 4],
                label=_label(tutor))
    if value == "mastery":
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("mean unit mastery")
    else:
        ax.axhline(0.0, color="#555555", linewidth=0.8)
        ax.set_ylabel("post − pre probe accuracy (pp)")
    _day_axis(ax, days)
    _legend_above(fig, ax, ncols=len(series))
    return fig


def _draw_reliability(r: KTBenchResults) -> Figure | None:
    tutors = _order(r)
    bins = {t: [b for b in r.tutors[t].calibration.bins if b.get("n") and b.get("confidence") is not None
                and b.get("accuracy") is not None] for t in tutors}
    shown = [t for t in tutors if bins[t]]
    if not shown:
        return None
    biggest = max(float(b["n"]) for t in shown for b in bins[t])
    cols = min(len(shown), 3)
    rows = -(-len(shown) // cols)
    fig = _new_figure(9.0, 3.3 * rows + 0.4)
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    for ax, tutor in zip(axes, shown, strict=False):
        i = tutors.index(tutor)
        bs = bins[tutor]
        xs, ys = [float(b["confidence"]) for b in bs], [float(b["accuracy"]) for b in bs]
        ax.plot([0, 1], [0, 1], color="#555555", linestyle="--", linewidth=1.0)
        ax.plot(xs, ys, color=_colour(i), linewidth=1.0)
        ax.scatter(xs, ys, s=[10 + 190 * float(b["n"]) / biggest for b in bs], color=_colour(i), alpha=0.6,
                   edgecolors="white", linewidths=0.5, zorder=3)
        ece = r.tutors[tutor].calibration.ece
        ax.set_title(_label(tutor) + ("" if ece is None else f" · ECE {ece:.3f}"), fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("predicted P(correct)")
    for ax in axes[::cols]:
        ax.set_ylabel("share answered correctly")
    return fig


# ----------------------------------------------------------------------------------------- section


def _intro(run: KTReportRun) -> str:
    r = run.results
    extra = run.info.extra if run.info is not None else {}
    bits = [f"{r.runs} runs per tutor", f"{len(r.tutors)} tutors"]
    if extra.get("scenarios"):
        bits.append(f"scenarios {_e(extra['scenarios'])}")
    if extra.get("days"):
        bits.append(f"{_e(extra['days'])} days")
    if extra.get("abilities"):
        bits.append(f"abilities {_e(', '.join(map(str, extra['abilities'])))}")
    model = r.settings.get("kt_model")
    if model:
        bits.append(f"KT model {_e(model)}")
    player = r.settings.get("role_player")
    if isinstance(player, dict) and player.get("kind"):
        bits.append(f"role player {_e(player['kind'])}")
    note = (' <span class="warn">This folder has no results.json: the figures and tables are its traces '
            "summarised for this page.</span>") if run.from_traces else ""
    failed = (f' <span class="warn">{len(r.failures)} learner-days failed; they are left out of every measure and '
              "listed in results.json.</span>") if r.failures else ""
    return f"<p>{', '.join(bits)}.{note}{failed}</p>"


def kt_bench_section(runs: Sequence[KTReportRun | str | PathLike[str]]) -> tuple[str, str, str]:
    """The report section over KT-learner bench folders (or their :func:`load_kt_bench` reads), one
    sub-section each, as ``(id, heading, html)`` for :func:`simhub.evaluation.report.render_report`'s
    ``sections``."""
    parts = []
    for k, run in enumerate(x if isinstance(x, KTReportRun) else load_kt_bench(x) for x in runs):
        r = run.results
        sid = f"kt-{k}"
        empty = "No finished learner-day has the data for this figure."
        parts.append(
            f'<h3 id="{sid}">{_e(run.name)}</h3>' + _intro(run) + _leaderboard(r)
            + "<h4>Paired comparisons</h4>" + _comparisons(r)
            + "<h4>Stability of the ranking</h4>" + _stability(r)
            + _learner(r)
            + figure_html(f"{sid}-mastery", "Mastery over the days",
                          "The learner's mean mastery of its unit's skills at the end of each calendar day, as its "
                          "KT model estimates it (P(mastered) averaged over the unit's KCs and over the runs with a "
                          "session that day), one line per tutor. Days without a session in any run are skipped, "
                          "and the number of runs behind a point varies with the schedules. Mastery rises under a "
                          "tutor that does nothing too: each day's pre- and post-session probes are answers, and "
                          "every answer updates the KT belief (the learning rate of the learner's KT model, p_learn, "
                          "applies to each), so a learner practises on its probes alone; the tutors differ by how "
                          "much faster than that they move it.",
                          "mean unit mastery per calendar day, per tutor", _draw_days, r, "mastery", empty=empty)
            + figure_html(f"{sid}-delta", "ΔSolve per day",
                          "For each calendar day, the mean post-session probe accuracy minus the mean pre-session "
                          "probe accuracy, in percentage points, one line per tutor; above zero the learner solved "
                          "more after the session than before it. The leaderboard's ΔSolve is each run's mean of "
                          "these daily differences, averaged over runs.",
                          "post minus pre probe accuracy per calendar day, per tutor", _draw_days, r, "delta",
                          empty=empty)
            + figure_html(f"{sid}-reliability", "Reliability of the learner's answers",
                          "Every probe answer's predicted chance of being right (from the learner's KT belief), "
                          "binned in tenths: the bin's mean prediction against the share of its answers that were "
                          "right, per tutor, with larger markers for bins holding more answers; on the dashed "
                          "diagonal the two agree. The ECE summarises the gap. It checks the learner's answers "
                          "against its own KT model (consistency), not realism: how well the model predicts real "
                          "students is the held-out calibration in the learner realism block.",
                          "reliability diagram: predicted against observed accuracy, per tutor",
                          _draw_reliability, r, empty=empty))
    sid, head = SECTION
    return sid, head, (f'<section id="{sid}" aria-labelledby="{sid}-h"><h2 id="{sid}-h">{head}</h2>'
                       "<p>Tutors over many days with a learner whose answers come from a knowledge-tracing model "
                       "(docs/kt-learner.md), ranked by how much more it solves after a session than before.</p>"
                       + "".join(parts) + "</section>")
