"""Gradient descent on students of H averaged softmax heads, against the counting bound.

Writes ``book/data/heads_gd.csv`` (chapter "Several heads"): one row
per restart, for ``H = 1, 2, 3`` heads at ``d = 20`` and ``30``, ``T = 2``,
``rho = 0.5``, ``alpha`` on a grid of multiples of the
counting bound :func:`aimlib.channels.heads.count_threshold`, three data sets and
four restarts each (Adam, learning rate 0.05, at most 4000 steps, stopped at a
training loss of ``1e-10``).  About an hour on one core; ``--heads`` and ``--d``
run a part of the grid (the parts are deterministic, so their rows can be joined)::

    python scripts/heads_gd.py [--out book/data/heads_gd.csv] [--heads 1 2 3] [--d 20 30] [--f 0.5 1]
"""
from __future__ import annotations

from aimlib.channels.heads import count_threshold
from aimlib.gd.heads import run_heads_gd
from _rows import data_parser, write_rows

COMMAND = "python scripts/heads_gd.py"
GRID, SEEDS, T, RHO = ((1, 20), (1, 30), (2, 20), (2, 30), (3, 20), (3, 30)), range(3), 2, 0.5
FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
OPTIONS = dict(restarts=4, steps=4000, lr=0.05, tol=1e-10)
COLUMNS = ["heads", "d", "T", "rho", "alpha", "f", "seed", "restart", "error", "train_loss", "n_steps"]


def rows(heads=(1, 2, 3), dims=(20, 30), factors=FACTORS):
    """One dict per restart of every run of the grid (``error``: mean matched error over the heads)."""
    for H, d in GRID:
        if H in heads and d in dims:
            for f in factors:
                alpha = f * count_threshold(RHO, T, H)
                for seed in SEEDS:
                    run = run_heads_gd(T, RHO, alpha, d, heads=H, seed=seed, **OPTIONS)
                    for i, (errs, loss, steps) in enumerate(zip(run["mmse_single_all"], run["train_loss"],
                                                                run["n_steps"])):
                        yield {"heads": H, "d": d, "T": T, "rho": RHO, "alpha": alpha, "f": f, "seed": seed,
                               "restart": i, "error": sum(errs) / H, "train_loss": loss, "n_steps": steps}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "heads_gd.csv")
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 2, 3], help="a part of the grid")
    parser.add_argument("--d", type=int, nargs="+", default=[20, 30], help="a part of the grid")
    parser.add_argument("--f", type=float, nargs="+", default=list(FACTORS), help="a part of the grid")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.heads, args.d, args.f))


if __name__ == "__main__":
    raise SystemExit(main())
