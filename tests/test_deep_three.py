"""Three hardmax attention layers (aimlib.channels.DeepAttention(layers=3), deep_histories): forward map,
the sum over the 16 pattern histories, the output moments and their cross terms, the separable SE, rho -> 0."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import cli, model
from aimlib import state_evolution as se
from aimlib.channels import DeepAttention, deep_hardmax as dh, deep_histories as dhi, deep_patterns as dp
from aimlib.channels import lambda_tables as lt
from aimlib.channels import hardmax, sample_indices
from aimlib.priors import Centred
from aimlib.state_evolution.fixed_point import cross_terms
from conftest import assert_layer_gradients

CENTRED3 = (Centred(0.5),) * 3
V = (0.7, 0.4, 0.5)


def _measure(ch, n, q, Q0, seed):
    """``(omega, h, y)`` with ``omega_l ~ N(0, q_l Sigma)``, ``h_l ~ N(omega_l, (Q0_l - q_l) Sigma)``."""
    rng = np.random.default_rng(seed)
    L = len(q)
    omega = np.stack([sample_indices(n, 2, q[ell], rng) for ell in range(L)], axis=1)
    h = omega + np.stack([sample_indices(n, 2, Q0[ell] - q[ell], rng) for ell in range(L)], axis=1)
    return omega, h, ch(h)


def test_the_layers_argument():
    ch = DeepAttention(c=0.5, layers=3)
    assert ch.n_indices == 3 and DeepAttention(c=0.5).n_indices == 2
    assert repr(ch) == "DeepAttention(c=0.5, layer=hardmax, layers=3)" and ch != DeepAttention(c=0.5)
    for bad in (1, 4):
        with pytest.raises(ValueError, match=r"layers must be one of \[2, 3\]"):
            DeepAttention(layers=bad)
    y = hardmax.output_from_signs(np.array([[1.0, -1.0]]))
    with pytest.raises(NotImplementedError, match="layers=3, layer='softmax'"):
        DeepAttention(layer="softmax", layers=3).log_partition(y, np.zeros((1, 3, 2, 2)), V)
    with pytest.raises(NotImplementedError, match="T=3"):
        ch.g_out(np.zeros((1, 3, 3)), np.zeros((1, 3, 3, 3)), V)
    with pytest.raises(NotImplementedError, match="cross term G_12"):
        ch.fisher((0.5,) * 3, (1.0,) * 3, 2)
    with pytest.raises(NotImplementedError, match="two layers"):
        ch.oracle_fisher(1, 0.5, (1.0,) * 3, 2)
    with pytest.raises(NotImplementedError, match="known part"):
        ch.separable_fisher((0.6,) * 3, (1.5,) * 3, 2, (0.5,) * 3)
    with pytest.raises(NotImplementedError, match="known part"):
        ch.moment_matrix((0.6,) * 3, (1.5,) * 3, 2, (0.5,) * 3)


@pytest.mark.slow
def test_a_new_residual_whose_table_misses_quadrature_is_refused(monkeypatch):
    """c = -0.97 passes the margin, but its three-layer interpolant misses direct quadrature by 12 % at
    (1, 2, 3): refused with the numbers, and nothing kept; c = 0.97 is tabulated and kept."""
    monkeypatch.setattr(lt, "_BUILT", {})
    with pytest.raises(ValueError, match=r"c = -0.97: the tabulated output functions miss direct quadrature by "
                                         r"0\.1\d+ .* more than the 0\.03 allowed"):
        DeepAttention(c=-0.97, layers=3).tabulate()
    assert not lt._BUILT
    DeepAttention(c=0.97, layers=3).tabulate()
    assert DeepAttention(c=0.97, layers=3).tables_ready()


def test_mixing_matrices_are_the_products_of_the_residual_matrices():
    """det M_2 = det A_2 det A_1 with det A in {(1 + c)^2, c (1 + c), c (1 + c), c^2 - 1}: zero only at c = -1, 0, 1."""
    c = 0.5
    dets = np.array([(1 + c) ** 2, c * (1 + c), c * (1 + c), c * c - 1])
    Ms = dhi.mixing_matrices(c, 3)
    assert len(Ms) == 16
    assert np.allclose([np.linalg.det(M) for M in Ms], np.outer(dets, dets).ravel())


def test_the_network_of_three_layers_is_an_aim_up_to_the_trace_terms():
    """y from the updated tokens X_2 = A_2 A_1 X equals the channel of the original indices, traces removed:
    the index of the mixed tokens M X is (M X) S (M X)^T / sqrt(d) - (Tr S / sqrt(d)) M M^T = M h M^T."""
    d, T, c = 60, 3, 0.5
    S = np.stack([model.sample_teacher(d, 0.5, seed=s, backend="numpy") for s in (1, 2, 3)])
    X = model.sample_tokens(200, T, d, seed=4, backend="numpy")
    h = model.attention_indices(X, S)

    def mixed_index(M, Sl):
        Xl = M @ X
        return Xl @ Sl @ np.swapaxes(Xl, 1, 2) / np.sqrt(d) - np.trace(Sl) / np.sqrt(d) * (M @ np.swapaxes(M, 1, 2))

    for layer in ("hardmax", "softmax"):
        ch = DeepAttention(c=c, layer=layer, beta=2.0, layers=3)
        M1 = c * np.eye(T) + ch._sigma(mixed_index(np.broadcast_to(np.eye(T), (200, T, T)), S[0]))
        M2 = (c * np.eye(T) + ch._sigma(mixed_index(M1, S[1]))) @ M1
        assert np.allclose(mixed_index(M2, S[2]), M2 @ h[:, 2] @ np.swapaxes(M2, 1, 2))
        assert np.array_equal(ch(h), ch._sigma(mixed_index(M2, S[2]))) if layer == "hardmax" else \
            np.allclose(ch(h), ch._sigma(mixed_index(M2, S[2])))


@pytest.mark.parametrize("c", [0.5, -2.0])
def test_g_out_is_the_gradient_of_log_partition_for_every_layer(c):
    ch = DeepAttention(c=c, layers=3)
    omega, _, y = _measure(ch, 6, (0.8, 1.1, 0.6), (1.5, 1.5, 1.5), seed=2)
    assert_layer_gradients(ch, y, omega, V, [(0, 0), (0, 1), (1, 1)], atol=1e-7)


def test_certain_first_layers_reduce_to_one_hardmax_layer_on_the_mixed_indices():
    """omega_1, omega_2 far inside the pattern P = I: M_2 = (1 + c)^2 I and Z_out is one hardmax layer of
    (1 + c)^4 h_3 (its variances scale by (1 + c)^8)."""
    ch = DeepAttention(c=0.5, layers=3)
    omega, _, y = _measure(ch, 4, (0.8, 1.1, 0.6), (1.5, 1.5, 1.5), seed=3)
    omega[:, 0] = np.array([[60.0, 0.0], [0.0, 60.0]])
    omega[:, 1] = np.array([[120.0, 0.0], [0.0, 120.0]])
    one_layer = hardmax.log_partition(y, 1.5**4 * omega[:, 2], V[2] * 1.5**8)
    assert np.allclose(ch.log_partition(y, omega, V), one_layer, atol=1e-9)


def test_the_history_sum_of_two_layers_is_the_pattern_sum():
    """deep_histories.log_z_and_g at L = 2 is the four-pattern sum of deep_patterns, bit for bit."""
    omega, _, y = _measure(DeepAttention(c=0.5), 50, (0.8, 1.1), (1.5, 1.5), seed=5)
    t = hardmax.signs_from_output(y)
    log_a, g1s = dp.layer1_terms(omega[:, 0], 0.7)
    log_b, g2s = dp.layer2_terms(0.5, t, omega[:, 1], 0.4)
    old = dp.pattern_posterior(log_a + log_b, g1s, g2s)
    new = dhi.log_z_and_g(0.5, t, omega, (0.7, 0.4))
    assert np.array_equal(old[0], new[0]) and np.array_equal(old[1], new[1])


def test_nishimori_per_layer():
    """E[g_l g_l^T] = -E[dg_l/domega_l] for each of the three layers, within Monte Carlo error."""
    ch, q, Q0, n, m = DeepAttention(c=0.5, layers=3), (0.8, 0.8, 0.8), (1.5, 1.5, 1.5), 40_000, 4000
    omega, _, y = _measure(ch, n, q, Q0, seed=4)
    Vq = tuple(a - b for a, b in zip(Q0, q))
    g = ch.g_out(y, omega, Vq)
    for ell in range(3):
        for a, b in [(0, 0), (0, 1)]:
            lhs = g[:, ell, a, b] ** 2
            E = np.zeros_like(omega[:m])
            E[:, ell, a, b] = E[:, ell, b, a] = 1e-5
            # d g_ab / d omega_ab with omega_ab = omega_ba moved together (the entry a <= b)
            dg = (ch.g_out(y[:m], omega[:m] + E, Vq) - ch.g_out(y[:m], omega[:m] - E, Vq))[:, ell, a, b] / 2e-5
            # the difference of the two means over its standard error (of -E[dg]: 2-8 % of the mean from
            # 4000 samples; of E[g^2]: 1-1.4 % from 40 000): measured |z| <= 1.2 over the six cases; 4 allowed
            diff_se = np.hypot(lhs.std() / np.sqrt(n), dg.std() / np.sqrt(m))
            assert abs(lhs.mean() + dg.mean()) < 4 * diff_se, (ell, a, b)


def test_the_sign_flip_of_layer_three_flips_the_output_and_g3_only():
    """(omega_3, h_3) -> -(omega_3, h_3) sends y to 1 - y, leaves g_1 and g_2 unchanged and negates g_3."""
    ch, rng = DeepAttention(c=0.5, layers=3), np.random.default_rng(1)
    omega = np.stack([sample_indices(500, 2, 0.5, rng) for _ in range(3)], axis=1)
    h = omega + np.stack([sample_indices(500, 2, 0.5, rng) for _ in range(3)], axis=1)
    flip = np.array([1.0, 1.0, -1.0])[None, :, None, None]
    y = ch(h)
    assert np.array_equal(ch(h * flip), 1 - y)
    g, g_flip = ch.g_out(y, omega, (0.5,) * 3), ch.g_out(1 - y, omega * flip, (0.5,) * 3)
    assert np.array_equal(g_flip[:, :2], g[:, :2]) and np.array_equal(g_flip[:, 2], -g[:, 2])


def test_the_output_moments_of_three_layers_and_their_cross_terms():
    """At lambda = 0 the sum is finite: r_12 = 1 (the information on layers 1 and 2 is one direction) and
    G_13 = G_23 = 0.  At lambda = (1, 1, 1) the Sobol average (2^13 points) against the Monte Carlo moments
    of the channel itself (q = 0.5, Q0 = 1: M = G / 0.5): G_12 is far from zero, G_13 and G_23 are not."""
    G0 = dhi.fisher_matrix3_direct(0.5, 0.0, 0.0, 0.0)
    assert G0[0, 1] / np.sqrt(G0[0, 0] * G0[1, 1]) == pytest.approx(1.0, abs=1e-12)
    assert G0[0, 2] == 0.0 and G0[1, 2] == 0.0
    assert np.diag(G0) == pytest.approx([0.072631, 0.025914, 0.402181], abs=1e-6)
    G = dhi.fisher_matrix3_direct(0.5, 1.0, 1.0, 1.0)
    M, err = DeepAttention(c=0.5, layers=3).output_moments((0.5,) * 3, (1.0,) * 3, n=20_000, seed=1)
    # five Monte Carlo standard errors plus 1 % of the diagonal for the Sobol average (2^13 against 2^16
    # points: 0.3 % on the diagonal at lambda = 1); observed |M - G/0.5| <= 1.0 standard errors
    tol = 5 * err + 0.01 * np.sqrt(np.outer(np.diag(M), np.diag(M)))
    assert np.all(np.abs(M - G / 0.5) < tol)
    assert M[0, 1] > 20 * err[0, 1] and G[0, 1] > 0.02            # G_12 = 0.0294: not zero
    assert abs(M[0, 2]) < 4 * err[0, 2] and abs(M[1, 2]) < 4 * err[1, 2]
    assert abs(G[0, 2]) < 2e-3 and abs(G[1, 2]) < 2e-3              # the Sobol error of a zero integral


def test_the_stored_three_layer_table_passes_through_fresh_quadrature_at_its_nodes():
    """Interpolation at the Chebyshev nodes is exact: the stored table reproduces G there (G_13 = G_23 = 0)."""
    assert 0.5 in dhi._stored3(), "aimlib/data/deep_hardmax3_tables.npz lacks c = 0.5 or has other settings"
    lam = lt.lambda_nodes(dhi.CHEB3_DEG)
    for i, j, k in [(0, 3, 8), (5, 8, 1)]:
        direct = dhi.fisher_matrix3_direct(0.5, lam[i], lam[j], lam[k])
        direct[[0, 1, 2, 2], [2, 2, 0, 1]] = 0.0
        assert dhi.fisher_matrix3(0.5, lam[i], lam[j], lam[k]) == pytest.approx(direct, rel=1e-9, abs=1e-12)


def test_the_three_layer_interpolant_against_its_quadrature():
    """The documented accuracy of fisher_matrix3 (observed: 0.12-0.28 % on the diagonal here, G_12 within
    2.0e-3 sqrt(G_11 G_22)); twice that allowed."""
    for lam in [(1.0, 1.0, 1.0), (0.0, 0.0, 1.0), (20.0, 20.0, 20.0)]:
        G, direct = dhi.fisher_matrix3(0.5, *lam), dhi.fisher_matrix3_direct(0.5, *lam)
        assert np.diag(G) == pytest.approx(np.diag(direct), rel=0.012)
        assert abs(G[0, 1] - direct[0, 1]) < 5e-3 * np.sqrt(direct[0, 0] * direct[1, 1])


def test_three_layer_state_evolution_is_gamp_ries_separable_one():
    """Centred teachers: the output has cross terms (G_12), so fixed_point iterates separable_fisher
    (prediction 'separable-gamp'), fisher and the free entropy refuse.  F_l = Schur complements of G / V."""
    ch = DeepAttention(c=0.5, layers=3)
    assert cross_terms(ch, CENTRED3) and ch.correlated_layers(CENTRED3)
    assert not cross_terms(DeepAttention(c=0.5), CENTRED3[:2])
    q, Q0 = (0.5, 0.3, 0.6), (1.0, 1.0, 1.0)
    Vq = 1 - np.array(q)
    G = dhi.fisher_matrix3(0.5, *(np.array(q) / Vq))
    A = G / np.sqrt(np.outer(Vq, Vq))
    assert ch.separable_fisher(q, Q0, 2, (0.0,) * 3) == pytest.approx(1 / np.diag(np.linalg.inv(A)), rel=1e-10)
    runs = [se.fixed_point(a, ch, T=2, rho=CENTRED3, tol=1e-10) for a in (0.5, 1.0, 2.0)]
    assert all(r.prediction == "separable-gamp" for r in runs)
    E = np.array([r.mmse for r in runs])
    assert np.all(np.diff(E, axis=0) < 0) and np.all((E > 0) & (E < 1))
    assert np.all(E[:, 2] < E[:, 0]) and np.all(E[:, 0] < E[:, 1])     # layer 3 first, layer 2 last
    with pytest.raises(ValueError, match="cross term"):
        se.free_entropy((0.2,) * 3, (1.0,) * 3, 0.5, ch, T=2, rho=CENTRED3)


def test_limit_thresholds_of_three_layers():
    """rho -> 0: layer 3 leaves E = 1 first, at the exact 1/G_33(0) (2.48644 at c = 0.5); layers 1 and 2
    get no information before (r_12 = 1 at lambda = 0), and follow at about 8.28 and 8.40."""
    onset = dh.limit_thresholds(0.5, layers=3, tol=1e-6)
    exact = 1 / dhi.fisher_matrix3_direct(0.5, 0.0, 0.0, 0.0)[2, 2]
    assert onset[2] == pytest.approx(exact, rel=1e-12) and exact == pytest.approx(2.48644, abs=1e-5)
    assert onset[2] < onset[0] < onset[1]
    assert onset[:2] == pytest.approx([8.277, 8.403], abs=0.01)
    for layer in range(3):
        assert dh.limit_error(onset[layer] * 0.999, 0.5, layers=3)[layer] == pytest.approx(1.0, abs=1e-9)
        assert dh.limit_error(onset[layer] * 1.01, 0.5, layers=3)[layer] < 1 - 1e-6


def test_the_cli_prints_three_layers_and_their_onsets(capsys):
    """se and threshold with --layers 3: GAMP-RIE's separable state evolution (no oracle columns, the cross
    overlap q_12 of layers 1 and 2) and the rho -> 0 onsets, the same numbers as the library."""
    assert cli.main(["se", "--channel", "deep-hardmax", "--layers", "3", "--rho", "0.5", "0.5", "0.5",
                     "--teachers", "centred", "--alpha", "1.0"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header == "alpha,mmse_1,mmse_2,mmse_3,q_1,q_2,q_3,q_12"
    expected = se.fixed_point(1.0, DeepAttention(c=0.5, layers=3), T=2, rho=(Centred(0.5),) * 3, tol=1e-12)
    assert [float(x) for x in row.split(",")[1:4]] == pytest.approx(list(expected.mmse), abs=1e-8)
    assert float(row.split(",")[-1]) == pytest.approx(-0.034826, abs=2e-5)   # test_deep_cross.py: layers 1-2
    assert cli.main(["threshold", "--channel", "deep-hardmax", "--layers", "3", "--c", "0.5"]) == 0
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header == "layer,alpha_bar" and len(rows) == 3
    onset = dh.limit_thresholds(0.5, layers=3)
    assert [[float(x) for x in r.split(",")] for r in rows] == [[1, onset[0]], [2, onset[1]], [3, onset[2]]]


def test_the_moments_at_zero_against_an_independent_computation():
    """An independent computation from the model alone (64 million forward passes, class means of the
    indices given y, unbiased products, jackknife errors): G_11 = 0.07281(10), G_12 = 0.04354(6),
    G_22 = 0.02604(6), G_33 = 0.40214(17), so 1/G_33 = 2.4867(11), and r_12 = 1.  The exact finite sum
    agrees within two of those standard errors."""
    G = dhi.fisher_matrix3_direct(0.5, 0.0, 0.0, 0.0)
    for (i, j), ref, err in [((0, 0), 0.07281, 1e-4), ((0, 1), 0.04354, 6e-5), ((1, 1), 0.02604, 6e-5),
                             ((2, 2), 0.40214, 1.7e-4)]:
        assert G[i, j] == pytest.approx(ref, abs=3 * err)
    assert 1 / G[2, 2] == pytest.approx(2.4867, abs=3 * 0.0011)


def test_gamp_refuses_three_layers_at_the_uninformative_start():
    """Centred teachers, ``S_hat = 0``: the first two layers' ``g_out`` are proportional on every
    sample (``r_12 = 1``), so the correlations of the output moment matrix are singular."""
    from aimlib import ConvergenceError
    from aimlib.amp import run_amp

    with pytest.raises(ConvergenceError, match="iteration 1: the layers' output moment matrix is singular"):
        run_amp(DeepAttention(layers=3), 2, (0.5, 0.5, 0.5), 0.5, 30, seed=0, teachers="centred")
