r"""The Bayes side of ``L`` hardmax attention layers at ``T = 2``: the sum over pattern histories.

The network (book, chapter "Deep attention: which layer is learned first", section "Three
layers"; :class:`aimlib.channels.DeepAttention`) mixes the tokens layer by layer,
``X_l = M_l X`` with ``M_l = (c I + P_l) M_{l-1}`` (``M_0 = I``), so layer ``l`` sees
``M_{l-1} h^(l) M_{l-1}^T``.  Its hardmax pattern
``P_l`` is fixed by the signs ``s_l`` of ``u = L(M_{l-1}) (h_11, h_12, h_22)``
(:func:`~aimlib.channels.deep_patterns.mixed_functionals`), linear in that layer's own index
once the earlier patterns are given.  With ``h_l ~ N(omega_l, V_l Sigma)`` independently,

.. math::  Z_{\rm out}(t) = \sum_{s_1, \dots, s_{L-1}} \prod_{l=1}^{L} b_l(s_l \mid M_{l-1}; \omega_l, V_l),
           \qquad s_L = t,

a sum over the ``4^(L-1)`` pattern histories of products of bivariate normal orthant
probabilities (:func:`log_z_and_g`; for ``L = 2`` the four-pattern sum of
:mod:`aimlib.channels.deep_patterns`, to rounding).

Output moments of three layers (centred teachers, ``omega_l ~ N(0, lambda_l Sigma)``
independently, ``V = 1``): ``F~_ll' = 2 sum_{a<=b} Sigma_ab E sum_t Z_out g_{l,ab} g_{l',ab}``
by a fixed scrambled Sobol set in nine dimensions (:func:`fisher_matrix3_direct`).  The map
``(omega_3, h_3) -> -(omega_3, h_3)`` flips ``t`` and ``g_3`` and leaves ``g_1, g_2``:
``F~_13 = F~_23 = 0`` exactly, while ``F~_12`` is not zero (measured: book, chapter "Deep
attention"), so the layers' state evolution is GAMP-RIE's with one denoiser per layer.
:func:`fisher_matrix3` reads ``F~`` from Chebyshev interpolants (``aimlib/data``), with
``F~_13 = F~_23 = 0``: the Sobol average over the point set mirrored in ``omega_3``.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from .deep_patterns import (ENTRY_VAR, PATTERNS, entries, entry_products, history_posterior, layer1_terms, mixed_terms,
                            pattern_matrix, posterior_entries, symmetric_matrix)
from .lambda_tables import (LAMBDA_MAX, cached_table, chebyshev_fit, lambda_coordinate, lambda_nodes, load_tables,
                            save_tables, table_ready, verify_interpolant)
from .polytope import sobol_normals

__all__ = ["history_terms", "extend_histories", "prefix_terms", "log_z_and_g", "mixing_matrices",
           "fisher_matrix3_direct", "moments_grid3", "build_tables3", "table3", "tables_ready3",
           "write_tables3", "fisher_matrix3", "separable_scaled3", "SOBOL3_LOG2", "SOBOL3_SEED", "CHEB3_DEG",
           "STORED_RESIDUALS3", "TABLES3"]

SOBOL3_LOG2 = 13        # 2^13 scrambled Sobol points for the nine omega entries of three layers
SOBOL3_SEED = 20251201  # the fixed scramble of the three-layer set
CHEB3_DEG = 8           # degree of the three-layer Chebyshev interpolants per lambda axis (729 nodes)
#: residual strengths whose three-layer interpolants ship with the package
STORED_RESIDUALS3 = (0.5,)
TABLES3 = Path(__file__).resolve().parents[1] / "data" / "deep_hardmax3_tables.npz"


def _residual_matrices(c: float) -> list:
    """``c I + P`` for the four patterns, in the order of :data:`~aimlib.channels.deep_patterns.PATTERNS`."""
    return [c * np.eye(2) + pattern_matrix(*s) for s in PATTERNS]


def mixing_matrices(c: float, L: int) -> list:
    """``M_{L-1} = (c I + P_{L-1}) ... (c I + P_1)`` for each of the ``4^(L-1)`` histories (``L >= 2``),
    ``s_1`` slowest."""
    Ms = _residual_matrices(c)
    for _ in range(L - 2):
        Ms = [R @ M for M in Ms for R in _residual_matrices(c)]
    return Ms


def history_terms(Ms, omega_l, V_l):
    """Layer ``l``'s terms over the histories so far: for each mixing matrix ``M`` in ``Ms`` and each
    pattern ``s_l`` of :data:`~aimlib.channels.deep_patterns.PATTERNS` (``s_l`` fastest), ``log b_l(s_l | M)``
    (``(..., 4 len(Ms))``) and its gradient in the entries of ``omega_l`` (``(..., 4 len(Ms), 3)``)."""
    parts = [mixed_terms(Ms, np.array(s), omega_l, V_l) for s in PATTERNS]
    shape = omega_l.shape[:-2] + (4 * len(Ms),)
    return (np.stack([p[0] for p in parts], -1).reshape(shape),
            np.stack([p[1] for p in parts], -2).reshape(shape + (3,)))


def extend_histories(logs, grads, terms):
    """The histories of :func:`prefix_terms` extended by one layer's :func:`history_terms`: each history
    repeated for the four patterns of the new layer, its ``log b`` added and its gradients appended."""
    return np.repeat(logs, 4, axis=-1) + terms[0], [np.repeat(g, 4, axis=-2) for g in grads] + [terms[1]]


def prefix_terms(c: float, omega, V):
    r"""The first ``L - 1`` layers over the ``4^(L-1)`` histories ``(s_1, ..., s_{L-1})``.

    ``omega`` has shape ``(..., L, 2, 2)``, ``V`` one variance per layer.  Returns
    ``(logs, grads, Ms)``: ``logs[..., H] = sum_{l < L} log b_l(s_l | M_{l-1})``, ``grads`` the
    gradients of those terms per layer (entries, ``(..., H, 3)``), and ``Ms`` the mixing
    matrices ``M_{L-1}`` that the last layer sees.  Histories are ordered with ``s_1`` slowest.
    """
    log_a, g1 = layer1_terms(omega[..., 0, :, :], V[0])
    logs, grads = log_a, [entries(g1)]
    for ell in range(1, omega.shape[-3] - 1):
        logs, grads = extend_histories(logs, grads, history_terms(mixing_matrices(c, ell + 1), omega[..., ell, :, :],
                                                                 V[ell]))
    return logs, grads, mixing_matrices(c, omega.shape[-3])


def log_z_and_g(c: float, t, omega, V):
    """``(log Z_out, g)``: the history sum of ``L`` layers for the output signs ``t`` (``(..., 2)``),
    ``g`` of shape ``(..., L, 2, 2)`` (:func:`~aimlib.channels.deep_patterns.history_posterior`)."""
    logs, grads, Ms = prefix_terms(c, omega, V)
    log_b, g_last = mixed_terms(Ms, t, omega[..., -1, :, :], V[-1])
    return history_posterior(logs + log_b, grads + [g_last])


# -- F~ of three layers: deterministic quasi-Monte Carlo over omega, exact sum over the outputs --

def _sobol_normals3(log2: int) -> np.ndarray:
    """The nine normals of ``2^log2`` points (:func:`~aimlib.channels.polytope.sobol_normals`)."""
    return sobol_normals(9, 2**log2, SOBOL3_SEED)


def _omega3(lam: float, ell: int, sobol_log2: int) -> np.ndarray:
    """``omega_l ~ N(0, lambda Sigma)`` of layer ``ell`` (0, 1, 2) on the nine-dimensional Sobol draws."""
    return symmetric_matrix(_sobol_normals3(sobol_log2)[:, 3 * ell:3 * ell + 3] * np.sqrt(ENTRY_VAR * lam))


def _axis_terms3(c: float, ell: int, lam: float, sobol_log2: int):
    """Layer ``ell``'s terms at ``lambda``, ``V = 1``: layer 1's over its patterns, layer 2's over the
    histories given layer 1 (:func:`history_terms`), layer 3's per output ``t`` (:func:`mixed_terms`)."""
    omega = _omega3(lam, ell, sobol_log2)
    if ell == 0:
        log_a, g1 = layer1_terms(omega, 1.0)
        return log_a, entries(g1)
    if ell == 1:
        return history_terms(mixing_matrices(c, 2), omega, 1.0)
    return [mixed_terms(mixing_matrices(c, 3), np.array(t), omega, 1.0) for t in PATTERNS]


