r"""Two attention layers as one AIM: the forward map, and for two hardmax layers at ``T = 2`` the exact Bayes side.

The network (book, chapter "Deep attention"): layer 1 mixes the
tokens, ``X_1 = A X`` with ``A = c I + sigma(h^(1))`` (``c`` the residual
strength, ``sigma`` the row-wise hardmax or softmax), and layer 2 reads the
mixed tokens, whose trace-subtracted indices are ``A h^(2) A^T`` in terms of the
indices ``h^(2)`` of the *original* tokens; the output is ``y = sigma(A h^(2) A^T)``.
So the channel reads ``L = 2`` index matrices per sample.

Bayes side (two hardmax layers, ``T = 2``).  The latent layer-1 pattern ``P`` is
fixed by the signs ``s_i = sign(h1_ii - h1_12)``; given ``P``, the output signs
``t_i = sign(u_i)`` are signs of the linear functions ``u_1 = a_1^T h2 (a_1 - a_2)``,
``u_2 = a_2^T h2 (a_2 - a_1)`` of ``h^(2)`` (``a_i`` the rows of ``A``).  With
``h_l ~ N(omega_l, V_l Sigma)``:

.. math::  Z_{\rm out} = \sum_{P} \Phi_2\big(\kappa(s_P; \omega_1, V_1)\big)\,
           \Phi_2\Big(\frac{t_1 \mu_1}{\sigma_1}, \frac{t_2 \mu_2}{\sigma_2}; t_1 t_2 r\Big),

``mu = L omega_2``, ``Cov(u) = V_2 L D L^T`` (``D = diag(2, 1, 2)`` on the entries
``(h_11, h_12, h_22)``), ``r`` its correlation: four products of bivariate normal
orthant probabilities, no Monte Carlo.  ``g_l = d log Z_out / d omega_l`` is the
average over the posterior weights ``w_P`` of the pattern-wise gradients.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.stats import norm, qmc

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..errors import check_on_max_iter, max_iter_reached
from . import hardmax
from ._bivariate import grad_log_bvn, log_bvn_cdf
from .base import Channel, sample_indices, sigma2
from .softmax import check_beta, row_softmax

__all__ = ["DeepAttention", "PATTERNS", "functionals", "fisher_scaled", "fisher_scaled_direct", "build_table",
           "write_tables", "STORED_RESIDUALS", "limit_map", "limit_thresholds",
           "limit_error"]

#: the four layer-1 sign patterns ``(s_1, s_2)`` of ``T = 2``
PATTERNS = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
_ENTRY_VAR = np.array([2.0, 1.0, 2.0])   # Var of (h_11, h_12, h_22) in units of V


def _pattern_matrix(s1: float, s2: float) -> np.ndarray:
    """The one-hot layer-1 output ``P`` of the signs: row 1 picks token 1 iff ``s_1 > 0``, row 2 token 2 iff ``s_2 > 0``."""
    return np.array([[1.0, 0.0] if s1 > 0 else [0.0, 1.0], [0.0, 1.0] if s2 > 0 else [1.0, 0.0]])


def _bilinear(p, q) -> np.ndarray:
    """Coefficients of ``p^T h q`` on the independent entries ``(h_11, h_12, h_22)`` of a symmetric ``h``."""
    return np.array([p[0] * q[0], p[0] * q[1] + p[1] * q[0], p[1] * q[1]])


def functionals(c: float, s1: float, s2: float) -> np.ndarray:
    """``L`` (2 x 3): ``u = L (h_11, h_12, h_22)`` are the layer-2 differences given the pattern ``(s_1, s_2)``."""
    A = c * np.eye(2) + _pattern_matrix(s1, s2)
    return np.stack([_bilinear(A[0], A[0] - A[1]), _bilinear(A[1], A[1] - A[0])])


class DeepAttention(Channel):
    """Two attention layers with residual strength ``c``: ``y = sigma(A h2 A^T)``, ``A = c I + sigma(h1)``.

    Parameters
    ----------
    c : float
        Residual strength; values for which two mixed tokens coincide under some
        layer-1 pattern (``c`` in ``{-1, 0, 1}`` for hardmax layers) are refused.
    layer : {'hardmax', 'softmax'}
        The row-wise map ``sigma`` of both layers (the Bayes side: hardmax, ``T = 2``).
    beta : float
        Inverse temperature of softmax layers.
    """

    name = "deep-attention"
    n_indices = 2
    joint_output = True

    def __init__(self, c: float = 0.5, layer: str = "hardmax", beta: float = 1.0):
        super().__init__(0.0)
        self.layer = v.choice("layer", layer, {"hardmax", "softmax"})
        self.beta = check_beta(beta)
        self.c = v.real("c", c)
        if layer == "hardmax":
            for s in PATTERNS:
                A = self.c * np.eye(2) + _pattern_matrix(*s)
                if np.allclose(A[0], A[1]) or np.any(np.all(np.isclose(A, 0), axis=1)):
                    raise ValueError(f"c must make the two mixed tokens distinct under every layer-1 pattern: "
                                     f"c = {self.c:g} makes them collide (c must not be -1, 0 or 1)")

    def _params(self) -> str:
        return f"c={self.c:g}, layer={self.layer}" + (f", beta={self.beta:g}" if self.layer == "softmax" else "")

    def _sigma(self, h):
        if self.layer == "softmax":
            return row_softmax(self.beta * h)
        return hardmax.Hardmax().clean(h)

    def clean(self, h):
        """``y = sigma(A h2 A^T)`` with ``A = c I + sigma(h1)``, for ``h`` of shape ``(n, 2, T, T)``."""
        xp = get_array_module(h)
        A = self.c * xp.eye(h.shape[-1], dtype=h.dtype) + self._sigma(h[:, 0])
        return self._sigma(A @ h[:, 1] @ xp.swapaxes(A, -1, -2))

    # -- Bayes side: two hardmax layers, T = 2 ------------------------------------

    def _require_bayes(self, T: int):
        if self.layer != "hardmax" or T != 2:
            raise NotImplementedError(f"DeepAttention: the Bayes side is implemented for two hardmax layers "
                                      f"and T = 2, got layer={self.layer!r}, T={T}")

    def _layer1_terms(self, o1, V1):
        """Per pattern ``P``: ``log a_P``, the probability of the layer-1 signs, and its gradient in ``omega_1``."""
        logs, grads = [], []
        for s in PATTERNS:
            signs = np.broadcast_to(np.array(s), o1.shape[:-2] + (2,))
            logs.append(to_host(hardmax.log_partition(signs, o1, V1)))
            grads.append(to_host(hardmax.g_out(signs, o1, V1)))
        return np.stack(logs, -1), np.stack(grads, -3)

    def _layer2_terms(self, t, o2, V2):
        """Per pattern ``P``: ``log b_P``, the probability of the output signs ``t`` given ``P``, and its
        gradient in the entries ``(omega_11, omega_12, omega_22)`` of ``omega_2``."""
        w2 = np.stack([o2[..., 0, 0], 0.5 * (o2[..., 0, 1] + o2[..., 1, 0]), o2[..., 1, 1]], axis=-1)
        logs, grads = [], []
        for s in PATTERNS:
            L = functionals(self.c, *s)
            C = V2 * (L * _ENTRY_VAR) @ L.T
            sd = np.sqrt(np.diag(C))
            r = t[..., 0] * t[..., 1] * C[0, 1] / (sd[0] * sd[1])
            k = t * (w2 @ L.T) / sd
            log_b = log_bvn_cdf(k[..., 0], k[..., 1], r)
            a1, a2 = grad_log_bvn(k[..., 0], k[..., 1], r, log_b)
            logs.append(log_b)
            grads.append((a1 * t[..., 0] / sd[0])[..., None] * L[0] + (a2 * t[..., 1] / sd[1])[..., None] * L[1])
        return np.stack(logs, -1), np.stack(grads, -2)

    def _log_z_and_g(self, y, omega, V):
        """``(xp, log Z_out, g)``: the pattern sum and the posterior-weighted pattern gradients."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        self._require_bayes(T)
        t = hardmax.signs_from_output(to_host(y))
        log_a, g1s = self._layer1_terms(to_host(omega[..., 0, :, :]), V[0])
        log_b, g2s = self._layer2_terms(t, to_host(omega[..., 1, :, :]), V[1])
        return (xp,) + _pattern_posterior(log_a + log_b, g1s, g2s)

    def fisher(self, q, Q0, T):
        r"""``(F_1, F_2) = (G_1/V_1, G_2/V_2)`` at ``lambda_l = q_l/V_l`` (:func:`fisher_scaled`).

        Tabulated for ``lambda_l <= LAMBDA_MAX``, that is ``V_l >= Q0_l / (1 + LAMBDA_MAX)``.
        """
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        self._require_bayes(T)
        if min(V) <= 0 or max(a / b for a, b in zip(q, V)) > LAMBDA_MAX:
            floor = tuple(float(f"{b / (1 + LAMBDA_MAX):.3g}") for b in Q0)
            raise ValueError(f"errors mmse_l below (1 + rho_l)/{1 + LAMBDA_MAX:g} = {floor} are outside the "
                             f"tabulated range of the deep-hardmax output function, got mmse = "
                             f"{tuple(float(f'{x:.3g}') for x in V)}: lower alpha, or raise rho where the error "
                             "is this small")
        return tuple(fisher_scaled(self.c, q[0] / V[0], q[1] / V[1]) / np.array(V))

    def log_partition(self, y, omega, V):
        """``log Z_out``: the log-probability of the output signs, summed over the four latent patterns."""
        xp, logz, _ = self._log_z_and_g(y, omega, V)
        return to_device(logz, xp)

    def g_out(self, y, omega, V):
        """``(g_1, g_2)``, each symmetric ``2 x 2``, stacked on axis ``-3``: posterior-weighted pattern gradients."""
        xp, _, g = self._log_z_and_g(y, omega, V)
        return to_device(g, xp)

    def output_moments(self, q, Q0, *, shared=(0.0, 0.0), n: int = 60_000, seed=0):
        r"""``M_{ll'} = 2 sum_{a<=b} Sigma_ab E[g_{l,ab} g_{l',ab}]`` by Monte Carlo, with standard errors.

        The estimates are ``omega_l = sqrt(s_l) z_0 + sqrt(q_l - s_l) z_l`` (``z_0, z_1, z_2``
        independent, each ``N(0, Sigma)``; ``s = shared``) and ``h_l | omega ~ N(omega_l,
        (Q0_l - q_l) Sigma)``.  Wishart teachers ``S_l = sqrt(rho_l) I + F_l`` share the index of
        the identity, ``s = rho`` (book, chapter "Deep attention"); centred teachers have
        ``s = 0``, the law of :meth:`fisher`.  The diagonal of ``M`` is ``F_l``
        under that law, the off-diagonal the cross term the diagonal state evolution drops.

        Returns
        -------
        (M, se) : two (2, 2) arrays, the moments and their standard errors.
        """
        rng = v.generator(seed)
        q, Q0, _, V = self._fisher_args(q, Q0, 2)
        s = tuple(v.in_range(f"shared[{i}]", x, 0.0, q[i]) for i, x in enumerate(np.broadcast_to(shared, (2,))))
        n = v.integer("n", n, minimum=100)
        z0 = sample_indices(n, 2, 1.0, rng)
        omega = np.stack([np.sqrt(s[l]) * z0 + sample_indices(n, 2, q[l] - s[l], rng) for l in range(2)], axis=1)
        h = omega + np.stack([sample_indices(n, 2, V[l], rng) for l in range(2)], axis=1)
        iu = np.triu_indices(2)
        g = self.g_out(self(h, seed=rng), omega, V)[..., iu[0], iu[1]]
        terms = 2 * np.einsum("nlk,nmk,k->nlm", g, g, sigma2(2)[iu])
        return terms.mean(axis=0), terms.std(axis=0) / np.sqrt(n)


