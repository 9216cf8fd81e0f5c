r"""The columns ``se`` adds where the layers' output has cross terms (:mod:`aimlib.cli`).

There (two deep-hardmax layers of Wishart teachers, three layers of centred ones) ``mmse_l`` and
``q_l`` are GAMP-RIE's separable state evolution (:func:`aimlib.state_evolution.fixed_point`, its
cross overlap left out).  Beside them ``se`` prints, for two layers, the oracle's errors ``oracle_l``
(given the other layer's teacher: a lower bound, :func:`aimlib.state_evolution.oracle_fixed_point`)
and the cross overlap ``q_12`` of the centred estimates of layers 1 and 2, chosen by ``--cross``:

* ``first-order`` (the default for three layers): ``q_12``, the first order in the noises' correlation at
  the separable fixed point (:func:`aimlib.state_evolution.cross_overlap`; deterministic, instant);
* ``iterated`` (the default for two layers): ``q_12`` and the fixed point of the state evolution that
  carries the cross overlap and the mixing, ``mmse_1_cross, mmse_2_cross, q_12_cross``
  (three layers: ``mmse_1_cross, mmse_2_cross, mmse_3_cross, q_12_cross``, iterated as
  :func:`~aimlib.state_evolution.cross_fixed_point.three_layers` says, minutes per ``alpha``)
  (:func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point`, started at the separable fixed
  point and ``q_12``), its channel side by ``--draws`` Monte Carlo draws of the stream ``--seed``, the
  same at every iteration.  Measured on one idle core (``c = 0.5``, ``rho_1 = rho_2 = 0.5``, the default
  ``10^5`` draws): 4 to 20 s per ``alpha`` from 0.1 to 3, more at larger ``alpha``; the spread (standard
  deviation) of the fixed point over four seeds at ``alpha = 0.3, 0.5, 1`` is about 0.001 to 0.0025 in
  the errors and 0.002, 0.0011, 0.0006 in ``q_12_cross``, below the cross overlap's own size (0.006 to
  0.03) and its departure from the first order (10 to 20 %); the errors move from the separable ones
  by at most 0.0044 for ``alpha`` from 0.1 to 2 (mean of two to four sets of ``5 x 10^5`` draws; book,
  chapter "Deep attention", the bracket figure).  Fewer draws spread more than
  ``1/sqrt(draws)`` says (at ``2 x 10^4``, ``q_12_cross`` -0.023 and -0.036 for two seeds at
  ``alpha = 0.5``).  Several ``--seed`` give the error bar.

The options are refused, naming why, where they do not apply: every one of them where the index
matrices have no cross term (one layer, centred teachers of two layers: ``q_12 = 0`` exactly and
the printed state evolution is the Bayes one), ``--draws`` and ``--seed`` without ``--cross iterated``.
"""
from __future__ import annotations

import sys
import time

from . import state_evolution as se
from ._lazy import LazyModule
from .state_evolution.fixed_point import components, cross_terms

cfp = LazyModule("aimlib.state_evolution.cross_fixed_point")   # its Monte Carlo side loads with it

__all__ = ["CROSS_MODES", "DRAWS", "cross_arguments", "cross_mode", "cross_tol", "iteration", "deep_columns"]

CROSS_MODES = ("first-order", "iterated")
#: default Monte Carlo draws of the iterated state evolution's channel side (the cost and spread above)
DRAWS = 100_000


def cross_arguments(p, draws_type, seed_type) -> None:
    """The options of ``se`` for the cross overlap of two layers (``--cross``, ``--draws``, ``--seed``)."""
    p.add_argument("--cross", choices=list(CROSS_MODES), default=None,
                   help="the cross overlap of layers 1 and 2 where the layers' output has cross terms "
                        "(deep-hardmax: two layers of wishart teachers, three layers): first-order (default for three "
                        "layers) prints q_12, its first order at the separable fixed point (instant); iterated "
                        "(default for two layers) adds mmse_1_cross, mmse_2_cross, q_12_cross (three layers: "
                        "mmse_3_cross too), the fixed point of the state evolution that carries the cross "
                        "overlap and the mixing, by Monte Carlo (--draws, --seed): two layers 4 to 20 s per "
                        "alpha on one core (three layers minutes), spread "
                        "over seeds about 0.002 in the errors and 0.0006 to 0.002 in q_12_cross at the "
                        "default draws; at c = 0.5, rho = 0.5 the errors stay within 0.005 of mmse_l "
                        "(aimlib.cli_deep)")
    p.add_argument("--draws", type=draws_type, default=None,
                   help=f"Monte Carlo draws of --cross iterated, an integer in [1000, 2000000] (default "
                        f"{DRAWS}; the time grows with them, the spread falls)")
    p.add_argument("--seed", type=seed_type, default=None,
                   help="stream of those draws, the same at every iteration (default 0; several seeds give "
                        "the Monte Carlo error bar)")


