r"""The softmax channel: row-wise softmax of the indices at inverse temperature ``beta``.

Forward map: ``y_ab = exp(beta h_ab) / sum_c exp(beta h_ac)``.

Bayes side (noiseless; book, chapter "The softmax channel")
------------------------------------------------------------
``log y_ab = beta h_ab - L_a`` with ``L_a = log sum_c exp(beta h_ac)``: the output
fixes every row of ``beta h`` up to its own constant ``L_a``, and the symmetry
``h_ab = h_ba`` fixes the differences ``L_a - L_b``.  So ``y`` determines ``h`` up
to ONE global shift ``h + c J`` (``J`` the all-ones matrix), and

.. math::  Z_{\rm out} = C(y) \int dc\, N(h^y + cJ; \omega, V\Sigma)
           = C(y)\, (2\pi V)^{-(D-1)/2} (\textstyle\prod \Sigma)^{-1/2} |J|_w^{-1}
             e^{-|P r|_w^2 / (2V)},

with ``D = T(T+1)/2``, ``r = h^y - omega``, ``|u|_w^2 = sum_{a<=b} u_ab^2/Sigma_ab``,
``|J|_w^2 = T^2/2`` and ``P`` the ``w``-orthogonal projection removing ``J``.  Hence

.. math::  g_{ab} = \frac{(P r)_{ab}}{\Sigma_{ab} V},\qquad F_{\rm out} = \frac{2(D-1)}{V} = \frac{T^2+T-2}{V}.

With label noise the output no longer pins ``h`` to a line:
:mod:`aimlib.channels.softmax_noisy`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module
from .base import Channel, sigma2
from .polytope import sobol_normals


__all__ = ["SoftmaxMap", "Softmax", "row_softmax", "softmax_k", "check_beta", "BETA_MAX"]

#: Largest inverse temperature: ``beta h`` stays finite in float32 (max 3.4e38)
#: for indices up to ``|h| ~ 1e8``, far beyond the O(1) indices of the model.
BETA_MAX = 1e30


def check_beta(beta) -> float:
    """Return ``beta`` as a float in ``(0, BETA_MAX]``, else raise ``ValueError`` naming it."""
    b = v.real("beta", beta, allow_inf=True)
    if not 0 < b <= BETA_MAX:
        raise ValueError(f"beta must be in (0, {BETA_MAX:g}], got {beta!r}")
    return b


def row_softmax(z):
    """Row-wise softmax ``exp(z_ab) / sum_c exp(z_ac)`` over the last axis (max-shifted, any backend)."""
    xp = get_array_module(z)
    z = z - z.max(axis=-1, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_k(T: int) -> int:
    """``k = T^2 + T - 2``: twice the number of exact linear measurements of ``S`` in one softmax sample.

    The noiseless softmax has ``F_out = k / V`` and ``alpha_bar = k alpha``.
    """
    T = v.integer("T", T, minimum=1)
    return T * T + T - 2


class SoftmaxMap(Channel):
    """The forward map of the noiseless softmax channels: ``y = row_softmax(beta h)``, ``0 < beta <= BETA_MAX``.

    Shared by :class:`Softmax` (symmetric indices) and
    :class:`aimlib.channels.untied_softmax.UntiedSoftmax` (square ones); each adds its Bayes side.
    """

    def __init__(self, beta: float = 1.0):
        super().__init__(0.0)
        self.beta = check_beta(beta)

    def _params(self) -> str:
        return f"beta={self.beta:g}"

    def clean(self, h):
        return row_softmax(self.beta * h)


class Softmax(SoftmaxMap):
    """Row-wise softmax at inverse temperature ``beta`` (``0 < beta <= BETA_MAX``), noiseless."""

    name = "softmax"
    parameters = ("beta", "noise")
    #: with label noise the Bayes side is a ``T(T-1)``-dimensional integral, implemented at ``T = 2``
    #: (:class:`~aimlib.channels.softmax_noisy.NoisySoftmax`)
    noise_max_T = 2
    trainable = True

    def linear_k(self, T: int):
        """``k = T^2 + T - 2`` (:func:`softmax_k`): ``F_out = k / V`` at every ``beta``."""
        return softmax_k(T)

    def preimage(self, y):
        r"""A symmetric ``h^y`` with ``softmax(beta h^y) = y`` (defined up to ``+ c J``).

        ``beta h_ab = log y_ab + L_a`` with ``L_a = (1/T) sum_b (log y_ba - log y_ab)``
        (the least-squares solution of ``L_a - L_b = log y_ba - log y_ab``), symmetrised.
        """
        y = v.finite_array("y", y)
        if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
            raise ValueError(f"y must have shape (..., T, T), got {tuple(y.shape)}")
        xp = get_array_module(y)
        if not bool(xp.all(y > 0)):
            raise ValueError(f"an output entry is <= 0, but softmax outputs are positive: they "
                             f"underflow to 0 at beta = {self.beta:g} where "
                             "beta |h_ab - h_ac| exceeds ~700 (the indices h grow like sqrt(1 + rho)); "
                             "lower beta or rho (or use the hardmax)")
        ly = xp.log(y)
        D = xp.swapaxes(ly, -1, -2) - ly
        L = D.mean(axis=-1)
        h = (ly + L[..., :, None]) / self.beta
        return (h + xp.swapaxes(h, -1, -2)) / 2

    def _residual(self, y, omega):
        """``P r`` with ``r = h^y - omega``: the shift along ``J`` chosen to minimise ``|r|_w``."""
        xp = get_array_module(y, omega)
        T = y.shape[-1]
        r = self.preimage(y) - omega
        w = xp.triu(xp.ones((T, T))) / sigma2(T, xp)
        c = -(w * r).sum(axis=(-2, -1)) / (T * T / 2.0)
        return r + c[..., None, None], w

    def log_partition(self, y, omega, V):
        r"""``log Z_out`` up to a constant that depends on ``y`` only.

        ``-|P r|_w^2/(2V) - ((D-1)/2) log(2 pi V) - (1/2) sum_{a<=b} log Sigma_ab - (1/2) log(T^2/2)``:
        the Gaussian weight of the line of preimages ``{h^y + c J}`` (the Jacobian of
        the softmax map, a function of ``y``, is dropped).
        """
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        Pr, w = self._residual(y, omega)
        D = T * (T + 1) // 2
        const = -0.5 * (D - 1) * np.log(2 * np.pi * V) - 0.5 * T * np.log(2.0) - 0.5 * np.log(T * T / 2.0)
        return -(w * Pr * Pr).sum(axis=(-2, -1)) / (2 * V) + const

    def g_out(self, y, omega, V):
        r"""``g_ab = (P r)_ab / (Sigma_ab V)``: the posterior-mean shift ``(E[h|y,omega] - omega) / (V Sigma)``."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        Pr, _ = self._residual(y, omega)
        return Pr / (sigma2(T, xp) * V)

    def fisher(self, q, Q0, T):
        r"""``F_out = (T^2 + T - 2) / (Q0 - q)``, independent of ``beta`` (``inf`` at ``q = Q0``)."""
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        k = softmax_k(T)
        if k == 0:
            return 0.0
        return math.inf if V == 0 else k / V

    def output_free_entropy(self, q, Q0, T):
        r"""``Psi_out = -((D-1)/2)(1 + log(2 pi V)) - (T/2) log 2 - (1/2) log(T^2/2)``, ``D = T(T+1)/2``.

        Up to ``E log C(y)`` (the softmax Jacobian), which does not depend on ``q``.
        """
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        if V == 0:
            return math.inf
        D = T * (T + 1) // 2
        return -(D - 1) / 2 * (1 + math.log(2 * math.pi * V)) - T / 2 * math.log(2.0) - 0.5 * math.log(T * T / 2.0)

    def generalization_error(self, q, Q0, T, *, n_qmc: int = 4096, seed: int = 0):
        r"""Bayes-optimal test error ``E_gen = (1/T) E ||y_hat - y||_F^2`` per sample.

        Rows are exchangeable and row ``a`` depends only on ``h_a.`` (independent
        entries of variances ``2V`` on the diagonal, ``V`` off it), so
        ``E_gen = E_omega tr Cov(softmax(beta h_1.) | omega)``.  ``T = 2``: the row is a
        function of ``u = h_11 - h_12 ~ N(mu, 3V)``, ``mu ~ N(0, 3q)``, and
        ``E_gen = 2 E_mu Var(sigmoid(beta u))`` by nested trapezoid rules (steps
        adapted to the sigmoid's poles at distance ``pi/beta``; about ``1e-12``
        relative).  ``T >= 3``: scrambled Sobol points (two scrambles from the fixed
        ``seed``, :func:`aimlib._validate.stream_seeds`; ``n_qmc // 4``
        outer ``omega`` times ``n_qmc`` inner ``h``; about ``1e-3`` relative).
        """
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        if V == 0 or T == 1:
            return 0.0
        if T == 2:
            return _gen_error_t2(q, V, self.beta)
        return _gen_error_qmc(q, V, T, self.beta, v.integer("n_qmc", n_qmc, minimum=64), seed)


