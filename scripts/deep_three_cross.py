"""Three hardmax layers at small width: what the cross overlap of layers 1 and 2 does to the channel.

Writes ``book/data/deep_three_cross.csv``: three hardmax layers (``T = 2``, ``c = 0.5``), centred
teachers of width ratio ``rho`` each, at ``alpha = rho alpha_bar``.  For each ``rho`` the separable
state evolution's jump ``jump`` (the least ``alpha_bar`` at which ``mmse_2 < 1/2``, from the
uninformative start, bisected to ``1e-3``), and at two points, ``alpha_bar = 5`` (layers 1 and 2
barely informed, layer 3 learned) and ``jump - 0.1`` (just below the jump): the separable fixed
point ``mmse_1..3``, the noises' correlation ``kappa``, the first-order cross overlap ``q_12``
(:func:`aimlib.state_evolution.cross_overlap`), ``q_12/rho`` and its ``rho -> 0`` limit ``slope``
(:func:`aimlib.state_evolution.limit_cross_overlap`), the cross overlap in units of the errors
``cross = q_12 / sqrt(mmse_1 mmse_2)``, and the relative change of the separable moments
``F_l^sep = 1/(F^{-1})_ll`` when the law of the indices carries ``q_12``
(:meth:`aimlib.channels.DeepAttention.output_moments` with ``cross = q_12`` against ``cross = 0``,
the same draws): ``dF_l`` with its standard error ``dF_l_se`` over ``batches`` batches of ``n``
draws.  About six minutes on one core::

    python scripts/deep_three_cross.py [--out book/data/deep_three_cross.csv]
"""
from __future__ import annotations

import numpy as np

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.priors import Centred
from _rows import data_parser, write_rows

COMMAND = "python scripts/deep_three_cross.py"
C, T, RHOS, BELOW, N, BATCHES = 0.5, 2, (0.05, 0.02, 0.01, 0.005), 0.1, 40_000, 10
COLUMNS = ["rho", "alpha_bar", "jump", "mmse_1", "mmse_2", "mmse_3", "kappa", "q_12", "q_12_over_rho", "slope",
           "cross", "dF_1", "dF_1_se", "dF_2", "dF_2_se", "dF_3", "dF_3_se"]


def separable(F) -> np.ndarray:
    """``1/(F^{-1})_ll`` of a moment matrix with ``F_13 = F_23 = 0``."""
    return np.array([F[0, 0] - F[0, 1] ** 2 / F[1, 1], F[1, 1] - F[0, 1] ** 2 / F[0, 0], F[2, 2]])


def jump(ch, rho: float, lo: float = 5.0, hi: float = 8.6, tol: float = 1e-3) -> float:
    """The least ``alpha_bar`` in ``[lo, hi]`` at which the separable fixed point from the uninformative start has
    ``mmse_2 < 1/2``, to ``tol``."""
    priors = (Centred(rho),) * 3
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        fp = se.fixed_point(rho * mid, ch, T=T, rho=priors, tol=1e-11, max_iter=100_000)
        lo, hi = (mid, hi) if fp.mmse[1] > 0.5 else (lo, mid)
    return hi


def point(ch, rho: float, alpha_bar: float, at_jump: float) -> dict:
    """One row: the separable fixed point, its first-order ``q_12`` and the moments' change with it."""
    priors = (Centred(rho),) * 3
    fp = se.fixed_point(rho * alpha_bar, ch, T=T, rho=priors, tol=1e-11, max_iter=100_000)
    x = se.cross_overlap(rho * alpha_bar, fp.q, fp.mmse, ch, priors)
    Q0 = tuple(p.second_moment() for p in priors)
    shift = []
    for b in range(BATCHES):        # the same draws with and without the cross term
        plain = separable(ch.output_moments(fp.q, Q0, cross=0.0, n=N, seed=b)[0])
        shift.append(separable(ch.output_moments(fp.q, Q0, cross=x.q_12, n=N, seed=b)[0]) / plain - 1)
    shift = np.array(shift)
    mean, err = shift.mean(axis=0), shift.std(axis=0, ddof=1) / np.sqrt(BATCHES)
    return {"rho": rho, "alpha_bar": round(alpha_bar, 4), "jump": at_jump,
            **{f"mmse_{k + 1}": fp.mmse[k] for k in range(3)}, "kappa": x.kappa, "q_12": x.q_12,
            "q_12_over_rho": x.q_12 / rho, "slope": se.limit_cross_overlap(alpha_bar, C).slope,
            "cross": x.q_12 / np.sqrt(fp.mmse[0] * fp.mmse[1]),
            **{f"dF_{k + 1}": mean[k] for k in range(3)}, **{f"dF_{k + 1}_se": err[k] for k in range(3)}}


def rows():
    ch = DeepAttention(C, layers=3)
    for rho in RHOS:
        at_jump = jump(ch, rho)
        for alpha_bar in (5.0, at_jump - BELOW):
            yield point(ch, rho, alpha_bar, at_jump)


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_three_cross.csv")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows())


if __name__ == "__main__":
    raise SystemExit(main())
