"""Tests of the hardmax (T = 2) Bayes side: Z_out, g_out, F_out and the rho -> 0 limit.

Every check is seeded and deterministic; Monte Carlo tolerances come from the
Monte Carlo standard error.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from aimlib.channels import _bivariate, hardmax as hm
from aimlib.channels import Hardmax

SIGMA2 = np.array([[2.0, 1.0], [1.0, 2.0]])
SE_KW = dict(tol=1e-9, damping=0.3, max_iter=20000)
SIGNS = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])


def _sym(a11, a22, a12):
    a11, a22, a12 = np.broadcast_arrays(a11, a22, a12)
    out = np.empty(a11.shape + (2, 2))
    out[..., 0, 0], out[..., 1, 1] = a11, a22
    out[..., 0, 1] = out[..., 1, 0] = a12
    return out


def _sample_indices(rng, n, var):
    """``n`` symmetric 2x2 Gaussian matrices of covariance ``var * Sigma`` (independent entries)."""
    z = rng.standard_normal((n, 3))
    return _sym(math.sqrt(2 * var) * z[:, 0], math.sqrt(2 * var) * z[:, 1], math.sqrt(var) * z[:, 2])


def _log_bvn_reference(h, k, r):
    """log Phi_2 by adaptive scipy quadrature of phi(x) Phi((k - r x)/c), shifted by its maximum."""
    c = math.sqrt(1 - r * r)

    def f(x):
        return -0.5 * x * x - 0.5 * math.log(2 * math.pi) + special.log_ndtr((k - r * x) / c)

    grid = np.linspace(min(h, 0.0) - 60, h, 40001)
    fm = max(f(x) for x in grid)
    val = integrate.quad(lambda x: math.exp(f(x) - fm), -np.inf, h, limit=400,
                         epsabs=0, epsrel=1e-13)[0]
    return fm + math.log(val)


# ----------------------------------------------------------------------- orthant probability
def test_bvn_matches_scipy_in_the_bulk():
    rng = np.random.default_rng(0)
    h, k = rng.uniform(-3, 3, (2, 40))
    r = rng.choice([1 / 3, -1 / 3], 40)
    ref = np.array([stats.multivariate_normal(cov=[[1, rr], [rr, 1]]).cdf([a, b])
                    for a, b, rr in zip(h, k, r)])
    assert np.allclose(hm.bvn_cdf(h, k, r), ref, rtol=1e-7, atol=1e-12)
    # closed form at the origin
    for r0 in (1 / 3, -1 / 3, 0.7):
        assert hm.bvn_cdf(0.0, 0.0, r0) == pytest.approx(0.25 + math.asin(r0) / (2 * math.pi), rel=1e-13)


@pytest.mark.parametrize("h,k,r", [(-40, -40, 1 / 3), (-40, -40, -1 / 3), (-40, 3, 1 / 3),
                                   (3, -40, -1 / 3), (-10, -2, -1 / 3), (0.0, -30, 1 / 3),
                                   (-6, -6, -1 / 3), (-2.5, -2.5, 1 / 3)])
def test_log_bvn_tails_are_finite_and_accurate(h, k, r):
    got = float(hm.log_bvn_cdf(h, k, r))
    assert np.isfinite(got)
    assert got == pytest.approx(_log_bvn_reference(h, k, r), rel=1e-11, abs=1e-11)


def test_closed_form_and_quadrature_agree_where_both_apply():
    rng = np.random.default_rng(1)
    h, k = rng.uniform(-4, 4, (2, 5000))
    r = rng.choice([1 / 3, -1 / 3], 5000)
    owen = _bivariate._bvn_owen(h, k, r)
    quad = np.exp(_bivariate._log_bvn_quad(h, k, r))
    assert np.max(np.abs(owen - quad)) < 1e-14


# ----------------------------------------------------------------------- Z_out
def test_probabilities_sum_to_one_and_match_brute_force_sampling():
    rng = np.random.default_rng(2)
    V = 0.7
    omega = _sample_indices(rng, 6, 0.8)
    P = hm.probabilities(omega, V)
    assert np.allclose(P.sum(axis=-1), 1.0, atol=1e-13)
    n = 200_000
    ch = Hardmax()
    for i in range(omega.shape[0]):
        h = omega[i] + _sample_indices(rng, n, V)
        s = hm.signs_from_output(ch(h))
        emp = np.array([np.mean(np.all(s == sg, axis=1)) for sg in SIGNS])
        se = np.sqrt(P[i] * (1 - P[i]) / n)
        assert np.all(np.abs(emp - P[i]) < 5 * se + 1e-12), (emp, P[i])


def test_one_hot_and_sign_inputs_agree_and_channel_delegates():
    rng = np.random.default_rng(3)
    omega = _sample_indices(rng, 50, 1.0)
    s = SIGNS[rng.integers(0, 4, 50)]
    y = hm.output_from_signs(s)
    assert np.array_equal(hm.signs_from_output(y), s)
    ch = Hardmax()
    assert np.allclose(ch.log_partition(y, omega, 0.5), hm.log_partition(s, omega, 0.5))
    assert np.allclose(ch.g_out(y, omega, 0.5), hm.g_out(s, omega, 0.5))
    g = ch.g_out(y, omega, 0.5)
    assert g.shape == (50, 2, 2) and np.allclose(g, np.swapaxes(g, -1, -2))
    # the output of the forward channel is accepted as is
    h = omega + _sample_indices(rng, 50, 0.5)
    assert np.all(np.isfinite(ch.g_out(ch(h), omega, 0.5)))


# ----------------------------------------------------------------------- g_out
def _fd_grad(s, omega, V, eps):
    out = np.empty(omega.shape[:-2] + (3,))
    for j, (a, b) in enumerate([(0, 0), (1, 1), (0, 1)]):
        e = np.zeros((2, 2))
        e[a, b] = e[b, a] = 1.0
        lp = hm.log_partition(s, omega + eps * e, V)
        lm = hm.log_partition(s, omega - eps * e, V)
        out[..., j] = (lp - lm) / (2 * eps)
    return out


@pytest.mark.parametrize("scale", [0.5, 3.0, 40.0])
def test_g_out_is_the_gradient_of_log_partition(scale):
    rng = np.random.default_rng(4)
    V = 0.6
    omega = _sample_indices(rng, 40, 1.0) * scale / math.sqrt(3)
    s = SIGNS[rng.integers(0, 4, 40)]
    g = hm.g_out(s, omega, V)
    fd = _fd_grad(s, omega, V, eps=1e-5 * max(1.0, scale))
    got = np.stack([g[:, 0, 0], g[:, 1, 1], g[:, 0, 1]], axis=-1)
    assert np.all(np.isfinite(got))
    assert np.allclose(got, fd, rtol=2e-6, atol=2e-7 * max(1.0, scale))


def test_g_out_far_in_the_tails():
    # kappa_i ~ -40: Z_out ~ exp(-1200) and g ~ kappa: no underflow, no 0/0
    V = 1.0
    s = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    m = -40 * math.sqrt(3 * V)
    omega = np.array([_sym(m, m, 0.0), _sym(m, -m, 0.0), _sym(-m, -m, 0.0)])
    lz = hm.log_partition(s, omega, V)
    assert np.all(np.isfinite(lz)) and np.all(lz < -700)
    g = hm.g_out(s, omega, V)
    assert np.all(np.isfinite(g))
    fd = _fd_grad(s, omega, V, eps=1e-4)
    got = np.stack([g[:, 0, 0], g[:, 1, 1], g[:, 0, 1]], axis=-1)
    assert np.allclose(got, fd, rtol=1e-6, atol=1e-6)
    # leading tail at the corner kappa_1 = kappa_2 = -40, r = 1/3: the density peaks at the
    # corner, so d log Phi_2 / d kappa_1 ~ -(kappa_1 - r kappa_2) / (1 - r^2) = 30, up to a relative
    # O(1/kappa^2) correction (observed 8.3e-4; the tolerance was 0.01)
    assert g[0, 0, 0] == pytest.approx(30 / math.sqrt(3 * V), rel=2e-3)


def test_nishimori_identity_exact_per_omega():
    """sum_y P(y|omega) [g g^T + d g/d omega] = 0 for every omega (the four outputs, no sampling)."""
    rng = np.random.default_rng(5)
    V = 0.8
    omega = _sample_indices(rng, 20, 1.0)
    P = hm.probabilities(omega, V)
    keys = [(0, 0), (1, 1), (0, 1)]
    total = np.zeros((20, 3, 3))
    for j, sg in enumerate(SIGNS):
        s = np.broadcast_to(sg, (20, 2))
        g = hm.g_out(s, omega, V)
        gv = np.stack([g[:, a, b] for a, b in keys], -1)
        hess = np.empty((20, 3, 3))
        for c, (a, b) in enumerate(keys):
            e = np.zeros((2, 2))
            e[a, b] = e[b, a] = 1.0
            gp, gm = hm.g_out(s, omega + 1e-5 * e, V), hm.g_out(s, omega - 1e-5 * e, V)
            hess[:, :, c] = np.stack([(gp - gm)[:, a2, b2] for a2, b2 in keys], -1) / 2e-5
        total += P[:, j, None, None] * (gv[:, :, None] * gv[:, None, :] + hess)
    assert np.max(np.abs(total)) < 1e-7


def test_nishimori_identity_monte_carlo_from_the_channel():
    """E[g g^T] = -E[d g] with omega ~ N(0, q Sigma), h ~ N(omega, V Sigma), y = Hardmax(h)."""
    rng = np.random.default_rng(6)
    q, V, n = 0.9, 0.6, 100_000
    omega = _sample_indices(rng, n, q)
    y = Hardmax()(omega + _sample_indices(rng, n, V))
    keys = [(0, 0), (1, 1), (0, 1)]
    g = hm.g_out(y, omega, V)
    gv = np.stack([g[:, a, b] for a, b in keys], -1)
    lhs = gv[:, :, None] * gv[:, None, :]
    rhs = np.empty((n, 3, 3))
    for c, (a, b) in enumerate(keys):
        e = np.zeros((2, 2))
        e[a, b] = e[b, a] = 1.0
        d = (hm.g_out(y, omega + 1e-5 * e, V) - hm.g_out(y, omega - 1e-5 * e, V)) / 2e-5
        rhs[:, :, c] = -np.stack([d[:, a2, b2] for a2, b2 in keys], -1)
    diff = lhs - rhs
    mean, sem = diff.mean(0), diff.std(0) / math.sqrt(n)
    assert np.all(np.abs(mean) < 5 * sem), (mean, sem)
    # and the identity is not empty: E[g g^T] is clearly non-zero
    assert np.all(np.abs(lhs.mean(0)[[0, 1], [0, 1]]) > 20 * sem[[0, 1], [0, 1]])


# ----------------------------------------------------------------------- F_out
def test_fisher_at_the_trivial_point_is_the_closed_form():
    assert hm.fisher(0.0, 1.0, exact=True) == pytest.approx(1 / hm.weak_recovery_threshold(), rel=1e-12)
    assert hm.weak_recovery_threshold() == pytest.approx(0.4034106290375, rel=1e-12)


def test_fisher_interpolant_matches_direct_quadrature():
    lam = np.array([0.0, 1e-6, 0.01, 0.37, 1.0, 4.2, 55.0, 3e3, 7e5, 5e7])
    assert np.allclose(hm.fisher_scaled(lam), hm.fisher_scaled(lam, exact=True), rtol=1e-9, atol=0)
    # large lambda: G ~ c / sqrt(lambda)
    big = hm.fisher_scaled(np.array([1e6, 1e7])) * np.sqrt([1e6, 1e7])
    assert big[0] == pytest.approx(big[1], rel=1e-3)


def test_fisher_matches_monte_carlo():
    rng = np.random.default_rng(7)
    q, Q0, n = 0.8, 1.5, 400_000
    V = Q0 - q
    omega = _sample_indices(rng, n, q)
    y = Hardmax()(omega + _sample_indices(rng, n, V))
    g = hm.g_out(y, omega, V)
    x = 2 * np.sum(np.triu(SIGMA2) * g**2, axis=(-1, -2))
    mc, sem = x.mean(), x.std() / math.sqrt(n)
    F = hm.fisher(q, Q0)
    assert abs(mc - F) < 5 * sem, (mc, F, sem)
    # the channel method is the same number
    assert Hardmax().fisher(q, Q0, 2) == F


def test_fisher_matches_brute_force_quadrature_of_g_out():
    """F_out from scipy's adaptive 2-d quadrature of sum_y P(y|omega) 2 sum sigma2 g^2 (public API only)."""
    q, V = 0.4, 1.0
    L = np.linalg.cholesky(3 * q * np.array([[1, 1 / 3], [1 / 3, 1]]))
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / math.sqrt(2 * math.pi)
    z1, z2 = np.meshgrid(nodes, nodes, indexing="ij")
    m = np.einsum("ij,jab->iab", L, np.stack([z1, z2]))
    omega = _sym(m[0], m[1], 0.0)
    tot = 0.0
    for sg in SIGNS:
        s = np.broadcast_to(sg, omega.shape[:-2] + (2,))
        g = hm.g_out(s, omega, V)
        P = np.exp(hm.log_partition(s, omega, V))
        tot = tot + P * 2 * np.sum(np.triu(SIGMA2) * g**2, axis=(-1, -2))
    brute = float(np.sum(weights[:, None] * weights[None, :] * tot))
    assert brute == pytest.approx(hm.fisher(q, q + V), rel=1e-9)


