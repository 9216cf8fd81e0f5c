"""Three-layer GAMP-RIE: the teacher's scale in layer 1's input, from the channel step's own samples.

Writes ``book/data/deep_three_law.csv``: the runs of ``scripts/deep_three_trace.py`` at ``alpha = 1`` (same data
sets, start ``eps``, damping 0.5 on the estimates and the messages), followed for ``--iterations`` iterations.  At
each iteration ``t`` of ``--at``, one row per run with the teacher's scale ``P_ll`` in layer ``l``'s input (``R_l =
(1 + P_ll) C_l + ...``; ``C_l`` the centred teacher) by four routes, each keeping more of the run
(:func:`aimlib.channels.deep_moments.input_teacher_parts`, exact for whatever samples it is given):

* ``run_l``: the run's own step, its damped messages ``g``; equal to ``self_l``, the part of ``R_l - S_l`` along
  ``C_l`` read off the input itself (book chapter "Three layers", ``scripts/deep_three_inputs.py``), to rounding;
* ``fresh_l``: the same samples with the step's undamped messages ``g_out(y, omega, V)``;
* ``gauss_l``: ``--draws`` indices drawn jointly Gaussian with the second moments of the run's ``(h, omega)``
  (:func:`~aimlib.channels.deep_moments.index_moments`, :func:`~aimlib.channels.deep_moments.draw_gaussian`),
  the same ``V`` (a draw from ``default_rng([seed, t])``): the run with its indices' law kept to second order.

With them the channel step's second moments per unit ``Sigma`` (:func:`~aimlib.channels.deep_moments.index_moments`),
named by their pair of ``x = (h_1, h_2, h_3, omega_1, omega_2, omega_3)`` written ``h1 .. h3, w1 .. w3``:
``h1w1 = Cov(h_1, omega_1)``, the estimate's overlap as the channel sees it, ``w1w1 = Var(omega_1)`` its norm,
``w1w2 = Cov(omega_1, omega_2)``, and so on for the 21 pairs (:func:`moments` puts them back in a matrix); the
estimate's matrix overlap ``shat_l = (1/d) Tr(S_hat_l C_l)``, ``V_l`` given to ``g_out`` and the teacher's
``Q0_l = (1/d) Tr(C_l^2)``.  About 4, 8 and 20
minutes per run at ``d = 200``, ``300``, ``400`` on one core (each seed may run as its own process)::

    python scripts/deep_three_law.py [--out book/data/deep_three_law.csv] [--d 200 300 400]
        [--seeds 0 1 2] [--eps 0.1] [--iterations 40] [--at 10 20 30 40] [--draws 1000000]
"""
from __future__ import annotations

import sys

import numpy as np

from aimlib.backend import to_host
from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import draw_gaussian, index_moments, input_teacher_parts
from aimlib.model import attention_indices, matrix_overlap
from deep_three_gamp import problem
from deep_three_inputs import follow, made_by, runs_parser, write_runs

COMMAND = "python scripts/deep_three_law.py"
ALPHA = 1.0
ROUTES = ("self", "run", "fresh", "gauss")
#: this script's own options beside the runs' (``--at``, ``--draws``): handed to :func:`run`, named in the made-by line
OPTIONS = ("at", "draws")
#: the entries of x = (h_1, h_2, h_3, omega_1, omega_2, omega_3), in the order of ``index_moments``
ENTRIES = ("h1", "h2", "h3", "w1", "w2", "w3")
#: the upper triangle of their second moments, one column per pair
PAIRS = tuple((i, j) for i in range(6) for j in range(i, 6))
MOMENTS = tuple(ENTRIES[i] + ENTRIES[j] for i, j in PAIRS)
COLUMNS = (["alpha", "d", "seed", "t"] + [f"{r}_{k}" for r in ROUTES for k in (1, 2)]
           + [f"{x}_{k}" for x in ("shat", "V", "Q0") for k in (1, 2, 3)] + list(MOMENTS))


