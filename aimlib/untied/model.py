r"""The untied attention-indexed model: sampling, indices, softmax outputs, counting.

Book, chapter "Untied key and query".

* teacher: ``S = Q K^T / sqrt(r d)`` with ``Q, K`` of shape ``(d, r)`` independent,
  i.i.d. ``N(0, 1)`` (:class:`aimlib.priors.Rectangular`); ``S`` is not symmetric,
  ``E S = 0``, ``(1/d) ||S||_F^2 -> 1``, ``Tr S = O(1)`` and ``(1/d) Tr S^2 -> 0``;
* indices: ``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S) / sqrt(d)``, so
  ``h_ab != h_ba`` (:func:`aimlib.model.attention_indices` with ``symmetric=False``);
  the trace term centres the diagonal given ``S`` (it is ``O(1/sqrt d)`` here,
  unlike the tied case) and the ``T^2`` entries are asymptotically i.i.d.
  ``N(0, (1/d)||S||_F^2)``;
* output: the row-wise softmax ``y_a. = softmax(beta h_a.)``
  (:class:`aimlib.channels.UntiedSoftmax`).
"""
from __future__ import annotations

from .. import _validate as v
from ..channels.untied_softmax import UntiedSoftmax
from ..model import attention_indices
from ..priors import make_prior
from ..priors.gaussian import matrix_parts as parts
from ..priors.rectangular import factor_product, part_norms

__all__ = ["factor_product", "sample_teacher_untied", "parts", "part_norms", "part_errors", "untied_indices",
           "untied_softmax", "measurements_per_sample", "unknowns_fraction", "count_threshold"]


def sample_teacher_untied(d: int, rho: float, seed=None):
    r"""Sample ``S = Q K^T / sqrt(r d)``, ``Q, K`` independent ``(d, r)`` standard Gaussian.

    ``r = round(rho d)`` (at least 1).  ``rho = inf`` is the Gaussian prior, i.i.d.
    ``N(0, 1/d)`` entries (the infinite-width limit): the draw of
    ``aimlib.priors.make_prior(rho, 'rectangular')``.  Returns a NumPy ``(d, d)``
    array (not symmetric).
    """
    return make_prior(v.rho(rho, allow_inf=True), "rectangular").sample(v.integer("d", d, minimum=1), seed)


def part_errors(S_hat, S) -> tuple:
    """``((1/d)||A_hat - A||^2, (1/d)||B_hat - B||^2)``: the errors of the two parts of ``S_hat``."""
    return tuple(x / S.shape[0] for x in part_norms(S_hat - S))


def untied_indices(X, S):
    r"""``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S) / sqrt(d)`` for a batch ``X`` of shape ``(n, T, d)``.

    ``S`` is any real ``(d, d)`` matrix; the result ``(n, T, T)`` is not symmetrised
    (a CuPy array if ``X`` or ``S`` is one).
    """
    return attention_indices(X, S, symmetric=False)


def untied_softmax(X, S, beta: float = 1.0):
    """Outputs ``y = row_softmax(beta h)`` of the untied indices, shape ``(n, T, T)``."""
    return UntiedSoftmax(beta)(untied_indices(X, S))


def measurements_per_sample(T: int, tied: bool = False) -> int:
    r"""Exact linear measurements of ``S`` in one noiseless softmax sample.

    Untied: ``T^2`` indices minus one lost constant per row, ``T^2 - T``.  Tied:
    ``T (T + 1)/2`` indices minus one global constant, ``(T^2 + T - 2)/2``.
    """
    T = v.integer("T", T, minimum=2)
    return (T * T + T - 2) // 2 if tied else T * T - T


def unknowns_fraction(rho: float) -> float:
    r"""``r (2d - r) / d^2 = rho (2 - rho)`` for ``rho < 1``, ``1`` beyond: the dimension of rank-``r`` matrices.

    The zero-noise slope of the prior's MMSE (:meth:`aimlib.priors.Rectangular.zero_slope`).
    """
    return make_prior(v.rho(rho, allow_inf=True), "rectangular").zero_slope()


def count_threshold(rho: float, T: int) -> float:
    r"""``alpha_count = rho (2 - rho) / (T^2 - T)`` (``1 / (T^2 - T)`` for ``rho >= 1``).

    The ``n = alpha d^2`` samples carry ``alpha d^2 (T^2 - T)`` exact linear
    measurements; a rank-``r`` ``d x d`` matrix has ``r(2d - r)`` free parameters.
    """
    return unknowns_fraction(rho) / measurements_per_sample(T)