# ----------------------------------------------------------------------- bad input
def test_bad_inputs_raise_with_the_parameter_name():
    ch = Hardmax()
    omega = np.zeros((3, 2, 2))
    s = np.ones((3, 2))
    with pytest.raises(ValueError, match="T"):
        ch.fisher(0.3, 1.5, 4)  # T = 3 is tabulated (aimlib.channels.hardmax_polytope)
    with pytest.raises(ValueError, match="V"):
        ch.g_out(s, omega, 0.0)
    with pytest.raises(ValueError, match="V"):
        hm.log_partition(s, omega, -1.0)
    with pytest.raises(ValueError, match="y"):
        hm.g_out(np.full((3, 2), 0.5), omega, 1.0)
    with pytest.raises(ValueError, match="y"):
        hm.g_out(np.full((3, 2, 2), 0.5), omega, 1.0)
    with pytest.raises(ValueError, match="omega"):
        hm.g_out(np.ones((3, 3)), np.zeros((3, 3, 3)), 1.0)
    with pytest.raises(ValueError, match="q"):
        hm.fisher(1.5, 1.5)
    with pytest.raises(ValueError, match="Q0"):
        hm.fisher(0.1, -1.0)
    with pytest.raises(NotImplementedError, match="noise"):
        Hardmax(noise=0.1).g_out(s, omega, 1.0)


