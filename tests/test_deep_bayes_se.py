"""The coupled Bayes state evolution of two hardmax layers (aimlib.state_evolution.bayes_pair) and its channel
side with the cross overlap (aimlib.channels.deep_bayes_cross).

Checked: the channel side is the tabulated moment matrix at q_12 = 0 and fisher_matrix_direct on the same Sobol
set; its exact output function against a general-purpose four-variate normal integrator, its first order as its
slope, both against Monte Carlo draws of the law with V_12 != 0 and, at V_12 = 0, against the channel's analytic
g_out; its moments against their Monte Carlo definition, and what the first order leaves out of them; the whole
iteration on Gaussian teachers, whose joint denoiser is linear, against an exact iteration and the separable state
evolution; the committed curve as a fixed point of the map, made again on its instances.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention, hardmax
from aimlib.channels.base import sample_indices
from aimlib.channels.deep_bayes_cross import (CROSS_NODES, bayes_moment_matrix, bayes_moments_direct, exact_log_z,
                                              pair_g_out, pair_law, pair_log_z)
from aimlib.channels.deep_patterns import (ENTRY_VAR, PATTERNS, entries, fisher_matrix_direct, functionals,
                                           mixed_functionals)
from aimlib.priors import Gaussian, Wishart
from aimlib.priors.correlated import gaussian_pair, layer_noises
from aimlib.state_evolution.bayes_pair import (bayes_pair_fixed_point, bayes_pair_step, gaussian_prior_side,
                                               sampled_prior_side)

CH = DeepAttention(0.5)
WISHART = (Wishart(0.5), Wishart(0.5))
#: a state near the separable fixed point at alpha = 0.5 (Wishart, rho = 0.5: Q0 = 1.5, known parts 0.5)
Q, Q0, SHARED = (0.84, 1.05), (1.5, 1.5), (0.5, 0.5)
DATA = Path(__file__).resolve().parents[1] / "book" / "data" / "deep_bayes_se.csv"


def _law_draws(q12, n, seed):
    """``(omega, h, y)``: ``n`` draws of the estimates, the indices and the outputs under the law with ``q12``."""
    Qm, V = pair_law(Q, Q0, SHARED, q12)
    rng = np.random.default_rng(seed)
    z = [np.stack([sample_indices(n, 2, 1.0, rng) for _ in range(2)], axis=1) for _ in range(2)]
    omega = np.einsum("lm,nmab->nlab", np.linalg.cholesky(Qm), z[0])
    h = omega + np.einsum("lm,nmab->nlab", np.linalg.cholesky(V), z[1])
    return omega, h, CH(h), V


def test_channel_side_reduces_to_the_tabulated_moment_matrix_at_zero_cross():
    V = np.subtract(Q0, Q)
    r = math.sqrt(SHARED[0] * SHARED[1] / (Q[0] * Q[1]))
    direct = fisher_matrix_direct(0.5, Q[0] / V[0], Q[1] / V[1], r) / np.sqrt(np.outer(V, V))
    np.testing.assert_allclose(bayes_moments_direct(0.5, Q, Q0, SHARED, 0.0), direct, rtol=1e-8)
    np.testing.assert_array_equal(bayes_moment_matrix(CH, Q, Q0, SHARED, 0.0), CH.moment_matrix(Q, Q0, 2, SHARED))


def test_output_function_at_zero_cross_is_the_channels():
    """At V_12 = 0 the first-order log Z and its finite-difference gradient are DeepAttention's, analytic."""
    omega, _, y, _ = _law_draws(0.0, 200, 3)
    V = np.diag(np.subtract(Q0, Q))
    t = hardmax.signs_from_output(y)
    np.testing.assert_allclose(pair_log_z(0.5, t, omega, V), CH.log_partition(y, omega, np.diag(V)), atol=1e-12)
    np.testing.assert_allclose(pair_g_out(0.5, t, omega, V), entries(CH.g_out(y, omega, np.diag(V))), atol=1e-6)


