r"""State evolution of the untied noiseless softmax channel: the generic one, with two sectors.

Split ``S = A + B`` into its symmetric and antisymmetric parts, with errors
``V_A = (1/d)||A - A_hat||^2`` and ``V_B = (1/d)||B - B_hat||^2``.  The channel
(:class:`aimlib.channels.UntiedSoftmax`) sees each part through a Gaussian channel
of its own noise ``Delta_s = 1/(alpha F_s)``,

.. math::  F_A = \frac{k_1}{V_A} + \frac{k_3}{V_A + V_B}, \qquad F_B = \frac{k_2}{V_B} + \frac{k_3}{V_A + V_B},

``k_1 = T(T-1)/2``, ``k_2 = (T-1)(T-2)/2``, ``k_3 = T - 1``, and the prior
(:class:`aimlib.priors.Gaussian` with ``symmetric=False``, or
:class:`aimlib.priors.Rectangular`) returns one error per part
(:meth:`~aimlib.priors.base.Prior.sector_mmse`): :func:`solve_sectors` is
:func:`aimlib.state_evolution.fixed_point` with the two, whose conjugates are
``qhat_s = alpha F_s = 1/Delta_s`` (the one convention of :mod:`aimlib.channels.base`, which
derives the factor 2 between these and the book's replica conjugates ``2 alpha F_s``).
The channel is anisotropic: at ``V_A = V_B`` the two parts get
``(T^2 - 1)/2`` and ``(T - 1)^2/2`` effective measurements per sample.  By Euler's
identity ``V_A F_A + V_B F_B = T^2 - T`` at every ratio, which with
the low-noise identity of the prior, ``sum_s mmse_s/Delta_s -> rho (2 - rho)``, puts
the perfect-recovery threshold of the two-overlap SE at the counting threshold.

For ``S = Q K^T/sqrt(r d)`` the Bayes-optimal two-noise MMSE has no formula
(:mod:`aimlib.untied.posterior` samples it).  :func:`solve_untied` solves the
isotropic closure ``V = mmse_rect(V / alpha_bar)``, ``alpha_bar = (T^2 - T) alpha``
(both parts at the mean ratio), whose perfect-recovery threshold is the counting
threshold.  :func:`bracket_untied` bounds the exact fixed point from both sides:
the SE map is monotone, and giving both parts the larger (smaller) of the two
ratios can only lower (raise) the error, so ``alpha_bar`` between
``(T - 1)^2 alpha`` and ``(T^2 - 1) alpha`` brackets it.  The upper end is the state
evolution of the equalised denoiser, ``solve_sectors(alpha, T, Rectangular(rho))``.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..channels.untied_softmax import UntiedSoftmax, sector_k
from ..priors import Gaussian, make_prior
from ..state_evolution.closed import solve_closed
from ..state_evolution.fixed_point import fixed_point
from .model import measurements_per_sample, unknowns_fraction

__all__ = ["solve_sectors", "solve_untied",
           "bracket_untied", "curve_untied", "untied_threshold"]

#: a total error that settles below this is perfect recovery (see :func:`solve_sectors`: the float64
#: resolution of the overlaps ``q_s = 1/2 - V_s`` stalls the decay near ``1e-12``; the state evolution's
#: floor, above GAMP's ``V_FLOOR``, which is a run's)
PERFECT_BELOW = 1e-9


def _square_prior(prior):
    """``prior`` as a square prior (None: the square Gaussian one; a width ratio: ``Rectangular(rho)``)."""
    prior = Gaussian(symmetric=False) if prior is None else make_prior(prior, "rectangular")
    if prior.symmetric:
        raise ValueError(f"prior must be a prior of square S (two sectors), got {prior!r}")
    return prior


def solve_sectors(alpha: float, T: int, prior=None, *, damping: float = 0.5, tol: float = 1e-12,
                  max_iter: int = 100_000, on_max_iter: str = "raise") -> tuple:
    r"""The two-overlap SE fixed point ``V_s = mmse_s(Delta_A, Delta_B)`` from ``V_A = V_B = 1/2``.

    :func:`aimlib.state_evolution.fixed_point` with :class:`~aimlib.channels.UntiedSoftmax`
    and ``prior``: None for the square Gaussian prior (exact, Bayes-optimal), a
    square prior, or a width ratio (:class:`~aimlib.priors.Rectangular`: the SE of
    the equalised denoiser, the upper end of :func:`bracket_untied`).  Returns
    ``(V_A, V_B)``, or ``(0, 0)`` (perfect recovery) once their sum falls below ``tol``
    or settles below ``PERFECT_BELOW``.  ``tol`` bounds the change per iteration
    relative to the error ``V_A + V_B``: the generic iteration's absolute ``tol`` is
    refined to ``tol (V_A + V_B)`` from where it stopped until ``V`` settles (past the
    threshold the iteration decays geometrically to 0, and an absolute ``tol`` would
    stop it short).  The generic iteration carries ``q_s = 1/2 - V_s``, whose float64
    resolution ``1e-16`` stalls that decay (at ``3e-12`` for ``alpha`` 0.2 % past the
    threshold), hence ``PERFECT_BELOW``; a genuine fixed point that small lies within
    ``1e-6`` (relative) of the threshold.
    """
    prior, kw = _square_prior(prior), dict(damping=damping, max_iter=max_iter, on_max_iter=on_max_iter)
    V = fixed_point(alpha, UntiedSoftmax(), T=T, rho=prior, tol=v.positive("tol", tol), **kw).mmse
    while sum(V) >= max(tol, PERFECT_BELOW):
        last, V = V, fixed_point(alpha, UntiedSoftmax(), T=T, rho=prior, tol=tol * sum(V), init=V, **kw).mmse
        if sum(V) > 0.5 * sum(last):      # settled at a positive error
            break
    return (0.0, 0.0) if sum(V) < max(tol, PERFECT_BELOW) else tuple(V)


def untied_threshold(rho: float, T: int) -> float:
    r"""Perfect recovery of the isotropic closure: ``alpha_bar = lim mmse_rect(Delta)/Delta = rho(2 - rho)``.

    Equal to :func:`~aimlib.untied.count_threshold` (``rho (2 - rho)/(T^2 - T)``), and to
    the threshold of the two-overlap SE (the Euler identity of the module docstring).
    """
    return unknowns_fraction(rho) / measurements_per_sample(T)


def _closure(abar: float, rho: float, tol: float = 1e-10) -> float:
    """The fixed point ``V = mmse(V / abar)`` of the prior of ``rho`` reached from ``V = 1`` (0 from its slope on)."""
    prior = make_prior(rho, "rectangular")
    return float(solve_closed(abar, prior.mmse, prior.zero_slope(), None, tol)[0])


def solve_untied(alpha: float, T: int, rho: float, *, tol: float = 1e-10):
    r"""Fixed point of the isotropic closure ``V = mmse_rect(V / alpha_bar)``, ``alpha_bar = (T^2 - T) alpha``.

    Returns ``(mmse, q)`` with ``q = Q0 - mmse``, ``Q0 = 1``.  Exact for the
    Gaussian prior (``rho = inf``: ``1 - alpha_bar``, as :func:`solve_sectors`); for
    finite ``rho`` an approximation that replaces the two sector ratios by their
    mean (see the module).  ``mmse = 0`` from :func:`count_threshold` on.
    """
    alpha = v.nonnegative("alpha", alpha)
    rho = v.rho(rho, allow_inf=True)
    V = _closure(measurements_per_sample(T) * alpha, rho, tol)
    return V, 1.0 - V


def bracket_untied(alpha: float, T: int, rho: float) -> tuple:
    r"""Lower and upper bounds on the exact two-overlap SE error reached from the prior.

    The fixed points of ``V = mmse_rect(V / ((T^2 - 1) alpha))`` and
    ``V = mmse_rect(V / ((T - 1)^2 alpha))``: both parts seen at the larger,
    respectively the smaller, of the two ratios ``qhat_A >= qhat_B`` at
    ``V_A = V_B`` (:func:`aimlib.channels.untied_softmax.sector_k`; book, proposition
    "Bracketing the untied state evolution").  The isotropic closure
    :func:`solve_untied` lies in between.
    """
    alpha = v.nonnegative("alpha", alpha)
    rho = v.rho(rho, allow_inf=True)
    T = v.integer("T", T, minimum=2)
    k_A, k_B = sector_k(T)
    return _closure(k_A * alpha, rho), _closure(k_B * alpha, rho)


def curve_untied(alphas, T: int, rho: float) -> np.ndarray:
    """:func:`solve_untied`'s ``mmse`` along ``alphas``."""
    return np.array([solve_untied(float(a), T, rho)[0] for a in np.atleast_1d(alphas)])
