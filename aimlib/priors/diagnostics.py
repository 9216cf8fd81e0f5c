r"""How well a Markov chain has mixed: the integrated autocorrelation time and the effective sample size.

For a stationary series ``x_1, ..., x_n`` with normalised autocorrelation
``rho(t)``, the variance of its mean is ``tau Var(x)/n``, with the integrated
autocorrelation time

.. math::  \tau = 1 + 2\sum_{t\ge1}\rho(t),

so the ``n`` draws are worth ``n/tau`` independent ones (the effective sample
size).  :func:`integrated_autocorrelation_time` estimates ``tau`` by Sokal's
automatic windowing: the sum runs up to the smallest window ``M`` with
``M >= c tau(M)`` (here ``M >= c max(tau(M), 1)``), which keeps the bias (the
correlations beyond ``M``) and the variance (``~ 2(2M + 1)/n`` relative) both
small when ``n >> c tau``.

Used by :func:`aimlib.untied.sample_two_noise` to report how many independent
posterior draws its Hamiltonian Monte Carlo chain held.  Several chains of one law are
compared by the split potential scale reduction :func:`potential_scale_reduction`
(used by :func:`aimlib.gd.posterior.sample_posterior`).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v

__all__ = ["integrated_autocorrelation_time", "effective_sample_size", "autocorrelation", "potential_scale_reduction",
           "WINDOW", "MIN_LENGTH"]

#: Sokal's window constant ``c``: the sum stops at the smallest ``M >= c tau(M)``
WINDOW = 5.0
#: the fewest draws a series must hold for its autocorrelation time to be estimated
MIN_LENGTH = 10


def _series(x):
    """``x`` as a float ``(n, k)`` array of ``k`` columns, and whether it came as one series (1-d)."""
    a = np.asarray(x)
    if a.ndim not in (1, 2):
        raise ValueError(f"x must be a 1-d series or a 2-d array of series (one per column), "
                         f"got shape {tuple(a.shape)}")
    a = v.finite_array("x", a.astype(float) if a.dtype == bool else a)
    if a.shape[0] < MIN_LENGTH:
        raise ValueError(f"x must hold at least {MIN_LENGTH} draws along its first axis, got {a.shape[0]}")
    return np.asarray(a, dtype=float).reshape(a.shape[0], -1), a.ndim == 1


def autocorrelation(x) -> np.ndarray:
    r"""The normalised autocorrelation ``rho(t)``, ``t = 0 .. n - 1``, of each column of ``x`` (by FFT).

    ``rho(t) = C(t)/C(0)`` with ``C(t) = (1/n) sum_{i=1}^{n-t} (x_i - xbar)(x_{i+t} - xbar)``
    (the usual biased estimate, positive definite).  Returns an array of ``x``'s
    shape; a constant column gives NaN.
    """
    a, single = _series(x)
    n = a.shape[0]
    size = 1 << (2 * n - 1).bit_length()                       # zero padding: no wrap-around
    f = np.fft.rfft(a - a.mean(axis=0), n=size, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=0)[:n] / n
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(acov[0] > 0, acov / np.where(acov[0] > 0, acov[0], 1.0), np.nan)
    return rho[:, 0] if single else rho


def integrated_autocorrelation_time(x, c: float = WINDOW):
    r"""The integrated autocorrelation time of each column of ``x``, by Sokal's automatic windowing.

    Parameters
    ----------
    x : array_like, shape ``(n,)`` or ``(n, k)``
        One series, or ``k`` series as columns; finite, ``n >= MIN_LENGTH``.
    c : float
        The window constant (``> 0``; default :data:`WINDOW`, 5).

    Returns
    -------
    float or ndarray of shape ``(k,)``
        .. math::  \tau = 1 + 2\sum_{t=1}^{M}\rho(t),

        ``rho`` the normalised autocorrelation (:func:`autocorrelation`) and
        ``M`` the smallest window with ``M >= c max(tau(M), 1)`` (at least ``c``,
        so that the alternating sum of an anticorrelated series is not cut
        after one term).  Where no window up to
        ``n - 1`` qualifies the series is too short for its correlations and the
        value at ``M = n - 1`` is returned (an underestimate).  An
        anticorrelated series has ``tau < 1``; the estimate is kept
        ``>= 1/log10(n)`` (so the effective sample size is at most
        ``n log10 n``, Stan's convention).  A constant column gives NaN.

    Notes
    -----
    For an AR(1) series ``x_{i+1} = phi x_i + noise``, ``rho(t) = phi^t`` and
    ``tau = (1 + phi)/(1 - phi)``.  A. D. Sokal, *Monte Carlo methods in
    statistical mechanics: foundations and new algorithms* (1996), section 3.
    """
    c = v.positive("c", c)
    rho = autocorrelation(x)
    single = rho.ndim == 1
    rho = rho.reshape(rho.shape[0], -1)
    n = rho.shape[0]
    taus = 2 * np.cumsum(rho, axis=0) - 1                        # taus[M] = 1 + 2 sum_{t=1}^M rho(t)
    out = np.empty(rho.shape[1])
    for j in range(rho.shape[1]):
        if np.isnan(taus[0, j]):
            out[j] = np.nan
            continue
        ok = np.arange(n) >= c * np.maximum(taus[:, j], 1.0)
        out[j] = taus[int(np.argmax(ok)) if ok.any() else n - 1, j]
    out = np.where(np.isnan(out), np.nan, np.maximum(out, 1 / math.log10(n)))
    return float(out[0]) if single else out


def effective_sample_size(x, c: float = WINDOW):
    """``n/tau``: the number of independent draws the ``n`` draws of each column of ``x`` are worth.

    ``tau`` is :func:`integrated_autocorrelation_time` (same ``x`` and ``c``); a float for a 1-d
    ``x``, an array of one value per column for a 2-d one.
    """
    tau = integrated_autocorrelation_time(x, c)
    return np.shape(x)[0] / tau


def potential_scale_reduction(x) -> float:
    r"""The split potential scale reduction ``R-hat`` of ``m`` chains, one per column of ``x``.

    Each chain is cut into its two halves, giving ``M = 2m`` series of ``N = floor(n/2)``
    draws with means ``x_j`` and variances ``s_j^2``; with ``W = mean_j s_j^2`` and
    ``B/N`` the variance of the ``x_j`` (both with ``ddof = 1``),

    .. math::  \hat R = \sqrt{\frac{(N - 1)/N\; W + B/N}{W}} .

    ``R-hat`` is near 1 when every half-chain samples one law, and above it when the
    chains sit in different places or drift (Gelman and Rubin 1992; the split form of
    Gelman et al., *Bayesian Data Analysis*, 3rd ed., section 11.4).  ``x`` has shape
    ``(n, m)``, ``m >= 2``, ``n >= 2 MIN_LENGTH``; a statistic constant within every half
    gives ``inf`` if the halves differ and 1 if they do not.
    """
    a = v.finite_array("x", np.asarray(x, dtype=float), ndim=2)
    n, m = a.shape
    if m < 2 or n < 2 * MIN_LENGTH:
        raise ValueError(f"x must hold m >= 2 chains (columns) of at least {2 * MIN_LENGTH} draws, "
                         f"got shape {tuple(a.shape)}")
    N = n // 2
    halves = np.concatenate([a[:N], a[n - N:]], axis=1)              # (N, 2m)
    W = halves.var(axis=0, ddof=1).mean()
    B_over_N = halves.mean(axis=0).var(ddof=1)
    if W == 0:
        return 1.0 if B_over_N == 0 else math.inf
    return float(math.sqrt(((N - 1) / N * W + B_over_N) / W))