# ----------------------------------------------------------------------- rho -> 0 limit
def test_limit_error_has_a_transition_at_the_closed_form_threshold():
    wr = hm.weak_recovery_threshold()
    assert hm.limit_error(0.98 * wr) == 1.0
    assert hm.limit_error(1.02 * wr) < 1.0
    # bisection on the iterated map (uses the quadrature F, not the closed form) finds it again
    lo, hi = 0.3, 0.5
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if hm.limit_error(mid) >= 1 - 1e-14 else (lo, mid)
    assert 0.5 * (lo + hi) == pytest.approx(wr, rel=1e-6)
    # no coexisting informative branch below the threshold
    assert hm.limit_error(0.98 * wr, start=1e-3) == 1.0


def test_small_rho_state_evolution_approaches_the_limit():
    """Finite-rho SE (shared solver, rmt prior) at rho = 1e-3, 1e-4 against the rho -> 0 limit."""
    se = pytest.importorskip("aimlib.state_evolution")
    wr = hm.weak_recovery_threshold()
    for rho in (1e-3, 1e-4):
        below = se.fixed_point(0.9 * wr * rho, "hardmax", rho=rho, **SE_KW).mmse
        assert below > 1 - 10 * rho          # 1 - O(rho) below the threshold: observed 1 - 6.7 rho, 1 - 8.4 rho
    for abar in (0.6, 1.0):
        lim = hm.limit_error(abar)
        e3 = se.fixed_point(abar * 1e-3, "hardmax", rho=1e-3, **SE_KW).mmse
        e4 = se.fixed_point(abar * 1e-4, "hardmax", rho=1e-4, **SE_KW).mmse
        # the finite-rho correction is linear in rho: -3.5e-3 at rho = 1e-3, -3.5e-4 at 1e-4 (alpha_bar = 0.6)
        assert abs(e4 - lim) < 2e-3 and abs(e4 - lim) < abs(e3 - lim) + 1e-4
    # across the transition region the finite-rho curves converge uniformly to the limit,
    # whose kink sits at alpha_bar_WR: the transition is at the same place
    grid = wr * np.linspace(1.0, 1.6, 7)
    lim = np.array([hm.limit_error(a) for a in grid])
    dev = {rho: np.max(np.abs(np.array([se.fixed_point(a * rho, "hardmax", rho=rho, **SE_KW).mmse
                                        for a in grid]) - lim)) for rho in (1e-3, 1e-4)}
    # next to the kink the convergence is slower than O(rho): observed 0.0154 at rho = 1e-3, 0.0028 at 1e-4
    assert dev[1e-4] < 0.006 and dev[1e-4] < 0.5 * dev[1e-3] and dev[1e-3] < 0.03



def test_channel_dispatches_T3_to_the_cone_module():
    from aimlib.channels import hardmax_polytope as hp

    rng = np.random.default_rng(12)
    A = rng.standard_normal((4, 3, 3))
    omega = A + np.swapaxes(A, -1, -2)
    y = Hardmax()(omega)
    assert np.array_equal(Hardmax().log_partition(y, omega, 0.5), hp.log_partition(y, omega, 0.5))
    assert np.array_equal(Hardmax().g_out(y, omega, 0.5), hp.g_out(y, omega, 0.5))
    assert Hardmax().fisher(0.3, 1.5, 2) == hm.fisher(0.3, 1.5)
    with pytest.raises(ValueError, match="T must be <= 3"):
        Hardmax().fisher(0.3, 1.5, 4)