def _orthant_z(t, o, V):
    """Z_out(t) by a general-purpose integrator: per pattern, SciPy's four-variate normal CDF (Genz's
    quasi-Monte Carlo, absolute error 1e-9) of the signed differences, the covariance written out here."""
    from scipy.stats import multivariate_normal
    z = 0.0
    for s in PATTERNS:
        G = [np.array(s)[:, None] * mixed_functionals(np.eye(2)), np.array(t)[:, None] * functionals(0.5, *s)]
        cov = np.block([[V[a, b] * (G[a] * ENTRY_VAR) @ G[b].T for b in (0, 1)] for a in (0, 1)])
        mean = np.concatenate([G[a] @ entries(o[a]) for a in (0, 1)])
        z += multivariate_normal(np.zeros(4), cov, abseps=1e-9, releps=1e-9, maxpts=10**7).cdf(mean)
    return z


def test_exact_output_probabilities_against_a_general_integrator():
    """exact_log_z at V_12 = -0.1 (q_12 = 0.1, three times the fixed points') is SciPy's four-variate normal CDF
    within 1e-7, for three estimates and the four outputs; the outputs' probabilities sum to one; doubling the
    Gauss-Legendre nodes moves nothing beyond 1e-12; at V_12 = 0 it is the zeroth order to rounding."""
    omega, _, _, V = _law_draws(0.1, 3, 7)
    for t in PATTERNS:
        exact = np.exp(exact_log_z(0.5, t, omega, V))
        np.testing.assert_allclose(exact, [_orthant_z(t, o, V) for o in omega], atol=1e-7)
        np.testing.assert_allclose(exact_log_z(0.5, t, omega, V, nodes=2 * CROSS_NODES), np.log(exact), atol=1e-12)
        V0 = np.diag(np.diag(V))
        np.testing.assert_allclose(exact_log_z(0.5, t, omega, V0), pair_log_z(0.5, t, omega, V0), atol=1e-14)
    total = sum(np.exp(exact_log_z(0.5, t, omega, V)) for t in PATTERNS)
    np.testing.assert_allclose(total, 1.0, atol=1e-13)


def test_exact_output_function_has_the_first_order_as_its_slope():
    """The slope of exact_log_z's Z_out in V_12 at 0 is the first order's c-term: central differences at
    V_12 = +-1e-3 agree within 1e-6 (their own error is of order 1e-6 times the third derivative)."""
    omega, _, _, V = _law_draws(0.0, 50, 9)
    V0, eps = np.diag(np.diag(V)), 1e-3
    step = eps * (1 - np.eye(2))

    def slope(log_z, t):
        return (np.exp(log_z(0.5, t, omega, V0 + step)) - np.exp(log_z(0.5, t, omega, V0 - step))) / (2 * eps)

    for t in PATTERNS:
        np.testing.assert_allclose(slope(exact_log_z, t), slope(pair_log_z, t), atol=1e-6)


def test_output_probabilities_against_monte_carlo():
    """Z_out(t) at V_12 = -0.1 against 4e5 draws of the law (standard error at most 8e-4): the exact one within
    0.0025, the first order within 0.004, the zeroth order off by more than 0.01."""
    omega, _, _, V = _law_draws(0.1, 3, 7)
    L = np.linalg.cholesky(V)
    rng = np.random.default_rng(11)
    V0 = np.diag(np.diag(V))
    exact, first, zeroth = [], [], []
    for o in omega:
        x = np.stack([sample_indices(400_000, 2, 1.0, rng) for _ in range(2)], axis=1)
        t = hardmax.signs_from_output(CH(o[None] + np.einsum("lm,nmab->nlab", L, x)))
        for s in PATTERNS:
            p = np.mean(np.all(t == np.array(s), axis=1))
            exact.append(abs(np.exp(exact_log_z(0.5, s, o[None], V))[0] - p))
            first.append(abs(np.exp(pair_log_z(0.5, s, o[None], V))[0] - p))
            zeroth.append(abs(np.exp(pair_log_z(0.5, s, o[None], V0))[0] - p))
    assert max(exact) < 0.0025 and max(first) < 0.004 and max(zeroth) > 0.01


