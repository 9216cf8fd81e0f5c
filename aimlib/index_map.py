r"""The index operator ``h`` of a token set and its adjoint, matrix-free and chunked over samples.

For tokens ``X`` of shape ``(n, T, d)`` the index operator maps a symmetric
``d x d`` matrix to the ``n`` index matrices of the tied model,

.. math::  h(S)_{\mu ab} = \frac{x_a^{\mu\top} S\, x_b^\mu - \delta_{ab} \operatorname{Tr} S}{\sqrt d}

(:func:`aimlib.model.indices_from_factors`, symmetrised), and its adjoint maps
``n`` arrays ``G^mu`` of shape ``(T, T)`` back to a symmetric matrix,

.. math::  h^*(G) = \frac{1}{\sqrt d} \sum_\mu \Big[X_\mu^\top \tfrac{G^\mu + G^{\mu\top}}{2} X_\mu
           - \operatorname{Tr}(G^\mu)\, I_d\Big].

Inner products: ``<S, M> = Tr(S M)`` (Frobenius) on the symmetric matrices and
``<h, G> = sum_{mu,a,b} h_{mu ab} G_{mu ab}`` (every entry, both triangles) on
the indices; then ``<h(S), G> = <S, h^*(G)>`` for every symmetric ``S`` and
every ``G``.  The conventions of the existing callers in these terms:

* GAMP-RIE's backward pass (:func:`aimlib.amp.steps.channel_sums`) sums over
  the pairs ``a <= b``; with ``G_aa = g_aa``, ``G_ab = g_ab / 2`` its
  ``(B - tr I)/sqrt d`` is ``h^*(G)``;
* the students' gradient (:func:`aimlib.gd.student.index_grad`) at
  ``S = W W^T / sqrt(r d)`` is ``2 h^*(G) W / sqrt(r d)`` (the chain rule).

Memory: ``X``, one ``d x d`` matrix and the work arrays of one chunk of
samples (:func:`aimlib.model.index_chunk_size` of ``memory_mb``); the
per-sample ``d x d`` matrices ``x_a x_b^T`` are never formed, and each pass
costs ``O(n T d^2)``.
"""
from __future__ import annotations

import math

from . import _validate as v
from .backend import get_array_module, to_device
from .model import index_chunk_size, indices_from_factors

__all__ = ["IndexMap"]


class IndexMap:
    """The index operator ``S -> h(S)`` of tokens ``X`` and its adjoint (module docstring).

    Parameters
    ----------
    X : array of shape (n, T, d)
        Tokens, NumPy or CuPy; every pass runs on ``X``'s module and
        precision (arguments are moved there).
    memory_mb : float
        Budget in MiB for the work arrays of one chunk of samples.
    chunk_size : int, optional
        Samples per chunk (overrides ``memory_mb``).
    """

    def __init__(self, X, *, memory_mb: float = v.MEMORY_MB, chunk_size: int | None = None):
        X = v.finite_array("X", X, ndim=3)
        self.xp = get_array_module(X)
        self.X = X
        self.n, self.T, self.d = X.shape
        size = index_chunk_size(self.T, self.d, X.dtype.itemsize, 1, memory_mb)
        if chunk_size is not None:
            size = v.integer("chunk_size", chunk_size, minimum=1)
        self.chunk_size = min(self.n, size)

    def _chunks(self):
        """``(start, X[start:start + chunk_size])`` over the samples."""
        for s in range(0, self.n, self.chunk_size):
            yield s, self.X[s:s + self.chunk_size]

    def forward(self, S):
        """``h(S)`` of shape ``(n, T, T)``, symmetric in ``(a, b)``, for a symmetric ``(d, d)`` ``S``."""
        xp, d = self.xp, self.d
        S = to_device(S, xp).astype(self.X.dtype, copy=False)
        if S.shape != (d, d):
            raise ValueError(f"S must have shape {(d, d)}, got {tuple(S.shape)}")
        trace = xp.trace(S)
        h = xp.empty((self.n, self.T, self.T), dtype=self.X.dtype)
        for s, Xc in self._chunks():
            h[s:s + Xc.shape[0]] = indices_from_factors(Xc @ S, Xc, trace, math.sqrt(d), symmetric=True)
        return h

    def adjoint(self, G):
        """``h^*(G)``, a symmetric ``(d, d)`` matrix, for ``G`` of shape ``(n, T, T)``."""
        xp, n, T, d = self.xp, self.n, self.T, self.d
        G = to_device(G, xp).astype(self.X.dtype, copy=False)
        if G.shape != (n, T, T):
            raise ValueError(f"G must have shape {(n, T, T)}, got {tuple(G.shape)}")
        M = xp.zeros((d, d), dtype=self.X.dtype)
        trace = 0.0
        for s, Xc in self._chunks():
            c = Xc.shape[0]
            Gc = G[s:s + c]
            Gs = (Gc + xp.swapaxes(Gc, 1, 2)) / 2
            M += Xc.reshape(c * T, d).T @ (Gs @ Xc).reshape(c * T, d)
            trace = trace + xp.trace(Gc, axis1=1, axis2=2).sum()
        M = (M + M.T) / 2 - trace * xp.eye(d, dtype=self.X.dtype)
        return M / math.sqrt(d)
