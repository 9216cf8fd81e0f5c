r"""The untied softmax channel: row-wise softmax of non-symmetric indices, observed in two sectors.

Book, chapters "Untied key and query" and "Untied key and query: algorithms and the exact error".

Forward map: ``y_ab = exp(beta h_ab) / sum_c exp(beta h_ac)`` for indices
``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)`` of a square, not symmetric ``S``
(:func:`aimlib.model.attention_indices` with ``symmetric=False``): all ``T^2``
entries of ``h`` are free, and the softmax reveals ``z0 = log(y)/beta`` up to one
shift per row, ``T^2 - T`` exact linear measurements per sample.

Bayes side.  With ``V_A, V_B`` the errors of the symmetric and antisymmetric parts
of the estimate, a fresh index matrix fluctuates around ``omega`` with covariance
``C = 2 V_A Pi_sym + 2 V_B Pi_anti`` on ``R^{T x T}`` (the contract's index covariance of a square
index, :meth:`aimlib.channels.base.Channel.index_fluctuation`; :func:`channel_matrices`), and
its posterior on the affine set ``z0 + span(U)`` (``U`` the row shifts,
:func:`shift_basis`) gives

.. math::

    g = \Gamma (z_0 - \omega), \qquad
    \Gamma = C^{-1} - C^{-1}U(U^\top C^{-1}U)^{-1}U^\top C^{-1} = -\partial_\omega g

(``Gamma U = 0``: the choice of ``z0`` within its row class does not matter).  The
output free entropy is, up to constants,

.. math::  \Psi_{\rm out} = -\tfrac12\big[k_1\log V_A + k_2\log V_B + k_3\log(V_A + V_B)\big],

``k_1 = T(T-1)/2``, ``k_2 = (T-1)(T-2)/2``, ``k_3 = T - 1`` (:func:`output_coefficients`,
``k_1 + k_2 + k_3 = T^2 - T``), and each part of ``S`` is seen through a Gaussian
channel of its own noise ``Delta_s = 1/(alpha F_s)`` with

.. math::  F_A = \frac{k_1}{V_A} + \frac{k_3}{V_A + V_B}, \qquad F_B = \frac{k_2}{V_B} + \frac{k_3}{V_A + V_B}

(:meth:`UntiedSoftmax.fisher`, ``F_s = -2 dPsi_out/dV_s``, the contract's ``(4/K) dPsi_out/dq_s``
with ``K = 2`` sectors), in the noise convention of :mod:`aimlib.priors.base` (``R = S + sqrt(Delta_s)``
times the part ``s`` of a Ginibre matrix; the one conjugate ``qhat_s = alpha F_s = 1/Delta_s`` of
:mod:`aimlib.channels.base`).  GAMP's backward step has the same noises,
``Delta_s = 1/(2 alpha Tr(Gamma Pi_s))`` (:func:`sector_deltas`).  At ``V_A = V_B``
``F_s = k_s'/V`` with ``(k_A', k_B') = (T^2 - 1, (T - 1)^2)`` (:func:`sector_k`):
the channel is anisotropic, and their mean ``T^2 - T`` is the isotropic closure's.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_common
from .base import SECTORS, sector_projectors
from .softmax import SoftmaxMap

__all__ = ["UntiedSoftmax", "output_coefficients", "sector_free_entropy", "sector_fisher", "sector_k",
           "shift_basis", "channel_matrices", "sector_deltas", "untied_g_out"]


def output_coefficients(T: int) -> tuple:
    """``(k_1, k_2, k_3) = (T(T-1)/2, (T-1)(T-2)/2, T-1)`` of the output free entropy (module docstring)."""
    T = v.integer("T", T, minimum=2)
    return T * (T - 1) / 2, (T - 1) * (T - 2) / 2, T - 1.0


def sector_free_entropy(VA: float, VB: float, T: int) -> float:
    r"""``-(1/2)[k_1 log V_A + k_2 log V_B + k_3 log(V_A + V_B)]``: ``Psi_out`` up to a constant."""
    VA, VB = v.positive("VA", VA), v.positive("VB", VB)
    k1, k2, k3 = output_coefficients(T)
    return -0.5 * (k1 * math.log(VA) + k2 * math.log(VB) + k3 * math.log(VA + VB))


def _ratio(k: float, V: float) -> float:
    """``k/V`` with ``0/V = 0`` and ``k/0 = inf`` for ``k > 0``."""
    return 0.0 if k == 0 else (math.inf if V == 0 else k / V)


def sector_fisher(VA: float, VB: float, T: int) -> tuple:
    r"""``(F_A, F_B) = (k_1/V_A + k_3/(V_A+V_B), k_2/V_B + k_3/(V_A+V_B))`` for errors ``V_A, V_B >= 0``."""
    VA, VB = v.nonnegative("VA", VA), v.nonnegative("VB", VB)
    k1, k2, k3 = output_coefficients(T)
    cross = _ratio(k3, VA + VB)
    return _ratio(k1, VA) + cross, _ratio(k2, VB) + cross


def sector_k(T: int) -> tuple:
    """``(T^2 - 1, (T - 1)^2)``: ``V F_s`` at ``V_A = V_B = V/2``, twice the effective measurements per sample."""
    k1, k2, k3 = output_coefficients(T)
    return 2 * k1 + k3, 2 * k2 + k3


def shift_basis(T: int) -> np.ndarray:
    """``U`` of shape ``(T^2, T)``: column ``a`` is ``vec(e_a 1^T)``, the shift of row ``a`` (row-major ``vec``)."""
    T = v.integer("T", T, minimum=2)
    return np.kron(np.eye(T), np.ones((T, 1)))


def channel_matrices(VA: float, VB: float, T: int):
    r"""``(C, Gamma)``: the index covariance ``2 V_A Pi_sym + 2 V_B Pi_anti`` and ``-dg/domega``."""
    VA, VB = v.positive("VA", VA), v.positive("VB", VB)
    P, Q = sector_projectors(v.integer("T", T, minimum=2), 2)
    C = 2 * VA * P + 2 * VB * Q
    Cinv = P / (2 * VA) + Q / (2 * VB)
    CU = Cinv @ shift_basis(T)
    Gamma = Cinv - CU @ np.linalg.solve(shift_basis(T).T @ CU, CU.T)
    return C, (Gamma + Gamma.T) / 2


def sector_deltas(Gamma, T: int, alpha: float) -> tuple:
    r"""``Delta_s = 1/(2 alpha Tr(Gamma Pi_s))``: the noise of each part of GAMP's ``R`` (``alpha = n/d^2``)."""
    alpha = v.positive("alpha", alpha)
    P, Q = sector_projectors(T, 2)
    trA, trB = float(np.sum(Gamma * P)), float(np.sum(Gamma * Q))
    return 1.0 / (2 * alpha * trA), 1.0 / (2 * alpha * trB)


