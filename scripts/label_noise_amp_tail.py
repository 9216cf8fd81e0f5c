"""GAMP-RIE in the 1/alpha tail of the softmax channel with label noise.

Writes ``book/data/label_noise_amp_tail.csv`` (chapter "Label noise", section "From a
transition to a crossover"): GAMP-RIE (:func:`aimlib.amp.run_amp`, window rule) on the
noisy softmax channel, ``Delta_out = 1e-2``, ``T = 2``, ``rho = 0.5``, ``beta = 1``,
``d = 80``, one data set (seed 1) per ``alpha`` in ``1, 2, 4``; ``mmse`` is the run's
``(1/d)||S_hat - S||_F^2`` at its last iterate, ``se`` the state evolution's error at the
same ``alpha``, ``converged`` / ``reason`` / ``iterations`` the run's stopping report and
``spread`` the spread of its iterates when it ended on a cycle (in units of ``sqrt(m)``)::

    OPENBLAS_NUM_THREADS=1 python scripts/label_noise_amp_tail.py [--out PATH]
"""
from __future__ import annotations

from aimlib import state_evolution as se
from aimlib.amp import run_amp
from aimlib.channels import NoisySoftmax
from _rows import data_parser, write_rows

COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/label_noise_amp_tail.py"
NOISE, T, RHO, D, SEED, ALPHAS = 1e-2, 2, 0.5, 80, 1, (1.0, 2.0, 4.0)
COLUMNS = ["alpha", "d", "seed", "noise", "mmse", "se", "converged", "reason", "iterations", "spread"]


def rows():
    """One dict per ``alpha``: the GAMP-RIE run and the state evolution."""
    for alpha in ALPHAS:
        run = run_amp(NoisySoftmax(noise=NOISE), T, RHO, alpha, D, seed=SEED, on_max_iter="return")
        yield dict(alpha=alpha, d=D, seed=SEED, noise=NOISE, mmse=f"{run['mmse']:.8g}",
                   se=f"{se.solve(alpha, T=T, rho=RHO, noise=NOISE).mmse:.8g}",
                   converged=int(bool(run["converged"])), reason=run["reason"], iterations=run["iterations"],
                   spread="" if run["cycle"] is None else f"{run['cycle'][1]:.3g}")


def main(argv=None) -> int:
    args = data_parser(__doc__, "label_noise_amp_tail.csv").parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows())


if __name__ == "__main__":
    raise SystemExit(main())
