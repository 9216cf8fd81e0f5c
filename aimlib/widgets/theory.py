"""Panels drawn from the state evolution: the error curve, label noise and the phase diagram."""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from .base import (ALPHA_BOUNDS, BETA_BOUNDS, CHANNELS, NOISE_BOUNDS, RHO_BOUNDS, RHO_NOISE, T_BOUNDS, W,
                   Panel, channel_and_tokens, dropdown, error_axes, figure, int_slider, log_slider, number,
                   parse_range, range_text, round_sig, toggle)
from .curves import (noisy_curve_cached, phase_grid_cached, se_curve_cached, thresholds_cached)


# --------------------------------------------------------------------------- SE curves
class _SEPanel(Panel):
    N_POINTS = {"softmax": 120, "hardmax": 30}

    def _params(self):
        c = self.controls
        channel, T = channel_and_tokens(c)
        rho = round_sig(number("rho", c["rho"].value, *RHO_BOUNDS))
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
        fig, (ax,) = figure()
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
        error_axes(ax)
        return fig


def se_panel(channel: str = "softmax", rho: float = 0.5, T: int = 2, alpha_range: str = "0.001, 1",
             xscale: str = "log", yscale: str = "linear") -> Panel:
    """State-evolution error ``E_S(alpha)`` with controls for ``rho``, ``T``, the channel and the axes.

    Controls (``panel.controls``): ``channel`` (softmax/hardmax), ``rho``
    (log slider), ``T`` (slider; for the hardmax it stops at the channel's limit,
    :data:`aimlib.channels.hardmax_polytope.MAX_T` = 3, the curve ``NaN`` beyond the
    ``T = 3`` table's range), ``alpha_range`` (text ``"lo, hi"``),
    ``xscale``/``yscale`` (log/linear).  ``panel.last_data``: ``params``,
    ``alpha``, ``mmse`` (from :func:`aimlib.state_evolution.curve` at the
    rounded ``params``), ``alpha_pr`` (softmax, else ``None``) and
    ``alpha_wr = rho * alpha_bar_WR`` (hardmax, the ``rho -> 0`` weak-recovery
    threshold, else ``None``).
    """
    controls = {
        "channel": dropdown(CHANNELS, channel, "channel"),
        "rho": log_slider(rho, 0.02, 5.0, "ρ"),
        "T": int_slider(T, 2, 6, "T"),
        "alpha_range": range_text(alpha_range),
        "xscale": toggle(["log", "linear"], xscale, "x axis (α)"),
        "yscale": toggle(["linear", "log"], yscale, "y axis (E_S)"),
    }
    rows = [W.HBox([controls["channel"], controls["rho"], controls["T"]]),
            W.HBox([controls["alpha_range"], controls["xscale"], controls["yscale"]])]
    panel = _SEPanel("Bayes-optimal error from the state evolution", controls, rows)
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- label noise
class _NoisePanel(Panel):
    N_POINTS = 30

    def _params(self):
        c = self.controls
        lo, hi = parse_range("alpha range", c["alpha_range"].value, *ALPHA_BOUNDS)
        return {"rho": round_sig(number("rho", c["rho"].value, *RHO_NOISE)),
                "beta": round_sig(number("beta", c["beta"].value, *BETA_BOUNDS)),
                "noise": round_sig(number("noise", c["noise"].value, *NOISE_BOUNDS)),
                "lo": round_sig(lo), "hi": round_sig(hi)}

    def _compute(self, p):
        noisy = noisy_curve_cached(p["rho"], p["beta"], p["noise"], p["lo"], p["hi"], self.N_POINTS)
        _, clean = se_curve_cached("softmax", 2, p["rho"], p["lo"], p["hi"], "log", self.N_POINTS)
        th = thresholds_cached("softmax", 2, p["rho"])
        return {"params": p, **noisy, "clean": clean, "alpha_pr": th["alpha_pr"]}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = figure()
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
        error_axes(ax)
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
        "rho": log_slider(rho, *RHO_NOISE, "ρ"),
        "beta": log_slider(beta, *BETA_BOUNDS, "β"),
        "noise": log_slider(noise, *NOISE_BOUNDS, "Δ_out", step=0.1),
        "alpha_range": range_text(alpha_range),
    }
    rows = [W.HBox([controls["rho"], controls["beta"]]),
            W.HBox([controls["noise"], controls["alpha_range"]])]
    panel = _NoisePanel("Label noise: from a transition to a crossover", controls, rows,
                        note="softmax, T = 2")
    panel.redraw()
    return panel


# --------------------------------------------------------------------------- phase diagram
class _PhasePanel(Panel):
    T_LIMITS = {"hardmax": 2}  # the T = 3 table of F_out ends before the grid's alpha = 20 at small rho
    GRID = {"softmax": (24, 48), "hardmax": (12, 24)}   # (rho, alpha) points: a redraw in seconds

    def _params(self):
        c = self.controls
        channel = v.choice("channel", c["channel"].value, CHANNELS)
        T = v.integer("T", c["T"].value, *T_BOUNDS)
        T = self.T_LIMITS.get(channel, T)  # a T set from code past the slider's top is drawn there too
        return {"channel": channel, "T": T, "contours": bool(c["contours"].value)}

    def _compute(self, p):
        n_rho, n_alpha = self.GRID[p["channel"]]
        g = phase_grid_cached(p["channel"], p["T"], n_rho, n_alpha)
        return {"params": p, **g}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = figure()
        E = np.clip(data["mmse"], 0.0, 1.0)
        mesh = ax.pcolormesh(data["rho"], data["alpha"], E.T, shading="nearest", cmap="viridis",
                             vmin=0, vmax=1)
        fig.colorbar(mesh, ax=ax, label="E_S")
        if p["contours"]:
            cs = ax.contour(data["rho"], data["alpha"], E.T, levels=[0.1, 0.5, 0.9], colors="w",
                            linewidths=0.8)
            ax.clabel(cs)
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
        ax.legend(loc="lower right")
        return fig


def phase_panel(channel: str = "softmax", T: int = 2, contours: bool = True) -> Panel:
    """Phase diagram: ``E_S`` over ``(rho, alpha)`` with ``alpha_PR(rho)`` or the weak-recovery line.

    Controls: ``channel``, ``T`` (softmax; the hardmax diagram is ``T = 2``, where the slider
    stops: the ``T = 3`` table of ``F_out`` ends where ``q/V = 1000``, inside the grid at small ``rho``),
    ``contours`` (checkbox).  ``panel.last_data``: ``rho``, ``alpha`` (grids),
    ``mmse`` (shape ``(len(rho), len(alpha))``), ``rho_line`` and either
    ``alpha_pr`` (softmax) or ``alpha_wr`` (hardmax).
    """
    controls = {
        "channel": dropdown(CHANNELS, channel, "channel"),
        "T": int_slider(T, 2, 6, "T"),
        "contours": W.Checkbox(value=contours, description="contours E_S = 0.1, 0.5, 0.9",
                               indent=False),
    }
    rows = [W.HBox([controls["channel"], controls["T"], controls["contours"]])]
    panel = _PhasePanel("Phase diagram", controls, rows)
    panel.redraw()
    return panel
