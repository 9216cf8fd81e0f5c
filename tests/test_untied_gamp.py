"""GAMP for untied key and query: the two-sector channel step, the spectral divergences,
the prior-aware rectangular RIE, the bracket of the state evolution, and the runs."""
import math

import numpy as np
import pytest

from aimlib import untied as u
from aimlib.channels import untied_softmax as usm
from aimlib.priors import rectangular as pr
from aimlib.rmt import rectangular as rr
from aimlib.amp import gamp_rie
from aimlib.channels import UntiedSoftmax
from aimlib.channels.base import sector_projectors
from aimlib.priors import Gaussian

# ------------------------------------------------------------------ channel step


@pytest.mark.parametrize("T", [2, 3, 4])
def test_sector_noise_is_two_over_qhat(T):
    """The algorithm's ``Delta_s = 1/(2 alpha Tr(Gamma Pi_s))`` is ``2/qhat_s`` of the replica output term."""
    for VA, VB in ((0.3, 0.1), (0.05, 0.4), (0.5, 0.5)):
        _, Gamma = usm.channel_matrices(VA, VB, T)
        noises = UntiedSoftmax().sector_noises((0.5 - VA, 0.5 - VB), (0.5, 0.5), T, 0.7)
        assert usm.sector_deltas(Gamma, T, 0.7) == pytest.approx(noises, rel=1e-12)


def test_g_out_ignores_row_shifts_and_is_matched():
    """``Gamma U = 0`` (the row constants are unknown), and ``E[g g^T] = Gamma = -dg/domega``."""
    T, VA, VB = 3, 0.2, 0.45
    C, Gamma = usm.channel_matrices(VA, VB, T)
    assert np.abs(Gamma @ usm.shift_basis(T)).max() < 1e-12
    rng = np.random.default_rng(0)
    n = 200_000
    omega = rng.standard_normal((n, T, T))
    z = omega + (rng.standard_normal((n, T * T)) @ np.linalg.cholesky(C).T).reshape(n, T, T)
    shifted = z + rng.standard_normal((n, T, 1))          # z0 = z up to one constant per row
    g = usm.untied_g_out(shifted, omega, Gamma)
    assert np.allclose(g, usm.untied_g_out(z, omega, Gamma))
    emp = g.reshape(n, -1).T @ g.reshape(n, -1) / n
    assert np.abs(emp - Gamma).max() < 0.03 * np.abs(Gamma).max()


# ------------------------------------------------------------------ prior step


def test_spectral_divergences_against_the_jacobian():
    d = 6
    Y = np.random.default_rng(1).standard_normal((d, d))

    def f(s):
        return s + 0.3 * np.tanh(s) - 0.1 * s**2

    def F(M):
        U, s, Vt = np.linalg.svd(M)
        return (U * f(s)) @ Vt

    U, s, Vt = np.linalg.svd(Y)
    div_A, div_B = rr.spectral_divergences(U, s, Vt, f(s), 1 + 0.3 / np.cosh(s) ** 2 - 0.2 * s)
    eps, J = 1e-6, np.zeros((d * d, d * d))
    for k in range(d * d):
        E = np.zeros(d * d)
        E[k] = eps
        J[:, k] = (F(Y + E.reshape(d, d)) - F(Y - E.reshape(d, d))).ravel() / (2 * eps)
    P = sector_projectors(d)[0]
    assert div_A == pytest.approx(np.trace(P @ J), rel=1e-7)
    assert div_B == pytest.approx(np.trace(J) - np.trace(P @ J), rel=1e-7)


@pytest.mark.parametrize("rho, delta", [(0.5, 0.3), (0.2, 0.01), (1.0, 2.0)])
def test_singular_hilbert_is_the_real_part_of_the_stieltjes_transform(rho, delta):
    x = np.array([0.05, 0.3, 0.9, 1.5])
    g = rr.singular_stieltjes(x, delta, rho)
    assert np.allclose(rr.singular_hilbert(x, delta, rho), g.real, rtol=1e-4, atol=1e-4)
    far = np.array([30.0])                                  # outside the support, h ~ 1/x
    assert rr.singular_hilbert(far, delta, rho)[0] == pytest.approx(1 / 30, rel=0.02)


@pytest.mark.parametrize("delta", [0.05, 0.5])
def test_prior_aware_rie_reaches_mmse_rect_and_predicts_its_errors(delta):
    """At equal noises the prior step is the Bayes-optimal RIE: error ``mmse_rect``, half per part."""
    d, rho = 200, 0.5
    S, Y = u.sample_denoising_untied(d, rho, delta, seed=3)
    S_hat, V, V_ons = pr.rect_prior_step(Y, (delta, delta), np.zeros((d, d)), rho)
    E = S_hat - S
    err = np.sum(E * E) / d
    m = rr.mmse_rect(delta, rho)
    assert err == pytest.approx(m, rel=0.05)
    assert V == pytest.approx((m / 2, m / 2))
    assert sum(V_ons) == pytest.approx(m, rel=0.05)         # divergence = mmse/Delta (Bayes)
    assert np.sum(((E + E.T) / 2) ** 2) / d == pytest.approx(m / 2, rel=0.08)


