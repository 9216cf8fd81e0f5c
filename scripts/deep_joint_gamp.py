"""GAMP-RIE on two Wishart layers with the joint denoiser, against the same sampler one layer at a time.

Writes ``book/data/deep_joint_gamp.csv``, one row per run: two hardmax layers (``T = 2``,
``c = 0.5``, ``rho_1 = rho_2 = 0.5``, Wishart teachers), the data set of ``run_amp(..., seed=s)``
(those of ``scripts/deep_cross_overlap.py`` at the same ``d``), and on it three prior steps,
``denoiser``:

* ``rie`` -- the library's GAMP-RIE (one RIE per layer, full Onsager matrix, its defaults);
* ``separate`` -- each layer's posterior mean sampled alone at its own noise
  (:class:`aimlib.priors.joint_pair.JointPair` with ``joint=False``);
* ``joint`` -- the joint posterior mean of the pair under the noises' correlation
  (``JointPair``, the Bayes-optimal prior step of the coupled state evolution).

A sampled prior step makes the iterates noisy, so its runs go a fixed ``--iterations`` with
``damping = 0.5`` and report the means over the iterations after ``--burn``: each layer's error
``mmse_1, mmse_2``, the residual cross-covariance ``e_12 = (1/d) Tr((S1_hat - S1)(S2_hat - S2))``
and the predicted ``m_1, m_2``; ``spread_1, spread_2`` are the standard deviations of the errors
over those iterations.  The ``rie`` rows run to GAMP-RIE's own stopping rule and report its last
iterate (``spread`` zero, ``n_steps`` 0).  The chains are drawn from ``[seed, 1]``, ``--n-steps``
HMC trajectories per prior step (default 200; ``--kinds`` picks the runs).  An instance (all three
runs) took 30 s to 2 min at ``d = 100`` on one core, the most at ``alpha = 1``.  With
``--append`` the rows go after those of ``--out``; its ``# made by:`` line then needs the new
command added by hand, after ``; `` (``tests/test_deep_joint_gamp.py`` checks the rows against
it)::

    python scripts/deep_joint_gamp.py [--out book/data/deep_joint_gamp.csv] [--d 100]
        [--alpha 0.3 0.5 ...] [--seeds 0 1 2 3 ...] [--iterations 60] [--burn 30]
        [--n-steps 200] [--kinds rie separate joint] [--append]
"""
from __future__ import annotations

import time

import numpy as np

from aimlib import _validate as v
from aimlib.amp import gamp_rie
from aimlib.backend import to_host
from aimlib.channels import DeepAttention
from aimlib.model import matrix_overlap, sample_dataset
from aimlib.priors.joint_pair import JointPair
from _rows import data_parser, write_rows

COMMAND = "python scripts/deep_joint_gamp.py"
KINDS = ("rie", "separate", "joint")
C, RHO, T = 0.5, (0.5, 0.5), 2
COLUMNS = ["alpha", "d", "seed", "denoiser", "n_steps", "mmse_1", "mmse_2", "e_12", "m_1", "m_2", "spread_1",
           "spread_2", "iterations", "burn", "seconds"]


def _overlaps(S_hat, S) -> list:
    """``(mmse_1, mmse_2, e_12)`` of one iterate: ``(1/d) Tr(E_l E_l')`` of the residuals ``E_l``."""
    E = [to_host(a) - b for a, b in zip(S_hat, S)]
    return [matrix_overlap(E[0], E[0]), matrix_overlap(E[1], E[1]), matrix_overlap(E[0], E[1])]


def run(alpha: float, d: int, seed: int, denoiser: str, iterations: int, burn: int, n_steps: int) -> dict:
    """One run of the three kinds (module docstring) on the data set of ``seed``."""
    ch = DeepAttention(C)
    data = sample_dataset(alpha, d, T, RHO, ch, v.run_streams(seed).data, teachers="wishart")
    S, seen = to_host(data.S), []
    start = time.perf_counter()
    if denoiser == "rie":
        res = gamp_rie(data.X, data.y, ch, data.priors, S=data.S, max_iter=600, on_max_iter="return")
        rows, m, its = np.array([_overlaps(res.S_hat, S)]), [res.m], res.iterations
    else:
        prior = JointPair(RHO, joint=denoiser == "joint", seed=np.random.default_rng([seed, 1]), n_steps=n_steps)
        gamp_rie(data.X, data.y, ch, prior, S=data.S, max_iter=iterations, tol=1e-12, stop="prediction",
                 on_max_iter="return",
                 callback=lambda st: seen.append(_overlaps(st.S_hat, S) + [x for (x,) in st.V])
                 if st.t > burn else None)
        rows, its = np.array(seen), iterations
        m = rows[:, 3:]
    mean, spread, m = rows.mean(axis=0), rows.std(axis=0), np.mean(m, axis=0)   # one rie row: spread 0
    return {"alpha": alpha, "d": d, "seed": seed, "denoiser": denoiser, "n_steps": 0 if denoiser == "rie" else n_steps,
            "mmse_1": mean[0], "mmse_2": mean[1],
            "e_12": mean[2], "m_1": m[0], "m_2": m[1], "spread_1": spread[0], "spread_2": spread[1],
            "iterations": its, "burn": 0 if denoiser == "rie" else burn,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_joint_gamp.csv")
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--burn", type=int, default=30)
    parser.add_argument("--n-steps", type=int, default=200, help="HMC trajectories per prior step")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="which runs to make")
    parser.add_argument("--append", action="store_true", help="add rows to an existing --out")
    args = parser.parse_args(argv)
    rows = (run(a, args.d, s, kind, args.iterations, args.burn, args.n_steps)
            for a in args.alpha for s in args.seeds for kind in args.kinds)
    command = " ".join([COMMAND, "--d", str(args.d), "--alpha", *map(str, args.alpha), "--seeds",
                        *map(str, args.seeds), "--iterations", str(args.iterations), "--burn", str(args.burn),
                        "--n-steps", str(args.n_steps), "--kinds", *args.kinds]
                       + (["--append"] if args.append else []))
    return write_rows(args.out, command, COLUMNS, rows, append=args.append)


if __name__ == "__main__":
    raise SystemExit(main())
