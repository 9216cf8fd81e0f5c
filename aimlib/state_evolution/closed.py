r"""The closed-form state evolution of noiseless linear-type channels (softmax, identity).

With ``F_out = k / V`` the fixed point solves the scalar equation

.. math::  V = \mathrm{mmse}_S(V / \bar\alpha), \qquad \bar\alpha = k\, \alpha ,

equivalently ``mmse_S(Delta) / Delta = alpha_bar`` with ``V = alpha_bar Delta``: a
one-dimensional root find in ``t = log Delta``.
"""
from __future__ import annotations

import math

from ..errors import ConvergenceError

__all__ = ["solve_closed"]


def solve_closed(abar: float, m, c0: float, guess: float | None, tol: float):
    """Solve ``mmse(Delta)/Delta = abar`` for ``t = log Delta``; return ``(V, Delta, evals, trace)``.

    ``guess`` is a starting ``t`` (warm start).  Secant iterations inside a
    maintained bracket (``h`` decreasing in ``t``), bisection as fallback.
    ``m`` is any prior's MMSE (:meth:`aimlib.priors.base.Prior.mmse`) and ``c0``
    its zero-noise slope.  Below ``abar = 1e-12`` the root
    lies where ``mmse = 1 - c/Delta`` (the asymptotic branch of
    :meth:`~aimlib.priors.base.Prior.mmse`) and is solved exactly.
    """
    if abar <= 0:
        return 1.0, math.inf, 0, [1.0]
    if abar >= c0:
        return 0.0, 0.0, 0, [0.0]
    if abar < 1e-12:   # Delta = V/abar > 1e12, where mmse(Delta) = 1 - c/Delta: V^2 - V + c abar = 0
        c = (1.0 - m(1e12)) * 1e12
        V = 1.0 - 2.0 * c * abar / (1.0 + math.sqrt(1.0 - 4.0 * c * abar))
        return V, V / abar, 1, [V]
    la = math.log(abar)
    evals = 0
    trace = []

    def h(t):
        nonlocal evals
        evals += 1
        mv = m(math.exp(t))
        trace.append(mv)
        if mv <= 0:
            return math.inf
        return math.log(mv) - t - la

    t_hi_bound = -la  # Delta = 1/abar: mmse < 1 gives h < 0
    t0 = min(guess, t_hi_bound) if guess is not None else t_hi_bound - 1.0
    h0 = h(t0)
    if h0 == 0:
        return abar * math.exp(t0), math.exp(t0), evals, trace
    step = 0.05 if guess is not None else 1.0
    # bracket: lo has h > 0, hi has h < 0
    if h0 > 0:
        lo, hlo = t0, h0
        hi = t0 + step
        hhi = h(hi)
        while hhi > 0:
            lo, hlo = hi, hhi
            step *= 4
            hi = min(hi + step, t_hi_bound)
            hhi = h(hi)
            if hi == t_hi_bound and hhi > 0:
                raise ConvergenceError(f"SE root find failed to bracket the fixed point at alpha_bar={abar:g}")
    else:
        hi, hhi = t0, h0
        lo = t0 - step
        hlo = h(lo)
        while hlo < 0:
            hi, hhi = lo, hlo
            step *= 4
            lo = lo - step
            if lo < math.log(1e-15):  # numerically at perfect recovery
                return 0.0, 0.0, evals, trace
            hlo = h(lo)
    t = _regula_falsi(h, lo, hlo, hi, hhi, tol, abar)
    delta = math.exp(t)
    return abar * delta, delta, evals, trace


def _regula_falsi(h, lo, hlo, hi, hhi, tol, abar):
    """The root of the decreasing ``h`` inside ``[lo, hi]`` (``h(lo) > 0 > h(hi)``): Illinois-type regula falsi."""
    side = 0
    for _ in range(200):
        t = hi - hhi * (hi - lo) / (hhi - hlo)
        if not lo < t < hi:
            t = 0.5 * (lo + hi)
        ht = h(t)
        if abs(ht) < 1e-15 or (hi - lo) < tol:
            return t
        if ht > 0:
            lo, hlo = t, ht
            if side == -1:
                hhi /= 2
            side = -1
        else:
            hi, hhi = t, ht
            if side == 1:
                hlo /= 2
            side = 1
        if abs(hi - lo) < tol:
            return t
    raise ConvergenceError(f"SE root find did not converge at alpha_bar={abar:g}")  # pragma: no cover
