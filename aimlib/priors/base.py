r"""The prior contract: what the state evolution, the free entropy and GAMP-RIE ask of a prior.

A prior is the law of one ``d x d`` index matrix ``S`` (book, chapter "Matrix
denoising").  Everything the Bayes-optimal theory needs from it is the scalar
denoising problem

.. math::  R = S + \sqrt{\Delta}\, Z ,

``Z`` the standard noise of the matrix space (GOE for symmetric ``S``, Ginibre
with i.i.d. ``N(0, 1/d)`` entries for square ``S``), whose posterior mean is
the prior's denoiser and whose error per dimension is ``mmse(Delta)``.  A prior
with ``sectors = ('A', 'B')`` (square ``S``: its symmetric and antisymmetric
parts) may be observed with one noise per sector, ``Delta = (Delta_A,
Delta_B)``, and reports one error per sector.

The state evolution runs ``q = Q0 - mmse(1/qhat)`` (:meth:`Prior.sector_mmse`
per sector), the free entropy integrates ``mmse`` (the I-MMSE relation) and
GAMP-RIE calls :meth:`Prior.denoise`; :func:`aimlib.priors.check_prior` checks a
new prior against this contract.
"""
from __future__ import annotations

import math

import numpy as np

from .._validate import DELTA_RANGE

__all__ = ["Prior", "extend_mmse", "aitken_slope"]



class Prior:
    """Base class of the priors on one index matrix ``S`` (see the module docstring).

    Subclasses set ``name``, ``symmetric`` and ``sectors`` and implement
    :meth:`second_moment`, :meth:`mean`, :meth:`sample`, :meth:`_mmse` and
    :meth:`denoise`; the end points of :meth:`mmse` and the zero-noise slope
    come from here.
    """

    name = "prior"
    #: whether ``S`` is symmetric (tied key and query) or a general square matrix
    symmetric = True
    #: the parts of ``S`` that a channel may observe with separate noises
    sectors: tuple = ("S",)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._params()})"

    def _params(self) -> str:
        return ""

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    # ------------------------------------------------------------------ the law of S
    def second_moment(self) -> float:
        r"""``Q0 = lim (1/d) E ||S||_F^2``."""
        raise NotImplementedError

    def sector_moments(self) -> tuple:
        """``Q0`` split over ``sectors`` (one number for a one-sector prior)."""
        return (self.second_moment(),)

    def mean(self, d: int, xp=None, dtype=np.float64):
        """``E[S]`` as a ``(d, d)`` array of the module ``xp`` (default: numpy): the estimate before any data."""
        raise NotImplementedError

    def sample(self, d: int, seed=None, *, xp=None, dtype=np.float64):
        """One draw of ``S`` (``(d, d)``, an array of ``xp``, default: numpy) from the int or Generator ``seed``."""
        raise NotImplementedError

    def draw_numbers(self, d: int) -> int:
        """Float64 numbers :meth:`sample` draws on the host (the memory of one draw): ``d^2`` here."""
        return d * d

    # ------------------------------------------------------------------ the Bayes side
    def _mmse(self, delta: float) -> float:
        """The MMSE at one ``Delta`` inside ``DELTA_RANGE``."""
        raise NotImplementedError

    def mmse(self, delta: float) -> float:
        r"""``mmse(Delta) = lim (1/d) E ||E[S|R] - S||_F^2`` for ``R = S + sqrt(Delta) Z``.

        Exact end points ``mmse(0) = 0`` and ``mmse(inf) = Q0 - ||E S||^2/d``;
        outside ``DELTA_RANGE`` the leading asymptotics (:func:`extend_mmse`).
        """
        return extend_mmse(self._mmse, delta, self.second_moment() - self.mean_square())

    def mean_square(self) -> float:
        """``lim (1/d) ||E S||_F^2``: the part of ``Q0`` known before any data."""
        return 0.0

    def zero_slope(self) -> float:
        r"""``c0 = lim_{Delta -> 0} mmse(Delta)/Delta``: the fraction of the ``d^2`` directions ``S`` occupies."""
        return aitken_slope(self.mmse)

    def sector_mmse(self, deltas) -> tuple:
        """The state evolution's prior side: one error per sector at the noises ``deltas``.

        A one-sector prior returns ``(mmse(Delta),)``.
        """
        (delta,) = deltas
        return (self.mmse(delta),)

    def denoise(self, R, deltas, noise=None):
        r"""GAMP's prior step: ``(S_hat, V, V_ons)`` for the effective observation ``R`` with noises ``deltas``.

        ``S_hat`` the estimate of ``S`` (an array of ``R``'s module), ``V`` its predicted
        error per sector (what the next channel step uses) and ``V_ons`` the Onsager
        terms per sector, ``Delta_s div_s S_hat / d^2`` (equal to ``V`` for a posterior mean).
        ``noise`` (a keyword GAMP-RIE always passes, :func:`aimlib.amp.steps.prior_step`):
        the measured noise of each sector of ``R``, or ``None``; a denoiser that does not
        use it ignores it.
        """
        raise NotImplementedError

    def seeded(self, seed) -> "Prior":
        """This prior with its denoiser's own draws taken from ``seed`` (int, Generator or None).

        A denoiser that draws nothing (a closed form, an RIE) is its own seeded copy:
        this returns ``self``.  :func:`aimlib.amp.run_amp` seeds every prior of a run
        from the run's seed, so a run is reproducible whatever its denoiser.
        """
        return self


def extend_mmse(base, delta: float, limit: float) -> float:
    r"""``base(Delta)`` inside ``DELTA_RANGE``; exact ends ``0`` and ``limit``; asymptotics beyond.

    ``mmse ~ c Delta`` as ``Delta -> 0`` and ``limit - mmse ~ c'/Delta`` as
    ``Delta -> inf``, the constants matched at the range's ends (relative
    corrections of the order of the end point, ``1e-12``).
    """
    lo, hi = DELTA_RANGE
    if delta <= 0:
        return 0.0
    if math.isinf(delta):
        return float(limit)
    if delta < lo:
        return base(lo) * (delta / lo)
    if delta > hi:
        return limit - (limit - base(hi)) * (hi / delta)
    return float(base(delta))


def aitken_slope(m) -> float:
    """``lim_{Delta -> 0} m(Delta) / Delta`` by Aitken extrapolation on a geometric grid.

    ``s(Delta) = c0 + A Delta^p + ...`` with unknown ``p`` (``p = 1`` for the
    Wishart prior at ``rho != 1``; slower at ``rho = 1``); Aitken's delta-squared
    removes the leading correction exactly for a geometric sequence of ``Delta``.
    The extrapolation is kept between the last value and the bound 1.
    """
    deltas = 1e-3 * 4.0 ** -np.arange(4)
    s = np.array([m(d) / d for d in deltas])
    x0, x1, x2 = s[-3:]
    den = (x2 - x1) - (x1 - x0)
    if den == 0 or not np.isfinite(den):
        return float(x2)
    est = x2 - (x2 - x1) ** 2 / den
    return float(min(max(est, x2), 1.0)) if x2 <= 1.0 else float(est)
