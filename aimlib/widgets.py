r"""Interactive panels (ipywidgets) over the theory of the book.

Every panel is built by a function and is itself a widget (an
``ipywidgets.VBox``) that can be displayed directly.  It also exposes what a
test or a reader needs to drive it programmatically:

``panel.controls``
    ``dict`` name -> control widget (sliders, dropdowns, text fields, buttons).
``panel.last_data``
    ``dict`` of the arrays and numbers of the last successful plot (``None``
    before the first one).  They are what :mod:`aimlib` returned, so a test
    can compare them with a direct call.
``panel.last_png``
    PNG bytes of the last plot (what the panel shows).
``panel.message``
    An ``HTML`` widget; after a bad input it holds a one-line readable
    explanation (never a traceback) and the last good plot stays visible.
``panel.error``
    The plain text of that message, or ``""``.
``panel.last_seconds``, ``panel.last_cpu_seconds``
    Wall and CPU time of the last successful redraw (compute + render), in seconds.
``panel.redraw()``
    Recompute and redraw from the current control values (controls call it
    on every change).

Panels
------
:func:`se_panel`
    State-evolution error ``E_S(alpha)`` for the softmax or hardmax channel,
    with the perfect-recovery threshold ``alpha_PR`` (softmax) and the
    ``rho -> 0`` weak-recovery threshold ``alpha ~ rho * alpha_bar_WR`` (hardmax).
:func:`phase_panel`
    Phase diagram: ``E_S`` over the ``(rho, alpha)`` plane with the thresholds.
:func:`noise_panel`
    Softmax (``T = 2``) with label noise against the clean channel: the
    transition at ``alpha_PR`` turns into a crossover and a ``1/alpha`` tail.
:func:`spectrum_panel`
    Spectral density of ``Y = S + sqrt(Delta) Z`` with a sampled finite-``d``
    spectrum, and the RIE eigenvalue map against the oracle shrinkage.
:func:`amp_panel`
    A small GAMP-RIE run (button-triggered) against its state-evolution prediction.
:func:`playground`
    All of the above in one column.

Plots are rendered with the object-oriented Matplotlib API (no ``pyplot``
state) to PNG bytes and written with ``out.outputs = ()`` followed by
``out.append_display_data(Image(...))``: this works in a kernel, outside one
(tests), and in the static HTML of the book (the saved widget state holds
the last image).  State-evolution curves are cached with
:func:`functools.lru_cache` on parameters rounded to 3 significant digits,
so that moving a control back and forth redraws from the cache.
"""
from __future__ import annotations

import functools
import html
import io
import math
import time
import warnings

import numpy as np

try:  # the widgets are an optional extra: pip install aimlib[widgets]
    import ipywidgets as W
    from IPython.display import Image
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("aimlib.widgets needs ipywidgets and IPython (pip install aimlib[widgets])") from exc

from .errors import ConvergenceError
from .model import estimation_error

__all__ = ["Panel", "se_panel", "phase_panel", "noise_panel", "spectrum_panel", "amp_panel",
           "playground", "render_png", "clear_caches"]

#: Bounds accepted by the panels (wider values give a readable message).
RHO_BOUNDS = (0.01, 10.0)
ALPHA_BOUNDS = (1e-4, 100.0)
DELTA_BOUNDS = (1e-3, 100.0)
NOISE_BOUNDS = (3e-3, 1.0)    # the noise panel: with RHO_NOISE and BETA_BOUNDS, a cold redraw
BETA_BOUNDS = (0.2, 3.0)      # (one tabulation of F_out) stays under half a minute
RHO_NOISE = (0.05, 2.0)
T_BOUNDS = (2, 8)
CHANNELS = ("softmax", "hardmax")

_FIGSIZE = (7.2, 3.4)
_DPI = 80


class BadInput(ValueError):
    """A control holds a value the panel cannot use; the message is shown in the panel."""


# --------------------------------------------------------------------------- helpers
def round_sig(x: float, digits: int = 3) -> float:
    """``x`` rounded to ``digits`` significant digits (the cache key of the panels)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits - 1}e}")


def _number(name: str, value, low: float, high: float) -> float:
    """A float within ``[low, high]`` from a control value (number or text), else :class:`BadInput`."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            raise BadInput(f"{name}: '{text}' is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise BadInput(f"{name}: {value!r} is not a number")
    value = float(value)
    if not math.isfinite(value):
        raise BadInput(f"{name} must be finite, got {value}")
    if not low <= value <= high:
        raise BadInput(f"{name} must be between {low:g} and {high:g}, got {value:g}")
    return value


