r"""GAMP-RIE's channel step for a square (untied) ``S``: two sectors, one noise each.

Book, chapter "Untied key and query: algorithms and the exact error",
section "GAMP for untied key and query".  Each sample
gives ``T^2`` indices ``z_ab = <G_ab, S>``, ``G_ab = (x_a x_b^T - delta_ab I)/sqrt(d)``.
With ``V = (V_A, V_B)`` the predicted errors of the symmetric and antisymmetric
parts of the estimate and ``V_ons`` their Onsager terms, for every sample

.. math::

    \omega = h(\hat S) - C(V_{\rm ons})\, g_{\rm prev}, \qquad g = g_{\rm out}(y, \omega, V),

``C(V) = 2 V_A Pi_sym + 2 V_B Pi_anti`` the index covariance and ``h`` the
non-symmetric indices (:func:`aimlib.model.indices_from_factors`); then the
backward step sees each part of ``S`` through its own noise ``Delta_s``:

.. math::

    R = \hat S + \sum_{s\in\{A, B\}} \frac{\Delta_s}{d}\,\Pi_s\Big[\frac1{\sqrt d}\sum_\mu
        \big(X_\mu^\top g_\mu X_\mu - \operatorname{tr}(g_\mu) I\big)\Big].

The channel (:class:`aimlib.channels.UntiedSoftmax`) provides ``g_out``, the
covariance (``onsager_covariance``) and the noises ``Delta_s = 1/(alpha F_s(V))``
(``effective_noises``); the noise of each part of ``R`` measured on the messages,
``noise_s = Delta_s^2 2 alpha mean_mu ||Pi_s g_mu||^2``, equals ``Delta_s`` when
``g_out`` is given the actual errors and goes to the prior step (the tuned
denoiser of :class:`aimlib.priors.Rectangular` uses it).
"""
from __future__ import annotations

import math

from ..errors import ConvergenceError
from ..model import indices_from_factors
from ..priors.gaussian import matrix_parts

__all__ = ["square_channel_step"]


def _pass(p, S_hat, V, V_ons, g_prev, g_new, t):
    """Forward, ``g_out`` and the backward sums over all samples, in chunks, for one layer.

    Returns ``(back, trace, squares)``: ``sum_mu X_mu^T g_mu X_mu`` (``d x d``),
    ``sum_mu tr(g_mu)`` and ``(sum ||Pi_sym g||^2, sum ||g||^2)``.
    """
    xp, X, d, T, dt = p.xp, p.X, p.d, p.T, p.dtype
    C = xp.asarray(p.channel.onsager_covariance(V_ons, T), dtype=dt)
    back, trace, sq_A, sq = xp.zeros((d, d), dtype=dt), 0.0, 0.0, 0.0
    for s in range(0, p.n, p.chunk_size):
        Xc = X[s:s + p.chunk_size]
        c = Xc.shape[0]
        onsager = (g_prev[s:s + c, 0].reshape(c, T * T) @ C).reshape(c, T, T)
        h = indices_from_factors((Xc.reshape(c * T, d) @ S_hat).reshape(c, T, d), Xc, xp.trace(S_hat),
                                 math.sqrt(d))
        g = xp.asarray(p.channel.g_out(p.y[s:s + c], h - onsager, V), dtype=dt)
        if p.damp_g and t > 1:
            g = (1.0 - p.damping) * g + p.damping * g_prev[s:s + c, 0]
        g_new[s:s + c, 0] = g
        back += Xc.reshape(c * T, d).T @ (g @ Xc).reshape(c * T, d)
        trace += float(xp.einsum("naa->", g))
        g_sym = (g + xp.swapaxes(g, 1, 2)) / 2
        sq_A, sq = sq_A + float(xp.sum(g_sym * g_sym)), sq + float(xp.sum(g * g))
    return back, trace, (sq_A, sq)


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
    back, trace, (sq_A, sq) = _pass(p, S, Vl, Ol, g_prev, g_new, t)
    B_all = back - trace * xp.eye(d, dtype=p.dtype)
    (A, B), (bA, bB) = matrix_parts(S), matrix_parts(B_all)
    sq_A, sq = sq_A / n, sq / n
    noise = tuple(dl * dl * 2 * n / d**2 * q for dl, q in zip(deltas, (sq_A, sq - sq_A)))
    R = A + deltas[0] / d**1.5 * bA + B + deltas[1] / d**1.5 * bB
    if not (bool(xp.all(xp.isfinite(R))) and all(map(math.isfinite, noise))):
        raise ConvergenceError("the effective observation R is not finite")
    return [deltas], [R], [noise], None
