r"""The identity channel ``y = h`` with optional Gaussian label noise (a sanity channel).

Bayes side of the identity channel
----------------------------------
``y_ab = h_ab + sqrt(noise) xi_ab`` with ``xi`` i.i.d. over all ``T^2`` entries
(``y`` is not symmetric).  For ``a < b`` the two observations of ``h_ab``
combine as

.. math::  N(y_{ab}; h, D)\, N(y_{ba}; h, D) = N(y_{ab} - y_{ba}; 0, 2D)\, N(\bar y_{ab}; h, D/2),
           \qquad \bar y = (y + y^\top)/2,

so with ``Delta_ab = noise`` (``a = b``), ``noise/2`` (``a != b``):

* ``Z_out = prod_{a<b} N(y_ab - y_ba; 0, 2 noise) prod_{a<=b} N(ybar_ab; omega_ab, Sigma_ab V + Delta_ab)``,
* ``g_ab = (ybar_ab - omega_ab) / (Sigma_ab V + Delta_ab)``,
* ``F_out = 2 sum_{a<=b} Sigma_ab / (Sigma_ab V + Delta_ab) = T (T + 1) / (V + noise/2)``.

``noise = 0`` is the limit: ``Z_out`` is then the density of the independent entries.
"""
from __future__ import annotations

import math

import numpy as np

from .base import Channel, sigma2

__all__ = ["Linear"]


class Linear(Channel):
    """Identity channel ``y = h + sqrt(noise) xi``."""

    name = "linear"

    def clean(self, h):
        return h.copy()

    def linear_k(self, T: int):
        """``k = T (T + 1)`` when noiseless (every independent entry is observed), else ``None``."""
        return T * (T + 1) if self.noise == 0 else None

    def _entry_variances(self, T, V, xp):
        """``Sigma_ab V + Delta_ab``: the variance of ``ybar_ab`` given ``omega``."""
        delta = self.noise * (xp.eye(T) + 0.5 * (1 - xp.eye(T)))
        return sigma2(T, xp) * V + delta

    def log_partition(self, y, omega, V):
        r"""``log Z_out``: exact log-density of ``y`` (all ``T^2`` entries if ``noise > 0``;
        the ``T(T+1)/2`` independent entries if ``noise = 0``)."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        ybar = (y + xp.swapaxes(y, -1, -2)) / 2
        var = self._entry_variances(T, V, xp)
        upper = xp.triu(xp.ones((T, T)))
        terms = -(ybar - omega) ** 2 / (2 * var) - 0.5 * xp.log(2 * np.pi * var)
        out = (upper * terms).sum(axis=(-2, -1))
        if self.noise > 0:
            strict = xp.triu(xp.ones((T, T)), 1)
            dif = y - xp.swapaxes(y, -1, -2)
            pair = -dif**2 / (4 * self.noise) - 0.5 * np.log(4 * np.pi * self.noise)
            out = out + (strict * pair).sum(axis=(-2, -1))
        return out

    def g_out(self, y, omega, V):
        r"""``g_ab = (ybar_ab - omega_ab) / (Sigma_ab V + Delta_ab)``, ``ybar = (y + y^T)/2``."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        ybar = (y + xp.swapaxes(y, -1, -2)) / 2
        return (ybar - omega) / self._entry_variances(T, V, xp)

    def fisher(self, q, Q0, T):
        r"""``F_out = T (T + 1) / (V + noise / 2)`` with ``V = Q0 - q`` (``inf`` when noiseless at ``q = Q0``)."""
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        den = V + self.noise / 2
        return math.inf if den == 0 else T * (T + 1) / den

    def output_free_entropy(self, q, Q0, T):
        r"""``Psi_out = sum_{a<=b} -(1/2)(1 + log(2 pi (Sigma_ab V + Delta_ab)))``, exactly.

        With ``noise > 0`` the ``T(T-1)/2`` differences ``y_ab - y_ba`` add
        ``-(1/2)(1 + log(4 pi noise))`` each.
        """
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        var = self._entry_variances(T, V, np)[np.triu_indices(T)]
        if np.any(var == 0):
            return math.inf
        out = float(np.sum(-0.5 * (1 + np.log(2 * math.pi * var))))
        if self.noise > 0:
            out += T * (T - 1) / 2 * (-0.5 * (1 + math.log(4 * math.pi * self.noise)))
        return out

    def generalization_error(self, q, Q0, T):
        r"""``E_gen = (T + 1) V + T noise``: ``(1/T) sum_ab`` of the posterior variance of ``y_ab``."""
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        return (T + 1) * V + T * self.noise
