"""Panel of matrix denoising: the spectrum of ``Y = S + sqrt(Delta) Z`` and the RIE."""
from __future__ import annotations

import numpy as np

from .. import _validate as v, rmt
from .base import (DELTA_BOUNDS, RHO_BOUNDS, SEED_BOUNDS, W, Panel, figure, int_slider, log_slider, number,
                   round_sig, seed_field)
from .curves import (spectrum_sample_cached)


class _SpectrumPanel(Panel):
    def _params(self):
        c = self.controls
        return {"delta": round_sig(number("Δ", c["delta"].value, *DELTA_BOUNDS)),
                "rho": round_sig(number("ρ", c["rho"].value, *RHO_BOUNDS)),
                "d": v.integer("d", c["d"].value, 20, 1000),
                "seed": v.integer("seed", c["seed"].value, *SEED_BOUNDS)}

    def _compute(self, p):
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
        fig, (ax, bx) = figure(2)
        ax.hist(data["eigenvalues"], bins=max(20, p["d"] // 8), density=True, color="C0", alpha=0.4,
                label=f"eigenvalues of Y, d = {p['d']}")
        ax.plot(data["x"], data["density"], "k", lw=1.5, label="μ_Δ (cubic)")
        for lo, hi in data["support"]:
            ax.axvspan(lo, hi, ymax=0.03, color="C3")
        nb = len(data["support"])
        ax.set_xlabel("eigenvalue x")
        ax.set_ylabel("density")
        ax.set_title(f"{nb} bulk{'s' if nb > 1 else ''}, Δ = {p['delta']:g}, ρ = {p['rho']:g}")
        ax.legend(loc="upper right")
        bx.plot(data["eigenvalues"], data["oracle"], ".", ms=3, color="C1", label="oracle uᵢᵀ S uᵢ")
        bx.plot(data["lam"], data["xi"], "k", lw=1.5, label=r"RIE ξ(λ) = λ − 2Δ$\mathcal{H}$(λ)")
        bx.plot(data["lam"], data["lam"], ":", color="grey", lw=1, label="no denoising")
        bx.set_xlabel("eigenvalue λ of Y")
        bx.set_ylabel("cleaned eigenvalue")
        bx.set_title(f"RIE error {data['rie_error']:.3f}, mmse {data['mmse']:.3f}")
        bx.legend(loc="upper left")
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
        "delta": log_slider(delta, 1e-3, 10.0, "Δ"),
        "rho": log_slider(rho, 0.05, 4.0, "ρ"),
        "d": int_slider(d, 50, 600, "d", step=50),
        "seed": seed_field(seed),
    }
    rows = [W.HBox([controls["delta"], controls["rho"]]), W.HBox([controls["d"], controls["seed"]])]
    panel = _SpectrumPanel("Matrix denoising: spectrum and RIE", controls, rows)
    panel.redraw()
    return panel
