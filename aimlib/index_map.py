r"""The index operator ``h`` of a token set and its adjoint, matrix-free and chunked over samples: their one definition.

For tokens ``X`` of shape ``(n, T, d)`` the index operator maps a ``d x d``
matrix to the ``n`` index matrices of the model,

.. math::  h(S)_{\mu ab} = \frac{x_a^{\mu\top} S\, x_b^\mu - \delta_{ab} \operatorname{Tr} S}{\sqrt d}

(:func:`aimlib.model.indices_from_factors`), in two variants:

* **symmetric** (the tied model): ``S`` symmetric, ``h(S)`` symmetrised, and the adjoint maps
  ``n`` arrays ``G^mu`` of shape ``(T, T)`` back to a symmetric matrix,

  .. math::  h^*(G) = \frac{1}{\sqrt d} \sum_\mu \Big[X_\mu^\top \tfrac{G^\mu + G^{\mu\top}}{2} X_\mu
             - \operatorname{Tr}(G^\mu)\, I_d\Big];

* **square** (untied key and query): any real ``S``, ``h(S)`` not symmetrised, and
  ``h^*(G) = (1/sqrt d) sum_mu [X_mu^T G^mu X_mu - Tr(G^mu) I_d]``, not symmetrised.

Inner products: ``<S, M> = Tr(S^T M)`` (Frobenius) on the matrices and
``<h, G> = sum_{mu,a,b} h_{mu ab} G_{mu ab}`` (every entry, both triangles) on
the indices; then ``<h(S), G> = <S, h^*(G)>`` for every ``G`` and every ``S``
of the variant.  Every backward pass of the library goes through
:func:`adjoint_sums` and :func:`adjoint_product`:

* GAMP-RIE's channel step (:func:`aimlib.amp.steps.message_pass`) runs its fused loop over
  :meth:`IndexMap.chunks` (indices of a chunk, its ``g_out``, :meth:`IndexMap.sums`), so no
  second ``n x T x T`` array is held, and :meth:`IndexMap.from_sums` after the sums of all
  chunks (or shards) are added; with the pairs ``a <= b`` of the symmetric channels,
  ``G_aa = g_aa``, ``G_ab = g_ab / 2``;
* the students' gradient (:func:`aimlib.gd.student.index_grad`) at
  ``S = W W^T / sqrt(r d)`` is ``2 h^*(G) W / sqrt(r d)`` (the chain rule), :func:`adjoint_product`
  of the sums with ``right = X W``, so ``h^*(G)`` (``d x d``) is never formed.

Memory: ``X``, one ``d x d`` matrix and the work arrays of one chunk of
samples (:func:`aimlib.model.index_chunk_size` of ``memory_mb``); the
per-sample ``d x d`` matrices ``x_a x_b^T`` are never formed, and each pass
costs ``O(n T d^2)``.
"""
from __future__ import annotations

import math

import numpy as np

from . import _validate as v
from .backend import get_array_module, to_device
from .model import index_chunk_size, indices_from_factors
from .tokens import TokenStream

__all__ = ["IndexMap", "adjoint_sums", "adjoint_product"]


def adjoint_sums(X, G, right, *, square: bool = False):
    r"""The two sums of the adjoint: ``(sum_mu X_mu^T G~^mu R_mu, sum_mu Tr G^mu)``, without checks.

    ``G~ = G`` (square) or ``(G + G^T)/2`` (symmetric).  ``X`` has shape ``(n, T, d)``, ``G``
    ``(..., n, T, T)`` and ``right`` (``R``) ``(..., n, T, m)`` or ``(n, T, m)``; the results have
    shapes ``(..., d, m)`` and ``(...)``.  Sums over disjoint sets of samples add up (chunks, shards).
    """
    xp = get_array_module(X, G)
    n, T, d = X.shape
    if square:
        Gt = G
    else:
        Gt = G + xp.swapaxes(G, -1, -2)
        Gt *= 0.5                       # in place: no second (..., n, T, T) array
    GR = Gt @ right
    M = X.reshape(n * T, d).T @ GR.reshape(GR.shape[:-3] + (n * T, GR.shape[-1]))
    return M, xp.trace(G, axis1=-2, axis2=-1).sum(axis=-1)


