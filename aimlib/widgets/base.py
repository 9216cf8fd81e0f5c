r"""The machinery of the panels: the :class:`Panel` base class, input checks, figures, caches.

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

Theory is cached with :func:`functools.lru_cache` on parameters rounded to 3
significant digits (:func:`round_sig`), so that moving a control back and
forth redraws from the cache.
"""
from __future__ import annotations

import functools
import html
import io
import math
import time
import warnings

import numpy as np

from .. import _validate as v, rmt, state_evolution as se
from .._optional import optional_import
from ..channels import DeepAttention, hardmax_polytope, make_channel, softmax_k, softmax_noisy as ns
from ..channels.registry import capabilities, max_t, t_limit
from ..plotting import MAX_WIDTH, book_style
from ..errors import ConvergenceError
from ..model import estimation_error
from ..priors import make_priors

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
#: the panels draw (:func:`thresholds_cached`)
CHANNELS = ("softmax", "hardmax")
#: the state-evolution tolerance of a channel's curves where the default is too slow for a redraw
SE_TOL = {"hardmax": 1e-8}

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


def _alpha_grid(lo: float, hi: float, scale: str, n: int) -> np.ndarray:
    return np.geomspace(lo, hi, n) if scale == "log" else np.linspace(lo, hi, n)


@functools.lru_cache(maxsize=512)
def se_curve_cached(channel: str, T: int, rho: float, lo: float, hi: float, scale: str,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(alphas, E_S)`` from :func:`aimlib.state_evolution.curve` (cached; arguments already rounded).

    Hardmax curves are iterated to ``tol = 1e-8`` (about 1e-7 in ``E_S``) to
    keep a redraw interactive.  At ``T = 3`` the hardmax ``F_out`` is the shipped table
    (:func:`aimlib.channels.hardmax_polytope.fisher_scaled`), which ends where the error
    falls below ``1/1000`` of the overlap: the curve is ``NaN`` from there on.
    """
    alphas = _alpha_grid(lo, hi, scale, n)
    kw = {"tol": SE_TOL[channel]} if channel in SE_TOL else {}
    if T > 2 and capabilities(channel).max_T is not None:   # a tabulated Bayes side beyond T = 2
        mmse = _curve_within_table(alphas, channel, T, rho, kw)
    else:
        mmse = np.asarray(se.curve(alphas, channel, T=T, rho=rho, **kw).mmse, dtype=float)
    alphas.setflags(write=False)
    mmse.setflags(write=False)
    return alphas, mmse


def _curve_within_table(alphas: np.ndarray, channel: str, T: int, rho: float, kw: dict) -> np.ndarray:
    """``E_S`` along increasing ``alphas``, ``NaN`` from the first one beyond the ``T``'s table."""
    mmse = np.full(len(alphas), np.nan)
    for i, a in enumerate(alphas):
        try:
            mmse[i] = se.solve(float(a), channel, T=T, rho=rho, **kw).mmse
        except hardmax_polytope.OutsideTable:  # q/V beyond LAMBDA_MAX: so is every larger alpha
            break
    return mmse


@functools.lru_cache(maxsize=64)
def noisy_curve_cached(rho: float, beta: float, noise: float, lo: float, hi: float,
                       n: int) -> dict:
    """SE of the noisy softmax (``T = 2``) on a log grid, with the tail law (cached; arguments rounded).

    ``mmse`` from :func:`aimlib.state_evolution.solve`; ``tail = c0 / (alpha F_out(Q0))``
    (:func:`aimlib.channels.softmax_noisy.fisher_at_q0`, ``c0 = k alpha_PR`` the slope of
    the prior MMSE at zero noise, ``k = T^2 + T - 2``).
    """
    alphas = _alpha_grid(lo, hi, "log", n)
    mmse = np.array([se.solve(a, T=2, rho=rho, beta=beta, noise=noise).mmse for a in alphas])
    c0 = softmax_k(2) * se.perfect_recovery_threshold(rho, 2)
    tail = c0 / (alphas * ns.fisher_at_q0(1 + rho, beta, noise))
    for a in (alphas, mmse, tail):
        a.setflags(write=False)
    return {"alpha": alphas, "mmse": mmse, "tail": tail}


@functools.lru_cache(maxsize=512)
def thresholds_cached(channel: str, T: int, rho: float) -> dict:
    """Thresholds drawn on the SE plots: ``alpha_pr`` (softmax) or ``alpha_wr`` (hardmax, ``rho -> 0``).

    The hardmax ``alpha_bar_WR`` is the closed form at ``T = 2`` and the face formula at ``T = 3``
    (:func:`aimlib.channels.hardmax_polytope.weak_recovery_threshold`, under a second).
    """
    ch = make_channel(channel)
    if ch.threshold == "perfect":
        return {"alpha_pr": float(se.perfect_recovery_threshold(rho, T)), "alpha_wr": None}
    wr = ch.weak_threshold(T)
    return {"alpha_pr": None, "alpha_wr": float(rho * wr), "alpha_bar_wr": float(wr)}


@functools.lru_cache(maxsize=16)
def phase_grid_cached(channel: str, T: int, n_rho: int, n_alpha: int) -> dict:
    """``E_S`` on a log grid of ``(rho, alpha)``.

    Softmax: computed on a grid of ``alpha_bar = k alpha`` (``k = T^2 + T - 2``) and rescaled.
    """
    rhos = np.geomspace(0.05, 5.0, n_rho)
    ch = make_channel(channel)
    if ch.threshold == "perfect":
        k = ch.linear_k(T)
        abars = np.geomspace(1e-2, 2.0, n_alpha)
        E = np.array([se.curve(abars / k, ch, T=T, rho=float(r)).mmse for r in rhos])
        alphas = abars / k
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = np.array([se.perfect_recovery_threshold(float(r), T) for r in rho_line])
        name = "alpha_pr"
    else:
        alphas = np.geomspace(1e-2, 20.0, n_alpha)
        E = np.array([se.curve(alphas, ch, T=2, rho=float(r), tol=SE_TOL[channel]).mmse for r in rhos])
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = rho_line * ch.weak_threshold(2)
        name = "alpha_wr"
    return {"rho": rhos, "alpha": alphas, "mmse": E, "rho_line": rho_line, name: line}


@functools.lru_cache(maxsize=64)
def spectrum_sample_cached(d: int, delta: float, rho: float, seed: int) -> dict:
    """A finite-``d`` draw of ``(S, Y)`` (:func:`aimlib.rmt.sample_denoising`) and its RIE."""
    S, Y = rmt.sample_denoising(d, delta, rho, seed)
    lam, U = np.linalg.eigh(Y)
    oracle = np.einsum("ij,ik,kj->j", U, S, U)  # u_i^T S u_i
    S_hat = rmt.rie(Y, delta, rho)
    return {"eigenvalues": lam, "oracle": oracle, "rie_error": estimation_error(S_hat, S)}


@functools.lru_cache(maxsize=64)
def deep_curve_cached(c: float, rho1: float, rho2: float, lo: float, hi: float, n: int,
                      teachers: str = "centred") -> tuple:
    """``(alphas, E_1, E_2)`` of the two-layer state evolution on a log grid (cached; arguments rounded).

    Centred teachers (:class:`aimlib.priors.Centred`): the Bayes error (exact).  Wishart
    teachers, whose layers share the index of ``sqrt(rho) I``: the state evolution of GAMP-RIE
    with one denoiser per layer, the cross overlap of its layers left out (book, chapter "Deep attention").
    """
    alphas = _alpha_grid(lo, hi, "log", n)
    priors = make_priors(DeepAttention(c=c), (rho1, rho2), teachers)
    mmse = se.curve(alphas, DeepAttention(c=c), T=2, rho=priors, tol=1e-8).mmse
    for a in (alphas, mmse):
        a.setflags(write=False)
    return alphas, mmse[:, 0], mmse[:, 1]


def clear_caches() -> None:
    """Empty every cache of the panels (used by the timing measurements)."""
    for f in (se_curve_cached, noisy_curve_cached, thresholds_cached, phase_grid_cached,
              spectrum_sample_cached, deep_curve_cached):
        f.cache_clear()


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
