"""Minimum-trace recovery at d = 50 by the matrix-free ADMM solver, both measurement ensembles.

Writes ``book/data/min_trace_scale.csv`` (chapter "What training learns"): one row
per solve (:func:`aimlib.convex.recovery_trial` with ``solver='admm'``,
``tol = 1e-5``), the alpha grid placed around the finite-d statistical dimension,
``alpha = f * 2 delta(d, r) / ((T^2 + T - 2) d^2)``.  About half an hour on one core::

    OPENBLAS_NUM_THREADS=1 python scripts/min_trace_scale.py [--out book/data/min_trace_scale.csv]
"""
from __future__ import annotations

import sys

from aimlib.channels import softmax_k
from aimlib.convex import MEASUREMENTS, recovery_trial, statistical_dimension_finite
from _rows import data_parser, write_rows

COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/min_trace_scale.py"
RHOS, DIMS, SEEDS, T = (0.25, 0.5), (50,), range(4), 2
FACTORS = (0.9, 1.0, 1.1)
COLUMNS = ["measurements", "d", "r", "rho", "T", "alpha", "f", "seed", "m", "rel_error",
           "iterations", "converged"]


def rows():
    """Every solve of the grid, as dicts with the columns of :data:`COLUMNS`."""
    for rho in RHOS:
        for d in DIMS:
            delta = statistical_dimension_finite(d, round(rho * d), samples=400, seed=0).delta
            for f in FACTORS:
                alpha = f * 2 * delta / (softmax_k(T) * d * d)
                for meas in MEASUREMENTS:
                    for seed in SEEDS:
                        row = recovery_trial(meas, d, rho, alpha, T, seed, solver="admm", tol=1e-5,
                                             max_iter=20_000, on_max_iter="return")
                        yield {**row, "f": float(f)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "min_trace_scale.csv")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows())


if __name__ == "__main__":
    sys.exit(main())
