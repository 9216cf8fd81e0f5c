"""Compare ``aimlib``'s softmax state evolution with the published curves, on their full grids.

The paper's public repository ``FabrizioBoncoraglio/BO_ExtensiveRankAttention``
holds, in ``data/SE_softmax/``, the state-evolution curves ``SE_softmax_T=2_rho=R.csv``
(columns: row index, ``alpha``, ``mmse``, ``q``; 256 values of ``alpha`` from
``1e-5`` to ``alpha_PR``).  This script solves ``aimlib.state_evolution.solve`` at
every published ``alpha`` and writes, for each ``rho`` and each range of
``alpha / alpha_PR``, the number of points, the largest ``|published - aimlib|``,
the mean signed difference ``published - aimlib`` and how many published values
lie above ours: a summary of every point that does not reproduce the published
files themselves.  ``book/softmax.md`` plots it.

Run (from the repository root, with a checkout of the published repository):
``python scripts/compare_published_se.py --data PATH/data/SE_softmax``
writes ``book/data/published_softmax_grid.csv``.
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np

from aimlib import state_evolution as se
from _rows import data_parser, write_rows

EDGES = (0.0, 0.001, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.995, 1.01)
COMMAND = ("python scripts/compare_published_se.py "
           "--data <checkout of FabrizioBoncoraglio/BO_ExtensiveRankAttention>/data/SE_softmax")
FIELDS = ("T", "rho", "ratio_lo", "ratio_hi", "points", "max_abs_difference",
          "mean_difference", "published_above")


def summarise(rho: float, alpha, published, ours, alpha_pr: float) -> list[dict]:
    """One row per range of ``alpha / alpha_PR`` (the :data:`EDGES`)."""
    ratio, diff = alpha / alpha_pr, published - ours
    rows = []
    for lo, hi in zip(EDGES[:-1], EDGES[1:]):
        sel = (ratio >= lo) & (ratio < hi)
        if sel.any():
            rows.append({"T": 2, "rho": rho, "ratio_lo": lo, "ratio_hi": hi,
                         "points": int(sel.sum()),
                         "max_abs_difference": float(np.abs(diff[sel]).max()),
                         "mean_difference": float(diff[sel].mean()),
                         "published_above": int((diff[sel] > 0).sum())})
    if sum(row["points"] for row in rows) != len(alpha):
        raise ValueError(f"rho = {rho}: published alpha outside [0, 1.01 alpha_PR)")
    return rows


def compare(path: Path) -> list[dict]:
    """The :func:`summarise` rows of one published file ``SE_softmax_T=2_rho=R.csv``."""
    rho = float(re.search(r"rho=([0-9.]+)\.csv$", path.name).group(1))
    with open(path, newline="") as fh:
        table = list(csv.DictReader(fh))
    alpha = np.array([float(row["alpha"]) for row in table])
    published = np.array([float(row["mmse"]) for row in table])
    ours = np.array([se.solve(a, T=2, rho=rho).mmse for a in alpha])
    alpha_pr = se.perfect_recovery_threshold(rho, 2)
    return summarise(rho, alpha, published, ours, alpha_pr)


def main(argv=None) -> int:
    parser = data_parser(__doc__, "published_softmax_grid.csv")
    parser.add_argument("--data", type=Path, required=True,
                        help="the published data/SE_softmax folder")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob("SE_softmax_T=2_rho=*.csv"))
    if not files:
        parser.error(f"--data holds no SE_softmax_T=2_rho=*.csv files: {args.data}")
    rows = [row for path in files for row in compare(path)]
    write_rows(args.out, COMMAND, FIELDS, rows)
    print(f"wrote {args.out}: {len(rows)} rows from {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
