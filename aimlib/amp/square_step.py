r"""GAMP-RIE's channel step for a square (untied) ``S``: two sectors, one noise each.

Book, chapter "Untied key and query: algorithms and the exact error",
section "GAMP for untied key and query".  Each sample
gives ``T^2`` indices ``z_ab = <G_ab, S>``, ``G_ab = (x_a x_b^T - delta_ab I)/sqrt(d)``.
With ``V = (V_A, V_B)`` the predicted errors of the symmetric and antisymmetric
parts of the estimate and ``V_ons`` their Onsager terms, for every sample

.. math::

    \omega = h(\hat S) - C(V_{\rm ons})\, g_{\rm prev}, \qquad g = g_{\rm out}(y, \omega, V),

``C(V) = 2 V_A Pi_sym + 2 V_B Pi_anti`` the index covariance of the channel contract
(:meth:`aimlib.channels.base.Channel.index_fluctuation`) and ``h`` the non-symmetric
indices (the square :class:`aimlib.index_map.IndexMap`); then the backward step sees
each part of ``S`` through its own noise ``Delta_s``:

.. math::

    R = \hat S + \sum_{s\in\{A, B\}} \frac{\Delta_s}{d}\,\Pi_s\, h^*(g), \qquad
    h^*(g) = \frac1{\sqrt d}\sum_\mu \big(X_\mu^\top g_\mu X_\mu - \operatorname{tr}(g_\mu) I\big)

(the adjoint of the square index operator; the chunk loop is the symmetric step's,
:func:`aimlib.amp.steps.message_pass`).

The noises.  ``Delta_s = 1/(alpha F_s(q))`` at ``q = Q0 - V`` (``Q0`` the prior's
:meth:`~aimlib.priors.base.Prior.sector_moments`, ``alpha = n/d^2``): the contract's
:meth:`~aimlib.channels.base.Channel.sector_noises`, the state evolution's noise at the
predicted errors.  The symmetric step (:func:`aimlib.amp.steps.channel_step`) measures
its noise on the messages instead, ``1/F_hat`` with ``F_hat = (1/d^2) sum_mu`` of the
contract's :meth:`~aimlib.channels.base.Channel.fisher_terms`, because GAMP's coefficient
of ``S - S_hat`` in ``h^*(g)``, ``-sum_mu dg/domega``, is not in the contract and the
Nishimori identity ``-E[dg/domega] = E[g g^T]`` replaces it by the messages' moments.
The square step needs no replacement: ``g = Gamma (z0 - omega)`` with ``-dg/domega =
Gamma(V)`` the same on every sample, and ``alpha F_s(Q0 - V) = 2 alpha Tr(Gamma Pi_s)``
(:func:`aimlib.channels.untied_softmax.sector_deltas`) is that coefficient exactly,
so ``R`` is ``S`` plus noise also where ``V`` is not the actual error (the measured
moments would scale part ``s`` of ``S - S_hat`` in ``R`` by ``F_s(Q0 - V)/F_hat_s``, which is
1 only in the mean and at the actual errors; measured noises instead, ``T = 2``, ``d = 100``,
``alpha = 0.3``, seed 0: the Gaussian prior's errors agree to ``1e-4`` but ``V_A`` falls 9 %
below the measured ``E_A`` instead of 2 %, after 76 iterations instead of 69).  The
messages still measure each part's noise, ``noise_s = Delta_s^2 F_hat_s``, which is
``Delta_s`` when ``g_out`` is given the actual errors; it goes to the prior step (the tuned
denoiser of :class:`aimlib.priors.Rectangular` uses it).
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import to_host
from ..errors import ConvergenceError
from ..priors.gaussian import matrix_parts
from .steps import message_pass

__all__ = ["square_channel_step", "square_noises"]


def square_noises(p, V) -> tuple:
    r"""``Delta_s = 1/(alpha F_s(Q0 - V))`` per sector (module docstring), ``alpha = n/d^2``.

    ``Q0`` are the prior's sector moments.  The square channel's moments depend on
    the errors only (``-dg/domega = Gamma(V)``, module docstring), so a predicted
    error above its sector's moment, which the first iterations of a damped run
    can reach, is evaluated with that moment raised to it (``q_s = 0``), as GAMP's
    coefficient at those errors.
    """
    Q0 = tuple(max(float(Qs), float(Vs)) for Vs, Qs in zip(V, p.priors[0].sector_moments()))
    q = tuple(Qs - Vs for Vs, Qs in zip(V, Q0))
    return p.channel.sector_noises(q, Q0, p.T, p.n / p.d**2)


def _sums(p, S_hat, V, V_ons, g_prev, g_new, t):
    """The chunk loop (:func:`aimlib.amp.steps.message_pass`) for the one square layer.

    Returns ``(H, F)``: ``h^*(g) = (1/sqrt d) sum_mu (X_mu^T g_mu X_mu - tr(g_mu) I)``
    (square, not symmetrised) and ``sum_mu 2 ||Pi_s g_mu||_F^2`` per sector
    (:meth:`~aimlib.channels.base.Channel.fisher_terms`).
    """
    xp, T, dt, channel = p.xp, p.T, p.dtype, p.channel
    C = xp.asarray(channel.index_fluctuation(V_ons, T), dtype=dt)

    def omega(h, gp):
        c = h.shape[0]
        return h - (gp.reshape(c, T * T) @ C).reshape(c, 1, T, T)

    def moments(g):
        return to_host(xp.sum(channel.fisher_terms(g[:, 0]), axis=0))

    B, terms, tr = message_pass(p, [S_hat], omega, lambda y, om: channel.g_out(y, om[:, 0], V)[:, None],
                                moments, None, g_prev, g_new, t)
    return p.index.from_sums(B[0], tr[0]), terms


def square_channel_step(p, S_hat, V, V_ons, g_prev, g_new, t):
    r"""One channel step of GAMP-RIE for square priors: ``(deltas, R, noise, None)``, lists over the one layer.

    Parameters
    ----------
    p : aimlib.amp.problem.Problem
        The validated run (``xp, X, y, channel, priors, n, T, d, dtype, index, damping, damp_g``);
        ``p.channel`` reads one square index matrix per sample (``channel.square``) and
        provides, through the contract of :mod:`aimlib.channels.base`, ``g_out``,
        ``index_fluctuation``, ``fisher_terms`` and ``sector_noises``.
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
        ``(Delta_A, Delta_B)``, the noises of the parts of ``R`` (:func:`square_noises`).
    R : list of one (d, d) array
        The effective observation.
    noise : list of one pair
        The noises of the parts of ``R`` measured on the messages, ``Delta_s^2 F_hat_s``.
    None
        One layer: no covariance between layers (:func:`aimlib.amp.steps.onsager_rows`).
    """
    if len(S_hat) != 1:
        raise ValueError(f"the square channel step reads one index matrix per sample, got {len(S_hat)}")
    xp, d = p.xp, p.d
    (S, Vl, Ol) = S_hat[0], tuple(V[0]), tuple(V_ons[0])
    deltas = square_noises(p, Vl)
    H, terms = _sums(p, S, Vl, Ol, g_prev, g_new, t)
    (A, B), (hA, hB) = matrix_parts(S), matrix_parts(H)
    noise = tuple(dl * dl * float(F) / d**2 for dl, F in zip(deltas, np.asarray(terms)))
    R = A + deltas[0] / d * hA + B + deltas[1] / d * hB
    if not (bool(xp.all(xp.isfinite(R))) and all(map(math.isfinite, noise))):
        raise ConvergenceError("the effective observation R is not finite")
    return [deltas], [R], [noise], None
