"""The joint Bayes denoiser of two Wishart layers at the noises of the separable fixed points.

Writes ``book/data/deep_joint_denoiser.csv``, one row per instance: two hardmax layers
(``T = 2``, ``c = 0.5``, ``rho_1 = rho_2 = 0.5``, Wishart teachers); at each ``alpha`` the
separable fixed point (:func:`aimlib.state_evolution.fixed_point`, ``tol = 1e-10``) gives
the noises ``Delta_1, Delta_2`` and their correlation ``kappa``
(:func:`aimlib.state_evolution.cross_overlap`), and
:func:`aimlib.priors.joint.sample_joint` samples the joint posterior of one instance at
dimension ``d`` twice with the same seed: at ``kappa = 0`` (each layer on its own: the
separate Bayes errors at this ``d``) and at the fixed point's ``kappa``.  Columns: the
point (``alpha, d, seed, kappa, delta_1, delta_2``), the separable state evolution's
errors ``se_mmse_1, se_mmse_2`` and first-order cross overlap ``se_q_12``, and for each
chain (suffix ``_0`` at ``kappa = 0``, ``_k`` at ``kappa``) the errors ``mmse_1, mmse_2``,
the cross-covariance ``e_12``, the smallest effective sample size ``ess`` of the three
series and the seconds.  About four minutes on one core with the defaults (``d = 100``); at
``d = 200`` a chain takes about 2.5 s (``book/data/deep_joint_denoiser_d200.csv``)::

    python scripts/deep_joint_denoiser.py [--out book/data/deep_joint_denoiser.csv]
        [--d 100 ...] [--alpha 0.3 0.5 1 ...] [--seeds 0 1 ... 7] [--n-steps 400]
"""
from __future__ import annotations

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.priors import Wishart
from aimlib.priors.joint import sample_joint
from _rows import data_parser, write_rows

COMMAND = "python scripts/deep_joint_denoiser.py"
C, RHO, T = 0.5, 0.5, 2
CHAIN = ["mmse_1", "mmse_2", "e_12", "ess", "seconds"]
COLUMNS = (["alpha", "d", "seed", "kappa", "delta_1", "delta_2", "se_mmse_1", "se_mmse_2", "se_q_12"]
           + [f"{name}_{k}" for k in ("0", "k") for name in CHAIN])


def fixed_point(alpha: float):
    """The separable fixed point at ``alpha`` and its :class:`~aimlib.state_evolution.CrossOverlap`."""
    ch, priors = DeepAttention(C), (Wishart(RHO), Wishart(RHO))
    fp = se.fixed_point(alpha, ch, T=T, rho=priors, tol=1e-10)
    return fp, se.cross_overlap(alpha, fp.q, fp.mmse, ch, priors)


def run(alpha: float, d: int, seed: int, n_steps: int, point) -> dict:
    """Two chains on one instance: at ``kappa = 0`` and at the fixed point's ``kappa``."""
    fp, x = point
    return {"alpha": alpha, "d": d, "seed": seed, "kappa": x.kappa, "delta_1": x.deltas[0],
            "delta_2": x.deltas[1], "se_mmse_1": fp.mmse[0], "se_mmse_2": fp.mmse[1], "se_q_12": x.q_12,
            **chains(d, x.deltas, x.kappa, seed, n_steps)}


def chains(d: int, deltas, kappa: float, seed: int, n_steps: int) -> dict:
    """The :data:`CHAIN` columns of two chains of :func:`~aimlib.priors.joint.sample_joint` on one instance
    (the same ``seed``): suffix ``_0`` at ``kappa = 0`` (each layer on its own), ``_k`` at ``kappa``."""
    row = {}
    for suffix, k in (("0", 0.0), ("k", kappa)):
        r = sample_joint(d, RHO, deltas, k, seed=seed, n_steps=n_steps)
        row.update({f"mmse_1_{suffix}": r.mmse[0], f"mmse_2_{suffix}": r.mmse[1], f"e_12_{suffix}": r.e_12,
                    f"ess_{suffix}": min(r.ess), f"seconds_{suffix}": round(r.seconds, 1)})
    return row


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_joint_denoiser.csv")
    parser.add_argument("--d", type=int, nargs="+", default=[100])
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--n-steps", type=int, default=400)
    args = parser.parse_args(argv)
    points = {a: fixed_point(a) for a in args.alpha}
    rows = (run(a, d, s, args.n_steps, points[a]) for d in args.d for a in args.alpha for s in args.seeds)
    command = " ".join([COMMAND, "--d", *map(str, args.d), "--alpha", *map(str, args.alpha), "--seeds",
                        *map(str, args.seeds), "--n-steps", str(args.n_steps)])
    return write_rows(args.out, command, COLUMNS, rows)


if __name__ == "__main__":
    raise SystemExit(main())