def cross_mode(args, ch, priors) -> str | None:
    """What ``se`` prints of the cross overlap: ``None`` (no cross terms), ``'first-order'`` or
    ``'iterated'``; refuses, naming the option, ``--cross``, ``--draws`` or ``--seed`` where they do
    not apply (module docstring)."""
    given = [f"--{name}" for name in ("cross", "draws", "seed") if getattr(args, name) is not None]
    if not cross_terms(ch, priors):
        if given:
            why = ("one index matrix per sample" if ch.n_indices == 1 else
                   "centred teachers, whose layers' output has no cross term (q_12 = 0 exactly, and se prints "
                   "the Bayes state evolution)" if args.teachers == "centred" else
                   "index matrices whose output has no cross term")
            raise ValueError(f"{given[0]}: --channel {args.channel} with {why}; the cross overlap is printed for "
                             f"two deep-hardmax layers of wishart teachers, or three layers: give no "
                             f"{' or '.join(given)}")
        return None
    mode = args.cross or ("iterated" if ch.n_indices == 2 else "first-order")
    extra = [g for g in given if g != "--cross"]
    if mode == "first-order" and extra:
        which = ("--cross first-order prints" if args.cross or ch.n_indices == 2 else
                 f"{ch.n_indices} layers print, unless --cross iterated,")
        raise ValueError(f"{extra[0]}: an option of --cross iterated (its Monte Carlo draws); {which} q_12 to first "
                         f"order, deterministic: give no {' or '.join(extra)}")
    return mode


def cross_tol(draws: int) -> float:
    """The tolerance of the iterated fixed point of two layers at ``draws``: ``2e-4`` (that of the committed
    runs), or ``20/draws`` where the map's Monte Carlo graininess (steps of order ``1/draws``) is coarser."""
    return max(2e-4, 20.0 / draws)


def iteration(layers: int, draws: int) -> dict:
    """How ``--cross iterated`` iterates: ``tol`` of :func:`cross_tol` for two layers; for three,
    :func:`~aimlib.state_evolution.cross_fixed_point.three_layers` of it (the committed rows' setup)."""
    return dict(tol=cross_tol(draws)) if layers == 2 else cfp.three_layers(cross_tol(draws))


def _iterated(res, ch, priors, T: int, draws: int, seed: int) -> list:
    """``[mmse_1_cross, ..., mmse_L_cross, q_12_cross]`` per ``alpha`` of ``res``, a line per ``alpha`` on a
    terminal's standard error."""
    side = cfp.monte_carlo_side(ch, tuple(p.mean_square() for p in priors), n=draws, seed=seed)
    _, V0 = components(priors)
    tty, start, out = sys.stderr.isatty(), time.perf_counter(), []
    for i, (a, m, q) in enumerate(zip(res.alpha, res.mmse, res.q)):
        if a == 0:                                    # no data: each estimate its prior mean
            out.append([*map(float, V0), 0.0])
            continue
        first = se.cross_overlap(float(a), q, m, ch, priors, T).q_12
        try:
            x = cfp.cross_fixed_point(float(a), ch, priors, (*m, first), side=side,
                                      **iteration(ch.n_indices, draws))
        except ValueError as exc:     # a singular moment matrix: name the option that asked for it
            raise ValueError(f"--cross iterated at --alpha {a:g}: {exc} (--cross first-order gives q_12)") from None
        out.append([*x.mmse, x.e_12])
        if tty:
            print(f"\rcross state evolution: {i + 1}/{len(res.alpha)} alphas, {time.perf_counter() - start:.0f} s",
                  end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    return out


def deep_columns(args, ch, priors, res, mode) -> tuple[list, list]:
    """The columns after ``alpha, mmse_l, q_l`` and their rows: ``oracle_l`` (two layers), ``q_12`` and,
    ``mode == 'iterated'``, ``mmse_l_cross`` of every layer and ``q_12_cross``."""
    head, rows = [], [[] for _ in res.alpha]
    if ch.n_indices == 2:
        head += ["oracle_1", "oracle_2"]
        rows = [[se.oracle_fixed_point(float(a), ch, ell, T=args.T, rho=priors).mmse for ell in (1, 2)]
                for a in res.alpha]
    head += ["q_12"]
    rows = [row + [se.cross_overlap(float(a), q, m, ch, priors, args.T).q_12]
            for a, row, q, m in zip(res.alpha, rows, res.q, res.mmse)]
    if mode == "iterated":
        head += [f"mmse_{ell}_cross" for ell in range(1, ch.n_indices + 1)] + ["q_12_cross"]
        draws = DRAWS if args.draws is None else args.draws
        rows = [row + extra for row, extra in
                zip(rows, _iterated(res, ch, priors, args.T, draws, args.seed or 0))]
    return head, rows
