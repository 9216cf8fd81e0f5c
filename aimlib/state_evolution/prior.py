r"""The prior side of the state evolution: ``mmse_S``, its slope at the origin, perfect recovery.

``q = Q0 - mmse_S(1/qhat)`` with ``mmse_S(Delta)`` the MMSE of denoising
``Y = S + sqrt(Delta) Z`` (:func:`aimlib.rmt.mmse`); ``rho = inf`` is the
Gaussian (GOE) prior of unit variance, ``mmse_S = Delta / (1 + Delta)``.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import _validate as v
from .. import rmt
from ..channels import make_channel

__all__ = ["prior_mmse", "zero_slope", "perfect_recovery_threshold", "effective_alpha", "linear_k"]


def prior_mmse(rho: float, mmse=None):
    """Return ``Delta -> mmse_S(Delta)`` for the width ratio ``rho``.

    ``mmse`` (a callable ``mmse(delta, rho)``) replaces :func:`aimlib.rmt.mmse`.
    The end points ``Delta = 0`` (``0``) and ``Delta = inf`` (``1``) are exact.
    Outside ``rmt.DELTA_RANGE`` the leading asymptotics take over, matched at the
    range's ends: ``mmse_S ~ c Delta`` as ``Delta -> 0`` and ``1 - mmse_S ~ c'/Delta``
    as ``Delta -> inf`` (relative corrections of the order of the end point, ``1e-12``).
    """
    rho = v.rho(rho, allow_inf=True)
    if math.isinf(rho):
        def base(d):
            return d / (1.0 + d)
    else:
        f = rmt.mmse if mmse is None else mmse

        def base(d):
            return float(f(d, rho))

    lo, hi = rmt.DELTA_RANGE

    def m(delta: float) -> float:
        if delta <= 0:
            return 0.0
        if math.isinf(delta):
            return 1.0
        if delta < lo:
            return base(lo) * (delta / lo)
        if delta > hi:
            return 1.0 - (1.0 - base(hi)) * (hi / delta)
        return base(delta)

    return m


def _aitken_slope(m) -> float:
    """``lim_{Delta -> 0} mmse(Delta) / Delta`` by Aitken extrapolation on a geometric grid.

    ``s(Delta) = c0 + A Delta^p + ...`` with unknown ``p`` (``p = 1`` for
    ``rho != 1``; slower at ``rho = 1``); Aitken's delta-squared removes the
    leading correction exactly for a geometric sequence of ``Delta``.
    """
    deltas = 1e-3 * 4.0 ** -np.arange(4)
    s = np.array([m(d) / d for d in deltas])
    x0, x1, x2 = s[-3:]
    den = (x2 - x1) - (x1 - x0)
    if den == 0 or not np.isfinite(den):
        return float(x2)
    est = x2 - (x2 - x1) ** 2 / den
    # the extrapolation must stay between the last value and the bound 1
    return float(min(max(est, x2), 1.0)) if x2 <= 1.0 else float(est)


@lru_cache(maxsize=64)
def _slope_cached(rho: float) -> float:
    return _aitken_slope(prior_mmse(rho))


def zero_slope(rho: float, mmse=None) -> float:
    """``c0 = lim_{Delta -> 0} mmse_S(Delta)/Delta``: ``2 rho - rho^2`` for ``rho < 1``, ``1`` beyond."""
    if math.isinf(rho):
        return 1.0
    return _slope_cached(rho) if mmse is None else _aitken_slope(prior_mmse(rho, mmse))


def linear_k(channel, T: int) -> int:
    """``k`` of a channel with ``F_out = k / V`` (noiseless softmax or linear); else a ``ValueError``."""
    ch = make_channel(channel)
    k = ch.linear_k(T)
    if k is None:
        raise ValueError(f"channel must be a noiseless softmax or linear channel here "
                         f"(F_out = k/V), got {ch!r}")
    return k


def effective_alpha(alpha: float, T: int, channel="softmax") -> float:
    """``alpha_bar = k alpha``: ``k = T^2 + T - 2`` (softmax), ``T (T + 1)`` (noiseless identity).

    The number of exact scalar measurements of ``S`` per sample is ``k / 2``.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=1)
    return linear_k(channel, T) * alpha


def perfect_recovery_threshold(rho: float, T: int, channel="softmax", *, mmse=None) -> float:
    r"""The perfect-recovery threshold ``alpha_PR`` of a noiseless linear-type channel.

    ``E_S = 0`` iff ``alpha_bar = k alpha >= lim_{Delta->0} mmse_S(Delta)/Delta``:
    the fixed point ``V = mmse_S(V/alpha_bar)`` leaves 0 when the slope of
    ``mmse_S`` at the origin equals ``alpha_bar``.  The slope is computed from
    the prior MMSE (:func:`zero_slope`), not typed in; it equals the fraction
    of degrees of freedom of a rank-``rho d`` symmetric matrix, ``2 rho - rho^2``
    for ``rho < 1`` and ``1`` for ``rho >= 1``.

    Parameters
    ----------
    rho : float
        Width ratio in ``RHO_RANGE`` (``inf`` allowed: Gaussian prior, slope 1).
    T : int
        Sequence length, ``>= 2`` (``T = 1`` carries no measurement).
    channel : str or Channel
        ``'softmax'`` (``k = T^2+T-2``) or ``'linear'`` (``k = T(T+1)``), noiseless.
    """
    rho = v.rho(rho, allow_inf=True)
    T = v.integer("T", T, minimum=2)
    return zero_slope(rho, mmse) / linear_k(channel, T)