@pytest.mark.slow
def test_moments_against_their_monte_carlo_definition():
    """F_hat at q_12 = 0.05 on the Sobol set against 2 sum lambda E[g g] over draws of the law with y from the
    channel (3e4 draws, within four of their standard errors), and E[g] = 0; the cross overlap moves F_12 by 0.05."""
    q12 = 0.05
    omega, _, y, V = _law_draws(q12, 30_000, 5)
    g = pair_g_out(0.5, hardmax.signs_from_output(y), omega, V, log_z=exact_log_z)
    terms = 2 * np.einsum("nlk,nmk,k->nlm", g, g, ENTRY_VAR)
    mc, stderr = terms.mean(axis=0), terms.std(axis=0) / math.sqrt(len(g))
    direct = bayes_moments_direct(0.5, Q, Q0, SHARED, q12)
    assert np.all(np.abs(mc - direct) <= 4 * stderr)
    assert np.abs(g.mean(axis=0)).max() < 0.03
    assert direct[0, 1] - bayes_moments_direct(0.5, Q, Q0, SHARED, 0.0)[0, 1] == pytest.approx(0.05, abs=0.01)


@pytest.mark.slow
def test_channel_side_regression():
    """bayes_moment_matrix at q_12 = 0.03 (the state above), deterministic: stored to 1e-6."""
    np.testing.assert_allclose(bayes_moment_matrix(CH, Q, Q0, SHARED, 0.03),
                               [[0.72663558, 0.18074789], [0.18074789, 1.65952343]], atol=1e-6)


@pytest.mark.slow
def test_what_the_first_order_leaves_out():
    """F_hat with the first-order output function against the exact one (book, "The coupled Bayes state
    evolution"): at q_12 = 0.03, the fixed points' size, 4.3e-4 and 7.8e-4 on the diagonal and 3e-5 off it;
    at q_12 = 0.1, 0.0049, 0.0087 and 4e-4: a second order, about (0.1/0.03)^2 = 11 times larger."""
    gaps = []
    for q12 in (0.03, 0.1):
        gap = bayes_moments_direct(0.5, Q, Q0, SHARED, q12) - bayes_moments_direct(0.5, Q, Q0, SHARED, q12,
                                                                                     log_z=pair_log_z)
        gaps.append(gap[[0, 0, 1], [0, 1, 1]])
    np.testing.assert_allclose(gaps[0], [4.3e-4, -2.6e-5, 7.8e-4], atol=1e-5)
    np.testing.assert_allclose(gaps[1], [4.9e-3, 4.2e-4, 8.7e-3], atol=1e-4)
    assert 9 < gaps[1][0] / gaps[0][0] < 13 and 9 < gaps[1][2] / gaps[0][2] < 13


@pytest.mark.slow
def test_first_order_output_function_at_the_runs_cross_covariance():
    """GAMP-RIE's channel step with the joint denoiser (cross_g_out) keeps the first order: on 1000 draws of the
    law at q_12 = 0.03 its g is the exact one's within 0.1 % rms for each layer; at q_12 = 0.1 the gap is more
    than five times larger (a second order gives eleven)."""
    ratios = []
    for q12 in (0.03, 0.1):
        omega, _, y, V = _law_draws(q12, 1000, 3)
        t = hardmax.signs_from_output(y)
        exact, first = pair_g_out(0.5, t, omega, V, log_z=exact_log_z), pair_g_out(0.5, t, omega, V)
        ratios.append(np.sqrt(np.mean((exact - first) ** 2, axis=(0, 2)) / np.mean(exact**2, axis=(0, 2))))
    assert np.all(ratios[0] < 1e-3) and np.all(ratios[1] > 5 * ratios[0])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="q12"):
        pair_law(Q, Q0, SHARED, 0.9)
    omega = _law_draws(0.0, 2, 1)[0]
    with pytest.raises(ValueError, match="positive definite"):
        exact_log_z(0.5, (1.0, 1.0), omega, [[0.5, 0.6], [0.6, 0.5]])
    with pytest.raises(ValueError, match="nodes"):
        exact_log_z(0.5, (1.0, 1.0), omega, [[0.5, 0.1], [0.1, 0.5]], nodes=0)
    with pytest.raises(ValueError, match="singular"):
        layer_noises([[1.0, 1.0], [1.0, 1.0]], 0.5)
    with pytest.raises(ValueError, match="seeds"):
        sampled_prior_side(40, 0.5, [0])
    with pytest.raises(ValueError, match="mmse_1"):
        bayes_pair_step(0.5, CH, WISHART, (1.2, 0.5, 0.0), gaussian_prior_side())
    with pytest.raises(ValueError, match="e_12"):
        bayes_pair_step(0.5, CH, WISHART, (0.5, 0.5, 0.6), gaussian_prior_side())
    with pytest.raises(ValueError, match="two attention layers"):
        bayes_pair_step(0.5, DeepAttention(0.5, layers=3), WISHART, (0.5, 0.5, 0.0), gaussian_prior_side())


