"""GAMP-RIE on three hardmax layers, started from a small informative perturbation.

Writes ``book/data/deep_three_gamp.csv``, one row per run: three hardmax layers (``T = 2``,
``c = 0.5``), centred teachers of width ratio ``rho = 0.5`` each (``S_l = W_l W_l^T/sqrt(rd) -
sqrt(rho) I``), the data set of ``run_amp(..., seed=s)`` at the same ``d``.  At the uninformative
start every sample's ``g_1`` and ``g_2`` are proportional and the output moment matrix is singular
(book, chapter "Deep attention: which layer is learned first"), so each layer starts at
``S0_l = E S_l + eps (S_l - E S_l)`` with its own error ``(1/d) ||S0_l - S_l||^2`` as the predicted
one (``gamp_rie``'s ``init`` and ``init_m``); :func:`aimlib.amp.gamp_rie` then runs with its
defaults, its full Onsager matrix and ``max_iter = 400``.

Columns: ``alpha, d, seed, eps``; each layer's measured error ``mmse_1..3`` and predicted one
``m_1..3``; the residual cross-covariances ``e_12, e_13, e_23 = (1/d) Tr((S_hat_l - S_l)(S_hat_k - S_k))``
and the teachers' own ``s_12 = (1/d) Tr(C_1 C_2)`` (zero up to ``1/sqrt(d)``, ``C_l`` the centred
teachers); at the last channel step the noises ``delta_1, delta_2`` and the measured correlation
``kappa_R`` of ``R_1 - S_1`` and ``R_2 - S_2`` and the part of each along the other layer's centred teacher,
``a_12 = Tr((R_1 - S_1) C_2) / Tr(C_2^2)`` and ``a_21``; the run's ``iterations``, ``reason`` (``'refused'``: the final
check refused the state, whose overlaps are still reported) and ``seconds``.
The separable state evolution and its first-order cross overlap at each ``alpha`` are computed
where the data are read (they take a second).  About 20 minutes on one core for the defaults; at ``alpha = 1`` a
run took 6 minutes at ``d = 200`` and 7 to 31 at ``d = 300`` on a core shared with other work (``seconds``)::

    python scripts/deep_three_gamp.py [--out book/data/deep_three_gamp.csv]
        [--d 60 100 ...] [--alpha 1 1.5 2 ...] [--seeds 0 1 2 ...] [--eps 0.1]
"""
from __future__ import annotations

import numpy as np

from aimlib import _validate as v
from aimlib.amp import gamp_rie
from aimlib.backend import to_host
from aimlib.channels import DeepAttention
from aimlib.errors import ConvergenceError
from aimlib.model import matrix_overlap, sample_dataset
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_three_gamp.py"
C, RHO, T, MAX_ITER = 0.5, 0.5, 2, 400
COLUMNS = ["alpha", "d", "seed", "eps", "mmse_1", "mmse_2", "mmse_3", "m_1", "m_2", "m_3", "e_12", "e_13", "e_23",
           "s_12", "delta_1", "delta_2", "kappa_R", "a_12", "a_21", "iterations", "reason", "seconds"]


def informative_start(S, priors, eps: float):
    """``(init, init_m)``: each layer's prior mean plus ``eps`` times its centred teacher, and the error of
    that start, ``(1 - eps)^2 (1/d) ||S_l - E S_l||^2``."""
    eps = v.in_range("eps", eps, 0.0, 1.0)
    d = S.shape[-1]
    mean = [p.mean(d) for p in priors]
    init = np.stack([m + eps * (s - m) for m, s in zip(mean, S)])
    return init, tuple(matrix_overlap(x - s, x - s) for x, s in zip(init, S))


