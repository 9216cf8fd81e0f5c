"""Tests of the hardmax Bayes side at T = 3 (and its general-T code at T = 2): the Gaussian
cones of the outputs, the face formula, F_out's table and the weak-recovery threshold.

The cone probabilities are quasi-Monte Carlo estimates with a fixed scramble (relative error
of order 1e-3 at 256 points, measured against the T = 2 closed form below); tolerances
looser than 1e-3 name that error or a Monte Carlo error.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from aimlib.channels import Hardmax, hardmax as hm, hardmax_polytope as hp, polytope
from aimlib.channels.base import fisher_mc, sample_indices


def _data(T, n, q, V, seed):
    rng = np.random.default_rng(seed)
    omega = sample_indices(n, T, q, rng)
    return omega, Hardmax()(omega + sample_indices(n, T, V, rng))


def test_patterns_exclude_the_cyclic_ones():
    assert len(hp.patterns(2)) == 4
    pats = hp.patterns(3)
    assert len(pats) == 25
    assert (1, 2, 0) not in pats and (2, 0, 1) not in pats
    # the 25 patterns all occur in samples, the cyclic ones never
    _, y = _data(3, 20000, 1.0, 1.0, 0)
    seen = {tuple(int(c) for c in row) for row in np.argmax(y, axis=-1)}
    assert seen == set(pats)


def test_constraints_have_rank_n_minus_1():
    for p in hp.patterns(3):
        D = hp.constraint_matrix(p)
        assert D.shape == (6, 6) and np.linalg.matrix_rank(D) == 5
        assert np.allclose(D.sum(axis=1), 0)  # a common shift of the entries changes nothing


def test_general_code_reproduces_T2_closed_form():
    omega, y = _data(2, 400, 1.5, 0.7, 1)
    lp = hp.log_partition(y, omega, 0.7)
    assert np.allclose(lp, hm.log_partition(y, omega, 0.7), atol=2e-3)  # QMC error, 256 points
    g, g2 = hp.g_out(y, omega, 0.7), hm.g_out(y, omega, 0.7)
    assert np.max(np.abs(g - g2)) < 5e-3 * np.max(np.abs(g2))


def test_T2_output_function_and_threshold_calibrate_the_normalisation():
    assert 1 / hp.fisher_scaled_direct(0.0, 2, n_points=1 << 14) == pytest.approx(
        hm.weak_recovery_threshold(), rel=1e-5)
    assert hp.weak_recovery_threshold(2) == pytest.approx(hm.weak_recovery_threshold(), rel=1e-5)
    for tau in (0.3, 4.0):
        # outer QMC average over 2^11 points: relative error below ~3e-4 here
        assert hp.fisher_scaled_direct(tau, 2, outer_log2=11) == pytest.approx(hm.fisher_scaled(tau), rel=2e-3)


def test_probabilities_sum_to_one_and_match_sampling():
    rng = np.random.default_rng(2)
    omega = sample_indices(3, 3, 1.0, rng)
    P = hp.probabilities(omega, 1.0)
    assert P.shape == (3, 25)
    assert np.allclose(P.sum(axis=-1), 1, atol=3e-3)  # QMC error of 25 probabilities
    n = 20000
    index = {p: k for k, p in enumerate(hp.patterns(3))}
    for i in range(3):
        y = Hardmax()(omega[i] + sample_indices(n, 3, 1.0, rng))
        counts = np.bincount([index[tuple(int(c) for c in r)] for r in np.argmax(y, axis=-1)], minlength=25)
        expected = n * P[i] / P[i].sum()
        keep = expected > 5
        chi2 = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_g_out_is_the_gradient_of_log_partition():
    omega, y = _data(3, 6, 1.0, 0.5, 3)
    g = Hardmax().g_out(y, omega, 0.5)
    assert np.allclose(g, np.swapaxes(g, -1, -2))
    eps = 1e-4
    for a, b in [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]:
        E = np.zeros((3, 3))
        E[a, b] = E[b, a] = eps
        fd = (hp.log_partition(y, omega + E, 0.5) - hp.log_partition(y, omega - E, 0.5)) / (2 * eps)
        # face formula and the derivative of the QMC estimate differ by the QMC error (~1e-2 relative)
        assert np.allclose(g[:, a, b], fd, atol=0.03 * np.max(np.abs(g))), (a, b)


def test_cone_probability_in_closed_form():
    # two independent constraints: P(h1 > h0) P(h3 > h2) = Phi(1/sqrt 2) Phi(-1/sqrt 2)
    cone = polytope.Cone([[-1, 1, 0, 0], [0, 0, -1, 1]], np.ones(4))
    lp, g = cone.log_prob_and_grad(np.array([[0.0, 1.0, 1.0, 0.0]]), 1.0)
    z = 1 / np.sqrt(2)
    assert lp[0] == pytest.approx(np.log(stats.norm.cdf(z) * stats.norm.cdf(-z)), rel=1e-6)
    mills = stats.norm.pdf(z) / np.sqrt(2)
    assert g[0] == pytest.approx([-mills / stats.norm.cdf(z), mills / stats.norm.cdf(z),
                                  -mills / stats.norm.cdf(-z), mills / stats.norm.cdf(-z)], rel=1e-6)


def test_a_batch_gives_each_row_its_own_result():
    # rows of one batch take different leading orders (each its own factor) and blocks:
    # the batch must give what each row gives alone, to rounding
    omega, y = _data(3, 40, 2.0, 0.3, 4)
    V = np.linspace(0.2, 1.0, 40)
    lp, g = hp.log_partition(y, omega, V), hp.g_out(y, omega, V)
    one = [(hp.log_partition(y[i:i + 1], omega[i:i + 1], V[i]), hp.g_out(y[i:i + 1], omega[i:i + 1], V[i]))
           for i in range(0, 40, 7)]
    np.testing.assert_allclose(lp[::7], [a[0] for a, _ in one], rtol=1e-12)
    np.testing.assert_allclose(g[::7], [b[0] for _, b in one], rtol=1e-10, atol=1e-12)


def test_impossible_output_and_T_range_are_refused():
    y = np.eye(3)[[1, 2, 0]][None]
    assert hp.log_partition(y, np.zeros((1, 3, 3)), 1.0)[0] == -np.inf
    with pytest.raises(ValueError, match="impossible"):
        hp.g_out(y, np.zeros((1, 3, 3)), 1.0)
    with pytest.raises(ValueError, match="T must be <= 3"):
        Hardmax().fisher(0.5, 1.5, 4)
    with pytest.raises(ValueError, match="tabulated for q/V in \\[0, 1000\\]"):
        hp.fisher_scaled(2 * hp.LAMBDA_MAX, 3)


def test_weak_recovery_threshold_T3():
    assert hp.weak_recovery_threshold(3) == pytest.approx(0.17539, abs=2e-5)


def test_table_passes_through_its_nodes():
    with np.load(hp.TABLES) as f:
        tau, vals = f["tau"], f["values_T3"]
    assert np.allclose(hp.fisher_scaled(tau, 3), vals, rtol=1e-9)
    assert hp.fisher_scaled(0.0, 3) == pytest.approx(1 / hp.weak_recovery_threshold(3), rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("tau", [0.7, 13.0])
def test_table_at_fresh_points(tau):
    # the outer average of the direct value (2^11 Sobol points in five dimensions) has relative
    # QMC error ~1e-3 at tau = 0.7 and up to ~1e-2 at tau = 13 (seen across scrambles)
    assert hp.fisher_scaled(tau, 3) == pytest.approx(hp.fisher_scaled_direct(tau, 3, outer_log2=11), rel=2e-2)


def test_output_depends_on_tau_only():
    # the output of h and of c h agree, so Z_out(omega, V) = Z_out(c omega, c^2 V) and
    # g(omega, V) = c g(c omega, c^2 V); with omega ~ N(0, q Sigma), V F_out depends on q/V only
    omega, y = _data(3, 50, 1.0, 0.5, 4)
    assert np.allclose(hp.log_partition(y, omega, 0.5), hp.log_partition(y, 3 * omega, 4.5), atol=1e-12)
    assert np.allclose(hp.g_out(y, omega, 0.5), 3 * hp.g_out(y, 3 * omega, 4.5), atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("q, Q0", [(0.5, 1.5), (1.2, 1.5)])
def test_fisher_against_sampling(q, Q0):
    est = fisher_mc(Hardmax(), q, Q0, 3, n=3000, seed=5)
    # Monte Carlo over 3000 samples of (omega, y): relative standard error ~2-3 %
    assert est == pytest.approx(Hardmax().fisher(q, Q0, 3), rel=0.08)


def _threshold_by_sampling(T, n, seed):
    """``1 / Phi_T(0)`` from ``dP_y/d omega_k = E[1(y) h_k / Sigma_k]`` at ``omega = 0``, ``V = 1`` (no face
    formula), by sampling; returns it and the number of patterns seen."""
    h = sample_indices(n, T, 1.0, np.random.default_rng(seed))
    iu = np.triu_indices(T)
    s2 = np.where(iu[0] == iu[1], 2.0, 1.0)
    c = np.argmax(h, axis=-1) @ (T ** np.arange(T - 1, -1, -1))
    P = np.bincount(c, minlength=T**T) / n
    dP = np.stack([np.bincount(c, weights=h[:, a, b] / s, minlength=T**T) for a, b, s in zip(*iu, s2)], axis=1) / n
    seen = P > 0
    return 1 / np.sum((dP[seen] ** 2 / P[seen, None]) @ (2 * s2)), np.count_nonzero(seen)


def test_weak_recovery_threshold_against_the_score_identity():
    wr, seen = _threshold_by_sampling(3, 400_000, 6)
    assert seen == 25
    # Monte Carlo error at n = 4e5: ~0.1 % (observed across seeds)
    assert wr == pytest.approx(hp.weak_recovery_threshold(3), rel=0.01)


@pytest.mark.slow
def test_weak_recovery_threshold_T4():
    wr, seen = _threshold_by_sampling(4, 400_000, 1)
    assert seen == len(hp.patterns(4)) == 218
    assert wr == pytest.approx(hp.weak_recovery_threshold(4), rel=0.01)
    assert 0.105 < hp.weak_recovery_threshold(4) < 0.1055


@pytest.mark.slow
def test_gamp_rie_lands_near_the_state_evolution():
    from aimlib import state_evolution as se
    from aimlib.amp.run import run_amp

    res = run_amp("hardmax", 3, 0.5, 0.3, 60, seed=0)
    assert res["converged"]
    expected = se.solve(0.3, "hardmax", T=3, rho=0.5).mmse
    # one run at d = 60: finite-d deviation of order 0.01-0.03 (T = 2: sd 0.004-0.009 at d = 80-120)
    assert res["mmse"] == pytest.approx(expected, abs=0.04)
    assert res["m"] == pytest.approx(expected, abs=0.04)
