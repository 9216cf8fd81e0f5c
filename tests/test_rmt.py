"""Tests of aimlib.rmt: spectra, Stieltjes transform, support, MMSE and the RIE."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate

from aimlib import model, rmt
from aimlib.backend import get_array_module, to_device, to_host

pytestmark = pytest.mark.filterwarnings("error")

RHOS = [0.001, 0.01, 0.1, 0.5, 0.9, 1.5, 2.0, 10.0, 100.0, 1000.0]
DELTAS = [1e-8, 1e-6, 1e-3, 0.1, 1.0, 10.0, 1e3, 1e6, 1e8]


# ----------------------------------------------------------------------------- invariants
@pytest.mark.parametrize("rho", RHOS)
def test_invariants_mass_mean_second_moment(rho):
    for delta in DELTAS:
        mass, mean, m2 = rmt.moments(delta, rho)
        assert abs(mass - 1) < 1e-10, (rho, delta, mass)
        assert abs(mean / math.sqrt(rho) - 1) < 1e-10, (rho, delta, mean)
        assert abs(m2 / (1 + rho + delta) - 1) < 1e-10, (rho, delta, m2)


@pytest.mark.parametrize("rho", [0.999, 1.0, 1.001])
def test_invariants_near_rho_one(rho):
    # rho = 1: hard edge of Marchenko-Pastur; at small Delta an edge sits O(Delta) from a fold
    for delta in [1e-8, 1e-6, 1e-4, 1e-2, 1.0, 1e2]:
        mass, mean, m2 = rmt.moments(delta, rho)
        assert abs(mass - 1) < 1e-10 and abs(mean / math.sqrt(rho) - 1) < 1e-10
        assert abs(m2 / (1 + rho + delta) - 1) < 1e-10


def test_invariants_random_parameters():
    rng = np.random.default_rng(0)
    for _ in range(300):
        rho = 10 ** rng.uniform(-3, 3)
        delta = 10 ** rng.uniform(-8, 8)
        mass, mean, m2 = rmt.moments(delta, rho)
        err = max(abs(mass - 1), abs(mean / math.sqrt(rho) - 1), abs(m2 / (1 + rho + delta) - 1))
        assert err < 1e-10, (rho, delta, err)
        m = rmt.mmse(delta, rho)
        assert 0 < m <= delta / (1 + delta) * (1 + 1e-12)


def test_two_interval_support_and_merging():
    assert len(rmt.support(0.01, 0.2)) == 2
    assert len(rmt.support(1.0, 0.2)) == 1
    assert len(rmt.support(0.01, 2.0)) == 1
    # invariants right across the merging of the two intervals
    for delta in np.geomspace(0.05, 0.5, 15):
        mass, mean, m2 = rmt.moments(delta, 0.2)
        assert abs(mass - 1) < 1e-10 and abs(m2 / (1.2 + delta) - 1) < 1e-10


# ----------------------------------------------------------------------------- MMSE
@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 0.1, 1.0, 10.0])
def test_mmse_equals_cubed_density_formula(rho, delta):
    direct = delta - 4 * math.pi**2 / 3 * delta**2 * rmt.integral_density_cubed(delta, rho)
    assert rmt.mmse(delta, rho) == pytest.approx(direct, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("rho", [0.001, 0.1, 0.5, 0.9])
def test_mmse_small_delta_limit_rho_below_one(rho):
    delta = 1e-8
    assert rmt.mmse(delta, rho) / delta == pytest.approx(2 * rho - rho**2, rel=1e-6)


@pytest.mark.parametrize("rho,tol", [(1.0, 1e-4), (1.5, 1e-6), (10.0, 1e-6), (1000.0, 1e-6)])
def test_mmse_small_delta_limit_rho_above_one(rho, tol):
    delta = 1e-8
    assert rmt.mmse(delta, rho) / delta == pytest.approx(1.0, rel=tol)


@pytest.mark.parametrize("rho", [0.001, 0.5, 2.0, 1000.0])
def test_mmse_large_delta(rho):
    # mmse = Delta/(1+Delta) - 1/(rho Delta^2) + O(Delta^-3): checks the whole large-Delta tail.  The next
    # order is relatively O(1/(rho Delta)) (observed 1.1/(rho Delta) at rho = 1e-3) and O(1/Delta) (<= 4/Delta);
    # 1e-3 is the float64 floor: at rho = 1000, Delta = 1e5 the gap 1e-13 of an mmse near 1 is resolved to
    # ~1e-16/1e-13 (observed 3e-4).  (The first term was 30/(rho Delta).)
    for delta in [1e4, 1e5]:
        gap = (delta / (1 + delta) - rmt.mmse(delta, rho)) * rho * delta**2
        assert gap == pytest.approx(1.0, abs=3.0 / (rho * delta) + 1e-3)
    assert rmt.mmse(1e8, rho) == pytest.approx(1 - 1e-8, abs=1e-13)


def test_mmse_gaussian_prior_limit():
    # rho -> infinity: S - sqrt(rho) I tends to a unit GOE and mmse -> Delta/(1+Delta)
    for delta in [0.1, 1.0, 10.0]:
        gaps = [abs(rmt.mmse(delta, rho) - rmt.mmse_gaussian(delta)) for rho in (10.0, 100.0, 1000.0)]
        assert gaps[2] < 2e-4 and gaps[0] > gaps[1] > gaps[2]
    assert rmt.mmse_gaussian(1.0) == 0.5
    np.testing.assert_allclose(rmt.mmse_gaussian(np.array([1.0, 3.0])), [0.5, 0.75])


@pytest.mark.parametrize("rho", [0.001, 0.2, 1.0, 3.0, 1000.0])
def test_mmse_monotone_bounded_smooth(rho):
    deltas = np.geomspace(1e-8, 1e8, 161)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = rmt.mmse(deltas, rho)
    assert np.all(np.isfinite(m)) and np.all(m > 0)
    assert np.all(np.diff(m) > 0)
    assert np.all(m <= deltas / (1 + deltas) * (1 + 1e-12))
    # smooth in log(Delta): second differences of log(mmse) are O(h^2), h = ln(10)/10 = 0.23, so 0.2 allows a
    # curvature |d^2 log m / d(log Delta)^2| up to ~4 (observed max |d2|: 0.059 at rho = 1e-3, 0.013 otherwise)
    d2 = np.diff(np.log(m), 2)
    assert np.max(np.abs(d2)) < 0.2
    # and no jitter on a fine grid across the merging region
    fine = np.geomspace(0.01, 10.0, 400)
    mf = rmt.mmse(fine, rho)
    d2f = np.diff(np.log(mf), 2)
    assert np.max(np.abs(np.diff(d2f))) < 1e-5


def test_mmse_vectorised_matches_scalar():
    arr = rmt.mmse(np.array([[0.1, 1.0], [10.0, 100.0]]), 0.5)
    assert arr.shape == (2, 2)
    assert arr[0, 1] == rmt.mmse(1.0, 0.5)


# ----------------------------------------------------------------------------- density, support, Stieltjes
@pytest.mark.parametrize("rho,delta", [(0.2, 0.01), (0.5, 0.1), (2.0, 1.0), (0.001, 1e-3)])
def test_support_edges_are_discriminant_roots_and_density_vanishes(rho, delta):
    quartic = rmt.discriminant_quartic(delta, rho)
    for a, b in rmt.support(delta, rho):
        width = b - a
        for e in (a, b):
            scale = np.polyval(np.abs(quartic), abs(e) + width)
            assert abs(np.polyval(quartic, e)) < 1e-9 * scale
        inside = rmt.density(np.array([a + 1e-6 * width, b - 1e-6 * width]), delta, rho)
        outside = rmt.density(np.array([a - 1e-6 * width, b + 1e-6 * width]), delta, rho)
        assert np.all(inside > 0) and np.all(outside == 0)
        mid = rmt.density(np.linspace(a, b, 50)[1:-1], delta, rho)
        assert np.all(mid > 0)
    # the discriminant is negative exactly on the support
    x = np.linspace(-3, 6, 400)
    inside = np.zeros_like(x, bool)
    for a, b in rmt.support(delta, rho):
        inside |= (x > a) & (x < b)
    disc = np.polyval(quartic, x)
    assert np.all(disc[inside] < 0) and np.all(disc[~inside] > 0)


def test_density_matches_quadrature_boundary_values():
    # density()/hilbert() solve the cubic; the quadrature nodes use the explicit arc: they must agree
    for rho, delta in [(0.2, 0.01), (1.0, 0.1), (5.0, 2.0)]:
        x, w, g = rmt.quadrature(delta, rho)
        # (close to an edge the cubic route loses accuracy like sqrt(eps): absolute tolerance)
        np.testing.assert_allclose(rmt.density(np.array(x), delta, rho), -g.imag / np.pi, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(rmt.hilbert(np.array(x), delta, rho), g.real, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rho,delta", [(0.5, 0.1), (0.2, 0.02), (3.0, 0.5)])
def test_density_vs_sampled_spectrum(rho, delta):
    d = 1000
    _, Y = rmt.sample_denoising(d, delta, rho, seed=7)
    lam = np.linalg.eigvalsh(Y)
    F = rmt.cdf(lam, delta, rho)
    ks = np.max(np.abs(F - (np.arange(1, d + 1) - 0.5) / d))
    # eigenvalues are rigid: the distance to the limit law is O(log d / d) (seeds 7-9: 0.0023-0.0036),
    # far below the ~1/sqrt(d) = 0.03 of independent samples, which the wrong Delta must exceed
    assert ks < 0.02
    # and a wrong Delta is detected
    assert np.max(np.abs(rmt.cdf(lam, 2 * delta + 0.2, rho) - (np.arange(1, d + 1) - 0.5) / d)) > 0.03


def test_density_S_and_sampled_teacher():
    for rho in (0.5, 2.0):
        lo, hi = rmt.support_S(rho)
        mass = integrate.quad(lambda x: rmt.density_S(x, rho), lo, hi, limit=200)[0]
        mean = integrate.quad(lambda x: x * rmt.density_S(x, rho), lo, hi, limit=200)[0]
        m2 = integrate.quad(lambda x: x * x * rmt.density_S(x, rho), lo, hi, limit=200)[0]
        assert mass == pytest.approx(min(1.0, rho), abs=1e-7)
        assert mean == pytest.approx(math.sqrt(rho), abs=1e-7)
        assert m2 == pytest.approx(1 + rho, abs=1e-7)
        assert rmt.atom_S(rho) == pytest.approx(max(0.0, 1 - rho))
        S, _ = rmt.sample_denoising(800, 1.0, rho, seed=3)
        lam = np.linalg.eigvalsh(S)
        nonzero = lam[lam > 1e-8]
        # the rank is r = round(rho d) exactly, 400 of 800 or all 800 (the tolerance was 0.01)
        assert len(nonzero) / 800 == pytest.approx(min(1.0, rho), abs=1e-12)
        # the extreme eigenvalues sit O(d^(-2/3)) ~ 0.012 from the edges at d = 800 (observed within 0.036)
        assert nonzero.min() > lo - 0.1 and nonzero.max() < hi + 0.1


@pytest.mark.parametrize("rho,delta", [(0.5, 0.1), (0.2, 0.01), (4.0, 1.0)])
def test_hilbert_vs_principal_value(rho, delta):
    support = rmt.support(delta, rho)
    pts = [0.3 * a + 0.7 * b for a, b in support] + [support[-1][1] + 0.5, support[0][0] - 0.3]
    for x0 in pts:
        pv = 0.0
        for a, b in support:
            f = lambda y: float(rmt.density(y, delta, rho))  # noqa: E731
            if a < x0 < b:
                pv += integrate.quad(f, a, b, weight="cauchy", wvar=x0, limit=400)[0]
            else:
                pv += integrate.quad(lambda y: f(y) / (y - x0), a, b, limit=400)[0]
        assert rmt.hilbert(x0, delta, rho) == pytest.approx(-pv, abs=1e-7)


def test_stieltjes_off_axis_and_conventions():
    rho, delta = 0.3, 0.05
    x, w, g0 = rmt.quadrature(delta, rho)
    mu = -g0.imag / np.pi
    z = np.array([1.0 + 1.0j, -2.0 + 0.7j, 8.0 + 0.5j, 2.0 - 1.5j, 30.0 + 0.0j])
    g = rmt.stieltjes(z, delta, rho)
    ref = np.array([np.sum(w * mu / (zz - x)) for zz in z])
    np.testing.assert_allclose(g, ref, atol=1e-9)
    assert g[0].imag < 0 and g[3].imag > 0          # Im g Im z < 0
    big = rmt.stieltjes(np.array([1e6 + 1j]), delta, rho)[0]
    assert big == pytest.approx(1 / 1e6, rel=1e-5)  # g ~ 1/z
    # real axis: boundary value from above, -Im g / pi = density
    xr = np.array([0.5, 2.0])
    np.testing.assert_allclose(-rmt.stieltjes(xr, delta, rho).imag / np.pi, rmt.density(xr, delta, rho))
    # the cubic is satisfied
    A, B, C, D = rmt.cubic_coefficients(z, delta, rho)
    assert np.max(np.abs(((A * g + B) * g + C) * g + D)) < 1e-10


def test_rie_map_identity_on_support():
    # inside the support: lambda - 2 Delta h(lambda) = rho^(3/2) / |sqrt(rho) - g(lambda)|^2
    rho, delta = 0.4, 0.3
    lam = np.linspace(*rmt.support(delta, rho)[0], 30)[1:-1]
    g = rmt.stieltjes(lam, delta, rho)
    s = math.sqrt(rho)
    np.testing.assert_allclose(rmt.rie_eigenvalues(lam, delta, rho), s**3 / np.abs(s - g) ** 2, rtol=1e-9)


# ----------------------------------------------------------------------------- RIE on samples
@pytest.mark.parametrize("rho,delta", [(0.2, 0.1), (0.5, 0.5), (2.0, 1.0)])
def test_rie_error_matches_mmse(rho, delta):
    d = 600
    S, Y = rmt.sample_denoising(d, delta, rho, seed=11)
    err = model.estimation_error(rmt.rie(Y, delta, rho), S)
    # finite d = 600: over seeds 11-13 the RIE's error is within 1.3 % of the mmse, linear shrinkage's
    # within 0.6 % of its own
    assert err == pytest.approx(rmt.mmse(delta, rho), rel=0.04)
    lin = model.estimation_error(rmt.linear_shrinkage(Y, delta, rho), S)
    assert lin == pytest.approx(rmt.mmse_gaussian(delta), rel=0.04)
    assert err < lin - 0.01


def test_rie_backend_and_shape(xp):
    S, Y = rmt.sample_denoising(200, 0.5, 0.5, seed=5)
    Yd = to_device(Y, xp)
    Sh = rmt.rie(Yd, 0.5, 0.5)
    assert get_array_module(Sh) is xp and Sh.shape == (200, 200)
    Sh = to_host(Sh)
    np.testing.assert_allclose(Sh, Sh.T, atol=1e-10)
    # the RIE commutes with Y
    np.testing.assert_allclose(Sh @ Y, Y @ Sh, atol=1e-8)


def test_rie_divergence_is_the_derivative_of_the_rie():
    """The Onsager coefficient against central differences of ``rie`` itself (d = 8, every entry ``i <= j``
    moved with its mirror, weighted by the GOE's variances ``1/d`` off and ``2/d`` on the diagonal): equal to
    1e-8 relative, eigenvector rotations included."""
    d, delta, rho = 8, 0.7, 0.5
    Y = rmt.sample_denoising(d, delta, rho, seed=1)[1]
    total = 0.0
    for i, j in zip(*np.triu_indices(d)):
        E = np.zeros((d, d))
        E[i, j] = E[j, i] = 1.0
        dF = (rmt.rie(Y + 1e-6 * E, delta, rho) - rmt.rie(Y - 1e-6 * E, delta, rho)) / 2e-6
        total += (2.0 if i == j else 1.0) / d * float(np.sum(E * dF))
    assert rmt.rie_divergence(Y, delta, rho) == pytest.approx(delta * total / d, rel=1e-8)


@pytest.mark.parametrize("delta", [0.5, 3.0, 20.0])
def test_rie_divergence_on_the_law_is_the_mmse(delta, xp):
    """On ``Y = S + sqrt(Delta) Z`` (d = 400) the RIE is the posterior mean and its Onsager coefficient tends to
    the mmse (a Nishimori identity; this draw: within 0.7 %, the diagonal term alone is ``O(1/d)``), on either
    array module; the centred Wishart prior's ``onsager`` is the same number for its shifted input."""
    from aimlib.priors import Centred, Wishart

    S, Y = rmt.sample_denoising(400, delta, 0.5, seed=3)
    o = rmt.rie_divergence(to_device(Y, xp), delta, 0.5)
    assert o == pytest.approx(rmt.mmse(delta, 0.5), rel=0.012)
    assert Wishart(0.5).onsager(Y, delta) == pytest.approx(o, rel=1e-12)
    shift = math.sqrt(0.5) * np.eye(400)
    assert Centred(0.5).onsager(Y - shift, delta) == pytest.approx(o, rel=1e-12)


def test_sample_goe_statistics_and_seed():
    d = 400
    Z = rmt.sample_goe(d, seed=2)
    assert np.array_equal(Z, rmt.sample_goe(d, seed=2)) and not np.array_equal(Z, rmt.sample_goe(d, seed=3))
    np.testing.assert_array_equal(Z, Z.T)
    off = Z[np.triu_indices(d, 1)]
    # sample variances: relative standard error sqrt(2/m), 0.5 % over the 79 800 off-diagonal entries
    # (0.02 is 4 of them) and 7 % over the 400 diagonal ones (0.2 is 2.8; this seed: -1.7 %)
    assert np.var(off) * d == pytest.approx(1.0, rel=0.02)
    assert np.var(np.diag(Z)) * d == pytest.approx(2.0, rel=0.2)
    lam = np.linalg.eigvalsh(Z)
    # the edges +-2 up to Tracy-Widom fluctuations on the scale d^(-2/3) = 0.018 at d = 400, mean 1.2 of
    # them inwards (this seed: the lowest eigenvalue 0.068 inside -2, the largest 0.022 inside 2)
    assert lam[0] == pytest.approx(-2, abs=0.1) and lam[-1] == pytest.approx(2, abs=0.1)


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_with_parameter_names():
    with pytest.raises(ValueError, match="rho"):
        rmt.mmse(0.1, -1.0)
    with pytest.raises(ValueError, match="rho must be in"):
        rmt.mmse(0.1, 1e6)
    with pytest.raises(ValueError, match="delta"):
        rmt.mmse(0.0, 0.5)
    with pytest.raises(ValueError, match="delta"):
        rmt.mmse(np.array([0.1, -1.0]), 0.5)
    with pytest.raises(TypeError, match="delta"):
        rmt.mmse("1", 0.5)
    with pytest.raises(ValueError, match="delta must be finite"):
        rmt.support(float("nan"), 0.5)
    with pytest.raises(ValueError, match="x must contain only finite"):
        rmt.density(np.array([0.0, np.inf]), 0.1, 0.5)
    with pytest.raises(TypeError, match="x must be real"):
        rmt.hilbert(np.array([1j]), 0.1, 0.5)
    with pytest.raises(ValueError, match="Y must be symmetric"):
        rmt.rie(np.arange(9.0).reshape(3, 3), 0.1, 0.5)
    with pytest.raises(ValueError, match="Y must have 2 dimensions"):
        rmt.rie(np.ones(3), 0.1, 0.5)
    with pytest.raises(ValueError, match="d must be >= 1"):
        rmt.sample_goe(0)
    with pytest.raises(ValueError, match="Y must be symmetric"):
        rmt.rie_divergence(np.arange(9.0).reshape(3, 3), 0.1, 0.5)
    with pytest.raises(ValueError, match="delta"):
        rmt.rie_divergence(np.eye(3), -0.1, 0.5)
    with pytest.raises(TypeError, match="seed"):
        rmt.sample_goe(3, seed="x")
