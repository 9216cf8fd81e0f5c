"""Three-layer GAMP-RIE iteration by iteration: the errors it passes through, not only where it stops.

Writes ``book/data/deep_three_trace.csv``, one row per iteration of each run: the runs of
``scripts/deep_three_gamp.py`` (three hardmax layers, ``T = 2``, ``c = 0.5``, centred teachers of
``rho = 0.5``, the data set of ``run_amp(..., seed=s)``, each layer started at its prior mean plus
``eps`` times its centred teacher), :func:`aimlib.amp.gamp_rie` with its defaults, its full Onsager matrix
and ``max_iter = 400``.  Columns: ``alpha, d, seed, t``; after iteration ``t``, each layer's measured error
``error_1..3 = (1/d) ||S_hat_l - S_l||_F^2`` of the damped estimate, the algorithm's own prediction of it
``m_1..3``, and the residual cross-covariance ``e_12 = (1/d) Tr((S_hat_1 - S_1)(S_hat_2 - S_2))``; the
channel step's effective observations ``R_l``, seen through each layer's noise ratio
``noise_l = ||R_l - S_l||_F^2 / (d Delta_l)`` (1 where ``R_l = S_l + sqrt(Delta_l) Z_l``, the state
evolution's law) and through ``kappa_R, a_12, a_21`` (:func:`deep_three_gamp.noise_overlaps`); the run's
``reason`` (``'refused'`` when the final check refused the last state) on each of its rows.
``--damping`` is :func:`~aimlib.amp.gamp_rie`'s (default 0.5, its own default); ``--iterations N`` runs
exactly ``N`` iterations, past the point where the stopping rule would end the run (``gamp_rie``'s
``stop='prediction'`` at ``tol = 1e-12``, which a moving run does not meet).  The same runs as
``deep_three_gamp.py`` at the same ``(alpha, d, seed, eps)``: its rows are the last iterate of these
(at the default damping).  ``--own-onsager T`` hands the loop, from the prior step of iteration ``T`` on, each RIE's
own Onsager coefficient at its input (:meth:`~aimlib.priors.Wishart.onsager`, :class:`OwnOnsager`) instead of its
limit on the state evolution's law, ``mmse(Delta)``; the predictions ``m`` stay ``mmse(Delta)``.
``--host-threads N`` evaluates the channel's output function, which runs on the host, in ``N`` slices of the
samples on as many threads (:func:`~aimlib.channels.threaded.threaded_channel`: the same rows to the last bit,
only faster; for a GPU, where that function sets the pace, ``benchmarks/gpu.sh`` with ``DRIFT_D``).  On one core
shared with other work, a run at ``alpha = 1`` took about 30 seconds at ``d = 100``, 6 minutes at ``d = 200`` and 12
at ``d = 300``; at ``alpha = 1.5`` runs go on for up to 400 iterations, about 10 minutes at ``d = 150``::

    python scripts/deep_three_trace.py [--out book/data/deep_three_trace.csv]
        [--d 100 200 ...] [--alpha 1 ...] [--seeds 0 1 2 ...] [--eps 0.1] [--damping 0.5]
        [--iterations N] [--own-onsager T] [--host-threads N]
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from aimlib import _validate as v
from aimlib.amp import gamp_rie
from aimlib.backend import to_host
from aimlib.channels.threaded import threaded_channel
from aimlib.errors import ConvergenceError
from aimlib.model import matrix_overlap
from aimlib.priors import Centred
from deep_three_gamp import MAX_ITER, noise_overlaps, problem
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_three_trace.py"
COLUMNS = ["alpha", "d", "seed", "t", "error_1", "error_2", "error_3", "m_1", "m_2", "m_3", "e_12",
           "noise_1", "noise_2", "noise_3", "kappa_R", "a_12", "a_21", "reason"]


class OwnOnsager(Centred):
    """The centred Wishart prior whose prior step hands GAMP-RIE the RIE's own Onsager coefficient at its input
    (:meth:`~aimlib.priors.Wishart.onsager`) from iteration ``start`` on; ``t``, the iteration of the next prior
    step, is set by the run's callback."""

    def __init__(self, rho: float, start: int):
        super().__init__(rho)
        self.start, self.t = start, 1

    def denoise(self, R, deltas, noise=None):
        S_hat, V, V_ons = super().denoise(R, deltas)
        return S_hat, V, ((self.onsager(R, deltas[0]),) if self.t >= self.start else V_ons)


