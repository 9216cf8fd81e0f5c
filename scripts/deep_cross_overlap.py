"""The cross overlap of two-layer GAMP-RIE on Wishart teachers, measured at its last iterate.

Writes ``book/data/deep_cross_overlap.csv``, one row per run: two hardmax layers
(``T = 2``, ``c = 0.5``, ``rho_1 = rho_2 = 0.5``, Wishart teachers), the data set of
``run_amp(..., seed=s)`` (those of ``sweeps/deep_amp_wishart_window.yaml`` at the
same ``d``), :func:`aimlib.amp.gamp_rie` with its defaults and ``max_iter = 600``.
Columns: each layer's error ``mmse_1, mmse_2``, the cross overlap of the centred
parts ``q_12 = (1/d) Tr(C1_hat C2_hat)`` with ``C_l_hat = S_l_hat - sqrt(rho_l) I``,
the residual cross-covariance ``e_12 = (1/d) Tr((S1_hat - S1)(S2_hat - S2))``, the
teachers' own ``s_12 = (1/d) Tr(C1 C2)`` (zero up to ``1/sqrt(d)``); at the last
iteration's channel step, the noises ``delta_1, delta_2`` the algorithm hands its RIEs, the
measured correlation ``kappa_R`` of ``R_1 - S_1`` and ``R_2 - S_2`` and the residual
cross-covariance ``e_12_R`` of the two RIE outputs at that ``R`` (before damping); the part of
each noise along the other layer's centred teacher, ``a_12 = Tr((R_1 - S_1) C_2) / Tr(C_2^2)``
and ``a_21``, and ``e_12_clean``, the residual cross-covariance of the two RIE outputs once both
teachers' parts ``a_lk C_k`` are taken out of each ``R_l``; the run's ``iterations``,
``reason`` and ``seconds``.  About 11 minutes on one core at
``d = 200`` (all three alphas, four seeds); at ``d = 400`` a run took 2 to 4 (``alpha = 0.3``),
8 (``alpha = 0.5``) and 25 (``alpha = 1``) minutes on one core shared with other work, and at
``d = 600`` 23 to 25 (``alpha = 0.3``) on one core shared by three runs.
GAMP-RIE runs with its full Onsager matrix (:func:`aimlib.amp.steps.onsager_rows`).
``--append`` adds rows to an existing ``--out``; its ``# made by:`` line then needs the new
command added by hand (``tests/test_deep_cross.py`` checks the rows against it)::

    python scripts/deep_cross_overlap.py [--out book/data/deep_cross_overlap.csv]
        [--d 200 ...] [--alpha 0.3 0.5 1 ...] [--seeds 0 1 2 3 ...] [--append]
"""
from __future__ import annotations

import numpy as np

from aimlib import _validate as v
from aimlib.backend import to_host
from aimlib.amp import gamp_rie
from aimlib.channels import DeepAttention
from aimlib.model import matrix_overlap, sample_dataset
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_cross_overlap.py"
C, RHO, T, MAX_ITER = 0.5, (0.5, 0.5), 2, 600
COLUMNS = ["alpha", "d", "seed", "mmse_1", "mmse_2", "q_12", "e_12", "s_12", "delta_1", "delta_2", "kappa_R",
           "e_12_R", "a_12", "a_21", "e_12_clean", "iterations", "reason", "seconds"]


def run(alpha: float, d: int, seed: int) -> dict:
    """One GAMP-RIE run and the overlaps of its last iterate."""
    ch = DeepAttention(C)
    data = sample_dataset(alpha, d, T, RHO, ch, v.run_streams(seed).data, teachers="wishart")
    last = {}
    res = gamp_rie(data.X, data.y, ch, data.priors, S=data.S, max_iter=MAX_ITER, on_max_iter="return",
                   callback=lambda state: last.update(R=[to_host(r) for r in state.R],
                                                      delta=[np.atleast_1d(to_host(x)) for x in state.delta]))
    eye = np.eye(d)
    S, S_hat = to_host(data.S), res.S_hat
    centred = [S_hat[l] - np.sqrt(RHO[l]) * eye for l in range(2)]
    teach = [S[l] - np.sqrt(RHO[l]) * eye for l in range(2)]
    noise = [last["R"][l] - S[l] for l in range(2)]
    a = [[matrix_overlap(noise[l], teach[k]) / matrix_overlap(teach[k], teach[k]) for k in range(2)]
         for l in range(2)]
    clean = [last["R"][l] - sum(a[l][k] * teach[k] for k in range(2)) for l in range(2)]

    def residuals(R):
        return [p.denoise(r, tuple(x))[0] - s for p, r, x, s in zip(data.priors, R, last["delta"], S)]

    noise_norms = [matrix_overlap(z, z) for z in noise]
    return {"alpha": alpha, "d": d, "seed": seed, "mmse_1": res.mmse[0], "mmse_2": res.mmse[1],
            "q_12": matrix_overlap(*centred), "e_12": matrix_overlap(*(S_hat - S)),
            "s_12": matrix_overlap(*teach), "delta_1": float(last["delta"][0][0]),
            "delta_2": float(last["delta"][1][0]),
            "kappa_R": matrix_overlap(*noise) / np.sqrt(noise_norms[0] * noise_norms[1]),
            "e_12_R": matrix_overlap(*residuals(last["R"])), "a_12": a[0][1], "a_21": a[1][0],
            "e_12_clean": matrix_overlap(*residuals(clean)), "iterations": res.iterations, "reason": res.reason,
            "seconds": round(res.seconds, 1)}


def parser():
    """The command line: ``--out``, ``--d``, ``--alpha``, ``--seeds`` and ``--append``."""
    p = data_parser(__doc__, "deep_cross_overlap.csv")
    p.add_argument("--d", type=int, nargs="+", default=[200])
    p.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--append", action="store_true", help="add the rows after those already in --out")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = (run(a, d, s) for d in args.d for a in args.alpha for s in args.seeds)
    return write_rows(args.out, command(args), COLUMNS, rows, append=args.append)


def command(args) -> str:
    """The ``# made by:`` command: ``COMMAND`` and the options that differ from their defaults."""
    return command_line(COMMAND, parser(), args, ("d", "alpha", "seeds", "out", "append"))


if __name__ == "__main__":
    raise SystemExit(main())
