r"""The hardmax channel: each row of ``y`` is one-hot at ``argmax_b h_ab`` (the ``beta -> infinity`` softmax).

Bayes side, noiseless (derived in the book, chapter "Hardmax attention with two and three
tokens"); ``T = 3`` is the Gaussian cone of :mod:`aimlib.channels.hardmax_polytope`,
``T = 2`` is here.  The output is fixed by two signs ``s_i = sign(h_ii - h_12)``; given
``h ~ N(omega, V Sigma)`` the differences ``u_i = h_ii - h_12`` have means
``m_i = omega_ii - omega_12``, variance ``3V`` and correlation ``1/3``, so

.. math::  Z_{\rm out} = \Phi_2(\kappa_1, \kappa_2; s_1 s_2/3),\quad \kappa_i = \frac{s_i m_i}{\sqrt{3V}},\qquad
           g_{ii} = \frac{s_i \eta_i}{\sqrt{3V}},\quad g_{12} = -(g_{11} + g_{22}),

with ``eta_i = d log Phi_2 / d kappa_i`` evaluated in log space
(:mod:`aimlib.channels._bivariate`).  ``F_out(q) = 𝓕(q/V)/V`` with a universal
function ``𝓕`` computed by deterministic quadrature (:func:`fisher_scaled`).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..errors import check_on_max_iter, max_iter_reached
from . import hardmax_polytope
from .._lazy import LazyModule
from ._bivariate import bvn_cdf, grad_log_bvn, log_bvn_cdf, log_phi
from .base import Channel

special = LazyModule("scipy.special")   # loaded on first use: `import aimlib.channels` needs no SciPy

__all__ = ["Hardmax", "CORRELATION", "log_bvn_cdf", "bvn_cdf", "signs_from_output", "output_from_signs",
           "log_partition", "g_out", "probabilities", "fisher", "fisher_scaled", "weak_recovery_threshold",
           "limit_error", "limit_map", "reduced_inputs", "gauss_rule", "BOX_K", "cheb_coefficients"]

#: correlation of ``u_1 = h_11 - h_12`` and ``u_2 = h_22 - h_12``
CORRELATION = 1.0 / 3.0
# Gauss-Legendre rule of the F_out integrals (per dimension)
_GLF_X, _GLF_W = np.polynomial.legendre.leggauss(48)


class Hardmax(Channel):
    """Row-wise one-hot argmax: ``y_ab = 1`` if ``b = argmax_c h_ac``, else 0.

    Bayes side: noiseless, ``T = 2`` (this module's functions; ``y`` the one-hot output
    ``(..., 2, 2)`` or the signs ``(..., 2)``) or ``T = 3`` (:mod:`.hardmax_polytope`, one-hot ``y``).
    """

    name = "hardmax"
    max_T = hardmax_polytope.MAX_T
    max_T_why = ("its Bayes side is a Gaussian cone of T(T-1) inequalities, tabulated and tested up "
                 f"to T = {hardmax_polytope.MAX_T}")
    noise_max_T = 0
    threshold = "weak"
    threshold_max_T = hardmax_polytope.THRESHOLD_MAX_T
    threshold_max_T_why = "a sum over the argmax patterns, 218 at T = 4, of Gaussian cones of T(T-1) inequalities"

    def weak_threshold(self, T: int) -> float:
        """``alpha_bar_WR(T)``, the weak-recovery threshold as ``rho -> 0``: the closed form at
        ``T = 2`` (:func:`weak_recovery_threshold`), the cones' sum up to ``threshold_max_T``
        (:func:`aimlib.channels.hardmax_polytope.weak_recovery_threshold`)."""
        if v.integer("T", T, minimum=2) == 2:
            return weak_recovery_threshold()
        return hardmax_polytope.weak_recovery_threshold(T)

    def clean(self, h):
        xp = get_array_module(h)
        idx = xp.argmax(h, axis=-1)
        return (xp.arange(h.shape[-1]) == idx[..., None]).astype(h.dtype)

    def _require_bayes(self, what: str):
        if self.noise > 0:
            raise self._not_implemented(what)

    def log_partition(self, y, omega, V):
        r"""``log Z_out``: ``log Phi_2(kappa_1, kappa_2; s_1 s_2 / 3)`` at ``T = 2`` (:func:`log_partition`)."""
        self._require_bayes("log_partition")
        return (log_partition if np.shape(omega)[-1] == 2 else hardmax_polytope.log_partition)(y, omega, V)

    def g_out(self, y, omega, V):
        r"""``d log Z_out / d omega_ab`` as a symmetric ``(..., T, T)`` array (:func:`g_out` at ``T = 2``)."""
        self._require_bayes("g_out")
        return (g_out if np.shape(omega)[-1] == 2 else hardmax_polytope.g_out)(y, omega, V)

    def fisher(self, q, Q0, T):
        r"""``F_out(q) = 𝓕(q/V)/V``: quadrature at ``T = 2`` (:func:`fisher`), the table at ``T = 3``."""
        self._require_bayes("fisher")
        T = hardmax_polytope.check_T(T)
        return fisher(q, Q0) if T == 2 else hardmax_polytope.fisher(q, Q0, T)


# -- outputs ---------------------------------------------------------------------------
def signs_from_output(y):
    r"""Convert one-hot hardmax outputs ``(..., 2, 2)`` to signs ``(..., 2)``.

    Row ``a`` of ``y`` is one-hot at ``argmax_b h_ab``:
    ``s_1 = +1`` iff ``y_11 = 1`` (``h_11 > h_12``), ``s_2 = +1`` iff ``y_22 = 1``
    (``h_22 > h_21``).
    """
    y = to_host(v.finite_array("y", y))
    if y.ndim < 2 or y.shape[-2:] != (2, 2):
        raise ValueError(f"y must have shape (..., 2, 2) (one-hot rows), got {tuple(y.shape)}")
    if not (np.all((y == 0) | (y == 1)) and np.all(y.sum(axis=-1) == 1)):
        raise ValueError("y must have one-hot rows (entries 0/1, one 1 per row): "
                         "the noiseless hardmax output")
    s1 = np.where(y[..., 0, 0] == 1, 1.0, -1.0)
    s2 = np.where(y[..., 1, 1] == 1, 1.0, -1.0)
    return np.stack([s1, s2], axis=-1)


def output_from_signs(s):
    """Inverse of :func:`signs_from_output`: signs ``(..., 2)`` to one-hot ``(..., 2, 2)``."""
    s = _check_signs(s)
    y = np.zeros(s.shape[:-1] + (2, 2))
    y[..., 0, 0] = s[..., 0] > 0
    y[..., 0, 1] = s[..., 0] < 0
    y[..., 1, 1] = s[..., 1] > 0
    y[..., 1, 0] = s[..., 1] < 0
    return y


def _check_signs(s):
    s = to_host(v.finite_array("y", s))
    if s.ndim < 1 or s.shape[-1] != 2:
        raise ValueError(f"y as signs must have shape (..., 2), got {tuple(s.shape)}")
    if not np.all(np.abs(s) == 1):
        raise ValueError("y as signs must contain only +1 and -1 (s_i = sign(h_ii - h_12))")
    return s.astype(float)


def reduced_inputs(y, omega, V):
    """The Bayes side's inputs (as :func:`g_out`'s) validated and reduced: ``(xp, s, m1, m2, sqrt(3V))``.

    ``xp`` the array module, ``s`` the output signs, ``m_i = omega_ii - omega_12``; ``V`` broadcast to the batch."""
    xp = get_array_module(y, omega)
    omega = to_host(v.finite_array("omega", omega))
    if omega.ndim < 2 or omega.shape[-2:] != (2, 2):
        raise ValueError(f"omega must have shape (..., 2, 2) (the hardmax Bayes side needs T = 2), "
                         f"got {tuple(omega.shape)}")
    y_arr = to_host(v.finite_array("y", y))
    if y_arr.ndim == omega.ndim:
        if y_arr.shape[-2:] != (2, 2):
            raise ValueError(f"y must have shape (..., 2, 2) or (..., 2), got {tuple(y_arr.shape)}")
        s = signs_from_output(y_arr)
    elif y_arr.ndim == omega.ndim - 1:
        s = _check_signs(y_arr)
    else:
        raise ValueError(f"y must be one-hot outputs of the shape of omega {tuple(omega.shape)} "
                         f"or signs of shape {tuple(omega.shape[:-1])}, got {tuple(y_arr.shape)}")
    if s.shape[:-1] != omega.shape[:-2]:
        raise ValueError(f"y and omega describe different batches: {tuple(y_arr.shape)} vs "
                         f"{tuple(omega.shape)}")
    if np.ndim(V) == 0:
        V = v.positive("V", V)
    else:
        V = v.finite_array("V", to_host(V))
        if not np.all(V > 0):
            raise ValueError("V must be > 0 (the posterior variance of the indices)")
    V = np.broadcast_to(np.asarray(V, dtype=float), omega.shape[:-2])
    m1 = omega[..., 0, 0] - 0.5 * (omega[..., 0, 1] + omega[..., 1, 0])
    m2 = omega[..., 1, 1] - 0.5 * (omega[..., 0, 1] + omega[..., 1, 0])
    return xp, s, m1, m2, np.sqrt(3.0 * V)


def log_partition(y, omega, V):
    r"""``log Z_out = log P(y | omega, V) = log Phi_2(kappa_1, kappa_2; s_1 s_2/3)``.

    Parameters
    ----------
    y : array
        One-hot hardmax outputs of shape ``(..., 2, 2)`` (as returned by
        :class:`aimlib.channels.Hardmax`) or signs ``(s_1, s_2)`` of shape ``(..., 2)``.
    omega : array of shape (..., 2, 2)
        Mean of the indices (symmetric; ``omega_12`` is read as the average of
        the two off-diagonal entries).
    V : float or array broadcastable to ``omega.shape[:-2]``
        Fluctuation variance, ``V > 0`` (``h ~ N(omega, V Sigma)``).

    Returns
    -------
    array of shape ``omega.shape[:-2]``
        The log-probability of the observed output, finite even far in the tails.
    """
    xp, s, m1, m2, sv = reduced_inputs(y, omega, V)
    k1, k2 = s[..., 0] * m1 / sv, s[..., 1] * m2 / sv
    out = log_bvn_cdf(k1, k2, s[..., 0] * s[..., 1] * CORRELATION)
    return to_device(out, xp)


def g_out(y, omega, V):
    r"""``g_out = d log Z_out / d omega_ab`` over the independent entries ``a <= b``.

    With ``eta_i = d log Phi_2 / d kappa_i``:
    ``g_11 = s_1 eta_1 / sqrt(3V)``, ``g_22 = s_2 eta_2 / sqrt(3V)``,
    ``g_12 = g_21 = -(g_11 + g_22)``.

    Parameters are those of :func:`log_partition`.

    Returns
    -------
    array of shape ``omega.shape`` (``(..., 2, 2)``), symmetric in the last two axes.
    """
    xp, s, m1, m2, sv = reduced_inputs(y, omega, V)
    r = s[..., 0] * s[..., 1] * CORRELATION
    k1, k2 = s[..., 0] * m1 / sv, s[..., 1] * m2 / sv
    a1, a2 = grad_log_bvn(k1, k2, r, log_bvn_cdf(k1, k2, r))
    g = np.empty(m1.shape + (2, 2))
    g[..., 0, 0] = s[..., 0] * a1 / sv
    g[..., 1, 1] = s[..., 1] * a2 / sv
    g[..., 0, 1] = g[..., 1, 0] = -(g[..., 0, 0] + g[..., 1, 1])
    return to_device(g, xp)


def probabilities(omega, V):
    """``P(s | omega, V)`` for the four outputs ``s in {++, +-, -+, --}``: shape ``(..., 4)``, rows sum to 1."""
    omega = to_host(v.finite_array("omega", omega))
    outs = []
    for s1 in (1.0, -1.0):
        for s2 in (1.0, -1.0):
            s = np.broadcast_to(np.array([s1, s2]), omega.shape[:-2] + (2,))
            outs.append(np.exp(log_partition(s, omega, V)))
    return np.stack(outs, axis=-1)


# -- F_out: deterministic quadrature ---------------------------------------------------
#: half-width in ``kappa`` of the integrands of ``F_out`` (they decay like ``exp(-kappa^2/2)``
#: or faster beyond it); ``_BOX_W`` that of the weights, ``_GAUSS_HALF`` the range of ``N(0, 1)``
BOX_K = 10.0
_BOX_W = 14.0
_GAUSS_HALF = 9.0


def gauss_rule(lam_sqrt, box):
    """Nodes ``t`` and weights for ``E_{t ~ N(0,1)} f(sqrt(lam) t)`` when ``f`` lives in ``|x| < box``."""
    half = _GAUSS_HALF if lam_sqrt * _GAUSS_HALF <= box else box / lam_sqrt
    t = half * _GLF_X
    w = half * _GLF_W * np.exp(log_phi(t))
    return t, w


def _fisher_scaled_direct(lam: float) -> float:
    r"""``𝓕(lambda) = V F_out`` at ``lambda = q/V`` by Gauss-Legendre quadrature (see :func:`fisher_scaled`)."""
    sl = math.sqrt(lam)
    # main part: 2 E[phi(k)^2 / Phi(k)], k ~ N(0, lam)
    t, w = gauss_rule(sl, BOX_K)
    k = sl * t
    main = 2.0 * np.sum(w * np.exp(2 * log_phi(k) - special.log_ndtr(k)))
    i1 = main
    i12 = 0.0
    for r in (CORRELATION, -CORRELATION):
        c = math.sqrt(1 - r * r)
        # remainder of the eta_1^2 term in (kappa_1, w), independent N(0, lam)
        t1, w1 = gauss_rule(sl, BOX_K)
        t2, w2 = gauss_rule(sl, _BOX_W)
        K1 = sl * t1[:, None]
        W = sl * t2[None, :]
        K2 = r * K1 + c * W
        logz = log_bvn_cdf(K1, K2, r)
        lphi1 = log_phi(K1)
        lPw = special.log_ndtr(W)
        h = np.exp(2 * lphi1 + 2 * lPw - logz)
        hinf = np.exp(2 * lphi1 - special.log_ndtr(K1) + lPw)
        i1 += 2.0 * np.sum(w1[:, None] * w2[None, :] * (h - hinf))
        # cross term eta_1 eta_2, localised in both kappa_1 and kappa_2
        t2c, w2c = gauss_rule(sl * c, BOX_K * (1 + abs(r)))
        Wc = sl * t2c[None, :]
        K2c = r * K1 + c * Wc
        logzc = log_bvn_cdf(K1, K2c, r)
        w2v = (K1 - r * K2c) / c
        cross = np.exp(lphi1 + special.log_ndtr(Wc) + log_phi(K2c) + special.log_ndtr(w2v) - logzc)
        i12 += 2.0 * math.copysign(1.0, r) * np.sum(w1[:, None] * w2c[None, :] * cross)
    return (4.0 / 3.0) * (3.0 * i1 + i12)


# Chebyshev interpolant of H(x) = 𝓕(lambda) sqrt(1 + lambda), x = 1/sqrt(1 + lambda) in [X_MIN, 1]
_CHEB_DEG = 32
_LAMBDA_MAX = 1e8
_X_MIN = 1.0 / math.sqrt(1.0 + _LAMBDA_MAX)


@lru_cache(maxsize=1)
def cheb_coefficients():
    """Chebyshev coefficients of ``F_out``'s interpolant (cached; ``cheb_coefficients.cache_clear()`` for timings)."""
    j = np.arange(_CHEB_DEG + 1)
    u = np.cos(np.pi * (j + 0.5) / (_CHEB_DEG + 1))
    x = _X_MIN + (1.0 - _X_MIN) * (u + 1) / 2
    lam = 1.0 / x**2 - 1.0
    vals = np.array([_fisher_scaled_direct(max(l, 0.0)) / xx for l, xx in zip(lam, x)])
    return np.polynomial.chebyshev.chebfit(u, vals, _CHEB_DEG)


