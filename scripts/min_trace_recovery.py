"""Minimum-trace recovery at small d: softmax measurements against Gaussian ones of the same count.

Writes ``book/data/min_trace_recovery.csv`` (chapter "What training learns"): one row
per solve, the alpha grid placed around the finite-d statistical dimension,
``alpha = f * 2 delta(d, r) / ((T^2 + T - 2) d^2)``.  About three minutes on one core::

    python scripts/min_trace_recovery.py [--out book/data/min_trace_recovery.csv]
"""
from __future__ import annotations

import sys

from aimlib.channels import softmax_k
from aimlib.convex import MEASUREMENTS, recovery_trial, statistical_dimension_finite
from _rows import data_parser, write_rows

COMMAND = "python scripts/min_trace_recovery.py"
RHOS, DIMS, SEEDS, T = (0.25, 0.5), (12, 16, 20), range(8), 2
FACTORS = (0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.4)
COLUMNS = ["measurements", "d", "r", "rho", "T", "alpha", "f", "seed", "m", "rel_error"]


def rows():
    """Every solve of the grid, as dicts with the columns of :data:`COLUMNS`."""
    for rho in RHOS:
        for d in DIMS:
            delta = statistical_dimension_finite(d, round(rho * d), samples=2000, seed=0).delta
            for f in FACTORS:
                alpha = f * 2 * delta / (softmax_k(T) * d * d)
                for meas in MEASUREMENTS:
                    for seed in SEEDS:
                        row = recovery_trial(meas, d, rho, alpha, T, seed, on_max_iter="return")
                        yield {**row, "f": float(f)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "min_trace_recovery.csv")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows())


if __name__ == "__main__":
    sys.exit(main())