def test_stein_estimates_of_the_tuned_step_under_two_noises():
    """With different noises on the two parts, Stein's estimates match the actual errors,
    and keeping all the information beats equalising it away."""
    d, rho = 200, 0.5
    rng = np.random.default_rng(3)
    S = u.sample_teacher_untied(d, rho, rng)
    (Z1, Z2), deltas = rng.standard_normal((2, d, d)) / math.sqrt(d), (0.2, 0.6)
    R = S + math.sqrt(deltas[0]) * (Z1 + Z1.T) / 2 + math.sqrt(deltas[1]) * (Z2 - Z2.T) / 2
    F, V, _ = pr.tuned_prior_step(R, deltas, deltas, rho)
    E = F - S
    actual = (np.sum((E + E.T) ** 2) / (4 * d), np.sum((E - E.T) ** 2) / (4 * d))
    assert V == pytest.approx(actual, rel=0.03)
    F_eq, V_eq, _ = pr.rect_prior_step(R, deltas, rng.standard_normal((d, d)) / math.sqrt(d), rho)
    assert np.sum((F_eq - S) ** 2) / d == pytest.approx(sum(V_eq), rel=0.03)
    assert sum(actual) < 0.8 * sum(V_eq)


# ------------------------------------------------------------------ bracket of the state evolution


@pytest.mark.parametrize("T", [2, 3, 5])
def test_bracket_holds_the_exact_gaussian_se_and_the_closure(T):
    for alpha in np.linspace(0.01, 0.9, 12) / (T * T - T):
        lo, hi = u.bracket_untied(alpha, T, math.inf)
        exact = sum(u.solve_sectors(alpha, T))
        assert lo - 1e-9 <= exact <= hi + 1e-9
        lo, hi = u.bracket_untied(alpha, T, 0.5)
        assert lo - 1e-9 <= u.solve_untied(alpha, T, 0.5)[0] <= hi + 1e-9
        assert lo < hi or hi == 0.0


def test_bracket_thresholds_and_validation():
    rho, T = 0.5, 2
    f = u.unknowns_fraction(rho)
    assert u.bracket_untied(0.999 * f / (T - 1) ** 2, T, rho)[1] > 0
    assert u.bracket_untied(1.001 * f / (T - 1) ** 2, T, rho)[1] == 0.0
    assert u.bracket_untied(1.001 * f / (T * T - 1), T, rho)[0] == 0.0
    with pytest.raises(ValueError, match="alpha"):
        u.bracket_untied(-1.0, T, rho)
    with pytest.raises(ValueError, match="T"):
        u.bracket_untied(0.1, 1, rho)


# ------------------------------------------------------------------ runs


@pytest.mark.parametrize("alpha", [0.2, 0.3])
def test_gaussian_prior_gamp_lands_on_the_two_overlap_se(alpha):
    """Bayes-optimal GAMP at d = 100: each part on its own SE error (three data sets)."""
    T = 2
    runs = [u.run_untied_gamp(alpha, T, 100, math.inf, seed=s, backend="numpy") for s in range(3)]
    VA, VB = u.solve_sectors(alpha, T)
    assert all(r.converged for r in runs)
    assert np.mean([r.errors[0] for r in runs]) == pytest.approx(VA, abs=0.012)
    assert np.mean([r.errors[1] for r in runs]) == pytest.approx(VB, abs=0.012)
    assert runs[0].mmse == pytest.approx(sum(runs[0].errors))


def test_rank_prior_gamp_lands_on_the_upper_bracket():
    """The equalised GAMP's own prediction is the upper bracket, and its error follows it at d = 100."""
    alpha, T, rho = 0.3, 2, 0.5
    upper = u.bracket_untied(alpha, T, rho)[1]
    r = u.run_untied_gamp(alpha, T, 100, rho, seed=1, backend="numpy")
    assert r.converged
    assert sum(r.V) == pytest.approx(upper, rel=1e-3)
    assert r.mmse == pytest.approx(upper, rel=0.06)
    assert r.errors[0] == pytest.approx(r.errors[1], rel=0.1)
    assert r.mmse > u.solve_untied(alpha, T, rho)[0] + 0.2     # the closure is far below