def fisher_scaled(lam, *, exact: bool = False):
    r"""The universal function ``𝓕(lambda) = V F_out(q)``, ``lambda = q / V``.

    Reduction: ``g`` depends on ``omega`` only through ``m_i = omega_ii - omega_12``;
    with ``kappa = s o m / sqrt(3V) ~ N(0, lambda C_tau)``, ``C_tau = [[1, tau], [tau, 1]]``
    for each output, and ``E g_11^2 = E g_22^2`` by symmetry,

    ``𝓕 = (4/3) (3 I_1 + I_12)``,
    ``I_1 = 2 sum_{tau = +-1/3} E[phi(k_1)^2 Phi(w)^2 / Phi_2(k_1, tau k_1 + tau_bar w; tau)]``,
    ``I_12 = 2 sum_tau sign(tau) E[phi(k_1) Phi(w_1) phi(k_2) Phi(w_2) / Phi_2(k_1, k_2; tau)]``,

    where ``k_1, w`` are independent ``N(0, lambda)``, ``tau_bar = sqrt(1 - tau^2)``,
    ``w_1 = (k_2 - tau k_1)/tau_bar``, ``w_2 = (k_1 - tau k_2)/tau_bar``.  The ``I_1`` integrand
    tends to ``phi(k_1)^2/Phi(k_1)`` as ``w -> infinity``; that limit times
    ``Phi(w)`` is integrated separately (``E Phi(w) = 1/2``) so that what is
    left is localised, and every integral is a tensor Gauss-Legendre rule
    on a window that holds the integrand.  By default the values come from a
    Chebyshev interpolant in ``x = 1/sqrt(1 + lambda)`` of degree 32 (relative
    error below ``1e-9``, built once on first use in about a second); ``exact=True`` evaluates the
    quadrature directly.

    Parameters
    ----------
    lam : float or array_like
        ``lambda = q/V >= 0``.
    exact : bool
        Skip the interpolant.
    """
    lam_arr = np.asarray(lam, dtype=float)
    if not np.all(np.isfinite(lam_arr)) or np.any(lam_arr < 0):
        raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
    if exact:
        out = np.vectorize(_fisher_scaled_direct, otypes=[float])(lam_arr)
    else:
        x = 1.0 / np.sqrt(1.0 + lam_arr)
        u = 2.0 * (x - _X_MIN) / (1.0 - _X_MIN) - 1.0
        out = np.polynomial.chebyshev.chebval(u, cheb_coefficients()) * x
        big = lam_arr > _LAMBDA_MAX
        if np.any(big):
            out = np.where(big, np.vectorize(_fisher_scaled_direct, otypes=[float])(
                np.where(big, lam_arr, 0.0)), out)
    return float(out) if out.ndim == 0 else out


