"""The state evolution of two-layer GAMP-RIE with the cross overlap and the mixing
(aimlib.state_evolution.cross_fixed_point): its first-order prior side against measured RIEs, its
reduction to the separable state evolution, and its refusals."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.errors import ConvergenceError
from aimlib.priors import Centred, Gaussian, Wishart
from aimlib.priors.correlated import cross_residual, measure_cross_residual
from aimlib.state_evolution.cross_fixed_point import (ChannelSide, cross_fixed_point, first_order_prior,
                                                      measured_prior, measured_shifts, monte_carlo_side,
                                                      separable_side)
from script_support import assert_first_order_row, committed, made_by_args

CH = DeepAttention(0.5)
WISHART = (Wishart(0.5), Wishart(0.5))


def _paired(priors, deltas, kappa, d, seeds, **parts):
    """Measured ``e_12`` with the planted parts minus the same instances without them (the instances'
    own scatter cancels), and the same instances' ``e_12`` with them."""
    with_parts = [measure_cross_residual(priors, deltas, kappa, d, s, **parts)["e_12"] for s in seeds]
    without = [measure_cross_residual(priors, deltas, kappa, d, s)["e_12"] for s in seeds]
    return np.subtract(with_parts, without), np.array(with_parts)


def test_gaussian_teachers_the_first_order_with_mixing_is_exact():
    """Linear denoisers: ``e_12 = mmse_1 mmse_2 (kappa/sqrt(D1 D2) - a_12/D1 - a_21/D2)`` holds with no
    higher order, so two RIEs at ``d = 400`` meet it within their sampling error."""
    deltas, kappa, mixing = (0.8, 0.5), -0.4, (0.3, 0.2)
    _, e = _paired((Gaussian(), Gaussian()), deltas, kappa, 400, range(4), mixing=mixing)
    m = [x / (1 + x) for x in deltas]
    exact = cross_residual(m, deltas, kappa, mixing)
    assert abs(exact - cross_residual(m, deltas, kappa)) > 0.05            # the mixing matters here
    assert abs(e.mean() - exact) < 4 * e.std(ddof=1) / 2 + 2e-3


def test_wishart_teachers_mixing_enters_through_the_mean_jacobian():
    """Wishart teachers at the alpha = 0.5 fixed point's noises (d = 500): planted parts ``a_lk S_k`` move
    ``e_12`` by ``-mmse_1 mmse_2 (a_12/D1 + a_21/D2)`` within 12 % (the next orders: 9 % measured, most of
    it the terms in ``kappa a`` that the parts along the identity, ``a_lk sqrt(rho_k) I``, bring), while a
    part of the other layer's estimate (the memory) moves it by under a tenth of that."""
    deltas, kappa = (2.80, 1.22), -0.136
    m = [p.mmse(x) for p, x in zip(WISHART, deltas)]
    shift, _ = _paired(WISHART, deltas, kappa, 500, range(3), mixing=(0.05, 0.03))
    predicted = cross_residual(m, deltas, kappa, (0.05, 0.03)) - cross_residual(m, deltas, kappa)
    assert predicted < -0.01
    assert abs(shift.mean() / predicted - 1) < 0.12
    memory, _ = _paired(WISHART, deltas, kappa, 500, range(3), memory=(0.05, 0.03))
    assert abs(memory.mean()) < 0.1 * abs(predicted)


