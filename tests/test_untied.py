"""Untied key and query: sampling, counting, the rectangular prior MMSE, the two-overlap SE."""
import itertools
import math
import sys

import numpy as np
import pytest

from aimlib import untied as u
from aimlib.channels import untied_softmax as usm
from aimlib.rmt import rectangular as rr
from aimlib.channels import UntiedSoftmax
from aimlib.priors import Gaussian
from aimlib.state_evolution import fixed_point
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import untied_gd_recovery as gd_recovery  # noqa: E402
import untied_tied_vs_untied as tied_vs_untied  # noqa: E402

# ------------------------------------------------------------------ model


def test_teacher_shape_seed_and_scale():
    S = u.sample_teacher_untied(300, 0.5, seed=1)
    assert S.shape == (300, 300)
    assert np.array_equal(S, u.sample_teacher_untied(300, 0.5, seed=1))
    assert not np.allclose(S, S.T)
    assert np.sum(S * S) / 300 == pytest.approx(1.0, abs=0.05)      # (1/d)||S||^2 -> 1
    assert abs(np.trace(S)) < 5                                      # Tr S = O(1), not O(d)
    assert abs(np.trace(S @ S)) / 300 < 0.03                        # (1/d) Tr S^2 -> 0
    assert np.linalg.matrix_rank(S) == 150


def test_gaussian_prior_teacher():
    """``rho = inf``: i.i.d. ``N(0, 1/d)`` entries, full rank, reproducible."""
    S = u.sample_teacher_untied(200, math.inf, seed=4)
    assert np.array_equal(S, u.sample_teacher_untied(200, math.inf, seed=4))
    assert np.sum(S * S) / 200 == pytest.approx(1.0, abs=0.03)
    assert np.std(S) * math.sqrt(200) == pytest.approx(1.0, abs=0.02)
    assert np.linalg.matrix_rank(S) == 200
    with pytest.raises(ValueError, match="rho"):
        u.sample_teacher_untied(10, -math.inf)


def test_indices_formula_trace_convention_and_validation():
    rng = np.random.default_rng(0)
    d, T = 40, 3
    S = u.sample_teacher_untied(d, 0.3, seed=2)
    X = rng.standard_normal((5, T, d))
    h = u.untied_indices(X, S)
    assert h.shape == (5, T, T)
    x = X[1]
    assert h[1, 0, 2] == pytest.approx(x[0] @ S @ x[2] / math.sqrt(d))
    assert h[1, 2, 0] == pytest.approx(x[2] @ S @ x[0] / math.sqrt(d))
    assert h[1, 1, 1] == pytest.approx((x[1] @ S @ x[1] - np.trace(S)) / math.sqrt(d))
    assert not np.allclose(h, np.swapaxes(h, 1, 2))
    with pytest.raises(ValueError, match="S must have shape"):
        u.untied_indices(X, S[:-1, :-1])
    with pytest.raises(ValueError, match="X must have 3"):
        u.untied_indices(X[0], S)
    with pytest.raises(ValueError, match="finite"):
        u.untied_indices(X, np.full((d, d), np.nan))


def test_indices_are_iid_with_variance_one():
    """All ``T^2`` entries of ``h`` have variance ``(1/d)||S||^2``; ``h_ab``, ``h_ba`` uncorrelated."""
    d, T, n = 100, 3, 20_000
    S = u.sample_teacher_untied(d, 0.5, seed=3)
    h = u.untied_indices(np.random.default_rng(4).standard_normal((n, T, d)), S).reshape(n, -1)
    C = np.cov(h.T) / (np.sum(S * S) / d)
    assert np.abs(C - np.eye(T * T)).max() < 0.06


def test_softmax_outputs():
    S = u.sample_teacher_untied(20, 0.5, seed=0)
    X = np.random.default_rng(1).standard_normal((4, 3, 20))
    y = u.untied_softmax(X, S, beta=2.0)
    assert y.shape == (4, 3, 3) and np.allclose(y.sum(-1), 1.0)
    with pytest.raises(ValueError, match="beta"):
        u.untied_softmax(X, S, beta=0.0)