def _pattern_posterior(logs, g1s, g2s):
    """``(log Z_out, g)`` from the per-pattern ``log a_P b_P`` and gradients: ``Z_out = sum_P a_P b_P``
    and ``g_l = sum_P w_P g_{l,P}`` with the posterior weights ``w_P = a_P b_P / Z_out``."""
    top = logs.max(axis=-1, keepdims=True)
    w = np.exp(logs - top)
    total = w.sum(axis=-1, keepdims=True)
    w /= total
    g1 = (w[..., None, None] * g1s).sum(axis=-3)
    e = (w[..., None] * g2s).sum(axis=-2)
    g2 = np.stack([np.stack([e[..., 0], e[..., 1]], -1), np.stack([e[..., 1], e[..., 2]], -1)], -2)
    return (top + np.log(total))[..., 0], np.stack([g1, g2], axis=-3)


# -- F_l: deterministic quasi-Monte Carlo over omega, exact sum over the outputs ---------

SOBOL_LOG2 = 12       # 2^12 scrambled Sobol points for the six omega entries
CHEB_DEG = 10         # degree of the 2-d Chebyshev interpolant of log G_l per axis
LAMBDA_MAX = 1e3      # largest q_l / V_l tabulated (errors down to about 1e-3)
SOBOL_SEED = 20251130  # the fixed scramble: F_l is a deterministic function of lambda
_X_MIN = 1.0 / np.sqrt(1.0 + LAMBDA_MAX)
#: residual strengths whose interpolants ship with the package (``aimlib/data``), checked by the tests
STORED_RESIDUALS = (0.5, 2.0, -0.5, 3.0)
TABLES = Path(__file__).resolve().parents[1] / "data" / "deep_hardmax_tables.npz"


