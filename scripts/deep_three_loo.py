"""Three-layer GAMP-RIE along its run: the channel step's estimates against leave-one-out estimates with history.

Writes ``book/data/deep_three_loo.csv``: for the runs of ``scripts/deep_three_fisher.py`` (alpha = 1, same data sets,
start ``eps``, damping 0.5), at the channel steps ``t`` of ``--at`` and for ``--samples`` samples ``mu`` of each run
(drawn by ``numpy.random.default_rng([d, seed])``, the same at every ``t``), one row per ``(t, k, mu)``.  The channel
step's estimate ``omega^mu_l`` (:func:`~aimlib.amp.steps.omega_map`: the index ``h^mu(S_hat_l)`` less the Onsager term)
stands for the index of an estimate that never saw sample ``mu``.  The script leaves ``mu`` out of the ``k``
iterations before the step and runs them again (:func:`~aimlib.amp.leave_one_out.left_out_indices`), for each ``k``
of ``--steps``; ``k = 1`` is the last step's part alone, the part the Onsager term is built from, and larger ``k``
add what reached the estimate through the damping and through the memory ``(I + F_hat^{-1} Lambda) S_hat`` that
``R`` keeps off the Nishimori identity.  ``--own-onsager T`` runs the same with the RIEs' own Onsager coefficients
from iteration ``T`` on (``scripts/deep_three_trace.py``); the left-out runs, which start after it, use them too.
Per layer ``l``, sums over the entries ``a <= b`` (weights ``1 / Sigma_ab``) with ``h = h^mu(S_hat_l)``, ``w =
omega^mu_l`` and ``o = h^mu`` left out ``k`` iterations:

* ``err_l = sum (w - o)^2``: how far the channel step's estimate is from the left-out index;
* ``ons_l = sum (h - w)^2``: the Onsager term's size;
* ``loo_l = sum (h - o)^2``: the left-out correction's size;
* ``cross_l = sum (h - o)(h - w)``; ``sum cross / sum ons`` over the samples is the regression coefficient of
  the left-out correction on the Onsager term (1 where the term is the correction).

About half a minute per sample at ``d = 100`` with the defaults, on one core::

    python scripts/deep_three_loo.py [--out book/data/deep_three_loo.csv] [--d 100 ...] [--seeds 0 1 2 ...]
        [--eps 0.1] [--at 10 25 40] [--steps 1 2 4 8] [--samples 30] [--own-onsager T]
"""
from __future__ import annotations

import numpy as np

from aimlib.amp.leave_one_out import left_out_indices
from aimlib.backend import to_host
from aimlib.index_map import IndexMap
from deep_three_fisher import ALPHA, LAYERS, channel_inputs, indices, pair_entries, snapshot
from deep_three_gamp import problem
from deep_three_inputs import follow
from deep_three_trace import next_iteration, own_priors
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_three_loo.py"
PER_LAYER = ("err", "ons", "loo", "cross")
COLUMNS = ["alpha", "d", "seed", "t", "k", "mu"] + [f"{x}_{l}" for x in PER_LAYER for l in LAYERS]


def sample_sums(h, omega, left) -> dict:
    """The columns of one sample (module docstring) from its ``(L, T, T)`` arrays: the index ``h`` of the
    estimates, the channel step's ``omega`` and the left-out index ``left``."""
    (h, om, o), w = pair_entries(h, omega, left)
    sums = {"err": (om - o) ** 2, "ons": (h - om) ** 2, "loo": (h - o) ** 2, "cross": (h - o) * (h - om)}
    return {f"{x}_{l + 1}": float(np.sum(val[l] * w)) for x, val in sums.items() for l in range(h.shape[0])}


def run(d: int, seed: int, eps: float, at, steps, samples: int, own_onsager: int | None = None) -> list[dict]:
    """The rows of one run (module docstring); with ``own_onsager``, the run and its left-out runs hand the loop the
    RIEs' own Onsager coefficients from that iteration on (:func:`deep_three_trace.own_priors`)."""
    if own_onsager is not None and min(at) - max(steps) < own_onsager:
        raise ValueError(f"--own-onsager {own_onsager}: the left-out runs must start after it, at t - k >= "
                         f"{own_onsager} (got t - k = {min(at) - max(steps)})")
    ch, data, S, _, init, init_m = problem(ALPHA, d, seed, eps)
    priors, index, states = own_priors(data.priors, own_onsager), IndexMap(data.X), {}

    def keep(state):
        states[state.t] = snapshot(state)
        next_iteration(priors, state.t + 1)

    follow(ch, data, S, init, init_m, max(at) - 1, keep, priors)
    X, y = to_host(data.X), to_host(data.y)
    mus = np.random.default_rng([d, seed]).choice(len(y), samples, replace=False)
    rows = []
    for t in at:
        omega, _ = channel_inputs(index, states[t - 1])
        h = indices(index, states[t - 1].S_hat)
        for mu in mus:
            left = left_out_indices(X, y, ch, priors, int(mu), states, t, steps)
            rows += [{"alpha": ALPHA, "d": d, "seed": seed, "t": t, "k": k, "mu": int(mu),
                      **sample_sums(h[mu], omega[mu], left[k])} for k in steps]
    return rows


def parser():
    """The command line: ``--out``, ``--d``, ``--seeds``, ``--eps``, ``--at``, ``--steps``, ``--samples`` and
    ``--own-onsager``."""
    p = data_parser(__doc__, "deep_three_loo.csv")
    p.add_argument("--d", type=int, nargs="+", default=[100])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--at", type=int, nargs="+", default=[10, 25, 40])
    p.add_argument("--steps", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--own-onsager", type=int, default=None)
    return p


def command(args) -> str:
    """The made-by line of ``args``."""
    return command_line(COMMAND, parser(), args, ("d", "seeds", "eps", "at", "steps", "samples", "own_onsager", "out"))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = (r for d in args.d for s in args.seeds
            for r in run(d, s, args.eps, args.at, args.steps, args.samples, args.own_onsager))
    return write_rows(args.out, command(args), COLUMNS, rows)


if __name__ == "__main__":
    raise SystemExit(main())
