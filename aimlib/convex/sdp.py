r"""Minimum-trace recovery at small ``d``: ``min Tr S`` over PSD ``S`` with ``<A_k, S> = b_k``.

Book, chapter "What training learns".  Two measurement ensembles of the same
count: the softmax data's own (the differences of indices within each sample,
:func:`softmax_measurements`) and i.i.d. Gaussian ones (:func:`gaussian_measurements`),
for which the transition sits at the statistical dimension of the descent cone.
The semidefinite program is solved by CVXPY with SCS (``pip install 'aimlib[convex]'``);
:mod:`~.first_order` solves it matrix-free at large ``d``.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import _validate as v
from .._optional import optional_import
from ..channels import make_channel
from ..backend import to_host
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..model import estimation_error, n_samples, sample_dataset, sample_teacher, teacher_width
from ..channels import softmax_k
from .cone import goe_frobenius
from .first_order import min_trace_admm
from .null_space import GaussianNullSpace
from .operators import (GaussianMeasurements, SoftmaxDifferences, measurement_pairs,
                        softmax_targets)

__all__ = ["softmax_measurements", "gaussian_measurements", "min_trace_solve",
           "min_trace_estimate", "recovery_trial", "MEASUREMENTS", "SOLVERS", "GAUSSIAN_MAPS"]

#: the measurement ensembles of :func:`recovery_trial`
MEASUREMENTS = ("softmax", "gaussian")
#: the solvers of :func:`recovery_trial`
SOLVERS = ("scs", "admm")
#: how :func:`recovery_trial`'s ADMM poses Gaussian measurements: the ``A_k`` themselves
#: (:class:`~.operators.GaussianMeasurements`) or their null space (:class:`~.null_space.GaussianNullSpace`)
GAUSSIAN_MAPS = ("measurements", "null_space")


def softmax_measurements(X, *, h=None, y=None, beta=None):
    r"""The exact linear measurements of ``S`` in softmax data: ``h_ab - h_11``, ``a <= b``.

    The values ``b`` are :func:`~.operators.softmax_targets`, for the
    ``(T^2 + T - 2)/2`` pairs ``a <= b``, ``(a, b) != (1, 1)``.  As a
    function of ``S`` (``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt d``),

    .. math::  h_{ab} - h_{11} = \langle A_{ab}, S\rangle,\quad
               A_{ab} = \frac{(x_a x_b^T + x_b x_a^T)/2 - x_1 x_1^T - (\delta_{ab} - 1) I}{\sqrt d}.

    Parameters
    ----------
    X : array of shape (n, T, d)
        Tokens.
    h : array of shape (n, T, T), optional
        Indices, known up to one constant per row (only differences are used).
    y : array of shape (n, T, T), optional
        Softmax outputs (positive rows); give ``beta`` with it.  Exactly one of
        ``h`` and ``y``.

    Returns
    -------
    A : array of shape (n (T^2+T-2)/2, d, d)
        Symmetric measurement matrices.
    b : array of shape (n (T^2+T-2)/2,)
    """
    X = np.asarray(to_host(v.finite_array("X", X, ndim=3)), dtype=float)
    n, T, d = X.shape
    b = softmax_targets(n, T, h=h, y=y, beta=beta)
    ia, ib = measurement_pairs(T)
    xa, xb, x1 = X[:, ia, :], X[:, ib, :], X[:, :1, :]
    outer = (xa[..., :, None] * xb[..., None, :] + xb[..., :, None] * xa[..., None, :]) / 2
    A = outer - x1[..., :, None] * x1[..., None, :] + (ia != ib)[:, None, None] * np.eye(d)
    return A.reshape(-1, d, d) / np.sqrt(d), b


def gaussian_measurements(S, m: int, seed=None):
    """``m`` i.i.d. standard Gaussian symmetric ``A_k`` (:func:`goe_frobenius`) and ``b_k = <A_k, S>``."""
    S = np.asarray(to_host(v.symmetric_matrix("S", S)), dtype=float)
    m = v.integer("m", m, minimum=1)
    A = goe_frobenius(S.shape[0], seed, size=m)
    return A, np.einsum("kij,ij->k", A, S)


def min_trace_solve(A, b, *, eps: float = 1e-9, max_iters: int = 100_000,
                    on_max_iter: str = "raise"):
    r"""Solve ``min Tr S`` subject to ``S >= 0`` (PSD) and ``<A_k, S> = b_k`` with SCS.

    Parameters
    ----------
    A : array of shape (m, d, d)
        Measurement matrices (only their symmetric parts act on ``S``).
    b : array of shape (m,)
    eps : float
        SCS's absolute and relative tolerance.
    max_iters : int
        SCS's iteration cap; at the cap the rule of :mod:`aimlib.errors`
        (``on_max_iter``) applies.

    Returns
    -------
    S_hat : array of shape (d, d)
        Symmetric. An infeasible or failed solve raises ``ConvergenceError``.
    """
    A = np.asarray(v.finite_array("A", A, ndim=3), dtype=float)
    b = np.asarray(v.finite_array("b", b, ndim=1), dtype=float)
    m, d, d2 = A.shape
    if d != d2 or b.shape != (m,):
        raise ValueError(f"A must have shape (m, d, d) and b shape (m,), got {A.shape} and {b.shape}")
    eps = v.positive("eps", eps)
    max_iters = v.integer("max_iters", max_iters, minimum=1)
    check_on_max_iter(on_max_iter)
    cp = optional_import("cvxpy", "min_trace_solve")
    optional_import("scs", "min_trace_solve")   # the solver CVXPY is asked to use
    S = cp.Variable((d, d), PSD=True)
    As = (A + np.swapaxes(A, 1, 2)) / 2
    problem = cp.Problem(cp.Minimize(cp.trace(S)), [As.reshape(m, -1) @ cp.vec(S, order="C") == b])
    with warnings.catch_warnings():  # an inaccurate solution is handled by on_max_iter below
        warnings.filterwarnings("ignore", "Solution may be inaccurate", UserWarning)
        problem.solve(solver=cp.SCS, eps_abs=eps, eps_rel=eps, max_iters=max_iters)
    if problem.status == cp.OPTIMAL_INACCURATE:
        max_iter_reached(f"SCS stopped at max_iters = {max_iters} before eps = {eps:g}", on_max_iter)
    elif problem.status != cp.OPTIMAL or S.value is None:
        raise ConvergenceError(f"minimum-trace SDP failed: SCS status {problem.status!r}")
    return (S.value + S.value.T) / 2


def min_trace_estimate(X, *, h=None, y=None, beta=None, **solver):
    """The minimum-trace PSD matrix consistent with softmax data (:func:`softmax_measurements`).

    ``solver`` goes to :func:`min_trace_solve` (``eps``, ``max_iters``, ``on_max_iter``);
    the result is the ``(d, d)`` solution ``S_hat`` of ``min Tr S``, ``S`` PSD,
    ``h_ab(S) - h_11(S) = h_ab - h_11`` for every sample.
    """
    A, b = softmax_measurements(X, h=h, y=y, beta=beta)
    return min_trace_solve(A, b, **solver)


def recovery_trial(measurements: str, d: int, rho: float, alpha: float, T: int = 2,
                   seed=0, solver: str = "scs", gram_mb: float = 1024.0,
                   gaussian_map: str = "measurements", **options) -> dict:
    r"""One minimum-trace solve: teacher and measurements from ``seed``, the relative error.

    ``measurements='softmax'`` samples a softmax data set (``n = round(alpha d^2)``
    sequences, :func:`aimlib.model.sample_dataset`) and uses its outputs;
    ``'gaussian'`` draws a teacher and the same number
    ``m = n (T^2 + T - 2)/2`` of Gaussian measurements.  ``seed`` (int or Generator;
    an int is recorded in the row) draws both from its data stream
    (:func:`aimlib._validate.run_streams`), as every run draws its training data.
    ``solver='scs'`` builds the measurement matrices and calls
    :func:`min_trace_solve`; ``'admm'`` stays matrix-free
    (:class:`~.operators.SoftmaxDifferences`, and for Gaussian measurements
    :class:`~.operators.GaussianMeasurements`, a different draw of the ``A_k``,
    or with ``gaussian_map='null_space'`` :class:`~.null_space.GaussianNullSpace`,
    the same law of the problem) and calls
    :func:`~.first_order.min_trace_admm`, its exact Gram solve (and the Gaussian
    ``A_k``'s cache, or the null space) allowed ``gram_mb`` MiB.  ``options`` go
    to the solver.

    Returns
    -------
    dict
        ``measurements, d, r, rho, T, alpha, seed, m, rel_error`` with
        ``rel_error = ||S_hat - S||_F / ||S||_F`` (and ``solver``, ``iterations``
        for ``'admm'``).
    """
    v.choice("measurements", measurements, MEASUREMENTS)
    v.choice("solver", solver, SOLVERS)
    v.choice("gaussian_map", gaussian_map, GAUSSIAN_MAPS)
    if gaussian_map != "measurements" and solver != "admm":
        raise ValueError(f"gaussian_map = {gaussian_map!r} needs solver = 'admm', got {solver!r}")
    T = v.integer("T", T, minimum=2)
    m = n_samples(alpha, d) * softmax_k(T) // 2            # (T^2 + T - 2)/2 per sample
    rng = v.run_streams(seed).data
    if measurements == "softmax":
        data = sample_dataset(alpha, d, T, rho, make_channel("softmax"), rng, backend="numpy")
        S = data.S
    else:
        S = sample_teacher(d, rho, rng, backend="numpy")
    if solver == "admm":
        if measurements == "softmax":
            op = SoftmaxDifferences(data.X, gram_mb=gram_mb)
            b = softmax_targets(data.n, T, y=data.y, beta=1.0)
        else:
            op = (GaussianMeasurements(d, m, rng, backend="numpy", cache_mb=gram_mb)
                  if gaussian_map == "measurements" else
                  GaussianNullSpace(d, m, rng, backend="numpy", memory_mb=gram_mb))
            b = op.forward(S)
        res = min_trace_admm(op, b, **options)
        S_hat, extra = to_host(res.S), {"solver": solver, "iterations": res.iterations,
                                        "converged": res.converged}
    else:
        A, b = (softmax_measurements(data.X, y=data.y, beta=1.0) if measurements == "softmax"
                else gaussian_measurements(S, m, rng))
        S_hat, extra = min_trace_solve(A, b, **options), {}
    rel = np.sqrt(estimation_error(S_hat, S) / estimation_error(np.zeros_like(S), S))
    return {"measurements": measurements, "d": d, "r": teacher_width(d, rho), "rho": float(rho),
            "T": T, "alpha": float(alpha), "seed": v.seed_label(seed), "m": m,
            "rel_error": float(rel), **extra}
