"""Gradient-descent runs against exact posterior draws on the same data, beyond the error.

For each data set (softmax AIM with label noise ``Delta = 1e-4``, ``T = 2``, ``rho = 0.5``,
``alpha_bar = 0.4``, the chapter "Gradient descent"'s point) three rows: ``posterior``, the
draws of :func:`aimlib.gd.sample_posterior` (four chains, the first planted; 400 HMC
trajectories each, 30 % warm-up, every tenth kept), and ``gd`` / ``gd_clean``, 16 Adam
students of the teacher's width (``--steps``, 1000 by default, float64) trained on the noisy
outputs and on the clean ones ``softmax(h)`` of the same tokens.  Each row holds the errors (single,
average, spread ``D/2``), their distances to the sampled posterior mean, the overlap with
the teacher and five spectral statistics of the matrices, beside the teacher's own; the
state evolution at ``Delta`` and without noise.  About 1 minute per data set at ``d = 30``,
2 at ``d = 50`` and 8 at ``d = 80`` on one core::

    OPENBLAS_NUM_THREADS=1 python scripts/gd_vs_posterior.py [--d 30 50 80] [--seeds 0 1 2 3] [--steps 1000]
                                                             [--out FILE] [--append]

``book/data/gd_vs_posterior.csv`` holds the default run, ``book/data/gd_vs_posterior_4000.csv`` the
run with ``--steps 4000`` (the same data sets and posterior draws, students trained four times
longer).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from aimlib import _validate as v
from aimlib import gd
from aimlib import state_evolution as se
from aimlib.channels import NoisySoftmax, softmax_k
from aimlib.model import estimation_error, matrix_overlap, sample_dataset
from aimlib.priors import teacher_width
from _rows import data_parser, write_rows

T, RHO, ALPHA_BAR, NOISE, RESTARTS = 2, 0.5, 0.4, 1e-4, 16
COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/gd_vs_posterior.py"
STATS = list(gd.SPECTRAL_STATISTICS)
COLUMNS = (["d", "seed", "noise", "n", "method", "count", "single", "average", "half_pair", "to_post_mean",
            "offset", "overlap"] + STATS + [f"teacher_{s}" for s in STATS]
           + ["se", "se_clean", "acceptance", "rhat", "ess", "seconds"])


def data_set(d: int, seed: int):
    """The data set of ``seed`` at ``d`` (float64, NumPy): noisy outputs, teacher and indices."""
    return sample_dataset(ALPHA_BAR / softmax_k(T), d, T, RHO, NoisySoftmax(1.0, NOISE), v.run_streams(seed).data,
                          backend="numpy", dtype=np.float64)


def summary(S_hats, S, post_mean, r: int) -> dict:
    """The row of one method: errors, distances to the posterior mean ``post_mean`` and spectra."""
    k = S_hats.shape[0]
    half = gd.mean_pair_distance(S_hats) / 2
    centre = S_hats.mean(axis=0)
    return {"count": k, "single": estimation_error(S_hats, S).mean(), "average": estimation_error(centre, S),
            "half_pair": half, "to_post_mean": estimation_error(S_hats, post_mean).mean(),
            "offset": estimation_error(centre, post_mean) - half / k,
            "overlap": float(np.mean([matrix_overlap(S_hat, S) for S_hat in S_hats])),
            **gd.spectral_statistics(S_hats, r)}


def rows(d: int, seed: int, steps: int = 1000):
    """The three rows of one data set (module docstring), the students trained for ``steps``."""
    data, r = data_set(d, seed), teacher_width(d, RHO)
    alpha = ALPHA_BAR / softmax_k(T)
    head = {"d": d, "seed": seed, "noise": NOISE, "n": data.n, "se": se.solve(alpha, T=T, rho=RHO, noise=NOISE).mmse,
            "se_clean": se.solve(alpha, T=T, rho=RHO).mmse,
            **{f"teacher_{k}": x for k, x in gd.spectral_statistics(data.S[None], r).items()}}
    post = gd.sample_posterior(data.X, data.y, NOISE, rank=r, S=data.S, n_steps=400, thin=10, seed=seed)
    draws = post.draws.reshape(-1, d, d)
    row = {**summary(draws, data.S, post.mean, r), "average": estimation_error(post.mean, data.S)}
    yield {**head, **row, "method": "posterior", "offset": float("nan"), "acceptance": min(post.acceptance),
           "rhat": max(post.rhat.values()), "ess": min(post.ess.values()), "seconds": post.seconds}
    clean = data.channel.clean(data.h)
    for method, y in (("gd", data.y), ("gd_clean", clean)):
        began = time.perf_counter()
        res = gd.train_gd(data.X, y, rank=r, restarts=RESTARTS, seed=v.run_streams(seed).student, steps=steps)
        yield {**head, **summary(res.S_hat, data.S, post.mean, r), "method": method, "acceptance": float("nan"),
               "rhat": float("nan"), "ess": float("nan"), "seconds": time.perf_counter() - began}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "gd_vs_posterior.csv")
    parser.add_argument("--d", type=int, nargs="+", default=[30, 50, 80])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--steps", type=int, default=1000, help="Adam steps of the students")
    parser.add_argument("--append", action="store_true", help="add the rows after those already in --out")
    args = parser.parse_args(argv)
    command = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])])
    runs = (row for d in args.d for seed in args.seeds for row in rows(d, seed, args.steps))
    return write_rows(args.out, command, COLUMNS, runs, append=args.append)


if __name__ == "__main__":
    raise SystemExit(main())