def _integer(name: str, value, low: int, high: int) -> int:
    x = _number(name, value, low, high)
    if x != int(x):
        raise BadInput(f"{name} must be a whole number, got {x:g}")
    return int(x)


def parse_range(name: str, text: str, low: float, high: float) -> tuple[float, float]:
    """Parse ``"lo, hi"`` (also ``"lo hi"`` or ``"lo .. hi"``) into two floats in ``[low, high]``."""
    if not isinstance(text, str):
        raise BadInput(f"{name}: expected text such as '0.001, 1', got {text!r}")
    parts = [p for p in text.replace("..", " ").replace(",", " ").replace(";", " ").split() if p]
    if len(parts) != 2:
        raise BadInput(f"{name}: type two numbers such as '0.001, 1', got '{text.strip()}'")
    lo = _number(f"{name} (lower end)", parts[0], low, high)
    hi = _number(f"{name} (upper end)", parts[1], low, high)
    if not lo < hi:
        raise BadInput(f"{name}: the lower end {lo:g} must be below the upper end {hi:g}")
    return lo, hi


def _check_channel(channel: str, T: int) -> None:
    if channel not in CHANNELS:
        raise BadInput(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    if channel == "hardmax" and T != 2:
        raise BadInput(f"the hardmax state evolution is available for T = 2 only (its output "
                       f"channel is a bivariate orthant probability); set T = 2 (now T = {T})")


def render_png(fig) -> bytes:
    """PNG bytes of a Matplotlib figure (no metadata, so equal plots give equal bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _figure(ncols: int = 1, figsize=_FIGSIZE, right: float = 0.98):
    """A figure with fixed margins (a layout engine would triple the time of a redraw)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=_DPI)
    fig.subplots_adjust(left=0.09 if ncols == 1 else 0.07, right=right, bottom=0.14, top=0.92,
                        wspace=0.25)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def _alpha_grid(lo: float, hi: float, scale: str, n: int) -> np.ndarray:
    return np.geomspace(lo, hi, n) if scale == "log" else np.linspace(lo, hi, n)


