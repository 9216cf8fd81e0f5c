r"""Factorised students fitted to noiseless softmax data: untied ``Q K^T`` and tied ``W W^T``.

The softmax output of a sample fixes the ``T^2 - T`` differences
``m_ab = h_ab - h_aa`` (``b != a``); a student ``S_hat = Q K^T / sqrt(r d)`` (untied)
or ``W W^T / sqrt(r d)`` (tied) of width ``r`` minimises
``L = (1/2) sum_{mu, a, b} (m_ab(S_hat) - m_ab(S))^2`` by L-BFGS from a random start.
Noiseless data: ``L = 0`` at the teacher, and recovery shows as ``E_S ~ 0``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from .. import _validate as v
from ..index_map import IndexMap
from .model import factor_product, untied_indices

__all__ = ["row_differences", "fit_student"]


def row_differences(X, S):
    """``m_ab = h_ab - h_aa`` for every sample: what the softmax reveals (``m_aa = 0``), shape ``(n, T, T)``."""
    return _differences(untied_indices(X, S))


def _differences(h):
    """``h_ab - h_aa`` for indices ``h`` of shape ``(n, T, T)``."""
    return h - np.diagonal(h, axis1=1, axis2=2)[:, :, None]


def _loss_and_gradient(index, S, m):
    r"""``L`` and ``dL/dS`` for the row differences of ``S`` against the data ``m``.

    The row differences are ``D(h(S))`` with ``D(h)_ab = h_ab - h_aa``, whose adjoint is
    ``D^*(R)_ab = R_ab - delta_ab sum_c R_ac``; so ``dL/dS = h^*(D^*(R))`` with ``h^*`` the
    adjoint of the square index operator ``index`` (:class:`aimlib.index_map.IndexMap`).
    """
    R = _differences(index.forward(S)) - m
    G = R - R.sum(axis=2)[:, :, None] * np.eye(index.T)
    return 0.5 * float(np.sum(R * R)), index.adjoint(G)


def fit_student(X, m, r: int, *, tied: bool = False, seed=None, init_scale: float = 0.5,
                max_iter: int = 5000):
    r"""Fit a width-``r`` factorised student to the row differences ``m``; return ``(S_hat, loss)``.

    ``tied=True``: ``S_hat = W W^T / sqrt(r d)``; else ``Q K^T / sqrt(r d)``.  The
    factors start i.i.d. ``N(0, init_scale^2)`` (``seed``); L-BFGS runs up to ``max_iter``
    iterations (the final loss says whether the data were fitted).
    """
    X = v.finite_array("X", X, ndim=3)
    m = v.finite_array("m", m, ndim=3)
    d = X.shape[-1]
    r = v.integer("r", r, minimum=1, maximum=d)
    scale, index = math.sqrt(r * d), IndexMap(X, square=True)
    n_fac = 1 if tied else 2

    def factors(p):
        Q = p[:d * r].reshape(d, r)
        return Q, (Q if tied else p[d * r:].reshape(d, r))

    def fg(p):
        Q, K = factors(p)
        loss, G = _loss_and_gradient(index, factor_product(Q, K), m)
        gQ, gK = G @ K / scale, G.T @ Q / scale
        return loss, ((gQ + gK).ravel() if tied else np.concatenate([gQ.ravel(), gK.ravel()]))

    p0 = v.positive("init_scale", init_scale) * v.generator(seed).standard_normal(n_fac * d * r)
    res = minimize(fg, p0, jac=True, method="L-BFGS-B",
                   options={"maxiter": v.integer("max_iter", max_iter, minimum=1), "gtol": 1e-10,
                            "ftol": 1e-15})
    Q, K = factors(res.x)
    return factor_product(Q, K), float(res.fun)

