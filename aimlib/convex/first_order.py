r"""Minimum-trace recovery at scale: ADMM on the PSD cone, matrix-free, with a duality certificate.

Book, chapter "What training learns".  The problem

.. math::  \min_S \operatorname{Tr} S \quad\text{s.t.}\quad S \succeq 0,\; \mathcal A(S) = b,

with ``A`` a measurement map of :mod:`~.operators` (``forward`` and ``adjoint``
only; no ``m x d^2`` matrix), split as ``min f(Z) + g(S)`` s.t. ``Z = S`` with
``f(Z) = Tr Z + 1{A(Z) = b}`` and ``g = 1{S PSD}``.  Scaled ADMM (Boyd et al.
2011, section 3.1.1) with penalty ``rho`` and scaled multiplier ``U``:

.. math::

    Z &\leftarrow \Pi_{\rm aff}(S - U - I/\rho),\qquad
    \Pi_{\rm aff}(V) = V - \mathcal A^*(w),\quad (\mathcal A\mathcal A^*)\, w = \mathcal A(V) - b, \\
    S &\leftarrow \Pi_{\rm PSD}(Z + U)\quad\text{(eigendecomposition, negative eigenvalues set to 0)},\\
    U &\leftarrow U + Z - S.

The ``Z`` step minimises ``Tr Z + (rho/2)||Z - S + U||^2`` on the affine set;
the system in ``A A^*`` (``m x m``, positive definite for independent
measurements) is solved exactly where the map's ``gram_solver()`` can factorise
it (``exact_gram``; one forward and one adjoint pass per iteration), otherwise
by conjugate gradients, warm-started from the last
``w``, preconditioned by the map's ``preconditioner()`` where it has one, to a
relative tolerance of a tenth of the last certificate's worst measure (at most
``1e-2``, at least ``tol``): an inexact step early, an exact one near the end.  Its optimality
condition ``I + rho (Z - S + U) = A^*(y)`` names the
multiplier ``y = -rho w`` of the measurements.

**Certificate.**  The dual is ``max b^T y`` s.t. ``Lambda(y) = I - A^*(y) >= 0``.
With ``lambda = lambda_min(Lambda(y))``, ``y' = y / max(1, 1 - lambda)`` is dual
feasible exactly (``Lambda(y') = (c - 1 + Lambda(y))/c``), so ``b^T y'`` is a
lower bound on the optimum whatever the state of the iteration; ``A^*(w)`` is
at hand from the ``Z`` step (``A^*(y) = -rho A^*(w)``).  The iterate ``S`` is
PSD by construction.  Reported: the primal residual ``||A(S) - b|| / ||b||``,
the PSD violation ``max(0, -lambda_min(S)) / max(1, ||S||_F)``, and the gap
``(Tr S - b^T y') / (1 + |Tr S| + |b^T y'|)``.  The run is converged only when
all three are within ``tol``; otherwise the rule of :mod:`aimlib.errors` applies
at ``max_iter`` and to a run whose worst measure has not halved in ``patience``
iterations (an infeasible problem, or a stall): :class:`ConvergenceError` by
default, or the last iterate flagged ``converged=False``.

The penalty follows residual balancing (Boyd et al. 2011, section 3.4.1) for the
first ``adapt_iter`` iterations: doubled when the consensus residual ``||Z - S||``
exceeds ten times the dual residual ``rho ||S - S_prev||``, halved in the
opposite case (``U`` rescaled); then it is held, which ADMM's convergence
proof requires of a penalty that varies (it must settle).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached

__all__ = ["MinTraceResult", "conjugate_gradient", "psd_projection", "min_trace_admm"]


class MinTraceResult(NamedTuple):
    """The solution of :func:`min_trace_admm` and its certificate (module docstring)."""

    S: object               #: the PSD estimate, ``(d, d)`` on the measurement map's module
    converged: bool
    iterations: int
    residual: float         #: ``||A(S) - b|| / ||b||``
    psd_violation: float
    gap: float              #: relative duality gap against the dual feasible ``y'``
    trace: float            #: ``Tr S``
    dual_bound: float       #: ``b^T y' <= min Tr S``


def _scalar(x) -> float:
    """A 0-d array (either module) as a Python float."""
    return float(to_host(x))


def conjugate_gradient(apply, rhs, x0, *, tol: float, max_iter: int, precondition=None):
    """Solve ``K x = rhs`` (``K = apply``, symmetric PSD) by preconditioned CG from ``x0``.

    ``precondition`` (optional) applies an approximation of ``K^{-1}``.  Stops
    when ``||K x - rhs|| <= tol ||rhs||`` or after ``max_iter`` products and
    returns ``(x, ||K x - rhs|| / ||rhs||)``; the caller judges the result (here
    one ADMM step, whose certificate does not rest on it).
    """
    precondition = precondition or (lambda r: r)
    norm_b = _scalar((rhs * rhs).sum()) ** 0.5 or 1.0
    x = x0
    r = rhs - apply(x)
    z = precondition(r)
    p, rz = z, _scalar((r * z).sum())
    for _ in range(max_iter):
        if _scalar((r * r).sum()) ** 0.5 <= tol * norm_b or rz <= 0.0:
            break
        Kp = apply(p)
        step = rz / _scalar((p * Kp).sum())
        x, r = x + step * p, r - step * Kp
        z = precondition(r)
        rz, rz_old = _scalar((r * z).sum()), rz
        p = z + (rz / rz_old) * p
    return x, _scalar((r * r).sum()) ** 0.5 / norm_b


def psd_projection(M):
    """``Pi_PSD(M)``, the nearest PSD matrix in Frobenius norm: ``M``'s negative eigenvalues set to 0."""
    xp = get_array_module(M)
    lam, V = xp.linalg.eigh((M + M.T) / 2)
    return (V * xp.maximum(lam, 0.0)) @ V.T