# ------------------------------------------------------------------ counting


def _measurement_rows(X):
    """The known functionals ``h_ab - h_aa`` (``b != a``) of every sample, as vectors in ``R^{d^2}``."""
    d = X.shape[-1]
    return np.array([(np.outer(x[a], x[b]) - np.outer(x[a], x[a]) + np.eye(d)).ravel()
                     for x in X for a, b in itertools.permutations(range(len(x)), 2)])


def test_count_threshold_values():
    assert u.measurements_per_sample(2) == 2 and u.measurements_per_sample(3) == 6
    assert u.measurements_per_sample(3, tied=True) == 5
    assert u.count_threshold(0.5, 2) == pytest.approx(0.375)
    assert u.count_threshold(0.5, 3) == pytest.approx(0.125)
    assert u.count_threshold(2.0, 2) == pytest.approx(0.5)
    assert u.count_threshold(math.inf, 3) == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="T"):
        u.count_threshold(0.5, 1)
    with pytest.raises(ValueError, match="rho"):
        u.count_threshold(-1.0, 2)


def test_each_sample_gives_t2_minus_t_independent_measurements():
    """The trace term removes no measurement: ``n`` samples span ``n (T^2 - T)`` dimensions."""
    d = 12
    for T, n in ((2, 30), (3, 20)):
        X = np.random.default_rng(T).standard_normal((n, T, d))
        assert np.linalg.matrix_rank(_measurement_rows(X)) == n * (T * T - T)


# ------------------------------------------------------------------ output side


def _quotient_logdet(VA, VB, T):
    """``log det`` of the covariance of the known functionals for fluctuations ``2V_A Pi_sym + 2V_B Pi_anti``."""
    Tm = np.eye(T * T).reshape(T * T, T, T)
    Tt = np.swapaxes(Tm, 1, 2).reshape(T * T, T * T)
    C = VA * (np.eye(T * T) + Tt) + VB * (np.eye(T * T) - Tt)
    L = np.zeros((T * T - T, T * T))
    for k, (a, b) in enumerate(itertools.permutations(range(T), 2)):
        L[k, a * T + b], L[k, a * T + a] = 1.0, -1.0
    return np.linalg.slogdet(L @ C @ L.T)[1]


@pytest.mark.parametrize("T", [2, 3, 4])
def test_output_free_entropy_is_the_quotient_log_det(T):
    ref = _quotient_logdet(0.3, 0.3, T) + 2 * usm.sector_free_entropy(0.3, 0.3, T)
    for VA, VB in ((0.1, 0.4), (0.7, 0.05), (1.0, 1.0)):
        assert _quotient_logdet(VA, VB, T) + 2 * usm.sector_free_entropy(VA, VB, T) == pytest.approx(ref)