# --------------------------------------------------------------------------- cached theory
@functools.lru_cache(maxsize=512)
def se_curve_cached(channel: str, T: int, rho: float, lo: float, hi: float, scale: str,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(alphas, E_S)`` from :func:`aimlib.state_evolution.curve` (cached; arguments already rounded).

    Hardmax curves are iterated to ``tol = 1e-8`` (about 1e-7 in ``E_S``) to
    keep a redraw interactive.
    """
    from . import state_evolution as se

    alphas = _alpha_grid(lo, hi, scale, n)
    kw = {"tol": 1e-8} if channel == "hardmax" else {}
    c = se.curve(alphas, channel, T=T, rho=rho, **kw)
    alphas.setflags(write=False)
    mmse = np.asarray(c.mmse, dtype=float)
    mmse.setflags(write=False)
    return alphas, mmse


@functools.lru_cache(maxsize=64)
def noisy_curve_cached(rho: float, beta: float, noise: float, lo: float, hi: float,
                       n: int) -> dict:
    """SE of the noisy softmax (``T = 2``) on a log grid, with the tail law (cached; arguments rounded).

    ``mmse`` from :func:`aimlib.state_evolution.solve`; ``tail = c0 / (alpha F_out(Q0))``
    (:func:`aimlib.noisy_softmax.fisher_at_q0`, ``c0`` the slope of the prior MMSE at zero noise).
    """
    from . import noisy_softmax as ns
    from . import state_evolution as se

    alphas = _alpha_grid(lo, hi, "log", n)
    mmse = np.array([se.solve(a, T=2, rho=rho, beta=beta, noise=noise).mmse for a in alphas])
    c0 = 4 * se.perfect_recovery_threshold(rho, 2)  # alpha_PR = c0 / (T^2 + T - 2)
    tail = c0 / (alphas * ns.fisher_at_q0(1 + rho, beta, noise))
    for a in (alphas, mmse, tail):
        a.setflags(write=False)
    return {"alpha": alphas, "mmse": mmse, "tail": tail}


@functools.lru_cache(maxsize=512)
def thresholds_cached(channel: str, T: int, rho: float) -> dict:
    """Thresholds drawn on the SE plots: ``alpha_pr`` (softmax) or ``alpha_wr`` (hardmax, ``rho -> 0``)."""
    from . import hardmax
    from . import state_evolution as se

    if channel == "softmax":
        return {"alpha_pr": float(se.perfect_recovery_threshold(rho, T)), "alpha_wr": None}
    return {"alpha_pr": None, "alpha_wr": float(rho * hardmax.weak_recovery_threshold()),
            "alpha_bar_wr": float(hardmax.weak_recovery_threshold())}


@functools.lru_cache(maxsize=16)
def phase_grid_cached(channel: str, T: int, n_rho: int, n_alpha: int) -> dict:
    """``E_S`` on a log grid of ``(rho, alpha)`` (softmax: computed in ``alpha_bar`` and rescaled)."""
    from . import hardmax
    from . import state_evolution as se

    rhos = np.geomspace(0.05, 5.0, n_rho)
    if channel == "softmax":
        k = T * T + T - 2
        abars = np.geomspace(1e-2, 2.0, n_alpha)
        E = np.array([se.curve(abars / k, "softmax", T=T, rho=float(r)).mmse for r in rhos])
        alphas = abars / k
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = np.array([se.perfect_recovery_threshold(float(r), T) for r in rho_line])
        name = "alpha_pr"
    else:
        alphas = np.geomspace(1e-2, 20.0, n_alpha)
        E = np.array([se.curve(alphas, "hardmax", T=2, rho=float(r), tol=1e-8).mmse for r in rhos])
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = rho_line * hardmax.weak_recovery_threshold()
        name = "alpha_wr"
    return {"rho": rhos, "alpha": alphas, "mmse": E, "rho_line": rho_line, name: line}


@functools.lru_cache(maxsize=64)
def spectrum_sample_cached(d: int, delta: float, rho: float, seed: int) -> dict:
    """A finite-``d`` draw of ``(S, Y)`` (:func:`aimlib.rmt.sample_denoising`) and its RIE."""
    from . import rmt

    S, Y = rmt.sample_denoising(d, delta, rho, seed)
    lam, U = np.linalg.eigh(Y)
    oracle = np.einsum("ij,ik,kj->j", U, S, U)  # u_i^T S u_i
    S_hat = rmt.rie(Y, delta, rho)
    return {"eigenvalues": lam, "oracle": oracle, "rie_error": estimation_error(S_hat, S)}


def clear_caches() -> None:
    """Empty every cache of this module (used by the timing measurements)."""
    for f in (se_curve_cached, noisy_curve_cached, thresholds_cached, phase_grid_cached,
              spectrum_sample_cached):
        f.cache_clear()


# --------------------------------------------------------------------------- the panel base
class Panel(W.VBox):
    """A column: title, controls, a message line and an output area holding a PNG plot.

    Subclasses implement ``_compute(params) -> data`` and ``_plot(data) ->
    Figure``; ``_params()`` reads and validates the controls (raising
    :class:`BadInput` with a readable message).
    """

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
        self.redraw()

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
            p = self._params()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                data = self._compute(p)
            fig = self._plot(data)
            png = render_png(fig)
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


def _dropdown(options, value, description):
    return W.Dropdown(options=list(options), value=value, description=description,
                      layout=W.Layout(width="200px"), style={"description_width": "60px"})


def _log_slider(value, lo, hi, description, step=0.05, fmt=".3g"):
    return W.FloatLogSlider(value=value, base=10, min=math.log10(lo), max=math.log10(hi), step=step,
                            description=description, readout_format=fmt, continuous_update=False,
                            style={"description_width": "60px"})


def _int_slider(value, lo, hi, description, step=1):
    return W.IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                       continuous_update=False, style={"description_width": "60px"})


def _toggle(options, value, description):
    return W.ToggleButtons(options=list(options), value=value, description=description,
                           style={"description_width": "60px", "button_width": "64px"})


# --------------------------------------------------------------------------- (1) SE curves
class _SEPanel(Panel):
    N_POINTS = {"softmax": 120, "hardmax": 30}

    def _params(self):
        c = self.controls
        channel = c["channel"].value
        T = _integer("T", c["T"].value, *T_BOUNDS)
        _check_channel(channel, T)
        rho = round_sig(_number("rho", c["rho"].value, *RHO_BOUNDS))
        lo, hi = parse_range("alpha range", c["alpha_range"].value, *ALPHA_BOUNDS)
        return {"channel": channel, "T": T, "rho": rho, "lo": round_sig(lo), "hi": round_sig(hi),
                "xscale": c["xscale"].value, "yscale": c["yscale"].value}

    def _compute(self, p):
        n = self.N_POINTS[p["channel"]]
        alphas, mmse = se_curve_cached(p["channel"], p["T"], p["rho"], p["lo"], p["hi"], p["xscale"], n)
        th = thresholds_cached(p["channel"], p["T"], p["rho"])
        return {"params": p, "alpha": alphas, "mmse": mmse, "alpha_pr": th["alpha_pr"],
                "alpha_wr": th["alpha_wr"]}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = _figure()
        label = f"{p['channel']}, T = {p['T']}, ρ = {p['rho']:g}"
        ax.plot(data["alpha"], data["mmse"], lw=2, label=label)
        if data["alpha_pr"] is not None and p["lo"] <= data["alpha_pr"] <= p["hi"]:
            ax.axvline(data["alpha_pr"], color="k", ls="--", lw=1,
                       label=f"perfect recovery α_PR = {data['alpha_pr']:.4g}")
        if data["alpha_wr"] is not None and p["lo"] <= data["alpha_wr"] <= p["hi"]:
            ax.axvline(data["alpha_wr"], color="C3", ls=":", lw=1.5,
                       label=f"weak recovery ρ·ᾱ_WR = {data['alpha_wr']:.4g} (ρ → 0)")
        ax.set_xscale(p["xscale"])
        ax.minorticks_off()  # minor ticks cost a third of a redraw
        if p["yscale"] == "log":
            ax.set_yscale("log")
            pos = data["mmse"][data["mmse"] > 0]
            ax.set_ylim(max(pos.min() if pos.size else 1e-6, 1e-6) / 2, 1.5)
        else:
            ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel("sample complexity α = n/d²")
        ax.set_ylabel("estimation error E_S")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=9)
        return fig


def se_panel(channel: str = "softmax", rho: float = 0.5, T: int = 2, alpha_range: str = "0.001, 1",
             xscale: str = "log", yscale: str = "linear") -> Panel:
    """State-evolution error ``E_S(alpha)`` with controls for ``rho``, ``T``, the channel and the axes.

    Controls (``panel.controls``): ``channel`` (softmax/hardmax), ``rho``
    (log slider), ``T`` (slider), ``alpha_range`` (text ``"lo, hi"``),
    ``xscale``/``yscale`` (log/linear).  ``panel.last_data``: ``params``,
    ``alpha``, ``mmse`` (from :func:`aimlib.state_evolution.curve` at the
    rounded ``params``), ``alpha_pr`` (softmax, else ``None``) and
    ``alpha_wr = rho * alpha_bar_WR`` (hardmax, the ``rho -> 0`` weak-recovery
    threshold, else ``None``).
    """
    controls = {
        "channel": _dropdown(CHANNELS, channel, "channel"),
        "rho": _log_slider(rho, 0.02, 5.0, "ρ"),
        "T": _int_slider(T, 2, 6, "T"),
        "alpha_range": W.Text(value=alpha_range, description="α range", continuous_update=False,
                              style={"description_width": "60px"}, layout=W.Layout(width="220px")),
        "xscale": _toggle(["log", "linear"], xscale, "α axis"),
        "yscale": _toggle(["linear", "log"], yscale, "E_S axis"),
    }
    rows = [W.HBox([controls["channel"], controls["rho"], controls["T"]]),
            W.HBox([controls["alpha_range"], controls["xscale"], controls["yscale"]])]
    panel = _SEPanel("Bayes-optimal error from the state evolution", controls, rows)
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- (1b) label noise
class _NoisePanel(Panel):
    N_POINTS = 30

    def _params(self):
        c = self.controls
        lo, hi = parse_range("alpha range", c["alpha_range"].value, *ALPHA_BOUNDS)
        return {"rho": round_sig(_number("rho", c["rho"].value, *RHO_NOISE)),
                "beta": round_sig(_number("beta", c["beta"].value, *BETA_BOUNDS)),
                "noise": round_sig(_number("noise", c["noise"].value, *NOISE_BOUNDS)),
                "lo": round_sig(lo), "hi": round_sig(hi)}

    def _compute(self, p):
        noisy = noisy_curve_cached(p["rho"], p["beta"], p["noise"], p["lo"], p["hi"], self.N_POINTS)
        _, clean = se_curve_cached("softmax", 2, p["rho"], p["lo"], p["hi"], "log", self.N_POINTS)
        th = thresholds_cached("softmax", 2, p["rho"])
        return {"params": p, **noisy, "clean": clean, "alpha_pr": th["alpha_pr"]}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = _figure()
        a = data["alpha"]
        ax.plot(a, data["clean"], "k-", lw=1.5, label="no label noise")
        ax.plot(a, data["mmse"], lw=2, label=f"noise Δ_out = {p['noise']:g}, β = {p['beta']:g}")
        ax.plot(a, data["tail"], "--", color="C0", lw=1, label="tail c₀ / (α F_out(Q₀))")
        if p["lo"] <= data["alpha_pr"] <= p["hi"]:
            ax.axvline(data["alpha_pr"], color="k", ls=":", lw=1,
                       label=f"clean threshold α_PR = {data['alpha_pr']:.4g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.minorticks_off()
        ax.set_ylim(max(float(data["mmse"].min()), 1e-6) / 2, 1.5)
        ax.set_xlabel("sample complexity α = n/d²")
        ax.set_ylabel("estimation error E_S")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=9)
        return fig


def noise_panel(rho: float = 0.5, beta: float = 1.0, noise: float = 0.01,
                alpha_range: str = "0.01, 10") -> Panel:
    """Softmax, ``T = 2``, with label noise: the SE error against the clean one.

    Controls: ``rho``, ``beta``, ``noise`` (log sliders), ``alpha_range`` (text).
    ``panel.last_data``: ``params``, ``alpha``, ``mmse`` (noisy SE), ``clean``,
    ``tail`` (the large-``alpha`` law) and ``alpha_pr``.  A new ``(rho, beta,
    noise)`` tabulates the output function once: a few seconds at the defaults,
    up to about half a minute for the sharpest settings (large ``beta`` and
    ``rho``, small ``noise``).
    """
    controls = {
        "rho": _log_slider(rho, *RHO_NOISE, "ρ"),
        "beta": _log_slider(beta, *BETA_BOUNDS, "β"),
        "noise": _log_slider(noise, *NOISE_BOUNDS, "Δ_out", step=0.1),
        "alpha_range": W.Text(value=alpha_range, description="α range", continuous_update=False,
                              style={"description_width": "60px"}, layout=W.Layout(width="220px")),
    }
    rows = [W.HBox([controls["rho"], controls["beta"]]),
            W.HBox([controls["noise"], controls["alpha_range"]])]
    panel = _NoisePanel("Label noise: from a transition to a crossover", controls, rows,
                        note="softmax, T = 2")
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- (2) phase diagram
class _PhasePanel(Panel):
    def _params(self):
        c = self.controls
        channel = c["channel"].value
        T = _integer("T", c["T"].value, *T_BOUNDS)
        if channel == "hardmax":
            T = 2  # the hardmax diagram is the T = 2 one; the T control is ignored
        _check_channel(channel, T)
        return {"channel": channel, "T": T, "contours": bool(c["contours"].value)}

    def _compute(self, p):
        n_rho, n_alpha = (24, 48) if p["channel"] == "softmax" else (12, 24)
        g = phase_grid_cached(p["channel"], p["T"], n_rho, n_alpha)
        return {"params": p, **g}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = _figure(right=0.99)
        E = np.clip(data["mmse"], 0.0, 1.0)
        mesh = ax.pcolormesh(data["rho"], data["alpha"], E.T, shading="nearest", cmap="viridis",
                             vmin=0, vmax=1)
        fig.colorbar(mesh, ax=ax, label="E_S")
        if p["contours"]:
            cs = ax.contour(data["rho"], data["alpha"], E.T, levels=[0.1, 0.5, 0.9], colors="w",
                            linewidths=0.8)
            ax.clabel(cs, fontsize=8)
        if "alpha_pr" in data:
            ax.plot(data["rho_line"], data["alpha_pr"], "r-", lw=2,
                    label=f"α_PR(ρ), T = {p['T']}: E_S = 0 above")
        else:
            ax.plot(data["rho_line"], data["alpha_wr"], "r--", lw=2,
                    label="α = ρ·ᾱ_WR (weak recovery, ρ → 0)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(data["rho"][0], data["rho"][-1])
        ax.set_ylim(data["alpha"][0], data["alpha"][-1])
        ax.set_xlabel("width ratio ρ = r/d")
        ax.set_ylabel("sample complexity α = n/d²")
        ax.legend(loc="lower right", fontsize=9)
        return fig


def phase_panel(channel: str = "softmax", T: int = 2, contours: bool = True) -> Panel:
    """Phase diagram: ``E_S`` over ``(rho, alpha)`` with ``alpha_PR(rho)`` or the weak-recovery line.

    Controls: ``channel``, ``T`` (softmax; the hardmax diagram is ``T = 2``),
    ``contours`` (checkbox).  ``panel.last_data``: ``rho``, ``alpha`` (grids),
    ``mmse`` (shape ``(len(rho), len(alpha))``), ``rho_line`` and either
    ``alpha_pr`` (softmax) or ``alpha_wr`` (hardmax).
    """
    controls = {
        "channel": _dropdown(CHANNELS, channel, "channel"),
        "T": _int_slider(T, 2, 6, "T"),
        "contours": W.Checkbox(value=contours, description="contours E_S = 0.1, 0.5, 0.9",
                               indent=False),
    }
    rows = [W.HBox([controls["channel"], controls["T"], controls["contours"]])]
    panel = _PhasePanel("Phase diagram", controls, rows)
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- (3) spectrum and RIE
class _SpectrumPanel(Panel):
    def _params(self):
        c = self.controls
        return {"delta": round_sig(_number("Δ", c["delta"].value, *DELTA_BOUNDS)),
                "rho": round_sig(_number("ρ", c["rho"].value, *RHO_BOUNDS)),
                "d": _integer("d", c["d"].value, 20, 1000),
                "seed": _integer("seed", c["seed"].value, 0, 2**31 - 1)}

    def _compute(self, p):
        from . import rmt

        delta, rho = p["delta"], p["rho"]
        sup = rmt.support(delta, rho)
        a, b = sup[0][0], sup[-1][1]
        pad = 0.08 * (b - a)
        x = np.linspace(a - pad, b + pad, 500)
        dens = rmt.density(x, delta, rho)
        sample = spectrum_sample_cached(p["d"], delta, rho, p["seed"])
        lam_in = np.linspace(a, b, 300)
        xi = rmt.rie_eigenvalues(lam_in, delta, rho)
        return {"params": p, "x": x, "density": dens, "support": sup,
                "eigenvalues": sample["eigenvalues"], "oracle": sample["oracle"],
                "lam": lam_in, "xi": xi, "rie_error": sample["rie_error"],
                "mmse": float(rmt.mmse(delta, rho))}

    def _plot(self, data):
        p = data["params"]
        fig, (ax, bx) = _figure(2)
        ax.hist(data["eigenvalues"], bins=max(20, p["d"] // 8), density=True, color="C0", alpha=0.4,
                label=f"eigenvalues of Y, d = {p['d']}")
        ax.plot(data["x"], data["density"], "k", lw=1.5, label="μ_Δ (cubic)")
        for lo, hi in data["support"]:
            ax.axvspan(lo, hi, ymax=0.03, color="C3")
        nb = len(data["support"])
        ax.set_xlabel("eigenvalue x")
        ax.set_ylabel("density")
        ax.set_title(f"{nb} bulk{'s' if nb > 1 else ''}, Δ = {p['delta']:g}, ρ = {p['rho']:g}",
                     fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        bx.plot(data["eigenvalues"], data["oracle"], ".", ms=3, color="C1", label="oracle uᵢᵀ S uᵢ")
        bx.plot(data["lam"], data["xi"], "k", lw=1.5, label="RIE ξ(λ) = λ − 2Δ h(λ)")
        bx.plot(data["lam"], data["lam"], ":", color="grey", lw=1, label="no denoising")
        bx.set_xlabel("eigenvalue λ of Y")
        bx.set_ylabel("cleaned eigenvalue")
        bx.set_title(f"RIE error {data['rie_error']:.3f}, mmse {data['mmse']:.3f}", fontsize=10)
        bx.legend(fontsize=8, loc="upper left")
        return fig


def spectrum_panel(delta: float = 0.1, rho: float = 0.3, d: int = 300, seed: int = 0) -> Panel:
    """Spectrum of ``Y = S + sqrt(Delta) Z``: density, sampled eigenvalues, and the RIE map.

    Controls: ``delta`` and ``rho`` (log sliders), ``d`` (slider), ``seed``
    (integer field).  ``panel.last_data``: ``x``, ``density``
    (:func:`aimlib.rmt.density`), ``support`` (:func:`aimlib.rmt.support`),
    ``eigenvalues`` and ``oracle`` (one draw of
    :func:`aimlib.rmt.sample_denoising`), ``lam``, ``xi``
    (:func:`aimlib.rmt.rie_eigenvalues`), ``rie_error`` and ``mmse``.
    """
    controls = {
        "delta": _log_slider(delta, 1e-3, 10.0, "Δ"),
        "rho": _log_slider(rho, 0.05, 4.0, "ρ"),
        "d": _int_slider(d, 50, 600, "d", step=50),
        "seed": W.IntText(value=seed, description="seed", style={"description_width": "60px"},
                          layout=W.Layout(width="160px")),
    }
    rows = [W.HBox([controls["delta"], controls["rho"]]), W.HBox([controls["d"], controls["seed"]])]
    panel = _SpectrumPanel("Matrix denoising: spectrum and RIE", controls, rows)
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- (4) AMP vs SE
class _AMPPanel(Panel):
    SE_POINTS = 60

    def __init__(self, *args, **kw):
        self.runs = []  # AMP results for the current (channel, T, rho)
        self.last_run = None
        self._key = None
        super().__init__(*args, **kw)

    def _params(self):
        c = self.controls
        channel = c["channel"].value
        T = _integer("T", c["T"].value, *T_BOUNDS)
        _check_channel(channel, T)
        return {"channel": channel, "T": T,
                "rho": round_sig(_number("ρ", c["rho"].value, *RHO_BOUNDS)),
                "alpha": round_sig(_number("α", c["alpha"].value, *ALPHA_BOUNDS)),
                "d": _integer("d", c["d"].value, 10, 400),
                "seed": _integer("seed", c["seed"].value, 0, 2**31 - 1),
                "max_iter": _integer("iterations", c["max_iter"].value, 1, 500)}

    def _compute(self, p):
        key = (p["channel"], p["T"], p["rho"])
        if key != self._key:
            self._key, self.runs, self.last_run = key, [], None
        lo = 0.01 if p["channel"] == "softmax" else 0.02
        hi = 1.0 if p["channel"] == "softmax" else 10.0
        lo, hi = min(lo, p["alpha"] / 2), max(hi, p["alpha"] * 2)
        alphas, mmse = se_curve_cached(p["channel"], p["T"], p["rho"], round_sig(lo), round_sig(hi),
                                       "log", self.SE_POINTS)
        return {"params": p, "alpha": alphas, "mmse": mmse, "runs": list(self.runs),
                "last_run": self.last_run}

    def run(self) -> bool:
        """Run GAMP-RIE at the current controls and add the result to the plot."""
        from . import amp
        from . import state_evolution as se

        try:
            p = self._params()
        except BadInput as exc:
            self._show_error(str(exc))
            return False
        key = (p["channel"], p["T"], p["rho"])
        if key != self._key:
            self._key, self.runs, self.last_run = key, [], None
        self.message.value = (f"<i>running GAMP-RIE at d = {p['d']}, α = {p['alpha']:g} "
                              f"(n = {round(p['alpha'] * p['d'] ** 2)} samples)…</i>")
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = amp.run_amp(p["channel"], p["T"], p["rho"], p["alpha"], p["d"], seed=p["seed"],
                                trace=True, max_iter=p["max_iter"], tol=1e-4, damping=0.3,
                                on_max_iter="return")
                s = se.fixed_point(p["alpha"], p["channel"], T=p["T"], rho=p["rho"], damping=0.3,
                                   tol=1e-10, max_iter=100_000)
        except (ValueError, TypeError, ArithmeticError, ConvergenceError, MemoryError) as exc:
            self._show_error(f"cannot run AMP with these values: {exc}")
            return False
        self.last_run = {"params": p, "mmse": float(r["mmse"]), "m": float(r["m"]),
                         "iterations": int(r["iterations"]), "error_trace": np.asarray(r["trace"]["error"]),
                         "m_trace": np.asarray(r["trace"]["m"]), "se_trace": np.asarray(s.trace),
                         "se_mmse": float(s.mmse), "seconds": time.perf_counter() - t0}
        self.runs.append(self.last_run)
        return self.redraw()

    def _plot(self, data):
        p = data["params"]
        fig, (ax, bx) = _figure(2)
        ax.plot(data["alpha"], data["mmse"], "k", lw=1.5, label=f"SE, {p['channel']}, T = {p['T']}, ρ = {p['rho']:g}")
        for i, r in enumerate(data["runs"]):
            ax.plot(r["params"]["alpha"], r["mmse"], "o", color="C1", ms=6,
                    label="GAMP-RIE (one run each)" if i == 0 else None)
        ax.axvline(p["alpha"], color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel("α = n/d²")
        ax.set_ylabel("E_S")
        ax.legend(fontsize=8, loc="lower left")
        r = data["last_run"]
        if r is None:
            bx.text(0.5, 0.5, "press “run AMP”", ha="center", va="center", transform=bx.transAxes)
            bx.set_axis_off()
        else:
            it = np.arange(1, len(r["error_trace"]) + 1)
            bx.plot(it, r["error_trace"], "o-", color="C1", ms=3,
                    label=f"AMP error, d = {r['params']['d']}")
            bx.plot(it, r["m_trace"], "--", color="C2", label="AMP's own prediction m")
            n_se = min(len(r["se_trace"]), len(it) + 1)
            bx.plot(np.arange(n_se), r["se_trace"][:n_se], "k-", lw=1, label="SE iteration")
            bx.axhline(r["se_mmse"], color="k", ls=":", lw=1, label=f"SE fixed point {r['se_mmse']:.3f}")
            bx.set_xlabel(f"iteration (α = {r['params']['alpha']:g})")
            bx.set_ylabel("E_S")
            bx.legend(fontsize=8, loc="upper right")
        return fig


def amp_panel(channel: str = "softmax", T: int = 2, rho: float = 0.5, alpha: float = 0.1, d: int = 50,
              seed: int = 0, max_iter: int = 25, run: bool = False) -> Panel:
    """A live GAMP-RIE run at small ``d`` against the state evolution (press "run AMP").

    Controls: ``channel``, ``T``, ``rho``, ``alpha``, ``d``, ``seed``,
    ``max_iter``, and the buttons ``run`` and ``clear``.  Each run adds a
    point ``(alpha, error)`` on the SE curve (left) and shows its
    per-iteration error next to the damped SE iteration (right).
    ``panel.runs`` lists the runs; ``panel.last_data`` holds ``alpha``,
    ``mmse`` (the SE curve), ``runs`` and ``last_run`` (``mmse``,
    ``error_trace``, ``m_trace``, ``se_trace``, ``se_mmse``, ``seconds``).
    Call ``panel.run()`` to run from code.  ``run=True`` runs once at build.
    """
    controls = {
        "channel": _dropdown(CHANNELS, channel, "channel"),
        "T": _int_slider(T, 2, 4, "T"),
        "rho": _log_slider(rho, 0.05, 4.0, "ρ"),
        "alpha": _log_slider(alpha, 0.005, 10.0, "α"),
        "d": _int_slider(d, 20, 150, "d", step=10),
        "seed": W.IntText(value=seed, description="seed", style={"description_width": "60px"},
                          layout=W.Layout(width="160px")),
        "max_iter": _int_slider(max_iter, 5, 100, "iterations", step=5),
        "run": W.Button(description="run AMP", button_style="primary"),
        "clear": W.Button(description="clear points"),
    }
    rows = [W.HBox([controls["channel"], controls["T"], controls["rho"]]),
            W.HBox([controls["alpha"], controls["d"], controls["seed"]]),
            W.HBox([controls["max_iter"], controls["run"], controls["clear"]])]
    panel = _AMPPanel("GAMP-RIE against the state evolution", controls, rows,
                      note="each run samples a teacher and n = αd² sequences")
    controls["run"].on_click(lambda _b: panel.run())

    def _clear(_b):
        panel.runs, panel.last_run = [], None
        panel.redraw()

    controls["clear"].on_click(_clear)
    panel.redraw()
    if run:
        panel.run()
    return panel


# --------------------------------------------------------------------------- all together
def playground(run_amp: bool = False) -> W.VBox:
    """Every panel in one column; ``box.panels`` maps names to the panels."""
    panels = {"se": se_panel(), "phase": phase_panel(), "noise": noise_panel(),
              "spectrum": spectrum_panel(), "amp": amp_panel(run=run_amp)}
    box = W.VBox(list(panels.values()))
    box.panels = panels
    return box
