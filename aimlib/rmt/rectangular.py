r"""Denoising a square non-symmetric matrix ``Y = S + sqrt(Delta) Z``, ``Z`` i.i.d. ``N(0, 1/d)``.

Book, chapter "Untied key and query" (the prior of untied key and query,
:class:`aimlib.priors.Rectangular`).  ``S = Q K^T / sqrt(r d)``
is bi-rotationally invariant; the Bayes-optimal estimator is the rectangular RIE
(singular vectors of ``Y``, singular values ``sigma -> sigma - 2 Delta h(sigma)``
with ``h`` the Hilbert transform of the symmetrised singular-value law of ``Y``),
and its error per dimension ``(1/d) E ||S_hat - S||_F^2`` is the prior MMSE
``mmse_rect(Delta)``: ``~ rho (2 - rho) Delta`` as ``Delta -> 0``, ``-> 1`` as
``Delta -> inf``.

For a square matrix the symmetrised singular-value law of ``Y`` is the free
additive convolution of that of ``S`` with a semicircle of variance ``Delta``
(rectangular free convolution at aspect ratio 1); with the S-transform of the
product ``Q K^T`` its Stieltjes transform ``g(z) = int mu(x)/(z - x) dx`` solves

.. math::  -\Delta g^4 + z g^3 + (\rho - 1 + \rho\Delta) g^2 - \rho z g + \rho = 0,

and ``mmse_rect(Delta) = Delta - (4 pi^2/3) Delta^2 int mu^3`` (the tied
identity).  :func:`oracle_error` (the best estimator on the singular vectors of
``Y``, with ``S`` known) gives an independent finite-``d`` check.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import _validate as v
from .._lazy import LazyModule
from ..backend import get_array_module

interpolate = LazyModule("scipy.interpolate")   # loaded on first use (the MMSE table)

__all__ = ["oracle_error", "rie_rect", "singular_stieltjes", "singular_density", "singular_hilbert",
           "rect_shrinkage", "spectral_divergences", "mmse_rect", "DELTA_GRID"]

#: ``mmse_rect`` is tabulated on this grid of ``Delta`` per ``rho``; outside, the leading
#: asymptotics ``c Delta`` and ``1 - c'/Delta``, matched at the ends, take over
DELTA_GRID = np.logspace(-4, 3, 57)
#: quadrature points per unit of the two uniform grids of ``x >= 0`` (see :func:`_mmse_one`)
N_QUAD = 2000


def oracle_error(S, Y) -> float:
    r"""``(1/d) ||S - sum_i (u_i^T S v_i) u_i v_i^T||_F^2`` with ``Y = U diag(sigma) V^T``.

    The error of the best estimator built on the singular vectors of ``Y``.
    """
    S = v.finite_array("S", S, ndim=2)
    Y = v.finite_array("Y", Y, ndim=2)
    if S.shape != Y.shape or S.shape[0] != S.shape[1]:
        raise ValueError(f"S and Y must be square of the same shape, got {S.shape} and {Y.shape}")
    U, _, Vt = np.linalg.svd(Y)
    xi = np.sum(U * (S @ Vt.T), axis=0)
    return float((np.sum(S * S) - np.sum(xi * xi)) / S.shape[0])


def _hilbert_empirical(sigma, eta):
    r"""``h(x) = p.v. int mu(y)/(x - y) dy`` of the symmetrised law ``(1/2d) sum_j (delta_{s_j} + delta_{-s_j})``.

    Smoothed with a Cauchy kernel of width ``eta`` (the real part of the Stieltjes
    transform at ``x + i eta``), evaluated at the points ``sigma`` themselves.
    """
    x = sigma[:, None] + 1j * eta
    g = 0.5 * (1.0 / (x - sigma[None, :]) + 1.0 / (x + sigma[None, :]))
    return g.real.mean(axis=1)


def rie_rect(Y, delta: float, eta: float | None = None):
    r"""The rectangular RIE of a square ``Y``: ``U diag(sigma - 2 Delta h(sigma)) V^T``.

    ``h`` is the Hilbert transform of the symmetrised singular-value law of ``Y``,
    estimated from ``Y`` itself (Cauchy kernel of width ``eta``, default
    ``d^{-1/2}``); the estimator uses no knowledge of the prior.
    """
    Y = v.finite_array("Y", Y, ndim=2)
    if Y.shape[0] != Y.shape[1]:
        raise ValueError(f"Y must be square, got shape {Y.shape}")
    delta = v.nonnegative("delta", delta)
    d = Y.shape[0]
    eta = 1.0 / math.sqrt(d) if eta is None else v.positive("eta", eta)
    U, s, Vt = np.linalg.svd(Y)
    xi = s - 2.0 * delta * _hilbert_empirical(s, eta)
    return (U * xi) @ Vt


def singular_stieltjes(x, delta: float, rho: float, eps: float = 1e-10):
    r"""``g(x + i eps)`` of the symmetrised singular-value law of ``Y`` (root of the quartic).

    Among the four roots, the one with the most negative imaginary part (the
    Stieltjes transform maps the upper half plane to the lower one).
    """
    delta, rho = v.positive("delta", delta), v.rho(rho)
    z = np.asarray(x, dtype=float).ravel() + 1j * v.positive("eps", eps)
    n = z.size
    comp = np.zeros((n, 4, 4), dtype=complex)       # companion matrices of the monic quartic
    comp[:, 0, :] = np.stack([z, (rho - 1 + rho * delta) * np.ones(n), -rho * z,
                              rho * np.ones(n)], axis=1) / delta
    comp[:, 1, 0] = comp[:, 2, 1] = comp[:, 3, 2] = 1.0
    roots = np.linalg.eigvals(comp)
    return roots[np.arange(n), np.argmin(roots.imag, axis=1)]


def singular_density(x, delta: float, rho: float):
    """Density ``mu(x) = -Im g(x + i0)/pi`` of the symmetrised singular values of ``Y``."""
    return np.maximum(-singular_stieltjes(x, delta, rho).imag / np.pi, 0.0).reshape(np.shape(x))


def _quadrature_grid(delta: float, rho: float):
    """``(R, x)``: the half line ``[0, R]`` beyond the support, as two merged uniform grids.

    One grid over the support, one over ``[0, 10 sqrt(Delta)]`` (the bulk of the
    small singular values when ``rho < 1``).
    """
    R = 4.0 / math.sqrt(min(rho, 1.0)) + 4.0 * math.sqrt(delta)
    return R, np.unique(np.concatenate([np.linspace(0.0, min(10 * math.sqrt(delta), R), N_QUAD),
                                        np.linspace(0.0, R, 2 * N_QUAD)]))


def _mmse_one(delta: float, rho: float) -> float:
    """``Delta - (4 pi^2/3) Delta^2 int mu^3``: trapezoid rule on ``x >= 0`` (``mu`` is even).

    On :func:`_quadrature_grid`: relative error ``< 2e-6`` up to ``Delta = 100``,
    ``~1e-5`` at ``10^3``.
    """
    _, x = _quadrature_grid(delta, rho)
    mu3 = singular_density(x, delta, rho) ** 3
    integral = 2 * float(np.trapezoid(mu3, x))     # mu is even: twice the half line
    return delta - 4 * math.pi**2 / 3 * delta**2 * integral


@lru_cache(maxsize=32)
def _table(rho: float):
    """``log(mmse/Delta)`` on ``DELTA_GRID`` as a cubic spline in ``log Delta``."""
    vals = np.array([_mmse_one(float(dl), rho) for dl in DELTA_GRID])
    return interpolate.CubicSpline(np.log(DELTA_GRID), np.log(vals / DELTA_GRID))


def mmse_rect(delta, rho: float):
    r"""``mmse_rect(Delta)``: the MMSE of denoising the untied ``S`` from ``Y = S + sqrt(Delta) Z``.

    Free probability (module docstring), tabulated once per ``rho`` (``DELTA_GRID``,
    about 2 s) and interpolated (relative error ``< 1e-5``); ``rho`` finite (the
    Gaussian limit is :class:`aimlib.priors.Gaussian`).  Limits: ``mmse/Delta -> rho (2 - rho)``
    (``rho < 1``) or ``1`` as ``Delta -> 0``; ``mmse -> 1`` as ``Delta -> inf``.
    """
    rho = v.rho(rho)
    arr = np.asarray(delta, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("delta must be finite and > 0")
    spline, (lo, hi) = _table(rho), (DELTA_GRID[0], DELTA_GRID[-1])
    c_lo = math.exp(spline(math.log(lo)))
    c_hi = (1.0 - hi * math.exp(spline(math.log(hi)))) * hi
    out = arr * np.exp(spline(np.log(np.clip(arr, lo, hi))))
    out = np.where(arr < lo, c_lo * arr, np.where(arr > hi, 1.0 - c_hi / arr, out))
    return out if arr.ndim else float(out)


def singular_hilbert(x, delta: float, rho: float):
    r"""``h(x) = p.v. int mu(y)/(x - y) dy`` of the symmetrised singular-value law of ``Y`` (the prior's own).

    Computed as ``int (mu(y) - mu(x))/(x - y) dy + mu(x) log|(R + x)/(R - x)|`` over
    ``[-R, R]`` (:func:`_quadrature_grid`, trapezoid rule), which has no singular
    integrand; ``h(x) = Re g(x + i0)``.
    """
    delta, rho = v.positive("delta", delta), v.rho(rho)
    x = np.asarray(x, dtype=float).ravel()
    R, y = _quadrature_grid(delta, rho)
    mu_half = singular_density(y, delta, rho)
    ys, mus = np.concatenate([-y[:0:-1], y]), np.concatenate([mu_half[:0:-1], mu_half])
    mux = np.where(np.abs(x) < R, singular_density(np.minimum(np.abs(x), R), delta, rho), 0.0)
    out = np.empty_like(x)
    for s in range(0, x.size, 64):                  # 64 points at a time bound the memory
        xs, ms = x[s:s + 64, None], mux[s:s + 64, None]
        diff = xs - ys[None, :]
        safe = np.where(diff == 0.0, 1.0, diff)
        out[s:s + 64] = np.trapezoid(np.where(diff == 0.0, 0.0, (mus[None, :] - ms) / safe), ys, axis=1)
    with np.errstate(divide="ignore"):
        log_term = np.where(mux > 0, np.log(np.abs((R + x) / np.where(x == R, 1.0, R - x))), 0.0)
    return out + mux * log_term


def rect_shrinkage(sigma, delta: float, rho: float, step: float = 1e-5):
    r"""The optimal singular values ``xi(sigma) = sigma - 2 Delta h(sigma)`` and their slope ``xi'(sigma)``.

    ``h`` is :func:`singular_hilbert` (the limiting law of ``Y = S + sqrt(Delta) Z``
    for the prior of ratio ``rho``), so the map knows the prior, unlike
    :func:`rie_rect`; ``xi'`` is a central difference of width ``2 step``.
    """
    sigma = np.asarray(sigma, dtype=float).ravel()
    pts = np.concatenate([sigma, sigma + step, sigma - step])
    xi = (pts - 2.0 * delta * singular_hilbert(pts, delta, rho)).reshape(3, -1)
    return xi[0], (xi[1] - xi[2]) / (2.0 * step)


def spectral_divergences(U, sigma, Vt, xi, dxi):
    r"""Divergences of ``F(Y) = U diag(xi(sigma)) V^T`` along the symmetric and antisymmetric matrices.

    A perturbation ``U M V^T`` of ``Y`` moves ``F`` by ``U N V^T`` with
    ``N_ii = xi'_i M_ii`` and, for ``i != j``, the symmetric part of ``M``
    scaled by ``c-_ij = (xi_i - xi_j)/(sigma_i - sigma_j)`` (the divided
    difference of the symmetric case) and the antisymmetric part by
    ``c+_ij = (xi_i + xi_j)/(sigma_i + sigma_j)``.  With ``W = U^T V``
    and ``tau`` the transposition,

    .. math::

        \operatorname{Tr} J = \sum_i \xi'_i + \sum_{i\ne j}\tfrac{c^+_{ij} + c^-_{ij}}2, \qquad
        \operatorname{Tr}\tau J = \sum_i \xi'_i W_{ii}^2 + \sum_{i\ne j}\Big[W_{ij}^2\tfrac{c^+_{ij} + c^-_{ij}}2
            + W_{ii}W_{jj}\tfrac{c^-_{ij} - c^+_{ij}}2\Big],

    and the sector divergences are ``(Tr J +- Tr tau J)/2``.  Returns them as two floats.
    """
    xp = get_array_module(U)
    sigma, xi, dxi = (xp.asarray(a, dtype=U.dtype) for a in (sigma, xi, dxi))
    W = U.T @ Vt.T
    plus = sigma[:, None] + sigma[None, :]
    minus = sigma[:, None] - sigma[None, :]
    c_plus = (xi[:, None] + xi[None, :]) / xp.where(plus == 0, 1.0, plus)
    close = xp.abs(minus) < 1e-9 * (1.0 + xp.abs(plus))
    c_minus = xp.where(close, (dxi[:, None] + dxi[None, :]) / 2,
                       (xi[:, None] - xi[None, :]) / xp.where(close, 1.0, minus))
    off = 1.0 - xp.eye(sigma.size, dtype=U.dtype)
    diag_w = xp.diagonal(W)
    tr_j = xp.sum(dxi) + xp.sum(off * (c_plus + c_minus)) / 2
    tr_tau_j = (xp.sum(dxi * diag_w**2)
                + xp.sum(off * (W * W * (c_plus + c_minus) + xp.outer(diag_w, diag_w) * (c_minus - c_plus))) / 2)
    return float((tr_j + tr_tau_j) / 2), float((tr_j - tr_tau_j) / 2)
