"""Three-layer GAMP-RIE along its run: what its channel step meets across the layers.

Writes ``book/data/deep_three_across.csv``, one row per channel step ``t`` of ``--at`` of each run: the runs of
``scripts/deep_three_fisher.py`` (alpha = 1, same data sets, start ``eps``, damping 0.5).  At each such step the
script forms the estimates ``omega`` and outputs ``g`` that the loop forms from the state before it
(:func:`deep_three_fisher.channel_inputs`) and, over the samples and the entries ``a <= b`` (weights ``1 /
Sigma_ab``, as in that script):

* the *memory* ``I + F_hat^{-1} Lambda``: ``F`` (the loop's own ``F_hat``) and ``Lambda`` (means of ``dg_l /
  domega_k``, central differences) are full ``3 x 3`` matrices
  (:func:`~aimlib.channels.deep_moments.sample_moments`).  The backward pass reads ``B = Gamma S + Lambda S_hat +
  noise`` in the state evolution's reading, and the input ``R = S_hat + F_hat^{-1} B`` keeps ``(I + F_hat^{-1}
  Lambda) S_hat`` of the estimates (book, chapter "Correlated layers"): ``mem_lk`` is its entry ``(l, k)``, zero
  where the outputs keep the Nishimori identity across layers, and ``se_lk`` its standard error over ten batches
  of the samples; ``share_l`` is the squared size of that part of ``R_l`` over the noise ``d Delta_l`` its
  denoiser is tuned to (:func:`memory_share`);
* the Onsager coefficient of each denoiser: ``div_l`` is the RIE's own at the input ``R_l`` of the prior step before
  (:meth:`~aimlib.priors.Wishart.onsager`) over the one that step hands the loop, ``mmse(Delta_l)``: one on the
  state evolution's law, where the Onsager term removes each sample's echo whole;
* the moments of the estimates across layers against those of a token no sample holds
  (:func:`~aimlib.model.index_covariance`): ``qq_lk = mean(omega_l omega_k)`` against ``fqq_lk = Tr(S_hat_l
  S_hat_k) / d`` for ``l < k``, and ``hq_lk = mean(h_k omega_l)`` (``h`` the teachers' indices) against ``fhq_lk =
  Tr(S_k S_hat_l) / d`` for ``l != k``.

About a minute per run at ``d = 100``, four at ``d = 200`` and twelve at ``d = 300`` on one core::

    python scripts/deep_three_across.py [--out book/data/deep_three_across.csv] [--d 100 200 ...]
        [--seeds 0 1 2 ...] [--eps 0.1] [--at 10 20 30 40]
"""
from __future__ import annotations

import itertools

import numpy as np

from aimlib.backend import to_host
from aimlib.channels.deep_moments import sample_moments
from aimlib.index_map import IndexMap
from aimlib.model import index_covariance
from deep_three_fisher import ALPHA, LAYERS, channel_inputs, indices, pair_entries, snapshot
from deep_three_gamp import problem
from deep_three_inputs import follow
from _rows import command_line, data_parser, write_rows

COMMAND = "python scripts/deep_three_across.py"
PAIRS, ORDERED = list(itertools.combinations(LAYERS, 2)), list(itertools.permutations(LAYERS, 2))
COLUMNS = (["alpha", "d", "seed", "t"] + [f"{x}_{l}{k}" for x in ("mem", "se") for l in LAYERS for k in LAYERS]
           + [f"{x}_{l}" for x in ("share", "div") for l in LAYERS]
           + [f"{x}_{l}{k}" for x in ("qq", "fqq") for l, k in PAIRS]
           + [f"{x}_{l}{k}" for x in ("hq", "fhq") for l, k in ORDERED])


