"""Tied and untied factorised students on tied and untied teachers (noiseless softmax).

Writes ``book/data/untied_gd_recovery.csv`` (``--d 24``, the default) and
``book/data/untied_gd_recovery_d100.csv`` (``--d 100``) (chapter "Untied key and query: algorithms and
the exact error", section "Students: tied and untied"): one row per student fitted
by :func:`aimlib.untied.fit_student`, ``rho = 0.5``, ``T = 2``, one teacher of each
kind (seed 0), tokens from seed 1, two students (seeds 0, 1) per point; ``error`` is
``(1/d)||S_hat - S||_F^2`` and ``loss`` the final training loss.  At ``d = 24`` every
student on every teacher (seconds), at ``d = 100`` each student on its own kind
of teacher (minutes)::

    python scripts/untied_gd_recovery.py [--d 24 | --d 100] [--out PATH]
"""
from __future__ import annotations

import numpy as np

from aimlib.model import sample_teacher, teacher_width
from aimlib.untied import fit_student, row_differences, sample_teacher_untied
from _rows import DATA, data_parser, write_rows

COMMAND = "python scripts/untied_gd_recovery.py"
RHO, T, SEEDS = 0.5, 2, range(2)
ALL_PAIRS = ((1, 1), (1, 0), (0, 1), (0, 0))   # (teacher tied, student tied)
#: d -> (alphas, pairs, the default output file)
GRIDS = {24: ((0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5), ALL_PAIRS, "untied_gd_recovery.csv"),
         100: ((0.1, 0.15, 0.175, 0.2, 0.25, 0.3, 0.35, 0.375, 0.4, 0.45, 0.5), ((1, 1), (0, 0)),
               "untied_gd_recovery_d100.csv")}
COLUMNS = ["teacher_tied", "student_tied", "alpha", "seed", "error", "loss"]


def rows(d: int, alphas, pairs=ALL_PAIRS, seeds=SEEDS, rho: float = RHO, T: int = T):
    """One dict per fitted student, ``(teacher_tied, student_tied)`` in ``pairs``, numbers to 8 digits."""
    r = teacher_width(d, rho)
    teachers = {1: sample_teacher(d, rho, seed=0, backend="numpy"), 0: sample_teacher_untied(d, rho, seed=0)}
    for t_tied, S in teachers.items():
        for alpha in alphas:
            X = np.random.default_rng(1).standard_normal((max(1, round(alpha * d * d)), T, d))
            m = row_differences(X, S)
            for s_tied in (1, 0):
                if (t_tied, s_tied) not in pairs:
                    continue
                for seed in seeds:
                    Sh, loss = fit_student(X, m, r, tied=bool(s_tied), seed=seed)
                    values = (t_tied, s_tied, alpha, seed, np.sum((Sh - S) ** 2) / d, loss)
                    yield dict(zip(COLUMNS, (f"{x:.8g}" for x in values)))


def main(argv=None) -> int:
    parser = data_parser(__doc__, None)
    parser.add_argument("--d", type=int, default=24, choices=sorted(GRIDS), help="the grid (default 24)")
    args = parser.parse_args(argv)
    alphas, pairs, name = GRIDS[args.d]
    out = args.out if args.out is not None else DATA / name
    command = COMMAND if args.d == 24 else f"{COMMAND} --d {args.d}"
    return write_rows(out, command, COLUMNS, rows(args.d, alphas, pairs))


if __name__ == "__main__":
    raise SystemExit(main())