@lru_cache(maxsize=1)
def _sobol_normals():
    return norm.ppf(qmc.Sobol(d=6, scramble=True, seed=SOBOL_SEED).random_base2(SOBOL_LOG2))


def fisher_scaled_direct(channel: "DeepAttention", lam1: float, lam2: float) -> np.ndarray:
    r"""``(G_1, G_2)`` with ``F_l = G_l(lambda_1, lambda_2) / V_l``, ``lambda_l = q_l / V_l``.

    ``g_l`` scales as ``V_l^{-1/2}`` times a function of ``omega_l / sqrt(V_l)``, so at
    ``V = (1, 1)`` and ``omega_l ~ N(0, lambda_l Sigma)``:
    ``G_l = 2 sum_{a<=b} Sigma_ab E_omega sum_y Z_out(y) g_{l,ab}(y)^2``, the four
    outputs summed exactly and ``omega`` averaged over scrambled Sobol points
    (fixed scramble: a deterministic function of ``lambda``).
    """
    z = _sobol_normals()
    sd = np.sqrt(_ENTRY_VAR)
    omega = np.zeros((len(z), 2, 2, 2))
    for ell, lam in enumerate((lam1, lam2)):
        e = z[:, 3 * ell:3 * ell + 3] * sd * np.sqrt(lam)
        omega[:, ell] = np.stack([np.stack([e[:, 0], e[:, 1]], -1), np.stack([e[:, 1], e[:, 2]], -1)], -2)
    log_a, g1s = channel._layer1_terms(omega[:, 0], 1.0)    # the same for every output
    G = np.zeros(2)
    for t in PATTERNS:
        log_b, g2s = channel._layer2_terms(np.broadcast_to(np.array(t), (len(z), 2)), omega[:, 1], 1.0)
        logz, g = _pattern_posterior(log_a + log_b, g1s, g2s)
        p = np.exp(logz)
        G += 2 * np.mean(p[:, None] * (2 * g[..., 0, 0] ** 2 + g[..., 0, 1] ** 2 + 2 * g[..., 1, 1] ** 2), axis=0)
    return G


