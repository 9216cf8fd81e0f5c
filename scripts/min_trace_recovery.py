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
  one core (``OPENBLAS_NUM_THREADS=1``);
* ``--grid tight``: the solves of ``--grid scale`` at ``d = 50``, ``m = delta``
  again, to ``tol = 1e-7`` (the same data sets): whether the errors of
  ``1e-4 .. 1e-2`` that ``tol = 1e-5`` leaves there are recoveries; to
  ``book/data/min_trace_tight.csv``, about 20 minutes on one core;
* ``--grid d200``: ``d = 200``, 4 seeds, ``f = 0.95 .. 1.1``, the same solver
  with its exact Gram solve allowed 7000 MiB and the Gaussian measurements posed
  through their null space (``gaussian_map='null_space'``: the same law of the
  problem, without streaming ``m d^2 ~ 5e8 .. 7e8`` numbers per pass), one ``rho`` per
  run (``--rho``, to ``book/data/min_trace_d200_rho<rho>.csv``): 20 to 60
  minutes per seed on one core.

With ``--resume`` the rows already in the file are kept and not run again (a
stopped run goes on).

::

    python scripts/min_trace_recovery.py [--grid small|scale|tight|d200] [--rho R] [--out FILE] [--resume]
"""
from __future__ import annotations

import sys
import time

from aimlib.channels import softmax_k
from aimlib.convex import MEASUREMENTS, recovery_trial, statistical_dimension_finite
from aimlib.priors import teacher_width
from _rows import DATA, data_parser, read_rows, write_rows

RHOS, T = (0.25, 0.5), 2
COLUMNS = ["measurements", "d", "r", "rho", "T", "alpha", "f", "seed", "m", "rel_error"]
#: the columns of the ADMM grids: the solver's iterations, its verdict and the wall time
ADMM_COLUMNS = COLUMNS + ["iterations", "converged", "seconds"]
GRIDS = {
    "small": dict(file="min_trace_recovery.csv", command="python scripts/min_trace_recovery.py",
                  seeds={12: range(8), 16: range(8), 20: range(8)}, samples=2000, columns=COLUMNS,
                  factors=dict.fromkeys((12, 16, 20), (0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.4)),
                  options=dict(on_max_iter="return")),
    "scale": dict(file="min_trace_scale.csv",
                  command="OPENBLAS_NUM_THREADS=1 python scripts/min_trace_recovery.py --grid scale --resume",
                  seeds={50: range(8), 100: range(4)}, samples=400,
                  factors={50: (0.8, 0.9, 1.0, 1.05, 1.1, 1.2), 100: (0.9, 1.0, 1.05, 1.1)},
                  columns=ADMM_COLUMNS,
                  options=dict(solver="admm", tol=1e-5, max_iter=20_000, on_max_iter="return")),
    "tight": dict(file="min_trace_tight.csv",
                  command="OPENBLAS_NUM_THREADS=1 python scripts/min_trace_recovery.py --grid tight --resume",
                  seeds={50: range(8)}, samples=400, factors={50: (1.0,)},
                  columns=ADMM_COLUMNS,
                  options=dict(solver="admm", tol=1e-7, max_iter=100_000, patience=20_000,
                               on_max_iter="return")),
    "d200": dict(file="min_trace_d200.csv",
                 command="OPENBLAS_NUM_THREADS=1 python scripts/min_trace_recovery.py --grid d200 --resume",
                 seeds={200: range(4)}, samples=400, factors={200: (0.95, 1.0, 1.05, 1.1)},
                 columns=ADMM_COLUMNS,
                 options=dict(solver="admm", tol=1e-5, max_iter=20_000, on_max_iter="return",
                              gram_mb=7000.0, gaussian_map="null_space")),
}


def key(row) -> tuple:
    """What names one solve: ensemble, ``d``, ``rho``, ``f`` and seed."""
    return (row["measurements"], int(row["d"]), float(row["rho"]), float(row["f"]), int(row["seed"]))


def alphas(grid: dict, d: int, rho: float) -> dict:
    """``{f: alpha}`` of ``grid`` at ``(d, rho)``: ``m = f delta(d, r)`` measurements, ``delta`` seeded."""
    delta = statistical_dimension_finite(d, teacher_width(d, rho), samples=grid["samples"], seed=0).delta
    return {f: f * 2 * delta / (softmax_k(T) * d * d) for f in grid["factors"][d]}


def rows(grid: dict, done=frozenset(), rhos=RHOS):
    """Every solve of ``grid`` at ``rhos`` not in ``done`` (keys of :func:`key`), as dicts with the grid's columns.

    Size by size, then seed by seed: a run stopped early leaves whole curves.
    """
    for d, seeds in grid["seeds"].items():
        grid_alphas = {rho: alphas(grid, d, rho) for rho in rhos}
        for seed in seeds:
            for rho in rhos:
                for f, alpha in grid_alphas[rho].items():
                    for meas in MEASUREMENTS:
                        if (meas, d, rho, float(f), seed) in done:
                            continue
                        start = time.perf_counter()
                        row = recovery_trial(meas, d, rho, alpha, T, seed, **grid["options"])
                        yield {**row, "f": float(f), "seconds": round(time.perf_counter() - start, 2)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, None)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="small", help="which grid to run")
    parser.add_argument("--rho", type=float, choices=RHOS,
                        help="run this rho only (its own file: the name gains _rho<R>)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in the file and run only the others")
    args = parser.parse_args(argv)
    grid, rhos, command = GRIDS[args.grid], RHOS, GRIDS[args.grid]["command"]
    name = grid["file"]
    if args.rho is not None:
        rhos, command = (args.rho,), f"{command} --rho {args.rho:g}"
        name = name.replace(".csv", f"_rho{args.rho:g}.csv")
    out = args.out or str(DATA / name)
    done = {key(row) for row in read_rows(out)} if args.resume else set()
    return write_rows(out, command, grid["columns"], rows(grid, done, rhos), append=args.resume)


if __name__ == "__main__":
    sys.exit(main())
