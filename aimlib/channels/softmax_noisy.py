r"""The Bayes side of the softmax channel with Gaussian label noise, ``T = 2``.

The channel is ``y = softmax_rows(beta h) + sqrt(Delta) xi`` (:class:`NoisySoftmax`) with ``xi`` i.i.d.
``N(0, 1)`` on all four entries of ``y``.

Reduction to two variables
--------------------------
Row ``a`` of the softmax depends on ``h`` only through ``u_a = h_aa - h_12``:
``y_aa = sigma(beta u_a)`` and ``y_ab = 1 - sigma(beta u_a)`` (``b != a``), with
``sigma`` the logistic function.  The two noisy entries of a row combine as

.. math::  (y_{aa} - s)^2 + (y_{ab} - 1 + s)^2 = 2 (z_a - s)^2 + \tfrac12 (y_{aa} + y_{ab} - 1)^2,
           \qquad z_a = \tfrac12 (y_{aa} - y_{ab} + 1),

so ``z_a = sigma(beta u_a) + N(0, Delta/2)`` carries all the information on ``h``
and the row sum only enters a constant.  Given the AMP/SE estimate ``omega``,
``h ~ N(omega, V Sigma)``, so ``u ~ N(mu, C)`` with ``mu_a = omega_aa - omega_12``
and ``C = V [[3, 1], [1, 3]] = V (2 I + 1 1^T)``: write ``u_a = mu_a + eta + e_a``
with ``eta ~ N(0, V)`` shared and ``e_a ~ N(0, 2V)`` independent.  Then

.. math::  Z_{\rm out} = c(y)\, E_\eta \prod_{a=1}^2 I_0(\mu_a + \eta;\, z_a),\qquad
           I_j(m; z) = \int du\, u^j\, N(u; m, 2V)\, e^{-(z - \sigma(\beta u))^2/\Delta},

``c(y) = prod_a (2 pi Delta)^{-1} exp(-(y_aa + y_ab - 1)^2 / (4 Delta))``.

Output function
---------------
``Z_out`` depends on ``omega`` through ``mu`` only, and
``d log Z / d mu = C^{-1} (E[u | y] - mu)`` (the posterior-mean shift of a
Gaussian prior).  With ``d mu_a / d omega_aa = 1`` and ``d mu_a / d omega_12 = -1``:

.. math::  g_{11} = (C^{-1} r)_1,\quad g_{22} = (C^{-1} r)_2,\quad g_{12} = -(g_{11} + g_{22}),
           \qquad r = E[u \mid y] - \mu,\quad C^{-1} = \frac{1}{8V}\begin{pmatrix}3 & -1\\ -1 & 3\end{pmatrix}.

``E[u_a | y] = E_eta[W(eta) I_1(mu_a + eta)/I_0(mu_a + eta)]`` with the
posterior weight ``W ∝ prod_a I_0(mu_a + eta)``.

Quadrature
----------
``eta``: Gauss-Hermite with ``K`` nodes.  ``I_j``: the trapezoid rule in
``t = (u - m)/sqrt(2V)`` on ``[-9, 9]``, which converges exponentially for a
Gaussian times an analytic function once the step resolves both the Gaussian
(width 1 in ``t``) and the likelihood peak, whose width in ``u`` is at least
``w = 4 sqrt(Delta/2) / beta`` (the logistic slope is at most ``beta/4``); the
step is ``min(1, w/sqrt(2V)) / 2.5``.  Everything runs in log space.

State evolution
---------------
``F_out(q) = 2 sum_{a<=b} sigma2_ab E[g_ab^2]`` is an average over
``omega ~ N(0, q Sigma)``, ``h ~ N(omega, V Sigma)`` and the noise: eight Gaussian
variables (three for ``mu``, three for ``u``, two ``z`` noises), averaged with a scrambled Sobol
sequence of ``2^11`` points (fixed seed, so ``F_out`` is a deterministic smooth
function of ``q``); ``1/F_out`` is cached as a Chebyshev interpolant in
``s = sqrt(V/Q0)`` per ``(Q0, beta, Delta)`` (the variable resolves the steep end
``V -> 0``, where ``F_out`` approaches its closed form :func:`fisher_at_q0`).
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import _validate as v
from ..backend import to_common
from .base import Channel
from .polytope import sobol_normals
from .softmax import Softmax


__all__ = ["NoisySoftmax", "log_partition", "g_out", "fisher", "fisher_direct",
           "fisher_at_q0", "grid_size", "tabulate", "stored_tables"]

K_ETA = 24            # Gauss-Hermite nodes for the shared variable eta
T_HALF = 9.0          # half-width of the inner window, in standard deviations
STEP_FACTOR = 2.5     # inner step = (smallest feature width) / STEP_FACTOR
MAX_GRID = 4001       # largest inner grid allowed (beyond: noise too small for this quadrature)
SOBOL_LOG2 = 11       # 2^11 quasi-random points for F_out
SOBOL_SEED = 20250601  # the fixed scramble of those points
CHEB_DEG = 14         # Chebyshev degree of the cached F_out(q)
_BLOCK = 2_000_000    # elements per work array
#: shipped coefficients of ``1/F_out`` (:func:`stored_tables`): the noise panel's first curve
TABLES = Path(__file__).resolve().parents[1] / "data" / "softmax_noisy_tables.npz"


def grid_size(V: float, beta: float, noise: float) -> int:
    r"""Number of inner trapezoid points for fluctuation ``V``: ``2 T_HALF / step + 1``.

    Raises ``ValueError`` if more than ``MAX_GRID`` points would be needed
    (``noise`` too small relative to ``beta^2 V`` for this quadrature).
    """
    V, beta, noise = v.positive("V", V), v.positive("beta", beta), v.positive("noise", noise)
    s = math.sqrt(2.0 * V)
    width = 4.0 * math.sqrt(noise / 2.0) / beta
    step = min(1.0, width / s) / STEP_FACTOR
    G = 2 * int(math.ceil(T_HALF / step)) + 1
    if G > MAX_GRID:
        w_min = s * STEP_FACTOR * 2 * T_HALF / (MAX_GRID - 1)
        raise ValueError(
            f"noise={noise:g} is too small for the noisy-softmax quadrature at beta={beta:g}, "
            f"V={V:.3g} ({G:.3g} grid points > {MAX_GRID}); use noise >= {2 * (beta * w_min / 4) ** 2:.2g} "
            "or the noiseless channel (noise=0), which is exactly solvable")
    return G


@lru_cache(maxsize=8)
def _hermite(K: int):
    x, w = np.polynomial.hermite_e.hermegauss(K)
    return x, w / w.sum()


def _logistic(x, xp):
    return 0.5 * (1.0 + xp.tanh(0.5 * x))


def _logsumexp(a, axis, xp):
    m = a.max(axis=axis, keepdims=True)
    return (m + xp.log(xp.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _posterior(mu, z, V, beta, noise, xp):
    """``(E[u | z], log E_prior prod_a l_a)`` for ``mu, z`` of shape ``(n, 2)`` (one ``V``)."""
    n = mu.shape[0]
    G = grid_size(V, beta, noise)
    s = math.sqrt(2.0 * V)
    t = np.linspace(-T_HALF, T_HALF, G)
    log_wt = xp.asarray(np.log(t[1] - t[0]) - 0.5 * t * t - 0.5 * math.log(2 * math.pi))
    t = xp.asarray(t)
    x, w = _hermite(K_ETA)
    eta = xp.asarray(math.sqrt(V) * x)
    log_w_eta = xp.asarray(np.log(w))
    mean = xp.empty((n, 2))
    logz = xp.empty(n)
    block = max(1, _BLOCK // (2 * K_ETA * G))
    for i in range(0, n, block):
        m = mu[i:i + block, None, :] + eta[None, :, None]                   # (b, K, 2)
        u = m[..., None] + s * t                                            # (b, K, 2, G)
        zz = z[i:i + block, None, :, None]
        a = log_wt - (zz - _logistic(beta * u, xp)) ** 2 / noise
        log_i0 = _logsumexp(a, -1, xp)                                      # (b, K, 2)
        ubar = (xp.exp(a - log_i0[..., None]) * u).sum(axis=-1)            # I_1 / I_0
        lw = log_w_eta + log_i0.sum(axis=-1)                               # (b, K)
        lz = _logsumexp(lw, -1, xp)
        W = xp.exp(lw - lz[:, None])
        mean[i:i + block] = (W[..., None] * ubar).sum(axis=1)
        logz[i:i + block] = lz
    return mean, logz


def _parse(y, omega, V, beta, noise):
    """Validate; return ``(xp, mu, z, extra, shape)`` with ``mu, z`` flattened to ``(n, 2)``."""
    y = v.finite_array("y", y)
    omega = v.finite_array("omega", omega)
    if y.ndim < 2 or tuple(y.shape[-2:]) != (2, 2):
        raise ValueError(f"y must have shape (..., 2, 2): the noisy-softmax Bayes side needs T = 2, "
                         f"got {tuple(y.shape)}")
    if omega.shape != y.shape:
        raise ValueError(f"omega must have the shape of y {tuple(y.shape)}, got {tuple(omega.shape)}")
    V = v.positive("V", V)
    beta = v.positive("beta", beta)
    noise = v.positive("noise", noise)
    xp, y, omega = to_common(y, omega)
    shape = y.shape[:-2]
    y = y.reshape(-1, 2, 2)
    omega = omega.reshape(-1, 2, 2)
    o12 = 0.5 * (omega[:, 0, 1] + omega[:, 1, 0])
    mu = xp.stack([omega[:, 0, 0] - o12, omega[:, 1, 1] - o12], axis=-1)
    z = 0.5 * xp.stack([y[:, 0, 0] - y[:, 0, 1] + 1, y[:, 1, 1] - y[:, 1, 0] + 1], axis=-1)
    rows = y.sum(axis=-1) - 1.0
    extra = -2.0 * math.log(2 * math.pi * noise) - (rows**2).sum(axis=-1) / (4.0 * noise)
    return xp, mu, z, extra, shape, V, beta, noise


def log_partition(y, omega, V, beta: float, noise: float):
    r"""``log Z_out = log c(y) + log E_eta prod_a I_0(mu_a + eta; z_a)``: the exact log-density of ``y``.

    Parameters
    ----------
    y, omega : arrays of shape (..., 2, 2)
        Noisy softmax outputs and the index means.
    V : float
        Fluctuation variance (``h ~ N(omega, V Sigma)``).
    beta, noise : float
        Inverse temperature and label-noise variance ``Delta > 0``.
    """
    xp, mu, z, extra, shape, V, beta, noise = _parse(y, omega, V, beta, noise)
    _, logz = _posterior(mu, z, V, beta, noise, xp)
    return (logz + extra).reshape(shape)


def _g_from_shift(r, V, xp):
    """``g`` (``(n, 2, 2)``, symmetric) from ``r = E[u | y] - mu``."""
    g11 = (3.0 * r[:, 0] - r[:, 1]) / (8.0 * V)
    g22 = (3.0 * r[:, 1] - r[:, 0]) / (8.0 * V)
    g12 = -(g11 + g22)
    return xp.stack([xp.stack([g11, g12], -1), xp.stack([g12, g22], -1)], -2)


def g_out(y, omega, V, beta: float, noise: float):
    r"""``g = d log Z_out / d omega_ab`` (``a <= b``), symmetric ``(..., 2, 2)``; see the module docstring."""
    xp, mu, z, _, shape, V, beta, noise = _parse(y, omega, V, beta, noise)
    mean, _ = _posterior(mu, z, V, beta, noise, xp)
    return _g_from_shift(mean - mu, V, xp).reshape(shape + (2, 2))


def _sobol_normals():
    """The eight normals of the quasi-Monte Carlo average (:func:`~aimlib.channels.polytope.sobol_normals`)."""
    return sobol_normals(8, 2**SOBOL_LOG2, SOBOL_SEED)


def _check_fisher_args(q, Q0, beta, noise):
    """Validate ``0 <= q <= Q0``, ``Q0, beta, noise > 0``; fail early if the grid would be too fine."""
    Q0 = v.positive("Q0", Q0)
    q = v.in_range("q", q, 0.0, Q0)
    beta, noise = v.positive("beta", beta), v.positive("noise", noise)
    grid_size(Q0, beta, noise)   # the message names noise
    return q, Q0, beta, noise


def fisher_direct(q: float, Q0: float, beta: float, noise: float) -> float:
    r"""``F_out(q) = 2 E[2 g_11^2 + g_12^2 + 2 g_22^2]`` by quasi-Monte Carlo (no interpolation).

    ``mu_a = sqrt(q) (x_0 + sqrt(2) x_a)``, ``u_a = mu_a + sqrt(V) (x_3 + sqrt(2) x_{3+a})``,
    ``z_a = sigma(beta u_a) + sqrt(noise/2) x_{5+a}`` with ``x`` the eight Sobol normals
    (``V = Q0 - q``).  Equivalently ``(2/V) E[r^T C^{-1} r]``, since ``A Sigma A^T = C/V``.
    At ``q = Q0`` the closed form :func:`fisher_at_q0` is returned.
    """
    q, Q0, beta, noise = _check_fisher_args(q, Q0, beta, noise)
    V = Q0 - q
    if V == 0:
        return fisher_at_q0(Q0, beta, noise)
    x = _sobol_normals()
    sq2 = math.sqrt(2.0)
    mu = math.sqrt(q) * (x[:, :1] + sq2 * x[:, 1:3])
    u = mu + math.sqrt(V) * (x[:, 3:4] + sq2 * x[:, 4:6])
    z = _logistic(beta * u, np) + math.sqrt(noise / 2.0) * x[:, 6:8]
    mean, _ = _posterior(mu, z, V, beta, noise, np)
    g = _g_from_shift(mean - mu, V, np)
    return float(2.0 * np.mean(2 * g[:, 0, 0] ** 2 + g[:, 0, 1] ** 2 + 2 * g[:, 1, 1] ** 2))


@lru_cache(maxsize=1)
def stored_tables() -> dict:
    """The shipped coefficients of :func:`tabulate`, ``(Q0, beta, noise) -> coefficients``.

    Read from :data:`TABLES` (made by ``scripts/make_softmax_noisy_tables.py``); empty
    when the file's ``settings`` (``SOBOL_LOG2, CHEB_DEG, K_ETA``) are not the module's.
    """
    with np.load(TABLES) as f:
        if tuple(int(x) for x in f["settings"]) != (SOBOL_LOG2, CHEB_DEG, K_ETA):
            return {}
        return {tuple(float(x) for x in key): coef for key, coef in zip(f["keys"], f["coef"])}


@lru_cache(maxsize=64)
def _cheb(Q0: float, beta: float, noise: float):
    """The coefficients of :func:`tabulate`: shipped (:func:`stored_tables`) or computed."""
    stored = stored_tables().get((Q0, beta, noise))
    return stored if stored is not None else tabulate(Q0, beta, noise)


def tabulate(Q0: float, beta: float, noise: float) -> np.ndarray:
    """Chebyshev coefficients of ``1/F_out`` in ``c = 2 sqrt(V/Q0) - 1`` on ``[-1, 1]``.

    Parameters
    ----------
    Q0, beta, noise : float
        The prior's second moment, the softmax's inverse temperature, the label noise.

    Returns
    -------
    numpy.ndarray
        ``CHEB_DEG + 1`` coefficients, from :func:`fisher_direct` at the Chebyshev nodes.
    """
    j = np.arange(CHEB_DEG + 1)
    c = np.cos(np.pi * (j + 0.5) / (CHEB_DEG + 1))
    q = Q0 * (1.0 - ((c + 1) / 2) ** 2)
    vals = np.array([1.0 / fisher_direct(qq, Q0, beta, noise) for qq in q])
    return np.polynomial.chebyshev.chebfit(c, vals, CHEB_DEG)


def fisher_at_q0(Q0: float, beta: float, noise: float) -> float:
    r"""``F_out(Q0) = (24 beta^2 / Delta) E[sigma'(beta u)^2]``, ``u ~ N(0, 3 Q0)``, in closed form.

    At ``V = 0`` the index is known, ``Z_out = P(y | h = omega)`` and ``g`` is the
    score of the channel: ``d log l_a / d u_a = 2 beta sigma'(beta u_a) (z_a - sigma) / Delta``
    has second moment ``2 beta^2 sigma'^2 / Delta`` (``E (z_a - sigma)^2 = Delta/2``), the two
    rows are independent, ``g_12 = -(g_11 + g_22)``, and
    ``2 E[2 g_11^2 + g_12^2 + 2 g_22^2] = 6 E[g_11^2 + g_22^2]``.  ``sigma' = sigma (1 - sigma)``;
    the Gaussian average is a trapezoid rule (exponentially accurate, analytic integrand).
    """
    Q0 = v.positive("Q0", Q0)
    beta = v.positive("beta", beta)
    noise = v.positive("noise", noise)
    t = np.linspace(-12.0, 12.0, 4801)
    s = _logistic(beta * math.sqrt(3.0 * Q0) * t, np)
    w = np.exp(-0.5 * t * t)
    return float(24.0 * beta**2 / noise * np.sum(w * (s * (1 - s)) ** 2) / np.sum(w))


def fisher(q, Q0, beta: float, noise: float, *, exact: bool = False) -> float:
    r"""The SE output function ``F_out(q)`` of the noisy softmax, ``T = 2`` (``qhat = alpha F_out``).

    Finite at ``q = Q0``: label noise caps the information a sample carries, so
    there is no perfect recovery (at ``q = Q0``: the closed form :func:`fisher_at_q0`).
    Values come from a Chebyshev interpolant of ``1 / F_out`` in ``sqrt(V/Q0)``
    (degree ``CHEB_DEG``, built once per ``(Q0, beta, noise)`` from
    :func:`fisher_direct` by :func:`tabulate`, or shipped for the noise panel's first
    setting, :func:`stored_tables`); ``exact=True`` evaluates :func:`fisher_direct`.

    Accuracy (``beta = 1``, ``Q0 = 1.5``): the interpolant is within 0.5 % of
    :func:`fisher_direct` for ``q <= 0.999 Q0`` and within 1 % up to ``0.9999 Q0`` at
    ``noise = 1e-3`` (0.15 % at ``noise = 1e-2``); :func:`fisher_direct` itself moves
    by 0.1-0.5 % with the Sobol scramble.
    """
    q, Q0, beta, noise = _check_fisher_args(q, Q0, beta, noise)
    if exact or q == Q0:
        return fisher_direct(q, Q0, beta, noise)
    coef = _cheb(float(Q0), float(beta), float(noise))
    return 1.0 / float(np.polynomial.chebyshev.chebval(2 * math.sqrt(1.0 - q / Q0) - 1, coef))


class NoisySoftmax(Softmax):
    """Row-wise softmax plus Gaussian label noise of variance ``noise > 0`` on every entry of ``y``.

    The forward map works for every ``T``; the Bayes side (this module's
    functions) for ``T = 2``: for ``T > 2`` it is a ``T(T-1)``-dimensional
    integral, which is not implemented.
    """

    name = "softmax"

    def __init__(self, beta: float = 1.0, noise: float = 0.01):
        super().__init__(beta)
        self.noise = v.positive("noise", noise)

    def _params(self) -> str:
        return f"beta={self.beta:g}, noise={self.noise:g}"

    def linear_k(self, T: int):
        """``None``: with label noise the outputs are no longer exact linear measurements."""
        return None

    def _check_t2(self, what: str, T: int):
        if T > self.noise_max_T:
            raise NotImplementedError(
                f"NoisySoftmax.{what}: the Bayes side with label noise is implemented for "
                f"T = {self.noise_max_T} only "
                f"(got T={T}); for T > 2 it needs a T(T-1)-dimensional integral. Use noise=0, where "
                "the channel is exactly solvable for every T")

    def log_partition(self, y, omega, V):
        """The exact log-density of ``y`` (:func:`log_partition`)."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        self._check_t2("log_partition", T)
        return log_partition(y, omega, V, self.beta, self.noise)

    def g_out(self, y, omega, V):
        """``d log Z_out / d omega_ab`` (:func:`g_out`)."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        self._check_t2("g_out", T)
        return g_out(y, omega, V, self.beta, self.noise)

    def fisher(self, q, Q0, T):
        """``F_out(q)``, finite at ``q = Q0`` (:func:`fisher`)."""
        q, Q0, T, _ = self._fisher_args(q, Q0, T)
        self._check_t2("fisher", T)
        return fisher(q, Q0, self.beta, self.noise)

    def output_free_entropy(self, q, Q0, T):
        """``(1/4) int_0^q F_out(s) ds`` (the generic route of the contract)."""
        return Channel.output_free_entropy(self, q, Q0, T)

    def generalization_error(self, q, Q0, T, **kw):
        """The noiseless softmax value plus ``T noise``: the predictor cannot foresee the label noise."""
        return super().generalization_error(q, Q0, T, **kw) + T * self.noise
