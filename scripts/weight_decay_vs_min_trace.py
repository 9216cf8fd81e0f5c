"""Weight decay's implicit bias: the wide gradient-descent student against minimum trace on the same data.

For each data set (softmax AIM, ``T = 2``, ``rho = 0.25``, ``d = 100``;
``alpha_bar = (T^2 + T - 2) alpha = 0.5`` below ``alpha_bar_cvx = 0.59``, seeds 0-3,
and ``0.7`` above it, seeds 0 and 2, whose runs take longer) the
certified minimum-trace matrix ``S_mt`` (:func:`aimlib.gd.implicit_bias.min_trace_reference`,
ADMM to ``1e-6``) and the factorised student of width ``d`` (Adam, step 0.1, as in the
chapter "Gradient descent with weight decay") at each weight decay ``lambda`` and
initial scale, for 1000 steps and for 2000 steps with the step divided by ten after
1000 (:func:`aimlib.gd.implicit_bias.weight_decay_ladder`).  One row per run, to
``book/data/weight_decay_vs_min_trace.csv``; about 40 minutes on one free core
(``OPENBLAS_NUM_THREADS=1``; an hour and a half on a shared one); ``--seeds``
runs the grid's data sets among those given, ``--alpha-bar`` those at the given
``alpha_bar`` only.  ``--d 200`` runs the same grid at ``d = 200``, to
``book/data/weight_decay_vs_min_trace_d200.csv`` (about 25 minutes per data set on one
core, the solve a few of them).  With
``--append`` the rows go after those of the file, whose ``# made by:`` line then needs the
new command added (joined by ``"; "``)::

    python scripts/weight_decay_vs_min_trace.py [--d 100] [--seeds 0 1 2 3] [--alpha-bar 0.5 0.7]
        [--out FILE] [--append]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from aimlib import _validate as v
from aimlib.channels import make_channel, softmax_k
from aimlib.gd.implicit_bias import min_trace_reference, weight_decay_ladder
from aimlib.model import sample_dataset
from _rows import DATA, data_parser, write_rows

RHO, T = 0.25, 2
#: alpha_bar -> the data sets (seeds) run at it
GRID = {0.5: (0, 1, 2, 3), 0.7: (0, 2)}
LAMBDAS = (1e-3, 1e-4, 1e-5, 0.0)
INIT_SCALES = (1.0, 0.1)
COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/weight_decay_vs_min_trace.py"
COLUMNS = ["d", "rho", "T", "seed", "alpha_bar", "n", "mt_iterations", "mt_gap", "lambda",
           "init_scale", "lr", "lr_decay_at", "steps", "dist_mt", "err_gd", "err_mt", "trace_gd",
           "trace_mt", "trace_teacher", "residual_gd", "residual_mt", "train_loss", "objective",
           "rel_grad", "settled", "seconds"]


def data_set(d: int, seed: int, alpha_bar: float):
    """The softmax data set of ``seed`` at ``d`` and ``alpha_bar`` (float64, NumPy), teacher included."""
    return sample_dataset(alpha_bar / softmax_k(T), d, T, RHO, make_channel("softmax"),
                          v.run_streams(seed).data, backend="numpy", dtype=np.float64)


def rows(d: int, seeds, alpha_bars=tuple(GRID)):
    """Every run of the grid at ``d`` for the data sets among ``seeds`` and ``alpha_bars``, as dicts of ``COLUMNS``."""
    for abar, grid_seeds in GRID.items():
        for seed in (s for s in grid_seeds if s in seeds and abar in alpha_bars):
            data = data_set(d, seed, abar)
            ref = min_trace_reference(data.X, data.y)
            head = {"d": d, "rho": RHO, "T": T, "seed": seed, "alpha_bar": abar, "n": data.n,
                    "mt_iterations": ref.result.iterations, "mt_gap": ref.result.gap,
                    "trace_teacher": float(np.trace(data.S))}
            for scale in INIT_SCALES:
                t0 = time.perf_counter()
                for row in weight_decay_ladder(data.X, data.y, ref, LAMBDAS, init_scale=scale,
                                               seed=seed, S=data.S):
                    yield {**head, **row, "seconds": time.perf_counter() - t0}
                    t0 = time.perf_counter()


def main(argv=None) -> int:
    parser = data_parser(__doc__, None)
    parser.add_argument("--d", type=int, default=100, help="the dimension (default 100)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3],
                        help="run the grid's data sets among these (default: all)")
    parser.add_argument("--alpha-bar", type=float, nargs="+", default=list(GRID), choices=list(GRID),
                        help="run the grid's data sets at these alpha_bar only (default: all)")
    parser.add_argument("--append", action="store_true", help="add rows to an existing file")
    args = parser.parse_args(argv)
    name = "weight_decay_vs_min_trace" + ("" if args.d == 100 else f"_d{args.d}")
    out = args.out or str(DATA / f"{name}.csv")
    options = (f" --d {args.d} --seeds {' '.join(map(str, args.seeds))}"
               f" --alpha-bar {' '.join(f'{a:g}' for a in args.alpha_bar)}")
    defaults = args.d == 100 and args.seeds == [0, 1, 2, 3] and args.alpha_bar == list(GRID)
    command = COMMAND + ("" if defaults else options)
    return write_rows(out, command, COLUMNS, rows(args.d, args.seeds, args.alpha_bar), append=args.append)


if __name__ == "__main__":
    sys.exit(main())
