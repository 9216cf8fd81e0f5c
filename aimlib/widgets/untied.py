"""The untied key-query panel: tied and untied softmax errors against alpha (chapter "Untied key and query:
algorithms and the exact error")."""
from __future__ import annotations

import functools

import numpy as np

from .. import state_evolution as se, untied
from .base import (ALPHA_BOUNDS, W, Panel, error_axes, figure, int_slider, log_slider, number, parse_range,
                   range_text, round_sig)
from .curves import (se_curve_cached)

N_POINTS = 24
RHO_UNTIED = (0.05, 1.0)   # the widths the rectangular prior error is computed for


@functools.lru_cache(maxsize=64)
def untied_curve_cached(T: int, rho: float, lo: float, hi: float) -> tuple:
    """``(alphas, E_untied, lower, upper)`` on a linear grid (cached; arguments rounded).

    The isotropic-closure SE and the bracket of the exact one (:func:`aimlib.untied.bracket_untied`).
    """
    alphas = np.linspace(lo, hi, N_POINTS)
    mmse = untied.curve_untied(alphas, T, rho)
    lower, upper = np.array([untied.bracket_untied(a, T, rho) for a in alphas]).T.copy()
    for a in (alphas, mmse, lower, upper):
        a.setflags(write=False)
    return alphas, mmse, lower, upper


class _UntiedPanel(Panel):
    def _params(self):
        ctl = self.controls
        lo, hi = parse_range("alpha range", ctl["alpha_range"].value, *ALPHA_BOUNDS)
        return {"T": int(ctl["T"].value), "rho": round_sig(number("rho", ctl["rho"].value, *RHO_UNTIED)),
                "lo": round_sig(lo), "hi": round_sig(hi)}

    def _compute(self, p):
        alphas, e_untied, lower, upper = untied_curve_cached(p["T"], p["rho"], p["lo"], p["hi"])
        _, e_tied = se_curve_cached("softmax", p["T"], p["rho"], p["lo"], p["hi"], "linear", N_POINTS)
        return {"params": p, "alpha": alphas, "untied": e_untied, "tied": e_tied, "bracket": (lower, upper),
                "threshold_untied": untied.untied_threshold(p["rho"], p["T"]),
                "threshold_tied": se.perfect_recovery_threshold(p["rho"], p["T"])}

    def _plot(self, data):
        p = data["params"]
        fig, (ax,) = figure()
        a = data["alpha"]
        ax.plot(a, data["tied"], lw=2, color="C0", label="tied key and query (exact SE)")
        ax.fill_between(a, *data["bracket"], color="C1", alpha=0.15, lw=0, label="untied: bracket of the exact SE")
        ax.plot(a, data["untied"], lw=2, ls="--", color="C1", label="untied (isotropic closure)")
        for key, color in (("threshold_tied", "C0"), ("threshold_untied", "C1")):
            if p["lo"] <= data[key] <= p["hi"]:
                ax.axvline(data[key], color=color, ls=":", lw=1.2)
        ax.set_ylim(-0.02, 1.05)
        error_axes(ax, "upper right")
        return fig


def untied_panel(T: int = 2, rho: float = 0.5, alpha_range: str = "0.005, 0.45") -> Panel:
    """Tied against untied key and query (softmax): the error against ``alpha``, with both thresholds.

    Controls: ``T`` (slider), ``rho`` (log slider, ``RHO_UNTIED``) and ``alpha_range``
    (text).  ``panel.last_data``: ``params``, ``alpha``, ``tied`` (the exact SE,
    :func:`aimlib.state_evolution.curve`), ``untied`` (:func:`aimlib.untied.curve_untied`,
    the isotropic closure: exact threshold, approximate below it), ``bracket`` (the
    lower and upper bounds of the exact untied SE, :func:`aimlib.untied.bracket_untied`,
    shaded) and the two perfect-recovery thresholds (dotted).
    """
    controls = {"T": int_slider(T, 2, 6, "T"), "rho": log_slider(rho, *RHO_UNTIED, "ρ"),
                "alpha_range": range_text(alpha_range)}
    rows = [W.HBox([controls["T"], controls["rho"]]), W.HBox([controls["alpha_range"]])]
    panel = _UntiedPanel("Tied or untied key and query", controls, rows,
                         note="softmax; untied below its threshold: isotropic closure")
    panel.redraw()
    return panel
