"""The state evolution of two-layer GAMP-RIE with the cross overlap and the mixing, at its fixed points.

Writes ``book/data/deep_cross_se.csv``, one row per ``(alpha, seed)``: two hardmax layers
(``T = 2``, ``c = 0.5``, Wishart teachers ``rho_1 = rho_2 = 0.5``, those of
``book/data/deep_cross_overlap.csv``), :func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point`
started at the separable fixed point and its first-order cross overlap, the channel side by
``n`` Monte Carlo draws of the stream ``seed`` (the same at every iteration).  Columns: the
fixed point's ``mmse_1, mmse_2, e_12``, its noises ``delta_1, delta_2`` and ``kappa``, the mixing
``mix_lk = (F^{-1} Gamma)_lk`` with standard errors (ten batches), the memory ``mem_12, mem_21``
(``(I + F^{-1} Lambda)_lk``, same draws) and the parts of the other layer's centred teacher in each
input, ``a_12 = mix_12 + mem_12 (q_2 - rho_2)/(Q0_2 - rho_2)`` and ``a_21`` (what the runs measure);
the separable fixed point ``sep_mmse_1, sep_mmse_2`` and its first-order ``sep_e_12``;
``iterations`` and ``seconds``.  About 2 minutes per row on one core at the default ``n``::

    python scripts/deep_cross_se.py [--out book/data/deep_cross_se.csv] [--alpha 0.3 0.5 1 ...]
        [--seeds 0 1 2 3 ...] [--n 500000]
"""
from __future__ import annotations

import time

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments
from aimlib.priors import Wishart
from aimlib.state_evolution.cross_fixed_point import cross_fixed_point, monte_carlo_side
from _rows import data_parser, write_rows

COMMAND = "python scripts/deep_cross_se.py"
C, RHO, T, TOL = 0.5, 0.5, 2, 2e-4
COLUMNS = ["alpha", "seed", "n", "mmse_1", "mmse_2", "e_12", "delta_1", "delta_2", "kappa", "mix_11", "mix_22",
           "mix_12", "mix_12_se", "mix_21", "mix_21_se", "mem_12", "mem_21", "a_12", "a_21", "sep_mmse_1",
           "sep_mmse_2", "sep_e_12", "iterations", "seconds"]


def row(alpha: float, seed: int, n: int) -> dict:
    """One fixed point of the state evolution with the cross overlap, and the separable one it starts from."""
    start = time.perf_counter()
    ch, priors = DeepAttention(C), (Wishart(RHO), Wishart(RHO))
    fp = se.fixed_point(alpha, ch, T=T, rho=priors, tol=1e-12)
    first = se.cross_overlap(alpha, fp.q, fp.mmse, ch, priors).q_12
    side = monte_carlo_side(ch, (RHO, RHO), n=n, seed=seed)
    x = cross_fixed_point(alpha, ch, priors, (*fp.mmse, first), side=side, tol=TOL)
    Q0 = tuple(q + m for q, m in zip(x.q, x.mmse))
    mem = response_moments(ch, x.q, Q0, shared=RHO, cross=x.e_12, n=n, seed=seed).memory
    known = [(q - RHO) / (top - RHO) for q, top in zip(x.q, Q0)]
    return {"alpha": alpha, "seed": seed, "n": n, "mmse_1": x.mmse[0], "mmse_2": x.mmse[1], "e_12": x.e_12,
            "delta_1": x.deltas[0], "delta_2": x.deltas[1], "kappa": x.kappa, "mix_11": x.mixing[0, 0],
            "mix_22": x.mixing[1, 1], "mix_12": x.mixing[0, 1], "mix_12_se": x.mixing_se[0, 1],
            "mix_21": x.mixing[1, 0], "mix_21_se": x.mixing_se[1, 0], "mem_12": mem[0, 1], "mem_21": mem[1, 0],
            "a_12": x.mixing[0, 1] + mem[0, 1] * known[1], "a_21": x.mixing[1, 0] + mem[1, 0] * known[0],
            "sep_mmse_1": fp.mmse[0], "sep_mmse_2": fp.mmse[1], "sep_e_12": first, "iterations": x.iterations,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_cross_se.csv")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--n", type=int, default=500_000)
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, (row(a, s, args.n) for s in args.seeds for a in args.alpha))


if __name__ == "__main__":
    raise SystemExit(main())
