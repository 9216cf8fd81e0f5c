"""Hardmax, T = 2, rho = 0.5, alpha = 1: the state evolution has one fixed point, E_S = 0.0789,
and its output side ``F_out`` agrees with a Monte Carlo estimate over sampled ``(omega, h, y)``.

(``scripts/hardmax_alpha1.py`` shows why GAMP-RIE's default stop sat above this value.)
Seeded and deterministic; the Monte Carlo tolerance is four standard errors.
"""
from __future__ import annotations

import math

import numpy as np

from aimlib.channels import Hardmax, hardmax as hm, sample_se_measure, sigma2
from aimlib.priors import Wishart
from aimlib.state_evolution import fixed_point

ALPHA, RHO = 1.0, 0.5
Q0 = 1.0 + RHO


def _se_map(V):
    """One undamped SE step from the error ``V``: ``mmse_S(1 / (alpha F_out(Q0 - V)))``."""
    return Wishart(RHO).mmse(1.0 / (ALPHA * hm.fisher(Q0 - V, Q0)))


def test_one_fixed_point_at_alpha_1():
    grid = np.geomspace(1e-4, 1.0, 60)
    gap = np.array([_se_map(V) - V for V in grid])
    crossings = np.flatnonzero(np.sign(gap[1:]) != np.sign(gap[:-1]))
    assert len(crossings) == 1, f"the SE map crosses the diagonal {len(crossings)} times"
    values = [fixed_point(ALPHA, "hardmax", T=2, rho=RHO, init=V0).mmse for V0 in (1.0, 0.2, 1e-3)]
    assert max(values) - min(values) < 1e-8
    assert abs(values[0] - 0.07893) < 1e-4
    assert grid[crossings[0]] < values[0] < grid[crossings[0] + 1]


def test_fisher_at_alpha_1_by_monte_carlo():
    V = fixed_point(ALPHA, "hardmax", T=2, rho=RHO).mmse
    rng = np.random.default_rng(2026)
    n, reps, vals = 100_000, 6, []
    weights = 2 * np.triu(sigma2(2, np, np.float64))          # F_out = 2 sum_{a<=b} Sigma_ab E g_ab^2
    for _ in range(reps):
        omega, _, y = sample_se_measure(Hardmax(), n, Q0 - V, Q0, 2, seed=rng)
        g = hm.g_out(y, omega, V)
        vals.append(np.mean(np.sum(weights * g**2, axis=(-1, -2))))
    mc, err = np.mean(vals), np.std(vals, ddof=1) / math.sqrt(reps)
    quad = hm.fisher(Q0 - V, Q0)
    assert abs(mc - quad) < 4 * err, f"Monte Carlo {mc:.4f} +- {err:.4f}, quadrature {quad:.4f}"
    assert err < 0.01 * quad
    # the fixed point: qhat = alpha F_out reproduces V through the prior side
    assert abs(_se_map(V) - V) < 1e-8
