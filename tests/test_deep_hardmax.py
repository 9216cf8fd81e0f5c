"""Two attention layers as one AIM (aimlib.channels.deep_hardmax): forward map, exact Bayes side, SE, AMP."""
from __future__ import annotations

import re

import numpy as np
import pytest

from aimlib import amp, cli, model
from aimlib import state_evolution as se
from aimlib.channels import DeepAttention, deep_hardmax as dh, deep_patterns as dp, hardmax
from aimlib.channels import lambda_tables as lt, sample_indices, sigma2
from aimlib.backend import to_host
from aimlib.priors import Centred
from conftest import assert_layer_gradients

#: centred teachers: the two-layer state evolution is exact for them (proposition deep-prop-centred)
CENTRED = (Centred(0.5), Centred(0.5))

V = (0.7, 0.4)
OUTPUTS = [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)]


def _measure(ch, n, q, Q0, seed):
    """``(omega, h, y)`` with ``omega_l ~ N(0, q_l Sigma)``, ``h_l ~ N(omega_l, (Q0_l - q_l) Sigma)``."""
    rng = np.random.default_rng(seed)
    omega = np.stack([sample_indices(n, 2, q[ell], rng) for ell in range(len(q))], axis=1)
    h = omega + np.stack([sample_indices(n, 2, Q0[ell] - q[ell], rng) for ell in range(len(q))], axis=1)
    return omega, h, ch(h)


def test_the_network_is_an_aim_up_to_the_trace_term():
    """y from the updated tokens X_1 = A X equals the channel of the original indices, once the trace is removed."""
    d, T, c = 60, 3, 0.5
    S = np.stack([model.sample_teacher(d, 0.5, seed=s, backend="numpy") for s in (1, 2)])
    X = model.sample_tokens(200, T, d, seed=3, backend="numpy")
    h = model.attention_indices(X, S)
    for layer in ("hardmax", "softmax"):
        ch = DeepAttention(c=c, layer=layer, beta=2.0)
        A = c * np.eye(T) + ch._sigma(h[:, 0])
        X1 = A @ X
        literal = X1 @ S[1] @ np.swapaxes(X1, 1, 2) / np.sqrt(d)
        trace = np.trace(S[1]) / np.sqrt(d) * (A @ np.swapaxes(A, 1, 2))
        assert np.allclose(literal - trace, A @ h[:, 1] @ np.swapaxes(A, 1, 2))
        assert np.allclose(ch(h), ch._sigma(literal - trace))


def test_the_literal_form_is_decided_by_layer_one_as_d_grows():
    """With the trace kept, (Tr S/sqrt d) A A^T dominates: the hardmax output no longer depends on layer 2."""
    d, T, c = 400, 2, 0.5
    S = np.stack([model.sample_teacher(d, 0.5, seed=s, backend="numpy") for s in (4, 5)])
    X = model.sample_tokens(300, T, d, seed=6, backend="numpy")
    h = model.attention_indices(X, S)
    ch = DeepAttention(c=c)
    A = c * np.eye(T) + ch._sigma(h[:, 0])
    AAt = A @ np.swapaxes(A, 1, 2)
    literal = ch._sigma(A @ h[:, 1] @ np.swapaxes(A, 1, 2) + np.trace(S[1]) / np.sqrt(d) * AAt)
    # the kept trace term is Tr(S)/sqrt(d) ~ sqrt(rho d) ~ 14 times A A^T against O(1) indices: at d = 400
    # the outputs agree on all 300 samples (observed 1.0), the centred network's on 54 %
    assert np.mean(literal == ch._sigma(AAt)) > 0.97      # layer 1 alone fixes the output
    assert np.mean(ch(h) == ch._sigma(AAt)) < 0.9          # the centred network does not


