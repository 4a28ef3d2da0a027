"""What every learner family's results and report share: estimates with intervals, ranks, name lists,
and the report's HTML and figure helpers.

* :class:`Estimate` and :func:`cluster_estimate`: a mean with a cluster-bootstrap 95% interval
  (items, or scenarios, as clusters: a cluster's episodes move together);
* :func:`rank_values`: ranks across tutors with ties sharing their mean rank;
* :func:`parse_names`: a comma-separated choice among known names (levels, abilities), checked;
* :func:`cell_html`, :func:`escape`, :func:`figure_html`, :func:`colour`: the pieces of a report
  section (static HTML, inline SVG; every string from a run escaped).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from simhub.errors import DataError, UnknownNameError
from simhub.plotting import RC, RUN_COLOURS, svg_markup
from simhub.stats import cluster_mean_ci

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Estimate", "cell_html", "cluster_estimate", "colour", "escape", "figure_html", "format_estimate",
           "number", "parse_names", "rank_values"]


class Estimate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A mean with its 95% interval (None with fewer than two clusters) over ``n`` values."""

    mean: float | None
    ci95: tuple[float, float] | None
    n: int


def cluster_estimate(values: Sequence[float], clusters: Sequence[str], n_resamples: int, seed: int) -> Estimate:
    """The mean with a cluster-bootstrap 95% interval (no interval with fewer than two clusters)."""
    if not values:
        return Estimate(mean=None, ci95=None, n=0)
    if len(set(clusters)) < 2:  # one cluster: a mean, but nothing to resample
        return Estimate(mean=float(np.mean(values)), ci95=None, n=len(values))
    r = cluster_mean_ci(values, clusters, n_resamples=n_resamples, seed=seed)
    return Estimate(mean=r.mean, ci95=r.ci, n=r.n)


def rank_values(means: Mapping[str, float | None], higher_better: bool) -> dict[str, float]:
    """Rank 1 for the best value (None left out); ties share their mean rank."""
    present = {k: v for k, v in means.items() if v is not None}
    ordered = sorted(present, key=lambda k: -present[k] if higher_better else present[k])  # type: ignore[operator]
    out: dict[str, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and present[ordered[j + 1]] == present[ordered[i]]:
            j += 1
        for k in ordered[i:j + 1]:
            out[k] = (i + j) / 2 + 1
        i = j + 1
    return out


def parse_names(text: str | Sequence[str], known: Sequence[str], *, kind: str, field: str) -> list[str]:
    """A comma-separated (or listed) choice among ``known``, in order, repeats dropped; an unknown name
    is an UnknownNameError, none at all a DataError, both on ``field``."""
    names = [x.strip() for x in (text.split(",") if isinstance(text, str) else text) if x.strip()]
    for name in names:
        if name not in known:
            raise UnknownNameError(kind, name, known, field=field)
    if not names:
        raise DataError(f"--{field}: name at least one of {', '.join(known)}", field=field)
    return list(dict.fromkeys(names))


# ------------------------------------------------------------------------------------------ text


def number(x: float, digits: int, sign: bool = False) -> str:
    """``x`` to ``digits`` places (with its sign when ``sign``), never ``-0.00``."""
    text = f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"
    zero = f"{0:.{digits}f}"
    return zero if text.lstrip("+-") == zero else text


def format_estimate(e: Estimate | None, digits: int = 2, *, scale: float = 1.0, empty: str = "-") -> str:
    """``mean [low, high]`` (times ``scale``) for the console."""
    if e is None or e.mean is None:
        return empty
    ci = f" [{e.ci95[0] * scale:.{digits}f}, {e.ci95[1] * scale:.{digits}f}]" if e.ci95 else ""
    return f"{e.mean * scale:.{digits}f}{ci}"


# ------------------------------------------------------------------------------------------ HTML


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def cell_html(e: Estimate | None, digits: int = 2, *, scale: float = 1.0, sign: bool = False,
              ci_class: str = "ci") -> str:
    """An estimate as a table cell's content: the mean, its interval in a ``span``."""
    if e is None or e.mean is None:
        return "—"
    ci = (f' <span class="{ci_class}">[{number(e.ci95[0] * scale, digits)}, {number(e.ci95[1] * scale, digits)}]'
          "</span>" if e.ci95 else "")
    return f"{number(e.mean * scale, digits, sign)}{ci}"


def colour(i: int) -> str:
    """The report's ``i``-th series colour (colour-blind safe, cycling)."""
    return RUN_COLOURS[i % len(RUN_COLOURS)]


def figure_html(fid: str, title: str, caption: str, label: str, draw: Callable[..., Figure | None], *args,
                empty: str = "No finished conversation has the data for this figure.") -> str:
    """``draw(*args)`` (under the report's matplotlib settings) as an inline SVG figure with its caption, or
    the note ``empty`` when it has nothing to draw."""
    import matplotlib as mpl

    with mpl.rc_context(RC):
        fig = draw(*args)
    body = f'<p class="empty">{escape(empty)}</p>' if fig is None else svg_markup(fig, fid, label)
    return (f'<figure id="{escape(fid)}">{body}<figcaption><strong>{escape(title)}.</strong> {escape(caption)}'
            "</figcaption></figure>")