def _exact_gaussian_iteration(alpha, x, damping, steps):
    """The coupled iteration for centred GOE teachers written out: q = 1 - mmse, F_hat, (I + alpha F_hat)^{-1}."""
    for _ in range(steps):
        F = bayes_moment_matrix(CH, tuple(1.0 - x[:2]), (1.0, 1.0), (0.0, 0.0), -x[2])
        E = np.linalg.inv(np.eye(2) + alpha * F)
        x = damping * x + (1 - damping) * np.array([E[0, 0], E[1, 1], E[0, 1]])
    return x


@pytest.mark.slow
def test_gaussian_teachers_exact_iteration_and_separable_limit():
    """Centred GOE teachers: the coupled state evolution with the exact linear joint denoiser is the iteration
    written out, and started with a cross overlap it returns to q_12 = 0 (up to 1e-3: the correlated table's
    F~_12 at r = 0 is -0.002 instead of 0, its stated 0.12 % accuracy) and to the separable state evolution
    (within 1e-3, the two tables' agreement, DeepAttention.fisher against moment_matrix)."""
    gauss, alpha = (Gaussian(), Gaussian()), 1.0
    x0 = np.array([0.5, 0.3, -0.03])
    one = bayes_pair_step(alpha, CH, gauss, x0, gaussian_prior_side())[0].x
    np.testing.assert_allclose(one, _exact_gaussian_iteration(alpha, x0, 0.0, 1), atol=1e-12)
    fp = bayes_pair_fixed_point(alpha, CH, gauss, x0, gaussian_prior_side(), damping=0.0, tol=1e-5, further=1)
    assert abs(fp.e_12) < 1e-3
    sep = se.fixed_point(alpha, CH, T=2, rho=gauss, tol=1e-10)
    np.testing.assert_allclose(fp.mmse, sep.mmse, rtol=1e-3)


@pytest.mark.slow
def test_sampled_gaussian_prior_side_matches_the_closed_form():
    """One step with the sampled joint denoiser on GOE teachers (d = 40, six instances) against the closed form
    (1 + 1/d)(I + N^{-1})^{-1} at the same noises, within four standard errors."""
    gauss, x0 = (Gaussian(), Gaussian()), (0.6, 0.5, -0.05)
    sampled, _, noises = bayes_pair_step(1.0, CH, gauss, x0, sampled_prior_side(40, np.inf, range(6)))
    exact = (1 + 1 / 40) * gaussian_pair(noises[:2], noises[2])[1][[0, 1, 0], [0, 1, 1]]
    assert np.all(np.abs(sampled.x - exact) <= 4 * sampled.stderr + 1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.3, 0.5, 1.0])
def test_committed_curve_is_a_fixed_point(alpha):
    """Repeat 0 of the committed curve (instances 0-7, d = 100): one undamped step from its fixed point returns
    it within 0.003. The iteration stopped at damped steps under 0.001 (undamped 0.0014) and the chains'
    graininess between steps is about 0.001; an error in the channel or prior side moves the point by more
    (the cross overlap alone moves it by 0.004 to 0.014 at alpha <= 0.5)."""
    rows = np.genfromtxt(DATA, delimiter=",", names=True, skip_header=1)
    ref = rows[(rows["alpha"] == alpha) & (rows["repeat"] == 0)][0]
    x = np.array([ref["bayes_mmse_1"], ref["bayes_mmse_2"], ref["bayes_e_12"]])
    out = bayes_pair_step(alpha, CH, WISHART, x, sampled_prior_side(100, 0.5, range(8)))[0].x
    assert np.max(np.abs(out - x)) < 0.003
