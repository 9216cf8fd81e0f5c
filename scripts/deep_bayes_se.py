"""The coupled Bayes-optimal state evolution of two Wishart hardmax layers, with a sampled joint denoiser.

Writes ``book/data/deep_bayes_se.csv``, one row per ``(alpha, repeat)``: two hardmax layers
(``T = 2``, ``c = 0.5``, ``rho_1 = rho_2 = 0.5``, Wishart teachers).  Each repeat draws its own
``n_instances`` instances (seeds ``repeat * n_instances, ...``) for the prior side
(:func:`aimlib.state_evolution.bayes_pair.sampled_prior_side`, the joint posterior by Hamiltonian
Monte Carlo at dimension ``d``) and iterates, from the separable fixed point with ``e_12 = 0``,

* the coupled Bayes state evolution (:func:`~aimlib.state_evolution.bayes_pair.bayes_pair_fixed_point`:
  channel side with the cross overlap to all orders, joint denoiser), columns ``bayes_*``;
* the same iteration with the cross overlap left out on both sides (``separable=True``: channel side
  at ``q_12 = 0``, each layer denoised alone on the same instances), columns ``sepd_*``: GAMP-RIE's
  separable state evolution with the same sampled prior side, whose difference from the ``bayes_*``
  columns cancels the prior side's finite-``d`` bias.

Also written: the separable state evolution at ``d = inf`` (``sep_mmse_1, sep_mmse_2``,
:func:`aimlib.state_evolution.fixed_point`) and the oracle's (``oracle_mmse_1, oracle_mmse_2``,
:func:`aimlib.state_evolution.oracle_fixed_point`).  ``bayes_se_1, ...`` are the prior side's standard
errors over the instances at the last step, ``spread`` how far the further iterates moved, ``seconds``
the time of both iterations.  About an hour and a quarter on one core with the defaults::

    python scripts/deep_bayes_se.py [--out book/data/deep_bayes_se.csv] [--alpha 0.3 0.5 1 ...]
        [--repeats 4] [--n-instances 8] [--d 100] [--tol 0.004]
"""
from __future__ import annotations

import time

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.priors import Wishart
from aimlib.state_evolution.bayes_pair import bayes_pair_fixed_point, sampled_prior_side
from _rows import data_parser, write_rows

COMMAND = "python scripts/deep_bayes_se.py"
C, RHO, T = 0.5, 0.5, 2
COLUMNS = ["alpha", "d", "repeat", "n_instances", "sep_mmse_1", "sep_mmse_2", "oracle_mmse_1", "oracle_mmse_2",
           "bayes_mmse_1", "bayes_mmse_2", "bayes_e_12", "bayes_se_1", "bayes_se_2", "bayes_se_12", "bayes_kappa",
           "bayes_delta_1", "bayes_delta_2", "bayes_iterations", "bayes_spread",
           "sepd_mmse_1", "sepd_mmse_2", "sepd_iterations", "sepd_spread", "seconds"]


def run(alpha: float, d: int, repeat: int, n_instances: int, tol: float, reference) -> dict:
    """Both iterations at ``alpha`` on the instances of ``repeat``."""
    ch, priors = DeepAttention(C), (Wishart(RHO), Wishart(RHO))
    sep, oracle = reference
    side = sampled_prior_side(d, RHO, range(repeat * n_instances, (repeat + 1) * n_instances))
    began = time.perf_counter()
    b = bayes_pair_fixed_point(alpha, ch, priors, (*sep, 0.0), side, tol=tol)
    s = bayes_pair_fixed_point(alpha, ch, priors, (*sep, 0.0), side, tol=tol, separable=True)
    return {"alpha": alpha, "d": d, "repeat": repeat, "n_instances": n_instances, "sep_mmse_1": sep[0],
            "sep_mmse_2": sep[1], "oracle_mmse_1": oracle[0], "oracle_mmse_2": oracle[1],
            "bayes_mmse_1": b.mmse[0], "bayes_mmse_2": b.mmse[1], "bayes_e_12": b.e_12,
            "bayes_se_1": b.stderr[0], "bayes_se_2": b.stderr[1], "bayes_se_12": b.stderr[2],
            "bayes_kappa": b.kappa, "bayes_delta_1": b.deltas[0], "bayes_delta_2": b.deltas[1],
            "bayes_iterations": b.iterations, "bayes_spread": b.spread, "sepd_mmse_1": s.mmse[0],
            "sepd_mmse_2": s.mmse[1], "sepd_iterations": s.iterations, "sepd_spread": s.spread,
            "seconds": round(time.perf_counter() - began, 1)}


def reference(alpha: float) -> tuple:
    """``(separable errors, oracle errors)`` at ``alpha`` (``d = inf``)."""
    ch, priors = DeepAttention(C), (Wishart(RHO), Wishart(RHO))
    fp = se.fixed_point(alpha, ch, T=T, rho=priors, tol=1e-10)
    oracle = tuple(se.oracle_fixed_point(alpha, ch, layer, T=T, rho=(RHO, RHO), tol=1e-8).mmse for layer in (1, 2))
    return tuple(fp.mmse), oracle


def main(argv=None) -> int:
    parser = data_parser(__doc__, "deep_bayes_se.csv")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--n-instances", type=int, default=8)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--tol", type=float, default=0.004)
    args = parser.parse_args(argv)
    refs = {a: reference(a) for a in args.alpha}
    rows = (run(a, args.d, r, args.n_instances, args.tol, refs[a]) for r in range(args.repeats) for a in args.alpha)
    return write_rows(args.out, COMMAND, COLUMNS, rows)


if __name__ == "__main__":
    raise SystemExit(main())
