"""Exceptions raised by :mod:`aimlib`."""


class ConvergenceError(RuntimeError):
    """An iterative solver did not converge (or diverged); the message says which and why."""
