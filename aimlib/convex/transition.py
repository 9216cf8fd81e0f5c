r"""Where a recovery probability crosses one half, and how that point moves with ``d``.

Book, chapter "What training learns", section on the convex program at scale.
At each sample complexity ``alpha_i`` of a grid, ``k_i`` of ``N_i`` solves
recover the teacher.  :func:`transition_crossing` fits the logistic curve

.. math::  P(\text{recovery} \mid \alpha) = \sigma\big(\beta_0 + \beta_1 t\big),\qquad
           t = (\alpha - \bar\alpha)/s,\quad \sigma(u) = 1/(1 + e^{-u}),

by Firth's penalised maximum likelihood (Firth 1993, Biometrika 80, 27): the
score ``X^T (k - N p)`` gains ``X^T h (1/2 - p)`` with ``h`` the diagonal of the
hat matrix ``W^{1/2} X (X^T W X)^{-1} X^T W^{1/2}``, ``W = N p (1 - p)``.  Unlike
the plain likelihood, its maximiser stays finite when no solve fails above some
``alpha`` and none succeeds below it, the usual case for a sharp transition on
a coarse grid.  The crossing is ``alpha_1/2 = alpha_bar - s beta_0 / beta_1``;
its standard error is the delta method on the inverse Fisher information
``(X^T W X)^{-1}``.

:func:`extrapolate_crossing` fits ``alpha_1/2(d) = a_inf + c d^{-gamma}`` by
weighted least squares (weights ``1/se^2``); with two sizes the line passes
through both points and the error is the propagation of theirs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate as v
from ..errors import ConvergenceError

__all__ = ["Crossing", "Extrapolation", "transition_crossing", "extrapolate_crossing"]


class Crossing(NamedTuple):
    """The fit of :func:`transition_crossing`."""

    alpha: float        #: where the fitted probability is 1/2
    se: float           #: its standard error (delta method)
    width: float        #: ``s / beta_1``: the alpha over which the log-odds change by one
    iterations: int


class Extrapolation(NamedTuple):
    """The fit of :func:`extrapolate_crossing`: ``alpha_1/2(d) = limit + slope d^{-exponent}``."""

    limit: float
    se: float
    slope: float
    exponent: float


def _firth_step(X, k, N, beta):
    """One Newton step of Firth's penalised likelihood: ``(step, inverse Fisher information)``."""
    p = 1.0 / (1.0 + np.exp(-(X @ beta)))
    W = N * p * (1.0 - p)
    info_inv = np.linalg.inv(X.T @ (W[:, None] * X))
    h = W * np.einsum("ij,jk,ik->i", X, info_inv, X)
    score = X.T @ (k - N * p + h * (0.5 - p))
    return info_inv @ score, info_inv


def transition_crossing(alpha, successes, trials, *, tol: float = 1e-10,
                        max_iter: int = 200) -> Crossing:
    r"""The ``alpha`` where the recovery probability crosses 1/2, by a Firth logistic fit (module docstring).

    Parameters
    ----------
    alpha : array of shape (g,)
        The grid, at least two distinct values.
    successes, trials : arrays of shape (g,)
        ``0 <= successes <= trials``, ``trials >= 1``, integers.
    tol, max_iter : float, int
        Newton's iteration stops when its step is below ``tol`` (in the
        standardised coefficients); :class:`ConvergenceError` after ``max_iter``.

    Raises
    ------
    ValueError
        Bad input: no recovery or no failure at all (the grid does not bracket
        the crossing), or a fit whose probability does not increase with
        ``alpha`` (``beta_1 <= 0``: no crossing from failure to recovery).
    """
    a = np.asarray(v.finite_array("alpha", alpha, ndim=1), dtype=float)
    k = np.asarray(v.finite_array("successes", successes, ndim=1), dtype=float)
    N = np.asarray(v.finite_array("trials", trials, ndim=1), dtype=float)
    if not a.shape == k.shape == N.shape:
        raise ValueError(f"alpha, successes and trials must have one shape, got {a.shape}, {k.shape}, {N.shape}")
    if np.unique(a).size < 2:
        raise ValueError("alpha must hold at least two distinct values")
    if np.any(N < 1) or np.any(k < 0) or np.any(k > N) or np.any(k % 1) or np.any(N % 1):
        raise ValueError("successes and trials must be integers with 0 <= successes <= trials, trials >= 1")
    if k.sum() == 0 or k.sum() == N.sum():
        raise ValueError("the solves must include a recovery and a failure, or the grid does not "
                         "bracket the crossing")
    v.in_range("tol", tol, 1e-15, 1e-2)
    v.integer("max_iter", max_iter, minimum=1)
    centre, scale = a.mean(), a.std()
    X = np.stack([np.ones_like(a), (a - centre) / scale], axis=1)
    beta = np.zeros(2)
    for it in range(1, max_iter + 1):
        step, info_inv = _firth_step(X, k, N, beta)
        beta = beta + step / max(1.0, np.abs(step).max() / 5.0)     # damped far from the optimum
        if np.abs(step).max() < tol:
            break
    else:
        raise ConvergenceError(f"the Firth logistic fit did not converge in max_iter = {max_iter} steps")
    if beta[1] <= 0:
        raise ValueError("the fitted recovery probability does not increase with alpha: no crossing")
    grad = np.array([-1.0 / beta[1], beta[0] / beta[1] ** 2])
    _, info_inv = _firth_step(X, k, N, beta)
    return Crossing(float(centre - scale * beta[0] / beta[1]), float(scale * np.sqrt(grad @ info_inv @ grad)),
                    float(scale / beta[1]), it)


def extrapolate_crossing(d, crossing, se, *, exponent: float = 1.0) -> Extrapolation:
    r"""Fit ``crossing(d) = limit + slope d^{-exponent}`` by weighted least squares; the ``d -> inf`` limit.

    Parameters
    ----------
    d : array of shape (g,)
        At least two distinct sizes, positive.
    crossing, se : arrays of shape (g,)
        The crossings (:func:`transition_crossing`) and their standard errors (positive).
    exponent : float
        ``gamma > 0``: ``1`` for a correction of order ``1/d``, ``0.5`` for ``1/sqrt d``.

    Returns
    -------
    Extrapolation
        With ``se`` the limit's standard error from the weighted normal equations
        (two sizes: the propagation of the two errors through the line).
    """
    d = np.asarray(v.finite_array("d", d, ndim=1), dtype=float)
    y = np.asarray(v.finite_array("crossing", crossing, ndim=1), dtype=float)
    s = np.asarray(v.finite_array("se", se, ndim=1), dtype=float)
    if not d.shape == y.shape == s.shape:
        raise ValueError(f"d, crossing and se must have one shape, got {d.shape}, {y.shape}, {s.shape}")
    if np.any(d <= 0) or np.unique(d).size < 2:
        raise ValueError("d must hold at least two distinct positive sizes")
    if np.any(s <= 0):
        raise ValueError("se must be positive")
    v.positive("exponent", exponent)
    X = np.stack([np.ones_like(d), d ** -exponent], axis=1)
    cov = np.linalg.inv(X.T @ (X / s[:, None] ** 2))
    coef = cov @ (X.T @ (y / s ** 2))
    return Extrapolation(float(coef[0]), float(np.sqrt(cov[0, 0])), float(coef[1]), float(exponent))