def test_the_conjugate_is_four_over_K_times_the_derivative_of_psi_out():
    """The one convention of ``aimlib.channels.base``: ``qhat_s = alpha F_s = (4/K) alpha dPsi_out/dq_s`` with
    ``K = 2`` sectors (finite differences of ``Psi_out``), the state evolution's ``qhat``, and ``1/qhat_s`` the
    noise of the prior's part ``s``: the square Gaussian prior's errors are ``(1/2)/(1 + qhat_s)``."""
    ch, T, alpha, VA, VB, eps = UntiedSoftmax(), 3, 0.2, 0.2, 0.35, 1e-6
    K = len(ch.sectors)
    qA, qB = (alpha * F for F in ch.fisher((0.5 - VA, 0.5 - VB), (0.5, 0.5), T))
    dA = (usm.sector_free_entropy(VA + eps, VB, T) - usm.sector_free_entropy(VA - eps, VB, T)) / (2 * eps)
    dB = (usm.sector_free_entropy(VA, VB + eps, T) - usm.sector_free_entropy(VA, VB - eps, T)) / (2 * eps)
    assert qA == pytest.approx(-4 / K * alpha * dA, rel=1e-6)
    assert qB == pytest.approx(-4 / K * alpha * dB, rel=1e-6)
    # equal errors: (T^2 - 1)/2 and (T - 1)^2/2 effective measurements
    assert ch.fisher((0.25, 0.25), (0.5, 0.5), T) == pytest.approx((8 / 0.5, 4 / 0.5))
    res = fixed_point(0.05, ch, T=T, rho=Gaussian(symmetric=False))
    assert res.mmse == pytest.approx(tuple(0.5 / (1 + qh) for qh in res.qhat), rel=1e-9)
    assert ch.sector_noises(res.q, (0.5, 0.5), T, 0.05) == pytest.approx(tuple(1 / qh for qh in res.qhat))


@pytest.mark.parametrize("T", [2, 3])
def test_gaussian_prior_se_is_exact_counting(T):
    """Gaussian prior: the two-overlap SE gives ``1 - (T^2 - T) alpha`` and PR at counting."""
    for alpha in (0.02, 0.1, 0.9 * u.count_threshold(math.inf, T)):
        VA, VB = u.solve_sectors(alpha, T)
        assert VA + VB == pytest.approx(1 - (T * T - T) * alpha, abs=1e-9)
    assert u.solve_sectors(1.01 * u.count_threshold(math.inf, T), T) == (0.0, 0.0)
    assert u.solve_untied(0.1, T, math.inf)[0] == pytest.approx(max(0, 1 - (T * T - T) * 0.1))


def _gaussian_split(d, T, alpha, seed):
    """Exact finite-``d`` error of the symmetric part, Gaussian prior ``N(0, I/d)``, noiseless measurements.

    ``V_A = (1/d^2)(d(d+1)/2 - Tr(Pi_sym P))`` with ``P`` the projector on the measured
    directions ``R``: ``Tr(Pi_sym P) = m/2 + Tr(G^{-1} R R_t^T)/2``, ``G = R R^T``,
    ``R_t`` the rows of the transposed matrices.
    """
    n = int(round(alpha * d * d))
    R = _measurement_rows(np.random.default_rng(seed).standard_normal((n, T, d)))
    Rt = np.swapaxes(R.reshape(-1, d, d), 1, 2).reshape(R.shape)
    tr_sym = (R.shape[0] + np.trace(np.linalg.solve(R @ R.T, R @ Rt.T))) / 2
    return (d * (d + 1) / 2 - tr_sym) / d**2


def test_gaussian_prior_sector_split_matches_finite_d():
    """The split ``V_A`` (anisotropy of the channel) against the exact posterior, ``1/d``-extrapolated.

    At finite ``d`` the symmetric part has ``d(d+1)/2`` entries, a bias ``~ 1/(2d)``:
    Richardson extrapolation from ``d = 20, 32`` leaves ``O(1/d^2)`` and sampling noise
    (two seeds differ by ``< 0.001``).
    """
    T, alpha = 2, 0.2
    VA, _ = u.solve_sectors(alpha, T)
    e20, e32 = (_gaussian_split(d, T, alpha, 0) for d in (20, 32))
    assert (32 * e32 - 20 * e20) / 12 == pytest.approx(VA, abs=0.006)
    assert VA < 0.5 * (1 - 2 * alpha) - 0.05      # clearly below the isotropic split V/2 = 0.3


# ------------------------------------------------------------------ prior MMSE


