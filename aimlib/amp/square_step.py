r"""GAMP-RIE's channel step for a square (untied) ``S``: two sectors, one noise each.

Book, chapter "Untied key and query: algorithms and the exact error",
section "GAMP for untied key and query".  Each sample
gives ``T^2`` indices ``z_ab = <G_ab, S>``, ``G_ab = (x_a x_b^T - delta_ab I)/sqrt(d)``.
With ``V = (V_A, V_B)`` the predicted errors of the symmetric and antisymmetric
parts of the estimate and ``V_ons`` their Onsager terms, for every sample

.. math::

    \omega = h(\hat S) - C(V_{\rm ons})\, g_{\rm prev}, \qquad g = g_{\rm out}(y, \omega, V),

``C(V) = 2 V_A Pi_sym + 2 V_B Pi_anti`` the index covariance and ``h`` the
non-symmetric indices (the square :class:`aimlib.index_map.IndexMap`); then the
backward step sees each part of ``S`` through its own noise ``Delta_s``:

.. math::

    R = \hat S + \sum_{s\in\{A, B\}} \frac{\Delta_s}{d}\,\Pi_s\, h^*(g), \qquad
    h^*(g) = \frac1{\sqrt d}\sum_\mu \big(X_\mu^\top g_\mu X_\mu - \operatorname{tr}(g_\mu) I\big)

(the adjoint of the square index operator, :class:`aimlib.index_map.IndexMap`; the chunk loop is
the symmetric step's, :func:`aimlib.amp.steps.message_pass`).

The channel (:class:`aimlib.channels.UntiedSoftmax`) provides ``g_out``, the
covariance (``onsager_covariance``) and the noises ``Delta_s = 1/(alpha F_s(V))``
(``effective_noises``); the noise of each part of ``R`` measured on the messages,
``noise_s = Delta_s^2 2 alpha mean_mu ||Pi_s g_mu||^2``, equals ``Delta_s`` when
``g_out`` is given the actual errors and goes to the prior step (the tuned
denoiser of :class:`aimlib.priors.Rectangular` uses it).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConvergenceError
from ..priors.gaussian import matrix_parts
from .steps import message_pass

__all__ = ["square_channel_step"]


def _sums(p, S_hat, V, V_ons, g_prev, g_new, t):
    """The chunk loop (:func:`aimlib.amp.steps.message_pass`) for the one square layer.

    Returns ``(H, (sq_A, sq))``: ``h^*(g) = (1/sqrt d) sum_mu (X_mu^T g_mu X_mu - tr(g_mu) I)``
    (square, not symmetrised) and ``(sum ||Pi_sym g||^2, sum ||g||^2)``.
    """
    xp, T, dt = p.xp, p.T, p.dtype
    C = xp.asarray(p.channel.onsager_covariance(V_ons, T), dtype=dt)

    def omega(h, gp):
        c = h.shape[0]
        return h - (gp.reshape(c, T * T) @ C).reshape(c, 1, T, T)

    def moments(g):
        g_sym = (g + xp.swapaxes(g, -1, -2)) / 2
        return np.array([float(xp.sum(g_sym * g_sym)), float(xp.sum(g * g))])

    B, squares, tr = message_pass(p, [S_hat], omega, lambda y, om: p.channel.g_out(y, om[:, 0], V)[:, None],
                                  moments, None, g_prev, g_new, t)
    return p.index.from_sums(B[0], tr[0]), squares


def square_channel_step(p, S_hat, V, V_ons, g_prev, g_new, t):
    r"""One channel step of GAMP-RIE for square priors: ``(deltas, R, noise, None)``, lists over the one layer.

    Parameters
    ----------
    p : aimlib.amp.problem.Problem
        The validated run (``xp, X, y, channel, n, T, d, dtype, chunk_size, damping, damp_g``);
        ``p.channel`` reads one index matrix per sample and provides ``g_out``,
        ``onsager_covariance`` and ``effective_noises`` (:class:`aimlib.channels.UntiedSoftmax`).
    S_hat : list of one (d, d) array
        The estimate (not symmetric).
    V, V_ons : list of one pair
        Predicted errors ``(V_A, V_B)`` (``g_out``'s) and Onsager terms of the two parts.
    g_prev, g_new : arrays (n, 1, T, T)
        The last (damped) channel outputs; the new ones are written to ``g_new``
        (damped with ``g_prev`` when ``p.damp_g`` and ``t > 1``).
    t : int
        The iteration, from 1.

    Returns
    -------
    deltas : list of one pair
        ``(Delta_A, Delta_B)``, the noises of the parts of ``R`` (module docstring).
    R : list of one (d, d) array
        The effective observation.
    noise : list of one pair
        The noises of the parts of ``R`` measured on the messages.
    None
        One layer: no covariance between layers (:func:`aimlib.amp.steps.onsager_rows`).
    """
    if len(S_hat) != 1:
        raise ValueError(f"the square channel step reads one index matrix per sample, got {len(S_hat)}")
    xp, n, d, T = p.xp, p.n, p.d, p.T
    (S, Vl, Ol) = S_hat[0], tuple(V[0]), tuple(V_ons[0])
    deltas = p.channel.effective_noises(Vl, T, n / d**2)
    H, (sq_A, sq) = _sums(p, S, Vl, Ol, g_prev, g_new, t)
    (A, B), (hA, hB) = matrix_parts(S), matrix_parts(H)
    sq_A, sq = sq_A / n, sq / n
    noise = tuple(dl * dl * 2 * n / d**2 * q for dl, q in zip(deltas, (sq_A, sq - sq_A)))
    R = A + deltas[0] / d * hA + B + deltas[1] / d * hB
    if not (bool(xp.all(xp.isfinite(R))) and all(map(math.isfinite, noise))):
        raise ConvergenceError("the effective observation R is not finite")
    return [deltas], [R], [noise], None