def memory(ch, y, omega, m, batches: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(I + F^{-1} Lambda, its standard error, F)`` over the given samples: ``F`` and ``Lambda`` the means over all
    of them (:func:`~aimlib.channels.deep_moments.sample_moments`), the error the scatter of the memory of
    ``batches`` near-equal consecutive batches over ``sqrt(batches)``."""
    blocks = np.array_split(np.arange(len(y)), batches)
    F, Lam = (np.array(x) for x in zip(*(sample_moments(ch, y[b], omega[b], m) for b in blocks)))
    w = np.array([len(b) for b in blocks])[:, None, None] / len(y)
    each = np.linalg.solve(F, Lam)
    F, Lam = (w * F).sum(axis=0), (w * Lam).sum(axis=0)
    return np.eye(len(F)) + np.linalg.solve(F, Lam), np.std(each, axis=0, ddof=1) / np.sqrt(batches), F


def memory_share(mem, F, S_hat) -> np.ndarray:
    """Per layer, the squared size of the memory's part of the input over the noise the denoiser is tuned to:
    ``(M G M^T)_ll / Delta_l`` with ``M`` the memory, ``G_kj = Tr(S_hat_k S_hat_j) / d`` and ``Delta_l = (F^{-1})_ll``
    (the part ``sum_k M_lk S_hat_k`` of ``R_l``, against the noise ``||R_l - S_l||^2 = d Delta_l`` of the state
    evolution)."""
    G = np.array([[index_covariance(a, b) for b in S_hat] for a in S_hat])
    return np.diag(mem @ G @ mem.T) / np.diag(np.linalg.inv(F))


def cross_moments(h, omega, S, S_hat) -> dict:
    """The moments across layers (module docstring) of estimates ``omega`` and teachers' indices ``h`` (``(n, L, T,
    T)``), against the fresh token's from the teachers ``S`` and the estimates ``S_hat``."""
    (h, om), w = pair_entries(h, omega)
    mean = np.einsum("nlk,nmk,k->lm", om, om, w) / (len(om) * len(w)), \
        np.einsum("nlk,nmk,k->lm", om, h, w) / (len(om) * len(w))
    out = {}
    for l, k in PAIRS:
        out[f"qq_{l}{k}"], out[f"fqq_{l}{k}"] = mean[0][l - 1, k - 1], index_covariance(S_hat[l - 1], S_hat[k - 1])
    for l, k in ORDERED:
        out[f"hq_{l}{k}"], out[f"fhq_{l}{k}"] = mean[1][l - 1, k - 1], index_covariance(S[k - 1], S_hat[l - 1])
    return out


def run(d: int, seed: int, eps: float, at) -> list[dict]:
    """The rows of one run (module docstring)."""
    ch, data, S, _, init, init_m = problem(ALPHA, d, seed, eps)
    index, y, rows = IndexMap(data.X), to_host(data.y), []
    h = indices(index, S)

    def record(state):
        if state.t + 1 in at:
            before = snapshot(state)
            omega, m = channel_inputs(index, before)
            *mem, F = memory(ch, y, omega, m)
            div = [p.onsager(R, dl) / p.mmse(dl) for p, R, (dl,) in zip(data.priors, state.R, state.delta)]
            rows.append({"alpha": ALPHA, "d": d, "seed": seed, "t": state.t + 1,
                         **{f"div_{l}": x for l, x in zip(LAYERS, div)},
                         **{f"{x}_{l}{k}": val[l - 1, k - 1] for x, val in zip(("mem", "se"), mem)
                            for l in LAYERS for k in LAYERS},
                         **{f"share_{l}": x for l, x in zip(LAYERS, memory_share(mem[0], F, before.S_hat))},
                         **cross_moments(h, omega, S, before.S_hat)})

    follow(ch, data, S, init, init_m, max(at) - 1, record)
    return rows


def parser():
    """The command line: ``--out``, ``--d``, ``--seeds``, ``--eps`` and ``--at``."""
    p = data_parser(__doc__, "deep_three_across.csv")
    p.add_argument("--d", type=int, nargs="+", default=[100, 200])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.1)
    p.add_argument("--at", type=int, nargs="+", default=[10, 20, 30, 40])
    return p


def command(args) -> str:
    """The made-by line of ``args``."""
    return command_line(COMMAND, parser(), args, ("d", "seeds", "eps", "at", "out"))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = (r for d in args.d for s in args.seeds for r in run(d, s, args.eps, args.at))
    return write_rows(args.out, command(args), COLUMNS, rows)


if __name__ == "__main__":
    raise SystemExit(main())
