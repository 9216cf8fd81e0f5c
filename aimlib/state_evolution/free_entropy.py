r"""The replica-symmetric free entropy and the Bayes-optimal generalization error.

.. math::

    \Phi(q, \hat q) = -\frac{q \hat q}{4} + \psi_S(\hat q) + \alpha\, \Psi_{\rm out}(q),
    \qquad
    \psi_S(\hat q) = \frac14 \int_0^{\hat q} \bigl(Q_0 - \mathrm{mmse}_S(1/s)\bigr)\, ds ,

with ``Psi_out(q) = E log Z_out`` the channel's
:meth:`~aimlib.channels.base.Channel.output_free_entropy`.  Its stationary points
are the SE fixed points; among several, the largest ``Phi`` is the Bayes-optimal one.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from .._lazy import LazyModule
from ..channels import make_channel
from ..priors import make_prior, make_priors
from .fixed_point import check_joint_law

integrate = LazyModule("scipy.integrate")   # loaded on first use: `se` never needs it

__all__ = ["prior_free_entropy", "output_free_entropy", "free_entropy", "generalization_error"]


def _integral_mmse(qhat: float, m) -> float:
    r"""``I(qhat) = int_0^qhat mmse_S(1/s) ds`` (``s < 1`` directly, ``s > 1`` in ``log s``)."""
    if qhat == 0:
        return 0.0
    quad = integrate.quad
    a = min(qhat, 1.0)
    val, _ = quad(lambda s: m(1.0 / s) if s > 0 else 1.0, 0.0, a, epsabs=1e-11, epsrel=1e-10, limit=200)
    if qhat > 1.0:
        val2, _ = quad(lambda t: m(math.exp(-t)) * math.exp(t), 0.0, math.log(qhat),
                       epsabs=1e-11, epsrel=1e-10, limit=200)
        val += val2
    return val


def prior_free_entropy(qhat: float, rho) -> float:
    r"""``psi_S(qhat) = (1/4) int_0^qhat (Q0 - mmse_S(1/s)) ds``.

    The free entropy per ``d^2`` of denoising ``S`` from ``Y = S + Z / sqrt(qhat)``
    (``Z`` GOE), counted from the log-likelihood ratio so that ``psi_S(0) = 0``;
    it is fixed by the I-MMSE relation ``d psi_S / d qhat = q(qhat) / 4`` with
    ``q = (1/d) E Tr(S E[S|Y]) = Q0 - mmse_S(1/qhat)``.  ``rho`` is a width ratio
    or a prior of one sector (:func:`aimlib.priors.make_prior`).
    """
    qhat = v.nonnegative("qhat", qhat)
    prior = _one_sector(make_prior(rho))
    return (prior.second_moment() * qhat - _integral_mmse(qhat, prior.mmse)) / 4.0


def _one_sector(prior):
    """``prior``, if it has one sector (the free entropy of coupled sectors is not implemented)."""
    if len(prior.sectors) != 1:
        raise ValueError(f"the free entropy needs priors of one sector, got {prior!r} (sectors {prior.sectors})")
    return prior


def _channel_and_priors(channel, rho, beta, noise):
    ch = make_channel(channel, beta=beta, noise=noise)
    priors = tuple(_one_sector(p) for p in make_priors(ch, rho))
    check_joint_law(ch, priors)
    return ch, priors


def output_free_entropy(q, channel="softmax", *, T: int = 2, rho=0.5,
                        beta: float | None = None, noise: float | None = None) -> float:
    r"""``Psi_out(q) = E log Z_out(y, omega, Q0 - q)``, up to a constant independent of ``q``.

    Delegates to the channel (closed forms for softmax and linear, ``(1/4) int_0^q F_out``
    otherwise), with ``Q0`` the priors' second moments (``1 + rho`` for the Wishart
    prior); for a channel of ``L`` indices ``q`` and ``rho`` hold ``L`` numbers.

    Parameters
    ----------
    q : float or sequence of ``L`` floats
        Overlap(s), ``0 <= q < Q0``.
    channel, T, rho, beta, noise
        As for :func:`aimlib.state_evolution.solve.solve`.

    Returns
    -------
    float
    """
    T = v.integer("T", T, minimum=2)
    ch, priors = _channel_and_priors(channel, rho, beta, noise)
    Q0 = tuple(p.second_moment() for p in priors)
    return ch.output_free_entropy(q, Q0[0] if len(Q0) == 1 else Q0, T)


def free_entropy(q, qhat, alpha: float, channel="softmax", *, T: int = 2, rho=0.5,
                 beta: float | None = None, noise: float | None = None) -> float:
    r"""The replica-symmetric potential ``Phi = sum_l [-q_l qhat_l/4 + psi_S(qhat_l; rho_l)] + alpha Psi_out(q)``.

    One term per index (``L = 1``: ``Phi(q, qhat) = -q qhat/4 + psi_S(qhat) + alpha
    Psi_out(q)``; for ``L`` indices ``q``, ``qhat`` and ``rho`` hold ``L`` numbers, one
    per teacher, with independent priors).  Evaluable at any ``0 <= q_l < Q0_l``,
    ``qhat_l >= 0``; up to a constant independent of ``(q, qhat)``.

    Parameters
    ----------
    q, qhat : float or sequence of ``L`` floats
        Overlap(s) and conjugate overlap(s) (``qhat >= 0``).
    alpha : float
        Sample complexity, ``>= 0``.
    channel, T, rho, beta, noise
        As for :func:`aimlib.state_evolution.solve.solve` (priors of one sector).

    Returns
    -------
    float
        ``f_RS(q, qhat)``, the book's replica-symmetric free entropy.
    """
    alpha = v.nonnegative("alpha", alpha)
    ch, priors = _channel_and_priors(channel, rho, beta, noise)
    qs, qhats = (np.broadcast_to(np.asarray(x, dtype=float), (len(priors),)) for x in (q, qhat))
    total = 0.0
    for q_l, qhat_l, prior in zip(qs, qhats, priors):
        qhat_l = v.nonnegative("qhat", float(qhat_l))
        total += -q_l * qhat_l / 4.0 + prior_free_entropy(qhat_l, prior)
    q_arg = float(qs[0]) if len(priors) == 1 else tuple(float(x) for x in qs)
    return total + alpha * output_free_entropy(q_arg, ch, T=T, rho=priors)


def generalization_error(q: float, Q0: float, T: int, channel="softmax", *, beta: float | None = None,
                         noise: float | None = None, **kw) -> float:
    r"""Bayes-optimal test error ``E_gen = (1/T) E ||y_hat - y||_F^2`` per sample.

    In the limit a fresh index is ``h ~ N(omega, V Sigma)`` given the data, with
    ``omega ~ N(0, q Sigma)`` and ``V = Q0 - q``; the Bayes predictor is
    ``y_hat = E[f(h) | omega]``, so ``E_gen = (1/T) E_omega tr Cov(f(h) | omega)``,
    computed by the channel (:meth:`~aimlib.channels.base.Channel.generalization_error`;
    ``kw`` are its options, e.g. ``n_qmc`` and ``seed`` for the softmax at ``T >= 3``).
    Label noise adds ``T noise``: the predictor cannot foresee it.

    Parameters
    ----------
    q : float
        Overlap at the fixed point, ``0 <= q <= Q0``.
    Q0 : float
        The prior's second moment (``1 + rho`` for the Wishart prior).
    T : int
        Tokens per sequence.
    channel, beta, noise
        As for :func:`aimlib.state_evolution.solve.solve`.
    **kw
        The channel's options.

    Returns
    -------
    float
    """
    return make_channel(channel, beta=beta, noise=noise).generalization_error(q, Q0, T, **kw)
