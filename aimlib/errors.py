"""Exceptions of :mod:`aimlib` and the one rule for solvers that stop at their iteration cap.

The rule (the iterative solvers: state evolution, the ``rho -> 0`` hardmax
limit, GAMP-RIE; gradient descent with its own default, below):

* divergence or a non-finite value always raises :class:`ConvergenceError`;
* reaching ``max_iter`` before the tolerance raises :class:`ConvergenceError`
  by default (``on_max_iter="raise"``); with ``on_max_iter="warn"`` the solver
  returns its last iterate flagged ``converged=False`` and emits a
  ``RuntimeWarning``; ``on_max_iter="return"`` returns it flagged, silently (for
  runs of a fixed number of iterations).

Gradient descent's cap is its ``steps`` and its default is ``on_max_iter="return"``:
the steps are a budget (the paper's 1000 Adam steps) and ``tol`` only an early
stop, so restarts still above ``tol`` at the end of the budget come back flagged
in ``GDResult.converged``; ``"raise"`` and ``"warn"`` make that a failure or a
warning.  Whatever ``on_max_iter`` says, a non-finite loss or gradient, a restart
short of ``tol`` whose objective rose or did not move, or an estimation error above
20 times the data-free estimate's raises :class:`ConvergenceError` (:mod:`aimlib.gd.checks`).
The command line maps a raised error to exit status 1.
"""
from __future__ import annotations

import warnings

__all__ = ["ConvergenceError", "ON_MAX_ITER", "check_on_max_iter", "max_iter_reached"]

#: what a solver may do when it reaches its iteration cap
ON_MAX_ITER = ("raise", "warn", "return")


class ConvergenceError(RuntimeError):
    """An iterative solver did not converge (or diverged); the message says which and why."""


def check_on_max_iter(on_max_iter: str) -> str:
    """Validate the ``on_max_iter`` option (``'raise'``, ``'warn'`` or ``'return'``)."""
    if on_max_iter not in ON_MAX_ITER:
        raise ValueError(f"on_max_iter must be one of {list(ON_MAX_ITER)}, got {on_max_iter!r}")
    return on_max_iter


def max_iter_reached(message: str, on_max_iter: str) -> None:
    """Apply the rule at the iteration cap: raise :class:`ConvergenceError`, warn, or return quietly."""
    if check_on_max_iter(on_max_iter) == "raise":
        raise ConvergenceError(message)
    if on_max_iter == "warn":
        warnings.warn(message + " (returned as not converged)", RuntimeWarning, stacklevel=3)
