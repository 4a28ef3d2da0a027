"""Figures as inline SVG for simhub's static HTML pages (the realism report and the tutor-bench
section): matplotlib's settings, the run colours, a figure with its legend above the plot, and the
SVG markup a page embeds. matplotlib (``simhub[report]``) is imported only when a figure is drawn.
"""

from __future__ import annotations

import html
import io
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PX_PER_INCH", "RC", "RUN_COLOURS", "legend_above", "new_figure", "svg_markup"]

#: Okabe–Ito colours (colour-blind safe) for runs, without the yellow that vanishes on white; more
#: runs than colours cycle through matplotlib's tab10.
RUN_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#882255")

#: matplotlib settings of every figure (text kept as SVG text, no top and right spines).
RC = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "figure.dpi": 72,
}


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def legend_above(fig: Figure, ax, ncols: int = 3, **kwargs: Any) -> None:
    """The legend of ``ax`` above the plot area, outside it, so no bar or line runs through it."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=max(1, min(ncols, len(labels))), fontsize=8,
               **kwargs)


_SVG_STYLE = re.compile(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>", re.S)
_SVG_SIZE = re.compile(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"')
#: Pixels per inch of every figure on a page: each is shown at this one scale (never stretched to the
#: page's width), so text of one point size is one size in every figure, a one-panel figure included.
#: 100 px per inch puts the widest figures (9.8 in) at the page's 980 px.
PX_PER_INCH = 100


def svg_markup(fig: Figure, salt: str, label: str) -> str:
    """Inline SVG for ``fig``: no XML prolog, no unreferenced ids (they would clash between figures
    of one page), no indentation, and an accessible name."""
    import matplotlib as mpl

    buffer = io.StringIO()
    with mpl.rc_context({**RC, "svg.hashsalt": salt}):
        fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = _SVG_STYLE.sub("", svg, count=1)
    referenced = set(re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
    svg = re.sub(r' id="([^"]*)"', lambda m: m.group(0) if m.group(1) in referenced else "", svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    svg = re.sub(r">\s+<", "><", svg)
    scale = PX_PER_INCH / 72  # matplotlib writes the size in points
    svg = _SVG_SIZE.sub(lambda m: f'<svg{m.group(1)} width="{float(m.group(2)) * scale:.0f}px" '
                                  f'height="{float(m.group(3)) * scale:.0f}px"', svg, count=1)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{html.escape(label, quote=True)}" ', 1).strip()
