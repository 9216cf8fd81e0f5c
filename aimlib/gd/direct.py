r"""The direct student: ``S_hat`` trained entry by entry, a symmetric ``d x d`` matrix.

No factorisation and no positivity constraint.  The indices are those of
:func:`aimlib.model.attention_indices`,

.. math::

    \hat h^\mu_{ab} = \frac{x_a^{\mu\top} \hat S x_b^\mu - \delta_{ab} \operatorname{Tr}\hat S}{\sqrt d},

the loss is the square loss of :mod:`aimlib.gd.student`, and weight decay
``lambda`` adds the ridge penalty ``(lambda/2) ||S_hat||_F^2``.  The gradient
with respect to the symmetric matrix (book, chapter "Gradient descent") is the adjoint
``h^*(G)`` of the index operator (:mod:`aimlib.index_map`) plus the penalty's,

.. math::

    \nabla_{\hat S} L = \frac{1}{\sqrt d} \sum_\mu \Bigl(X^{\mu\top} \operatorname{sym}(G^\mu) X^\mu
                        - \operatorname{Tr}(G^\mu)\, I_d\Bigr) + \lambda \hat S ,

costs ``O(n T d^2)``.  Every function takes ``S`` of shape ``(d, d)`` or, for
``k`` restarts, ``(k, d, d)``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module
from ..channels.softmax import check_beta
from ..index_map import adjoint_product, adjoint_sums
from ..model import indices_from_factors
from .student import (add_penalty, as_batch, check_weight_decay, check_xy, gram,
                      initial_weights, softmax_loss)


def _indices(X2, S3, n, T):
    """``h_hat`` ``(k, n, T, T)`` from the tokens ``X2 (n T, d)``: :func:`~aimlib.model.indices_from_factors`."""
    xp = get_array_module(X2, S3)
    k, d, _ = S3.shape
    XS = (X2 @ S3).reshape(k, n, T, d)
    return indices_from_factors(XS, X2.reshape(n, T, d), xp.trace(S3, axis1=1, axis2=2), math.sqrt(d))


def direct_loss_grad(X2, y, S3, beta, n, T, want_grad=True):
    """Square loss ``(k,)`` and its gradient ``(k, d, d)`` (module docstring, ``lambda = 0``), without checks."""
    xp = get_array_module(X2, S3)
    d = S3.shape[1]
    h = _indices(X2, S3, n, T)
    L, G = softmax_loss(h, y, beta, n, want_grad)
    if not want_grad:
        return L, None
    M, trace = adjoint_sums(X2.reshape(n, T, d), G, X2.reshape(n, T, d))      # h^*(G) (aimlib.index_map)
    return L, adjoint_product(M, trace, xp.eye(d, dtype=M.dtype), math.sqrt(d))


def ridge_penalty(S3, weight_decay: float, want_grad=True):
    """``(lambda/2) ||S_hat||_F^2`` per restart and its gradient ``lambda S_hat`` (``None`` if not wanted)."""
    P = 0.5 * weight_decay * (S3 * S3).sum(axis=(1, 2))
    return P, (weight_decay * S3 if want_grad else None)


def check_matrices(S, d: int):
    """``S`` as a symmetric ``(k, d, d)`` batch and whether it came as ``(d, d)``."""
    S3, squeeze = as_batch(v.finite_array("S_hat", S), "S_hat")
    if S3.shape[1:] != (d, d):
        raise ValueError(f"S_hat must have shape ({d}, {d}) or (k, {d}, {d}), got {tuple(S.shape)}")
    xp = get_array_module(S3)
    scale = float(xp.abs(S3).max()) if S3.size else 0.0
    if float(xp.abs(S3 - xp.swapaxes(S3, 1, 2)).max()) > 1e-8 * max(1.0, scale):
        raise ValueError("S_hat must be symmetric")
    return S3, squeeze


def _checked(X, y, S, beta, want_grad, weight_decay):
    """Validate, then :func:`direct_loss_grad` plus :func:`ridge_penalty`."""
    beta = check_beta(beta)
    weight_decay = check_weight_decay(weight_decay)
    X, y, _ = check_xy(X, y)
    n, T, d = X.shape
    S3, squeeze = check_matrices(S, d)
    xp = get_array_module(X, S3)
    dt = xp.result_type(X.dtype, S3.dtype, xp.float32)
    X2, y, S3 = X.reshape(n * T, d).astype(dt), y.astype(dt), xp.asarray(S3).astype(dt)
    L, g = direct_loss_grad(X2, y, S3, beta, n, T, want_grad)
    return add_penalty(L, g, ridge_penalty(S3, weight_decay, want_grad), squeeze)


def direct_loss_and_grad(X, y, S_hat, beta: float = 1.0, *, weight_decay: float = 0.0):
    r"""Objective ``(1/2n) sum_mu ||softmax(beta h_hat^mu) - y^mu||_F^2 + (lambda/2)||S_hat||_F^2`` and its gradient.

    Parameters
    ----------
    X, y : arrays (n, T, d) and (n, T, T)
        Tokens and targets.
    S_hat : array (d, d) or (k, d, d)
        Symmetric student matrices.
    beta : float
        Inverse temperature of the softmax, in ``(0, BETA_MAX]``.
    weight_decay : float
        ``lambda >= 0``.

    Returns
    -------
    loss : float or array (k,)
    grad : array of the shape of ``S_hat`` (symmetric)
    """
    return _checked(X, y, S_hat, beta, True, weight_decay)


def direct_loss(X, y, S_hat, beta: float = 1.0, *, weight_decay: float = 0.0):
    """The objective alone (see :func:`direct_loss_and_grad`)."""
    return _checked(X, y, S_hat, beta, False, weight_decay)[0]


def initial_matrices(d: int, restarts: int = 1, seed=None, *, scale: float = 1.0,
                     backend: str | None = None, dtype=np.float64):
    r"""Starting points ``(restarts, d, d)`` of the direct student: ``W W^T / d`` with ``W`` of shape ``(d, d)``.

    ``W`` is :func:`~aimlib.gd.student.initial_weights` of width ``d`` (same
    seeds), so the direct student starts where the factorised student of width
    ``d`` starts: a draw from the prior at ``rho = 1`` for ``scale = 1``.
    """
    return gram(initial_weights(d, d, restarts, seed, scale=scale, backend=backend, dtype=dtype))
