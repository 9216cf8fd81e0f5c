"""Three-layer GAMP-RIE: which of the channel step's second moments carry layer 1's lost scale.

Writes ``book/data/deep_three_moments.csv`` from ``book/data/deep_three_law.csv`` (no run).  For each run and
iteration, the teacher's scale ``s_l`` in layer ``l``'s input read off Gaussian indices and estimates, as that
file's ``gauss_l`` (:func:`~aimlib.channels.deep_moments.input_teacher_parts`, the run's ``V_l`` handed to ``g_out``,
its ``shat_l`` and ``Q0_l``), with the second moments of ``x = (h, omega)`` taken

* ``run``: the channel step's own (``deep_three_law.moments``);
* ``law``: the law of the state evolution with the cross overlap at the run's state
  (:func:`~aimlib.channels.deep_moments.law_moments`, no known part): overlaps ``m_l = Q0_l - V_l``, the overlap the
  run's ``V_l`` stands for, and ``e_12`` the step's own ``Cov(omega_1, omega_2)``;
* the step's own with one part changed at a time, each layer ``l`` by its overlap ``c_l = Cov(h_l, omega_l)`` and
  norm ``q_l = Var(omega_l)``: ``excess``, the norm's excess over the overlap removed (``q_l`` to ``c_l``, the
  Nishimori identity at the step's own overlap); ``overlap``, the overlap moved to ``m_l`` with the excess kept
  (``c_l`` to ``m_l``, ``q_l`` to ``q_l + m_l - c_l``); ``indices``, the teachers' indices' own moments
  ``Cov(h_k, h_l)`` to ``Q0_l delta_kl``; ``between``, the moments between layers but ``e_12``, ``Cov(h_k, omega_l)``
  for ``k != l`` and ``Cov(omega_l, omega_3)``, to zero.  The four together make ``law``.

Every version of a row draws from ``default_rng([d, seed, t])`` afresh
(:func:`~aimlib.channels.deep_moments.draw_gaussian`, ``x = cov^{1/2} z``): the same ``z`` for all, so that their
differences carry much less Monte Carlo error than each value.  Columns ``<version>_l`` for layers 1 and 2.  About
half a minute per row (six versions) at the default ``--draws`` on one core::

    python scripts/deep_three_moments.py [--out book/data/deep_three_moments.csv]
        [--law book/data/deep_three_law.csv] [--draws 100000]
"""
from __future__ import annotations

import sys

import numpy as np

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import draw_gaussian, input_teacher_parts, law_moments
from deep_three_gamp import C
from deep_three_law import moments
from _rows import DATA, command_line, data_parser, read_rows, write_rows

COMMAND = "python scripts/deep_three_moments.py"
PARTS = ("excess", "overlap", "indices", "between")
VERSIONS = ("run", "law") + PARTS
COLUMNS = ["alpha", "d", "seed", "t"] + [f"{v}_{k}" for v in VERSIONS for k in (1, 2)]


def between_mask() -> np.ndarray:
    """The entries of the ``6 x 6`` second moments (order ``h_1..h_3, omega_1..omega_3``) that ``between`` sets:
    ``Cov(h_k, omega_l)`` for ``k != l`` and ``Cov(omega_l, omega_3)``."""
    mask = np.zeros((6, 6), dtype=bool)
    mask[:3, 3:] = mask[3:, :3] = ~np.eye(3, dtype=bool)
    mask[3:5, 5] = mask[5, 3:5] = True
    return mask


def per_layer(row, name: str) -> np.ndarray:
    """A row's column ``name`` of layers 1 to 3 (``Q0``, ``V``, ``shat``)."""
    return np.array([float(row[f"{name}_{k}"]) for k in (1, 2, 3)])


def versions(row, Q0, V) -> dict:
    """The second moments of each version of a row (module docstring), at the row's ``Q0`` and ``V``."""
    run = moments(row)
    law = law_moments(Q0 - V, Q0, np.zeros(3), run[3, 4], 3)
    layer, excess, overlap = np.arange(3), run.copy(), run.copy()
    c = run[layer, 3 + layer]
    excess[3 + layer, 3 + layer] = c
    overlap[layer, 3 + layer] = overlap[3 + layer, layer] = law[layer, 3 + layer]
    overlap[3 + layer, 3 + layer] += law[layer, 3 + layer] - c
    indices = run.copy()
    indices[:3, :3] = law[:3, :3]
    return {"run": run, "law": law, "excess": excess, "overlap": overlap, "indices": indices,
            "between": np.where(between_mask(), law, run)}


def row_scales(row, draws: int) -> dict:
    """``s_1``, ``s_2`` of every version of a row, each from the same standard draws."""
    ch = DeepAttention(C, layers=3)
    key = [int(float(row[x])) for x in ("d", "seed", "t")]
    Q0, V, shat = (per_layer(row, x) for x in ("Q0", "V", "shat"))
    out = {x: row[x] for x in ("alpha", "d", "seed", "t")}
    for name, cov in versions(row, Q0, V).items():
        omega, h = draw_gaussian(cov, draws, np.random.default_rng(key))
        parts = input_teacher_parts(ch.g_out(ch(h, seed=key), omega, V), h, np.diag(shat), Q0)
        out |= {f"{name}_{k + 1}": parts[k, k] for k in (0, 1)}
    return out


def parser():
    """The command line: ``--out``, ``--law`` (the rows to read) and ``--draws``."""
    p = data_parser(__doc__, "deep_three_moments.csv")
    p.add_argument("--law", default=str(DATA / "deep_three_law.csv"))
    p.add_argument("--draws", type=int, default=100_000)
    return p


def command(args) -> str:
    """The ``# made by:`` command: the options that differ from their defaults."""
    return command_line(COMMAND, parser(), args, ("out", "law", "draws"))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return write_rows(args.out, command(args), COLUMNS, (row_scales(r, args.draws) for r in read_rows(args.law)))


if __name__ == "__main__":
    sys.exit(main())