def moments(row) -> np.ndarray:
    """The ``6 x 6`` second moments of a row (a dict of this script's columns, numbers or their text)."""
    cov = np.zeros((6, 6))
    for (i, j), name in zip(PAIRS, MOMENTS):
        cov[i, j] = cov[j, i] = float(row[name])
    return cov


class Recording(DeepAttention):
    """The layered channel, keeping the estimates ``omega``, variances and outputs of each ``g_out`` call since
    :meth:`clear` (a channel step's chunks, in the samples' order)."""

    def clear(self):
        self.seen = []

    def g_out(self, y, omega, V):
        g = super().g_out(y, omega, V)
        self.seen.append((to_host(omega), V, to_host(g)))
        return g

    def step(self, n: int):
        """``(omega, V, g)`` of the last ``n`` samples seen: one channel step's."""
        omega, g = (np.concatenate([s[k] for s in self.seen])[-n:] for k in (0, 2))
        return omega, self.seen[-1][1], g


def law_row(ch, h, step, O, Q0, draws: int, rng) -> dict:
    """The routes ``fresh``, ``gauss`` and the second moments of one channel step (module docstring); ``O`` the
    overlaps ``(1/d) Tr(S_hat_l C_k)`` of the estimates that step used."""
    omega, V, g = step
    cov = index_moments(h, omega)
    om, hh = draw_gaussian(cov, draws, rng)
    parts = {"fresh": input_teacher_parts(g, h, O, Q0),
             "gauss": input_teacher_parts(ch.g_out(ch(hh, seed=rng), om, V), hh, O, Q0)}
    return ({f"{r}_{k + 1}": p[k, k] for r, p in parts.items() for k in (0, 1)}
            | {f"shat_{k + 1}": O[k, k] for k in range(3)} | {f"V_{k + 1}": float(V[k]) for k in range(3)}
            | {f"Q0_{k + 1}": Q0[k] for k in range(3)} | {name: cov[i, j] for (i, j), name in zip(PAIRS, MOMENTS)})


def run(d: int, seed: int, eps: float, iterations: int, at=(10, 20, 30, 40), draws: int = 1_000_000) -> list[dict]:
    """The rows of one run at ``alpha = 1``, at the iterations ``at``."""
    ch, data, S, centred, init, init_m = problem(ALPHA, d, seed, eps)
    rec = Recording(ch.c, layers=3)
    h = to_host(attention_indices(data.X, np.stack(centred)))
    Q0 = [matrix_overlap(c, c) for c in centred]
    rows, before = [], {"S_hat": [to_host(x) for x in init]}
    rec.clear()

    def record(state):
        if state.t in at:
            scale = [matrix_overlap(to_host(state.R[k]) - S[k], centred[k]) / Q0[k] for k in (0, 1)]
            O = np.array([[matrix_overlap(s, c) for c in centred] for s in before["S_hat"]])
            own = input_teacher_parts(to_host(state.g), h, O, Q0)
            rows.append({"alpha": ALPHA, "d": d, "seed": seed, "t": state.t,
                         **{f"self_{k + 1}": scale[k] for k in (0, 1)}, **{f"run_{k + 1}": own[k, k] for k in (0, 1)},
                         **law_row(rec, h, rec.step(len(h)), O, Q0, draws, np.random.default_rng([seed, state.t]))})
        before["S_hat"] = [to_host(x) for x in state.S_hat]
        rec.clear()

    follow(rec, data, S, init, init_m, iterations, record)
    return rows


def parser():
    """The command line (:func:`deep_three_inputs.runs_parser`, with ``--d 200 300 400``), ``--at`` and ``--draws``."""
    p = runs_parser(__doc__, "deep_three_law.csv")
    p.set_defaults(d=[200, 300, 400])
    p.add_argument("--at", type=int, nargs="+", default=[10, 20, 30, 40])
    p.add_argument("--draws", type=int, default=1_000_000)
    return p


def command(args) -> str:
    """The ``# made by:`` command: the options that differ from their defaults."""
    return made_by(COMMAND, parser, args, OPTIONS)


def main(argv=None) -> int:
    return write_runs(sys.modules[__name__], argv, options=OPTIONS)


if __name__ == "__main__":
    sys.exit(main())