def chebyshev_grid() -> tuple[np.ndarray, np.ndarray]:
    """``(u, lambda)``: the Chebyshev nodes ``u`` in ``[-1, 1]`` and the ``lambda_l`` they stand for."""
    u = np.cos(np.pi * (np.arange(CHEB_DEG + 1) + 0.5) / (CHEB_DEG + 1))
    return u, 1.0 / (_X_MIN + (1.0 - _X_MIN) * (u + 1) / 2) ** 2 - 1.0


def build_table(c: float) -> np.ndarray:
    """Chebyshev coefficients ``(2, deg + 1, deg + 1)`` of ``log G_l`` in ``x_l = 1/sqrt(1 + lambda_l)``."""
    ch = DeepAttention(c=c)
    u, lam = chebyshev_grid()
    vals = np.array([[np.log(fisher_scaled_direct(ch, max(a, 0.0), max(b, 0.0))) for b in lam] for a in lam])
    Vinv = np.linalg.inv(np.polynomial.chebyshev.chebvander(u, CHEB_DEG))   # tensor grid: C = V^-1 F V^-T
    return np.stack([Vinv @ vals[..., ell] @ Vinv.T for ell in range(2)])


def _table_settings() -> np.ndarray:
    return np.array([SOBOL_LOG2, CHEB_DEG, LAMBDA_MAX, SOBOL_SEED], dtype=float)


def write_tables(path=TABLES, residuals=STORED_RESIDUALS) -> Path:
    """Build the tables of ``residuals`` and store them (``scripts/make_deep_hardmax_tables.py``)."""
    coef = np.stack([build_table(c) for c in residuals])
    np.savez(path, c=np.array(residuals, dtype=float), coef=coef, settings=_table_settings())
    return Path(path)


@lru_cache(maxsize=1)
def _stored() -> dict:
    """The stored tables by ``c``, if they were made with this module's settings (else none)."""
    if not TABLES.is_file():
        return {}
    with np.load(TABLES) as f:
        if not np.array_equal(f["settings"], _table_settings()):
            return {}
        return {float(c): coef for c, coef in zip(f["c"], f["coef"])}


@lru_cache(maxsize=16)
def _cheb(c: float) -> np.ndarray:
    """The coefficients for ``c``: stored for :data:`STORED_RESIDUALS`, built (tens of seconds) otherwise."""
    stored = _stored().get(c)
    return stored if stored is not None else build_table(c)