@pytest.mark.parametrize("layers", [2, 3])
@pytest.mark.parametrize("c0", [-1.0, 0.0, 1.0])
def test_residuals_within_the_margin_of_a_collision_are_refused(c0, layers):
    """Closer than C_MARGIN to -1, 0 or 1 is refused with every digit of c and the margin; at it, accepted."""
    margin = dh.C_MARGIN[layers]
    for c in (c0, c0 + 1e-12, c0 - margin / 2, c0 + 0.99 * margin):
        with pytest.raises(ValueError, match=rf"c = {re.escape(repr(c))} lies .* need c at least {margin:g} from"):
            DeepAttention(c=c, layers=layers)
    for c in (c0 - margin, c0 + margin, c0 + 2 * margin):
        assert DeepAttention(c=c, layers=layers).c == c
    assert DeepAttention(c=c0, layer="softmax").c == c0         # the forward map of softmax layers has no tie


@pytest.mark.parametrize("c", [-1.01, -0.99, -0.01, 0.01, 0.99, 1.01])
def test_the_output_moments_are_finite_at_the_margins(c):
    """At the margin of each collision G is finite at the corners of the tabulated lambda range."""
    top = float(lt.lambda_nodes(dp.CHEB_DEG)[0])
    for lam1, lam2 in [(0.0, 0.0), (top, top), (0.0, top), (top, 0.0)]:
        for r in (0.0, 0.99):
            G = dp.fisher_matrix_direct(c, lam1, lam2, r)
            assert np.all(np.isfinite(G)) and np.all(np.diag(G) > 0), (lam1, lam2, r, G)


@pytest.mark.parametrize("q", [(0.8, 1.1), (0.8, 1.1, 0.6)])
def test_output_probabilities_match_the_forward_map(q):
    """Two and three layers: Z_out of every output against its frequency under the forward map."""
    ch, L = DeepAttention(c=0.5, layers=len(q)), len(q)
    omega, _, _ = _measure(ch, 1, q, (1.5,) * L, seed=0)
    rng = np.random.default_rng(1)
    N, Vs = 200_000, (0.7, 0.4, 0.5)[:L]
    h = omega + np.stack([sample_indices(N, 2, Vs[ell], rng) for ell in range(L)], axis=1)
    t = hardmax.signs_from_output(ch(h))
    total = 0.0
    for s in OUTPUTS:
        p = float(np.exp(ch.log_partition(hardmax.output_from_signs(np.array([s])), omega, Vs))[0])
        emp = np.mean((t[:, 0] == s[0]) & (t[:, 1] == s[1]))
        # four binomial standard errors at N = 200 000 (observed |z| <= 1.4)
        assert emp == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / N) + 1e-4)
        total += p
    assert total == pytest.approx(1.0, abs=1e-12)


def test_g_out_is_the_gradient_of_log_partition_for_both_layers():
    ch = DeepAttention(c=2.0)
    omega, _, y = _measure(ch, 6, (0.8, 1.1), (1.5, 1.5), seed=2)
    assert_layer_gradients(ch, y, omega, V, [(0, 0), (0, 1), (1, 1)], atol=1e-7)


def test_a_certain_first_layer_reduces_to_one_hardmax_layer_on_the_mixed_indices():
    """omega_1 far inside one pattern: Z_out is the orthant probability of that pattern's layer 2 alone."""
    ch = DeepAttention(c=0.5)
    omega, _, y = _measure(ch, 4, (0.8, 1.1), (1.5, 1.5), seed=3)
    omega[:, 0] = np.array([[60.0, 0.0], [0.0, 60.0]])      # s = (+, +): P = I, A = (1 + c) I
    A = 1.5 * np.eye(2)
    mixed = A @ omega[:, 1] @ A.T
    one_layer = hardmax.log_partition(y, mixed, V[1] * 1.5**4)   # H = 2.25 h2: variances scale by 2.25^2
    assert np.allclose(ch.log_partition(y, omega, V), one_layer, atol=1e-9)


