"""Does the planted Hamiltonian Monte Carlo chain of the two-noise MMSE mix?  Planted against prior starts.

Writes ``book/data/untied_mixing.csv`` (chapter "Untied key and query: algorithms and the exact error",
section "The Bayes-optimal error, sampled"): one row per chain of
:func:`aimlib.untied.sample_two_noise` at the noises ``Delta_s = 1/qhat_s = 1/(alpha F_s)``
of the sampled fixed points that the book
quotes (``T = 2``, ``rho = 0.5``, ``alpha = 0.2`` and ``0.3``; ``V`` the mean over
the four ``d = 100`` instances of ``book/data/untied_bayes_se.csv``).  Each
instance (``d``, ``seed``) is sampled twice with each chain length: from the
planted factors (``start = planted``), which a chain that has not decorrelated
from its start makes too low, and from a fresh prior draw measured against the
truth (``start = prior``), which starts high; the two bracket the MMSE.  The
chain lengths are the default 300 trajectories and a long run (3000 at
``d = 100``, 2000 at ``d = 200``); the rows carry the batch-means standard
errors, the integrated autocorrelation times and the effective sample sizes of
the two errors.  Seeds 0-3 at ``d = 100`` (0-1 at ``d = 200``) are the instances of
``untied_bayes_se.csv``.  About twenty minutes on one core::

    python scripts/untied_mixing.py [--out book/data/untied_mixing.csv] [--d 100 200]
"""
from __future__ import annotations

import numpy as np

from aimlib.channels.untied_softmax import sector_fisher
from aimlib.untied import sample_two_noise
from aimlib.untied.posterior import STARTS
from _rows import DATA, data_parser, write_rows

COMMAND = "python scripts/untied_mixing.py"
RHO, T = 0.5, 2
ALPHAS = (0.2, 0.3)
#: d -> (seeds, the long chain's trajectories)
RUNS = {100: (range(6), 3000), 200: (range(4), 2000)}
DEFAULT_STEPS = 300
COLUMNS = ["rho", "T", "d", "alpha", "seed", "start", "n_steps", "Delta_A", "Delta_B", "mmse_A", "mmse_B",
           "stderr_A", "stderr_B", "tau_A", "tau_B", "ESS_A", "ESS_B", "acceptance", "seconds"]


def fixed_point_noises(alpha: float, d: int = 100) -> tuple:
    """``(Delta_A, Delta_B) = 1/(alpha F)`` at the mean fixed point ``V`` of ``untied_bayes_se.csv`` (``T = 2``)."""
    rows = np.genfromtxt(DATA / "untied_bayes_se.csv", delimiter=",", names=True, skip_header=1)
    sel = rows[(rows["T"] == T) & (rows["d"] == d) & (rows["alpha"] == alpha) & (rows["rho"] == RHO)]
    if not len(sel):
        raise ValueError(f"no fixed point at alpha={alpha}, d={d} in untied_bayes_se.csv")
    return tuple(1.0 / (alpha * F) for F in sector_fisher(float(sel["V_A"].mean()), float(sel["V_B"].mean()), T))


def rows(dims=(100, 200)):
    """One dict per chain: the default length first (every ``d``), then the long chains."""
    noises = {alpha: fixed_point_noises(alpha) for alpha in ALPHAS}
    plan = [(d, n) for d in dims for n in (DEFAULT_STEPS,)] + [(d, RUNS[d][1]) for d in dims]
    for d, n_steps in plan:
        for alpha in ALPHAS:
            for seed in RUNS[d][0]:
                for start in STARTS:
                    r = sample_two_noise(d, RHO, noises[alpha], seed=seed, n_steps=n_steps, start=start,
                                         backend="numpy")
                    yield {"rho": RHO, "T": T, "d": d, "alpha": alpha, "seed": seed, "start": start,
                           "n_steps": n_steps, "Delta_A": noises[alpha][0], "Delta_B": noises[alpha][1],
                           "mmse_A": r.errors[0], "mmse_B": r.errors[1], "stderr_A": r.stderr[0],
                           "stderr_B": r.stderr[1], "tau_A": r.tau[0], "tau_B": r.tau[1], "ESS_A": r.ess[0],
                           "ESS_B": r.ess[1], "acceptance": r.acceptance, "seconds": round(r.seconds, 1)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "untied_mixing.csv")
    parser.add_argument("--d", type=int, nargs="+", default=[100, 200], choices=sorted(RUNS),
                        help="a part of the grid")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.d))


if __name__ == "__main__":
    raise SystemExit(main())