def fisher_scaled(c: float, lam1: float, lam2: float) -> np.ndarray:
    """``(G_1, G_2)`` from the interpolant (stored for :data:`STORED_RESIDUALS`; for another ``c`` built
    once per session, about 20 s on one core).

    Accuracy against :func:`fisher_scaled_direct`: 0.1 % for ``lambda_l <= 50``
    (errors ``E_S >= Q0/51``), about 1 % for ``lambda_l`` in ``[100, 1000]``.
    """
    x = 1.0 / np.sqrt(1.0 + np.array([lam1, lam2]))
    u = 2.0 * (x - _X_MIN) / (1.0 - _X_MIN) - 1.0
    return np.exp([np.polynomial.chebyshev.chebval2d(u[0], u[1], C) for C in _cheb(float(c))])


# -- the rho -> 0 limit at fixed alpha_bar = alpha / rho (both layers) ------------------

def limit_map(E, alpha_bar: float, c: float) -> np.ndarray:
    r"""One step of the two-layer state evolution as ``rho_1 = rho_2 = rho -> 0`` at fixed ``alpha_bar = alpha/rho``.

    Per layer, as for one hardmax layer: ``E_l -> 1 - (1 - delta_l)_+^2`` with
    ``delta_l = 1/(alpha_bar F_l)``, ``F_l = G_l(lambda_1, lambda_2) / E_l`` and
    ``lambda_l = (1 - E_l)/E_l`` (``Q0 -> 1``, ``V_l = E_l``): each prior has become a
    vanishing-rank-fraction spike whose Bayes error is the BBP formula.
    """
    E = np.asarray(E, dtype=float)
    if E.shape != (2,) or not np.all((E > 0) & (E <= 1)):
        raise ValueError(f"E must hold two errors in (0, 1], got {E!r}")
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    lam = np.minimum((1.0 - E) / E, LAMBDA_MAX)
    delta = E / (alpha_bar * fisher_scaled(c, *lam))
    return 1.0 - np.maximum(1.0 - delta, 0.0) ** 2


def limit_error(alpha_bar: float, c: float, *, tol: float = 1e-10, max_iter: int = 20_000,
                on_max_iter: str = "raise") -> np.ndarray:
    """Fixed point ``(E_1, E_2)`` of :func:`limit_map` from the uninformative start ``E = (1, 1)``.

    At ``max_iter`` the rule of :mod:`aimlib.errors` applies (``on_max_iter``).
    """
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    E = np.ones(2)
    for _ in range(max_iter):
        E_new = np.maximum(limit_map(E, alpha_bar, c), 1.0 / (1.0 + LAMBDA_MAX))
        if np.max(np.abs(E_new - E)) <= tol:
            return E_new
        E = E_new
    max_iter_reached(f"the rho -> 0 two-layer SE did not converge at alpha_bar={alpha_bar} in {max_iter} "
                     f"iterations (last E={E.tolist()})", on_max_iter)
    return E


def limit_thresholds(c: float, *, tol: float = 1e-6, alpha_bar_max: float = 100.0) -> np.ndarray:
    r"""``(alpha_bar_1, alpha_bar_2)``: where each layer's error leaves 1 in the ``rho -> 0`` limit.

    ``E = (1, 1)`` loses stability in layer ``l`` at ``1/G_l(0, 0)``; the smaller of the
    two is the weak-recovery threshold of that layer.  ``G_l(0, 0)`` is exact (at
    ``lambda = 0`` the estimates vanish and :func:`fisher_scaled_direct` is a finite sum
    over the outputs and patterns, not the interpolant).  The other layer's onset is
    found by bisection on :func:`limit_error` (the smallest ``alpha_bar`` with
    ``E_l < 1 - 1e-9``, through the interpolant), to ``tol`` in ``alpha_bar``.
    """
    tol = v.positive("tol", tol)
    linear = 1.0 / fisher_scaled_direct(DeepAttention(c=c), 0.0, 0.0)
    first = int(np.argmin(linear))
    lo, hi = linear[first], v.positive("alpha_bar_max", alpha_bar_max)
    if limit_error(hi, c)[1 - first] > 1 - 1e-9:
        raise ValueError(f"layer {2 - first} keeps E = 1 up to alpha_bar_max = {hi:g}; raise alpha_bar_max")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if limit_error(mid, c)[1 - first] > 1 - 1e-9 else (lo, mid)
    out = np.empty(2)
    out[first], out[1 - first] = linear[first], hi
    return out
