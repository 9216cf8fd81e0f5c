r"""The cross overlap that GAMP-RIE with one denoiser per layer creates between layers 1 and 2.

At a fixed point of the separable state evolution
(:meth:`~aimlib.channels.DeepAttention.separable_fisher`) the output moment matrix ``F``
(:meth:`~aimlib.channels.DeepAttention.moment_matrix`) hands layer ``l`` the noise
``Delta_l = (F^{-1})_ll/alpha``, the two noises with correlation ``kappa = -F_12/sqrt(F_11 F_22)``
(:func:`~aimlib.priors.correlated.layer_noises`).  Each layer's RIE then leaves residuals whose
cross-covariance is, to first order in ``kappa``,

.. math::  q_{12} = \tfrac1d\mathrm{Tr}(\hat C_1\hat C_2) = \kappa\,
           \frac{\mathrm{mmse}_1\,\mathrm{mmse}_2}{\sqrt{\Delta_1\Delta_2}}

(:func:`~aimlib.priors.correlated.cross_residual`; ``C_l_hat = S_l_hat - E S_l`` the centred
estimates, whose cross overlap is that of the residuals since the teachers are independent).
Centred teachers have ``F_12 = 0`` exactly, hence ``kappa = 0`` and ``q_12 = 0``: the
separable state evolution is their exact one.  This is the prior side only: fed back into the law of the
indices given the estimates, ``q_12`` moves the moments GAMP-RIE measures
(:meth:`~aimlib.channels.DeepAttention.output_moments`, ``cross``), which this state
evolution does not carry (book, chapter "Correlated layers").

Three layers as ``rho -> 0`` at fixed ``alpha_bar = alpha/rho`` (:func:`limit_cross_overlap`): the
noises are ``Delta_l = (F^{-1})_ll/(rho alpha_bar)``, of order ``1/rho``, so the first-order
``q_12`` is ``rho`` times a finite slope, while the errors ``mmse_l`` stay of order one: the law
of the indices given the estimates, hence the channel's moments, move by ``O(rho)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..channels.base import Channel
from ..channels.deep_hardmax import DeepAttention, limit_error
from ..priors.correlated import SINGULAR, cross_residual, layer_noises
from .fixed_point import cross_terms

__all__ = ["CrossOverlap", "cross_overlap", "LimitCross", "limit_cross_overlap"]


@dataclass(frozen=True)
class CrossOverlap:
    """The noises of GAMP-RIE's layers 1 and 2 at a separable fixed point, and the cross overlap they create.

    Attributes
    ----------
    kappa : float
        Correlation of the two layers' noises, ``-F_12/sqrt(F_11 F_22)``.
    deltas : tuple
        The noises ``(Delta_1, Delta_2)`` (``inf`` at ``alpha = 0`` and where ``kappa = -1``).
    q_12 : float
        The centred estimates' cross overlap to first order in ``kappa``.
    """

    kappa: float
    deltas: tuple
    q_12: float


def cross_overlap(alpha: float, q, mmse, channel, priors, T: int = 2) -> CrossOverlap:
    """The :class:`CrossOverlap` of layers 1 and 2 at the separable fixed point ``(q, mmse)`` at ``alpha``.

    ``priors`` are the teachers' priors (their ``mean_square`` is the known part each layer's
    estimate shares); ``channel`` a :class:`~aimlib.channels.DeepAttention` of two layers, or of
    three with centred teachers, whose ``F_13 = F_23 = 0`` leave layers 1 and 2 the one
    correlated pair (their noises come from the upper-left block of ``F``).  Where that block is
    singular, and at ``alpha = 0``, both noises are infinite, each estimate is its prior mean, and
    ``q_12 = 0``; three layers at ``lambda = 0`` come close (their outputs carry one combination
    of the two matrices only, ``kappa = -1`` exactly; the tables give ``1 - kappa^2 = 1e-3``, noises
    near ``1e4`` and ``|q_12| < 1e-4``).  The first order in ``kappa`` is within a few per cent
    for ``|kappa| <= 0.5`` and 12 % low at ``kappa = -0.9`` (book, chapter "Correlated layers").

    Parameters
    ----------
    alpha : float
        Sample complexity, ``>= 0``.
    q, mmse : sequences of two or three floats
        The layers' overlaps and errors at the fixed point (``SEResult.q``, ``SEResult.mmse``).
    channel : DeepAttention
        Two layers, or three with centred teachers (``T = 2``).
    priors : sequence of Priors
        One per layer.
    T : int
        Tokens per sequence (``2``).

    Returns
    -------
    CrossOverlap
    """
    alpha = v.nonnegative("alpha", alpha)
    layers = channel.n_indices if isinstance(channel, Channel) else None
    if layers not in (2, 3) or len(priors) != layers:
        raise ValueError(f"cross_overlap: two or three layers with one prior each, got {channel!r} and "
                         f"{len(priors)} priors")
    Q0 = tuple(a + b for a, b in zip(q, mmse))
    if cross_terms(channel, priors):
        F = channel.moment_matrix(tuple(q), Q0, T, tuple(p.mean_square() for p in priors))
    else:                                       # centred teachers: F_12 = 0 exactly (the layer-2 sign flip)
        F = np.diag(channel.fisher(tuple(q), Q0, T))
    F = F[:2, :2]
    kappa = float(-F[0, 1] / math.sqrt(F[0, 0] * F[1, 1]))
    if alpha == 0 or 1 - kappa * kappa <= SINGULAR:
        return CrossOverlap(kappa, (math.inf, math.inf), 0.0)
    d1, d2, kappa = layer_noises(F, alpha)
    return CrossOverlap(kappa, (d1, d2), cross_residual(mmse[:2], (d1, d2), kappa))


@dataclass(frozen=True)
class LimitCross:
    """Three layers' first-order cross overlap in the ``rho -> 0`` limit (:func:`limit_cross_overlap`).

    Attributes
    ----------
    alpha_bar : float
    mmse : tuple
        The three errors ``E_l`` of the limit state evolution (:func:`~aimlib.channels.deep_hardmax.limit_error`).
    kappa : float
        Correlation of the noises of layers 1 and 2.
    slope : float
        ``lim q_12 / rho`` of :func:`cross_overlap` at ``alpha = rho alpha_bar``.
    """

    alpha_bar: float
    mmse: tuple
    kappa: float
    slope: float


def limit_cross_overlap(alpha_bar: float, c: float = 0.5) -> LimitCross:
    r"""The first-order cross overlap of three hardmax layers (centred teachers) divided by ``rho``, as ``rho -> 0``.

    At ``alpha = rho alpha_bar`` the errors tend to those of the limit map, ``E_l``, and ``q_l -> 1 - E_l``,
    ``Q0 -> 1``; the moment matrix is ``F = F~(lambda)/sqrt(E E^T)``, ``lambda_l = (1 - E_l)/E_l``, so
    ``rho Delta_l -> (F^{-1})_ll / alpha_bar`` and

    .. math::  \frac{q_{12}}{\rho} \to \kappa\,\frac{E_1E_2\,\bar\alpha}{\sqrt{(F^{-1})_{11}(F^{-1})_{22}}},

    finite: ``q_12 = O(rho)`` while ``E_l = O(1)``.  Where layers 1 and 2 are uninformed
    (``E_1 = E_2 = 1``) this is ``-alpha_bar F~_12 (1 - theta_12^2)``; below the layer-3 onset the
    tables' ``1 - theta_12^2 = 2e-3`` leave it near ``-1e-3 alpha_bar`` instead of 0.

    Parameters
    ----------
    alpha_bar : float
        ``alpha / rho``, ``> 0``.
    c : float
        Residual strength (:class:`~aimlib.channels.DeepAttention`).

    Returns
    -------
    LimitCross
    """
    ch = DeepAttention(c, layers=3)
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    E = limit_error(alpha_bar, ch.c, layers=3)
    F = ch.moment_matrix(tuple(1.0 - E), (1.0,) * 3, 2, (0.0,) * 3)[:2, :2]
    kappa = float(-F[0, 1] / math.sqrt(F[0, 0] * F[1, 1]))
    if 1 - kappa * kappa <= SINGULAR:
        return LimitCross(alpha_bar, tuple(map(float, E)), kappa, 0.0)
    d1, d2, kappa = layer_noises(F, alpha_bar)
    return LimitCross(alpha_bar, tuple(map(float, E)), kappa, cross_residual(E[:2], (d1, d2), kappa))