def test_mmse_rect_limits():
    for rho in (0.2, 0.5, 1.0):
        f = u.unknowns_fraction(rho)
        assert rr.mmse_rect(1e-3, rho) / 1e-3 == pytest.approx(f, rel=0.01)
        assert rr.mmse_rect(1e-5, rho) / 1e-5 == pytest.approx(f, rel=0.01)
        assert rr.mmse_rect(1e4, rho) == pytest.approx(1.0, abs=1e-3)
        m = rr.mmse_rect(np.logspace(-3, 3, 50), rho)
        assert np.all(np.diff(m) > 0) and np.all(m < np.logspace(-3, 3, 50) * f * 1.001)
    with pytest.raises(ValueError, match="delta"):
        rr.mmse_rect(0.0, 0.5)


@pytest.mark.parametrize("rho,delta,ref", [(0.2, 0.1, 0.035524797686080536),
                                           (0.2, 1.3894954943731375, 0.39777757873918307),
                                           (1.0, 0.39810717055349715, 0.2674738281478925),
                                           (1.0, 3.268027589410125, 0.7588782706207478)])
def test_mmse_rect_against_published_values(rho, delta, ref):
    """Troiani et al. (2022), repository SPOC-group/rectangular_RIE, data/MMSE (aspect ratio 1)."""
    assert rr.mmse_rect(delta, rho) == pytest.approx(ref, rel=2e-3)


def test_singular_density_mass_and_moment():
    """The symmetrised singular law of ``Y``: mass 1, second moment ``1 + Delta``."""
    for rho, delta in ((0.2, 0.05), (0.5, 1.0), (1.5, 3.0)):
        x = np.linspace(0.0, 4 / math.sqrt(min(rho, 1)) + 4 * math.sqrt(delta), 40001)
        mu = rr.singular_density(x, delta, rho)
        assert 2 * np.sum(mu) * (x[1] - x[0]) == pytest.approx(1.0, abs=2e-3)
        assert 2 * np.sum(mu * x * x) * (x[1] - x[0]) == pytest.approx(1 + delta, rel=2e-3)
    with pytest.raises(ValueError, match="delta"):
        rr.singular_density([0.5], -1.0, 0.5)


def test_mmse_rect_against_the_oracle_at_finite_d():
    """Independent check: the oracle spectral estimator at ``d = 400`` (one draw) differs from the
    limit by ``O(1/d)``: at most 1.3% here (0.4% at ``d = 600``)."""
    deltas = np.array([0.01, 0.3, 3.0])
    for rho in (0.2, 0.5):
        orc = u.oracle_curve(rho, deltas, 400, 1)
        assert np.all(np.abs(orc / rr.mmse_rect(deltas, rho) - 1) < 0.015)


def test_rie_rect_finite_d_reaches_mmse_rect():
    """The data-driven RIE at ``d = 300`` (2 seeds) within 3% of ``mmse_rect`` (``d = 600`` table):
    the finite-size and kernel-width (``eta = d^{-1/2}``) biases measured at ``d = 200-400`` are below 2%."""
    d, rho = 300, 0.5
    for delta in (0.5, 2.0):
        errs = []
        for seed in (10, 11):
            S, Y = u.sample_denoising_untied(d, rho, delta, seed)
            errs.append(np.sum((rr.rie_rect(Y, delta) - S) ** 2) / d)
        assert np.mean(errs) == pytest.approx(rr.mmse_rect(delta, rho), rel=0.03)
    with pytest.raises(ValueError, match="square"):
        rr.rie_rect(np.ones((3, 4)), 1.0)


# ------------------------------------------------------------------ isotropic closure


def test_solve_untied_fixed_point_and_threshold():
    T, rho = 2, 0.5
    a_c = u.count_threshold(rho, T)
    assert u.untied_threshold(rho, T) == pytest.approx(a_c)
    for alpha in (0.05, 0.2, 0.35):
        V, q = u.solve_untied(alpha, T, rho)
        assert 0 < V < 1 and q == pytest.approx(1 - V)
        assert V == pytest.approx(rr.mmse_rect(V / (2 * alpha), rho), rel=1e-7)
    assert u.solve_untied(0.98 * a_c, T, rho)[0] > 0
    assert u.solve_untied(a_c, T, rho)[0] == 0.0
    m = u.curve_untied([0.05, 0.1, 0.2, 0.3], T, rho)
    assert np.all(np.diff(m) < 0)
    with pytest.raises(ValueError, match="alpha"):
        u.solve_untied(-0.1, T, rho)


