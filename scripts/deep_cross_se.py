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
``iterations`` and ``seconds``.  About 2 minutes per row on one core at the default ``n``.

``--prior measured`` takes the prior side to all orders, with the diagonals of the mixing and the
memory (:func:`~aimlib.state_evolution.cross_fixed_point.measured_prior`: two RIEs at ``--prior-d``
on ``--prior-seeds`` instances; the channel side then computes the memory at every step, about 10
minutes per row), and writes ``book/data/deep_cross_se_measured.csv`` with the same columns and four
more: the prior side's ``e_12`` at the fixed point and its standard error over the instances
(``prior_e_12``, ``prior_e_12_se``), and the memory's diagonal ``mem_11, mem_22``.  ``--prior diagonal`` keeps
the first order and feeds the mixing's diagonal back (``mmse_l(Delta_l / A_ll^2)``,
:func:`~aimlib.state_evolution.cross_fixed_point.first_order_prior`), damped by ``DIAGONAL_DAMPING`` (undamped,
three layers at ``alpha = 1`` end on a cycle), and writes ``..._diagonal.csv``; 4 to 15 minutes per row::

``--layers 3`` takes three hardmax layers with centred teachers (``rho_l = 0.5``, those of
``book/data/deep_three_gamp.csv``) at ``alpha = 1, 1.5, 2`` and writes ``book/data/deep_three_cross_se.csv``:
the same columns for layers 1 and 2 (their known parts are zero), layer 3's ``mmse_3``, ``delta_3``,
``mix_33`` and ``sep_mmse_3``, and the memory's diagonal ``mem_11, mem_22``.  Three layers converge slowly
at ``alpha = 2``: the iteration is undamped, ends by the window rule and is checked over 20 further
iterations (``three_layers``); 3 to 8 minutes per row at ``n = 200000``::

    python scripts/deep_cross_se.py [--out FILE] [--layers 2|3] [--alpha 0.3 0.5 1 ...] [--seeds 0 1 2 3 ...]
        [--n 500000] [--prior first|diagonal|measured] [--prior-d 600] [--prior-seeds 8]