def _linear_pair(deltas, kappa, A, B):
    """Gaussian (GOE) teachers, whose posterior means are ``R_l/(1 + Delta_l)``: the errors and the
    cross-covariance of the inputs ``R_l = sum_k A_lk S_k + B_lk S0_k + sqrt(Delta_l) Z_l`` in closed form.
    Every matrix is linear in ``(S_1, S_2, Z_1, Z_2)``, whose second moments are ``I`` and, for the noises,
    ``[[1, kappa], [kappa, 1]]``; the errors are quadratic forms in the coefficients."""
    dl = np.asarray(deltas, dtype=float)
    cov = np.eye(4)
    cov[2, 3] = cov[3, 2] = kappa
    own = np.zeros((2, 4))                                   # S0_k = (S_k + sqrt(D_k) Z_k)/(1 + D_k)
    for k in (0, 1):
        own[k, k], own[k, 2 + k] = 1 / (1 + dl[k]), np.sqrt(dl[k]) / (1 + dl[k])
    errors = []
    for l in (0, 1):
        c = np.zeros(4)
        c[:2] = A[l]
        c += B[l] @ own
        c[2 + l] += np.sqrt(dl[l])
        c /= 1 + dl[l]
        c[l] -= 1
        errors.append(c)
    return np.array([[e @ cov @ f for f in errors] for e in errors])


@pytest.mark.parametrize("A, B", [([[1.0, 0.3], [0.2, 1.0]], np.zeros((2, 2))),
                                  ([[0.9, 0.3], [-0.2, 1.1]], [[0.1, -0.2], [0.25, -0.05]])])
def test_measured_prior_side_meets_the_linear_closed_form_with_every_part(A, B):
    """Two Gaussian RIEs at ``d = 400``: the measured shifts (inputs with ``kappa``, the whole mixing ``A``
    and the memory ``B``, minus the same instances without them) match the closed form of
    :func:`_linear_pair`, diagonals included; with off-diagonal parts only, the closed form's ``e_12`` is
    the first order's (exact for linear denoisers)."""
    deltas, kappa = (0.8, 0.5), -0.4
    gauss = (Gaussian(), Gaussian())
    mean, err = measured_shifts(gauss, deltas, kappa, A, B, 400, range(4))
    exact = _linear_pair(deltas, kappa, np.asarray(A), np.asarray(B))
    plain = [x / (1 + x) for x in deltas]
    expected = [exact[0, 0] - plain[0], exact[1, 1] - plain[1], exact[0, 1]]
    assert np.max(np.abs(expected)) > 0.05                                   # the parts matter here
    assert np.all(np.abs(mean - expected) < 4 * err + 3e-3), (mean, err, expected)
    if not np.any(B) and np.allclose(np.diag(A), 1):
        assert exact[0, 1] == pytest.approx(cross_residual(plain, deltas, kappa, (A[0][1], A[1][0])))


def test_measured_inputs_take_a_pair_as_the_off_diagonal_of_the_whole_matrices():
    """A pair ``(x_12, x_21)`` is the mixing ``[[1, x_12], [x_21, 1]]`` and the memory with a zero diagonal;
    ``A = I``, ``B = 0`` is the instance without parts."""
    args = (WISHART, (2.8, 1.2), -0.2, 60, 3)
    pair = measure_cross_residual(*args, mixing=(0.05, 0.03), memory=(0.02, -0.01))
    whole = measure_cross_residual(*args, mixing=[[1, 0.05], [0.03, 1]], memory=[[0, 0.02], [-0.01, 0]])
    assert pair == whole
    assert measure_cross_residual(*args, mixing=np.eye(2), memory=np.zeros((2, 2))) == measure_cross_residual(*args)
    with pytest.raises(ValueError, match="mixing must be a pair"):
        measure_cross_residual(*args, mixing=(0.1, 0.2, 0.3))
    with pytest.raises(ValueError, match="memory must be a pair"):
        measure_cross_residual(*args, memory=[[0, np.nan], [0, 0]])