def test_indices_and_softmax_on_the_device(strict_cupy):
    """Device arrays in, device arrays out (the strict CuPy stand-in of ``tests/strict_cupy.py``)."""
    from aimlib.backend import to_device, to_host
    S = u.sample_teacher_untied(16, 0.5, seed=1)
    X = np.random.default_rng(2).standard_normal((5, 3, 16))
    for Xd, Sd in ((to_device(X, strict_cupy), to_device(S, strict_cupy)), (X, to_device(S, strict_cupy))):
        h = u.untied_indices(Xd, Sd)
        assert not isinstance(h, np.ndarray)
        assert np.allclose(to_host(h), u.untied_indices(X, S))
        assert np.allclose(to_host(u.untied_softmax(Xd, Sd)), u.untied_softmax(X, S))


def test_tied_vs_untied_script_and_its_file():
    """``scripts/untied_tied_vs_untied.py``: the rows it writes, and the committed file is what it gives today."""
    rows = list(tied_vs_untied.rows(rhos=(0.5,), Ts=(2,), alphas=[0.1, 0.2]))
    assert [list(r) for r in rows] == [tied_vs_untied.COLUMNS] * 2
    assert float(rows[1]["E_untied"]) == pytest.approx(u.solve_untied(0.2, 2, 0.5)[0])
    assert float(rows[1]["E_tied"]) == 0.0          # tied: beyond alpha_PR = 0.1875
    path = ROOT / "book" / "data" / "untied_tied_vs_untied.csv"
    assert path.read_text().startswith(f"# made by: {tied_vs_untied.COMMAND}\n")
    committed = np.genfromtxt(path, delimiter=",", names=True, skip_header=1)
    assert len(committed) == len(tied_vs_untied.RHOS) * len(tied_vs_untied.TS) * len(tied_vs_untied.ALPHAS)
    alphas = tied_vs_untied.ALPHAS[[10, 30]]
    again = [[float(r[c]) for c in tied_vs_untied.COLUMNS] for r in tied_vs_untied.rows((0.5,), (3,), alphas)]
    sel = committed[(committed["rho"] == 0.5) & (committed["T"] == 3)][[10, 30]]
    assert np.array_equal(np.array(sel.tolist()), np.array(again))


def test_euler_identity_of_the_output_side():
    """``V_A F_A + V_B F_B = T^2 - T`` at every ratio (the threshold proof), the channel's ``linear_k``."""
    for T in (2, 3, 5):
        for VA, VB in ((0.1, 0.4), (0.01, 0.02), (0.3, 0.001)):
            FA, FB = usm.sector_fisher(VA, VB, T)
            assert VA * FA + VB * FB == pytest.approx(T * T - T)
            assert UntiedSoftmax().linear_k(T) == T * T - T


def _tangent_mu(d, rho):
    """Eigenvalues of ``P^T tau P`` (``tau`` the transposition) on the tangent space of rank ``rho d``."""
    r, rng = round(rho * d), np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    P = np.concatenate([np.kron(U[:, :r], np.eye(d)), np.kron(U[:, r:], V[:, :r])], axis=1)
    Pt = P.reshape(d, d, -1).transpose(1, 0, 2).reshape(d * d, -1)
    return np.linalg.eigvalsh(P.T @ Pt), P.shape[1] / d**2