def own_priors(priors, start: int | None) -> list:
    """``priors`` as :class:`OwnOnsager` from iteration ``start`` on; the priors themselves when ``start`` is None."""
    return list(priors) if start is None else [OwnOnsager(p.rho, start) for p in priors]


def next_iteration(priors, t: int) -> None:
    """Tell the :class:`OwnOnsager` among ``priors`` that their next prior step is iteration ``t``."""
    for p in priors:
        if isinstance(p, OwnOnsager):
            p.t = t


def run(alpha: float, d: int, seed: int, eps: float, damping: float = 0.5, iterations: int | None = None,
        own_onsager: int | None = None, host_threads: int = 1) -> list[dict]:
    """The rows of one run: its errors, predictions, ``e_12`` and its effective noises after every iteration;
    with ``iterations``, exactly that many (no stopping rule); with ``own_onsager``, the RIEs' own Onsager
    coefficients from that iteration on (:class:`OwnOnsager`); the channel's ``g_out`` on ``host_threads``
    threads (the same rows)."""
    host_threads = v.integer("host_threads", host_threads, minimum=1)
    rule = {} if iterations is None else dict(stop="prediction", tol=1e-12, max_iter=iterations)
    ch, data, S, centred, init, init_m = problem(alpha, d, seed, eps)
    priors, rows = own_priors(data.priors, own_onsager), []

    def record(state):
        next_iteration(priors, state.t + 1)
        E = [to_host(x) - s for x, s in zip(state.S_hat, S)]
        R = [to_host(x) for x in state.R]
        rows.append({"alpha": alpha, "d": d, "seed": seed, "t": state.t,
                     **{f"error_{k + 1}": matrix_overlap(E[k], E[k]) for k in range(3)},
                     **{f"m_{k + 1}": float(np.sum(x)) for k, x in enumerate(state.V)},
                     "e_12": matrix_overlap(E[0], E[1]),
                     **{f"noise_{k + 1}": x for k, x in enumerate(state.noise_ratio)},
                     **noise_overlaps(R, S, centred)})

    try:
        with ThreadPoolExecutor(host_threads) as pool:
            reason = gamp_rie(data.X, data.y, threaded_channel(ch, pool, host_threads), priors, S=S, init=init,
                              init_m=init_m, on_max_iter="return", callback=record, damping=damping,
                              **({"max_iter": MAX_ITER} | rule)).reason
    except ConvergenceError:
        reason = "refused"
    return [r | {"reason": reason} for r in rows]


def parser():
    """The command line: ``--out``, ``--d``, ``--alpha``, ``--seeds``, ``--eps``, ``--damping``, ``--iterations``,
    ``--own-onsager`` and ``--host-threads`` (left out of the made-by line: it changes no row)."""
    p = data_parser(__doc__, "deep_three_trace.csv")
    p.add_argument("--d", type=int, nargs="+", default=[100, 200])
    p.add_argument("--alpha", type=float, nargs="+", default=[1.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--damping", type=float, default=0.5)
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--own-onsager", type=int, default=None)
    p.add_argument("--host-threads", type=int, default=1)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = (r for d in args.d for a in args.alpha for s in args.seeds
            for r in run(a, d, s, args.eps, args.damping, args.iterations, args.own_onsager, args.host_threads))
    return write_rows(args.out, command(args), COLUMNS, rows)


def command(args) -> str:
    """The ``# made by:`` command: ``COMMAND`` and the options that differ from their defaults."""
    return command_line(COMMAND, parser(), args, ("d", "alpha", "seeds", "eps", "damping", "iterations", "own_onsager",
                                                      "out"))


if __name__ == "__main__":
    raise SystemExit(main())