@pytest.mark.slow
def test_tuned_gamp_beats_the_upper_bracket():
    """The tuned prior step keeps what the equalised one discards: a lower error on the same data."""
    runs = {name: u.run_untied_gamp(0.3, 2, 60, 0.5, seed=2, backend="numpy", denoiser=name)
            for name in ("equalised", "tuned")}
    assert all(r.converged for r in runs.values())
    assert runs["tuned"].mmse < 0.8 * runs["equalised"].mmse
    assert runs["tuned"].mmse < u.bracket_untied(0.3, 2, 0.5)[1]
    with pytest.raises(ValueError, match="denoiser"):
        u.run_untied_gamp(0.3, 2, 20, 0.5, denoiser="bayes")


@pytest.mark.slow
def test_rank_prior_gamp_recovers_past_the_upper_threshold():
    r = u.run_untied_gamp(1.0, 2, 50, 0.5, seed=0, backend="numpy")     # upper threshold 0.75
    assert r.reason == "perfect" and r.mmse < 1e-8


def _data(d=12, T=2, n=30, seed=0):
    rng = np.random.default_rng(seed)
    S = u.sample_teacher_untied(d, 0.5, rng)
    X = rng.standard_normal((n, T, d))
    return X, u.untied_softmax(X, S), S


def test_bad_inputs_name_the_parameter():
    X, y, S = _data()
    with pytest.raises(ValueError, match="y must have shape"):
        u.untied_gamp(X, y[:, :1], 0.5)
    bad = y.copy()
    bad[0, 0] = [0.7, 0.7]
    with pytest.raises(ValueError, match="softmax outputs"):
        u.untied_gamp(X, bad, 0.5)
    with pytest.raises(ValueError, match="damping"):
        u.untied_gamp(X, y, 0.5, damping=1.0)
    with pytest.raises(ValueError, match="rho"):
        u.untied_gamp(X, y, -0.5)
    with pytest.raises(ValueError, match="beta"):
        u.untied_gamp(X, y, 0.5, beta=0.0)
    with pytest.raises(ValueError, match="alpha"):
        u.run_untied_gamp(0.0, 2, 10, 0.5)
    with pytest.raises(ValueError, match="VA"):
        usm.channel_matrices(0.0, 0.1, 2)


def test_reproducible_and_on_the_device(strict_cupy):
    """Same seed, same run; device tokens give the host result (strict CuPy stand-in)."""
    from aimlib.backend import to_device
    X, y, S = _data(d=16, n=60)
    runs = [u.untied_gamp(X, y, 0.5, S=S, seed=4, max_iter=6, on_max_iter="return") for _ in range(2)]
    assert np.array_equal(runs[0].S_hat, runs[1].S_hat)
    dev = u.untied_gamp(to_device(X, strict_cupy), to_device(y, strict_cupy), 0.5,
                        S=to_device(S, strict_cupy), seed=4, max_iter=6, on_max_iter="return")
    assert isinstance(dev.S_hat, np.ndarray)
    assert np.allclose(dev.S_hat, runs[0].S_hat, atol=1e-10)


def test_committed_runs_are_reproduced():
    """A row of ``book/data/untied_gamp.csv`` (``scripts/untied_gamp.py``) is what the library gives today."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "book" / "data" / "untied_gamp.csv"
    runs = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8", skip_header=1)
    assert path.read_text().startswith("# made by: python scripts/untied_gamp.py")
    row = runs[(runs["denoiser"] == "equalised") & (runs["T"] == 2) & (runs["d"] == 100)
               & (runs["seed"] == 1) & (runs["alpha"] == 0.2)][0]
    r = u.run_untied_gamp(0.2, 2, 100, 0.5, seed=1, backend="numpy", max_iter=400, tol=1e-6)
    assert (r.errors[0], r.errors[1], r.iterations) == pytest.approx((row["E_A"], row["E_B"], row["iterations"]),
                                                                     rel=1e-6)


def test_gamp_rie_with_a_square_prior_returns_the_square_estimate():
    """GAMP-RIE on untied key and query estimates a square ``S``: its ``S_hat`` is not symmetric (as
    ``AMPResult`` documents), and its antisymmetric part is the teacher's, not zero."""
    X, y, S = _data(d=16, n=200)
    res = gamp_rie(X, y, UntiedSoftmax(), Gaussian(symmetric=False), S=S, max_iter=6, on_max_iter="return",
                   stop="prediction", resolution=0.0)
    B_hat, B = (res.S_hat - res.S_hat.T) / 2, (S - S.T) / 2
    assert res.S_hat.shape == (16, 16) and np.linalg.norm(B_hat) > 0.1 * np.linalg.norm(res.S_hat)
    assert np.sum(B_hat * B) > 0
