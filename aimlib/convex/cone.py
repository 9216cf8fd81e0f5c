r"""The statistical dimension of the descent cone of ``Tr S + 1{S PSD}`` at a rank-``r`` PSD matrix.

Book, chapter "What training learns".  The subdifferential at ``S0 = U Lambda U^T``
is ``{U U^T + U_perp M U_perp^T : M = M^T, M <= I}``; for a standard Gaussian ``G``
of the symmetric matrices (Frobenius inner product: ``G_ii ~ N(0, 1)``,
``G_ij ~ N(0, 1/2)``) and ``tau >= 0``,

.. math::  E\,\mathrm{dist}^2(G, \tau\,\partial f) = \tfrac{r(r+1)}{2} + \tau^2 r
           + r(d - r) + E \sum_i (\lambda_i(G_{22}) - \tau)_+^2,

``G_22`` the ``(d-r) x (d-r)`` block orthogonal to ``S0`` (semicircle of radius
``sqrt(2(d - r))``).  The statistical dimension is ``delta ~ min_tau`` of it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq

from .. import _validate as v
from ..channels import softmax_k

__all__ = ["StatisticalDimension", "FiniteStatisticalDimension", "semicircle_tail",
           "statistical_dimension", "statistical_dimension_finite", "min_trace_threshold",
           "goe_frobenius"]


class StatisticalDimension(NamedTuple):
    """``psi = lim delta / d^2`` and the minimising threshold ``t = lim tau / sqrt(d)``."""

    psi: float
    t: float


class FiniteStatisticalDimension(NamedTuple):
    """``delta`` (the ``min_tau`` expression at finite ``d``) and its minimiser ``tau``."""

    delta: float
    tau: float


def semicircle_tail(u: float, power: int) -> float:
    r"""``int_u^1 (x - u)^p (2/pi) sqrt(1 - x^2) dx`` for ``p = 1, 2``, in closed form.

    With ``theta = arccos u`` and ``s = sqrt(1 - u^2)`` (``|u| <= 1``):

    * ``p = 1``: ``(1/pi) [(2/3) s^3 - u (theta - u s)]``;
    * ``p = 2``: ``(1/pi) [(1/4 + u^2) theta - u s (13/12 + u^2/6)]``.

    Beyond the edges: 0 for ``u >= 1``; ``-u`` and ``1/4 + u^2`` for ``u <= -1``
    (mean 0, second moment 1/4 of the unit semicircle).
    """
    u = v.real("u", u)
    power = v.integer("power", power, minimum=1, maximum=2)
    if u >= 1.0:
        return 0.0
    if u <= -1.0:
        return -u if power == 1 else 0.25 + u * u
    theta, s = math.acos(u), math.sqrt(1.0 - u * u)
    if power == 1:
        return ((2.0 / 3.0) * s**3 - u * (theta - u * s)) / math.pi
    return ((0.25 + u * u) * theta - u * s * (13.0 / 12.0 + u * u / 6.0)) / math.pi


def statistical_dimension(rho: float) -> StatisticalDimension:
    r"""The ``d -> inf`` statistical dimension ``psi(rho) = lim delta / d^2``.

    .. math::  \psi(\rho) = \min_{t \ge 0}\Big[\frac{\rho^2}{2} + \rho(1-\rho) + \rho t^2
               + (1-\rho) R^2 F_2(t/R)\Big],\qquad R = \sqrt{2(1-\rho)},

    ``F_2`` the second semicircle tail (:func:`semicircle_tail`): ``tau = t sqrt(d)``
    and the eigenvalues of ``G_22 / sqrt(d)`` fill a semicircle of radius ``R``.
    The minimiser solves ``rho t = (1 - rho) R F_1(t/R)`` (a monotone root in
    ``(0, R)``).  ``rho >= 1``: ``S0`` is positive definite, the cone is a
    half-space and ``psi = 1/2``.  ``psi >= rho - rho^2/2`` (the count), with
    ``psi -> 3 rho`` as ``rho -> 0``.

    Parameters
    ----------
    rho : float
        Width ratio ``r/d`` in ``aimlib._validate.RHO_RANGE``.
    """
    rho = v.rho(rho)
    if rho >= 1.0:
        return StatisticalDimension(0.5, 0.0)
    R = math.sqrt(2.0 * (1.0 - rho))
    t = brentq(lambda t: rho * t - (1.0 - rho) * R * semicircle_tail(t / R, 1), 0.0, R,
               xtol=1e-15, rtol=1e-15)
    psi = rho * rho / 2 + rho * (1 - rho) + rho * t * t + (1 - rho) * R * R * semicircle_tail(t / R, 2)
    return StatisticalDimension(psi, t)


def goe_frobenius(m: int, seed=None, size: int | None = None) -> np.ndarray:
    """Standard Gaussian of the ``m x m`` symmetric matrices: ``G_ii ~ N(0,1)``, ``G_ij ~ N(0,1/2)``.

    ``(A + A^T)/2`` with ``A`` i.i.d. ``N(0,1)``: the coordinates in the orthonormal
    basis ``E_ii``, ``(E_ij + E_ji)/sqrt 2`` are i.i.d. ``N(0, 1)``.  Shape
    ``(m, m)``, or ``(size, m, m)``.
    """
    m = v.integer("m", m, minimum=1)
    shape = (m, m) if size is None else (v.integer("size", size, minimum=1), m, m)
    A = v.generator(seed).standard_normal(shape)
    return (A + np.swapaxes(A, -1, -2)) / 2


def statistical_dimension_finite(d: int, r: int, *, samples: int = 200, seed=0
                                 ) -> FiniteStatisticalDimension:
    r"""``min_tau E dist^2(G, tau df)`` at finite ``d``, the GOE average by Monte Carlo.

    .. math::  \delta = \min_{\tau\ge0}\Big[\tfrac{r(r+1)}{2} + r(d-r) + r\tau^2
               + \hat E \sum_i (\lambda_i(G_{22}) - \tau)_+^2\Big],

    ``hat E`` the average over ``samples`` GOE blocks ``G_22`` of size ``d - r``
    (:func:`goe_frobenius`, seeded: the result is a deterministic function of
    ``seed``).  The minimiser solves ``r tau = hat E sum_i (lambda_i - tau)_+``.
    It bounds the statistical dimension ``E min_tau dist^2`` from above, with
    a gap that is small compared with ``d^2`` (``r = d``: ``d(d+1)/2`` against
    the half-space's ``d(d+1)/2 - 1/2``).
    """
    d = v.integer("d", d, minimum=1)
    r = v.integer("r", r, minimum=1, maximum=d)
    samples = v.integer("samples", samples, minimum=1)
    base = r * (r + 1) / 2 + r * (d - r)
    m = d - r
    if m == 0:
        return FiniteStatisticalDimension(float(base), 0.0)
    rng = v.generator(seed)
    chunk = max(1, 2**22 // (m * m))
    lam = np.concatenate([np.linalg.eigvalsh(goe_frobenius(m, rng, min(chunk, samples - i))).ravel()
                          for i in range(0, samples, chunk)])
    tau = brentq(lambda t: r * t - np.maximum(lam - t, 0.0).sum() / samples, 0.0, max(lam.max(), 0.0) + 1.0)
    extra = r * tau * tau + (np.maximum(lam - tau, 0.0) ** 2).sum() / samples
    return FiniteStatisticalDimension(float(base + extra), float(tau))


def min_trace_threshold(rho: float, T: int) -> float:
    r"""``alpha_cvx = 2 psi(rho) / (T^2 + T - 2)``: where minimum-trace recovery starts.

    A softmax sample carries ``(T^2 + T - 2)/2`` linear measurements of ``S``;
    ``m`` generic measurements recover ``S0`` by trace minimisation iff
    ``m > delta ~ psi d^2`` (Amelunxen, Lotz, McCoy, Tropp 2014).  Compare
    :func:`aimlib.state_evolution.perfect_recovery_threshold`,
    ``2(rho - rho^2/2)/(T^2 + T - 2)``.

    Parameters
    ----------
    rho : float
        Width ratio in ``RHO_RANGE``.
    T : int
        Sequence length, ``>= 2``.
    """
    rho = v.rho(rho)
    T = v.integer("T", T, minimum=2)
    return 2.0 * statistical_dimension(rho).psi / softmax_k(T)
