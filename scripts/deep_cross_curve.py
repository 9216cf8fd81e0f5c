"""The state evolution of two-layer GAMP-RIE with the cross overlap and the mixing, between the alphas of
``deep_cross_se.csv``.

Writes ``book/data/deep_cross_curve.csv``: the rows of ``scripts/deep_cross_se.py`` (same model: two
hardmax layers, ``T = 2``, ``c = 0.5``, Wishart teachers ``rho_1 = rho_2 = 0.5``; same columns: the
fixed point of :func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point` started at the
separable one, its channel side by ``n`` Monte Carlo draws of the stream ``seed``) at the alphas
``0.1, 0.15, 0.2, 0.7, 2``, two sets of draws each.  With the rows of ``deep_cross_se.csv``
(``alpha = 0.3, 0.5, 1``, four sets) they make the curve of the bracket figure of the book's chapter
"Deep attention".  A row took one minute (``alpha = 0.1`` to ``0.7``) to six (``alpha = 2``) on one
core, several times that on a busy machine (the column ``seconds``); ``--resume`` keeps the rows
already in ``--out`` and makes the others::

    OPENBLAS_NUM_THREADS=1 python scripts/deep_cross_curve.py [--out book/data/deep_cross_curve.csv]
        [--alpha 0.1 0.15 ...] [--seeds 0 1] [--n 500000] [--resume]
"""
from __future__ import annotations

from deep_cross_se import COLUMNS, row
from _rows import data_parser, read_rows, write_rows

COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/deep_cross_curve.py"
GRID = [0.1, 0.15, 0.2, 0.7, 2.0]
SEEDS = [0, 1]


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_cross_curve.csv")
    parser.add_argument("--alpha", type=float, nargs="+", default=GRID)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument("--n", type=int, default=500_000)
    parser.add_argument("--resume", action="store_true", help="keep the rows already in --out, make the others")
    args = parser.parse_args(argv)
    given = [f"--{k} {' '.join(map(str, x)) if isinstance(x, list) else x}" for k, x, default in
             (("alpha", args.alpha, GRID), ("seeds", args.seeds, SEEDS), ("n", args.n, 500_000)) if x != default]
    done = {(float(r["alpha"]), int(r["seed"])) for r in read_rows(args.out)} if args.resume else set()
    todo = [(a, s) for s in args.seeds for a in args.alpha if (a, s) not in done]
    return write_rows(args.out, " ".join([COMMAND, *given]), COLUMNS, (row(a, s, args.n) for a, s in todo),
                      append=args.resume)


if __name__ == "__main__":
    raise SystemExit(main())