def test_measured_prior_iterates_to_the_exact_fixed_point_for_gaussian_teachers():
    """A fixed channel side (``kappa = -0.3``, off-diagonal mixing, no memory) and Gaussian teachers: the
    fixed point with the measured prior side is the first-order one, exact here, within the measurement."""
    F = np.array([[1.0, 0.3], [0.3, 1.0]])
    at = ChannelSide(F, np.array([[1.0, 0.1], [0.05, 1.0]]), np.zeros((2, 2)), np.zeros((2, 2)))
    gauss = (Gaussian(), Gaussian())
    runs = [cross_fixed_point(1.0, CH, gauss, (0.5, 0.5, 0.0), side=lambda q, Q0, e: at, prior=prior, tol=1e-6,
                              damping=0.0, further=2)
            for prior in (first_order_prior(gauss), measured_prior(gauss, d=300, seeds=range(3)))]
    assert runs[0].kappa == pytest.approx(-0.3)
    assert np.array_equal(runs[1].memory, at.memory)                # the fixed point reports the side's memory
    assert np.allclose(runs[1].mmse, runs[0].mmse, atol=3e-3)
    assert runs[1].e_12 == pytest.approx(runs[0].e_12, abs=3e-3)
    assert abs(runs[0].e_12) > 0.05


def test_the_diagonal_of_the_mixing_is_a_loss_of_signal_to_noise():
    """``R_l = A_ll S_l + sqrt(Delta_l) Z_l`` carries what ``S_l`` seen at noise ``Delta_l / A_ll^2`` carries, and an
    RIE tuned to ``Delta_l`` misses that noise's posterior mean by ``O(A_ll - 1)``, which moves a posterior mean's
    error at second order only: the measured shifts are ``mmse(Delta_l / A_ll^2) - mmse(Delta_l)`` (Wishart
    teachers, ``d = 400``, the alpha = 0.3 fixed point's noises, diagonals as large as twice the fixed point's)."""
    deltas, A = (7.42, 2.90), np.diag([0.997, 0.987])
    mean, err = measured_shifts(WISHART, deltas, 0.0, A, np.zeros((2, 2)), 400, range(8))
    expected = [p.mmse(x / a**2) - p.mmse(x) for p, x, a in zip(WISHART, deltas, np.diag(A))]
    assert expected[1] > 0.005
    assert np.all(np.abs(mean[:2] - expected) < 4 * err[:2] + 1e-4), (mean, err, expected)
    assert abs(mean[2]) < 4 * err[2] + 2e-4                      # no cross term without kappa or off-diagonal parts


@pytest.mark.slow
def test_the_measured_prior_side_has_settled_in_d():
    """At the alpha = 0.3 fixed point's noises and parts (the committed row, rounded) the measured shifts at
    ``d = 600`` (the script's) and ``d = 1000`` agree within their errors: ``e_12`` to ``1e-4``, the errors'
    shifts to ``1e-3`` (the diagonal of the mixing raises layer 2's by 0.003)."""
    A = np.array([[0.9985, 0.0357], [0.0146, 0.9937]])
    B = np.array([[-0.0163, -0.0135], [-0.0036, -0.0031]])
    at = [measured_shifts(WISHART, (7.42, 2.90), -0.199, A, B, d, range(n)) for d, n in ((600, 8), (1000, 4))]
    (m600, e600), (m1000, e1000) = at
    assert m600[1] > 0.002 and m600[2] < -0.029
    assert np.all(np.abs(m600 - m1000) < 3 * np.hypot(e600, e1000) + [2e-4, 2e-4, 1e-4])


def test_measured_prior_side_refusals():
    """A channel side without the memory, and fewer than two instances, are refused by name."""
    prior = measured_prior(WISHART, d=50, seeds=range(2))
    with pytest.raises(ValueError, match="memory"):
        prior((1.0, 1.0), 0.1, ChannelSide(np.eye(2), np.eye(2), np.zeros((2, 2))))
    with pytest.raises(ValueError, match="seeds"):
        measured_shifts(WISHART, (1.0, 1.0), 0.1, np.eye(2), np.zeros((2, 2)), 50, [0])
    with pytest.raises(ValueError, match="seeds"):
        measured_prior(WISHART, seeds=[3])
    with pytest.raises(ValueError, match="d"):
        measured_prior(WISHART, d=1)