def untied_g_out(z0, omega, Gamma):
    r"""``g = Gamma (z0 - omega)`` for arrays of shape ``(n, T, T)`` (row-major ``vec`` of each sample)."""
    xp = get_array_module(z0, omega)
    n, T, _ = omega.shape
    G = xp.asarray(Gamma, dtype=omega.dtype)
    return ((z0 - omega).reshape(n, T * T) @ G).reshape(n, T, T)


class UntiedSoftmax(SoftmaxMap):
    """Row-wise softmax at inverse temperature ``beta`` of the ``T^2`` free indices of a square ``S`` (noiseless).

    One index matrix per sample (``n_indices = 1``), read by a prior with two
    sectors (:class:`aimlib.priors.Rectangular`, :class:`aimlib.priors.Gaussian`
    with ``symmetric=False``): ``V``, ``q`` and ``Q0`` of the Bayes side are pairs
    ``(A, B)``, and ``g_out`` is the full ``T x T`` gradient (module docstring).
    """

    name = "untied-softmax"
    sectors = SECTORS[2]
    parameters = ("beta",)
    #: noiseless only: the Bayes side is the affine set of preimages of ``y``
    noise_max_T = 0

    def linear_k(self, T: int):
        """``k = T^2 - T``, the exact linear measurements per sample: ``V_A F_A + V_B F_B = k`` at every
        ratio (Euler's identity), ``alpha_bar = k alpha`` and perfect recovery at ``alpha k = rho (2 - rho)``,
        the prior's zero slope (:func:`aimlib.state_evolution.perfect_recovery_threshold`)."""
        return T * (T - 1)

    # -- Bayes side ------------------------------------------------------------

    @staticmethod
    def _pair(name: str, x) -> tuple:
        """``x`` as a pair of floats ``(x_A, x_B)``."""
        x = tuple(np.atleast_1d(np.asarray(x, dtype=float)).tolist())
        if len(x) != 2:
            raise ValueError(f"{name} must be a pair ({name}_A, {name}_B) (one per sector), got {len(x)} values")
        return x

    def logits(self, y):
        """``z0 = log(y)/beta`` after checking that ``y`` holds softmax outputs (``> 0``, rows summing to 1)."""
        y = v.finite_array("y", y)
        if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
            raise ValueError(f"y must have shape (..., T, T), got {tuple(y.shape)}")
        xp = get_array_module(y)
        if bool(xp.any(y <= 0)) or not bool(xp.allclose(y.sum(axis=-1), 1.0, atol=1e-8)):
            raise ValueError("y must hold softmax outputs: entries > 0 and each row summing to 1")
        return xp.log(y) / self.beta

    def _residual(self, y, omega, V):
        """``(xp, z0, omega, Gamma)`` for ``y, omega`` of shape ``(n, T, T)`` and ``V = (V_A, V_B)``."""
        omega = v.finite_array("omega", omega, ndim=3)
        z0 = self.logits(y)
        if tuple(z0.shape) != tuple(omega.shape):
            raise ValueError(f"omega must have shape {tuple(z0.shape)} to match y, got {tuple(omega.shape)}")
        xp, z0, omega = to_common(z0, omega)
        return xp, z0, omega, channel_matrices(*self._pair("V", V), z0.shape[-1])[1]

    def log_partition(self, y, omega, V):
        r"""``log Z_out = -(1/2) r^T Gamma r + Psi_out(V_A, V_B) - ((T^2 - T)/2) log(2 pi)``, ``r = z0 - omega``.

        The Gaussian weight of the affine set of preimages of ``y``, up to a
        constant of ``y`` and ``T`` (the softmax Jacobian); one value per sample.
        """
        xp, z0, omega, Gamma = self._residual(y, omega, V)
        n, T, _ = omega.shape
        r = (z0 - omega).reshape(n, T * T)
        quad = xp.sum(r * (r @ xp.asarray(Gamma, dtype=r.dtype)), axis=1)
        return -0.5 * quad + sector_free_entropy(*self._pair("V", V), T) - (T * T - T) / 2 * math.log(2 * math.pi)

    def g_out(self, y, omega, V):
        """``g = Gamma (z0 - omega)`` (:func:`untied_g_out`), shape ``(n, T, T)``, not symmetric."""
        _, z0, omega, Gamma = self._residual(y, omega, V)
        return untied_g_out(z0, omega, Gamma)

    def _errors(self, q, Q0) -> tuple:
        """``(V_A, V_B) = Q0 - q`` for pairs ``q``, ``Q0`` with ``0 <= q_s <= Q0_s``."""
        Q0 = tuple(v.positive(f"Q0[{i}]", x) for i, x in enumerate(self._pair("Q0", Q0)))
        q = tuple(v.in_range(f"q[{i}]", x, 0.0, Q0[i]) for i, x in enumerate(self._pair("q", q)))
        return Q0[0] - q[0], Q0[1] - q[1]

    def fisher(self, q, Q0, T):
        r"""``(F_A, F_B)`` at the errors ``V_s = Q0_s - q_s`` (:func:`sector_fisher`; ``inf`` where ``V_s = 0``).

        ``Delta_s = 1/(alpha F_s)`` is the noise of part ``s`` in the convention of
        :mod:`aimlib.priors.base`, as in GAMP (:func:`sector_deltas`).
        """
        return sector_fisher(*self._errors(q, Q0), T)

    def output_free_entropy(self, q, Q0, T):
        r"""``Psi_out`` at ``V_s = Q0_s - q_s``, up to a constant (:func:`sector_free_entropy`).

        ``dPsi_out/dq_s = F_s/2`` (a symmetric index matrix has ``dPsi_out/dq = F_out/4``):
        the conjugate of part ``s`` in the replica computation is ``qhat_s = 2 alpha F_s``
        and its noise ``Delta_s = 2/qhat_s = 1/(alpha F_s)``.
        """
        return sector_free_entropy(*self._errors(q, Q0), T)
