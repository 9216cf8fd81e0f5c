"""Panel of a live GAMP-RIE run at small ``d`` against the state evolution."""
from __future__ import annotations

import time
import warnings

import numpy as np

from .. import _validate as v, amp, state_evolution as se
from ..errors import ConvergenceError
from .base import (ALPHA_BOUNDS, CHANNELS, RHO_BOUNDS, SEED_BOUNDS, W, BadInput, Panel, channel_and_tokens,
                   dropdown, figure, int_slider, log_slider, number, round_sig, seed_field)
from .curves import (se_curve_cached)


class _AMPPanel(Panel):
    SE_POINTS = 60
    SE_WINDOW = {"softmax": (0.01, 1.0), "hardmax": (0.02, 10.0)}   # the SE curve's alpha range

    def __init__(self, *args, **kw):
        self.runs = []  # AMP results for the current (channel, T, rho)
        self.last_run = None
        self._key = None
        super().__init__(*args, **kw)

    def _forget_other_curve(self, p):
        """Drop the runs when ``(channel, T, rho)`` changes: they belong to one SE curve."""
        key = (p["channel"], p["T"], p["rho"])
        if key != self._key:
            self._key, self.runs, self.last_run = key, [], None

    def _params(self):
        c = self.controls
        channel, T = channel_and_tokens(c)
        return {"channel": channel, "T": T,
                "rho": round_sig(number("ρ", c["rho"].value, *RHO_BOUNDS)),
                "alpha": round_sig(number("α", c["alpha"].value, *ALPHA_BOUNDS)),
                "d": v.integer("d", c["d"].value, 10, 400),
                "seed": v.integer("seed", c["seed"].value, *SEED_BOUNDS),
                "max_iter": v.integer("iterations", c["max_iter"].value, 1, 500)}

    def _compute(self, p):
        self._forget_other_curve(p)
        lo, hi = self.SE_WINDOW[p["channel"]]
        lo, hi = min(lo, p["alpha"] / 2), max(hi, p["alpha"] * 2)
        alphas, mmse = se_curve_cached(p["channel"], p["T"], p["rho"], round_sig(lo), round_sig(hi),
                                       "log", self.SE_POINTS)
        return {"params": p, "alpha": alphas, "mmse": mmse, "runs": list(self.runs),
                "last_run": self.last_run}

    def run(self) -> bool:
        """Run GAMP-RIE at the current controls and add the result to the plot."""
        try:
            p = self._read_params()
        except BadInput as exc:
            self._show_error(str(exc))
            return False
        self._forget_other_curve(p)
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

    def _draw_first(self, run: bool) -> None:
        """The first figure: with a run if ``run`` (the run draws it: one figure, not two), else
        without; a message that a failed run left stays."""
        if run and self.run():
            return
        error = self.error
        self.redraw()
        if error:
            self._show_error(error)

    def _plot(self, data):
        p = data["params"]
        fig, (ax, bx) = figure(2)
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
        ax.legend(loc="lower left")
        r = data["last_run"]
        if r is None:
            bx.text(0.5, 0.5, "press “run AMP”", ha="center", va="center", transform=bx.transAxes)
            bx.set_axis_off()
        else:
            it = np.arange(1, len(r["error_trace"]) + 1)
            bx.plot(it, r["error_trace"], "o-", color="C1", ms=3,
                    label=f"AMP error, d = {r['params']['d']}")
            bx.plot(it, r["m_trace"], "--", color="C2", label="AMP's prediction m")
            n_se = min(len(r["se_trace"]), len(it) + 1)
            bx.plot(np.arange(n_se), r["se_trace"][:n_se], "k-", lw=1, label="SE iteration")
            bx.axhline(r["se_mmse"], color="k", ls=":", lw=1, label=f"SE fixed point {r['se_mmse']:.3f}")
            bx.set_xlabel(f"iteration (α = {r['params']['alpha']:g})")
            bx.set_ylabel("E_S")
            bx.legend(loc="upper right")
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
    Call ``panel.run()`` to run from code.  ``run=True`` runs once at build (the panel
    is then drawn once, with the run).
    """
    controls = {
        "channel": dropdown(CHANNELS, channel, "channel"),
        "T": int_slider(T, 2, 4, "T"),
        "rho": log_slider(rho, 0.05, 4.0, "ρ"),
        "alpha": log_slider(alpha, 0.005, 10.0, "α"),
        "d": int_slider(d, 20, 150, "d", step=10),
        "seed": seed_field(seed),
        "max_iter": int_slider(max_iter, 5, 100, "iterations", step=5),
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
    panel._draw_first(run)
    return panel
