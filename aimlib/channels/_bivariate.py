r"""Bivariate normal orthant probabilities in log space (private helper of the hardmax channel).

``Phi_2(h, k; r) = P(X < h, Y < k)`` for standard normals ``X, Y`` of
correlation ``r``: Owen's closed form where it is accurate, a log-space
Gauss-Legendre quadrature of ``int_{-inf}^h phi(x) Phi((k - r x)/sqrt(1-r^2)) dx``
in the tails.
"""
from __future__ import annotations

import math

import numpy as np

from .._lazy import LazyModule
from ..backend import to_host

special = LazyModule("scipy.special")   # loaded on first use: `import aimlib.channels` needs no SciPy

__all__ = ["log_phi", "log_bvn_cdf", "bvn_cdf", "grad_log_bvn"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

# Gauss-Legendre rule of the orthant quadrature (40 nodes: relative error ~1e-14)
_NQ = 40
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_NQ)
_LOG_GL_W = np.log(_GL_W)
# relative truncation of the orthant integral: e^{-40} ~ 4e-18
_TAIL = 40.0
# below this value the Owen-T closed form (absolute error ~1e-16) is replaced by quadrature
_CLOSED_FORM_MIN = 1e-3


def log_phi(x):
    """``log phi(x)``, the log of the standard normal density."""
    return -0.5 * x * x - _LOG_SQRT_2PI


def _mills_inv(z):
    """``phi(z) / Phi(z)``, stable for every real ``z``."""
    return np.exp(log_phi(z) - special.log_ndtr(z))


def _bvn_owen(h, k, r):
    """``Phi_2(h, k; r)`` by Owen's T function (accurate in absolute terms; needs ``h k != 0``)."""
    c = np.sqrt(1.0 - r * r)
    with np.errstate(divide="ignore", invalid="ignore"):
        ah = (k - r * h) / (h * c)
        ak = (h - r * k) / (k * c)
        beta = np.where(h * k > 0, 0.0, 0.5)
        val = (0.5 * special.ndtr(h) + 0.5 * special.ndtr(k)
               - special.owens_t(h, ah) - special.owens_t(k, ak) - beta)
    return val


def _log_bvn_quad(h, k, r):
    r"""``log Phi_2(h, k; r)`` from ``int_{-inf}^h phi(x) Phi((k - r x)/c) dx`` in log space.

    The log-integrand ``p(x)`` is concave with ``-1 - r^2/c^2 <= p'' <= -1``, so
    its mode is found by a few Newton steps and a window of ``~sqrt(2*45)`` (or
    ``45/p'`` when the mode lies beyond ``h``) holds all but ``e^{-45}`` of the
    mass; a 64-point Gauss-Legendre rule on that window is then exact to
    double precision.
    """
    c = np.sqrt(1.0 - r * r)
    a = r / c

    def dp(x):
        z = (k - r * x) / c
        m = _mills_inv(z)
        return -x - a * m, -1.0 - a * a * m * (z + m)

    x = r * np.minimum(k, 0.0)
    for _ in range(30):
        d1, d2 = dp(x)
        step = d1 / d2
        x = x - step
        if np.all(np.abs(step) < 1e-13 * (1.0 + np.abs(x))):
            break
    mode = x
    xs = np.minimum(mode, h)
    slope = np.maximum(dp(xs)[0], 0.0)
    half = math.sqrt(2.2 * _TAIL)
    with np.errstate(divide="ignore"):
        left = xs - np.minimum(half, _TAIL / slope)
    right = np.minimum(h, mode + half)
    mid = 0.5 * (right + left)
    rad = 0.5 * (right - left)
    nodes = mid[..., None] + rad[..., None] * _GL_X
    z = (k[..., None] - r[..., None] * nodes) / c[..., None]
    logf = log_phi(nodes) + special.log_ndtr(z) + _LOG_GL_W
    return special.logsumexp(logf, axis=-1) + np.log(rad)


def log_bvn_cdf(h, k, r):
    r"""``log Phi_2(h, k; r)``, the log of ``P(X < h, Y < k)`` for standard normals of correlation ``r``.

    Vectorised over broadcastable ``h, k, r`` (``|r| < 1``).  Where the
    probability exceeds ``1e-5`` it uses Owen's closed form
    ``Phi_2 = (Phi(h) + Phi(k))/2 - T(h, a_h) - T(k, a_k) - beta``;
    elsewhere (the tails, where that form cancels) it integrates
    ``phi(x) Phi((k - r x)/sqrt(1 - r^2))`` in log space, so the result stays
    finite and relatively accurate (``~1e-13``) even for ``h, k ~ -40``.

    Parameters
    ----------
    h, k : array_like
        Upper limits (finite; CuPy arrays are copied to the host).
    r : array_like
        Correlation, ``-1 < r < 1``.

    Returns
    -------
    numpy.ndarray
        ``log Phi_2`` with the broadcast shape.
    """
    h, k, r = np.broadcast_arrays(*(np.asarray(to_host(a), dtype=float) for a in (h, k, r)))
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(k))):
        raise ValueError("h and k must be finite")
    if not np.all(np.abs(r) < 1):
        raise ValueError("r must satisfy -1 < r < 1")
    out = np.empty(h.shape)
    val = _bvn_owen(h, k, r)
    good = (val > _CLOSED_FORM_MIN) & (np.abs(h) > 1e-8) & (np.abs(k) > 1e-8)
    out[good] = np.log(val[good])
    bad = ~good
    if np.any(bad):
        out[bad] = _log_bvn_quad(h[bad], k[bad], r[bad])
    return out


def bvn_cdf(h, k, r):
    """``Phi_2(h, k; r) = P(X < h, Y < k)`` (see :func:`log_bvn_cdf`)."""
    return np.exp(log_bvn_cdf(h, k, r))


def grad_log_bvn(k1, k2, r, logz):
    """``(d/dk1, d/dk2) log Phi_2(k1, k2; r)`` from the log of every factor (``logz = log Phi_2``).

    ``d Phi_2 / dh = phi(h) Phi((k - r h)/sqrt(1 - r^2))``, evaluated as an exponent of logs.
    """
    c = np.sqrt(1.0 - r * r)
    a1 = np.exp(log_phi(k1) + special.log_ndtr((k2 - r * k1) / c) - logz)
    a2 = np.exp(log_phi(k2) + special.log_ndtr((k1 - r * k2) / c) - logz)
    return a1, a2