def _moments3(one, two, three) -> np.ndarray:
    """``F~`` (3 x 3) from the terms of :func:`_axis_terms3` of the three layers: the four outputs
    summed, the Sobol draws averaged."""
    logs, grads = extend_histories(one[0], [one[1]], two)
    G = np.zeros((3, 3))
    for log_b, g3 in three:
        logz, e = posterior_entries(logs + log_b, grads + [g3])
        G += entry_products(np.exp(logz), e)
    return G


def fisher_matrix3_direct(c: float, lam1: float, lam2: float, lam3: float, *,
                          sobol_log2: int = SOBOL3_LOG2) -> np.ndarray:
    r"""``F~`` (3 x 3) of three layers with ``E[<g_l, g_l'>_Sigma] = F~_ll' / sqrt(V_l V_l')``, centred teachers.

    At ``V = (1, 1, 1)`` and independent ``omega_l ~ N(0, lambda_l Sigma)``:
    ``F~_ll' = 2 sum_{a<=b} Sigma_ab E_omega sum_t Z_out(t) g_{l,ab}(t) g_{l',ab}(t)``, the four
    outputs ``t`` summed exactly and ``omega`` averaged over ``2^sobol_log2`` scrambled Sobol
    points (fixed scramble).  The off-diagonal entries are as measured on that point set:
    ``F~_13``, ``F~_23`` vanish as integrals (layer-3 sign flip), their values here are the
    quasi-Monte Carlo error.
    """
    return _moments3(*(_axis_terms3(c, ell, lam, sobol_log2) for ell, lam in enumerate((lam1, lam2, lam3))))


