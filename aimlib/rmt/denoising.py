r"""Denoising ``Y = S + sqrt(Delta) Z``: the prior MMSE and the estimators of ``S``.

Book, chapter "Matrix denoising".  The Bayes-optimal estimator is the RIE:
eigenvectors of ``Y``, eigenvalues ``lambda -> lambda - 2 Delta h(lambda)``
(``h`` the Hilbert transform of :func:`aimlib.rmt.hilbert`); its error per
dimension is :func:`mmse`.  :func:`rie` and :func:`linear_shrinkage` follow the
array module of their input (NumPy or CuPy).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ._arcs import quadrature
from ._checks import check_delta, real_points
from .spectrum import hilbert


# --------------------------------------------------------------------------- the MMSE
def _mmse_one(delta: float, rho: float) -> float:
    """:func:`mmse` at one validated ``Delta``, from ``g = xi - i y`` on the nodes of the support."""
    s = math.sqrt(rho)
    _, w, g = quadrature(delta, rho)
    xi, y = g.real, -g.imag
    P = xi * xi + y * y
    Q = (xi - s) ** 2 + y * y
    # 2 h - (x - s)/(1 + Delta) with x = s^3/Q + 2 Delta xi, without cancellation
    dev = (2.0 * xi * (P - 2.0 * s * xi) + s * P) / (Q * (1.0 + delta))
    return delta / (1.0 + delta) - delta * delta * float(w @ (y / np.pi * dev * dev))


def mmse(delta, rho):
    r"""Minimum mean-square error ``lim (1/d) E ||E[S|Y] - S||_F^2`` of extensive-rank denoising.

    .. math::

        \mathrm{mmse}(\Delta) = \Delta - \frac{4\pi^2}{3}\Delta^2 \int \mu_\Delta^3
        = \frac{\Delta}{1+\Delta} - \Delta^2 \int \mu_\Delta(x)
          \Big(2h(x) - \frac{x - \sqrt\rho}{1+\Delta}\Big)^2 dx ,

    the second form (free Cramer-Rao: ``Phi Var >= 1``) being free of the
    cancellation of the first one at large ``Delta``.  Limits: ``mmse/Delta ->
    2 rho - rho^2`` (``rho < 1``) or ``1`` (``rho >= 1``) as ``Delta -> 0``;
    ``mmse = 1 - 1/Delta + O(Delta^-2)`` as ``Delta -> infinity``;
    ``mmse <= Delta/(1+Delta)`` (the Gaussian-prior value).

    Parameters
    ----------
    delta : float or array_like
        Noise variance(s) ``Delta`` in ``[1e-12, 1e12]``.
    rho : float
        Width ratio in ``[1e-4, 1e4]``.

    Returns
    -------
    float, or ndarray of the shape of ``delta``.
    """
    rho = v.rho(rho)
    if np.ndim(delta) == 0:
        return _mmse_one(check_delta(delta), rho)
    arr = real_points("delta", delta)
    out = np.empty(arr.shape)
    for i, dl in np.ndenumerate(arr):
        out[i] = _mmse_one(check_delta(float(dl)), rho)
    return out


def mmse_gaussian(delta):
    r"""``Delta / (1 + Delta)``: the MMSE for a GOE prior of unit variance (the ``rho -> inf`` limit)."""
    if np.ndim(delta) == 0:
        d = v.positive("delta", delta, allow_inf=False)
        return d / (1.0 + d)
    arr = real_points("delta", delta)
    if np.any(arr <= 0):
        raise ValueError("delta must be > 0")
    return arr / (1.0 + arr)


# --------------------------------------------------------------------------- estimators
def rie_eigenvalues(lam, delta, rho):
    r"""The RIE eigenvalue map ``xi(lambda) = lambda - 2 Delta h(lambda)`` (NumPy, vectorised)."""
    delta = check_delta(delta)
    rho = v.rho(rho)
    lam = real_points("lam", lam)
    return lam - 2.0 * delta * hilbert(lam, delta, rho)


def rie(Y, delta, rho):
    r"""Rotationally invariant estimator of ``S`` from ``Y = S + sqrt(Delta) Z``.

    ``Y = sum_i lambda_i u_i u_i^T``  ->  ``S_hat = sum_i xi(lambda_i) u_i u_i^T`` with
    ``xi(lambda) = lambda - 2 Delta h(lambda)`` and ``h`` the principal-value
    Stieltjes transform of the limiting spectrum of ``Y`` (:func:`aimlib.rmt.hilbert`).  In
    the limit this is the posterior mean ``E[S | Y]`` (Bayes-optimal) and its
    error per dimension is :func:`mmse`.

    Parameters
    ----------
    Y : (d, d) symmetric array (NumPy or CuPy)
    delta, rho : float

    Returns
    -------
    Array of the same module and shape as ``Y``.
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    Y = v.symmetric_matrix("Y", Y)
    xp = get_array_module(Y)
    Yf = Y.astype(xp.float64) if Y.dtype != xp.float32 else Y
    lam, U = xp.linalg.eigh((Yf + Yf.T) / 2)
    xi = rie_eigenvalues(to_host(lam), delta, rho)
    xi = to_device(xi.astype(to_host(lam).dtype), xp)
    return (U * xi[None, :]) @ U.T


