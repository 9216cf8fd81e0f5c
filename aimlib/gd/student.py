r"""The student ``S_hat = W W^T / sqrt(r d)``: its indices, output, square loss and gradient.

With ``P^mu = X^mu W`` of shape ``(T, r)`` the student's indices are

.. math::

    \hat h^\mu_{ab} = \frac{x_a^{\mu\top} \hat S x_b^\mu}{\sqrt d}
                     - \delta_{ab} \frac{\operatorname{Tr} \hat S}{\sqrt d}
                   = \frac{P^\mu_a \cdot P^\mu_b - \delta_{ab} \|W\|_F^2}{\sqrt r\, d},

so ``S_hat`` (``d x d``) is never formed.  Every function takes ``W`` of shape
``(d, r)`` or, for ``k`` restarts at once, ``(k, d, r)``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, module_named, to_common, to_device
from ..channels import row_softmax
from ..channels.softmax import check_beta
from ..index_map import adjoint_product, adjoint_sums
from ..model import indices_from_factors

def as_batch(W, name: str = "W"):
    """Return ``(W3, squeeze)``: ``W`` as ``(k, d, r)`` and whether it came as ``(d, r)``."""
    if W.ndim == 2:
        return W[None], True
    if W.ndim == 3:
        return W, False
    raise ValueError(f"{name} must have shape (d, r) or (k, d, r), got {tuple(W.shape)}")


def initial_weights(d: int, r: int, restarts: int = 1, seed=None, *, scale: float = 1.0,
                    backend: str | None = None, dtype=np.float64):
    r"""Random initial weights of shape ``(restarts, d, r)``, i.i.d. ``N(0, scale^2)``.

    With ``scale = 1`` the initial ``S_hat = W W^T / sqrt(r d)`` is a draw from
    the teacher's prior.  Restart ``i`` is drawn from stream ``i`` of ``seed``
    (:func:`aimlib._validate.streams`: ``numpy.random.default_rng([seed, i])`` for an
    int, the ``i``-th new child of a Generator, fresh entropy for None): restart ``i``
    has the same initialisation whatever the number of restarts, so a batched run
    and ``k`` separate runs can be compared.
    """
    d = v.integer("d", d, minimum=1)
    r = v.integer("r", r, minimum=1)
    restarts = v.integer("restarts", restarts, minimum=1)
    scale = v.positive("scale", scale)
    W = np.stack([rng.standard_normal((d, r)) for rng in v.streams(seed, restarts)])
    return to_device((scale * W).astype(dtype), module_named(backend))


def gram(W3):
    """``W W^T / sqrt(r d)`` for a batch ``W3`` of shape ``(k, d, r)``, without checks."""
    xp = get_array_module(W3)
    d, r = W3.shape[1:]
    return W3 @ xp.swapaxes(W3, 1, 2) / float(np.sqrt(r * d))


def shifted_gram(W3, shift: float = 0.0):
    """``W W^T / sqrt(r d) - shift I`` for a batch ``W3`` (:func:`gram`; the student of a centred teacher)."""
    S = gram(W3)
    if shift:
        xp = get_array_module(S)
        S = S - shift * xp.eye(S.shape[-1], dtype=S.dtype)
    return S


def student_matrix(W):
    r"""``S_hat = W W^T / sqrt(r d)`` for ``W`` of shape ``(d, r)`` or ``(k, d, r)``."""
    W3, squeeze = as_batch(v.finite_array("W", W))
    S = gram(W3)
    return S[0] if squeeze else S


def check_xy(X, y, W=None):
    """Validate tokens ``X (n, T, d)``, targets ``y (n, T, T)`` and weights; bring them to one module.

    ``y`` and ``W`` may be ``None``.  Returns ``(X, y, W)``.
    """
    X = v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if n < 1 or T < 2 or d < 1:
        raise ValueError(f"X must have shape (n, T, d) with n >= 1 samples, T >= 2 tokens and d >= 1, "
                         f"got {tuple(X.shape)}")
    if y is not None:
        y = v.finite_array("y", y, ndim=3)
        if y.shape != (n, T, T):
            raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)} to match X, got {tuple(y.shape)}")
    if W is not None:
        W = v.finite_array("W", W)
        if W.ndim not in (2, 3) or W.shape[-2] != d:
            raise ValueError(f"W must have shape ({d}, r) or (k, {d}, r) to match X, got {tuple(W.shape)}")
    return to_common(X, y, W)[1:]


def common_dtype(X, y, W):
    """Cast ``X, y, W`` to one floating dtype (that of ``X`` and ``W`` together)."""
    xp = get_array_module(X, y, W)
    dt = xp.result_type(X.dtype, W.dtype, xp.float32)
    return X.astype(dt, copy=False), y.astype(dt, copy=False), W.astype(dt, copy=False)


def batch_indices(X2, W3, n, T):
    """Forward pass: ``P = X W`` of shape ``(k, n, T, r)`` and ``h_hat`` of shape ``(k, n, T, T)``.

    ``h_hat`` is :func:`aimlib.model.indices_from_factors` of ``P``, ``P``, ``||W||_F^2``
    and ``sqrt(r) d`` (the module docstring's formula).
    """
    k, d, r = W3.shape
    P = (X2 @ W3).reshape(k, n, T, r)
    return P, indices_from_factors(P, P, (W3 * W3).sum(axis=(1, 2)), math.sqrt(r) * d)


def student_indices(X, W):
    r"""The student's attention indices ``h_hat``: ``(n, T, T)`` for ``W (d, r)``, ``(k, n, T, T)`` for ``(k, d, r)``.

    Equal to :func:`aimlib.model.attention_indices` of ``X`` and
    ``S_hat = W W^T / sqrt(r d)``, computed through ``X W`` without forming
    ``S_hat``.
    """
    X, _, W = check_xy(X, None, W)
    n, T, _ = X.shape
    W3, squeeze = as_batch(W)
    _, h = batch_indices(X.reshape(n * T, -1), W3, n, T)
    return h[0] if squeeze else h


def student_output(X, W, beta: float = 1.0):
    """The student's prediction ``softmax(beta h_hat)`` (shape as :func:`student_indices`)."""
    beta = check_beta(beta)
    return row_softmax(beta * student_indices(X, W))


def square_loss(yh, y, n):
    """``(L, E)``: ``L = (1/2n) sum_mu ||y_hat^mu - y^mu||_F^2`` ``(k,)`` and ``E = dL/dy_hat = (y_hat - y)/n``."""
    R = yh - y
    return 0.5 * (R * R).sum(axis=(1, 2, 3)) / n, R / n


def softmax_backward(yh, E, beta):
    r"""``dL/dh`` from ``E = dL/dy`` through ``y = softmax(beta h)`` row by row.

    .. math::  G_{ab} = \beta\, y_{ab} \Bigl(E_{ab} - \sum_c E_{ac}\, y_{ac}\Bigr).
    """
    return beta * yh * (E - (E * yh).sum(axis=-1, keepdims=True))


def softmax_loss(h, y, beta, n, want_grad=True):
    r"""Square loss of the outputs ``softmax(beta h)`` and its gradient ``G = dL/dh``, without checks.

    ``h`` has shape ``(k, n, T, T)``, ``y`` ``(n, T, T)``; ``G`` is
    :func:`softmax_backward` of ``E = (y_hat - y) / n``.  Returns ``(L, G)``:
    ``(k,)`` and ``(k, n, T, T)`` (``G`` is ``None`` if ``want_grad`` is false).
    """
    yh = row_softmax(beta * h)
    L, E = square_loss(yh, y, n)
    return L, (softmax_backward(yh, E, beta) if want_grad else None)


def trace_penalty(W3, weight_decay: float, want_grad=True):
    r"""Weight decay ``(lambda/2) Tr S_hat = (lambda/2) ||W||_F^2 / sqrt(r d)`` and its gradient.

    Returns ``(P, dP/dW)``: ``(k,)`` and ``(k, d, r)`` (``None`` if ``want_grad``
    is false), both zero-valued arrays for ``weight_decay = 0``.
    """
    d, r = W3.shape[1:]
    c = weight_decay / float(np.sqrt(r * d))
    P = 0.5 * c * (W3 * W3).sum(axis=(1, 2))
    return P, (c * W3 if want_grad else None)


def identity_indices(X2, n, T):
    r"""The indices of ``I``, ``h(I)_ab = (x_a . x_b - delta_ab d)/sqrt(d)``, for tokens ``X2`` ``(n T, d)``."""
    xp = get_array_module(X2)
    d = X2.shape[1]
    X = X2.reshape(n, T, d)
    return indices_from_factors(X, X, xp.asarray(float(d), dtype=X.dtype), math.sqrt(d))


def loss_grad(X2, y, W3, beta, n, T, want_grad=True, shift: float = 0.0):
    r"""Square loss and gradient of a batch of students, without checks.

    ``X2`` holds the tokens as ``(n T, d)``, ``y`` the targets ``(n, T, T)``,
    ``W3`` the weights ``(k, d, r)``.  ``G = dL/dh_hat`` comes from
    :func:`softmax_loss` and the gradient is :func:`index_grad` of ``G``, at a
    cost of ``O(n T d r)``.  With ``shift = m`` the student is ``W W^T/sqrt(r d) - m I``
    (a known mean removed, as for centred teachers): its indices are those of ``W W^T/sqrt(r d)``
    minus ``m h(I)`` (:func:`identity_indices`), and the gradient in ``W`` is unchanged in form.
    Returns ``(L, grad)``: ``(k,)`` and ``(k, d, r)`` (``grad`` is ``None`` if ``want_grad`` is false).
    """
    P, h = batch_indices(X2, W3, n, T)
    if shift:
        h = h - shift * identity_indices(X2, n, T)
    L, G = softmax_loss(h, y, beta, n, want_grad)
    return L, (index_grad(X2, W3, P, G) if want_grad else None)


def index_grad(X2, W3, P, G):
    r"""``dL/dW`` from ``G = dL/dh_hat`` (shape ``(k, n, T, T)``, entries independent).

    The chain rule through the adjoint of the index operator (:mod:`aimlib.index_map`) at
    ``S_hat = W W^T / sqrt(r d)``, with ``P = X W`` from :func:`batch_indices`,

    .. math::  \nabla_W L = \frac{2}{\sqrt{r d}}\, h^*(G)\, W = \frac{2}{\sqrt r\, d} \Bigl[\sum_\mu
               X^{\mu\top} \tfrac{G^\mu + G^{\mu\top}}{2} P^\mu - \Bigl(\sum_\mu \operatorname{Tr} G^\mu\Bigr) W \Bigr],

    at a cost of ``O(n T d r)`` (``h^*(G)`` itself is never formed); returns ``(k, d, r)``.
    """
    d, r = W3.shape[1:]
    n, T = P.shape[-3:-1]
    M, trace = adjoint_sums(X2.reshape(n, T, d), G, P)
    return adjoint_product(M, trace, W3, float(np.sqrt(r)) * d / 2)


def check_weight_decay(weight_decay) -> float:
    """``weight_decay`` as a float in ``[0, inf)`` (``ValueError`` naming it otherwise)."""
    return v.nonnegative("weight_decay", weight_decay)


def _checked_loss_grad(X, y, W, beta, want_grad, weight_decay):
    """Validate, then :func:`loss_grad` plus :func:`trace_penalty`; ``(d, r)`` ``W``: float and ``(d, r)``."""
    beta = check_beta(beta)
    weight_decay = check_weight_decay(weight_decay)
    X, y, W = check_xy(X, y, W)
    n, T, _ = X.shape
    W3, squeeze = as_batch(W)
    X, y, W3 = common_dtype(X, y, W3)
    L, g = loss_grad(X.reshape(n * T, -1), y, W3, beta, n, T, want_grad)
    return add_penalty(L, g, trace_penalty(W3, weight_decay, want_grad), squeeze)


def add_penalty(L, g, penalty, squeeze: bool):
    """``(L + P, g + dP)`` for ``penalty = (P, dP)``; a float and one gradient if ``squeeze``."""
    P, dP = penalty
    L, g = L + P, None if g is None else g + dP
    if squeeze:
        return float(L[0]), None if g is None else g[0]
    return L, g


def loss_and_grad(X, y, W, beta: float = 1.0, *, weight_decay: float = 0.0):
    r"""Square loss ``L = (1/2n) sum_mu ||softmax(beta h_hat^mu) - y^mu||_F^2`` (plus weight decay) and its gradient.

    With ``weight_decay = lambda > 0`` the objective is
    ``L + (lambda/2) Tr S_hat = L + lambda ||W||_F^2 / (2 sqrt(r d))``
    (:func:`trace_penalty`).

    Parameters
    ----------
    X : array (n, T, d)
        Tokens.
    y : array (n, T, T)
        Targets (softmax outputs of the teacher).
    W : array (d, r) or (k, d, r)
        Student weights; with a leading restart axis, ``k`` losses and gradients
        are returned at once.
    beta : float
        Inverse temperature of the student's softmax, in ``(0, BETA_MAX]``.
    weight_decay : float
        ``lambda >= 0``.

    Returns
    -------
    loss : float or array (k,)
    grad : array of the shape of ``W``
    """
    return _checked_loss_grad(X, y, W, beta, True, weight_decay)


def loss(X, y, W, beta: float = 1.0, *, weight_decay: float = 0.0):
    """The objective alone (see :func:`loss_and_grad`)."""
    return _checked_loss_grad(X, y, W, beta, False, weight_decay)[0]
