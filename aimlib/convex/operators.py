r"""Matrix-free measurement maps ``A: S -> (<A_k, S>)_k`` for minimum-trace recovery, with adjoints.

Book, chapter "What training learns".  Two ensembles, each an object with
``m``, ``d``, ``xp``, ``forward(S)`` (shape ``(m,)``) and ``adjoint(w)``
(``sum_k w_k A_k``, symmetric ``(d, d)``), so that ``<A(S), w> = <S, A^*(w)>``
with the Euclidean and Frobenius inner products:

* :class:`SoftmaxDifferences`: the exact linear measurements of softmax data,
  ``h_ab(S) - h_11(S)`` for the pairs of :func:`measurement_pairs`, through the
  index operator :class:`aimlib.index_map.IndexMap` (no ``d x d`` matrix per
  measurement);
* :class:`GaussianMeasurements`: i.i.d. standard Gaussian symmetric ``A_k``
  (:func:`aimlib.convex.cone.goe_frobenius`), drawn chunk by chunk from a
  seed and drawn again from it whenever a chunk is needed; up to ``cache_mb``
  of chunks are kept.  The ``A_k`` are the i.i.d. Gaussian ensemble itself (no
  structured surrogate), so its transition is the statistical dimension's.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, module_named, solve_triangular, to_device, to_host
from ..channels.softmax import check_beta
from ..index_map import IndexMap
from .cone import goe_frobenius

__all__ = ["measurement_pairs", "softmax_targets", "gram_fits", "gram_inverse", "SoftmaxDifferences",
           "GaussianMeasurements"]


def measurement_pairs(T: int):
    """The pairs ``(a, b)``, ``a <= b``, ``(a, b) != (1, 1)`` of one sample: two int arrays of length
    ``(T^2+T-2)/2``."""
    T = v.integer("T", T, minimum=2)
    pairs = [(a, b) for a in range(T) for b in range(a, T) if (a, b) != (0, 0)]
    ia, ib = np.array(pairs).T
    return ia, ib


def softmax_targets(n: int, T: int, *, h=None, y=None, beta=None) -> np.ndarray:
    r"""The values ``b = h_ab - h_11`` (pairs of :func:`measurement_pairs`) that softmax data fix.

    The output fixes ``z_ab = beta h_ab + c_a`` (``z = log y``, one unknown
    constant per row); with ``h`` symmetric,
    ``h_ab - h_11 = (z_ab - z_a1 + z_1a - z_11)/beta``.  Exactly one of
    ``h`` (indices known up to one constant per row) and ``y`` (positive
    softmax outputs, with ``beta``), of shape ``(n, T, T)``.  Returns a host
    array of shape ``(n (T^2+T-2)/2,)``, sample-major.
    """
    if (h is None) == (y is None):
        raise ValueError("give exactly one of h (indices) and y (softmax outputs)")
    if y is not None:
        y = np.asarray(to_host(v.finite_array("y", y, ndim=3)), dtype=float)
        if beta is None or not np.all(y > 0):
            raise ValueError("y must hold positive softmax outputs, with beta given")
        z = np.log(y) / check_beta(beta)
    else:
        z = np.asarray(to_host(v.finite_array("h", h, ndim=3)), dtype=float)
    if z.shape != (n, T, T):
        raise ValueError(f"h or y must have shape {(n, T, T)} to match X, got {z.shape}")
    ia, ib = measurement_pairs(T)
    return (z[:, ia, ib] - z[:, ia, 0] + z[:, 0, ia] - z[:, :1, 0]).reshape(-1)


def gram_fits(m: int, d: int, memory_mb: float) -> bool:
    """Whether :func:`gram_inverse` can serve ``m`` measurements of ``d x d`` matrices in ``memory_mb``.

    ``K = A A^*`` is singular when ``m > d(d+1)/2`` (more measurements than
    symmetric matrices have entries); ``K`` and its Cholesky factor take
    ``16 m^2`` bytes.
    """
    return m <= d * (d + 1) // 2 and 16 * m * m <= memory_mb * 2**20


def gram_inverse(K):
    r"""``r -> K^{-1} r`` for the Gram matrix ``K = A A^*`` of a measurement map; ``None`` if it is singular.

    ``K`` is positive definite when the ``A_k`` are linearly independent
    (``m <= d(d+1)/2`` generic measurements).  Its Cholesky factor ``L``
    (``K = L L^T``, from ``K``'s lower triangle; ``O(m^3/3)``) tests that: a
    failed factorisation, a non-finite factor, or ``(max_i L_ii / min_i L_ii)^2``
    (a lower bound on the condition number) above ``1e10`` gives ``None``, and
    the caller then solves by conjugate gradients, whose inexact solution the
    certificate of :func:`~.first_order.min_trace_admm` does not rest on.
    Otherwise each call solves ``L u = r`` and ``L^T x = u`` (``O(m^2)``).
    """
    xp = get_array_module(K)
    try:
        L = xp.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return None
    diag = xp.diagonal(L)
    low, high = float(to_host(diag.min())), float(to_host(diag.max()))
    if not low * low > 1e-10 * high * high:                          # also catches NaN
        return None
    solve = solve_triangular(xp)
    return lambda r: solve(L, solve(L, r, lower=True), trans="T", lower=True)


class SoftmaxDifferences:
    r"""``A(S)_{mu,(a,b)} = h_ab(S) - h_11(S)`` for tokens ``X`` (n, T, d), matrix-free.

    With ``P = (T^2+T-2)/2`` pairs per sample, ``m = n P``.  The adjoint of
    ``w`` is :meth:`IndexMap.adjoint` of the ``G`` with ``G_ab = G_ba = w_ab/2``
    (``a < b``), ``G_aa = w_aa`` and ``G_11 = -sum_(a,b) w_ab`` per sample.
    ``memory_mb``, ``chunk_size``: as for :class:`aimlib.index_map.IndexMap`;
    ``gram_mb``: what :meth:`gram_solver` may use.
    """

    def __init__(self, X, *, memory_mb: float = v.MEMORY_MB, chunk_size: int | None = None,
                 gram_mb: float = 1024.0):
        self.index = IndexMap(X, memory_mb=memory_mb, chunk_size=chunk_size)
        self.gram_mb = v.nonnegative("gram_mb", gram_mb)
        self.xp, self.d = self.index.xp, self.index.d
        self.ia, self.ib = measurement_pairs(self.index.T)
        self.m = self.index.n * len(self.ia)

    def forward(self, S):
        """The ``m`` measurements of the symmetric ``(d, d)`` matrix ``S``."""
        h = self.index.forward(S)
        return (h[:, self.ia, self.ib] - h[:, :1, 0]).reshape(-1)

    def adjoint(self, w):
        """``sum_k w_k A_k`` for ``w`` of shape ``(m,)``."""
        xp, n, T = self.xp, self.index.n, self.index.T
        W = to_device(w, xp).reshape(n, len(self.ia))
        G = xp.zeros((n, T, T), dtype=W.dtype)
        G[:, self.ia, self.ib] += W / 2
        G[:, self.ib, self.ia] += W / 2
        G[:, 0, 0] -= W.sum(axis=1)
        return self.index.adjoint(G)

    def _pair_gram(self, G, tr_row, tr_col):
        r"""``<A_p, A_q>`` for the pairs ``p`` of one sample and ``q`` of another, from their tokens' products.

        With ``A_p = sym(x_a x_b^T) - x_1 x_1^T + c_p I`` (over ``sqrt d``,
        ``c_p = 1 - delta_ab``) and ``<sym(a b^T), sym(e f^T)> = ((a.e)(b.f) + (a.f)(b.e))/2``,
        every entry is a polynomial in ``G[..., a, e] = x_a . x'_e`` and the
        traces ``tr = <sym(x_a x_b^T) - x_1 x_1^T, I>`` of either sample
        (``tr_row[..., p]``, ``tr_col[..., q]``).  Returns ``(..., P, P)``.
        """
        ia, ib = np.concatenate([[0], self.ia]), np.concatenate([[0], self.ib])
        inner = (G[..., ia[:, None], ia[None, :]] * G[..., ib[:, None], ib[None, :]]
                 + G[..., ia[:, None], ib[None, :]] * G[..., ib[:, None], ia[None, :]]) / 2
        s = inner[..., 1:, 1:] - inner[..., 1:, :1] - inner[..., :1, 1:] + inner[..., :1, :1]
        c = self.xp.asarray((self.ia != self.ib).astype(float))
        s = s + tr_row[..., :, None] * c + c[:, None] * tr_col[..., None, :]
        return (s + self.d * c[:, None] * c[None, :]) / self.d

    def _traces(self, Gm):
        """``tr_p`` of every sample (:meth:`_pair_gram`) from its own ``T x T`` token products: ``(n, P)``."""
        return Gm[:, self.ia, self.ib] - Gm[:, :1, 0]

    def gram_blocks(self):
        """The diagonal blocks of ``A A^*``, one ``P x P`` per sample: ``(n, P, P)``, in ``O(n T^2 d)`` work."""
        X = self.index.X
        Gm = X @ self.xp.swapaxes(X, 1, 2)                             # (n, T, T)
        tr = self._traces(Gm)
        return self._pair_gram(Gm, tr, tr)

    def gram_solver(self):
        r"""``r -> (A A^*)^{-1} r`` exactly, from the whole ``m x m`` Gram matrix; or ``None``.

        ``K`` is built sample block by sample block from the tokens' products
        (:meth:`_pair_gram`, ``O(n^2 T^2 d)`` work, its intermediates in what
        ``gram_mb`` leaves beside ``K`` and its factor) and factorised once
        (:func:`gram_inverse`).  ``None`` unless :func:`gram_fits` (``K``
        singular, or ``K`` and its factor beyond ``gram_mb``).
        """
        xp, X, n, P = self.xp, self.index.X, self.index.n, len(self.ia)
        if not gram_fits(self.m, self.d, self.gram_mb):
            return None
        tr = self._traces(X @ xp.swapaxes(X, 1, 2))
        flat = X.reshape(-1, self.d)
        K = xp.empty((n, P, n, P))
        spare = self.gram_mb * 2**20 - 16 * self.m * self.m                # beside K and its factor
        rows = max(1, int(spare // (8 * 12 * n * self.index.T ** 2 * P * P)))
        for s in range(0, n, rows):
            G = (X[s:s + rows].reshape(-1, self.d) @ flat.T).reshape(-1, self.index.T, n, self.index.T)
            G = xp.swapaxes(G, 1, 2)                                    # (rows, n, T, T)
            K[s:s + rows] = xp.swapaxes(self._pair_gram(G, tr[s:s + rows, None], tr[None]), 1, 2)
        return gram_inverse(K.reshape(self.m, self.m))

    def preconditioner(self):
        """``r -> (block-diagonal of A A^*)^{-1} r``, per sample (:meth:`gram_blocks`), for conjugate gradients."""
        xp, n = self.xp, self.index.n
        blocks = self.gram_blocks()
        P = blocks.shape[1]
        inv = xp.linalg.inv(blocks + 1e-12 * xp.trace(blocks, axis1=1, axis2=2)[:, None, None] * xp.eye(P))
        return lambda r: (inv @ r.reshape(n, P, 1)).reshape(-1)


class GaussianMeasurements:
    """``m`` i.i.d. standard Gaussian symmetric ``A_k`` in ``d x d``, regenerated from ``seed`` in chunks.

    Chunk ``j`` (measurements ``j c .. (j+1) c - 1``, ``c`` of ``chunk_mb``) is
    ``goe_frobenius(d, default_rng([key, j]), size)`` with ``key`` drawn once from
    ``seed``, made on the host (the same ``A_k`` on every backend) and moved to
    ``backend``'s device.  The first chunks, up to ``cache_mb``, are kept; the
    others are drawn again at each pass (memory ``O(chunk + cache)``, never
    ``m d^2`` unless the cache allows it).
    """

    def __init__(self, d: int, m: int, seed=None, *, backend: str | None = None,
                 chunk_mb: float = 64.0, cache_mb: float = 1024.0):
        self.d, self.m = v.integer("d", d, minimum=1), v.integer("m", m, minimum=1)
        self.xp = module_named(backend)
        self.key = int(v.generator(seed).integers(2**62))
        per = 8 * self.d * self.d
        self.chunk = max(1, min(self.m, int(v.positive("chunk_mb", chunk_mb) * 2**20 // per)))
        self.cache_mb = v.nonnegative("cache_mb", cache_mb)
        self.cached = int(self.cache_mb * 2**20 // (per * self.chunk))
        self._cache: dict = {}

    def matrices(self, j: int):
        """Chunk ``j``'s matrices, shape ``(c, d, d)``, on ``xp`` (drawn again unless cached)."""
        if j in self._cache:
            return self._cache[j]
        start = j * self.chunk
        size = min(self.chunk, self.m - start)
        A = to_device(goe_frobenius(self.d, np.random.default_rng([self.key, j]), size=size), self.xp)
        if j < self.cached:
            self._cache[j] = A
        return A

    def _chunks(self):
        """``(start, A_chunk)`` over all measurements."""
        for j in range(-(-self.m // self.chunk)):
            yield j * self.chunk, self.matrices(j)

    def forward(self, S):
        """``(<A_k, S>)_k``, shape ``(m,)``."""
        S = to_device(S, self.xp).reshape(-1)
        out = self.xp.empty(self.m, dtype=S.dtype)
        for s, A in self._chunks():
            out[s:s + A.shape[0]] = A.reshape(A.shape[0], -1) @ S
        return out

    def gram_solver(self):
        r"""``r -> (A A^*)^{-1} r`` exactly, from the ``m x m`` Gram matrix ``K_kl = <A_k, A_l>``; or ``None``.

        ``K`` is built chunk by chunk (``O(m^2 d^2)`` work) and factorised once
        (:func:`gram_inverse`).  ``None`` unless all the ``A_k`` are cached and
        :func:`gram_fits` within ``cache_mb`` too.
        """
        if self.cached * self.chunk < self.m or not gram_fits(self.m, self.d, self.cache_mb):
            return None
        K = self.xp.empty((self.m, self.m))
        for s, A in self._chunks():
            flat = A.reshape(A.shape[0], -1)
            for t, B in self._chunks():
                K[s:s + A.shape[0], t:t + B.shape[0]] = flat @ B.reshape(B.shape[0], -1).T
        return gram_inverse(K)

    def adjoint(self, w):
        """``sum_k w_k A_k``, symmetric ``(d, d)``."""
        w = to_device(w, self.xp)
        M = self.xp.zeros(self.d * self.d, dtype=w.dtype)
        for s, A in self._chunks():
            M += w[s:s + A.shape[0]] @ A.reshape(A.shape[0], -1)
        return M.reshape(self.d, self.d)