def _gauss_grid(step: float, width: float = 9.0, max_points: int = 20001):
    """Nodes and weights of ``E f(z)``, ``z ~ N(0, 1)``: the trapezoid rule on ``[-width, width]``.

    For integrands analytic in a strip of half-width ``a`` the error decays like
    ``exp(-2 pi a / step)``; callers pick ``step`` about half the strip width.
    """
    n = int(min(max_points, max(201, 2 * math.ceil(width / min(step, 0.05)) + 1)))
    z = np.linspace(-width, width, n)
    w = np.exp(-z * z / 2)
    return z, w / w.sum()


def _gen_error_t2(q, V, b):
    """``2 E_mu Var(sigmoid(b u) | mu)``, ``u = mu + sqrt(3V) z``, ``mu = sqrt(3q) x``."""
    su, sm = math.sqrt(3 * V), math.sqrt(3 * q)
    z, wz = _gauss_grid(0.5 / (b * su))
    x, wx = _gauss_grid(0.5 * max(su, 1.0 / b) / sm if sm > 0 else 1.0)
    u = sm * x[:, None] + su * z[None, :]
    s = 0.5 * (1 + np.tanh(0.5 * b * u))
    m1 = s @ wz
    m2 = (s * s) @ wz
    return float(2 * (wx @ np.maximum(m2 - m1 * m1, 0.0)))


def _gen_error_qmc(q, V, T, b, n_qmc, seed):
    """``E_omega tr Cov(softmax(b h_1.) | omega)`` over scrambled Sobol points (``T >= 3``)."""
    n_out, n_in = max(64, n_qmc // 4), n_qmc
    scale = np.sqrt(np.r_[2.0, np.ones(T - 1)])
    seed_out, seed_in = v.stream_seeds(seed, 2)          # two independent scrambles
    z_out = sobol_normals(T, n_out, seed_out)[:n_out]
    z_in = sobol_normals(T, n_in, seed_in)[:n_in]
    omega = math.sqrt(q) * z_out * scale
    fluct = math.sqrt(V) * z_in * scale
    var = np.empty(n_out)
    for lo in range(0, n_out, 64):
        y = row_softmax(b * (omega[lo:lo + 64, None, :] + fluct[None, :, :]))
        var[lo:lo + 64] = y.var(axis=1, ddof=1).sum(axis=-1)
    return float(var.mean())