@pytest.mark.parametrize("alpha", [0.3, 1.0])
def test_without_cross_terms_it_is_the_separable_state_evolution(alpha):
    """With the channel side at ``e_12 = 0`` and the mixing ``I`` the iteration lands on the separable fixed
    point, and its ``e_12`` on the first-order cross overlap there."""
    fp = se.fixed_point(alpha, CH, T=2, rho=WISHART, tol=1e-12)
    first = se.cross_overlap(alpha, fp.q, fp.mmse, CH, WISHART).q_12
    x = cross_fixed_point(alpha, CH, WISHART, (1.0, 1.0, 0.0), side=separable_side(CH, (0.5, 0.5)), tol=1e-11,
                          max_iter=5000, damping=0.0, further=2)
    assert np.allclose(x.mmse, fp.mmse, atol=1e-8)
    assert x.e_12 == pytest.approx(first, abs=1e-8)
    assert np.array_equal(x.mixing, np.eye(2))


def test_centred_teachers_monte_carlo_side_keeps_the_separable_errors():
    """Centred teachers have ``F_12 = 0`` exactly: the Monte Carlo channel side leaves ``kappa``, the mixing and
    ``e_12`` at zero within their draws' error, and the errors at the (Bayes) separable fixed point."""
    centred = (Centred(0.5), Centred(0.5))
    fp = se.fixed_point(1.0, CH, T=2, rho=centred, tol=1e-12)
    side = monte_carlo_side(CH, (0.0, 0.0), n=20_000, seed=1)
    x = cross_fixed_point(1.0, CH, centred, (*fp.mmse, 0.0), side=side, tol=2e-3, max_iter=40, further=2)
    assert np.allclose(x.mmse, fp.mmse, atol=0.02)
    se_12, se_21 = x.mixing_se[0, 1], x.mixing_se[1, 0]
    spread = x.mmse[0] * x.mmse[1] * np.hypot(se_12 / x.deltas[0], se_21 / x.deltas[1])
    assert abs(x.kappa) < 0.05 and abs(x.e_12) < 5 * spread + 1e-3
    assert np.all(np.abs(x.mixing[[0, 1], [1, 0]]) < 5 * np.array([se_12, se_21]) + 0.01)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="kappa"):
        cross_residual((0.5, 0.5), (1.0, 1.0), 1.0, (0.1, 0.1))
    with pytest.raises(ValueError, match="mixing"):
        cross_residual((0.5, 0.5), (1.0, 1.0), 0.1, (0.1,))
    with pytest.raises(ValueError, match="alpha"):
        cross_fixed_point(0.0, CH, WISHART, (0.5, 0.5, 0.0), side=separable_side(CH, (0.5, 0.5)))
    with pytest.raises(ValueError, match="two or three layers"):
        cross_fixed_point(0.5, DeepAttention(0.5, layers=3), (Centred(0.5),) * 2, (0.5, 0.5, 0.0))
    with pytest.raises(ValueError, match="centred teachers"):
        cross_fixed_point(0.5, DeepAttention(0.5, layers=3), (Wishart(0.5),) * 3, (0.5, 0.5, 0.5, 0.0))
    with pytest.raises(ValueError, match="init must hold 3"):
        cross_fixed_point(0.5, CH, WISHART, (0.5, 0.5, 0.5, 0.0), side=separable_side(CH, (0.5, 0.5)))
    with pytest.raises(ValueError, match=r"init\[0\]"):
        cross_fixed_point(0.5, CH, WISHART, (1.2, 0.5, 0.0), side=separable_side(CH, (0.5, 0.5)))

    def singular(q, Q0, e_12):
        return ChannelSide(np.ones((2, 2)), np.eye(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="singular"):
        cross_fixed_point(0.5, CH, WISHART, (0.5, 0.5, 0.0), side=singular)
    with pytest.raises(ConvergenceError, match="did not converge"):
        cross_fixed_point(0.5, CH, WISHART, (1.0, 1.0, 0.0), side=separable_side(CH, (0.5, 0.5)), max_iter=2)


def test_the_committed_all_orders_rows_are_fixed_points_of_their_command():
    """``book/data/deep_cross_se_measured.csv``: its rows are the (alpha, seed) of its made-by command, each the
    twin of a first-order row (the same separable start and channel draws), and each a fixed point: the prior
    side's ``e_12`` there, measured again by the script, is the row's within the iteration's tolerance, and the
    measurement's error is below it."""
    args, rows = made_by_args("deep_cross_se", "deep_cross_se_measured.csv")
    _, first = made_by_args("deep_cross_se", "deep_cross_se.csv")
    assert args.prior == "measured" and args.layers == 2 and args.alpha is None
    assert sorted((float(r["alpha"]), int(r["seed"])) for r in rows) == sorted(
        (a, s) for a in (0.3, 0.5, 1.0) for s in args.seeds)
    twins = {(r["alpha"], r["seed"]): r for r in first}
    for r in rows:
        twin = twins[r["alpha"], r["seed"]]
        assert (r["sep_mmse_1"], r["sep_mmse_2"], r["sep_e_12"]) == (twin["sep_mmse_1"], twin["sep_mmse_2"],
                                                                     twin["sep_e_12"])
        assert abs(float(r["e_12"]) - float(r["prior_e_12"])) < 2e-4 > float(r["prior_e_12_se"])
        assert abs(float(r["mix_12"]) - float(twin["mix_12"])) < 4 * float(twin["mix_12_se"])


@pytest.mark.parametrize("name, alphas, seeds", [("deep_cross_se.csv", (0.3, 0.5, 1.0), range(4)),
                                                 ("deep_cross_curve.csv", (0.1, 0.15, 0.2, 0.7, 2.0), range(2))])
def test_the_committed_first_order_rows_are_fixed_points_of_their_own_noises(name, alphas, seeds):
    """``book/data/deep_cross_se.csv`` and ``deep_cross_curve.csv`` (the curve of the bracket figure): the rows
    are the (alpha, seed) of their made-by command at its defaults; each starts at the separable fixed point
    and is a fixed point, not a last iterate (:func:`script_support.assert_first_order_row`); and the errors'
    mean over the sets of draws lies within 0.0045 of the separable ones, as the chapters say."""
    made_by, rows = committed(name)
    assert made_by.removeprefix("OPENBLAS_NUM_THREADS=1 ").split()[1:] == [f"scripts/{name[:-4]}.py"]
    assert sorted((float(r["alpha"]), int(r["seed"])) for r in rows) == sorted((a, s) for a in alphas for s in seeds)
    for r in rows:
        assert_first_order_row(r, CH, WISHART)
    for a in alphas:                                    # the mean over the sets of draws, as the chapters say
        mean = [np.mean([float(r[k]) for r in rows if float(r["alpha"]) == a]) for k in ("mmse_1", "mmse_2")]
        sep = [float(next(r for r in rows if float(r["alpha"]) == a)[f"sep_{k}"]) for k in ("mmse_1", "mmse_2")]
        assert np.allclose(mean, sep, atol=4.5e-3), a


@pytest.mark.slow
def test_a_committed_first_order_row_stays_put_when_taken_further():
    """``book/data/deep_cross_se.csv`` at alpha = 0.5, seed 0: the iteration restarted at the committed fixed
    point with the same draws, and taken 25 iterations further (more than the contraction needs to show a
    slow mode), stays within the script's tolerance of it."""
    _, rows = committed("deep_cross_se.csv")
    r = next(r for r in rows if (float(r["alpha"]), int(r["seed"])) == (0.5, 0))
    start = [float(r[k]) for k in ("mmse_1", "mmse_2", "e_12")]
    side = monte_carlo_side(CH, (0.5, 0.5), n=int(r["n"]), seed=0)
    x = cross_fixed_point(0.5, CH, WISHART, start, side=side, tol=2e-4, further=25)
    assert np.allclose([*x.mmse, x.e_12], start, atol=2e-4)
