"""Stress grids of the state evolution: no NaN, values in range, monotone in alpha, exact to 1e-6.

Softmax for T = 2..8, rho = 1e-3..1e3 and alpha = 1e-6..100 against an
independent root find of ``V = mmse_S(V / alpha_bar)``; hardmax (T = 2) and
the softmax with label noise over their own grids.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from aimlib import rmt
from aimlib import state_evolution as se
from aimlib.channels import softmax_k

ALPHAS = np.geomspace(1e-6, 100.0, 25)


def exact_softmax_error(alpha, T, rho):
    """The root of ``mmse_S(V/alpha_bar) = V`` by bisection on ``V`` (0 beyond perfect recovery)."""
    abar = softmax_k(T) * alpha
    if abar >= min(1.0, 2 * rho - rho * rho if rho < 1 else 1.0):
        return 0.0
    lo = max(1e-300, abar * 1e-12)          # Delta = V / abar stays inside rmt.DELTA_RANGE
    hi = min(1.0, abar * 1e12)
    f = lambda V: float(rmt.mmse(V / abar, rho)) - V   # noqa: E731
    if f(hi) >= 0:                           # the root sits beyond Delta = 1e12: V = 1 to 1e-12
        return hi
    return brentq(f, lo, hi, xtol=1e-14, rtol=1e-13)


def _check_curve(mmse):
    assert np.all(np.isfinite(mmse))
    assert np.all((mmse >= 0) & (mmse <= 1 + 1e-12))
    assert np.all(np.diff(mmse) <= 1e-9), "the error must not grow with alpha"


@pytest.mark.parametrize("T", [2, 3, 5, 8])
@pytest.mark.parametrize("rho", [1e-3, 1e-2, 0.1, 0.5, 1.0, 2.0, 10.0, 1e3])
def test_softmax_grid_is_exact_and_monotone(T, rho):
    mmse = se.curve(ALPHAS, T=T, rho=rho).mmse
    _check_curve(mmse)
    for a, m in zip(ALPHAS[::4], mmse[::4]):
        assert m == pytest.approx(exact_softmax_error(a, T, rho), abs=1e-6)


@pytest.mark.parametrize("rho", [0.01, 0.5, 10.0])
def test_hardmax_grid_is_in_range_and_monotone(rho):
    alphas = np.geomspace(1e-4, 100.0, 10)
    _check_curve(se.curve(alphas, "hardmax", T=2, rho=rho, tol=1e-10).mmse)


@pytest.mark.parametrize("noise", [1e-2, 1e-1])
def test_label_noise_grid_is_in_range_monotone_and_above_the_noiseless_error(noise):
    alphas = np.geomspace(1e-3, 100.0, 8)
    noisy = se.curve(alphas, T=2, rho=0.5, noise=noise).mmse
    _check_curve(noisy)
    assert np.all(noisy >= se.curve(alphas, T=2, rho=0.5).mmse - 1e-9)
    assert noisy[-1] > 0   # no perfect recovery with label noise