def rie_divergence(Y, delta, rho) -> float:
    r"""The Onsager coefficient of :func:`rie` at ``Y``: ``Delta / d`` times its divergence in the metric of the GOE.

    For a spectral map ``Y = sum_a lambda_a u_a u_a^T -> sum_a xi(lambda_a) u_a u_a^T`` and a GOE matrix ``Z``
    (entries of variance ``1/d`` off the diagonal, ``2/d`` on it), Stein's identity gives
    ``E <sqrt(Delta) Z, rie(Y)> / d = E[o]`` with

    .. math::  o = \frac{\Delta}{d^2}\Big[\,2\sum_a \xi'(\lambda_a)
               + \sum_{a\ne b}\frac{\xi(\lambda_a)-\xi(\lambda_b)}{\lambda_a-\lambda_b}\Big],

    the part of the estimate that follows the noise.  On the law ``Y = S + sqrt(Delta) Z`` the RIE is the
    posterior mean and ``o`` tends to :func:`mmse` (a Nishimori identity), the value GAMP-RIE's Onsager term
    takes; off that law ``o`` is the RIE's own.  ``xi'`` by central differences; a pair of eigenvalues closer
    than ``1e-12`` takes the mean of their ``xi'``.  ``Y`` NumPy or CuPy; a float.
    """
    delta, rho = check_delta(delta), v.rho(rho)
    Y = v.symmetric_matrix("Y", Y)
    xp = get_array_module(Y)
    lam = to_host(xp.linalg.eigvalsh((Y + Y.T) / 2)).astype(np.float64)
    xi = rie_eigenvalues(lam, delta, rho)
    step = 1e-6 * (1.0 + np.abs(lam))
    slope = (rie_eigenvalues(lam + step, delta, rho) - rie_eigenvalues(lam - step, delta, rho)) / (2 * step)
    gap = lam[:, None] - lam[None, :]
    close = np.abs(gap) < 1e-12
    pairs = np.where(close, (slope[:, None] + slope[None, :]) / 2,
                     (xi[:, None] - xi[None, :]) / np.where(close, 1.0, gap))
    np.fill_diagonal(pairs, 0.0)
    d = len(lam)
    return float(delta * (2 * slope.sum() + pairs.sum()) / d ** 2)


def linear_shrinkage(Y, delta, rho):
    r"""Best linear (Wiener) estimator ``sqrt(rho) I + (Y - sqrt(rho) I)/(1 + Delta)``.

    Its error per dimension tends to ``Delta/(1 + Delta)`` (:func:`mmse_gaussian`).
    """
    delta = check_delta(delta)
    rho = v.rho(rho)
    Y = v.symmetric_matrix("Y", Y)
    xp = get_array_module(Y)
    s = math.sqrt(rho)
    eye = xp.eye(Y.shape[0], dtype=Y.dtype)
    return s * eye + (Y - s * eye) / (1.0 + delta)