def moments_grid3(c: float, progress=None) -> np.ndarray:
    """:func:`fisher_matrix3_direct` on the grid ``lambda_nodes(CHEB3_DEG)^3``, shape ``(deg+1,) * 3 + (3, 3)``.

    The same numbers, each layer's terms computed once per node of its own axis (``3 (deg+1)``
    evaluations of the orthant probabilities instead of ``(deg+1)^3``), then combined.
    ``progress``, if given, is called as ``progress(done, total)`` after each node of ``lambda_1``
    and of each axis.
    """
    lam = lambda_nodes(CHEB3_DEG)
    n, total = len(lam), 4 * len(lam)
    axes = []
    for ell in range(3):
        axes.append([_axis_terms3(c, ell, x, SOBOL3_LOG2) for x in lam])
        if progress is not None:
            progress((ell + 1) * n, total)
    G = np.empty((n,) * 3 + (3, 3))
    for index in np.ndindex(G.shape[:3]):
        G[index] = _moments3(*(axes[ell][i] for ell, i in enumerate(index)))
        if progress is not None and index[1:] == (n - 1, n - 1):
            progress(3 * n + index[0] + 1, total)
    return G


def build_tables3(c: float, progress=None) -> np.ndarray:
    r"""Chebyshev coefficients ``(4, deg+1, deg+1, deg+1)`` for ``c``: ``log F~_11``, ``log F~_22``,
    ``log F~_33`` and the correlation ``F~_12 / sqrt(F~_11 F~_22)`` in ``x_l = 1/sqrt(1 + lambda_l)``
    (the map of the two-layer tables), from :func:`moments_grid3` (about thirty seconds on one core)."""
    G = moments_grid3(c, progress)
    vals = [np.log(G[..., 0, 0]), np.log(G[..., 1, 1]), np.log(G[..., 2, 2]),
            G[..., 0, 1] / np.sqrt(G[..., 0, 0] * G[..., 1, 1])]
    return np.stack([chebyshev_fit(f, (CHEB3_DEG,) * 3) for f in vals])


def _table_settings3() -> np.ndarray:
    return np.array([SOBOL3_LOG2, CHEB3_DEG, LAMBDA_MAX, SOBOL3_SEED], dtype=float)


