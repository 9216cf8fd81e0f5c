r"""The training objective of a batch of students, and the spectra of what they learn.

Two students (:data:`STUDENTS`):

``'factorised'``
    ``S_hat = W W^T / sqrt(r d)``, ``W`` of shape ``(d, r)`` (:mod:`aimlib.gd.student`), or
    ``W W^T / sqrt(r d) - m I`` with a known ``shift = m`` (centred teachers, ``m = sqrt(rho)``);
    weight decay ``lambda`` adds ``(lambda/2) ||W||_F^2 / sqrt(r d) = (lambda/2) Tr S_hat``.
    The factor ``1/sqrt(r d)`` makes one ``lambda`` the same penalty on ``S_hat``
    for every width ``r``: with ``r`` at least the rank of the minimiser, all
    widths minimise ``L(S_hat) + (lambda/2) Tr S_hat`` over positive
    semi-definite ``S_hat`` (the trace is the nuclear norm there).
``'direct'``
    ``S_hat`` itself, symmetric ``d x d`` (:mod:`aimlib.gd.direct`); weight
    decay adds ``(lambda/2) ||S_hat||_F^2``.

The spectrum of a learned ``S_hat`` is compared with the teacher's without
rescaling: the eigenvalues of ``S = W W^T / sqrt(r d)`` follow
:func:`aimlib.rmt.density_S` (``sqrt(rho)`` times a Marchenko-Pastur law of
ratio ``1/rho``, an atom ``1 - rho`` at 0, the rest at or above
``(1 - sqrt(rho))^2 / sqrt(rho)``).
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import to_host
from .direct import direct_loss_grad, ridge_penalty
from .student import check_weight_decay, loss_grad, shifted_gram, trace_penalty

#: the two parametrisations of the student (see the module docstring)
STUDENTS = ("factorised", "direct")

#: an eigenvalue of ``S_hat`` counts as non-zero above this (absolute, in the teacher's scale)
EIG_TOL = 0.1


class Objective:
    """Square loss of a batch of students of one kind plus weight decay.

    ``loss_grad`` returns the *data* loss ``(k,)`` (what is recorded as the
    training loss) and the gradient of the whole objective (data loss plus
    penalty); ``matrix`` maps the parameters to ``S_hat``.
    """

    def __init__(self, student: str = "factorised", weight_decay: float = 0.0, shift: float = 0.0):
        self.student = v.choice("student", student, STUDENTS)
        self.weight_decay = check_weight_decay(weight_decay)
        self.shift = v.nonnegative("shift", shift)
        direct = self.student == "direct"
        if direct and self.shift:
            raise ValueError(f"shift must be 0 for the direct student (it learns S_hat itself), got {shift}")
        self._loss_grad = direct_loss_grad if direct else loss_grad
        self._penalty = ridge_penalty if direct else trace_penalty

    def loss_grad(self, X2, y, W, beta, n, T, want_grad=True):
        """``(data loss, gradient of data loss + penalty)``; the gradient is ``None`` if not wanted."""
        kw = {"shift": self.shift} if self.shift else {}
        L, g = self._loss_grad(X2, y, W, beta, n, T, want_grad, **kw)
        if g is not None and self.weight_decay > 0:
            g = g + self._penalty(W, self.weight_decay)[1]
        return L, g

    def penalty(self, W):
        """The weight-decay penalty ``(k,)`` of the parameters ``W``."""
        return self._penalty(W, self.weight_decay, want_grad=False)[0]

    def matrix(self, W):
        """``S_hat`` of the parameters ``W`` (``(k, d, d)``): ``W``, or ``W W^T/sqrt(r d) - shift I``."""
        return W if self.student == "direct" else shifted_gram(W, self.shift)


def eigenvalues(S_hat) -> np.ndarray:
    """Ascending eigenvalues of ``S_hat`` (``(d, d)`` -> ``(d,)``, ``(k, d, d)`` -> ``(k, d)``), on the host."""
    S = v.finite_array("S_hat", to_host(S_hat))
    if S.ndim not in (2, 3) or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"S_hat must have shape (d, d) or (k, d, d), got {S.shape}")
    return np.linalg.eigvalsh(0.5 * (S + np.swapaxes(S, -1, -2)))


def count_nonzero(eigs, tol: float = EIG_TOL):
    """Number of eigenvalues with ``|lambda| > tol`` along the last axis (an int or an int array)."""
    tol = v.nonnegative("tol", tol)
    eigs = v.finite_array("eigs", eigs)
    out = (np.abs(eigs) > tol).sum(axis=-1)
    return int(out) if np.ndim(out) == 0 else out
