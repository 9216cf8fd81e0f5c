"""The joint Bayes denoiser of two Wishart layers over a grid of noises and correlations.

Writes ``book/data/deep_joint_grid.csv``, one row per instance: two Wishart teachers of width ratio
``rho = 0.5`` seen through ``R_l = S_l + sqrt(Delta_l) Z_l``, the noises of correlation ``kappa``; for each
pair ``delta_1 <= delta_2`` of ``--deltas`` (the layers share their prior, so swapping them is a symmetry),
each ``kappa`` of ``--kappas`` and each seed, :func:`aimlib.priors.joint.sample_joint` samples the joint
posterior of one instance at dimension ``d`` twice with the same seed, at ``kappa = 0`` and at ``kappa``
(``scripts/deep_joint_denoiser.py``'s :func:`chains`: the columns ``mmse_1, mmse_2, e_12, ess, seconds``
with suffix ``_0`` and ``_k``).  Also: each layer's error at ``d -> inf`` on its own, ``rie_mmse_l`` (the
prior's ``mmse(delta_l)``), and the first-order cross-covariance of one RIE per layer,
``first_e_12 = kappa rie_mmse_1 rie_mmse_2 / sqrt(delta_1 delta_2)``.  About ten minutes on one core with
the defaults (``d = 100``; a chain takes 0.5 to 2.5 seconds)::

    python scripts/deep_joint_grid.py [--out book/data/deep_joint_grid.csv]
        [--d 100] [--deltas 0.5 2 8] [--kappas -0.8 -0.4 0.4 0.8] [--seeds 0 1 2 3] [--n-steps 400]
"""
from __future__ import annotations

from aimlib.priors import Wishart
from aimlib.priors.correlated import cross_residual
from deep_joint_denoiser import CHAIN, RHO, chains
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_joint_grid.py"
COLUMNS = (["d", "seed", "delta_1", "delta_2", "kappa", "rie_mmse_1", "rie_mmse_2", "first_e_12"]
           + [f"{name}_{k}" for k in ("0", "k") for name in CHAIN])


def run(d: int, deltas, kappa: float, seed: int, n_steps: int) -> dict:
    """One instance at ``(delta_1, delta_2, kappa)``: its two chains and the large-``d`` separate errors."""
    mmse = [Wishart(RHO).mmse(x) for x in deltas]
    return {"d": d, "seed": seed, "delta_1": deltas[0], "delta_2": deltas[1], "kappa": kappa,
            "rie_mmse_1": mmse[0], "rie_mmse_2": mmse[1], "first_e_12": cross_residual(mmse, deltas, kappa),
            **chains(d, deltas, kappa, seed, n_steps)}


def parser():
    """The command line: ``--out``, ``--d``, ``--deltas``, ``--kappas``, ``--seeds`` and ``--n-steps``."""
    p = data_parser(__doc__, "deep_joint_grid.csv")
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--deltas", type=float, nargs="+", default=[0.5, 2.0, 8.0])
    p.add_argument("--kappas", type=float, nargs="+", default=[-0.8, -0.4, 0.4, 0.8])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--n-steps", type=int, default=400)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    pairs = [(a, b) for a in args.deltas for b in args.deltas if a <= b]
    rows = (run(args.d, pair, k, s, args.n_steps) for pair in pairs for k in args.kappas for s in args.seeds)
    return write_rows(args.out, command(args), COLUMNS, rows)


def command(args) -> str:
    """The ``# made by:`` command: ``COMMAND`` and the options that differ from their defaults."""
    return command_line(COMMAND, parser(), args, ("d", "deltas", "kappas", "seeds", "n_steps", "out"))


if __name__ == "__main__":
    raise SystemExit(main())
