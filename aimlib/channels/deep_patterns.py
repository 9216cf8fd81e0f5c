r"""The Bayes side of two hardmax attention layers at ``T = 2``: the pattern sum and its output functions.

The channel (:class:`aimlib.channels.DeepAttention`, book chapter "Deep attention") reads
``y = hardmax(A h2 A^T)`` with ``A = c I + P``, ``P = hardmax(h1)``.  The latent layer-1
pattern ``P`` is fixed by the signs ``s_i = sign(h1_ii - h1_12)``; given ``P`` the output
signs ``t_i = sign(u_i)`` are signs of the linear functions ``u = L_P (h2_11, h2_12, h2_22)``
(:func:`functionals`).  With ``h_l ~ N(omega_l, V_l Sigma)`` independently given the
estimates,

.. math::  Z_{\rm out} = \sum_{P} a_P(\omega_1, V_1)\, b_P(t; \omega_2, V_2),

``a_P`` the one-layer hardmax probability of the signs of ``P`` and ``b_P`` a bivariate normal
orthant probability: four products, no Monte Carlo.

Output functions.  ``g_l = d log Z_out / d omega_l`` scales as ``V_l^{-1/2}`` times a function
of ``omega_l / sqrt(V_l)``, so ``E[<g_l, g_l'>_Sigma] = G_ll' / sqrt(V_l V_l')`` with ``G`` a
function of ``lambda_l = q_l / V_l`` and of the correlation ``r`` of the two estimates
(``r = 0`` for centred teachers, ``r = sqrt(s_1 s_2 / (q_1 q_2))`` when the teachers share a
known part of squared norm ``s_l``).  ``G`` is a deterministic quasi-Monte Carlo average
(a fixed scramble) with the four outputs summed exactly, read from Chebyshev interpolants
(:func:`fisher_scaled` at ``r = 0``, :func:`fisher_matrix` for ``r`` in ``[0, 1]``).

The building blocks are generic in the mixing matrix ``M`` that a layer's tokens went through
(:func:`mixed_functionals`, :func:`orthant_terms`, :func:`mixed_terms`, :func:`history_posterior`):
:mod:`aimlib.channels.deep_histories` sums over the pattern histories of more layers with them.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import _validate as v
from ..backend import to_host
from . import hardmax
from .._lazy import LazyModule
from ._bivariate import grad_log_bvn, log_bvn_cdf

special = LazyModule("scipy.special")   # loaded on first use: `import aimlib.channels` needs no SciPy

__all__ = ["PATTERNS", "ENTRY_VAR", "pattern_matrix", "mixed_functionals", "functionals", "entries",
           "symmetric_matrix", "layer1_terms", "orthant_terms", "mixed_terms", "layer2_terms", "history_posterior",
           "pattern_posterior", "sigma_products", "lambda_nodes", "lambda_coordinate", "chebyshev_fit",
           "fisher_matrix_direct", "fisher_scaled_direct", "oracle_fisher_scaled", "fisher_scaled", "fisher_matrix",
           "build_tables", "write_tables", "save_tables", "load_tables", "STORED_RESIDUALS", "LAMBDA_MAX"]

#: the four layer-1 sign patterns ``(s_1, s_2)`` of ``T = 2``
PATTERNS = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
#: Var of the independent entries ``(h_11, h_12, h_22)`` in units of ``V``
ENTRY_VAR = np.array([2.0, 1.0, 2.0])


def pattern_matrix(s1: float, s2: float) -> np.ndarray:
    """The one-hot layer-1 output ``P`` of the signs: row 1 picks token 1 iff ``s_1 > 0``, row 2 token 2 iff ``s_2 > 0``."""
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
    (:func:`mixed_functionals` of ``A = c I + P``)."""
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
    ``A = c I + P``)."""
    return mixed_terms([c * np.eye(2) + pattern_matrix(*s) for s in PATTERNS], t, o2, V2)


def history_posterior(logs, grads):
    """``(log Z_out, g)`` from the per-history ``log prod_l b_l`` (last axis) and each layer's gradients
    (entries, ``(..., H, 3)``): ``Z_out = sum_H prod_l b_l`` and ``g_l = sum_H w_H g_{l,H}`` with the
    posterior weights ``w_H = prod_l b_l / Z_out``; ``g`` stacks the symmetric ``g_l`` on axis ``-3``."""
    top = logs.max(axis=-1, keepdims=True)
    w = np.exp(logs - top)
    total = w.sum(axis=-1, keepdims=True)
    w /= total
    g = [symmetric_matrix((w[..., None] * gs).sum(axis=-2)) for gs in grads]
    return (top + np.log(total))[..., 0], np.stack(g, axis=-3)


def pattern_posterior(logs, g1s, g2s):
    """``(log Z_out, g)`` of two layers from the per-pattern ``log a_P b_P`` and gradients
    (:func:`history_posterior`; ``g1s`` as matrices, ``g2s`` as entries)."""
    return history_posterior(logs, (entries(g1s), g2s))


# -- G: deterministic quasi-Monte Carlo over omega, exact sum over the outputs ------------

SOBOL_LOG2 = 12       # 2^12 scrambled Sobol points for the six omega entries
CHEB_DEG = 10         # degree of the Chebyshev interpolants per lambda axis
R_DEG = 8             # degree in the correlation r of the shared-law interpolant
LAMBDA_MAX = 1e3      # largest q_l / V_l tabulated (errors down to about 1e-3)
SOBOL_SEED = 20251130  # the fixed scramble: G is a deterministic function of (lambda, r)
_X_MIN = 1.0 / np.sqrt(1.0 + LAMBDA_MAX)
#: residual strengths whose interpolants ship with the package (``aimlib/data``), checked by the tests
STORED_RESIDUALS = (0.5, 2.0, -0.5, 3.0)
TABLES = Path(__file__).resolve().parents[1] / "data" / "deep_hardmax_tables.npz"
_SIGMA_WEIGHTS = np.array([[2.0, 0.5], [0.5, 2.0]])   # 2 sum_{a<=b} Sigma_ab x_ab y_ab = 2 sum_ab W_ab x_ab y_ab


@lru_cache(maxsize=1)
def _sobol_normals():
    qmc = importlib.import_module("scipy.stats.qmc")
    return special.ndtri(qmc.Sobol(d=6, scramble=True, seed=SOBOL_SEED).random_base2(SOBOL_LOG2))


def _estimates(lam1: float, lam2: float, r: float) -> np.ndarray:
    """Sobol draws of ``(omega_1, omega_2)`` (``(N, 2, 2, 2)``): ``omega_l ~ N(0, lambda_l Sigma)``,
    each entry of ``omega_2`` of correlation ``r`` with the same entry of ``omega_1``."""
    z = _sobol_normals()
    e1 = z[:, :3] * np.sqrt(ENTRY_VAR * lam1)
    e2 = (r * z[:, :3] + np.sqrt(1.0 - r * r) * z[:, 3:]) * np.sqrt(ENTRY_VAR * lam2)
    return np.stack([symmetric_matrix(e1), symmetric_matrix(e2)], axis=1)


def sigma_products(p, g, h) -> np.ndarray:
    """``2 E[p sum_{a<=b} Sigma_ab g_{l,ab} h_{l',ab}]`` over the sample axis, an ``(L, L)`` array."""
    return 2 * np.einsum("n,nlab,nmab,ab->lm", p, g, h, _SIGMA_WEIGHTS) / len(p)


def fisher_matrix_direct(c: float, lam1: float, lam2: float, r: float = 0.0) -> np.ndarray:
    r"""``G`` (2 x 2) with ``E[<g_l, g_l'>_Sigma] = G_ll' / sqrt(V_l V_l')`` at ``lambda_l = q_l / V_l``.

    At ``V = (1, 1)`` and ``omega_l ~ N(0, lambda_l Sigma)`` with entrywise correlation ``r``:
    ``G_ll' = 2 sum_{a<=b} Sigma_ab E_omega sum_y Z_out(y) g_{l,ab}(y) g_{l',ab}(y)``, the four
    outputs summed exactly and ``omega`` averaged over scrambled Sobol points (fixed scramble:
    a deterministic function of ``(lambda, r)``).  The diagonal at ``r = 0`` is
    :func:`fisher_scaled_direct`; the off-diagonal is the cross term, zero at ``r = 0``
    (book, chapter "Deep attention": the layer-2 sign flip).
    """
    omega = _estimates(lam1, lam2, r)
    log_a, g1s = layer1_terms(omega[:, 0], 1.0)    # the same for every output
    G = np.zeros((2, 2))
    for t in PATTERNS:
        log_b, g2s = layer2_terms(c, np.broadcast_to(np.array(t), (len(omega), 2)), omega[:, 1], 1.0)
        logz, g = pattern_posterior(log_a + log_b, g1s, g2s)
        G += sigma_products(np.exp(logz), g, g)
    return G


def fisher_scaled_direct(c: float, lam1: float, lam2: float) -> np.ndarray:
    """``(G_1, G_2)``: the diagonal of :func:`fisher_matrix_direct` at ``r = 0`` (centred teachers),
    ``F_l = G_l / V_l``."""
    return np.diag(fisher_matrix_direct(c, lam1, lam2, 0.0)).copy()


def oracle_fisher_scaled(c: float, layer: int, lam: float, r: float) -> float:
    r"""``G`` of layer ``layer`` when the other layer's index is known: ``F = G / V_layer``.

    The oracle that is given the other teacher matrix observes that layer's index ``h_o``
    exactly; ``omega ~ N(0, lambda Sigma)`` (at ``V = 1``) has entrywise correlation ``r``
    with ``h_o`` (of unit variance: only its signs enter).  The known layer's factor of
    ``Z_out`` is an indicator: layer 1 known fixes the pattern ``P``; layer 2 known fixes,
    per pattern, the output signs.
    """
    layer = v.choice("layer", layer, {1, 2})
    known = _estimates(1.0, 1.0, r)
    omega = np.sqrt(lam) * known[:, 1]       # the estimated layer's omega; known[:, 0] is h_o
    n = len(omega)
    if layer == 2:
        e = entries(known[:, 0])
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
            u = np.stack([entries(known[:, 0]) @ functionals(c, *s).T for s in PATTERNS], 1)
            log_b = np.where(np.all(np.sign(u) == tt[:, None, :], axis=-1), 0.0, -np.inf)
            g2s = np.zeros((n, 4, 3))
        ok = np.isfinite((log_a + log_b).max(axis=-1))
        logz, g = pattern_posterior((log_a + log_b)[ok], g1s[ok], g2s[ok])
        gl = g[:, layer - 1:layer]
        G += float(sigma_products(np.exp(logz), gl, gl)[0, 0]) * ok.mean()
    return G


# -- the interpolants -------------------------------------------------------------------

def _nodes(deg: int) -> np.ndarray:
    return np.cos(np.pi * (np.arange(deg + 1) + 0.5) / (deg + 1))


def _lambda(u):
    """The ``lambda`` of the Chebyshev variable ``u`` in ``[-1, 1]`` (``x = 1/sqrt(1 + lambda)`` in ``[x_min, 1]``)."""
    return 1.0 / (_X_MIN + (1.0 - _X_MIN) * (np.asarray(u) + 1) / 2) ** 2 - 1.0


def lambda_nodes(deg: int = CHEB_DEG) -> np.ndarray:
    """The ``lambda >= 0`` at the ``deg + 1`` Chebyshev nodes of the variable ``x = 1/sqrt(1 + lambda)``."""
    return np.maximum(_lambda(_nodes(deg)), 0.0)


def lambda_coordinate(lam) -> np.ndarray:
    """The Chebyshev variable ``u`` in ``[-1, 1]`` of ``lambda`` (the inverse of the map of :func:`lambda_nodes`)."""
    return 2.0 * (1.0 / np.sqrt(1.0 + np.asarray(lam, dtype=float)) - _X_MIN) / (1.0 - _X_MIN) - 1.0


def chebyshev_fit(vals: np.ndarray, degrees) -> np.ndarray:
    """Chebyshev coefficients of the tensor-grid values ``vals`` (``C = V^-1 F V^-T`` per axis)."""
    C = vals
    for axis, deg in enumerate(degrees):
        Vinv = np.linalg.inv(np.polynomial.chebyshev.chebvander(_nodes(deg), deg))
        C = np.moveaxis(np.tensordot(Vinv, C, axes=(1, axis)), 0, axis)
    return C


def build_tables(c: float) -> tuple[np.ndarray, np.ndarray]:
    """Chebyshev coefficients for ``c``: ``(centred, shared)``.

    ``centred`` (``(2, deg+1, deg+1)``): ``log G_l`` at ``r = 0`` in ``x_l = 1/sqrt(1 + lambda_l)``.
    ``shared`` (``(3, deg+1, deg+1, R_DEG+1)``): ``log G_11``, ``log G_22`` and ``G_12`` in
    ``(x_1, x_2, r)``, ``r`` in ``[0, 1]``.
    """
    lam, rs = _lambda(_nodes(CHEB_DEG)), (_nodes(R_DEG) + 1) / 2
    flat = np.array([[[fisher_matrix_direct(c, max(a, 0.0), max(b, 0.0), r) for r in rs] for b in lam]
                     for a in lam])
    shared = np.stack([np.log(flat[..., 0, 0]), np.log(flat[..., 1, 1]), flat[..., 0, 1]])
    centred = np.stack([np.log(fisher_scaled_direct(c, max(a, 0.0), max(b, 0.0))) for a in lam for b in lam])
    centred = centred.reshape(len(lam), len(lam), 2)
    return (np.stack([chebyshev_fit(centred[..., ell], (CHEB_DEG, CHEB_DEG)) for ell in range(2)]),
            np.stack([chebyshev_fit(f, (CHEB_DEG, CHEB_DEG, R_DEG)) for f in shared]))


def _table_settings() -> np.ndarray:
    return np.array([SOBOL_LOG2, CHEB_DEG, R_DEG, LAMBDA_MAX, SOBOL_SEED], dtype=float)


def save_tables(path, residuals, settings: np.ndarray, **arrays) -> Path:
    """Store Chebyshev tables: ``c`` (the residual strengths), the ``arrays`` (one entry per ``c``
    each) and the ``settings`` they were made with."""
    np.savez(path, c=np.array(residuals, dtype=float), settings=settings, **arrays)
    return Path(path)


def load_tables(path, settings: np.ndarray, fields) -> dict:
    """The tables stored at ``path`` by ``c``, a tuple of the ``fields`` each, if they were made
    with ``settings`` (else none)."""
    if not Path(path).is_file():
        return {}
    with np.load(path) as f:
        if not np.array_equal(f["settings"], settings):
            return {}
        return {float(c): tuple(f[k][i] for k in fields) for i, c in enumerate(f["c"])}


def write_tables(path=TABLES, residuals=STORED_RESIDUALS) -> Path:
    """Build the tables of ``residuals`` and store them (``scripts/make_deep_hardmax_tables.py``)."""
    built = [build_tables(c) for c in residuals]
    return save_tables(path, residuals, _table_settings(), coef=np.stack([b[0] for b in built]),
                       shared=np.stack([b[1] for b in built]))


@lru_cache(maxsize=1)
def _stored() -> dict:
    """The stored two-layer tables by ``c`` (:func:`load_tables`)."""
    return load_tables(TABLES, _table_settings(), ("coef", "shared"))


@lru_cache(maxsize=16)
def _tables(c: float) -> tuple:
    """The coefficients for ``c``: stored for :data:`STORED_RESIDUALS`, built (two to three minutes) otherwise."""
    stored = _stored().get(c)
    return stored if stored is not None else build_tables(c)


def fisher_scaled(c: float, lam1: float, lam2: float) -> np.ndarray:
    """``(G_1, G_2)`` at ``r = 0`` from the interpolant (stored for :data:`STORED_RESIDUALS`; for
    another ``c`` built once per session, two to three minutes on one core).

    Accuracy against :func:`fisher_scaled_direct`: 0.1 % for ``lambda_l <= 50``
    (errors ``E_S >= Q0/51``), about 1 % for ``lambda_l`` in ``[100, 1000]``.
    """
    u = lambda_coordinate([lam1, lam2])
    return np.exp([np.polynomial.chebyshev.chebval2d(u[0], u[1], C) for C in _tables(float(c))[0]])


def fisher_matrix(c: float, lam1: float, lam2: float, r: float) -> np.ndarray:
    """``G`` (2 x 2) of :func:`fisher_matrix_direct` from the interpolant in ``(lambda_1, lambda_2, r)``.

    Accuracy against :func:`fisher_matrix_direct` on the states of Wishart teachers
    (``rho_l`` in ``[0.1, 2]``, errors ``V_l >= 0.05``, ``r = sqrt(rho_1 rho_2 / (q_1 q_2))``):
    0.6 % on ``G_11, G_22`` and 0.12 % of ``sqrt(G_11 G_22)`` on ``G_12``; off those states, at
    large ``lambda`` with ``r`` near 1, up to 2 % (the function varies on ``1 - r ~ 1/lambda``).
    """
    u = lambda_coordinate([lam1, lam2])
    vals = [np.polynomial.chebyshev.chebval3d(u[0], u[1], 2 * r - 1, C) for C in _tables(float(c))[1]]
    return np.array([[np.exp(vals[0]), vals[2]], [vals[2], np.exp(vals[1])]])