@pytest.mark.parametrize("c", [0.5, -0.5])
def test_nishimori_per_layer_and_vanishing_cross_term(c):
    """E[g_l g_l^T] = -E[dg_l/domega_l] (per layer) and 2 sum Sigma E[g_1 g_2] = 0, within Monte Carlo error."""
    ch, q, Q0, n = DeepAttention(c=c), (0.8, 0.8), (1.5, 1.5), 60_000
    omega, _, y = _measure(ch, n, q, Q0, seed=4)
    Vq = tuple(a - b for a, b in zip(Q0, q))
    g = ch.g_out(y, omega, Vq)
    iu = np.triu_indices(2)
    w = sigma2(2)[iu]
    G = [g[:, ell][:, iu[0], iu[1]] for ell in range(2)]
    for ell in range(2):
        lhs = np.mean(G[ell][:, 0] ** 2)
        E = np.zeros_like(omega[:4000])
        E[:, ell, 0, 0] = 1e-5
        dg = (ch.g_out(y[:4000], omega[:4000] + E, Vq) - ch.g_out(y[:4000], omega[:4000] - E, Vq))[:, ell, 0, 0] / 2e-5
        # Monte Carlo: -E[dg] from 4000 samples (relative standard error 1.8-3.1 %), E[g^2] from 60 000
        # (0.7-0.8 %); 0.06 is 2-3 combined standard errors, and these draws deviate by at most 5.0 %
        # (c = -0.5, layer 2; over all 60 000 samples that case is 0.15 %, no bias)
        assert lhs == pytest.approx(-np.mean(dg), rel=0.06)
    cross = 2 * np.sum(w * G[0] * G[1], axis=1)
    assert abs(cross.mean()) < 4 * cross.std() / np.sqrt(n)
    F = ch.fisher(q, Q0, 2)
    for ell in range(2):
        mc = 2 * np.sum(w * G[ell] ** 2, axis=1)
        # four Monte Carlo standard errors (0.55-0.61 % each at n = 60 000) plus 1 % for the tabulated F_l
        # (a 2^12-point Sobol average, interpolated to 0.1 % at lambda ~ 1); observed |F/mc - 1| <= 0.92 %
        assert F[ell] == pytest.approx(mc.mean(), abs=4 * mc.std() / np.sqrt(n) + 0.01 * F[ell])


def test_the_fisher_interpolant_against_its_quadrature():
    ch = DeepAttention(c=0.5)
    # twice the accuracy documented in fisher_scaled: 0.1 % for lambda_l <= 50, about 1 % in [100, 1000]
    # (observed: up to 1.03e-3 at (0, 0) and 1.2e-2 at (300, 150))
    for lam, rel in [((0.0, 0.0), 2e-3), ((0.7, 3.0), 2e-3), ((40.0, 0.2), 2e-3), ((300.0, 150.0), 2e-2)]:
        assert dp.fisher_scaled(0.5, *lam) == pytest.approx(dp.fisher_scaled_direct(0.5, *lam), rel=rel)
    with pytest.raises(ValueError, match="tabulated range"):
        ch.fisher((1.4999, 0.5), (1.5, 1.5), 2)


@pytest.mark.parametrize("c", dp.STORED_RESIDUALS)
def test_the_stored_tables_pass_through_fresh_quadrature_at_their_nodes(c):
    """Interpolation at the Chebyshev nodes is exact: the stored table must reproduce G_l there."""
    assert float(c) in dp._stored(), "aimlib/data/deep_hardmax_tables.npz lacks this c or has other settings"
    lam, r = lt.lambda_of(lt.chebyshev_nodes(dp.CHEB_DEG)), (lt.chebyshev_nodes(dp.R_DEG) + 1) / 2
    for i, j, k in [(0, 3, 0), (5, 10, 4), (9, 1, 8)]:
        direct = dp.fisher_scaled_direct(c, lam[i], lam[j])
        assert dp.fisher_scaled(c, lam[i], lam[j]) == pytest.approx(direct, rel=1e-9)
        direct = dp.fisher_matrix_direct(c, lam[i], lam[j], r[k])
        assert dp.fisher_matrix(c, lam[i], lam[j], r[k]) == pytest.approx(direct, rel=1e-9, abs=1e-12)


