"""Three-layer GAMP-RIE along its run: the law its channel step meets, and its two Fisher estimates.

Writes ``book/data/deep_three_fisher.csv``, one row per iteration ``t >= 2`` of each run: the runs of
``scripts/deep_three_inputs.py`` (same data sets, start ``eps``, damping 0.5, exactly ``--iterations``
iterations).  From the state the loop hands iteration ``t`` (estimates ``S_hat``, variances ``m``, Onsager rows
``O``, damped outputs ``g_prev``: :class:`~aimlib.amp.loop.IterationState`) the script forms the channel step's
estimates ``omega`` (:func:`~aimlib.amp.steps.omega_map`) and its fresh outputs ``g = g_out(y, omega, m)``, before
damping; ``match`` is the largest difference between their damped mix with ``g_prev`` and the loop's own outputs
(rounding: the recomputation is the loop's step).  Then, per layer ``l``, over the samples and the entries ``a <=
b`` (weights ``1 / Sigma_ab``):

* the law of the residual ``r = h - omega`` (``h`` the teachers' indices) against the one ``g_out`` assumes,
  ``N(0, m_l Sigma)`` independent of ``omega`` (:func:`residual_law`): ``var_l = mean(r_l^2) / m_l``, ``slope_l``
  the least-squares slope of ``r_l`` on ``omega_l``, ``q_l = mean(omega_l^2)``, ``m_l`` itself and the
  correlations ``corr_lk`` of ``r_l`` and ``r_k``; ``c_l = (1 + slope_l) q_l = mean(h_l omega_l)``.  On a token
  that none of the data holds the estimate's index would have the variance ``fq_l = Tr(S_hat_l^2) / d`` and the
  covariance ``fc_l = Tr(S_l S_hat_l) / d`` with the teacher's (:func:`~aimlib.model.index_covariance`): where
  ``q_l``, ``c_l`` differ from them, the Onsager terms have not made ``omega`` the index of a fresh token.
  Under the state evolution with ``q_12`` carried (book, chapter "Correlated layers") ``var_l = 1``,
  ``slope_l = 0``, ``q_l = c_l = fq_l = fc_l`` and ``corr_12 = e_12 / sqrt(m_1 m_2)``;
* the two estimates of the Fisher information (:func:`~aimlib.channels.deep_moments.sample_moments`):
  ``F_l = 2 sum_{a<=b} Sigma_ab mean(g_l,ab^2)``, from which the loop forms its noises, and ``ratio_l = -Lambda_ll
  / F_ll`` with ``Lambda_ll`` the same mean of ``dg_l,ab / domega_l,ab`` (central differences at fixed outputs):
  one where ``h | omega`` has the law ``g_out`` assumes (the Nishimori identity).

About two minutes per run at ``d = 100``, seven at ``d = 200`` and twenty at ``d = 300`` on one core::

    python scripts/deep_three_fisher.py [--out book/data/deep_three_fisher.csv]
        [--d 100 200 ...] [--seeds 0 1 2 ...] [--eps 0.1] [--iterations 40]
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import sys

import numpy as np

from aimlib.amp.steps import omega_map
from aimlib.backend import to_host
from aimlib.channels import sigma2
from aimlib.channels.deep_moments import sample_moments
from aimlib.index_map import IndexMap
from aimlib.model import index_covariance
from deep_three_gamp import problem
from deep_three_inputs import follow, made_by, runs_parser, write_runs

COMMAND = "python scripts/deep_three_fisher.py"
ALPHA, LAYERS = 1.0, (1, 2, 3)
PER_LAYER = ("F", "ratio", "var", "slope", "q", "c", "m", "fq", "fc")
COLUMNS = (["alpha", "d", "seed", "t", "match"] + [f"{x}_{l}" for x in PER_LAYER for l in LAYERS]
           + ["corr_12", "corr_13", "corr_23"])


def pair_entries(*arrays):
    """``([x[..., a, b] for a <= b], w)``: the entries ``a <= b`` of index arrays ``(..., T, T)`` on a last axis, and
    their weights ``w = 1 / Sigma_ab``, over which the moments of these scripts are taken."""
    T = arrays[0].shape[-1]
    iu = np.triu_indices(T)
    return [x[..., iu[0], iu[1]] for x in arrays], 1.0 / sigma2(T)[iu]


def residual_law(h, omega, m) -> dict:
    """The law of ``r = h - omega`` that the channel step meets, against the one ``g_out`` assumes (``N(0, m_l
    Sigma)`` per layer, independent of ``omega`` and of the other layers): ``var_l = mean(r_l^2 / Sigma) / m_l``,
    ``slope_l``, the least-squares slope of ``r_l`` on ``omega_l`` (weights ``1 / Sigma``), and ``corr_lk`` of
    ``r_l`` and ``r_k``, over the samples and the entries ``a <= b``."""
    (r, om), w = pair_entries(h - omega, omega)
    count = r.shape[0] * r.shape[2]                          # samples times entries a <= b
    cov = np.einsum("nlk,nmk,k->lm", r, r, w) / count
    out = {}
    for l in range(r.shape[1]):
        out[f"var_{l + 1}"] = cov[l, l] / m[l]
        out[f"slope_{l + 1}"] = float(np.sum(r[:, l] * om[:, l] * w) / np.sum(om[:, l] ** 2 * w))
        out[f"q_{l + 1}"] = float(np.sum(om[:, l] ** 2 * w) / count)
        out[f"c_{l + 1}"], out[f"m_{l + 1}"] = out[f"q_{l + 1}"] * (1 + out[f"slope_{l + 1}"]), m[l]
    for l, k in itertools.combinations(range(r.shape[1]), 2):
        out[f"corr_{l + 1}{k + 1}"] = cov[l, k] / np.sqrt(cov[l, l] * cov[k, k])
    return out


def snapshot(state):
    """A host copy of what the loop hands its callback that the next channel step uses (its ``R`` not kept)."""
    return dataclasses.replace(state, S_hat=[to_host(x).copy() for x in state.S_hat], V=list(state.V),
                               g=to_host(state.g).copy(), R=[], delta=[], noise_ratio=None,
                               onsager=list(state.onsager))


def indices(index, mats):
    """``h`` of every matrix in ``mats`` on every sample: ``(n, L, T, T)`` on the host."""
    return np.stack([to_host(index.forward(x)) for x in mats], axis=1)


def channel_inputs(index, before):
    """``(omega, m)``: the estimates that the channel step after the state ``before`` (:func:`snapshot`) forms, and
    the variances it hands ``g_out`` (one-sector priors)."""
    h = indices(index, before.S_hat)
    omega = omega_map(before.onsager, h.shape[-1], np, np.float64)(h, before.g)
    return omega, tuple(float(x) for (x,) in before.V)


def law_columns(index, before, S, h, inputs=None) -> dict:
    """:func:`residual_law` at the channel step after ``before``, with ``fq_l`` and ``fc_l`` (module docstring):
    ``S`` the teachers and ``h`` their :func:`indices` (the same at every iteration), ``inputs`` the step's
    :func:`channel_inputs` if already at hand."""
    omega, m = channel_inputs(index, before) if inputs is None else inputs
    fresh = {f"{x}_{l + 1}": index_covariance(a, b) for l, (s, e) in enumerate(zip(S, before.S_hat))
             for x, a, b in (("fq", e, e), ("fc", s, e))}
    return residual_law(h, omega, m) | fresh


def row(ch, y, index, before, g_loop, S, h):
    """The columns of one iteration from the state ``before`` it (module docstring) and the loop's outputs; ``h``
    the teachers' :func:`indices`."""
    omega, m = channel_inputs(index, before)
    g = to_host(ch.g_out(y, omega, m))
    F, Lam = sample_moments(ch, y, omega, m, g=g)
    out = {"match": float(np.max(np.abs(0.5 * g + 0.5 * before.g - to_host(g_loop))))}
    out |= {f"{x}_{l + 1}": val[l] for x, val in (("F", np.diag(F)), ("ratio", -np.diag(Lam) / np.diag(F)))
            for l in range(len(S))}
    return out | law_columns(index, before, S, h, (omega, m))


def run(d: int, seed: int, eps: float, iterations: int) -> list[dict]:
    """The rows of one run at ``alpha = 1``: iterations 2 to ``iterations``."""
    ch, data, S, _, init, init_m = problem(ALPHA, d, seed, eps)
    index, y, rows, before = IndexMap(data.X), to_host(data.y), [], []
    h = indices(index, S)

    def record(state):
        if before:
            rows.append({"alpha": ALPHA, "d": d, "seed": seed, "t": state.t,
                         **row(ch, y, index, before[0], state.g, S, h)})
        before[:] = [snapshot(state)]

    follow(ch, data, S, init, init_m, iterations, record)
    return rows


#: the command line, its made-by line and ``main``: those of :mod:`deep_three_inputs`, for this script
parser = functools.partial(runs_parser, __doc__, "deep_three_fisher.csv")
command = functools.partial(made_by, COMMAND, parser)
main = functools.partial(write_runs, sys.modules[__name__])


if __name__ == "__main__":
    raise SystemExit(main())
