r"""Weight decay's implicit bias, measured: the wide student against the minimum-trace matrix of the same data.

Book, chapter "Gradient descent with weight decay".  By the small-penalty limit of
the chapter "What training learns", the global minimisers of
``L(S_hat) + (lambda/2) Tr S_hat`` over PSD ``S_hat`` tend, as ``lambda -> 0+``, to
the minimum-trace matrix ``S_mt`` of the affine slice ``{S >= 0 : A(S) = b}`` fixed
by softmax data (:class:`aimlib.convex.SoftmaxDifferences`).  Whether gradient
descent on a factorised student of width ``d`` finds them is measured here on
the same data set:

* :func:`min_trace_reference` solves for ``S_mt`` by
  :func:`aimlib.convex.min_trace_admm` and refuses an uncertified solve;
* :func:`compare_to_min_trace` gives, for a trained ``S_hat``, the distance
  ``(1/d)||S_hat - S_mt||_F^2``, both errors to the teacher, both traces and
  the measurement residual ``||A(S_hat) - b|| / ||b||`` of ``S_hat``;
* :func:`weight_decay_ladder` trains the student at each ``lambda`` of a ladder,
  all from the same initialisation, for each of several budgets (a number of
  Adam steps, with or without a step decay), and compares it with ``S_mt``.

A run is called *settled* when the objective ``F(W)`` (square loss plus
penalty) is nearly stationary in relative terms,
``||grad F(W)||_F ||W||_F / F(W) <= rtol`` (to first order, a move of ``W`` by
a fraction ``eps`` of its norm lowers ``F`` by at most the fraction
``rtol eps``), or when its square loss reached the early stop ``tol`` of
:func:`~aimlib.gd.train.train_gd`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..convex import MinTraceResult, SoftmaxDifferences, min_trace_admm, softmax_targets
from ..model import estimation_error
from .student import loss_and_grad
from .train import train_gd

__all__ = ["MinTraceReference", "min_trace_reference", "compare_to_min_trace", "weight_decay_ladder"]

#: the default budgets of :func:`weight_decay_ladder`: ``(steps, lr_decay_at)``, the book's
#: 1000 steps at a fixed step, and 2000 with the step divided by ten after 1000
BUDGETS = ((1000, None), (2000, 1000))


class MinTraceReference(NamedTuple):
    """The certified minimum-trace solution of a data set and its measurement map."""

    result: MinTraceResult   #: ``S_mt`` (``result.S``) and its certificate
    op: SoftmaxDifferences   #: the exact linear measurements of the data
    b: np.ndarray            #: their values


def min_trace_reference(X, y, beta: float = 1.0, *, tol: float = 1e-6,
                        max_iter: int = 20_000) -> MinTraceReference:
    r"""``S_mt = argmin {Tr S : S >= 0, A(S) = b}`` for softmax data ``(X, y)``, certified.

    Parameters
    ----------
    X, y : arrays (n, T, d) and (n, T, T)
        Tokens and the teacher's softmax outputs (inverse temperature ``beta``).
    tol, max_iter : float, int
        Passed to :func:`aimlib.convex.min_trace_admm`, which raises
        :class:`aimlib.ConvergenceError` unless the residual, the PSD violation
        and the duality gap are all within ``tol``.

    Returns
    -------
    MinTraceReference
    """
    op = SoftmaxDifferences(X)
    b = softmax_targets(op.index.n, op.index.T, y=y, beta=beta)
    return MinTraceReference(min_trace_admm(op, b, tol=tol, max_iter=max_iter), op, b)


def compare_to_min_trace(S_hat, reference: MinTraceReference, S=None) -> dict:
    r"""How far a student ``S_hat`` (d, d) is from ``S_mt``, and from the teacher ``S`` if given.

    Returns a dict of floats: ``dist_mt = (1/d)||S_hat - S_mt||_F^2``,
    ``trace_gd``, ``trace_mt``, ``residual_gd = ||A(S_hat) - b|| / ||b||``,
    ``residual_mt`` (the certificate's), and with ``S`` also
    ``err_gd = (1/d)||S_hat - S||_F^2`` and ``err_mt``.
    """
    op, res = reference.op, reference.result
    S_hat = v.finite_array("S_hat", to_host(S_hat), ndim=2).astype(float)
    S_mt = to_host(res.S)
    r = to_host(op.forward(op.xp.asarray(S_hat))) - reference.b
    out = {"dist_mt": estimation_error(S_hat, S_mt), "trace_gd": float(np.trace(S_hat)),
           "trace_mt": res.trace, "residual_gd": float(np.linalg.norm(r) / np.linalg.norm(reference.b)),
           "residual_mt": res.residual}
    if S is not None:
        out.update(err_gd=estimation_error(S_hat, S), err_mt=estimation_error(S_mt, S))
    return out


def _settled(res, X, y, beta, lam, rtol, tol) -> dict:
    """Loss, steps, relative gradient and the settled flag of a one-restart :class:`GDResult`."""
    W = get_array_module(X).asarray(res.W[0])
    F, g = loss_and_grad(X, y, W, beta, weight_decay=lam)
    rel_grad = float(to_host((g * g).sum() * (W * W).sum()) ** 0.5 / float(to_host(F)))
    loss = float(res.train_loss[0, -1])
    return {"train_loss": loss, "objective": float(to_host(F)), "steps": int(res.n_steps[0]),
            "rel_grad": rel_grad, "settled": bool(rel_grad <= rtol or loss <= tol)}


def weight_decay_ladder(X, y, reference: MinTraceReference, lambdas, *, init_scale: float = 1.0,
                        seed=0, budgets=BUDGETS, lr: float = 0.1, lr_decay: float = 0.1, S=None,
                        beta: float = 1.0, rtol: float = 1e-2, tol: float = 1e-10):
    r"""Train the width-``d`` factorised student at each ``lambda`` and compare it with ``S_mt``.

    Every run starts from the same initial weights (i.i.d. ``N(0, init_scale^2)``,
    drawn from ``seed``) and runs Adam from step ``lr`` (:func:`~aimlib.gd.train.train_gd`).

    Parameters
    ----------
    X, y : arrays
        The data ``reference`` was computed from.
    reference : MinTraceReference
        From :func:`min_trace_reference`.
    lambdas : sequence of float
        Weight decays ``lambda >= 0`` (the penalty ``(lambda/2) Tr S_hat``).
    budgets : sequence of (int, int or None)
        One run per pair ``(steps, lr_decay_at)``: ``steps`` steps, the step
        multiplied by ``lr_decay`` before step ``lr_decay_at`` (``None``: fixed).
    S : array (d, d), optional
        The teacher, for the errors ``err_gd``, ``err_mt``.
    rtol, tol : float
        The settled rule (module docstring) and the early stop of each run.

    Yields
    ------
    dict
        One per ``lambda`` and budget: ``lambda``, ``init_scale``, ``lr``,
        ``lr_decay_at`` (``-1`` for none), the fields of
        :func:`compare_to_min_trace` and of the settled rule
        (``train_loss``, ``objective``, ``steps``, ``rel_grad``, ``settled``).
    """
    if not budgets:
        raise ValueError("budgets must hold at least one (steps, lr_decay_at) pair")
    d = X.shape[2]
    for lam in lambdas:
        for steps, decay_at in budgets:
            res = train_gd(X, y, rank=d, beta=beta, seed=seed, init_scale=init_scale, lr=lr,
                           steps=steps, lr_decay_at=decay_at, lr_decay=lr_decay, weight_decay=lam,
                           tol=tol, record_every=steps)
            yield {"lambda": float(lam), "init_scale": float(init_scale), "lr": lr,
                   "lr_decay_at": -1 if decay_at is None else decay_at,
                   **compare_to_min_trace(res.S_hat[0], reference, S),
                   **_settled(res, X, y, beta, lam, rtol, tol)}
