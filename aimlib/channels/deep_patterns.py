r"""The Bayes side of two hardmax attention layers at ``T = 2``: the pattern sum and its output functions.

The channel (:class:`aimlib.channels.DeepAttention`, book chapter "Deep attention") reads
``y = hardmax(M h2 M^T)`` with ``M = c I + P``, ``P = hardmax(h1)``.  The latent layer-1
pattern ``P`` is fixed by the signs ``s_i = sign(h1_ii - h1_12)``; given ``P`` the output
signs ``t_i = sign(u_i)`` are signs of the linear functions ``u = L_P (h2_11, h2_12, h2_22)``
(:func:`functionals`).  With ``h_l ~ N(omega_l, V_l Sigma)`` independently given the
estimates,

.. math::  Z_{\rm out} = \sum_{P} a_P(\omega_1, V_1)\, b_P(t; \omega_2, V_2),

``a_P`` the one-layer hardmax probability of the signs of ``P`` and ``b_P`` a bivariate normal
orthant probability: four products, no Monte Carlo.

Output functions.  ``g_l = d log Z_out / d omega_l`` scales as ``V_l^{-1/2}`` times a function
of ``omega_l / sqrt(V_l)``, so ``E[<g_l, g_l'>_Sigma] = F~_ll' / sqrt(V_l V_l')`` with ``F~``
(the book's :math:`\tilde F`) a function of ``lambda_l = q_l / V_l`` and of the correlation
``r`` of the two estimates
(``r = 0`` for centred teachers, ``r = sqrt(s_1 s_2 / (q_1 q_2))`` when the teachers share a
known part of squared norm ``s_l``).  ``F~`` is a deterministic quasi-Monte Carlo average
(a fixed scramble) with the four outputs summed exactly, read from Chebyshev interpolants
(:func:`fisher_scaled` at ``r = 0``, :func:`fisher_matrix` for ``r`` in ``[0, 1]``).

The building blocks are generic in the mixing matrix ``M`` that a layer's tokens went through
(:func:`mixed_functionals`, :func:`orthant_terms`, :func:`mixed_terms`, :func:`history_posterior`):
:mod:`aimlib.channels.deep_histories` sums over the pattern histories of more layers with them.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import _validate as v
from ..backend import to_host
from . import hardmax
from ._bivariate import grad_log_bvn, log_bvn_cdf
from .lambda_tables import (LAMBDA_MAX, cached_table, chebyshev_fit, chebyshev_nodes, lambda_coordinate,
                            lambda_nodes, load_tables, save_tables, table_ready, verify_interpolant)
from .polytope import sobol_normals


__all__ = ["PATTERNS", "ENTRY_VAR", "pattern_matrix", "mixed_functionals", "functionals", "entries",
           "symmetric_matrix", "layer1_terms", "orthant_terms", "mixed_terms", "layer2_terms", "posterior_entries",
           "history_posterior", "pattern_posterior", "entry_products", "fisher_matrix_direct", "fisher_scaled_direct",
           "oracle_fisher_scaled", "fisher_scaled", "fisher_matrix", "moments_grid", "build_centred", "build_shared",
           "centred_table", "shared_table",
           "tables_ready", "write_tables", "STORED_RESIDUALS"]

#: the four layer-1 sign patterns ``(s_1, s_2)`` of ``T = 2``
PATTERNS = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
#: Var of the independent entries ``(h_11, h_12, h_22)`` in units of ``V``
ENTRY_VAR = np.array([2.0, 1.0, 2.0])


def pattern_matrix(s1: float, s2: float) -> np.ndarray:
    """The one-hot layer-1 output ``P`` of the signs: row 1 picks token 1 iff ``s_1 > 0``, row 2 token 2
    iff ``s_2 > 0``."""
    return np.array([[1.0, 0.0] if s1 > 0 else [0.0, 1.0], [0.0, 1.0] if s2 > 0 else [1.0, 0.0]])


def _bilinear(p, q) -> np.ndarray:
    """Coefficients of ``p^T h q`` on the independent entries ``(h_11, h_12, h_22)`` of a symmetric ``h``."""
    return np.array([p[0] * q[0], p[0] * q[1] + p[1] * q[0], p[1] * q[1]])


def mixed_functionals(M) -> np.ndarray:
    """``L`` (2 x 3) of the mixing matrix ``M`` (rows ``m_1, m_2``): ``u = L (h_11, h_12, h_22)`` with
    ``u_1 = m_1^T h (m_1 - m_2)`` and ``u_2 = m_2^T h (m_2 - m_1)``, the hardmax differences of ``M h M^T``."""
    return np.stack([_bilinear(M[0], M[0] - M[1]), _bilinear(M[1], M[1] - M[0])])


def functionals(c: float, s1: float, s2: float) -> np.ndarray:
    """``L`` (2 x 3): ``u = L (h_11, h_12, h_22)`` are the layer-2 differences given the pattern ``(s_1, s_2)``
    (:func:`mixed_functionals` of ``M = c I + P``)."""
    return mixed_functionals(c * np.eye(2) + pattern_matrix(s1, s2))


def entries(o):
    """The independent entries ``(o_11, (o_12 + o_21)/2, o_22)`` of a ``(..., 2, 2)`` array, on a last axis."""
    return np.stack([o[..., 0, 0], 0.5 * (o[..., 0, 1] + o[..., 1, 0]), o[..., 1, 1]], axis=-1)


def symmetric_matrix(e):
    """The symmetric ``(..., 2, 2)`` matrix of the entries ``e = (e_11, e_12, e_22)`` on the last axis."""
    return np.stack([np.stack([e[..., 0], e[..., 1]], -1), np.stack([e[..., 1], e[..., 2]], -1)], -2)


def layer1_terms(o1, V1):
    """Per pattern ``P``: ``log a_P``, the probability of the layer-1 signs, and its gradient in ``omega_1``."""
    logs, grads = [], []
    for s in PATTERNS:
        signs = np.broadcast_to(np.array(s), o1.shape[:-2] + (2,))
        logs.append(to_host(hardmax.log_partition(signs, o1, V1)))
        grads.append(to_host(hardmax.g_out(signs, o1, V1)))
    return np.stack(logs, -1), np.stack(grads, -3)


def orthant_terms(L, t, o, V):
    r"""``(log b, d log b / d (omega_11, omega_12, omega_22))`` of the signs ``t`` of ``u = L (h_11, h_12, h_22)``.

    With ``h ~ N(omega, V Sigma)``, ``u ~ N(L w, C)``, ``w`` the entries of ``omega`` and
    ``C = V L diag(2, 1, 2) L^T``: ``b = Phi_2(k_1, k_2; t_1 t_2 C_12 / sqrt(C_11 C_22))`` with
    ``k_i = t_i (L w)_i / sqrt(C_ii)``, a bivariate normal orthant probability.  ``t`` has shape
    ``(..., 2)`` (or ``(2,)``, one sign pair for every sample).
    """
    C = V * (L * ENTRY_VAR) @ L.T
    sd = np.sqrt(np.diag(C))
    r = t[..., 0] * t[..., 1] * C[0, 1] / (sd[0] * sd[1])
    k = t * (entries(o) @ L.T) / sd
    log_b = log_bvn_cdf(k[..., 0], k[..., 1], r)
    a1, a2 = grad_log_bvn(k[..., 0], k[..., 1], r, log_b)
    return log_b, (a1 * t[..., 0] / sd[0])[..., None] * L[0] + (a2 * t[..., 1] / sd[1])[..., None] * L[1]


def mixed_terms(mixings, t, o, V):
    """The orthant terms given ``M``: :func:`orthant_terms` of ``u = mixed_functionals(M)`` for each mixing
    matrix ``M`` in ``mixings``, stacked (``log b`` on the last axis, the gradients on axis ``-2``)."""
    terms = [orthant_terms(mixed_functionals(M), t, o, V) for M in mixings]
    return np.stack([a for a, _ in terms], -1), np.stack([b for _, b in terms], -2)


def layer2_terms(c, t, o2, V2):
    """Per pattern ``P``: ``log b_P``, the probability of the output signs ``t`` given ``P``, and its
    gradient in the entries ``(omega_11, omega_12, omega_22)`` of ``omega_2`` (:func:`mixed_terms` of
    ``M = c I + P``)."""
    return mixed_terms([c * np.eye(2) + pattern_matrix(*s) for s in PATTERNS], t, o2, V2)


def posterior_entries(logs, grads):
    """``(log Z_out, e)`` from the per-history ``log prod_l b_l`` (last axis) and each layer's gradients
    (entries, ``(..., H, 3)``): ``Z_out = sum_H prod_l b_l`` and ``g_l = sum_H w_H g_{l,H}`` with the
    posterior weights ``w_H = prod_l b_l / Z_out``; ``e`` stacks the entries of the ``g_l`` on axis ``-2``."""
    top = logs.max(axis=-1, keepdims=True)
    w = np.exp(logs - top)
    total = w.sum(axis=-1, keepdims=True)
    w /= total
    return (top + np.log(total))[..., 0], np.stack([np.einsum("...h,...hk->...k", w, gs) for gs in grads], -2)


def history_posterior(logs, grads):
    """:func:`posterior_entries` with ``g`` as symmetric matrices, stacked on axis ``-3``."""
    logz, e = posterior_entries(logs, grads)
    return logz, symmetric_matrix(e)


def pattern_posterior(logs, g1s, g2s):
    """``(log Z_out, g)`` of two layers from the per-pattern ``log a_P b_P`` and gradients
    (:func:`history_posterior`; ``g1s`` as matrices, ``g2s`` as entries)."""
    return history_posterior(logs, (entries(g1s), g2s))


# -- F~: deterministic quasi-Monte Carlo over omega, exact sum over the outputs ------------

SOBOL_LOG2 = 12       # 2^12 scrambled Sobol points for the six omega entries
CHEB_DEG = 10         # degree of the Chebyshev interpolants per lambda axis
R_DEG = 8             # degree in the correlation r of the shared-law interpolant
SOBOL_SEED = 20251130  # the fixed scramble: F~ is a deterministic function of (lambda, r)
#: residual strengths whose interpolants ship with the package (``aimlib/data``), checked by the tests
STORED_RESIDUALS = (0.5, 2.0, -0.5, 3.0)
TABLES = Path(__file__).resolve().parents[1] / "data" / "deep_hardmax_tables.npz"


def _sobol_normals():
    """The six normals of the quasi-Monte Carlo average (:func:`~aimlib.channels.polytope.sobol_normals`)."""
    return sobol_normals(6, 2**SOBOL_LOG2, SOBOL_SEED)


def _sobol_omega(lam: float, r: float) -> np.ndarray:
    """``omega ~ N(0, lambda Sigma)`` (``(N, 2, 2)``) on the Sobol draws, each entry of correlation ``r``
    with the same entry of the draws at ``r = 1`` (layer 1's)."""
    z = _sobol_normals()
    return symmetric_matrix((r * z[:, :3] + np.sqrt(1.0 - r * r) * z[:, 3:]) * np.sqrt(ENTRY_VAR * lam))


def _layer1_draws(lam1: float) -> tuple:
    """Layer 1 on the Sobol draws ``omega_1 ~ N(0, lambda_1 Sigma)`` (``V_1 = 1``): :func:`layer1_terms`
    (the same for every output and every ``c``)."""
    log_a, g1s = layer1_terms(_sobol_omega(lam1, 1.0), 1.0)
    return log_a, entries(g1s)


def _layer2_draws(c: float, lam2: float, r: float) -> list:
    """Layer 2 on the Sobol draws ``omega_2 ~ N(0, lambda_2 Sigma)`` (``V_2 = 1``), each entry of
    correlation ``r`` with the same entry of ``omega_1``: :func:`layer2_terms` for each output of
    :data:`PATTERNS`."""
    o2 = _sobol_omega(lam2, r)
    return [layer2_terms(c, np.broadcast_to(np.array(t), (len(o2), 2)), o2, 1.0) for t in PATTERNS]


def _moments(layer1: tuple, layer2: list) -> np.ndarray:
    """``F~`` (2 x 2) from the terms of :func:`_layer1_draws` and :func:`_layer2_draws`: the four
    outputs summed, the Sobol draws averaged."""
    log_a, e1s = layer1
    G = np.zeros((2, 2))
    for log_b, e2s in layer2:
        logz, e = posterior_entries(log_a + log_b, (e1s, e2s))
        G += entry_products(np.exp(logz), e)
    return G


def entry_products(p, e) -> np.ndarray:
    """``2 E[p sum_{a<=b} Sigma_ab g_{l,ab} g_{l',ab}]`` over the sample axis, an ``(L, L)`` array, from the
    entries ``e`` (``(n, L, 3)``) of symmetric ``g_l``: ``2 sum_{a<=b} Sigma_ab x_ab y_ab = 2 sum_k
    ENTRY_VAR_k x_k y_k`` on the entries ``(x_11, x_12, x_22)``."""
    return np.tensordot(e, e * (2 * ENTRY_VAR * p[:, None, None]), axes=([0, 2], [0, 2])) / len(p)


def fisher_matrix_direct(c: float, lam1: float, lam2: float, r: float = 0.0) -> np.ndarray:
    r"""``F~`` (2 x 2) with ``E[<g_l, g_l'>_Sigma] = F~_ll' / sqrt(V_l V_l')`` at ``lambda_l = q_l / V_l``.

    At ``V = (1, 1)`` and ``omega_l ~ N(0, lambda_l Sigma)`` with entrywise correlation ``r``:
    ``F~_ll' = 2 sum_{a<=b} Sigma_ab E_omega sum_y Z_out(y) g_{l,ab}(y) g_{l',ab}(y)``, the four
    outputs summed exactly and ``omega`` averaged over scrambled Sobol points (fixed scramble:
    a deterministic function of ``(lambda, r)``).  The diagonal at ``r = 0`` is
    :func:`fisher_scaled_direct`; the off-diagonal is the cross term, zero at ``r = 0``
    (book, chapter "Deep attention": the layer-2 sign flip).
    """
    return _moments(_layer1_draws(lam1), _layer2_draws(c, lam2, r))


def fisher_scaled_direct(c: float, lam1: float, lam2: float) -> np.ndarray:
    """``(F~_1, F~_2)``: the diagonal of :func:`fisher_matrix_direct` at ``r = 0`` (centred teachers),
    ``F_l = F~_l / V_l``."""
    return np.diag(fisher_matrix_direct(c, lam1, lam2, 0.0)).copy()


def oracle_fisher_scaled(c: float, layer: int, lam: float, r: float) -> float:
    r"""``F~`` of layer ``layer`` when the other layer's index is known: ``F = F~ / V_layer``.

    The oracle that is given the other teacher matrix observes that layer's index ``h_o``
    exactly; ``omega ~ N(0, lambda Sigma)`` (at ``V = 1``) has entrywise correlation ``r``
    with ``h_o`` (of unit variance: only its signs enter).  The known layer's factor of
    ``Z_out`` is an indicator: layer 1 known fixes the pattern ``P``; layer 2 known fixes,
    per pattern, the output signs.
    """
    layer = v.choice("layer", layer, {1, 2})
    h_o = _sobol_omega(1.0, 1.0)
    omega = np.sqrt(lam) * _sobol_omega(1.0, r)       # the estimated layer's omega
    n = len(omega)
    if layer == 2:
        e = entries(h_o)
        s = np.sign(np.stack([e[:, 0] - e[:, 1], e[:, 2] - e[:, 1]], -1))
        log_a = np.where(np.all(s[:, None, :] == np.array(PATTERNS), axis=-1), 0.0, -np.inf)
        g1s = np.zeros((n, 4, 2, 2))
    else:
        log_a, g1s = layer1_terms(omega, 1.0)
    G = 0.0
    for t in PATTERNS:
        tt = np.broadcast_to(np.array(t), (n, 2))
        if layer == 2:
            log_b, g2s = layer2_terms(c, tt, omega, 1.0)
        else:
            u = np.stack([entries(h_o) @ functionals(c, *s).T for s in PATTERNS], 1)
            log_b = np.where(np.all(np.sign(u) == tt[:, None, :], axis=-1), 0.0, -np.inf)
            g2s = np.zeros((n, 4, 3))
        ok = np.isfinite((log_a + log_b).max(axis=-1))
        logz, g = pattern_posterior((log_a + log_b)[ok], g1s[ok], g2s[ok])
        G += float(entry_products(np.exp(logz), entries(g[:, layer - 1:layer]))[0, 0]) * ok.mean()
    return G


# -- the interpolants -------------------------------------------------------------------

def moments_grid(c: float, rs, progress=None) -> np.ndarray:
    """:func:`fisher_matrix_direct` on the grid ``lambda_nodes(CHEB_DEG)^2 x rs``, shape
    ``(deg+1, deg+1, len(rs), 2, 2)``.

    The same numbers, computed once per axis: layer 1's terms depend on ``lambda_1`` alone and
    layer 2's on ``(lambda_2, r)`` alone, so the bivariate orthant probabilities are evaluated on
    ``(deg+1) len(rs)`` draws of ``omega_2`` instead of ``(deg+1)^2 len(rs)``.  ``progress``, if
    given, is called as ``progress(done, total)`` after each node of ``(lambda_2, r)``.
    """
    lam = lambda_nodes(CHEB_DEG)
    ones = [_layer1_draws(a) for a in lam]
    G = np.empty((len(lam), len(lam), len(rs), 2, 2))
    for step, (k, j) in enumerate(np.ndindex(len(rs), len(lam))):
        two = _layer2_draws(c, lam[j], rs[k])
        for i, one in enumerate(ones):
            G[i, j, k] = _moments(one, two)
        if progress is not None:
            progress(step + 1, len(rs) * len(lam))
    return G


def build_centred(c: float, progress=None) -> np.ndarray:
    """Chebyshev coefficients ``(2, deg+1, deg+1)`` of ``log F~_l`` at ``r = 0`` (centred teachers) in
    ``x_l = 1/sqrt(1 + lambda_l)``, computed (:func:`moments_grid`, two seconds on one core)."""
    G = moments_grid(c, [0.0], progress)[:, :, 0]
    return np.stack([chebyshev_fit(np.log(G[..., ell, ell]), (CHEB_DEG, CHEB_DEG)) for ell in range(2)])


def build_shared(c: float, progress=None) -> np.ndarray:
    """Chebyshev coefficients ``(3, deg+1, deg+1, R_DEG+1)`` of ``log F~_11``, ``log F~_22`` and ``F~_12``
    in ``(x_1, x_2, r)``, ``r`` in ``[0, 1]`` (teachers that share a known part), computed
    (:func:`moments_grid`, about fifteen seconds on one core)."""
    G = moments_grid(c, (chebyshev_nodes(R_DEG) + 1) / 2, progress)
    return np.stack([chebyshev_fit(f, (CHEB_DEG, CHEB_DEG, R_DEG))
                     for f in (np.log(G[..., 0, 0]), np.log(G[..., 1, 1]), G[..., 0, 1])])


def _table_settings() -> np.ndarray:
    return np.array([SOBOL_LOG2, CHEB_DEG, R_DEG, LAMBDA_MAX, SOBOL_SEED], dtype=float)


def write_tables(path=None, residuals=STORED_RESIDUALS) -> Path:
    """Build the tables of ``residuals`` and store them at ``path`` (default: the shipped
    ``aimlib/data/deep_hardmax_tables.npz``; ``scripts/make_deep_hardmax_tables.py``)."""
    return save_tables(TABLES if path is None else path, residuals, _table_settings(),
                       coef=np.stack([build_centred(c) for c in residuals]),
                       shared=np.stack([build_shared(c) for c in residuals]))


@lru_cache(maxsize=1)
def _stored() -> dict:
    """The stored two-layer tables by ``c`` (:func:`~aimlib.channels.lambda_tables.load_tables`)."""
    return load_tables(TABLES, _table_settings(), ("coef", "shared"))


#: off-node points ``(lambda_1, lambda_2)`` and ``(lambda_1, lambda_2, r)`` where a table built for a new
#: ``c`` is checked against quadrature, and the relative error allowed there (the accuracy stated in
#: :func:`fisher_scaled`, with room)
CHECK_POINTS, CHECK_POINTS_SHARED, CHECK_REL = ((1.0, 1.0), (20.0, 5.0), (0.3, 40.0)), ((2.0, 0.5, 0.6),), 0.06


def _check_centred(c: float) -> None:
    verify_interpolant(c, lambda *a: np.diag(fisher_scaled(*a)), lambda *a: np.diag(fisher_scaled_direct(*a)),
                       CHECK_POINTS, CHECK_REL)


def _check_shared(c: float) -> None:
    verify_interpolant(c, fisher_matrix, fisher_matrix_direct, CHECK_POINTS_SHARED, CHECK_REL)


def tables_ready(c: float, shared: bool = False) -> bool:
    """Whether :func:`centred_table` (and with ``shared`` :func:`shared_table`) of ``c`` would return at once."""
    return all(table_ready(kind, c, {k: t[i] for k, t in _stored().items()})
               for i, kind in enumerate(("centred", "shared")[:1 + shared]))


def centred_table(c: float, progress=None) -> np.ndarray:
    """:func:`build_centred` of ``c``: stored for :data:`STORED_RESIDUALS`, built once per session otherwise."""
    return cached_table("centred", c, {k: t[0] for k, t in _stored().items()}, build_centred, progress,
                        _check_centred)


def shared_table(c: float, progress=None) -> np.ndarray:
    """:func:`build_shared` of ``c``: stored for :data:`STORED_RESIDUALS`, built once per session otherwise."""
    return cached_table("shared", c, {k: t[1] for k, t in _stored().items()}, build_shared, progress,
                        _check_shared)


def fisher_scaled(c: float, lam1: float, lam2: float) -> np.ndarray:
    """``(F~_1, F~_2)`` at ``r = 0`` from the interpolant (stored for :data:`STORED_RESIDUALS`; for
    another ``c`` built once per session, :func:`centred_table`).

    Accuracy against :func:`fisher_scaled_direct` (eight points with ``lambda_l`` in ``[0.05, 50]``,
    errors ``E_S >= Q0/51``): 0.3 % at ``c = 0.5, 2``, at most 0.7 % for ``|c| >= 0.3`` up to ``100``
    and near ``-1`` and ``1`` (``c = -0.99``, ``0.99``, ``1.01``); 2 % at ``c = 0.2``, 4 % at ``0.1`` and
    5 % as ``c -> 0`` (down to the margin ``0.01`` of :func:`~aimlib.channels.deep_hardmax.check_residual`).
    About 1.3 % at ``lambda_l = 300``.
    """
    u = lambda_coordinate([lam1, lam2])
    return np.exp([np.polynomial.chebyshev.chebval2d(u[0], u[1], C) for C in centred_table(float(c))])


def fisher_matrix(c: float, lam1: float, lam2: float, r: float) -> np.ndarray:
    """``F~`` (2 x 2) of :func:`fisher_matrix_direct` from the interpolant in ``(lambda_1, lambda_2, r)``.

    Accuracy against :func:`fisher_matrix_direct` on the states of Wishart teachers
    (``rho_l`` in ``[0.1, 2]``, errors ``V_l >= 0.05``, ``r = sqrt(rho_1 rho_2 / (q_1 q_2))``):
    0.6 % on ``F~_11, F~_22`` and 0.12 % of ``sqrt(F~_11 F~_22)`` on ``F~_12``; off those states, at
    large ``lambda`` with ``r`` near 1, up to 2 % (the function varies on ``1 - r ~ 1/lambda``).
    """
    u = lambda_coordinate([lam1, lam2])
    vals = [np.polynomial.chebyshev.chebval3d(u[0], u[1], 2 * r - 1, C) for C in shared_table(float(c))]
    return np.array([[np.exp(vals[0]), vals[2]], [vals[2], np.exp(vals[1])]])