def _check_start(S0, d: int, xp):
    """The starting point: zero, or a symmetric PSD ``(d, d)`` ``S0`` (``ValueError`` otherwise)."""
    if S0 is None:
        return xp.zeros((d, d))
    S0 = to_device(v.symmetric_matrix("S0", S0), xp).astype(float)
    if S0.shape != (d, d):
        raise ValueError(f"S0 must have shape {(d, d)}, got {tuple(S0.shape)}")
    lam_min = _scalar(xp.linalg.eigvalsh(S0)[0])
    if lam_min < -1e-8 * max(1.0, _scalar(abs(S0).max())):
        raise ValueError(f"S0 must be positive semi-definite, its smallest eigenvalue is {lam_min:.3g}")
    return S0


def _certificate(op, b, S, Aw, w, rho: float) -> dict:
    """Primal residual, PSD violation and duality gap of ``S`` with the multiplier ``y = -rho w``."""
    xp = op.xp
    norm_b = _scalar((b * b).sum()) ** 0.5 or 1.0
    r = op.forward(S) - b
    lam_S = _scalar(xp.linalg.eigvalsh(S)[0])
    Lam = xp.eye(op.d) + rho * Aw                          # I - A^*(y)
    scale = max(1.0, 1.0 - _scalar(xp.linalg.eigvalsh(Lam)[0]))
    bound = -rho * _scalar((b * w).sum()) / scale
    trace = _scalar(xp.trace(S))
    return {"residual": _scalar((r * r).sum()) ** 0.5 / norm_b,
            "psd_violation": max(0.0, -lam_S) / max(1.0, _scalar((S * S).sum()) ** 0.5),
            "gap": (trace - bound) / (1.0 + abs(trace) + abs(bound)), "trace": trace, "dual_bound": bound}


def _check_options(op, b, tol, max_iter, penalty, check_every, patience, cg_max_iter, adapt_iter,
                   on_max_iter):
    """Validate the solver's arguments; return ``b`` on the map's module."""
    for name in ("m", "d", "xp", "forward", "adjoint"):
        if not hasattr(op, name):
            raise TypeError(f"op must be a measurement map with m, d, xp, forward and adjoint, lacks {name!r}")
    b = v.finite_array("b", b, ndim=1)
    if b.shape != (op.m,):
        raise ValueError(f"b must have shape ({op.m},) to match op, got {tuple(b.shape)}")
    v.in_range("tol", tol, 1e-14, 0.1)
    v.integer("max_iter", max_iter, minimum=1)
    v.positive("penalty", penalty)
    v.integer("check_every", check_every, minimum=1)
    v.integer("patience", patience, minimum=1)
    v.integer("cg_max_iter", cg_max_iter, minimum=1)
    v.integer("adapt_iter", adapt_iter, minimum=0)
    check_on_max_iter(on_max_iter)
    return to_device(b, op.xp).astype(float)


