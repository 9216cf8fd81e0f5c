r"""The closed-form state evolution of noiseless linear-type channels (softmax, identity).

With ``F_out = k / V`` the fixed point solves the scalar equation

.. math::  V = \mathrm{mmse}_S(V / \bar\alpha), \qquad \bar\alpha = k\, \alpha ,

equivalently ``mmse_S(Delta) / Delta = alpha_bar`` with ``V = alpha_bar Delta``: a
one-dimensional root find in ``t = log Delta``.  Along a curve the left side
``g(t) = log mmse_S(e^t) - t`` is the same function for every ``alpha``, so
:func:`solve_closed_many` solves all points from one growing table of ``g``:
the root of each is read off by inverse interpolation and checked by one new
evaluation of ``g`` next to it.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from .._validate import DELTA_RANGE
from ..errors import ConvergenceError

#: the scalar root find's floor on ``Delta = V/alpha_bar``: a fixed point below it is perfect recovery,
#: ``V = 0``.  Beneath ``DELTA_RANGE``, where the MMSE is its exact small-noise asymptote ``c Delta``, so
#: the root is followed three decades past the range's end before it is called zero
PERFECT_DELTA = 1e-15

__all__ = ["solve_closed", "solve_closed_many", "NEAR"]

#: table entries of one inverse interpolation (:func:`solve_closed_many`)
NEAR = 6


def solve_closed(abar: float, m, c0: float, guess: float | None, tol: float):
    """Solve ``mmse(Delta)/Delta = abar`` for ``t = log Delta``; return ``(V, Delta, evals, trace)``.

    ``guess`` is a starting ``t`` (warm start).  Secant iterations inside a
    maintained bracket (``h`` decreasing in ``t``), bisection as fallback.
    ``m`` is any prior's MMSE (:meth:`aimlib.priors.base.Prior.mmse`) and ``c0``
    its zero-noise slope.  Below ``abar = 1/1e12`` (``Delta`` beyond ``DELTA_RANGE``) the root
    lies where ``mmse = 1 - c/Delta`` (the asymptotic branch of
    :meth:`~aimlib.priors.base.Prior.mmse`) and is solved exactly.
    """
    if abar <= 0:
        return 1.0, math.inf, 0, [1.0]
    if abar >= c0:
        return 0.0, 0.0, 0, [0.0]
    if abar < 1.0 / DELTA_RANGE[1]:   # Delta = V/abar beyond DELTA_RANGE: mmse = 1 - c/Delta, V^2 - V + c abar = 0
        c = (1.0 - m(DELTA_RANGE[1])) * DELTA_RANGE[1]
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
            if lo < math.log(PERFECT_DELTA):  # numerically at perfect recovery
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


def _inverse_interpolate(nodes, la: float) -> float:
    """``t`` at ``g = la`` by Lagrange interpolation of ``t`` in ``g`` through ``nodes`` (``(g, t)``,
    distinct ``g``)."""
    g = [n[0] for n in nodes]
    w = np.array([math.prod((la - g[k]) / (g[j] - g[k]) for k in range(len(g)) if k != j)
                  for j in range(len(g))])
    return float(w @ np.array([n[1] for n in nodes]))


class _Table:
    """The evaluations ``g -> t`` of ``g(t) = log mmse_S(e^t) - t``, with their ``g`` kept sorted."""

    def __init__(self):
        self.t, self.keys = {}, []

    def __len__(self) -> int:
        return len(self.t)

    def __contains__(self, g) -> bool:
        return g in self.t

    def add(self, g: float, t: float) -> None:
        """Enter ``g -> t`` unless ``g`` is there already."""
        if g not in self.t:
            self.t[g] = t
            bisect.insort(self.keys, g)

    def nearest(self, la: float, count: int) -> list:
        """Up to ``count`` entries ``(g, t)`` with ``g`` closest to ``la``, well apart.

        The entries are visited outwards from ``la``; one is skipped when it lies closer to
        one already taken than a quarter of its distance to ``la``: clustered nodes (the last
        steps of a root find) make the interpolation weights blow up.
        """
        keys, taken = self.keys, []
        right = bisect.bisect_left(keys, la)
        left = right - 1
        while len(taken) < count and (left >= 0 or right < len(keys)):
            if right >= len(keys) or (left >= 0 and la - keys[left] <= keys[right] - la):
                g, left = keys[left], left - 1
            else:
                g, right = keys[right], right + 1
            if all(abs(g - h) > 0.25 * abs(g - la) for h, _ in taken):
                taken.append((g, self.t[g]))
        return taken


def _from_table(table: _Table, la: float, tol: float, m):
    """The root ``t`` of ``g(t) = la`` from ``table`` and at most three new evaluations, or ``None``.

    Each step interpolates ``t`` through the :data:`NEAR` entries with ``g`` closest to ``la``
    (``t_0``), evaluates ``g`` there, enters it and interpolates again with it (``t_1``); the
    root ``t_1`` is accepted when the estimate of its interpolation error,
    ``|t_1 - t_0| |g(t_0) - la| / min_k |g(t_0) - g_k|`` (the next term of the
    interpolation), is below ``tol``.
    """
    for _ in range(3):
        near = table.nearest(la, NEAR)
        t0 = _inverse_interpolate(near, la)
        if not (math.isfinite(t0) and math.log(PERFECT_DELTA) < t0 < 1.0 - la):
            return None
        mv = m(math.exp(t0))
        if not 0 < mv < math.inf:
            return None
        g0 = math.log(mv) - t0
        if g0 == la:
            return t0
        if g0 in table:
            return None
        table.add(g0, t0)
        near = table.nearest(la, NEAR)
        if near[0][0] != g0:
            return None
        spread = min(abs(g0 - n[0]) for n in near[1:])
        t1 = _inverse_interpolate(near, la)
        if abs(t1 - t0) * abs(g0 - la) / spread < tol and abs(t1 - t0) < 1e-3:
            return t1
    return None


def solve_closed_many(abars, m, c0: float, tol: float):
    """:func:`solve_closed` at every ``abar`` (increasing order), sharing the evaluations of ``g``.

    ``g(t) = log m(e^t) - t`` does not depend on ``abar``: every evaluation made for one point
    enters a table ``g -> t`` from which the next points' roots are interpolated
    (:func:`_from_table`, usually one new evaluation per point).  A point the table does not
    settle is solved alone by :func:`solve_closed` (its evaluations enter the table too).  Each
    value is the root of its own equation to ``tol`` in ``log Delta``, as when solved alone.

    Returns
    -------
    list of ``(V, Delta, evaluations)``, one per ``abar``.
    """
    table, out = _Table(), []

    def recorded(delta):
        mv = m(delta)
        if 0 < mv < math.inf:
            table.add(math.log(mv) - math.log(delta), math.log(delta))
        return mv

    for abar in abars:
        if abar <= 0 or abar >= c0 or abar < 1.0 / DELTA_RANGE[1]:
            out.append(solve_closed(abar, m, c0, None, tol)[:3])
            continue
        la, before = math.log(abar), len(table)
        t = _from_table(table, la, tol, m) if len(table.nearest(la, NEAR)) == NEAR else None
        evals = len(table) - before
        if t is None:
            V, delta, more, _ = solve_closed(abar, recorded, c0, None, tol)
            out.append((V, delta, evals + more))
        else:
            out.append((abar * math.exp(t), math.exp(t), evals))
    return out
