r"""Several softmax heads averaged: ``y = (1/H) sum_h softmax(beta h^(h))`` (book, chapter "Several heads").

``H`` independent teachers ``S_1, ..., S_H`` give ``H`` index matrices per sample
(``n_indices = H``, the multi-index layout of :mod:`aimlib.channels.base`), and
the output is the average of the heads' row-wise softmax.  ``y`` is row
stochastic, so it holds at most ``T(T-1)`` numbers, and each head's softmax
reveals ``(T^2+T-2)/2`` linear functions of its indices; a sample therefore
reveals at most

.. math::  m_H(T) = \min\Bigl(T(T-1),\; H\,\frac{T^2+T-2}{2}\Bigr)

numbers about the ``H`` teachers, whose rank-``r`` factors have
``H (r d - r(r-1)/2) = H d^2 (\rho - \rho^2/2) + O(d)`` free parameters, and
the counting bound is :func:`count_threshold`.

No Bayes side: every entry of ``y`` mixes all heads, so the posterior of the
indices does not factorise over heads and the one-overlap-per-index state
evolution of the contract does not apply; ``g_out``, ``fisher`` and
``log_partition`` raise ``NotImplementedError``.

:class:`ConcatenatedSoftmax` keeps the heads apart, ``y[:, h] = softmax(beta h^(h))``
(an attention layer whose output projection is invertible and known).  Each head
then sees only its own index, the posterior factorises, and the Bayes side is
the softmax one per head: the diagonal state evolution is exact and GAMP-RIE
runs on it through the multi-index layout.
"""
from __future__ import annotations

from .. import _validate as v
from ..backend import get_array_module
from .base import Channel
from .softmax import Softmax, check_beta, row_softmax, softmax_k


class _Heads(Channel):
    """``H`` softmax heads of inverse temperature ``beta`` (``H`` index matrices per sample)."""

    min_heads = 1
    layer_counts = None
    indices_parameter = "heads"
    threshold = None

    def __init__(self, heads: int = 2, beta: float = 1.0, noise: float = 0.0):
        super().__init__(noise)
        self.heads = v.integer("heads", heads, minimum=self.min_heads)
        self.beta = check_beta(beta)

    @property
    def n_indices(self) -> int:
        return self.heads

    def _params(self) -> str:
        return f"heads={self.heads}, beta={self.beta:g}, " + super()._params()


class MultiHeadSoftmax(_Heads):
    """``H`` softmax heads of inverse temperature ``beta``, averaged; optional Gaussian label noise."""

    name = "heads"
    parameters = ("heads", "beta", "noise")
    bayes_side = False
    bayes_side_why = ("every output entry mixes all heads, so the posterior does not factorise over "
                      "them; heads-concatenated keeps them apart")
    noise_max_T = 0

    def clean(self, h):
        """``(1/H) sum_h softmax(beta h[:, h])``, row by row: ``(n, H, T, T) -> (n, T, T)``.

        One head takes ``(n, T, T)`` and is the softmax channel.
        """
        y = row_softmax(self.beta * h)
        return y if self.heads == 1 else y.mean(axis=1)


class ConcatenatedSoftmax(_Heads):
    """``H >= 2`` noiseless softmax heads side by side, ``y[:, h] = softmax(beta h^(h))``.

    The Bayes side is the softmax one, head by head.
    """

    name = "heads-concatenated"
    min_heads = 2
    parameters = ("heads", "beta")
    noise_max_T = 0

    def __init__(self, heads: int = 2, beta: float = 1.0):
        super().__init__(heads, beta)

    def clean(self, h):
        """``softmax(beta h)`` row by row in every head: ``(n, H, T, T) -> (n, H, T, T)``."""
        return row_softmax(self.beta * h)

    def _heads(self, y, omega, V):
        """The one-head channel and each head's ``(y_h, omega_h, V_h)``."""
        V = self._variances(V)
        return Softmax(self.beta), [(y[..., i, :, :], omega[..., i, :, :], V[i]) for i in range(self.heads)]

    def log_partition(self, y, omega, V):
        """The sum of the heads' softmax ``log Z_out`` (the posterior factorises over heads)."""
        one, heads = self._heads(y, omega, V)
        return sum(one.log_partition(*head) for head in heads)

    def g_out(self, y, omega, V):
        """Each head's softmax ``g_out``, stacked on axis ``-3``."""
        one, heads = self._heads(y, omega, V)
        g = [one.g_out(*head) for head in heads]
        return get_array_module(*g).stack(g, axis=-3)

    def fisher(self, q, Q0, T):
        """``F_h = (T^2 + T - 2) / (Q0_h - q_h)`` for each head (that of :class:`~aimlib.channels.Softmax`)."""
        q, Q0, T, _ = self._fisher_args(q, Q0, T)
        return tuple(Softmax(self.beta).fisher(qh, Q0h, T) for qh, Q0h in zip(q, Q0))


def measurements_per_sample(T: int, heads: int) -> float:
    r"""``m_H(T) = min(T(T-1), H k/2)``: the most a sample of ``H`` averaged softmax heads reveals.

    ``k = T^2 + T - 2`` (:func:`~aimlib.channels.softmax.softmax_k`): one head reveals ``k/2`` numbers.
    """
    T = v.integer("T", T, minimum=2)
    heads = v.integer("heads", heads, minimum=1)
    return min(T * (T - 1), heads * softmax_k(T) / 2)


def count_threshold(rho: float, T: int, heads: int) -> float:
    r"""``alpha_count = H (rho - rho^2/2) / m_H(T)``: the counting bound of ``H`` heads (``rho = 1`` beyond 1).

    Necessary for the teachers to be an isolated zero of the square loss (up to
    ``W_h -> W_h O`` and a relabelling of the heads); for ``H = 1`` it is the
    one-head threshold ``rho(2 - rho)/(T^2 + T - 2)`` of the softmax chapter.
    """
    rho = min(v.rho(rho), 1.0)   # a full-rank teacher has d(d+1)/2 parameters
    return v.integer("heads", heads, minimum=1) * (rho - rho * rho / 2) / measurements_per_sample(T, heads)