def min_trace_admm(op, b, *, tol: float = 1e-6, max_iter: int = 20_000, S0=None,
                   penalty: float = 1.0, check_every: int = 10, patience: int = 3000,
                   cg_max_iter: int = 100, adapt_iter: int = 1000, exact_gram: bool = True,
                   on_max_iter: str = "raise") -> MinTraceResult:
    r"""``min Tr S`` over PSD ``S`` with ``op.forward(S) = b``, by ADMM (module docstring).

    Parameters
    ----------
    op : measurement map
        :class:`~.operators.SoftmaxDifferences`, :class:`~.operators.GaussianMeasurements`
        or any object with ``m``, ``d``, ``xp``, ``forward`` and ``adjoint``.
    b : array of shape (m,)
    tol : float
        Tolerance on the residual, the PSD violation and the relative gap,
        in ``[1e-14, 0.1]``; checked every ``check_every`` iterations.
    max_iter : int
        Iteration cap; reaching it unconverged follows ``on_max_iter``
        (:mod:`aimlib.errors`): raise, or return flagged ``converged=False``.
    S0 : array (d, d), optional
        PSD starting point (``ValueError`` if it is not); default zero.
    penalty : float
        Initial ADMM penalty ``rho`` (then residual balancing).
    patience : int
        Iterations without halving the worst measure before a stall is declared
        (then ``on_max_iter`` applies, as at ``max_iter``).
    cg_max_iter : int
        Products with ``A A^*`` per ``Z`` step (warm-started conjugate gradients).
    adapt_iter : int
        Iterations during which the penalty adapts (every ``10 check_every``);
        fixed afterwards, since every change moves the fixed point of the
        iteration and undoes part of the progress.
    exact_gram : bool
        Solve the ``A A^*`` system exactly through ``op.gram_solver()`` where
        the map has one and it returns a solver (``m x m`` in memory);
        otherwise, or if ``False``, by conjugate gradients.

    Returns
    -------
    MinTraceResult
    """
    b = _check_options(op, b, tol, max_iter, penalty, check_every, patience, cg_max_iter, adapt_iter,
                       on_max_iter)
    xp, d, rho = op.xp, op.d, float(penalty)
    gram = lambda u: op.forward(op.adjoint(u))  # noqa: E731  (A A^*)
    S = _check_start(S0, d, xp)
    solve = op.gram_solver() if exact_gram and hasattr(op, "gram_solver") else None
    precondition = op.preconditioner() if solve is None and hasattr(op, "preconditioner") else None
    U, w, eye = xp.zeros((d, d)), xp.zeros(op.m), xp.eye(d)
    best, best_at, cert, it, cg_tol = math.inf, 0, None, 0, 1e-2
    for it in range(1, max_iter + 1):
        V = S - U - eye / rho
        if solve is None:
            w, _ = conjugate_gradient(gram, op.forward(V) - b, w, tol=cg_tol, max_iter=cg_max_iter,
                                      precondition=precondition)
        else:
            w = solve(op.forward(V) - b)
        Aw = op.adjoint(w)
        Z = V - Aw
        S_prev, S = S, psd_projection(Z + U)
        U = U + Z - S
        if it % check_every and it != max_iter:
            continue
        cert = _certificate(op, b, S, Aw, w, rho)
        worst = max(cert["residual"], cert["psd_violation"], abs(cert["gap"]))
        if not math.isfinite(worst):
            raise ConvergenceError(f"minimum-trace ADMM produced a non-finite iterate at iteration {it}")
        if worst <= tol:
            return MinTraceResult(S, True, it, **cert)
        cg_tol = min(1e-2, max(tol / 10, worst / 100))
        if worst < best / 2:
            best, best_at = worst, it
        elif it - best_at >= patience:
            max_iter_reached(f"minimum-trace ADMM stalled: the worst of residual, PSD violation and gap "
                             f"stayed at {worst:.3g} > tol = {tol:g} for {patience} iterations (an "
                             "infeasible problem, or a slow tail)", on_max_iter)
            return MinTraceResult(S, False, it, **cert)
        if it % (10 * check_every) == 0 and it <= adapt_iter:
            rho, U = _balance(rho, U, _scalar(((Z - S) ** 2).sum()) ** 0.5,
                              rho * _scalar(((S - S_prev) ** 2).sum()) ** 0.5)
    max_iter_reached(f"minimum-trace ADMM reached max_iter = {max_iter} with residual "
                     f"{cert['residual']:.3g}, gap {cert['gap']:.3g} > tol = {tol:g}", on_max_iter)
    return MinTraceResult(S, False, it, **cert)


def _balance(rho: float, U, primal: float, dual: float):
    """Residual balancing: ``(rho, U)`` with ``rho`` doubled or halved and ``U = (multiplier)/rho`` kept."""
    if primal > 10.0 * dual:
        return 2.0 * rho, U / 2.0
    if dual > 10.0 * primal:
        return rho / 2.0, U * 2.0
    return rho, U