def fisher(q, Q0, *, exact: bool = False):
    r"""The SE output function ``F_out(q) = 2 sum_{a<=b} sigma2_ab E[g_ab^2] = 𝓕(q/V) / V``.

    ``qhat = alpha F_out(q)``.  The average is over ``omega ~ N(0, q Sigma)`` and the
    four outputs drawn from ``Z_out``; it is computed deterministically
    (:func:`fisher_scaled`).

    Parameters
    ----------
    q : float
        Overlap, ``0 <= q < Q0``.
    Q0 : float
        Prior second moment ``Q0 = 1 + rho > 0``.
    exact : bool
        Evaluate the quadrature directly instead of the cached interpolant.
    """
    Q0 = v.positive("Q0", Q0)
    q = v.real("q", q)
    if not 0 <= q < Q0:
        raise ValueError(f"q must be in [0, Q0) = [0, {Q0:g}), got {q!r}")
    V = Q0 - q
    return fisher_scaled(q / V, exact=exact) / V


# -- the rho -> 0 limit at fixed alpha_bar = alpha / rho -------------------------------
def weak_recovery_threshold() -> float:
    r"""``alpha_bar_WR = 1 / F_out(q=0, V=1)`` of the ``rho -> 0`` limit, in closed form.

    At ``lambda = 0`` all ``kappa`` vanish, ``Phi_2(0, 0; tau) = 1/4 + arcsin(tau)/(2 pi)`` and
    ``eta_1 = eta_2 = phi(0) / (2 Phi_2(0, 0; tau))``, so
    ``𝓕(0) = (1/(3 pi)) [4/Phi_2(0,0;1/3) + 2/Phi_2(0,0;-1/3)]`` and
    ``alpha_bar_WR = 1/𝓕(0) ~ 0.40341``.
    """
    p_plus = 0.25 + math.asin(CORRELATION) / (2 * math.pi)
    p_minus = 0.25 - math.asin(CORRELATION) / (2 * math.pi)
    g0 = (4.0 / p_plus + 2.0 / p_minus) / (3.0 * math.pi)
    return 1.0 / g0


