r"""The perfect-recovery threshold of noiseless linear-type channels, from the prior's MMSE."""
from __future__ import annotations

from .. import _validate as v
from ..channels import make_channel
from ..priors import make_priors

__all__ = ["perfect_recovery_threshold"]


def perfect_recovery_threshold(rho, T: int, channel="softmax") -> float:
    r"""The perfect-recovery threshold ``alpha_PR`` of a noiseless linear-type channel.

    ``E_S = 0`` iff ``alpha_bar = k alpha >= lim_{Delta->0} mmse_S(Delta)/Delta``:
    the fixed point ``V = mmse_S(V/alpha_bar)`` leaves 0 when the slope of
    ``mmse_S`` at the origin equals ``alpha_bar``.  The slope is the prior's
    :meth:`~aimlib.priors.base.Prior.zero_slope`, computed from its MMSE, not typed in;
    for the Wishart prior it equals the fraction of degrees of freedom of a
    rank-``rho d`` symmetric matrix, ``2 rho - rho^2`` for ``rho < 1`` and ``1`` for ``rho >= 1``.

    Parameters
    ----------
    rho : float or Prior
        Width ratio in ``RHO_RANGE`` (``inf``: the Gaussian prior, slope 1), or a prior
        (:func:`aimlib.priors.make_priors`: the channel's family).
    T : int
        Sequence length, ``>= 2`` (``T = 1`` carries no measurement).
    channel : str or Channel
        A noiseless softmax (``k = T^2+T-2``), linear (``k = T(T+1)``) or untied softmax (``k = T^2-T``,
        a width ratio naming :class:`~aimlib.priors.Rectangular`: the counting threshold) channel.
    """
    T = v.integer("T", T, minimum=2)
    ch = make_channel(channel)
    prior = make_priors(ch, rho)[0]
    k = ch.linear_k(T)
    if k is None:
        raise ValueError(f"channel must be a noiseless softmax or linear channel here "
                         f"(F_out = k/V), got {ch!r}")
    return prior.zero_slope() / k
