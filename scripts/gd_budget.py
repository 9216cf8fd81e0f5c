"""Gradient descent against its budget: single runs, their average and spread at several step counts.

Writes ``book/data/gd_budget_d50.csv`` (``--d 50``, data sets ``--seeds 0 1 2 3``) and
``book/data/gd_budget_d100.csv`` (``--d 100 --seeds 0 1 2``) for the chapter "Gradient descent",
section "The training budget": softmax AIM, ``T = 2``, ``rho = 0.5``, ``alpha = 0.1``
(``alpha_bar = 0.4``), 16 Adam students per data set (``lr = 0.1``, full batch,
float64), 4000 steps, the errors recorded every 250 steps.  Each data set gets two runs: a
fixed step (its rows ``schedule = fixed``; the same run stopped at each restart's lowest
training loss up to the step gives the rows ``schedule = lowest``) and a step decayed
tenfold after step 1000 (``schedule = decayed``).  A row is one ``(d, seed, schedule, step)``:
``single_mean`` / ``single_std`` (mean and standard deviation over the 16 students of
``(1/d)||S_hat_i - S||_F^2``), ``averaged`` (the error of their average), ``spread``
(``D/2 = k/(k-1) (single_mean - averaged)``, the scatter of a run about the centre of the
runs), ``centre`` (``E_inf = (k averaged - single_mean)/(k-1)``), ``train_loss`` (the mean
training loss at the step) and ``bayes`` (state evolution's error at ``alpha``)::

    OPENBLAS_NUM_THREADS=1 python scripts/gd_budget.py --d 50 --seeds 0 1 2 3     # 4 data sets, minutes
    OPENBLAS_NUM_THREADS=1 python scripts/gd_budget.py --d 100 --seeds 0 1 2       # 3 data sets, ~15 min

(the defaults of ``--seeds``: ``0 1 2``; of ``--out``: ``book/data/gd_budget_d{d}.csv``).
"""
from __future__ import annotations

import numpy as np

from aimlib import gd, state_evolution as se
from _rows import DATA, data_parser, write_rows

COMMAND = "OPENBLAS_NUM_THREADS=1 python scripts/gd_budget.py"
T, RHO, ALPHA, K, STEPS, EVERY, DECAY_AT = 2, 0.5, 0.1, 16, 4000, 250, 1000
COLUMNS = ["d", "seed", "schedule", "step", "single_mean", "single_std", "averaged", "spread", "centre",
           "train_loss", "bayes", "restarts"]


def _rows_of(res, d: int, seed: int, schedule: str, bayes: float):
    """One dict per recorded step of a result, for the curves of ``schedule``."""
    lowest = schedule == "lowest"
    single = res.mmse_lowest_curve if lowest else res.mmse_curve
    averaged = res.mmse_lowest_averaged_curve if lowest else res.mmse_averaged_curve
    for j, step in enumerate(res.steps):
        e1, ea = float(single[:, j].mean()), float(averaged[j])
        values = dict(d=d, seed=seed, schedule=schedule, step=int(step), single_mean=e1,
                      single_std=float(single[:, j].std(ddof=1)), averaged=ea,
                      spread=K / (K - 1) * (e1 - ea), centre=(K * ea - e1) / (K - 1),
                      train_loss=float(res.train_loss[:, j].mean()), bayes=bayes, restarts=K)
        yield {k: (f"{x:.8g}" if isinstance(x, float) else x) for k, x in values.items()}


def rows(d: int, seeds):
    """The rows of every data set: the fixed run (fixed and lowest) and the decayed run."""
    bayes = float(se.solve(ALPHA, T=T, rho=RHO).mmse)
    common = dict(restarts=K, dtype=np.float64, steps=STEPS, record_every=EVERY, return_result=True)
    for seed in seeds:
        fixed = gd.run_gd(T, RHO, ALPHA, d, seed, keep="lowest", **common)["result"]
        yield from _rows_of(fixed, d, seed, "fixed", bayes)
        yield from _rows_of(fixed, d, seed, "lowest", bayes)
        decayed = gd.run_gd(T, RHO, ALPHA, d, seed, lr_decay_at=DECAY_AT, **common)["result"]
        yield from _rows_of(decayed, d, seed, "decayed", bayes)


def main(argv=None) -> int:
    parser = data_parser(__doc__, None)
    parser.add_argument("--d", type=int, default=100, help="the dimension (default 100)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="data sets (default 0 1 2)")
    args = parser.parse_args(argv)
    out = args.out or str(DATA / f"gd_budget_d{args.d}.csv")
    command = f"{COMMAND} --d {args.d} --seeds {' '.join(map(str, args.seeds))}"
    return write_rows(out, command, COLUMNS, rows(args.d, args.seeds))


if __name__ == "__main__":
    raise SystemExit(main())
