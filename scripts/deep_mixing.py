"""The mixing that two-layer GAMP-RIE's correlated estimates make, predicted at the state-evolution level.

Writes ``book/data/deep_mixing.csv``: two hardmax layers (``T = 2``, ``c = 0.5``,
``rho_1 = rho_2 = 0.5``, Wishart teachers), at the separable fixed point of each ``alpha``
(:func:`aimlib.state_evolution.fixed_point`), the responses of
:func:`aimlib.channels.deep_moments.response_moments` under the law with a residual
cross-covariance ``cross``: its first order at the fixed point
(:func:`aimlib.state_evolution.cross_overlap`, ``source = first_order``) and the mean ``e_12``
of the GAMP-RIE runs of ``book/data/deep_cross_overlap.csv`` at that ``alpha``
(``source = runs``).  Columns: the mixing ``F^{-1} Gamma`` and the memory ``I + F^{-1} Lambda``
off the diagonal with their standard errors (ten batches), and the predicted part of the other
layer's centred teacher in each input, ``a_12 = mix_12 + mem_12 (q_2 - rho_2)/(Q0_2 - rho_2)``
(``a_21`` likewise), to set beside the runs' measured ``a_12``, ``a_21``.  About 3 minutes per
row on one core at the default ``n``::

    python scripts/deep_mixing.py [--out book/data/deep_mixing.csv] [--alpha 0.3 0.5 1 ...]
        [--n 1000000] [--seed 0]
"""
from __future__ import annotations

import numpy as np

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments, teacher_parts
from aimlib.priors import Wishart
from _rows import DATA, data_parser, read_rows, write_rows

COMMAND = "python scripts/deep_mixing.py"
C, RHO, T = 0.5, 0.5, 2
COLUMNS = ["alpha", "source", "cross", "mix_12", "mix_12_se", "mix_21", "mix_21_se", "mem_12", "mem_12_se",
           "mem_21", "mem_21_se", "a_12", "a_21", "n", "seed"]


def runs_cross(alpha: float) -> float:
    """The mean ``e_12`` of the GAMP-RIE runs at ``alpha`` (``book/data/deep_cross_overlap.csv``)."""
    rows = [r for r in read_rows(DATA / "deep_cross_overlap.csv") if float(r["alpha"]) == alpha]
    return float(np.mean([float(r["e_12"]) for r in rows]))


def rows(alpha: float, n: int, seed: int):
    ch, priors = DeepAttention(C), (Wishart(RHO), Wishart(RHO))
    fp = se.fixed_point(alpha, ch, T=T, rho=priors, tol=1e-10)
    Q0 = tuple(a + b for a, b in zip(fp.q, fp.mmse))
    crosses = {"first_order": se.cross_overlap(alpha, fp.q, fp.mmse, ch, priors).q_12,
               "runs": runs_cross(alpha)}
    for source, cross in crosses.items():
        m = response_moments(ch, fp.q, Q0, shared=RHO, cross=cross, n=n, seed=seed)
        parts = teacher_parts(m.mixing, m.memory, fp.q, Q0, RHO)
        yield {"alpha": alpha, "source": source, "cross": cross, "n": n, "seed": seed,
               "mix_12": m.mixing[0, 1], "mix_12_se": m.se["mixing"][0, 1],
               "mix_21": m.mixing[1, 0], "mix_21_se": m.se["mixing"][1, 0],
               "mem_12": m.memory[0, 1], "mem_12_se": m.se["memory"][0, 1],
               "mem_21": m.memory[1, 0], "mem_21_se": m.se["memory"][1, 0],
               "a_12": parts[0, 1], "a_21": parts[1, 0]}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_mixing.csv")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, (r for a in args.alpha for r in rows(a, args.n, args.seed)))


if __name__ == "__main__":
    raise SystemExit(main())
