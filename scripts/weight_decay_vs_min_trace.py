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
runs the grid's data sets among those given.

::

    python scripts/weight_decay_vs_min_trace.py [--seeds 0 1 2 3] [--out FILE]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from aimlib import _validate as v
from aimlib.channels import make_channel, softmax_k
from aimlib.gd.implicit_bias import min_trace_reference, weight_decay_ladder
from aimlib.model import sample_dataset
from _rows import data_parser, write_rows

D, RHO, T = 100, 0.25, 2
#: alpha_bar -> the data sets (seeds) run at it
GRID = {0.5: (0, 1, 2, 3), 0.7: (0, 2)}
LAMBDAS = (1e-3, 1e-4, 1e-5, 0.0)
INIT_SCALES = (1.0, 0.1)
COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/weight_decay_vs_min_trace.py"
COLUMNS = ["d", "rho", "T", "seed", "alpha_bar", "n", "mt_iterations", "mt_gap", "lambda",
           "init_scale", "lr", "lr_decay_at", "steps", "dist_mt", "err_gd", "err_mt", "trace_gd",
           "trace_mt", "trace_teacher", "residual_gd", "residual_mt", "train_loss", "objective",
           "rel_grad", "settled", "seconds"]


def rows(seeds):
    """Every run of the grid for the data sets among ``seeds``, as dicts with the keys of ``COLUMNS``."""
    for abar, grid_seeds in GRID.items():
        for seed in (s for s in grid_seeds if s in seeds):
            data = sample_dataset(abar / softmax_k(T), D, T, RHO, make_channel("softmax"),
                                  v.run_streams(seed).data, backend="numpy", dtype=np.float64)
            ref = min_trace_reference(data.X, data.y)
            head = {"d": D, "rho": RHO, "T": T, "seed": seed, "alpha_bar": abar, "n": data.n,
                    "mt_iterations": ref.result.iterations, "mt_gap": ref.result.gap,
                    "trace_teacher": float(np.trace(data.S))}
            for scale in INIT_SCALES:
                t0 = time.perf_counter()
                for row in weight_decay_ladder(data.X, data.y, ref, LAMBDAS, init_scale=scale,
                                               seed=seed, S=data.S):
                    yield {**head, **row, "seconds": time.perf_counter() - t0}
                    t0 = time.perf_counter()


def main(argv=None) -> int:
    parser = data_parser(__doc__, "weight_decay_vs_min_trace.csv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3],
                        help="run the grid's data sets among these (default: all)")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.seeds))


if __name__ == "__main__":
    sys.exit(main())