def problem(alpha: float, d: int, seed: int, eps: float):
    """``(channel, data, S, centred, init, init_m)``: the run's channel, its data set, the teachers on the
    host, their centred parts ``C_l = S_l - E S_l`` and the informative start (:func:`informative_start`)."""
    ch = DeepAttention(C, layers=3)
    data = sample_dataset(alpha, d, T, (RHO,) * 3, ch, v.run_streams(seed).data, teachers="centred")
    S = to_host(data.S)
    centred = [s - p.mean(d) for s, p in zip(S, data.priors)]
    return (ch, data, S, centred, *informative_start(S, data.priors, eps))


def run(alpha: float, d: int, seed: int, eps: float) -> dict:
    """One GAMP-RIE run from the informative start and the overlaps of its last iterate.

    A run that ends in a state the final check refuses (:class:`~aimlib.errors.ConvergenceError`: the
    measured error more than ``0.1`` above the prior mean's, or far from the prediction) is kept with
    ``reason = 'refused'`` and the overlaps of its last iterate."""
    ch, data, S, centred, init, init_m = problem(alpha, d, seed, eps)
    last = {}

    def keep(state):
        last.update(R=[to_host(r) for r in state.R[:2]], delta=[float(np.atleast_1d(x)[0]) for x in state.delta],
                    S_hat=np.stack([to_host(x) for x in state.S_hat]), m=[float(sum(x)) for x in state.V],
                    t=state.t)

    try:
        res = gamp_rie(data.X, data.y, ch, data.priors, S=S, init=init, init_m=init_m, max_iter=MAX_ITER,
                       on_max_iter="return", callback=keep)
        S_hat, m, its, reason, seconds = res.S_hat, res.m, res.iterations, res.reason, round(res.seconds, 1)
    except ConvergenceError:
        S_hat, m, its, reason, seconds = last["S_hat"], last["m"], last["t"], "refused", float("nan")
    E = S_hat - S
    return {"alpha": alpha, "d": d, "seed": seed, "eps": eps,
            **{f"mmse_{k + 1}": matrix_overlap(E[k], E[k]) for k in range(3)}, **{f"m_{k + 1}": m[k] for k in range(3)},
            "e_12": matrix_overlap(E[0], E[1]), "e_13": matrix_overlap(E[0], E[2]), "e_23": matrix_overlap(E[1], E[2]),
            "s_12": matrix_overlap(*centred[:2]), "delta_1": last["delta"][0], "delta_2": last["delta"][1],
            **noise_overlaps(last["R"], S, centred), "iterations": its, "reason": reason, "seconds": seconds}


def noise_overlaps(R, S, centred) -> dict:
    """``kappa_R``, the correlation of layers 1 and 2's effective noises ``R_l - S_l``, and the part of each
    along the other layer's centred teacher, ``a_12 = Tr((R_1 - S_1) C_2) / Tr(C_2^2)`` and ``a_21``."""
    noise = [R[k] - S[k] for k in range(2)]
    norms = [matrix_overlap(z, z) for z in noise]
    a = [matrix_overlap(noise[k], centred[1 - k]) / matrix_overlap(centred[1 - k], centred[1 - k]) for k in range(2)]
    return {"kappa_R": float(matrix_overlap(*noise) / np.sqrt(norms[0] * norms[1])), "a_12": a[0], "a_21": a[1]}


def parser():
    """The command line: ``--out``, ``--d``, ``--alpha``, ``--seeds`` and ``--eps``."""
    p = data_parser(__doc__, "deep_three_gamp.csv")
    p.add_argument("--d", type=int, nargs="+", default=[60, 100])
    p.add_argument("--alpha", type=float, nargs="+", default=[1.0, 1.5, 2.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.1)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = (run(a, d, s, args.eps) for d in args.d for a in args.alpha for s in args.seeds)
    return write_rows(args.out, command(args), COLUMNS, rows)


def command(args) -> str:
    """The ``# made by:`` command: ``COMMAND`` and the options that differ from their defaults."""
    return command_line(COMMAND, parser(), args, ("d", "alpha", "seeds", "eps", "out"))


if __name__ == "__main__":
    raise SystemExit(main())
