"""A matplotlib figure that becomes inline SVG text with a tooltip on every mark (report.html).

    fig = SvgFigure("cycle", 7.0, 2.5)
    ax = fig.add_axes()
    bars = ax.barh([0], [1.2])
    fig.tip(bars[0], "verify: 1.200 ms per cycle")
    svg_text = fig.svg()        # <svg ...>...</svg>, ready to put in a page

A tip is the SVG <title> of the mark's group: every browser shows it on hover, without a
script, and a screen reader reads it. Text stays text (``svg.fonttype`` none: far smaller than
glyph outlines, and it can be searched and copied); ids are prefixed with the figure's name,
so that several figures can share one page.
"""

from __future__ import annotations

import io
import re
from html import escape

# the phase colours of every figure of a page (matplotlib's tab10, in its order)
PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
UNTIMED = "#d9d9d9"


def plain_log_ticks(axis) -> None:
    """A log axis labelled 0.1, 0.2, 0.5, 1, 2, 5, 10 ... instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


class SvgFigure:
    """One figure of the page: matplotlib's Figure (Agg-free, no pyplot state) plus its tips."""

    def __init__(self, name: str, width_in: float, height_in: float):
        from matplotlib.figure import Figure

        self.name = re.sub(r"[^a-z0-9]+", "-", name.lower())
        self.figure = Figure(figsize=(width_in, height_in), layout="constrained")
        self.tips: dict[str, str] = {}

    def add_axes(self, rows: int = 1, cols: int = 1, **kw):
        """One Axes (rows == cols == 1) or matplotlib's array of them."""
        axes = self.figure.subplots(rows, cols, squeeze=True, **kw)
        return axes

    def tip(self, artist, text: str) -> None:
        """Show ``text`` when the pointer rests on ``artist`` (a bar, a point, a band)."""
        gid = f"{self.name}-tip{len(self.tips)}"
        artist.set_gid(gid)
        self.tips[gid] = text

    def svg(self) -> str:
        """The figure as one <svg> element (no XML prolog), tips inserted, sized by the page."""
        import matplotlib

        buf = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": self.name}):
            self.figure.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        text = buf.getvalue()
        text = text[text.index("<svg") :]

        def titled(match: re.Match) -> str:
            return f"{match.group(0)}<title>{escape(self.tips[match.group(1)], quote=False)}</title>"

        text = re.sub(r'<g id="(%s-tip\d+)">' % re.escape(self.name), titled, text)
        return text.replace("<svg ", f'<svg class="fig" role="img" aria-label="{escape(self.name)}" ', 1)
