r"""The untied attention-indexed model: sampling, indices, softmax outputs, counting.

Book, chapter "Beyond", section "Untied key and query".

* teacher: ``S = Q K^T / sqrt(r d)`` with ``Q, K`` of shape ``(d, r)`` independent,
  i.i.d. ``N(0, 1)``; ``S`` is not symmetric, ``E S = 0``, ``(1/d) ||S||_F^2 -> 1``,
  ``Tr S = O(1)`` and ``(1/d) Tr S^2 -> 0``;
* indices: ``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S) / sqrt(d)``, so
  ``h_ab != h_ba``; the trace term centres the diagonal given ``S`` (it is
  ``O(1/sqrt d)`` here, unlike the tied case) and the ``T^2`` entries are
  asymptotically i.i.d. ``N(0, (1/d)||S||_F^2)``;
* output: the row-wise softmax ``y_a. = softmax(beta h_a.)``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import to_common
from ..channels import row_softmax
from ..channels.softmax import check_beta
from ..model import teacher_width

__all__ = ["factor_product", "sample_teacher_untied", "parts", "part_norms", "part_errors", "untied_indices",
           "untied_softmax",
           "measurements_per_sample", "sector_counts", "unknowns_fraction", "count_threshold"]


def factor_product(Q, K):
    """``S = Q K^T / sqrt(r d)`` for factors ``Q, K`` of shape ``(d, r)``: the untied key-query matrix."""
    return Q @ K.T / math.sqrt(Q.shape[0] * Q.shape[1])


def sample_teacher_untied(d: int, rho: float, seed=None):
    r"""Sample ``S = Q K^T / sqrt(r d)``, ``Q, K`` independent ``(d, r)`` standard Gaussian.

    ``r = round(rho d)`` (at least 1).  ``rho = inf`` is the Gaussian prior, i.i.d.
    ``N(0, 1/d)`` entries (the infinite-width limit).  Returns a NumPy ``(d, d)``
    array (not symmetric).
    """
    rng = v.generator(seed)
    if math.isinf(v.rho(rho, allow_inf=True)):
        return rng.standard_normal((v.integer("d", d, minimum=1),) * 2) / math.sqrt(d)
    r = teacher_width(d, rho)
    Qm = rng.standard_normal((d, r))
    Km = rng.standard_normal((d, r))
    return factor_product(Qm, Km)


def parts(M):
    """``(A, B) = ((M + M^T)/2, (M - M^T)/2)``: the symmetric and antisymmetric parts of a square matrix."""
    return (M + M.T) / 2, (M - M.T) / 2


def part_norms(M) -> tuple:
    """``(||A||_F^2, ||B||_F^2)`` of the two parts of ``M`` (:func:`parts`), as floats."""
    return tuple(float((P * P).sum()) for P in parts(M))


def part_errors(S_hat, S) -> tuple:
    """``((1/d)||A_hat - A||^2, (1/d)||B_hat - B||^2)``: the errors of the two parts of ``S_hat``."""
    return tuple(x / S.shape[0] for x in part_norms(S_hat - S))


def untied_indices(X, S):
    r"""``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S) / sqrt(d)`` for a batch ``X`` of shape ``(n, T, d)``.

    ``S`` is any real ``(d, d)`` matrix; the result ``(n, T, T)`` is not symmetrised
    (a CuPy array if ``X`` or ``S`` is one).
    """
    X = v.finite_array("X", X, ndim=3)
    S = v.finite_array("S", S, ndim=2)
    d, T = X.shape[2], X.shape[1]
    if tuple(S.shape) != (d, d):
        raise ValueError(f"S must have shape ({d}, {d}) to match X, got {tuple(S.shape)}")
    xp, X, S = to_common(X, S)
    h = X @ S @ xp.swapaxes(X, 1, 2) / np.sqrt(d)
    return h - xp.eye(T, dtype=h.dtype) * (xp.trace(S) / np.sqrt(d))


def untied_softmax(X, S, beta: float = 1.0):
    """Outputs ``y = row_softmax(beta h)`` of the untied indices, shape ``(n, T, T)``."""
    return row_softmax(check_beta(beta) * untied_indices(X, S))


def measurements_per_sample(T: int, tied: bool = False) -> int:
    r"""Exact linear measurements of ``S`` in one noiseless softmax sample.

    Untied: ``T^2`` indices minus one lost constant per row, ``T^2 - T``.  Tied:
    ``T (T + 1)/2`` indices minus one global constant, ``(T^2 + T - 2)/2``.
    """
    T = v.integer("T", T, minimum=2)
    return (T * T + T - 2) // 2 if tied else T * T - T


def sector_counts(T: int) -> tuple:
    r"""Effective measurements of the symmetric and antisymmetric parts of ``S`` per sample.

    ``((T^2 - 1)/2, (T - 1)^2/2)``: the ``T(T+1)/2`` symmetric and ``T(T-1)/2``
    antisymmetric index combinations lose the row shifts, of which the
    uniform one is symmetric and the ``T - 1`` others are half symmetric,
    half antisymmetric.  Their sum is ``T^2 - T``.
    """
    T = v.integer("T", T, minimum=2)
    return (T * T - 1) / 2, (T - 1) ** 2 / 2


def unknowns_fraction(rho: float) -> float:
    r"""``r (2d - r) / d^2 = rho (2 - rho)`` for ``rho < 1``, ``1`` beyond: the dimension of rank-``r`` matrices."""
    rho = v.rho(rho, allow_inf=True)
    return rho * (2.0 - rho) if rho < 1 else 1.0


def count_threshold(rho: float, T: int) -> float:
    r"""``alpha_count = rho (2 - rho) / (T^2 - T)`` (``1 / (T^2 - T)`` for ``rho >= 1``).

    The ``n = alpha d^2`` samples carry ``alpha d^2 (T^2 - T)`` exact linear
    measurements; a rank-``r`` ``d x d`` matrix has ``r(2d - r)`` free parameters.
    """
    return unknowns_fraction(rho) / measurements_per_sample(T)
