"""The exact two-overlap state evolution of untied key and query, its prior side sampled.

Writes ``book/data/untied_bayes_se.csv`` (chapter "Untied key and query: algorithms and the exact error",
section "The Bayes-optimal error, sampled"): one row per fixed point of
:func:`aimlib.untied.sampled_state_evolution`, the noiseless softmax channel with
``S = Q K^T/sqrt(r d)``, ``rho = 0.5``, whose prior side is the error of the
posterior mean under the two noises, measured by Hamiltonian Monte Carlo on one
instance of dimension ``d`` (four instances per point at ``d = 60`` and ``100``;
two at ``d = 200``, ``alpha = 0.3``, ``T = 2``, ten minutes each).  About an hour
and a half on one core; ``--d`` and ``--alpha`` run a part of the grid (rows of
the parts can be joined)::

    python scripts/untied_bayes_se.py [--out book/data/untied_bayes_se.csv] [--d 60 100 200]
                                      [--alpha ...]
"""
from __future__ import annotations

from aimlib.untied import sampled_state_evolution
from _rows import data_parser, write_rows

COMMAND = "python scripts/untied_bayes_se.py"
RHO = 0.5
#: T -> alphas, all below the counting threshold rho (2 - rho)/(T^2 - T)
ALPHAS = {2: (0.05, 0.1, 0.2, 0.3), 3: (0.02, 0.05, 0.1)}
SEEDS = range(4)
#: at d = 200 only this point, two instances: (T, alpha)
LARGE = ((2, 0.3),)
COLUMNS = ["rho", "T", "d", "seed", "alpha", "V_A", "V_B", "iterations", "seconds"]


def _points(dims, alphas):
    """``(d, T, alpha, seed)`` of the grid within ``dims`` and ``alphas`` (None: all)."""
    for d in dims:
        grid = LARGE if d > 100 else [(T, a) for T, alist in ALPHAS.items() for a in alist]
        for T, alpha in grid:
            if alphas is None or alpha in alphas:
                yield from ((d, T, alpha, seed) for seed in (range(2) if d > 100 else SEEDS))


def rows(dims=(60, 100, 200), alphas=None):
    """One dict per fixed point of the grid."""
    for d, T, alpha, seed in _points(dims, alphas):
        r = sampled_state_evolution(alpha, T, RHO, d, seed=seed, backend="numpy")
        yield {"rho": RHO, "T": T, "d": d, "seed": seed, "alpha": alpha, "V_A": r.V[0],
               "V_B": r.V[1], "iterations": r.iterations, "seconds": round(r.seconds, 1)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "untied_bayes_se.csv")
    parser.add_argument("--d", type=int, nargs="+", default=[60, 100, 200], help="a part of the grid")
    parser.add_argument("--alpha", type=float, nargs="+", default=None, help="a part of the grid")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.d, args.alpha))


if __name__ == "__main__":
    raise SystemExit(main())
