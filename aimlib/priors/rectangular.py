r"""The prior of untied key and query: ``S = Q K^T / sqrt(r d)``, a square matrix of two sectors.

Book, chapters "Untied key and query" and "Untied key and query: algorithms and the exact error".
``Q, K`` of shape ``(d, r)`` independent with i.i.d. ``N(0, 1)`` entries, ``rho = r/d``:
``E S = 0``, ``Q0 = lim (1/d)||S||_F^2 = 1``, half of it in each of the two sectors
(symmetric part ``A``, antisymmetric part ``B``:
``sector_moments = (1/2, 1/2)``).  ``S`` is bi-rotationally invariant, so under
the Ginibre noise of :mod:`~aimlib.priors.base`, ``R = S + sqrt(Delta) Z``, the
posterior mean is the rectangular RIE and its error ``mmse_rect(Delta)``
(:mod:`aimlib.rmt.rectangular`).  With one noise per sector,

.. math::  R = S + \sqrt{\Delta_A}\,\Pi_{\rm sym} Z + \sqrt{\Delta_B}\,\Pi_{\rm anti} Z',

the noise is invariant under ``S -> O S O^T`` only and no spectral formula gives
the posterior mean.  :class:`Rectangular` offers two denoisers of ``R`` (the
sampled posterior mean is :class:`~aimlib.priors.sampled.Sampled`):

* ``'equalised'`` (:func:`rect_prior_step`): an independent Ginibre matrix lifts
  the better-seen part to ``Delta = max(Delta_A, Delta_B)``, then the rectangular
  RIE, the posterior mean given what is kept, with error ``mmse_rect(Delta)``,
  half in each part.  Its state evolution is :meth:`Rectangular.sector_mmse`,
  the upper end of the bracket of :func:`aimlib.untied.bracket_untied`;
* ``'tuned'`` (:func:`tuned_prior_step`): the rectangular RIE of ``R`` itself at
  the effective noise that minimises Stein's estimate of its error
  (:func:`sure_errors`); it keeps all the information but has no state
  evolution of its own at unequal noises (its errors are measured).

Each returns ``(S_hat, V, V_ons)`` per :meth:`~aimlib.priors.base.Prior.denoise`,
``V_ons,s = Delta_s div_s S_hat / d^2`` from the exact divergences of the
spectral map on the two parts (:func:`aimlib.rmt.rectangular.spectral_divergences`).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..rmt.rectangular import mmse_rect, rect_shrinkage, spectral_divergences
from .base import Prior
from .gaussian import matrix_parts, part_dimensions
from .wishart import teacher_width

__all__ = ["FactorProduct", "Rectangular", "DENOISERS", "TUNING_GRID", "ERROR_FLOOR", "factor_product", "part_norms",
           "check_sector_pair", "rect_prior_step", "sure_errors", "tuned_prior_step"]

#: the denoisers of :class:`Rectangular`
DENOISERS = ("equalised", "tuned")
#: values of ``Delta_eff`` tried by :func:`tuned_prior_step`
TUNING_GRID = 7
#: :func:`tuned_prior_step`'s error estimates are floored here (Stein's estimate may fall below 0)
ERROR_FLOOR = 1e-10


def factor_product(Q, K):
    """``S = Q K^T / sqrt(r d)`` for factors ``Q, K`` of shape ``(d, r)``: the untied key-query matrix."""
    return Q @ K.T / math.sqrt(Q.shape[0] * Q.shape[1])


def part_norms(M) -> tuple:
    """``(||A||_F^2, ||B||_F^2)`` of the symmetric and antisymmetric parts of ``M``, as floats."""
    return tuple(float((P * P).sum()) for P in matrix_parts(M))


def check_sector_pair(deltas, *, allow_zero: bool = False) -> tuple:
    """``deltas`` as a pair ``(Delta_A, Delta_B)`` of floats ``> 0`` (``allow_zero``: ``>= 0``, ``inf`` allowed)."""
    if len(deltas) != 2:
        raise ValueError(f"deltas must be a pair (Delta_A, Delta_B), got {deltas!r}")
    check = v.nonnegative if allow_zero else v.positive
    return tuple(check(f"deltas[{i}]", x, allow_inf=allow_zero) for i, x in enumerate(deltas))


def _spectral(U, s, Vt, delta: float, rho: float):
    """``(F, (div_A, div_B))``: the rectangular RIE at noise ``delta`` on the SVD of ``R``, its divergences."""
    xp = get_array_module(U)
    xi, dxi = rect_shrinkage(to_host(s), delta, rho)
    return (U * xp.asarray(xi, dtype=U.dtype)) @ Vt, spectral_divergences(U, s, Vt, xi, dxi)


def rect_prior_step(R, deltas, Z, rho: float):
    r"""Equalise the two noises, then the rectangular RIE: ``(S_hat, V, V_ons)``.

    The Ginibre matrix ``Z`` (i.i.d. ``N(0, 1/d)``, independent of ``R``) lifts the
    better-seen part to ``Delta = max(Delta_A, Delta_B)``:
    ``R' = R + sqrt(Delta - Delta_A) A_Z + sqrt(Delta - Delta_B) B_Z = S + sqrt(Delta) G``
    with ``G`` Ginibre, whose posterior mean is the rectangular RIE with error
    ``m = mmse_rect(Delta)``, half in each part: ``V = (m/2, m/2)``.  The Onsager
    terms use the exact divergences of the map ``R -> S_hat``,
    ``V_ons,s = Delta_s div_s/d^2``, about ``(Delta_s/Delta) m/2``.
    """
    d, xp = R.shape[0], get_array_module(R)
    top = max(deltas)
    ZA, ZB = matrix_parts(Z)
    R = R + math.sqrt(top - deltas[0]) * ZA + math.sqrt(top - deltas[1]) * ZB
    F, divs = _spectral(*xp.linalg.svd(R), top, rho)
    m = mmse_rect(top, rho)
    return F, (m / 2, m / 2), tuple(dl * dv / d**2 for dl, dv in zip(deltas, divs))


def sure_errors(R, F, deltas, divs) -> tuple:
    r"""Stein's unbiased estimates of the errors ``(1/d)||Pi_s(F(R) - S)||^2`` of the two parts.

    For ``R = S + N`` with ``N`` Gaussian of variance ``Delta_s/d`` per direction of
    part ``s`` (``n_s = d(d +- 1)/2`` directions),
    ``E||Pi_s(F - S)||^2 = E||Pi_s(F - R)||^2 + 2 (Delta_s/d) div_s F - n_s Delta_s/d``.
    """
    d = R.shape[0]
    res = part_norms(F - R)
    return tuple((q + 2 * dl / d * dv - n_s * dl / d) / d
                 for q, dl, dv, n_s in zip(res, deltas, divs, part_dimensions(d)))


def tuned_prior_step(R, deltas, noise, rho: float):
    r"""The rectangular RIE of ``R`` itself at the noise ``Delta_eff`` that minimises Stein's estimate.

    ``noise`` are the noise variances of the two parts of ``R`` (in GAMP measured on
    the messages), ``deltas`` the scalings of its Onsager terms.  ``Delta_eff``
    runs over ``TUNING_GRID`` values geometrically spaced between the two noises;
    the one with the smallest :func:`sure_errors` total is kept.  Returns
    ``(S_hat, V, V_ons)`` with ``V`` those estimates (floored at ``ERROR_FLOOR``)
    and ``V_ons,s = Delta_s div_s/d^2``.  Not Bayes-optimal (the noise is not
    bi-rotationally invariant) but it keeps all the information, unlike
    :func:`rect_prior_step`.
    """
    d, xp = R.shape[0], get_array_module(R)
    svd = xp.linalg.svd(R)
    best = None
    for delta_eff in np.geomspace(min(noise), max(noise), TUNING_GRID):
        F, divs = _spectral(*svd, float(delta_eff), rho)
        V = sure_errors(R, F, noise, divs)
        if best is None or sum(V) < sum(best[1]):
            best = (F, V, divs)
    F, V, divs = best
    return F, tuple(max(x, ERROR_FLOOR) for x in V), tuple(dl * dv / d**2 for dl, dv in zip(deltas, divs))


class FactorProduct(Prior):
    r"""The law of ``S = Q K^T / sqrt(r d)``, width ratio ``rho = r/d`` in ``RHO_RANGE`` (no denoiser).

    ``rho = inf`` is :class:`~aimlib.priors.gaussian.Gaussian` with ``symmetric=False``
    (:func:`aimlib.priors.make_prior`).  ``mmse(Delta) = mmse_rect(Delta)`` (free
    probability, :func:`aimlib.rmt.rectangular.mmse_rect`), zero-noise slope
    ``rho (2 - rho)`` for ``rho < 1``, ``1`` beyond (the dimension of rank-``r``
    matrices per ``d^2``).  :class:`Rectangular` and
    :class:`~aimlib.priors.sampled.Sampled` add the denoisers.
    """

    symmetric = False
    sectors = ("A", "B")

    def __init__(self, rho: float = 0.5):
        self.rho = v.rho(rho)

    def _params(self) -> str:
        return f"rho={self.rho:g}"

    def second_moment(self) -> float:
        return 1.0

    def sector_moments(self) -> tuple:
        return (0.5, 0.5)

    def mean(self, d: int, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        return xp.zeros((d, d), dtype=dtype)

    def draw_numbers(self, d: int) -> int:
        """``2 d r``: the factors ``Q`` and ``K``."""
        return 2 * d * teacher_width(d, self.rho)

    def sample(self, d: int, seed=None, *, xp=None, dtype=np.float64):
        """``Q K^T/sqrt(r d)``, ``r = round(rho d)``: ``Q`` then ``K`` drawn from ``seed``."""
        xp = np if xp is None else xp
        rng = v.generator(seed)
        r = teacher_width(d, self.rho)
        Q = rng.standard_normal((d, r))
        K = rng.standard_normal((d, r))
        return to_device(factor_product(Q, K).astype(dtype), xp)

    def _mmse(self, delta: float) -> float:
        return mmse_rect(delta, self.rho)

    def zero_slope(self) -> float:
        """``rho (2 - rho)`` for ``rho < 1``, ``1`` beyond: ``r (2d - r)/d^2``, the rank-``r`` matrices' share."""
        return self.rho * (2.0 - self.rho) if self.rho < 1 else 1.0