"""
from __future__ import annotations

import time

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments, teacher_parts
from aimlib.priors import Centred, Wishart
from aimlib.state_evolution.cross_fixed_point import (cross_fixed_point, first_order_prior, measured_prior,
                                                      measured_shifts, monte_carlo_side, three_layers)
from _rows import DATA, command_line, data_parser, write_rows

COMMAND = "python scripts/deep_cross_se.py"
C, RHO, T, TOL = 0.5, 0.5, 2, 2e-4
COLUMNS = ["alpha", "seed", "n", "mmse_1", "mmse_2", "e_12", "delta_1", "delta_2", "kappa", "mix_11", "mix_22",
           "mix_12", "mix_12_se", "mix_21", "mix_21_se", "mem_12", "mem_21", "a_12", "a_21", "sep_mmse_1",
           "sep_mmse_2", "sep_e_12", "iterations", "seconds"]
MEASURED = COLUMNS + ["prior_e_12", "prior_e_12_se", "mem_11", "mem_22"]
#: the damping of the map with the mixing's diagonal fed back: undamped, three layers at alpha = 1 end on a cycle
DIAGONAL_DAMPING = 0.5
#: the layers' set-ups: Wishart teachers for two, centred ones for three (the only ones three layers take)
SETUPS = {2: dict(priors=(Wishart(RHO),) * 2, shared=RHO, alpha=[0.3, 0.5, 1.0], file="deep_cross_se.csv",
                  extra=[], iteration=dict(tol=TOL)),
          3: dict(priors=(Centred(RHO),) * 3, shared=0.0, alpha=[1.0, 1.5, 2.0], file="deep_three_cross_se.csv",
                  extra=["mmse_3", "delta_3", "mix_33", "sep_mmse_3", "mem_11", "mem_22"],
                  iteration=three_layers(TOL))}


def row(alpha: float, seed: int, n: int, prior: str = "first", measured=(600, range(8)), layers: int = 2) -> dict:
    """One fixed point of the state evolution with the cross overlap, and the separable one it starts from;
    ``prior`` its prior side: ``'first'`` to first order, ``'diagonal'`` with the mixing's diagonal fed back,
    ``'measured'`` layers 1 and 2's to all orders, measured at ``measured = (d, seeds)``."""
    start = time.perf_counter()
    setup = SETUPS[layers]
    ch, priors, s = DeepAttention(C, layers=layers), setup["priors"], setup["shared"]
    fp = se.fixed_point(alpha, ch, T=T, rho=priors, tol=1e-12)
    first = se.cross_overlap(alpha, fp.q, fp.mmse, ch, priors).q_12
    side = monte_carlo_side(ch, (s,) * layers, n=n, seed=seed, memory=prior == "measured")
    prior_side = (first_order_prior(priors, diagonal=True) if prior == "diagonal"
                  else measured_prior(priors[:2], *measured) if prior == "measured" else None)
    iteration = dict(setup["iteration"], **({"damping": DIAGONAL_DAMPING} if prior == "diagonal" else {}))
    x = cross_fixed_point(alpha, ch, priors, (*fp.mmse, first), side=side, prior=prior_side, **iteration)
    Q0 = tuple(q + m for q, m in zip(x.q, x.mmse))
    mem = x.memory if x.memory is not None else response_moments(ch, x.q, Q0, shared=s, cross=x.e_12, n=n,
                                                                  seed=seed).memory
    parts = teacher_parts(x.mixing, mem, x.q, Q0, s)
    extra = {"mem_11": mem[0, 0], "mem_22": mem[1, 1]}          # written where the file has these columns
    if prior == "measured":
        shift, err = measured_shifts(priors[:2], x.deltas[:2], x.kappa, x.mixing[:2, :2], mem[:2, :2], *measured)
        extra.update(prior_e_12=shift[2], prior_e_12_se=err[2])
    if layers == 3:
        extra.update(mmse_3=x.mmse[2], delta_3=x.deltas[2], mix_33=x.mixing[2, 2], sep_mmse_3=fp.mmse[2])
    return {**extra, "alpha": alpha, "seed": seed, "n": n, "mmse_1": x.mmse[0], "mmse_2": x.mmse[1], "e_12": x.e_12,
            "delta_1": x.deltas[0], "delta_2": x.deltas[1], "kappa": x.kappa, "mix_11": x.mixing[0, 0],
            "mix_22": x.mixing[1, 1], "mix_12": x.mixing[0, 1], "mix_12_se": x.mixing_se[0, 1],
            "mix_21": x.mixing[1, 0], "mix_21_se": x.mixing_se[1, 0], "mem_12": mem[0, 1], "mem_21": mem[1, 0],
            "a_12": parts[0, 1], "a_21": parts[1, 0],
            "sep_mmse_1": fp.mmse[0], "sep_mmse_2": fp.mmse[1], "sep_e_12": first, "iterations": x.iterations,
            "seconds": round(time.perf_counter() - start, 1)}


def parser():
    """The command line: ``--out``, ``--layers``, ``--alpha``, ``--seeds``, ``--n``, ``--prior``, ``--prior-d`` and
    ``--prior-seeds``."""
    p = data_parser(__doc__, None)
    p.add_argument("--layers", type=int, choices=[2, 3], default=2)
    p.add_argument("--alpha", type=float, nargs="+", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--n", type=int, default=500_000)
    p.add_argument("--prior", choices=["first", "diagonal", "measured"], default="first")
    p.add_argument("--prior-d", type=int, default=600)
    p.add_argument("--prior-seeds", type=int, default=8)
    return p


def command(args) -> str:
    """The ``# made by:`` command: ``COMMAND``, ``--layers 3``, with ``--prior measured`` its size and instances
    (always named), then the options that differ from their defaults."""
    p = parser()
    head = command_line(COMMAND, p, args, ("layers",))
    if args.prior == "measured":
        head += f" --prior measured --prior-d {args.prior_d} --prior-seeds {args.prior_seeds}"
    elif args.prior == "diagonal":
        head += " --prior diagonal"
    return command_line(head, p, args, ("alpha", "seeds", "n", "out"))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    setup = SETUPS[args.layers]
    columns, name = COLUMNS + setup["extra"], setup["file"]
    if args.prior == "measured":
        columns = MEASURED + [c for c in setup["extra"] if c not in MEASURED]
    if args.prior != "first":
        name = name.replace(".csv", f"_{args.prior}.csv")
    measured = (args.prior_d, range(args.prior_seeds))
    rows = (row(a, s, args.n, args.prior, measured, args.layers)
            for s in args.seeds for a in args.alpha or setup["alpha"])
    return write_rows(args.out or str(DATA / name), command(args), columns, rows)


if __name__ == "__main__":
    raise SystemExit(main())
