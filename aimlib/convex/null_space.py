r"""I.i.d. Gaussian measurements posed through their null space: the same affine set, in law, at a fraction of the cost.

Book, chapter "What training learns", section on the convex program at scale.
Write a symmetric ``S`` in the orthonormal coordinates ``u = svec(S)`` (the
entries ``S_ii`` and ``sqrt 2 S_ij``, ``i < j``; ``D = d(d+1)/2`` of them,
``<S, S'>_F = u . u'``).  The ``m`` matrices of
:class:`~.operators.GaussianMeasurements` are i.i.d. standard Gaussian in these
coordinates (:func:`~.cone.goe_frobenius`), the rows of an ``m x D`` matrix
``A`` whose law is invariant under ``A -> A O`` for every orthogonal ``O``.  The
problem sees ``A`` only through the affine set ``{u : A u = A u_0} = u_0 +
null(A)``, and ``null(A)`` is then a uniformly random subspace of dimension
``k = D - m`` (Haar measure on the Grassmannian), the law of the span of ``k``
i.i.d. standard Gaussian vectors.  So drawing that span, ``N`` (``D x k``,
orthonormal columns by QR), gives the minimum-trace problem the law it has
under the Gaussian measurements: the recovery probability is the same at every
``(d, m)``, not approximately (*theorem*: rotation invariance; the per-draw
problems differ, only their laws agree).

As a measurement map (``forward``, ``adjoint``, ``gram_solver``, for
:func:`~.first_order.min_trace_admm`) it is the orthogonal projection onto the
measurements' span, ``A(S) = (I - N N^T) u`` (``D`` outputs, of rank ``m``),
with ``A^* = A`` (a projector, through ``smat``) and ``A A^* = I - N N^T``, the
identity on its range, where every right-hand side ``A(V) - b`` of the solver
lies (``b = A(S_0)``).  Its data ``b`` carry what the ``m`` measurements carry:
``S_0``'s component in their span.  A pass costs ``2 D k`` multiply-adds
against ``m d^2`` for the measurements themselves (at ``d = 200``, ``m =
delta``: 1.4 times fewer at ``rho = 0.25``, 5 times at ``rho = 0.5``), with
neither their regeneration nor the ``m x m`` Gram matrix (``m^2 d^2`` to
build); it pays when ``k = D - m`` is small, that is ``m > D/2``, where minimum
trace switches for ``rho >= 0.25`` (``delta / D -> 2 psi(rho) = 0.59`` there).
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import module_named, to_device

__all__ = ["GaussianNullSpace"]


class GaussianNullSpace:
    """The affine set of ``m`` i.i.d. Gaussian measurements of ``d x d`` symmetric matrices, by its null space.

    ``N``, the orthonormalised span of ``D - m`` standard Gaussian vectors of
    ``R^D`` (``D = d(d+1)/2``), is drawn from ``seed`` on the host (the same on
    every backend) and kept on ``backend``'s device; ``D (D - m)`` numbers,
    refused above ``memory_mb`` (with the QR's work, three times that).
    ``rank`` is ``m``; ``m`` (the length of ``forward``'s output) is ``D``.
    With ``m >= D`` the null space is ``{0}`` (almost surely, as for ``m``
    Gaussian measurements) and the map is the identity.
    """

    def __init__(self, d: int, m: int, seed=None, *, backend: str | None = None,
                 memory_mb: float = 4096.0):
        self.d = v.integer("d", d, minimum=1)
        D = self.d * (self.d + 1) // 2
        self.rank, self.m = v.integer("m", m, minimum=1), D
        self.xp = module_named(backend)
        k = max(D - self.rank, 0)                   # m >= D measurements fix S (almost surely)
        need = 3 * 8 * D * k / 2**20
        if need > v.positive("memory_mb", memory_mb):
            raise ValueError(f"the null space of m = {self.rank} measurements at d = {self.d} takes "
                             f"{need:.0f} MiB with its QR, above memory_mb = {memory_mb:g}: raise memory_mb")
        G = v.generator(seed).standard_normal((D, k))
        self.N = to_device(np.linalg.qr(G)[0] if k else G, self.xp)
        self.iu = np.triu_indices(self.d)
        self.weight = to_device(np.where(self.iu[0] == self.iu[1], 1.0, np.sqrt(2.0)), self.xp)

    def svec(self, S):
        """The orthonormal coordinates ``u`` (length ``D``) of the symmetric ``(d, d)`` ``S``."""
        return to_device(S, self.xp)[self.iu] * self.weight

    def smat(self, u):
        """The symmetric ``(d, d)`` matrix of coordinates ``u`` (inverse of :meth:`svec`)."""
        xp = self.xp
        M = xp.zeros((self.d, self.d), dtype=u.dtype)
        M[self.iu] = u / self.weight
        return M + xp.triu(M, 1).T

    def _project(self, u):
        """``(I - N N^T) u``: the component in the measurements' span."""
        return u - self.N @ (self.N.T @ u)

    def forward(self, S):
        """``(I - N N^T) svec(S)``, shape ``(D,)``."""
        return self._project(self.svec(S))

    def adjoint(self, w):
        """``smat((I - N N^T) w)``, symmetric ``(d, d)`` (the map is self-adjoint)."""
        return self.smat(self._project(to_device(w, self.xp)))

    def gram_solver(self):
        """``r -> r``: ``A A^* = I - N N^T`` is the identity on its range, where the solver's right-hand sides lie."""
        return lambda r: r