def write_tables3(path=None, residuals=STORED_RESIDUALS3) -> Path:
    """Build the three-layer tables of ``residuals`` and store them (``aimlib/data/deep_hardmax3_tables.md``)
    at ``path`` (default: the shipped ``aimlib/data/deep_hardmax3_tables.npz``)."""
    path = TABLES3 if path is None else path
    return save_tables(path, residuals, _table_settings3(), coef=np.stack([build_tables3(c) for c in residuals]))


@lru_cache(maxsize=1)
def _stored3() -> dict:
    """The stored three-layer tables by ``c`` (:func:`~aimlib.channels.lambda_tables.load_tables`)."""
    return {c: coef for c, (coef,) in load_tables(TABLES3, _table_settings3(), ("coef",)).items()}


def tables_ready3(c: float) -> bool:
    """Whether :func:`table3` of ``c`` would return at once (stored, or built already)."""
    return table_ready("three", c, _stored3())


def table3(c: float, progress=None) -> np.ndarray:
    """:func:`build_tables3` of ``c``: stored for :data:`STORED_RESIDUALS3`, built once per session otherwise."""
    return cached_table("three", c, _stored3(), build_tables3, progress, _check3)


#: off-node points where a three-layer table built for a new ``c`` is checked against quadrature, and the
#: relative error allowed on the diagonal (1.1 % is measured at ``c = 0.5`` at ``(40, 20, 10)``)
CHECK3_POINTS, CHECK3_REL = ((1.0, 2.0, 3.0), (40.0, 20.0, 10.0), (10.0, 0.3, 5.0)), 0.03


def _check3(c: float) -> None:
    verify_interpolant(c, fisher_matrix3, fisher_matrix3_direct, CHECK3_POINTS, CHECK3_REL)


def fisher_matrix3(c: float, lam1: float, lam2: float, lam3: float) -> np.ndarray:
    """``F~`` (3 x 3) of :func:`fisher_matrix3_direct` from the interpolants, with ``F~_13 = F~_23 = 0``.

    Interpolated: ``log F~_ll`` and ``r_12 = F~_12 / sqrt(F~_11 F~_22)`` (clipped to ``[-1, 1]``; it is 1
    at ``lambda = 0``).  Stored for :data:`STORED_RESIDUALS3`; for another ``c`` built once per session.

    Accuracy against :func:`fisher_matrix3_direct` (measured at ``c = 0.5``): 0.6 % on the diagonal for
    ``lambda_l <= 20``, 1.3 % at ``lambda_1 = 40``, 3 % at ``lambda ~ (300, 150, 50)``; ``F~_12`` within
    ``2.5e-3 sqrt(F~_11 F~_22)``.  At ``lambda = 0`` the separable ``F~_11 (1 - r_12^2)`` is ``8e-5``
    instead of 0 (``r_12`` interpolated to ``1 - 1e-3``).
    """
    u = lambda_coordinate([lam1, lam2, lam3])
    f = [np.polynomial.chebyshev.chebval3d(u[0], u[1], u[2], C) for C in table3(float(c))]
    d = np.exp(f[:3])
    G = np.diag(d)
    G[0, 1] = G[1, 0] = float(np.clip(f[3], -1.0, 1.0)) * np.sqrt(d[0] * d[1])
    return G


def separable_scaled3(c: float, lam1: float, lam2: float, lam3: float) -> np.ndarray:
    r"""``V_l / (F^{-1})_ll`` of three layers: ``(F~_11 - F~_12^2/F~_22, F~_22 - F~_12^2/F~_11, F~_33)``.

    The Schur complements of :func:`fisher_matrix3` (the moment matrix ``F = F~ / sqrt(V V^T)``, ``F_13 = F_23 = 0``):
    one denoiser per layer sees layer ``l`` with ``qhat_l = alpha F~_l^sep / V_l``.  Zero for layers
    1 and 2 where ``r_12 = 1`` (at ``lambda = 0``).
    """
    G = fisher_matrix3(c, lam1, lam2, lam3)
    return np.maximum(np.diag(G) - np.array([G[0, 1] ** 2 / G[1, 1], G[0, 1] ** 2 / G[0, 0], 0.0]), 0.0)
