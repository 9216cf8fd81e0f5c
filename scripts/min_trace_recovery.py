"""Minimum-trace recovery: softmax measurements against Gaussian ones of the same count.

Writes one row per solve (chapter "What training learns"), the alpha grid placed
around the finite-d statistical dimension, ``alpha = f * 2 delta(d, r) / ((T^2 + T - 2) d^2)``.
Two grids:

* ``--grid small`` (default): ``d = 12, 16, 20``, 8 seeds, CVXPY + SCS, to
  ``book/data/min_trace_recovery.csv``; about three minutes on one core;
* ``--grid scale``: ``d = 50`` (8 seeds, ``f = 0.8 .. 1.2``) and ``d = 100``
  (4 seeds, ``f = 0.9 .. 1.1``), the matrix-free ADMM solver (``tol = 1e-5``), to
  ``book/data/min_trace_scale.csv``, with each solve's wall time (``seconds``);
  seed by seed, so that a run stopped early has whole curves; about an hour on
  one core (``OPENBLAS_NUM_THREADS=1``).  With ``--resume`` the rows already
  in the file are kept and not run again (a stopped run goes on).

::

    python scripts/min_trace_recovery.py [--grid small|scale] [--out FILE] [--resume]
"""
from __future__ import annotations

import sys
import time

from aimlib.channels import softmax_k
from aimlib.convex import MEASUREMENTS, recovery_trial, statistical_dimension_finite
from _rows import DATA, data_parser, read_rows, write_rows

RHOS, T = (0.25, 0.5), 2
COLUMNS = ["measurements", "d", "r", "rho", "T", "alpha", "f", "seed", "m", "rel_error"]
GRIDS = {
    "small": dict(file="min_trace_recovery.csv", command="python scripts/min_trace_recovery.py",
                  seeds={12: range(8), 16: range(8), 20: range(8)}, samples=2000, columns=COLUMNS,
                  factors=dict.fromkeys((12, 16, 20), (0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.4)),
                  options=dict(on_max_iter="return")),
    "scale": dict(file="min_trace_scale.csv",
                  command="OPENBLAS_NUM_THREADS=1 python scripts/min_trace_recovery.py --grid scale --resume",
                  seeds={50: range(8), 100: range(4)}, samples=400,
                  factors={50: (0.8, 0.9, 1.0, 1.05, 1.1, 1.2), 100: (0.9, 1.0, 1.05, 1.1)},
                  columns=COLUMNS + ["iterations", "converged", "seconds"],
                  options=dict(solver="admm", tol=1e-5, max_iter=20_000, on_max_iter="return")),
}


def key(row) -> tuple:
    """What names one solve: ensemble, ``d``, ``rho``, ``f`` and seed."""
    return (row["measurements"], int(row["d"]), float(row["rho"]), float(row["f"]), int(row["seed"]))


def rows(grid: dict, done=frozenset()):
    """Every solve of ``grid`` not in ``done`` (keys of :func:`key`), as dicts with the grid's columns.

    Size by size, then seed by seed: a run stopped early leaves whole curves.
    """
    for d, seeds in grid["seeds"].items():
        alphas = {}
        for rho in RHOS:
            delta = statistical_dimension_finite(d, round(rho * d), samples=grid["samples"], seed=0).delta
            alphas[rho] = {f: f * 2 * delta / (softmax_k(T) * d * d) for f in grid["factors"][d]}
        for seed in seeds:
            for rho in RHOS:
                for f, alpha in alphas[rho].items():
                    for meas in MEASUREMENTS:
                        if (meas, d, rho, float(f), seed) in done:
                            continue
                        start = time.perf_counter()
                        row = recovery_trial(meas, d, rho, alpha, T, seed, **grid["options"])
                        yield {**row, "f": float(f), "seconds": round(time.perf_counter() - start, 2)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, None)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="small", help="which grid to run")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in the file and run only the others")
    args = parser.parse_args(argv)
    grid = GRIDS[args.grid]
    out = args.out or str(DATA / grid["file"])
    done = {key(row) for row in read_rows(out)} if args.resume else set()
    return write_rows(out, grid["command"], grid["columns"], rows(grid, done), append=args.resume)


if __name__ == "__main__":
    sys.exit(main())
