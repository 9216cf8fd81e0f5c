"""The teacher's scale in layer 1's input that the cross overlap makes, from the channel's law alone.

Writes ``book/data/deep_three_scale.csv``: three hardmax layers (``T = 2``, ``c = 0.5``, centred teachers of
``rho = 0.5``, ``Q0 = 1``) at ``alpha = 1``, the responses of :func:`aimlib.channels.deep_moments.response_moments`
under the law with a residual cross-covariance ``cross`` between layers 1 and 2 (no run, no RIE).  Rows of three
``kind``:

* ``fixed_point``: at the state evolution's fixed point with the cross overlap carried (the means of the
  ``alpha = 1`` rows' ``mmse_l`` and ``e_12`` in ``book/data/deep_three_cross_se.csv``), one row per Monte Carlo
  ``seed``, with the memory: the mixing's diagonal ``mix_ll = (F^{-1} Gamma)_ll``, the memory's ``mem_ll`` and
  the teacher's scale ``s_l = mix_ll - 1 + mem_ll q_l / Q0`` in ``R_l = (1 + s_l) S_l + ...``
  (:func:`~aimlib.channels.deep_moments.teacher_parts`);
* ``sweep``: at the same errors, ``cross`` from ``--sweep``: the mixing's diagonal alone (``mem``, ``s`` blank);
* ``run``: at the state of each GAMP-RIE run of ``book/data/deep_three_trace*.csv`` (``d`` = 200, 300, 400, three
  data sets each) after iteration ``t`` = 10, 20, 30, 40: its predictions ``m_l`` and its measured ``e_12``, the
  mixing's diagonal alone, its ``seed`` the run's data set (the Monte Carlo draws are the first ``--seeds``');
  set beside the runs' measured ``s_1`` (``book/data/deep_three_inputs*.csv``).

Standard errors from ten batches.  About 80 seconds per ``fixed_point`` row and 12 per other row on one core::

    python scripts/deep_three_scale.py [--out book/data/deep_three_scale.csv] [--seeds 0 1 2 3]
        [--n 200000] [--sweep -0.06 -0.042 -0.021 0 0.021 0.042]
"""
from __future__ import annotations

import sys

import numpy as np

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments, teacher_parts
from _rows import DATA, command_line, data_parser, read_rows, write_rows

COMMAND = "python scripts/deep_three_scale.py"
C, ALPHA, Q0 = 0.5, 1.0, 1.0
#: the runs' sizes and the iterations whose states are read
SIZES, ITERATIONS = (200, 300, 400), (10, 20, 30, 40)
COLUMNS = ["kind", "d", "t", "seed", "n", "m_1", "m_2", "m_3", "cross", "mix_11", "mix_11_se", "mix_22",
           "mix_22_se", "mem_11", "mem_22", "s_1", "s_2"]


def read(name: str) -> list[dict]:
    """The rows of ``book/data/<name>.csv``."""
    return read_rows(DATA / f"{name}.csv")


def response_row(m, cross: float, n: int, seed: int, memory: bool = False) -> dict:
    """The mixing's diagonal (and, with ``memory``, the memory's and the teacher's scale) at errors ``m``."""
    q = tuple(Q0 - x for x in m)
    r = response_moments(DeepAttention(C, layers=3), q, (Q0,) * 3, cross=cross, n=n, seed=seed, memory=memory)
    row = {"n": n, "seed": seed, "cross": cross, **{f"m_{k + 1}": x for k, x in enumerate(m)},
           **{f"mix_{k}{k}": r.mixing[k - 1, k - 1] for k in (1, 2)},
           **{f"mix_{k}{k}_se": r.se["mixing"][k - 1, k - 1] for k in (1, 2)}}
    if memory:
        parts = teacher_parts(r.mixing, r.memory, q, (Q0,) * 3)
        row.update({f"mem_{k}{k}": r.memory[k - 1, k - 1] for k in (1, 2)})
        row.update({f"s_{k}": parts[k - 1, k - 1] for k in (1, 2)})
    return row


def runs_states():
    """``(d, t, seed, (m_1, m_2, m_3), e_12)`` of each run of the traces at the iterations read."""
    traces = read("deep_three_trace") + read("deep_three_trace_d300") + read("deep_three_trace_d400")
    for r in traces:
        d, t = int(r["d"]), int(r["t"])
        if float(r["alpha"]) == ALPHA and d in SIZES and t in ITERATIONS:
            yield d, t, int(r["seed"]), tuple(float(r[f"m_{k}"]) for k in (1, 2, 3)), float(r["e_12"])


def rows(seeds, n: int, sweep):
    fp = [r for r in read("deep_three_cross_se") if float(r["alpha"]) == ALPHA]
    m_fp = tuple(float(np.mean([float(r[f"mmse_{k}"]) for r in fp])) for k in (1, 2, 3))
    e_fp = float(np.mean([float(r["e_12"]) for r in fp]))
    for seed in seeds:
        yield {"kind": "fixed_point", **response_row(m_fp, e_fp, n, seed, memory=True)}
    for cross in sweep:
        yield {"kind": "sweep", **response_row(m_fp, cross, 2 * n, seeds[0])}
    for d, t, run, m, e in runs_states():
        yield {"kind": "run", "d": d, "t": t, **response_row(m, e, 2 * n, seeds[0]), "seed": run}


def parser():
    """The command line: ``--out``, ``--seeds``, ``--n`` and ``--sweep``."""
    p = data_parser(__doc__, "deep_three_scale.csv")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--sweep", type=float, nargs="+", default=[-0.06, -0.042, -0.021, 0.0, 0.021, 0.042])
    return p


def command(args) -> str:
    """The made-by line of ``args``."""
    return command_line(COMMAND, parser(), args, ("seeds", "n", "sweep", "out"))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return write_rows(args.out, command(args), COLUMNS, rows(args.seeds, args.n, args.sweep))


if __name__ == "__main__":
    sys.exit(main())
