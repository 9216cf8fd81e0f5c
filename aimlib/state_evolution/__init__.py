r"""State evolution (SE) of the attention-indexed model: the Bayes-optimal error.

The replica-symmetric free entropy (book, chapter "The replica computation")
has the stationary points

.. math::

    \hat q_l = \alpha F_l(q), \qquad q_l = Q_{0,l} - \mathrm{mmse}_S(1/\hat q_l; \rho_l),

one overlap ``q_l`` per index matrix (``L = 1`` for one attention layer), with
``Q0`` the prior's second moment (``1 + rho`` for the Wishart prior), ``mmse_S``
the prior's denoising MMSE (:mod:`aimlib.priors`; :func:`aimlib.rmt.mmse` for the
Wishart prior) and ``F_l`` the channel's output function
(:meth:`aimlib.channels.base.Channel.fisher`).  A prior with two sectors (a square
``S``) carries one overlap per sector.  The estimation error is
``E_S = (1/d)||S_hat - S||_F^2 = Q0 - q = V``.

Every function takes the channel and the prior(s) (``rho``: a width ratio, a
:class:`~aimlib.priors.base.Prior`, or one per index).  Modules:
:mod:`~.threshold` (perfect recovery), :mod:`~.closed` (the scalar root find of
noiseless linear-type channels, ``F_out = k/V``), :mod:`~.fixed_point`
(iteration, one overlap per component; for layers that share a known part, GAMP-RIE's
state evolution and the oracle's), :mod:`~.solve` (one point or a curve),
:mod:`~.free_entropy` (the potential and the generalization error), :mod:`~.cross` (the cross
overlap GAMP-RIE creates at a separable fixed point, and its ``rho -> 0`` limit for three layers),
:mod:`~.cross_fixed_point` (its two-layer state evolution with the cross overlap and the mixing
carried, to a fixed point of its own), :mod:`~.bayes_pair` (the coupled Bayes-optimal state
evolution of two layers: a ``2 x 2`` overlap, the joint denoiser sampled).
"""
from .cross import CrossOverlap, LimitCross, cross_overlap, limit_cross_overlap
from .fixed_point import PREDICTIONS, SEResult, fixed_point, oracle_fixed_point
from .free_entropy import free_entropy, generalization_error, output_free_entropy, prior_free_entropy
from .solve import SECurve, curve, solve
from .threshold import perfect_recovery_threshold

__all__ = [
    "SEResult", "SECurve", "PREDICTIONS", "CrossOverlap", "cross_overlap", "LimitCross", "limit_cross_overlap",
    "solve", "fixed_point", "oracle_fixed_point",
    "curve", "perfect_recovery_threshold", "prior_free_entropy",
    "output_free_entropy", "free_entropy", "generalization_error",
]
