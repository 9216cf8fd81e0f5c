r"""The machinery of the panels: the :class:`Panel` base class, input checks, figures (their cached
computations are in :mod:`aimlib.widgets.curves`).

Every panel is itself a widget (an ``ipywidgets.VBox``) and exposes:

``panel.controls``
    ``dict`` name -> control widget (sliders, dropdowns, text fields, buttons).
``panel.last_data``
    ``dict`` of the arrays and numbers of the last successful plot (``None``
    before the first one): what :mod:`aimlib` returned, so that a test can
    compare them with a direct call.
``panel.last_png``
    PNG bytes of the last plot (what the panel shows).
``panel.message``, ``panel.error``
    An ``HTML`` widget holding, after a bad input, a one-line readable
    explanation (never a traceback), and its plain text (or ``""``); the last
    good plot stays visible.
``panel.last_seconds``, ``panel.last_cpu_seconds``
    Wall and CPU time of the last successful redraw (compute + render), in seconds.
``panel.redraw()``
    Recompute and redraw from the current control values (controls call it
    on every change).

Theory is cached (:mod:`aimlib.widgets.curves`, :func:`functools.lru_cache`) on parameters rounded to 3
significant digits (:func:`round_sig`), so that moving a control back and
forth redraws from the cache.
"""
from __future__ import annotations

import html
import io
import math
import time
import warnings


from .. import _validate as v
from .._optional import optional_import
from ..channels.registry import max_t, t_limit
from ..plotting import MAX_WIDTH, book_style
from ..errors import ConvergenceError

W = optional_import("ipywidgets", "aimlib.widgets")
Image = optional_import("IPython.display", "aimlib.widgets").Image
Figure = optional_import("matplotlib.figure", "aimlib.widgets").Figure

#: Bounds accepted by the panels (wider values give a readable message).
RHO_BOUNDS = (0.01, 10.0)
ALPHA_BOUNDS = (1e-4, 100.0)
DELTA_BOUNDS = (1e-3, 100.0)
NOISE_BOUNDS = (3e-3, 1.0)    # the noise panel: with RHO_NOISE and BETA_BOUNDS, a cold redraw
BETA_BOUNDS = (0.2, 3.0)      # (one tabulation of F_out) stays under half a minute
RHO_NOISE = (0.05, 2.0)
T_BOUNDS = (2, 8)
SEED_BOUNDS = (0, 2**31 - 1)
#: the panels' channels: those of the registry (:data:`aimlib.channels.CHANNELS`) whose threshold
#: the panels draw (:func:`aimlib.widgets.curves.thresholds_cached`)
CHANNELS = ("softmax", "hardmax")

_FIGSIZE = (MAX_WIDTH, 3.4)
_DPI = 96
_LABEL = {"description_width": "initial"}  # a control's label as wide as its text, never cut


class BadInput(ValueError):
    """A control holds a value the panel cannot use; the message is shown in the panel."""


# --------------------------------------------------------------------------- reading the controls
def round_sig(x: float, digits: int = 3) -> float:
    """``x`` rounded to ``digits`` significant digits (the cache key of the panels)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits - 1}e}")


def number(name: str, value, low: float, high: float) -> float:
    """A float in ``[low, high]`` from a control value (a number or a text holding one)."""
    return v.in_range(name, v.real_or_text(name, value), low, high)


def parse_range(name: str, text: str, low: float, high: float) -> tuple[float, float]:
    """Parse ``"lo, hi"`` (also ``"lo hi"`` or ``"lo .. hi"``) into two floats in ``[low, high]``."""
    if not isinstance(text, str):
        raise BadInput(f"{name}: expected text such as '0.001, 1', got {text!r}")
    parts = [p for p in text.replace("..", " ").replace(",", " ").replace(";", " ").split() if p]
    if len(parts) != 2:
        raise BadInput(f"{name}: type two numbers such as '0.001, 1', got '{text.strip()}'")
    lo = number(f"{name} (lower end)", parts[0], low, high)
    hi = number(f"{name} (upper end)", parts[1], low, high)
    if not lo < hi:
        raise BadInput(f"{name}: the lower end {lo:g} must be below the upper end {hi:g}")
    return lo, hi


def channel_and_tokens(controls: dict) -> tuple[str, int]:
    """The ``channel`` and ``T`` controls, checked against the channel's largest ``T``
    (:func:`aimlib.channels.registry.t_limit`: hardmax up to ``T = 3``)."""
    channel = v.choice("channel", controls["channel"].value, CHANNELS)
    T = v.integer("T", controls["T"].value, *T_BOUNDS)
    if limit := t_limit(channel, T):
        raise BadInput(f"T: {limit}; lower T (now T = {T})")
    return channel, T


# --------------------------------------------------------------------------- figures
def render_png(fig) -> bytes:
    """PNG bytes of a Matplotlib figure (no metadata, so equal plots give equal bytes).

    The image keeps the figure's size (``bbox_inches=None``), so every redraw of a
    panel has the same pixel size.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches=None, metadata={"Software": None})
    return buf.getvalue()