def test_the_axis_by_axis_grid_is_the_direct_quadrature():
    """moments_grid computes each layer's terms once per axis: the same numbers as fisher_matrix_direct at
    each node, and at a stored c the same table as the stored one (made node by node)."""
    lam, rs = lt.lambda_nodes(dp.CHEB_DEG), [0.0, 0.7]
    G = dp.moments_grid(0.3, rs)
    for i, j, k in [(0, 0, 0), (3, 7, 1), (10, 2, 1)]:
        np.testing.assert_allclose(G[i, j, k], dp.fisher_matrix_direct(0.3, lam[i], lam[j], rs[k]), rtol=1e-12,
                                   atol=1e-15)
    np.testing.assert_allclose(dp.build_centred(0.5), dp._stored()[0.5][0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("c, rel", [(0.3, 0.01), (0.99, 0.01), (-100.0, 0.01), (0.01, 0.06)])
def test_a_new_residual_is_tabulated_on_demand_to_its_stated_accuracy(monkeypatch, c, rel):
    """Any c in range: its table is built once (seconds), with progress, to the accuracy fisher_scaled states."""
    monkeypatch.setattr(lt, "_BUILT", {})
    ch, calls = DeepAttention(c=c), []
    assert not ch.tables_ready()
    ch.tabulate(progress=lambda done, total: calls.append((done, total)))
    assert ch.tables_ready() and not ch.tables_ready(shared=True)
    assert calls == [(k, 11) for k in range(1, 12)]
    rng = np.random.default_rng(1)
    for lam in [np.exp(rng.uniform(np.log(0.05), np.log(50), 2)) for _ in range(4)] + [(0.05, 0.05), (50, 50)]:
        np.testing.assert_allclose(dp.fisher_scaled(c, *lam), dp.fisher_scaled_direct(c, *lam), rtol=rel)
    assert DeepAttention(c=0.5).tables_ready(shared=True)          # stored


def test_two_layer_free_entropy_is_stationary_at_the_fixed_point():
    """d Phi / d qhat_l = 0 (the prior side) and d Phi / d q_l = 0 (the channel side) at the SE fixed point."""
    ch, alpha, eps = DeepAttention(c=0.5), 0.8, 1e-4
    r = se.solve(alpha, ch, T=2, rho=CENTRED, tol=1e-12)
    q, qhat = np.array(r.q), np.array(r.qhat)
    phi = lambda q_, qh_: se.free_entropy(q_, qh_, alpha, ch, T=2, rho=CENTRED)  # noqa: E731
    for ell in range(2):
        e = np.eye(2)[ell] * eps
        d_qhat = (phi(q, qhat + e) - phi(q, qhat - e)) / (2 * eps)
        d_q = (phi(q + e, qhat) - phi(q - e, qhat)) / (2 * eps)
        assert abs(d_qhat) < 1e-6 and abs(d_q) < 1e-3 * qhat[ell]
    # away from the fixed point the slopes are not zero
    assert abs((phi(q, qhat + [0.5, 0]) - phi(q, qhat - [0.5, 0])) / 1.0) > 1e-3


def test_the_two_layer_fixed_point_is_the_same_from_an_informed_start():
    ch = DeepAttention(c=0.5)
    for alpha in (0.2, 1.0, 2.5):
        cold = se.solve(alpha, ch, T=2, rho=CENTRED, tol=1e-11)
        warm = se.solve(alpha, ch, T=2, rho=CENTRED, tol=1e-11, init=(0.01, 0.01))
        assert np.allclose(cold.mmse, warm.mmse, atol=1e-7)


def test_state_evolution_layer_two_is_learned_first_and_the_cli_prints_both_layers(capsys):
    ch = DeepAttention(c=0.5)
    c = se.curve([0.1, 0.5, 1.0, 2.0], ch, T=2, rho=CENTRED, tol=1e-10)
    assert c.mmse.shape == (4, 2) and np.all(np.diff(c.mmse, axis=0) < 0)
    assert np.all(c.mmse[:, 1] < c.mmse[:, 0]) and np.all((c.mmse > 0) & (c.mmse < 1))
    assert cli.main(["se", "--channel", "deep-hardmax", "--layers", "2", "--rho", "0.5", "0.5", "--c", "0.5",
                     "--teachers", "centred", "--alpha", "1.0"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header == "alpha,mmse_1,mmse_2,q_1,q_2"
    assert [float(x) for x in row.split(",")[1:3]] == pytest.approx(list(c.mmse[2]), abs=1e-8)


def test_gamp_rie_with_two_denoisers_lands_on_the_two_layer_state_evolution():
    """Centred teachers, d = 80, alpha = 1: each layer within 0.06 of the SE (the one-layer tolerance at this d)."""
    ch = DeepAttention(c=0.5)
    # at d = 80 the iterates need not settle on a point: a run that ends on a cycle or a wander (the default
    # rule says 'oscillating') lands there all the same; one at the cap would not
    run = amp.run_amp(ch, 2, (0.5, 0.5), 1.0, 80, seed=0, teachers="centred", on_max_iter="return")
    expected = se.fixed_point(1.0, ch, T=2, rho=CENTRED, tol=1e-10).mmse
    assert run["reason"] in ("tol", "oscillating") and run["mmse"] == pytest.approx(expected, abs=0.06)


def test_gamp_rie_on_wishart_teachers_lands_on_its_separable_state_evolution():
    """Wishart teachers, d = 80, alpha = 1: GAMP-RIE with the full Onsager matrix A ends within 0.06 of
    its separable state evolution (the centred test's tolerance; here 0.005 and 0.007), and both
    its layers' errors are above the oracle's lower bounds."""
    ch = DeepAttention(c=0.5)
    run = amp.run_amp(ch, 2, (0.5, 0.5), 1.0, 80, seed=0, on_max_iter="return")
    expected = se.fixed_point(1.0, ch, T=2, rho=(0.5, 0.5), tol=1e-10).mmse
    assert run["reason"] in ("tol", "oscillating") and run["mmse"] == pytest.approx(expected, abs=0.06)
    for ell in (1, 2):
        assert run["mmse"][ell - 1] > se.oracle_fixed_point(1.0, ch, ell, T=2, rho=(0.5, 0.5)).mmse


def test_a_hardmax_layer_puts_each_rows_one_on_its_largest_index():
    """The layer's map against the definition, row by row: ``y_ab = 1`` at ``b = argmax_c h_ac``, else 0."""
    h = to_host(sample_indices(50, 3, 1.0, 7))
    y = to_host(DeepAttention(c=0.3)._sigma(h))
    for row, out in zip(h.reshape(-1, 3), y.reshape(-1, 3)):
        top = max(range(3), key=lambda b: row[b])
        assert out.tolist() == [1.0 if b == top else 0.0 for b in range(3)]


def test_limit_thresholds_are_where_each_layer_leaves_one():
    onset = dh.limit_thresholds(0.5, tol=1e-7)
    # the exact onset: at lambda = 0 the estimates vanish and G_2(0, 0) is a finite sum (1.16864 at c = 0.5);
    # the interpolant's 1/G_2(0, 0) is 1.1695, within its documented 0.1 %
    exact = 1 / dp.fisher_scaled_direct(0.5, 0.0, 0.0)[1]
    assert onset[1] == pytest.approx(exact, rel=1e-12) and exact == pytest.approx(1.16864, abs=1e-5)
    assert exact == pytest.approx(1 / dp.fisher_scaled(0.5, 0.0, 0.0)[1], rel=1e-3)
    assert onset[0] > onset[1]          # the second layer is learned first
    for layer in range(2):
        assert dh.limit_error(onset[layer] * 0.999, 0.5)[layer] == pytest.approx(1.0, abs=1e-9)
        assert dh.limit_error(onset[layer] * 1.01, 0.5)[layer] < 1 - 1e-6
    with pytest.raises(ValueError, match="alpha_bar_max"):
        dh.limit_thresholds(0.5, alpha_bar_max=1.5)


def test_the_sign_flip_of_layer_two_flips_the_output_and_g2_only():
    """The symmetry of proposition deep-prop-centred, on samples: (omega_2, h2) -> -(omega_2, h2) sends
    y to 1 - y and leaves g_1 unchanged while negating g_2 (exactly)."""
    ch, rng = DeepAttention(c=0.5), np.random.default_rng(1)
    omega = np.stack([sample_indices(500, 2, 0.5, rng) for _ in range(2)], axis=1)
    h = omega + np.stack([sample_indices(500, 2, 0.5, rng) for _ in range(2)], axis=1)
    flip = np.array([1.0, -1.0])[None, :, None, None]
    y = ch(h)
    assert np.array_equal(ch(h * flip), 1 - y)
    g, g_flip = ch.g_out(y, omega, (0.5, 0.5)), ch.g_out(1 - y, omega * flip, (0.5, 0.5))
    assert np.array_equal(g_flip[:, 0], g[:, 0]) and np.array_equal(g_flip[:, 1], -g[:, 1])


def test_cross_term_vanishes_for_centred_teachers_and_not_for_wishart_ones():
    """Centred law: the moments' diagonal is F_l (within 5 standard errors of the deterministic fisher) and
    the cross term is 0 within 5 standard errors.  Wishart law (omega_l share sqrt(rho) z_0) at q = rho = 0.5:
    F_1, F_2 about 10 % and 6 % below the independent law's and a cross term of about +0.19
    (THEORY section 8 reports 0.27, 0.88 and +0.19), far from 0."""
    ch = DeepAttention(c=0.5)
    M, err = ch.output_moments((0.5, 0.5), (1.0, 1.0), n=40_000, seed=2)
    assert np.all(np.abs(np.diag(M) - ch.fisher((0.5, 0.5), (1.0, 1.0), 2)) < 5 * np.diag(err))
    assert abs(M[0, 1]) < 5 * err[0, 1]
    M, err = ch.output_moments((0.5, 0.5), (1.5, 1.5), shared=(0.5, 0.5), n=40_000, seed=3)
    independent = np.array(ch.fisher((0.5, 0.5), (1.5, 1.5), 2))
    assert M[0, 1] == pytest.approx(0.19, abs=5 * err[0, 1]) and M[0, 1] > 20 * err[0, 1]
    assert np.diag(M) / independent == pytest.approx([0.90, 0.94], abs=0.02)   # 5 standard errors or more


def test_the_shared_law_moments_are_the_fisher_matrix_and_the_separable_f_its_schur_complements():
    """Wishart law at q = rho = 0.5 (r = 1): the Monte Carlo moments M of output_moments are
    A = G / sqrt(V V') from the deterministic fisher_matrix (within 5 standard errors plus 1 % for the
    QMC average), and separable_fisher is 1 / diag(A^-1) = (A_11 - A_12^2/A_22, A_22 - A_12^2/A_11)."""
    ch = DeepAttention(c=0.5)
    M, err = ch.output_moments((0.5, 0.5), (1.5, 1.5), shared=(0.5, 0.5), n=40_000, seed=3)
    A = dp.fisher_matrix(0.5, 0.5, 0.5, 1.0)            # V = 1: A = G
    assert np.all(np.abs(M - A) < 5 * err + 0.01 * np.abs(A))
    F = ch.separable_fisher((0.5, 0.5), (1.5, 1.5), 2, (0.5, 0.5))
    assert F == pytest.approx([A[0, 0] - A[0, 1] ** 2 / A[1, 1], A[1, 1] - A[0, 1] ** 2 / A[0, 0]], rel=1e-12)
    assert F[0] < 0.9 * A[0, 0] and F[1] < 0.9 * A[1, 1]
    # no shared part: the cross term is zero (r = 0) and the separable F is the Bayes F
    assert ch.separable_fisher((0.5, 0.5), (1.0, 1.0), 2, (0.0, 0.0)) == pytest.approx(
        ch.fisher((0.5, 0.5), (1.0, 1.0), 2), rel=2e-3)


def test_the_shared_law_interpolant_against_its_quadrature():
    """On the states Wishart teachers reach (q_l in [rho_l, 1 + rho_l - 0.05], r = sqrt(rho_1 rho_2/(q_1 q_2))):
    the documented accuracy of fisher_matrix, 1 % on G_11, G_22 and 0.3 % of sqrt(G_11 G_22) on G_12
    (observed over 100 random states at rho = 0.1, 0.5, 2: 0.6 % and 0.12 %)."""
    for rho, V in [(0.5, (1.0, 1.0)), (0.5, (0.7, 0.45)), (0.5, (0.2, 0.1)), (2.0, (0.9, 0.3)), (0.1, (0.6, 0.06))]:
        q = 1 + rho - np.array(V)
        lam, r = q / V, rho / np.sqrt(q[0] * q[1])
        G, direct = dp.fisher_matrix(0.5, *lam, r), dp.fisher_matrix_direct(0.5, *lam, r)
        assert np.diag(G) == pytest.approx(np.diag(direct), rel=0.01)
        assert abs(G[0, 1] - direct[0, 1]) < 3e-3 * np.sqrt(direct[0, 0] * direct[1, 1])
    assert abs(dp.fisher_matrix_direct(0.5, 2.0, 2.0, 0.0)[0, 1]) < 1e-3    # the cross term vanishes at r = 0


@pytest.mark.parametrize("layer", [1, 2])
def test_the_oracle_fisher_is_the_limit_of_a_known_other_layer(layer):
    """The oracle's F by Monte Carlo through the channel's own g_out with the other layer's variance
    1e-9 (its index known): within 5 standard errors plus 1 % of the indicator sum of oracle_fisher."""
    ch, n, rng = DeepAttention(c=0.5), 40_000, np.random.default_rng(11 + layer)
    q, Q0, s = 0.9, (1.5, 1.5), (0.5, 0.5)
    z0 = sample_indices(n, 2, 1.0, rng)
    l, o = layer - 1, 2 - layer
    omega = np.empty((n, 2, 2, 2))
    omega[:, l] = np.sqrt(s[l]) * z0 + sample_indices(n, 2, q - s[l], rng)
    omega[:, o] = np.sqrt(s[o]) * z0 + sample_indices(n, 2, Q0[o] - s[o], rng)    # the known index
    h = omega.copy()
    h[:, l] += sample_indices(n, 2, Q0[l] - q, rng)
    Vs = [1e-9, 1e-9]
    Vs[l] = Q0[l] - q
    with np.errstate(all="ignore"):      # the known layer's own gradients overflow at V = 1e-9
        g = ch.g_out(ch(h), omega, tuple(Vs))[:, l]
    assert np.all(np.isfinite(g))
    iu = np.triu_indices(2)
    terms = 2 * np.sum(sigma2(2)[iu] * g[:, iu[0], iu[1]] ** 2, axis=1)
    F = ch.oracle_fisher(layer, q, Q0, 2, s)
    assert F == pytest.approx(terms.mean(), abs=5 * terms.std() / np.sqrt(n) + 0.01 * F)
    # knowing the other layer is worth more than the separable share of the information
    assert F > ch.separable_fisher((q, q), Q0, 2, s)[l]


def test_the_oracle_fisher_against_an_independent_rejection_sampler():
    """An independent computation from the model alone (posterior means by rejection sampling of the
    forward map, no orthant formulas; 2 x 40 000 outer samples): G_1^orc(1, 0.3) = 1.080(15),
    G_1^orc(0.5, 0) = 1.183(14), G_2^orc(1, 0.3) = 1.671(17), G_2^orc(0.5, 0) = 1.880(13).  The
    2^12-point Sobol average with indicator factors is within 0.4 % of them (1 % allowed)."""
    for layer, lam, r, ref in [(1, 1.0, 0.3, 1.080), (1, 0.5, 0.0, 1.183), (2, 1.0, 0.3, 1.671),
                               (2, 0.5, 0.0, 1.880)]:
        assert dp.oracle_fisher_scaled(0.5, layer, lam, r) == pytest.approx(ref, rel=0.01)


def test_wishart_teachers_get_the_separable_bound_and_the_oracle_bound():
    """GAMP's separable state evolution above the oracle's (a lower bound) for both layers;
    the free entropy still refuses (the Bayes side needs a cross overlap); the CLI prints both."""
    ch = DeepAttention(c=0.5)
    upper = se.fixed_point(0.5, ch, T=2, rho=(0.5, 0.5), tol=1e-10)
    assert upper.prediction == "separable-gamp"
    lower = [se.oracle_fixed_point(0.5, ch, ell, T=2, rho=(0.5, 0.5), tol=1e-10) for ell in (1, 2)]
    assert all(r.prediction == "oracle" for r in lower)
    assert lower[0].mmse < upper.mmse[0] and lower[1].mmse < upper.mmse[1]
    with pytest.raises(ValueError, match="zero mean"):
        se.free_entropy((0.2, 0.2), (1.0, 1.0), 0.5, ch, T=2, rho=(0.5, 0.5))
    assert se.fixed_point(0.5, ch, T=2, rho=CENTRED).prediction == "bayes"


def test_the_cli_prints_gamp_oracle_and_cross_overlap_columns_for_wishart_teachers(capsys):
    assert cli.main(["se", "--channel", "deep-hardmax", "--layers", "2", "--rho", "0.5", "0.5", "--c", "0.5",
                     "--alpha", "0.5", "--cross", "first-order"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header == "alpha,mmse_1,mmse_2,q_1,q_2,oracle_1,oracle_2,q_12"
    upper = se.fixed_point(0.5, DeepAttention(c=0.5), T=2, rho=(0.5, 0.5), tol=1e-12).mmse
    vals = [float(x) for x in row.split(",")]
    assert vals[1:3] == pytest.approx(list(upper), abs=1e-8) and vals[5] < vals[1] and vals[6] < vals[2]
    assert vals[7] == pytest.approx(-0.02176, abs=2e-5)     # tests/test_deep_cross.py: the regression values


def test_centred_data_sets_are_the_wishart_ones_shifted():
    """Same seed: the centred teachers are the Wishart ones minus sqrt(rho) I, the tokens are the same."""
    w = model.sample_dataset(0.2, 20, 2, (0.5, 0.3), DeepAttention(c=0.5), 4)
    c = model.sample_dataset(0.2, 20, 2, (0.5, 0.3), DeepAttention(c=0.5), 4, teachers="centred")
    shift = np.sqrt([0.5, 0.3])[:, None, None] * np.eye(20)
    assert np.allclose(to_host(c.S) + shift, to_host(w.S)) and np.array_equal(to_host(c.X), to_host(w.X))
    assert c.priors == (Centred(0.5), Centred(0.3)) and c.rho == (0.5, 0.3)


def test_the_cli_prints_the_onsets_of_both_layers(capsys):
    assert cli.main(["threshold", "--channel", "deep-hardmax", "--layers", "2", "--c", "0.5"]) == 0
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header == "layer,alpha_bar"
    onset = dh.limit_thresholds(0.5)
    assert [[float(x) for x in r.split(",")] for r in rows] == [[1, onset[0]], [2, onset[1]]]
    for argv in (["--layers", "4"], ["--T", "3"], ["--teachers", "centred"], ["--rho", "0.5", "0.5"]):
        assert cli.main(["threshold", "--channel", "deep-hardmax", "--c", "0.5", *argv]) == 2


def test_the_command_line_shows_progress_while_it_tabulates_a_new_residual(monkeypatch, capsys):
    monkeypatch.setattr(lt, "_BUILT", {})
    assert cli.main(["threshold", "--channel", "deep-hardmax", "--c", "0.3"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "layer,alpha_bar" and len(out.splitlines()) == 3
    assert err.splitlines()[0].startswith("deep-hardmax: tabulating the output functions of 2 layers at c = 0.3")
    assert re.fullmatch(r"deep-hardmax: tabulated in \d+\.\d s", err.splitlines()[-1])
    assert cli.main(["threshold", "--channel", "deep-hardmax", "--c", "0.3"]) == 0      # built once
    assert capsys.readouterr().err == ""