def adjoint_product(M, trace, W, norm: float):
    r"""``(M - Tr(G) W) / norm`` from the sums of :func:`adjoint_sums` with ``right = X W``.

    With ``norm = sqrt(d)`` this is ``h^*(G) W`` (``W = I``: ``h^*(G)`` itself); another
    ``norm`` folds a scalar factor of the caller into the one division.  ``trace`` has the
    leading shape of ``M``; ``W`` broadcasts against ``M``.
    """
    return (M - trace[..., None, None] * W) / norm


class IndexMap:
    """The index operator ``S -> h(S)`` of tokens ``X`` and its adjoint (module docstring).

    Parameters
    ----------
    X : array of shape (n, T, d), or aimlib.tokens.TokenStream
        Tokens, NumPy or CuPy (or regenerated in chunks); every pass runs on ``X``'s
        module and precision (arguments are moved there).
    square : bool
        The square variant (untied key and query) instead of the symmetric one.
    memory_mb : float
        Budget in MiB for the work arrays of one chunk of samples.
    chunk_size : int, optional
        Samples per chunk (overrides ``memory_mb``).
    """

    def __init__(self, X, *, square: bool = False, memory_mb: float = v.MEMORY_MB,
                 chunk_size: int | None = None):
        streamed = isinstance(X, TokenStream)
        X = X if streamed else v.finite_array("X", X, ndim=3)
        self.xp = X.xp if streamed else get_array_module(X)
        self.X, self.square, self.dtype = X, bool(square), X.dtype
        self.n, self.T, self.d = X.shape
        size = index_chunk_size(self.T, self.d, np.dtype(self.dtype).itemsize, 1, memory_mb)
        if chunk_size is not None:
            size = v.integer("chunk_size", chunk_size, minimum=1)
        self.chunk_size = min(self.n, size)

    def chunks(self):
        """``(start, X[start:start + chunk_size])`` over the samples: the loop of every pass."""
        for s in range(0, self.n, self.chunk_size):
            yield s, self.X[s:s + self.chunk_size]

    def indices(self, Xc, S):
        """``h(S)`` of a chunk ``Xc`` of shape ``(c, T, d)``: ``(c, T, T)``, without checks."""
        c, T, d = Xc.shape
        XS = (Xc.reshape(c * T, d) @ S).reshape(c, T, d)
        return indices_from_factors(XS, Xc, self.xp.trace(S), math.sqrt(d), symmetric=not self.square)

    def sums(self, Xc, G):
        """:func:`adjoint_sums` of a chunk ``Xc`` and its ``G`` (``(..., c, T, T)``) with ``right = Xc``."""
        return adjoint_sums(Xc, G, Xc, square=self.square)

    def from_sums(self, M, trace):
        """``h^*(G)`` from the sums of :meth:`sums` over all samples (``(..., d, d)`` and ``(...)``)."""
        xp = self.xp
        if not self.square:
            M = (M + xp.swapaxes(M, -1, -2)) / 2
        trace = xp.asarray(trace, dtype=M.dtype)
        return adjoint_product(M, trace, xp.eye(self.d, dtype=M.dtype), math.sqrt(self.d))

    def forward(self, S):
        """``h(S)`` of shape ``(n, T, T)`` for ``S`` of shape ``(d, d)`` (symmetric for the symmetric variant)."""
        xp, d = self.xp, self.d
        S = to_device(S, xp).astype(self.dtype, copy=False)
        if S.shape != (d, d):
            raise ValueError(f"S must have shape {(d, d)}, got {tuple(S.shape)}")
        h = xp.empty((self.n, self.T, self.T), dtype=self.dtype)
        for s, Xc in self.chunks():
            h[s:s + Xc.shape[0]] = self.indices(Xc, S)
        return h

    def adjoint(self, G):
        """``h^*(G)``, a ``(d, d)`` matrix (symmetric for the symmetric variant), for ``G`` of shape ``(n, T, T)``."""
        xp, n, T, d = self.xp, self.n, self.T, self.d
        G = to_device(G, xp).astype(self.dtype, copy=False)
        if G.shape != (n, T, T):
            raise ValueError(f"G must have shape {(n, T, T)}, got {tuple(G.shape)}")
        M, trace = xp.zeros((d, d), dtype=self.dtype), xp.zeros((), dtype=self.dtype)
        for s, Xc in self.chunks():
            Mc, tc = self.sums(Xc, G[s:s + Xc.shape[0]])
            M, trace = M + Mc, trace + tc
        return self.from_sums(M, trace)