def figure(ncols: int = 1, figsize=_FIGSIZE):
    """A figure of ``ncols`` axes in the book's style (:mod:`aimlib.plotting`).

    Constrained layout makes room for every label; it costs about half the time
    of a redraw more than fixed margins, which cut long tick labels off.
    """
    fig = Figure(figsize=figsize, dpi=_DPI, layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


# --------------------------------------------------------------------------- cached theory
def error_axes(ax, legend_loc="lower left"):
    """Labels, grid and legend of an ``E_S(alpha)`` plot."""
    ax.set_xlabel("sample complexity α = n/d²")
    ax.set_ylabel("estimation error E_S")
    ax.grid(alpha=0.3)
    ax.legend(loc=legend_loc)


# --------------------------------------------------------------------------- the panel base
class Panel(W.VBox):
    """A column: title, controls, a message line and an output area holding a PNG plot.

    Subclasses implement ``_params() -> params`` (read the controls; a
    ``ValueError``/``TypeError`` there is a bad input, shown as it is),
    ``_compute(params) -> data`` and ``_plot(data) -> Figure``.

    A panel with a ``channel`` and a ``T`` control keeps the ``T`` slider's top at the
    channel's limit (:func:`aimlib.channels.registry.max_t`, or the panel's own ``T_LIMITS[channel]``; the
    slider's own top for a channel without one), so that the slider offers only the ``T``
    the panel computes.
    """

    #: the largest ``T`` this panel draws for a channel, where it is below the channel's own limit
    T_LIMITS: dict = {}

    def __init__(self, title: str, controls: dict, rows: list, *, note: str = ""):
        self.controls = controls
        self.last_data = None
        self.last_png = None
        self.last_seconds = float("nan")
        self.last_cpu_seconds = float("nan")
        self.error = ""
        self.message = W.HTML(value="", layout=W.Layout(min_height="1.5em"))
        self.out = W.Output(layout=W.Layout(min_height=f"{int(_FIGSIZE[1] * _DPI) + 10}px"))
        head = [W.HTML(f"<b>{html.escape(title)}</b>" + (f" &mdash; {note}" if note else ""))]
        super().__init__(children=head + rows + [self.message, self.out])
        self.add_class("aim-panel")
        self._adjusting = False
        self._link_tokens()
        for c in controls.values():
            if not isinstance(c, W.Button):
                c.observe(self._on_change, names="value")

    # hooks -----------------------------------------------------------------------
    def _params(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _compute(self, p: dict) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _plot(self, data: dict):  # pragma: no cover - abstract
        raise NotImplementedError

    # machinery -------------------------------------------------------------------
    def _on_change(self, change=None):
        if not self._adjusting:
            self.redraw()

    def _link_tokens(self) -> None:
        """Fit the ``T`` slider's top to the channel now and at every change of channel.

        Observed before :meth:`_on_change` is, so the channel's redraw sees the fitted ``T``
        (the slider lowers a ``T`` above the new top to it, without a redraw of its own).
        """
        channel, tokens = self.controls.get("channel"), self.controls.get("T")
        if channel is None or not isinstance(tokens, W.IntSlider):
            return
        top = tokens.max

        def fit(change=None):
            limit = self.T_LIMITS.get(channel.value, max_t(channel.value))
            self._adjusting = True
            try:
                tokens.max = top if limit is None else max(tokens.min, min(top, limit))
            finally:
                self._adjusting = False

        fit()
        channel.observe(fit, names="value")

    def _read_params(self) -> dict:
        """``self._params()``, with any error in the control values raised as :class:`BadInput`."""
        try:
            return self._params()
        except (ValueError, TypeError) as exc:
            raise BadInput(str(exc)) from exc

    def _show_error(self, text: str) -> None:
        self.error = text
        self.message.value = (f'<span class="aim-panel-error" style="color:#b00020">'
                              f"&#9888; {html.escape(text)}</span>")

    def _show(self, png: bytes) -> None:
        self.out.outputs = ()
        self.out.append_display_data(Image(data=png, format="png"))

    def redraw(self) -> bool:
        """Recompute and redraw; return ``True`` on success, ``False`` if a message is shown."""
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            p = self._read_params()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                data = self._compute(p)
            with book_style():
                png = render_png(self._plot(data))
        except BadInput as exc:
            self._show_error(str(exc))
            return False
        except (ValueError, TypeError, ArithmeticError, ConvergenceError) as exc:
            self._show_error(f"cannot compute with these values: {exc}")
            return False
        except Exception as exc:  # noqa: BLE001 - a panel must never show a traceback
            self._show_error(f"unexpected problem ({type(exc).__name__}): {exc}")
            return False
        self.error = ""
        self.message.value = ""
        self.last_data = data
        self.last_png = png
        self._show(png)
        self.last_seconds = time.perf_counter() - t0
        self.last_cpu_seconds = time.process_time() - c0
        return True


# --------------------------------------------------------------------------- controls
def dropdown(options, value, description):
    """A drop-down list of ``options``."""
    return W.Dropdown(options=list(options), value=value, description=description,
                      layout=W.Layout(width="200px"), style=_LABEL)


def _grid_through(value, lo, hi, step, to_grid=float, from_grid=float) -> tuple:
    """``(min, max)`` of a slider whose stops ``to_grid(value) + k step`` show values in ``[lo, hi]``:
    the first and last such stop (``from_grid`` maps a stop to the value it shows).

    A browser's slider stops at ``min + k step``; with ``min`` on the grid through the start
    value, one step right and one left come back to that value (with ``min`` off that grid,
    the first step snaps onto the grid and the way back lands elsewhere: 0.500, 0.564, 0.502).
    """
    at = to_grid(value)
    low = at - math.floor((at - to_grid(lo)) / step + 1e-9) * step
    high = at + math.floor((to_grid(hi) - at) / step + 1e-9) * step
    if from_grid(low) < lo and low < at:      # rounding may put an end a hair outside [lo, hi]
        low += step
    if from_grid(high) > hi and high > at:
        high -= step
    return low, high


def log_slider(value, lo, hi, description, step=0.05, fmt=".3g"):
    """A slider on ``[lo, hi]`` in ``log10`` steps of ``step``: its stops are ``value * 10^(k step)``
    (so that stepping away and back returns to ``value``), its ends the last stops inside."""
    value = min(max(value, lo), hi)
    low, high = _grid_through(value, lo, hi, step, math.log10, lambda e: 10.0 ** e)
    return W.FloatLogSlider(value=value, base=10, min=low, max=high, step=step,
                            description=description, readout_format=fmt, continuous_update=False,
                            style=_LABEL)


def int_slider(value, lo, hi, description, step=1):
    """An integer slider on ``[lo, hi]``, its stops ``value + k step``."""
    value = min(max(value, lo), hi)
    low, high = _grid_through(value, lo, hi, step, int, int)
    return W.IntSlider(value=value, min=low, max=high, step=step, description=description,
                       continuous_update=False, style=_LABEL)


def toggle(options, value, description):
    """A row of toggle buttons, one per option, with ``description`` on their left.

    The label and its buttons stay on one line and the row does not shrink in
    a box (the static book's widget renderer would put the label above them).
    """
    return W.ToggleButtons(options=list(options), value=value, description=description,
                           style={**_LABEL, "button_width": "64px"},
                           layout=W.Layout(display="flex", flex="0 0 auto"))


def range_text(value, description="α range"):
    """A text field for a range ``"lo, hi"`` (read with :func:`parse_range`)."""
    return W.Text(value=value, description=description, continuous_update=False, style=_LABEL,
                  layout=W.Layout(width="220px"))


def seed_field(value):
    """An integer field for a random seed."""
    return W.IntText(value=value, description="seed", style=_LABEL, layout=W.Layout(width="160px"))
