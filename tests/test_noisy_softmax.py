"""The softmax channel with label noise, T = 2 (aimlib.channels.softmax_noisy).

Independent routes: a brute-force integral over all three index entries with
the full four-entry Gaussian likelihood (no reduction to z), finite
differences of log Z_out, the Nishimori identities on data drawn through the
channel, the noiseless limit F_out -> 4/V, the small-beta linear limit, and
AMP on the state evolution.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib.channels import softmax_noisy as ns
from aimlib import state_evolution as se
from aimlib.amp import run_amp
from aimlib.channels import NoisySoftmax, sample_se_measure

SIGMA2 = np.array([[2.0, 1.0], [1.0, 2.0]])


def draw(n, q, V, beta, noise, seed):
    """``(omega, y)`` from the SE measure of the noisy softmax (T = 2)."""
    omega, _, y = sample_se_measure(NoisySoftmax(beta=beta, noise=noise), n, q, q + V, 2, seed)
    return omega, y


def brute_force(y, omega, V, beta, noise):
    """``(log Z, E[h | y])`` by a tensor grid over (h11 - h12, h22 - h12) and Gaussian h12.

    Uses the four-entry likelihood prod_ab N(y_ab; softmax(beta h)_ab, noise) directly.
    """
    o12 = omega[0, 1]
    mu = np.array([omega[0, 0] - o12, omega[1, 1] - o12])
    C = V * np.array([[3.0, 1.0], [1.0, 3.0]])
    grid = np.linspace(-12, 12, 1601) * math.sqrt(3 * V)
    du = grid[1] - grid[0]
    U1, U2 = np.meshgrid(mu[0] + grid, mu[1] + grid, indexing="ij")
    D = np.stack([U1 - mu[0], U2 - mu[1]], -1)
    logp = -0.5 * np.einsum("...i,ij,...j", D, np.linalg.inv(C), D) - 0.5 * np.log(np.linalg.det(2 * np.pi * C))
    s1 = 1 / (1 + np.exp(-beta * U1))
    s2 = 1 / (1 + np.exp(-beta * U2))
    for yy, f in ((y[0, 0], s1), (y[0, 1], 1 - s1), (y[1, 1], s2), (y[1, 0], 1 - s2)):
        logp = logp - (yy - f) ** 2 / (2 * noise) - 0.5 * np.log(2 * np.pi * noise)
    top = logp.max()
    w = np.exp(logp - top)
    Z = w.sum() * du * du
    Eu = np.array([(w * U1).sum(), (w * U2).sum()]) * du * du / Z
    # E[h12 | u] = omega12 + Cov(h12, u) C^{-1} (u - mu), Cov(h12, u_a) = -V
    Eh12 = o12 + (-V * np.ones(2)) @ np.linalg.solve(C, Eu - mu)
    Eh = np.array([[Eu[0] + Eh12, Eh12], [Eh12, Eu[1] + Eh12]])
    return top + math.log(Z), Eh


@pytest.mark.parametrize("beta,noise,V", [(1.0, 0.02, 0.7), (2.5, 0.005, 0.3), (0.7, 0.3, 1.4)])
def test_posterior_and_log_partition_match_brute_force(beta, noise, V):
    omega, y = draw(4, 0.8, V, beta, noise, seed=3)
    ch = NoisySoftmax(beta=beta, noise=noise)
    logz = ch.log_partition(y, omega, V)
    g = ch.g_out(y, omega, V)
    for i in range(4):
        lz, Eh = brute_force(y[i], omega[i], V, beta, noise)
        assert logz[i] == pytest.approx(lz, abs=1e-8)
        np.testing.assert_allclose(g[i], (Eh - omega[i]) / (SIGMA2 * V), atol=1e-8)


def test_g_out_is_the_gradient_of_log_partition():
    beta, noise, V, eps = 1.5, 0.05, 0.6, 1e-5
    omega, y = draw(5, 0.5, V, beta, noise, seed=7)
    ch = NoisySoftmax(beta=beta, noise=noise)
    g = ch.g_out(y, omega, V)
    for a, b in ((0, 0), (0, 1), (1, 1)):
        E = np.zeros((2, 2))
        E[a, b] = E[b, a] = eps
        fd = (ch.log_partition(y, omega + E, V) - ch.log_partition(y, omega - E, V)) / (2 * eps)
        np.testing.assert_allclose(g[:, a, b], fd, rtol=1e-6, atol=1e-7)


def test_nishimori_identities_on_channel_data():
    """On data from the channel: E[g] = 0 and E[g_ab^2] = -E[d g_ab / d omega_ab]."""
    beta, noise, q, V, eps = 1.0, 0.02, 0.6, 0.9, 1e-4
    omega, y = draw(6000, q, V, beta, noise, seed=11)
    ch = NoisySoftmax(beta=beta, noise=noise)
    g = ch.g_out(y, omega, V)
    for a, b in ((0, 0), (0, 1)):
        E = np.zeros((2, 2))
        E[a, b] = E[b, a] = eps
        dg = (ch.g_out(y, omega + E, V)[:, a, b] - ch.g_out(y, omega - E, V)[:, a, b]) / (2 * eps)
        se_mean = g[:, a, b].std() / math.sqrt(len(g))
        assert abs(g[:, a, b].mean()) < 4 * se_mean
        # Monte Carlo at n = 6000: the difference of the two sides has relative standard error 1.6 %,
        # 0.05 is ~3 of them (observed 0.1 % and 3.5 %)
        assert np.mean(g[:, a, b] ** 2) == pytest.approx(-np.mean(dg), rel=0.05)


def test_fisher_matches_monte_carlo_through_the_channel():
    """F_out from the reduced Sobol average equals 2 sum sigma2 E[g^2] on channel samples."""
    beta, noise, Q0, q = 1.0, 0.02, 1.5, 0.7
    omega, y = draw(8000, q, Q0 - q, beta, noise, seed=5)
    g = NoisySoftmax(beta=beta, noise=noise).g_out(y, omega, Q0 - q)
    w = 2 * np.array([2 * g[:, 0, 0] ** 2, g[:, 0, 1] ** 2, 2 * g[:, 1, 1] ** 2]).sum(0)
    mc, err = w.mean(), w.std() / math.sqrt(len(w))
    F = NoisySoftmax(beta=beta, noise=noise).fisher(q, Q0, 2)
    # four Monte Carlo standard errors (1 % each at n = 8000) plus 0.5 %: fisher_direct moves by
    # 0.1-0.5 % with the Sobol scramble (fisher's docstring); observed -0.7 standard errors
    assert abs(F - mc) < 4 * err + 0.005 * F


@pytest.mark.slow
def test_fisher_noiseless_limit_from_below():
    """Less noise, more information: F_out increases towards the noiseless 4/V.

    The approach is slow (the deficit shrinks roughly like sqrt(noise)): where
    the logistic saturates, a small noise still hides the index.
    """
    Q0, q = 1.5, 0.4
    F = [ns.fisher(q, Q0, 1.0, noise, exact=True) for noise in (0.3, 0.03, 0.003, 1e-4)]
    assert all(a < b for a, b in zip(F, F[1:]))
    assert F[-1] < 4 / (Q0 - q)
    assert F[-1] > 0.98 * 4 / (Q0 - q)      # the sqrt(noise) deficit: 1.6 % at noise = 1e-4


@pytest.mark.parametrize("q", [0.2, 1.0])
def test_fisher_small_beta_is_the_linearised_channel(q):
    """beta -> 0: z_a = 1/2 + beta u_a / 4 + N(0, noise/2), i.e. u observed with noise delta = 8 noise/beta^2:
    F_out = (2/V) tr((C + delta)^{-1} C) = (2/V)(4V/(4V + delta) + 2V/(2V + delta))."""
    Q0, beta, noise = 1.5, 0.05, 5e-5
    V, delta = Q0 - q, 8 * noise / beta**2
    F_lin = (2 / V) * (4 * V / (4 * V + delta) + 2 * V / (2 * V + delta))
    # the linearisation drops O(beta^2) = 2.5e-3 and fisher_direct's Sobol average moves by 0.1-0.5 %
    # (fisher's docstring); observed -7.9e-4 and -7.6e-4
    assert ns.fisher(q, Q0, beta, noise, exact=True) == pytest.approx(F_lin, rel=3e-3)


def test_fisher_interpolant_and_finite_at_q0():
    Q0, beta, noise = 1.5, 1.0, 0.05
    for q in (0.05, 0.6, 1.3):
        assert ns.fisher(q, Q0, beta, noise) == pytest.approx(ns.fisher(q, Q0, beta, noise, exact=True),
                                                              rel=1e-3)
    closed = ns.fisher_at_q0(Q0, beta, noise)
    assert ns.fisher(Q0, Q0, beta, noise) == closed == ns.fisher(Q0, Q0, beta, noise, exact=True)
    assert ns.fisher_direct(Q0, Q0, beta, noise) == closed


@pytest.mark.slow
def test_fisher_interpolant_accuracy_next_to_q0():
    """The documented accuracy at the smallest noise, where F_out is steepest as q -> Q0."""
    Q0, beta, noise = 1.5, 1.0, 1e-3
    for f, rel in ((0.5, 5e-3), (0.97, 5e-3), (0.99, 5e-3), (0.999, 5e-3), (0.9999, 1e-2)):
        q = f * Q0
        assert ns.fisher(q, Q0, beta, noise) == pytest.approx(ns.fisher_direct(q, Q0, beta, noise), rel=rel)


@pytest.mark.parametrize("call, match", [
    (lambda: ns.fisher_direct(-1.0, 1.5, 1.0, 0.1), r"q must be in \[0.0, 1.5\]"),
    (lambda: ns.fisher_direct(float("nan"), 1.5, 1.0, 0.1), "q must be finite"),
    (lambda: ns.fisher_direct(0.5, 1.5, -1.0, 0.1), "beta must be > 0"),
    (lambda: ns.fisher(1.6, 1.5, 1.0, 0.1), r"q must be in \[0.0, 1.5\]"),
    (lambda: ns.grid_size(1.0, -1.0, 0.1), "beta must be > 0"),
    (lambda: ns.grid_size(0.0, 1.0, 0.1), "V must be > 0"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("beta,noise", [(1.0, 0.01), (2.0, 0.05), (0.5, 0.3)])
def test_fisher_at_q0_closed_form(beta, noise):
    """V -> 0: F_out is the Fisher information of the channel, (24 beta^2/noise) E sigma'(beta u)^2;
    checked against scipy.integrate.quad and against the quadrature route at q -> Q0."""
    from scipy.integrate import quad

    Q0 = 1.5
    sd = math.sqrt(3 * Q0)

    def integrand(u):
        s = 1 / (1 + math.exp(-beta * u))
        return math.exp(-u * u / (2 * sd * sd)) / (sd * math.sqrt(2 * math.pi)) * (s * (1 - s)) ** 2

    closed = 24 * beta**2 / noise * quad(integrand, -80, 80, limit=200)[0]
    assert ns.fisher_at_q0(Q0, beta, noise) == pytest.approx(closed, rel=1e-10)
    # the quadrature route is a 2^11-point Sobol average, 0.1-0.5 % (fisher's docstring): observed
    # +0.29 %, -0.48 %, +0.56 %
    assert ns.fisher_direct(Q0 - 1e-6, Q0, beta, noise) == pytest.approx(closed, rel=0.01)


def test_large_alpha_error_decays_like_one_over_alpha():
    """E_S ~ c0 / (alpha F_out(Q0)), c0 = 2 rho - rho^2 the slope of the prior MMSE at zero noise."""
    rho, noise = 0.5, 0.01
    alpha = 30.0
    E = se.solve(alpha, T=2, rho=rho, noise=noise).mmse
    # the leading 1/alpha term only: the relative correction is 0.6 % at alpha = 30 (0.08 % at 100)
    assert alpha * E == pytest.approx((2 * rho - rho**2) / ns.fisher_at_q0(1 + rho, 1.0, noise), rel=0.03)


def test_state_evolution_with_noise_has_no_perfect_recovery():
    rho, T, beta = 0.5, 2, 1.0
    a_pr = se.perfect_recovery_threshold(rho, T)
    alphas = np.array([0.3, 1.0, 1.5]) * a_pr
    clean = se.curve(alphas, T=T, rho=rho).mmse
    for noise in (0.1, 0.01):
        noisy = np.array([se.solve(a, T=T, rho=rho, beta=beta, noise=noise).mmse for a in alphas])
        assert np.all(noisy > clean)
        assert np.all(np.diff(noisy) < 0)
        assert noisy[-1] > 0.01
    # small noise: close to the noiseless curve well below the threshold
    small = se.solve(alphas[0], T=T, rho=rho, beta=beta, noise=1e-3).mmse
    # the excess shrinks roughly like sqrt(noise): +10.8 %, +3.9 %, +1.2 % at noise 1e-2, 1e-3, 1e-4
    assert small == pytest.approx(clean[0], rel=0.05)


def test_generalization_error_adds_the_label_noise():
    q, Q0 = 0.6, 1.5
    clean = se.generalization_error(q, Q0, 2)
    assert se.generalization_error(q, Q0, 2, noise=0.07) == pytest.approx(clean + 2 * 0.07, rel=1e-12)


def test_bad_inputs_name_the_parameter():
    y = np.full((3, 2, 2), 0.5)
    with pytest.raises(NotImplementedError, match="T = 2 only"):
        NoisySoftmax(noise=0.1).fisher(0.2, 1.5, 3)
    with pytest.raises(ValueError, match="noise=1e-09 is too small"):
        NoisySoftmax(noise=1e-9).g_out(y, np.zeros_like(y), 1.0)
    with pytest.raises(ValueError, match="noise"):
        ns.fisher(0.1, 1.5, 1.0, -0.1)


@pytest.mark.slow
def test_amp_tracks_state_evolution_with_label_noise():
    """GAMP-RIE with the noisy g_out at d = 80 lands on the SE error (tolerance as for the noiseless tests)."""
    rho, noise, alpha = 0.5, 0.02, 0.25
    res = run_amp(NoisySoftmax(noise=noise), 2, rho, alpha, 80, seed=0)
    assert res["converged"]
    E_se = se.solve(alpha, T=2, rho=rho, noise=noise).mmse
    assert abs(res["mmse"] - E_se) < 0.06


@pytest.mark.slow
def test_the_shipped_coefficients_are_those_tabulate_computes():
    """``aimlib/data/softmax_noisy_tables.npz`` holds what :func:`tabulate` gives now, and is read."""
    stored = ns.stored_tables()
    assert stored, "no table shipped, or its settings differ from the module's"
    for key, coef in stored.items():
        np.testing.assert_allclose(coef, ns.tabulate(*key), rtol=1e-12, atol=1e-14)
        ns._cheb.cache_clear()
        assert ns._cheb(*key) is coef
