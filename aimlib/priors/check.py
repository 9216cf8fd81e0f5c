r"""The prior contract check, shipped with the library: run it on any new prior.

:func:`check_prior` tests the identities every prior of :mod:`aimlib.priors.base`
must satisfy, each by an independent route:

* ``Q0`` is the sum of the sector moments, and a draw at dimension ``d`` has
  ``(1/d)||S||_F^2`` near ``Q0`` and ``(1/d)||E S||_F^2`` equal to ``mean_square``;
* ``mmse`` rises from ``0`` to ``Q0 - mean_square`` and lies below the error
  ``c Delta/(c + Delta)`` of the best linear estimator (``c = Q0 - mean_square``);
* ``zero_slope`` is the slope of ``mmse`` at ``Delta -> 0``;
* ``sector_mmse`` at equal noises adds up to ``mmse``;
* ``denoise`` on ``R = S + sqrt(Delta) Z`` (``Z`` the standard noise of the
  matrix space, :class:`~aimlib.priors.gaussian.Gaussian`) returns an estimate of
  the shape and symmetry of ``S`` whose measured error matches its predicted
  error ``sum(V)`` within ``tol_rel`` (relative).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from .base import Prior
from .gaussian import Gaussian

__all__ = ["check_prior"]


def _law_checks(prior, d, rng, tol_rel):
    """Second moments of the law, exactly and on one draw."""
    fails, Q0 = [], prior.second_moment()
    if not math.isclose(sum(prior.sector_moments()), Q0, rel_tol=1e-12):
        fails.append(f"sector moments {prior.sector_moments()} do not add up to Q0 = {Q0:g}")
    S = prior.sample(d, rng)
    q_draw = float(np.sum(S * S)) / d
    if abs(q_draw - Q0) > tol_rel * Q0:
        fails.append(f"a draw at d={d} has (1/d)||S||^2 = {q_draw:.4g}, Q0 = {Q0:.4g}")
    M = prior.mean(d)
    if abs(float(np.sum(M * M)) / d - prior.mean_square()) > 1e-9 * (1 + Q0):
        fails.append("(1/d)||E S||^2 differs from mean_square()")
    if prior.symmetric and not np.allclose(S, S.T):
        fails.append("a draw of a symmetric prior is not symmetric")
    return fails, S


def _mmse_checks(prior, deltas):
    """End points, monotonicity, the linear bound, the slope at zero, the sectors."""
    fails, c = [], prior.second_moment() - prior.mean_square()
    m = np.array([prior.mmse(dl) for dl in deltas])
    if prior.mmse(0.0) != 0.0 or not math.isclose(prior.mmse(math.inf), c, rel_tol=1e-12):
        fails.append(f"mmse(0) must be 0 and mmse(inf) = Q0 - mean_square = {c:g}")
    if np.any(np.diff(m) < -1e-12) or np.any(m > c * deltas / (c + deltas) * (1 + 1e-9)):
        fails.append("mmse must rise with Delta and stay below the linear estimator's c Delta/(c + Delta)")
    slope = prior.mmse(1e-7) / 1e-7
    if abs(slope - prior.zero_slope()) > 1e-3 * max(slope, 1e-12):
        fails.append(f"zero_slope() = {prior.zero_slope():.6g} but mmse(1e-7)/1e-7 = {slope:.6g}")
    for dl, mm in zip(deltas, m):
        total = sum(prior.sector_mmse((dl,) * len(prior.sectors)))
        if abs(total - mm) > 1e-3 * mm + 1e-12:
            fails.append(f"sector_mmse at equal noises {dl:g} adds up to {total:.6g}, mmse = {mm:.6g}")
    return fails


def _denoise_checks(prior, S, delta, rng, tol_rel):
    """One denoising run: shape, symmetry, finiteness, measured error against ``sum(V)``."""
    d = S.shape[0]
    Z = Gaussian(symmetric=prior.symmetric).sample(d, rng)
    deltas = (delta,) * len(prior.sectors)
    try:   # called as GAMP-RIE calls it (aimlib.amp.steps.prior_step)
        S_hat, V, V_ons = prior.denoise(S + math.sqrt(delta) * Z, deltas, noise=None)
    except TypeError as exc:
        return [f"denoise(R, deltas, noise=None), as GAMP-RIE calls it, raised TypeError: {exc}"]
    fails = []
    if S_hat.shape != S.shape or not np.all(np.isfinite(S_hat)):
        return [f"denoise returned an estimate of shape {S_hat.shape} (want {S.shape}) or non-finite values"]
    if len(V) != len(prior.sectors) or len(V_ons) != len(prior.sectors):
        fails.append(f"denoise must return one V and one V_ons per sector {prior.sectors}")
    if prior.symmetric and not np.allclose(S_hat, S_hat.T):
        fails.append("the estimate of a symmetric prior is not symmetric")
    err = float(np.sum((S_hat - S) ** 2)) / d
    if abs(err - sum(V)) > tol_rel * sum(V) + 1e-12:
        fails.append(f"at Delta={delta:g}, d={d} the measured error {err:.4g} differs from the predicted "
                     f"{sum(V):.4g} by more than {tol_rel:.0%}")
    return fails


def check_prior(prior: Prior, *, d: int = 200, deltas=(0.05, 0.3, 1.0, 4.0), seed=0, tol_rel: float = 0.1) -> None:
    """Check ``prior`` against the contract of :mod:`aimlib.priors.base` (module docstring).

    Parameters
    ----------
    prior : Prior
    d : int
        Dimension of the draws (``>= 20``); the finite-``d`` checks hold to ``O(1/sqrt(d))``.
    deltas : sequence of float
        Noise variances at which ``mmse`` and ``denoise`` are checked (increasing, ``> 0``).
    seed : int or Generator
    tol_rel : float
        Relative tolerance of the finite-``d`` checks (default 10 %, which a draw at
        ``d = 200`` meets with a wide margin: the fluctuations are a few ``1/d``).

    Raises
    ------
    AssertionError
        Listing every identity that fails.
    """
    if not isinstance(prior, Prior):
        raise TypeError(f"prior must be an aimlib.priors.Prior, got {type(prior).__name__}")
    d = v.integer("d", d, minimum=20)
    deltas = np.asarray(deltas, dtype=float)
    if deltas.ndim != 1 or deltas.size == 0 or np.any(deltas <= 0) or np.any(np.diff(deltas) <= 0):
        raise ValueError("deltas must be a non-empty increasing sequence of numbers > 0")
    tol_rel = v.in_range("tol_rel", tol_rel, 1e-6, 1.0)
    rng = v.generator(seed)
    fails, S = _law_checks(prior, d, rng, tol_rel)
    fails += _mmse_checks(prior, deltas)
    for dl in deltas:
        fails += _denoise_checks(prior, S, float(dl), rng, tol_rel)
    if fails:
        raise AssertionError(f"{prior!r} breaks the prior contract:\n  " + "\n  ".join(fails))
