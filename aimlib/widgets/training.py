"""The training panel: what gradient descent with weight decay learns, from the stored runs.

Reads the committed sweeps ``sweeps/weight_decay_d100.csv`` (factorised
students of widths ``k``) and ``sweeps/weight_decay_direct_d100.csv`` (the
direct student), and the eigenvalues of every learned ``S_hat`` in
``book/data/weight_decay_spectra_d100.csv`` (book, chapter "What training learns").
"""
from __future__ import annotations

import csv
import functools
import json
from pathlib import Path

import numpy as np

from .. import rmt
from ..gd import EIG_TOL
from ..state_evolution import perfect_recovery_threshold
from ..sweep import load_results
from .base import W, Panel, dropdown, figure

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ("sweeps/weight_decay_d100.yaml", "sweeps/weight_decay_direct_d100.yaml")
SPECTRA = "book/data/weight_decay_spectra_d100.csv"
DIRECT = "direct"


@functools.lru_cache(maxsize=4)
def stored_runs(root: str | None = None) -> dict:
    """The stored runs: ``{(student, width, lambda, alpha_bar): row}`` and the teacher's eigenvalues.

    A row holds ``mmse``, ``train_loss``, ``test_loss``, ``n_nonzero`` (from the
    sweeps) and ``eigenvalues`` (from the spectra file, ``None`` if absent there).
    ``root`` is the repository holding the files (default: the one this package is in).
    """
    root = ROOT if root is None else root
    eigs, teacher = {}, None
    with open(Path(root) / SPECTRA) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            values = np.array([float(x) for name, x in r.items() if name.startswith("eig")])
            if r["key"] == "teacher":
                teacher = values
            eigs[r["key"]] = values
    runs = {}
    for spec in SWEEPS:
        for row in load_results(Path(root) / spec):
            opts = json.loads(row["options"])
            student = opts.get("student", "factorised")
            width = row["d"] if student == DIRECT else opts["rank"]
            key = (student, width, float(opts.get("weight_decay", 0.0)), row["alpha_bar"])
            runs[key] = {**row, "eigenvalues": eigs.get(row["key"])}
    return {"runs": runs, "teacher": teacher, "rho": next(iter(runs.values()))["rho"]}


def _choices(runs: dict):
    """The students (``'k/d = ...'`` labels and ``direct``), lambdas and alpha_bars present."""
    students = sorted({(s, w, r["d"]) for (s, w, _, _), r in runs.items()},
                      key=lambda t: (t[0] == DIRECT, t[1]))
    labels = {(DIRECT if s == DIRECT else f"k/d = {w / d:g}"): (s, w) for s, w, d in students}
    lams = sorted({k[2] for k in runs})
    abars = sorted({k[3] for k in runs})
    return labels, lams, abars


class _TrainingPanel(Panel):
    def __init__(self, stored, labels, *args, **kwargs):
        self.stored, self.labels = stored, labels
        super().__init__(*args, **kwargs)

    def _params(self):
        c = self.controls
        return {"student": c["student"].value, "weight_decay": float(c["weight_decay"].value),
                "alpha_bar": float(c["alpha_bar"].value)}

    def _compute(self, p):
        student, width = self.labels[p["student"]]
        runs = self.stored["runs"]
        curve = sorted((k[3], r) for k, r in runs.items()
                       if k[:3] == (student, width, p["weight_decay"]))
        if not curve:
            raise ValueError(f"no stored runs for {p['student']} at lambda = {p['weight_decay']:g}")
        here = dict(curve).get(p["alpha_bar"])
        if here is None or here["eigenvalues"] is None:
            raise ValueError(f"no stored spectrum at alpha_bar = {p['alpha_bar']:g}")
        pick = {c: np.array([r[c] for _, r in curve]) for c in ("mmse", "train_loss", "test_loss")}
        return {"params": p, "alpha_bar": np.array([a for a, _ in curve]), **pick,
                "eigenvalues": here["eigenvalues"], "n_nonzero": here["n_nonzero"],
                "teacher": self.stored["teacher"], "rho": self.stored["rho"], "width": width}

    def _plot(self, data):
        p, rho = data["params"], data["rho"]
        fig, (ax, bx) = figure(2)
        eigs = data["eigenvalues"]
        big = eigs[np.abs(eigs) > EIG_TOL]
        hi = max(rmt.support_S(rho)[1], float(np.abs(eigs).max())) * 1.05
        x = np.linspace(1e-3, hi, 400)
        bins = np.linspace(min(-0.5, float(eigs.min())), hi, 40)
        width = bins[1] - bins[0]  # mass of the bars: the fraction of eigenvalues with |λ| > EIG_TOL
        ax.hist(big, bins=bins, weights=np.full(big.size, 1.0 / (eigs.size * width)), color="C0",
                alpha=0.5, label=f"learned, {data['n_nonzero']:.0f} with |λ| > {EIG_TOL:g}")
        ax.plot(x, rmt.density_S(x, rho), "k", lw=1.5, label=f"teacher, {rho * 100:.0f} % non-zero")
        ax.set(xlabel="eigenvalue of Ŝ", ylabel="density (non-zero part)")
        ax.legend(loc="upper right")
        a = data["alpha_bar"]
        bx.semilogy(a, np.maximum(data["train_loss"], 1e-12), "o-", label="train loss")
        bx.semilogy(a, np.maximum(data["test_loss"], 1e-12), "s-", label="test loss")
        bx.semilogy(a, np.maximum(data["mmse"], 1e-12), "^-", label="estimation error")
        bx.axvline(p["alpha_bar"], color="0.6", lw=1)
        bx.axvline(4 * perfect_recovery_threshold(rho, 2), color="k", ls=":", lw=1)
        bx.set(xlabel="ᾱ = (T²+T−2) α  (dotted: ᾱ_PR)", ylabel="at the end of training")
        bx.legend(loc="lower left")
        return fig


def training_panel(student: str = "k/d = 1", weight_decay: float = 1e-4,
                   alpha_bar: float = 0.6, root=None) -> Panel:
    """Gradient descent with weight decay (``T = 2``, ``d = 100``): the learned spectrum and the errors.

    Controls: ``student`` (``k/d`` of the factorised student, or ``direct``),
    ``weight_decay`` (``lambda``) and ``alpha_bar``, each among the stored
    runs (:func:`stored_runs`, ``root`` the repository).  ``panel.last_data``:
    ``params``, ``alpha_bar``, ``mmse``, ``train_loss``, ``test_loss`` (the
    curve of the chosen student and lambda), ``eigenvalues`` and ``n_nonzero``
    (the run at the chosen ``alpha_bar``), ``teacher`` (its eigenvalues),
    ``rho`` and ``width``.
    """
    stored = stored_runs(str(ROOT if root is None else root))
    labels, lams, abars = _choices(stored["runs"])
    controls = {
        "student": dropdown(list(labels), student, "student"),
        "weight_decay": dropdown(lams, weight_decay, "λ"),
        "alpha_bar": W.SelectionSlider(options=abars, value=alpha_bar, description="ᾱ",
                                       continuous_update=False),
    }
    rows = [W.HBox([controls["student"], controls["weight_decay"]]), W.HBox([controls["alpha_bar"]])]
    panel = _TrainingPanel(stored, labels, "What training learns: spectrum and errors", controls,
                           rows, note="stored runs, T = 2, ρ = 0.25, d = 100")
    panel.redraw()
    return panel
