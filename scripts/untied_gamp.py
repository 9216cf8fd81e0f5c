"""GAMP on untied key and query (noiseless softmax), against the two-overlap state evolution.

Writes ``book/data/untied_gamp.csv`` (chapter "Untied key and query: algorithms and the exact error",
section "GAMP for untied key and query"): one row per run of
:func:`aimlib.untied.run_untied_gamp`, with the errors of the two parts of the
estimate and the algorithm's own predictions.  Two priors: ``rho = inf``
(i.i.d. Gaussian ``S``, where GAMP is Bayes-optimal and the two-overlap state
evolution is exact; denoiser ``bayes``) and ``rho = 0.5`` (``S = Q K^T/sqrt(r d)``,
denoisers ``equalised``, ``tuned`` and ``sampled``), ``T = 2`` at ``d = 100`` and
``200`` and ``T = 3`` at ``d = 100``, three seeds each (``sampled``: ``d = 100``,
two seeds, and ``T = 2`` at ``d = 200``, one seed, for a fixed 60 iterations,
since its sampling noise sets a floor under the change per iteration).  About
five hours on one core; ``--d``, ``--denoiser`` and ``--alpha`` run a part of the
grid (rows of the parts can be joined)::

    python scripts/untied_gamp.py [--out book/data/untied_gamp.csv] [--d 100 200]
                                  [--denoiser bayes equalised tuned sampled] [--alpha ...]
"""
from __future__ import annotations

import math

from aimlib.untied import run_untied_gamp
from _rows import data_parser, write_rows

COMMAND = "python scripts/untied_gamp.py"
#: denoiser name -> prior ratio rho ('bayes': the Gaussian prior's posterior mean)
DENOISERS = {"bayes": math.inf, "equalised": 0.5, "tuned": 0.5, "sampled": 0.5}
#: (denoiser, T) -> alphas; the tuned runs stop one point past their recovery
ALPHAS = {("bayes", 2): (0.05, 0.1, 0.2, 0.3, 0.4), ("bayes", 3): (0.02, 0.05, 0.1, 0.15),
          ("equalised", 2): (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
          ("equalised", 3): (0.05, 0.1, 0.15, 0.2, 0.25),
          ("tuned", 2): (0.1, 0.2, 0.3, 0.4, 0.5, 0.6), ("tuned", 3): (0.05, 0.1, 0.15, 0.2),
          ("sampled", 2): (0.1, 0.2, 0.3), ("sampled", 3): (0.05, 0.1)}
GRID = ((2, 100), (2, 200), (3, 100))
SEEDS = {"bayes": range(3), "equalised": range(3), "tuned": range(3), "sampled": range(2)}
OPTIONS = {"bayes": dict(max_iter=400, tol=1e-6), "equalised": dict(max_iter=400, tol=1e-6, denoiser="equalised"),
           "tuned": dict(max_iter=400, tol=1e-6, denoiser="tuned"),
           "sampled": dict(max_iter=60, tol=1e-12, denoiser="sampled", on_max_iter="return")}
#: the sampled prior step at d = 200: these alphas of T = 2, one seed (about half an hour each)
SAMPLED_LARGE = (0.2, 0.3)
COLUMNS = ["rho", "T", "d", "denoiser", "seed", "alpha", "E_A", "E_B", "V_A", "V_B", "iterations", "reason", "seconds"]


def _points(name: str, dims, alphas):
    """``(T, d, alpha, seed)`` of the grid for one denoiser, within ``dims`` and ``alphas`` (None: all)."""
    for T, d in GRID:
        large = name == "sampled" and d > 100
        grid = (SAMPLED_LARGE if T == 2 else ()) if large else ALPHAS[name, T]
        for alpha in grid:
            if d in dims and (alphas is None or alpha in alphas):
                yield from ((T, d, alpha, seed) for seed in (range(1) if large else SEEDS[name]))


def rows(dims=(100, 200), denoisers=tuple(DENOISERS), alphas=None):
    """One dict per run of the grid."""
    for name in denoisers:
        rho = DENOISERS[name]
        for T, d, alpha, seed in _points(name, dims, alphas):
            r = run_untied_gamp(alpha, T, d, rho, seed=seed, backend="numpy", **OPTIONS[name])
            yield {"rho": rho, "T": T, "d": d, "denoiser": name, "seed": seed, "alpha": alpha,
                   "E_A": r.errors[0], "E_B": r.errors[1], "V_A": r.V[0], "V_B": r.V[1],
                   "iterations": r.iterations, "reason": r.reason, "seconds": round(r.seconds, 2)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "untied_gamp.csv")
    parser.add_argument("--d", type=int, nargs="+", default=[100, 200], help="a part of the grid")
    parser.add_argument("--denoiser", nargs="+", default=list(DENOISERS), choices=list(DENOISERS),
                        help="a part of the grid")
    parser.add_argument("--alpha", type=float, nargs="+", default=None, help="a part of the grid")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.d, args.denoiser, args.alpha))


if __name__ == "__main__":
    raise SystemExit(main())
