"""The deep-attention panel: both layers' errors against alpha, for two hardmax layers and either teacher family."""
from __future__ import annotations

import html

import numpy as np

from ..channels import DeepAttention
from ..priors import Centred
from .base import (ALPHA_BOUNDS, RHO_BOUNDS, W, Panel, dropdown, error_axes, figure, log_slider, number,
                   parse_range, range_text, round_sig)
from .curves import (deep_curve_cached, se_curve_cached)

N_POINTS = 24


class _DeepPanel(Panel):
    def _params(self):
        ctl = self.controls
        lo, hi = parse_range("alpha range", ctl["alpha_range"].value, *ALPHA_BOUNDS)
        c = DeepAttention(c=number("c", ctl["c"].value, -100.0, 100.0)).c     # away from -1, 0 and 1
        return {"c": c, "teachers": ctl["teachers"].value,
                "rho1": round_sig(number("rho_1", ctl["rho1"].value, *RHO_BOUNDS)),
                "rho2": round_sig(number("rho_2", ctl["rho2"].value, *RHO_BOUNDS)),
                "lo": round_sig(lo), "hi": round_sig(hi)}

    def _compute(self, p):
        ch = DeepAttention(c=p["c"])
        if not ch.tables_ready(shared=p["teachers"] == "wishart"):
            ch.tabulate(p["teachers"] == "wishart", self._progress)
        alphas, e1, e2, q_12 = deep_curve_cached(p["c"], p["rho1"], p["rho2"], p["lo"], p["hi"], N_POINTS,
                                                 p["teachers"])
        _, one = se_curve_cached("hardmax", 2, Centred(p["rho2"]), p["lo"], p["hi"], "log", N_POINTS)
        return {"params": p, "alpha": alphas, "mmse_1": e1, "mmse_2": e2, "one_layer": one, "q_12": q_12}

    def _progress(self, done: int, total: int) -> None:
        """Say, in the message line, how far the tables of a new ``c`` are (two seconds, fifteen for Wishart)."""
        self.message.value = html.escape(f"tabulating the output functions of c = {self.controls['c'].value:g}: "
                                         f"{done}/{total} nodes")

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = figure()
        a, wishart = data["alpha"], p["teachers"] == "wishart"
        what = ", separable SE" if wishart else ""
        ax.plot(a, data["mmse_1"], lw=2, label=f"layer 1 (ρ₁ = {p['rho1']:g}{what})")
        ax.plot(a, data["mmse_2"], lw=2, label=f"layer 2 (ρ₂ = {p['rho2']:g}{what})")
        ax.plot(a, data["one_layer"], "k:", lw=1.5, label=f"one hardmax layer, ρ = {p['rho2']:g}")
        if wishart:         # the readout of the cross overlap the separable SE leaves out
            i = int(np.argmin(data["q_12"]))
            ax.plot([], [], " ", label=f"q₁₂ (first order) down to {data['q_12'][i]:.3f}, α = {a[i]:.2g}")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_ylim(-0.02, 1.05)
        error_axes(ax, "best" if wishart else "lower left")
        if wishart:
            ax.get_legend().set_title("GAMP-RIE's separable SE, q₁₂ left out\n(the SE with q₁₂: too slow to draw live)",
                                      prop={"size": "small"})
        return fig


def deep_panel(c: float = 0.5, rho1: float = 0.5, rho2: float = 0.5, alpha_range: str = "0.05, 3",
               teachers: str = "centred") -> Panel:
    """Two hardmax attention layers (``T = 2``): each layer's SE error against ``alpha``.

    Controls: ``c`` (residual strength, in ``[-100, 100]`` at least
    :data:`~aimlib.channels.deep_hardmax.C_MARGIN` from -1, 0 and 1; a ``c`` whose output
    functions are not stored is tabulated once, with its progress in the message line), ``teachers``
    (``centred``: the Bayes error; ``wishart``: GAMP-RIE's separable state evolution, its cross overlap
    left out), ``rho1``, ``rho2`` (log sliders) and ``alpha_range`` (text).  ``panel.last_data``: ``params``,
    ``alpha``, ``mmse_1``, ``mmse_2`` (from :func:`aimlib.state_evolution.curve`
    with :class:`aimlib.channels.DeepAttention`), ``one_layer`` (one hardmax
    layer with a centred teacher at ``rho2``, for comparison) and ``q_12``, the cross overlap of the layers'
    centred estimates to first order at the separable fixed point (:func:`aimlib.state_evolution.cross_overlap`;
    zero for centred teachers), whose most negative value the legend reads out for Wishart teachers.

    For Wishart teachers the panel draws the separable state evolution, and says so in its legend: the state
    evolution that carries the cross overlap (:func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point`,
    ``python -m aimlib se --channel deep-hardmax``) takes seconds of Monte Carlo per ``alpha``, too slow for
    a live panel; at ``c = 0.5``, ``rho_1 = rho_2 = 0.5`` its errors are within about 0.005 of these (book,
    chapter "Deep attention").
    """
    controls = {
        "c": W.FloatText(value=c, description="c", step=0.1, layout=W.Layout(width="160px")),
        "teachers": dropdown(("centred", "wishart"), teachers, "teachers"),
        "rho1": log_slider(rho1, 0.05, 5.0, "ρ₁"),
        "rho2": log_slider(rho2, 0.05, 5.0, "ρ₂"),
        "alpha_range": range_text(alpha_range),
    }
    rows = [W.HBox([controls["c"], controls["rho1"], controls["rho2"]]),
            W.HBox([controls["teachers"], controls["alpha_range"]])]
    panel = _DeepPanel("Deep attention: which layer is learned first", controls, rows,
                       note="two hardmax layers, T = 2")
    panel.redraw()
    return panel