@pytest.mark.parametrize("T", [2, 3])
def test_linearised_two_overlap_se_has_the_counting_threshold(T):
    """Cramer-Rao errors on the tangent space (anisotropic noise) + the sector channel:
    the non-trivial linearised fixed point sits at ``alpha_count``, in a non-isotropic direction."""
    from scipy.optimize import brentq
    mu, f = _tangent_mu(16, 0.5)
    assert f == pytest.approx(u.unknowns_fraction(0.5))
    wA, wB = (1 + mu) / 2, (1 - mu) / 2

    def alpha_and_EA(x):
        FA, FB = usm.sector_fisher(x, 1 - x, T)                 # qhat / alpha, 1/Delta in the prior's units
        den = wA * FA + wB * FB
        alpha = f * np.mean(1 / den)
        return alpha, f * np.mean(wA / den) / alpha

    x = brentq(lambda x: alpha_and_EA(x)[1] - x, 1e-6, 1 - 1e-6)
    assert alpha_and_EA(x)[0] == pytest.approx(u.count_threshold(0.5, T), rel=1e-9)
    assert 0.1 < x < 0.4


# ------------------------------------------------------------------ students


def test_student_gradient_and_row_differences():
    from aimlib.index_map import IndexMap
    from aimlib.untied.student import _loss_and_gradient, row_differences
    d = 8
    S, S2 = u.sample_teacher_untied(d, 0.5, 0), u.sample_teacher_untied(d, 0.5, 5)
    X = np.random.default_rng(1).standard_normal((20, 3, d))
    m = row_differences(X, S)
    assert np.allclose(np.diagonal(m, axis1=1, axis2=2), 0)
    assert m[0, 0, 1] == pytest.approx((X[0, 0] @ S @ X[0, 1] - X[0, 0] @ S @ X[0, 0] + np.trace(S)) / math.sqrt(d))
    index = IndexMap(X, square=True)
    _, G = _loss_and_gradient(index, S2, m)
    E, eps = np.random.default_rng(2).standard_normal((d, d)), 1e-6
    fd = (_loss_and_gradient(index, S2 + eps * E, m)[0] - _loss_and_gradient(index, S2 - eps * E, m)[0]) / (2 * eps)
    assert np.sum(G * E) == pytest.approx(fd, rel=1e-6)


def test_students_recover_above_counting_and_tied_cannot_fit_untied():
    from aimlib.untied.student import fit_student, row_differences
    d, T = 8, 3
    S = u.sample_teacher_untied(d, 0.5, 0)
    X = np.random.default_rng(1).standard_normal((20, T, d))   # 120 measurements > r(2d - r) = 48
    m = row_differences(X, S)
    Sh, loss = fit_student(X, m, 4, seed=0)
    assert loss < 1e-10 and np.sum((Sh - S) ** 2) / d < 1e-8
    Sh, loss = fit_student(X, m, 4, tied=True, seed=0)
    assert loss > 1.0 and np.sum((Sh - S) ** 2) / d > 0.3     # the antisymmetric part is out of reach
    with pytest.raises(ValueError, match="r"):
        fit_student(X, m, 0)


def test_gd_recovery_script(tmp_path):
    """``scripts/untied_gd_recovery.py``: every pair by default, or the pairs asked for; the files name it."""
    rows = list(gd_recovery.rows(6, [1.0], seeds=range(1)))
    assert [(r["teacher_tied"], r["student_tied"]) for r in rows] == [("1", "1"), ("1", "0"), ("0", "1"), ("0", "0")]
    assert all(list(r) == gd_recovery.COLUMNS for r in rows)
    rows = list(gd_recovery.rows(6, [1.0], pairs=((0, 0),), seeds=range(1)))
    assert len(rows) == 1 and (rows[0]["teacher_tied"], rows[0]["student_tied"]) == ("0", "0")
    for d, (_, _, name) in gd_recovery.GRIDS.items():
        command = gd_recovery.COMMAND + ("" if d == 24 else f" --d {d}")
        assert (ROOT / "book" / "data" / name).read_text().startswith(f"# made by: {command}\n")
