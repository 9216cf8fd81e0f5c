"""The book's one figure style: text readable at the page width, labels never cut.

A chapter calls :func:`use_book_style` once, after importing Matplotlib; the
widget panels draw inside :func:`book_style`, which changes nothing outside
the ``with`` block.  Figures are at most :data:`MAX_WIDTH` inches wide: at the
style's 100 dpi that is the ~700 px text column of the built book, so a
figure is shown at its own size and its 10 pt tick labels stay 10 pt.
Constrained layout makes room for every label, tick and colour bar, and
``savefig.bbox = "tight"`` keeps a saved figure's text inside the image.

Needs Matplotlib (the ``widgets`` extra).
"""
from __future__ import annotations

from . import _validate as v
from ._optional import optional_import

matplotlib = optional_import("matplotlib", "aimlib.plotting")
ticker = optional_import("matplotlib.ticker", "aimlib.plotting")

#: Widest figure of the book, in inches (700 px at :data:`DPI`).
MAX_WIDTH = 7.0
#: Resolution of the book's figures (Matplotlib's default).
DPI = 100

#: The rcParams of the book's figures.
STYLE = {
    "figure.figsize": (6.0, 3.8),
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.constrained_layout.use": True,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "legend.framealpha": 0.85,
    "legend.handlelength": 1.6,
    "legend.borderaxespad": 0.4,
}


def use_book_style() -> None:
    """Set Matplotlib's global rcParams to :data:`STYLE` (a chapter calls it once, at the top)."""
    matplotlib.rcParams.update(STYLE)


def book_style():
    """A context manager that draws with :data:`STYLE` and restores the previous rcParams on exit."""
    return matplotlib.rc_context(STYLE)


def log_axis(ax, ticks, axis: str = "x") -> None:
    """Make an axis logarithmic, labelled at ``ticks`` only, as plain numbers (``20``, ``50``, ``100``).

    On a log axis that spans about one decade Matplotlib labels the minor
    ticks too (``2x10^1``, ``3x10^1``, ...), and those labels overprint each
    other; this puts the major ticks at ``ticks`` and no label on the minor ones.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    ticks : sequence of float
        Positive tick positions.
    axis : {"x", "y"}
    """
    v.choice("axis", axis, ("x", "y"))
    ticks = [v.positive("ticks", t) for t in ticks]
    if not ticks:
        raise ValueError("ticks must hold at least one position")
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(ticker.FixedLocator(ticks))
    target.set_major_formatter(ticker.FuncFormatter(lambda value, _pos: f"{value:g}"))
    target.set_minor_formatter(ticker.NullFormatter())