def limit_map(E, alpha_bar):
    r"""One step of the ``rho -> 0`` state evolution at fixed ``alpha_bar = alpha / rho``.

    ``E -> 1 - (1 - delta)_+^2`` with ``delta = 1 / (alpha_bar F)`` and
    ``F = 𝓕((1 - E)/E) / E`` (``V = E``, ``q = 1 - E``): the prior has become a
    vanishing-rank-fraction spike whose Bayes error is the BBP formula.
    """
    E = v.real("E", E)
    if not 0 < E <= 1:
        raise ValueError(f"E must be in (0, 1] (an estimation error of the rho -> 0 limit), got {E!r}")
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    F = fisher_scaled((1.0 - E) / E) / E
    delta = 1.0 / (alpha_bar * F)
    return 1.0 - max(1.0 - delta, 0.0) ** 2


def limit_error(alpha_bar, *, start: float = 1.0, tol: float = 1e-12, max_iter: int = 100000,
                damping: float = 0.0, on_max_iter: str = "raise") -> float:
    r"""Fixed point ``E_S`` of :func:`limit_map` (the ``rho -> 0`` limit at fixed ``alpha_bar``).

    Iterated from ``start`` (``1``: the uninformative estimate).  Returns 1 for
    ``alpha_bar <= alpha_bar_WR``.  At ``max_iter`` the rule of
    :mod:`aimlib.errors` applies (``on_max_iter``; by default a
    :class:`aimlib.ConvergenceError`).
    """
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    damping = v.in_range("damping", damping, 0.0, 0.99)
    E = v.in_range("start", start, 1e-12, 1.0)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    for _ in range(max_iter):
        E_new = (1 - damping) * limit_map(E, alpha_bar) + damping * E
        E_new = min(max(E_new, 1e-300), 1.0)
        if abs(E_new - E) <= tol * max(E, 1e-12):
            return E_new
        E = E_new
    max_iter_reached(f"rho -> 0 hardmax SE did not converge at alpha_bar={alpha_bar} "
                     f"in {max_iter} iterations (last E={E})", on_max_iter)
    return E