class Rectangular(FactorProduct):
    r""":class:`FactorProduct`'s law with the equalised or the tuned denoiser (module docstring).

    Parameters
    ----------
    rho : float
        Width ratio, finite, in ``RHO_RANGE``.
    denoiser : {'equalised', 'tuned'}
        The denoiser of :meth:`denoise`.
    seed : int, Generator or None
        Draws the equalising Ginibre matrix, once, at the first call of
        :meth:`denoise` at a dimension ``d`` (kept for later calls at that ``d``, so
        that GAMP's damping does not average it away): make one prior per run.
    """

    name = "rectangular"

    def __init__(self, rho: float = 0.5, denoiser: str = "equalised", seed=None):
        super().__init__(rho)
        self.denoiser = v.choice("denoiser", denoiser, DENOISERS)
        self._rng = v.generator(seed)
        self._Z = None

    def seeded(self, seed) -> "Rectangular":
        """A fresh prior of the same law and denoiser whose equalising matrix is drawn from ``seed``."""
        return Rectangular(self.rho, self.denoiser, seed)

    def _params(self) -> str:
        return super()._params() + ("" if self.denoiser == "equalised" else f", denoiser={self.denoiser!r}")

    def sector_mmse(self, deltas) -> tuple:
        r"""The state evolution of the denoiser: ``(m/2, m/2)``, ``m = mmse(max(Delta_A, Delta_B))``.

        The Bayes-optimal two-noise error has no formula (it is sampled by
        :class:`~aimlib.priors.sampled.Sampled`); for ``'equalised'`` this is the error
        of the posterior mean given the equalised observation, an upper bound on it
        that GAMP attains (the upper end of :func:`aimlib.untied.bracket_untied`).  At
        equal noises it is exact for both denoisers.  The tuned denoiser has no state
        evolution of its own at unequal noises (its errors are measured): there it
        raises ``NotImplementedError``.
        """
        dA, dB = check_sector_pair(deltas, allow_zero=True)
        if self.denoiser == "tuned" and dA != dB:
            raise NotImplementedError(f"{self!r}: the tuned denoiser has no state evolution at unequal noises "
                                      f"deltas={tuple(deltas)} (its errors are measured); the equalised "
                                      "denoiser's is the upper end of aimlib.untied.bracket_untied")
        m = self.mmse(max(dA, dB))
        return (m / 2, m / 2)

    def _equaliser(self, d: int, xp, dtype):
        """The Ginibre matrix of :func:`rect_prior_step`, drawn at the first call at dimension ``d``."""
        if self._Z is None or tuple(self._Z.shape) != (d, d):
            self._Z = xp.asarray(self._rng.standard_normal((d, d)) / math.sqrt(d), dtype=dtype)
        return self._Z

    def denoise(self, R, deltas, noise=None):
        """:func:`rect_prior_step` (``'equalised'``; ``noise`` is not used) or :func:`tuned_prior_step`
        (``'tuned'``; ``noise`` the measured noises of the parts of ``R``, default ``deltas``)."""
        deltas = check_sector_pair(deltas)
        if self.denoiser == "equalised":
            return rect_prior_step(R, deltas, self._equaliser(R.shape[0], get_array_module(R), R.dtype), self.rho)
        noise = deltas if noise is None else check_sector_pair(noise)
        return tuned_prior_step(R, deltas, noise, self.rho)
