"""The convex route (aimlib.convex): statistical dimension, min-trace threshold, the SDP at small d."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import minimize_scalar

from aimlib import cli
from aimlib.channels import make_channel
from aimlib.convex import (gaussian_measurements, goe_frobenius, min_trace_estimate,
                           min_trace_solve, min_trace_threshold, recovery_trial, semicircle_tail,
                           softmax_measurements, statistical_dimension,
                           statistical_dimension_finite)
from aimlib.errors import ConvergenceError
from aimlib.model import sample_dataset, sample_teacher
from aimlib.state_evolution import perfect_recovery_threshold

needs_cvxpy = pytest.mark.skipif(importlib.util.find_spec("cvxpy") is None,
                                 reason="cvxpy is not installed (it is in requirements.txt)")
#: psi = 3 rho - C rho^(7/5) + O(rho^(9/5)), C = (20/7) (15 pi / (8 sqrt 2))^(2/5)
SMALL_RHO_C = 20 / 7 * (15 * math.pi / (8 * math.sqrt(2))) ** 0.4


@pytest.mark.parametrize("u", [-1.5, -1.0, -0.7, 0.0, 0.3, 0.9, 0.999, 1.0, 2.0])
@pytest.mark.parametrize("power", [1, 2])
def test_semicircle_tail_is_the_integral(u, power):
    w = lambda x: (x - u) ** power * 2 / math.pi * math.sqrt(1 - x * x)  # noqa: E731
    expected = quad(w, max(u, -1.0), 1.0, epsabs=1e-13)[0] if u < 1 else 0.0
    assert semicircle_tail(u, power) == pytest.approx(expected, abs=1e-9)


def _psi_by_quadrature(rho):
    """min_t of the limit objective with the semicircle integral by quadrature (no closed form)."""
    R = math.sqrt(2 * (1 - rho))
    mu = lambda s: 2 / (math.pi * R * R) * math.sqrt(max(R * R - s * s, 0.0))  # noqa: E731

    def J(t):
        tail = quad(lambda s: (s - t) ** 2 * mu(s), t, R, epsabs=1e-13)[0]
        return rho * rho / 2 + rho * (1 - rho) + rho * t * t + (1 - rho) * tail

    res = minimize_scalar(J, bounds=(0, R), method="bounded", options={"xatol": 1e-10})
    return res.fun, res.x


@pytest.mark.parametrize("rho", [0.05, 0.25, 0.5, 0.8])
def test_psi_matches_the_objective_minimised_by_quadrature(rho):
    psi, t = _psi_by_quadrature(rho)
    res = statistical_dimension(rho)
    assert res.psi == pytest.approx(psi, rel=1e-9)
    assert res.t == pytest.approx(t, abs=1e-5)


def test_rho_to_one_gives_the_count_of_a_full_matrix():
    for T in (2, 3, 5):
        assert min_trace_threshold(1.0, T) == 1 / (T * T + T - 2)
        assert min_trace_threshold(3.0, T) == 1 / (T * T + T - 2)
        assert min_trace_threshold(1 - 1e-6, T) == pytest.approx(
            perfect_recovery_threshold(1.0, T), rel=1e-8)
    assert statistical_dimension(0.9999).psi == pytest.approx(0.5, abs=1e-8)


def test_rho_near_one_expansion():
    """rho = 1 - eps: t ~ (2 sqrt2 / (3 pi)) eps^(3/2) and psi - (rho - rho^2/2) ~ eps^2 / 4."""
    eps = 1e-3
    res = statistical_dimension(1 - eps)
    # leading terms only: the next order is O(eps) = 1e-3 relative (observed 5.0e-4 for t, -3.6e-4 for psi)
    assert res.t / eps**1.5 == pytest.approx(2 * math.sqrt(2) / (3 * math.pi), rel=2e-3)
    count = (1 - eps) - (1 - eps) ** 2 / 2
    assert (res.psi - count) / eps**2 == pytest.approx(0.25, rel=2e-3)


def test_small_rho_asymptotics():
    """psi / rho -> 3, and (3 rho - psi) / rho^(7/5) -> C with an error ~ rho^(2/5)."""
    ratio = {rho: (3 * rho - statistical_dimension(rho).psi) / rho**1.4 for rho in (1e-3, 1e-4)}
    # psi/rho = 3 - C rho^(2/5) + ...: at rho = 1e-4 the known correction C rho^(2/5) = 0.127 (observed 0.124)
    assert statistical_dimension(1e-4).psi / 1e-4 == pytest.approx(3, abs=0.15)
    # the error ~ rho^(2/5): observed -0.33 at rho = 1e-3, -0.14 at 1e-4
    assert abs(ratio[1e-4] - SMALL_RHO_C) < 0.2
    shrink = (ratio[1e-4] - SMALL_RHO_C) / (ratio[1e-3] - SMALL_RHO_C)
    # the shrink factor has its own O(rho^(2/5)) correction, 0.063 at rho = 1e-3 (observed 6.4 %)
    assert shrink == pytest.approx(10**-0.4, rel=0.1)


def test_psi_between_the_count_and_the_ambient_dimension():
    for rho in np.linspace(1e-3, 0.999, 60):
        psi = statistical_dimension(rho).psi
        assert rho - rho * rho / 2 < psi <= 0.5 - (1 - rho) ** 2 / 4  # the objective at t = 0
    prices = [min_trace_threshold(r, 2) / perfect_recovery_threshold(r, 2) for r in (0.1, 0.25, 0.5)]
    assert prices[0] > prices[1] > prices[2] > 1


def test_goe_frobenius_is_the_standard_gaussian_of_symmetric_matrices():
    G = goe_frobenius(6, seed=0, size=40000)
    assert np.allclose(G, np.swapaxes(G, 1, 2))
    # Monte Carlo over 40 000 matrices: a sample variance has relative standard error sqrt(2/n) = 0.7 %,
    # so 3 % is 4.2 of them; the sum of the 36 squares (variance 42, mean 21) has 0.15 %, 1 % is 6.5
    assert G[:, 0, 0].var() == pytest.approx(1.0, rel=0.03)
    assert G[:, 0, 1].var() == pytest.approx(0.5, rel=0.03)
    assert (G**2).sum(axis=(1, 2)).mean() == pytest.approx(6 * 7 / 2, rel=0.01)
    top = np.linalg.eigvalsh(goe_frobenius(400, seed=1))[-1]
    # the semicircle's edge, up to Tracy-Widom: relative shift TW_1 / (2 m^(2/3)) = -0.011 +- 0.012 at
    # m = 400 (seeds 1-10: -0.003 .. -0.026; seed 1: -0.015)
    assert top == pytest.approx(math.sqrt(2 * 400), rel=0.03)


def test_finite_d_scales_to_psi():
    res = statistical_dimension_finite(400, 100, samples=10, seed=0)
    # finite d = 400 (O(1/d) terms such as r(r + 1)/2 against r^2/2) and 10 GOE samples: seeds 0-3 give
    # 0.13-0.33 % for delta and 0.03-0.42 % for tau
    assert res.delta / 400**2 == pytest.approx(statistical_dimension(0.25).psi, rel=0.01)
    assert res.tau / math.sqrt(400) == pytest.approx(statistical_dimension(0.25).t, rel=0.03)
    assert statistical_dimension_finite(5, 5).delta == 15


def _dist2_to_cone(G, U):
    """min over tau of ||G - Pi_{tau df}(G)||^2, the projection built in the original basis."""
    d, r = U.shape
    P = U @ U.T
    Q = np.linalg.svd(np.eye(d) - P)[0][:, : d - r]  # an orthonormal basis of U_perp
    lam = np.linalg.eigvalsh(Q.T @ G @ Q)
    fixed = np.sum((G - Q @ (Q.T @ G @ Q) @ Q.T) ** 2) - np.sum((U.T @ G @ U) ** 2)
    G11 = U.T @ G @ U

    def dist2(tau):
        return fixed + np.sum((G11 - tau * np.eye(r)) ** 2) + np.sum(np.maximum(lam - tau, 0) ** 2)

    return minimize_scalar(dist2, bounds=(0, max(lam.max(), 0) + 1), method="bounded").fun


def test_finite_d_formula_against_the_distance_to_the_cone():
    """E min_tau dist^2 (the statistical dimension) sits just below min_tau E dist^2."""
    d, r, n = 10, 3, 1500
    rng = np.random.default_rng(3)
    U = np.linalg.qr(rng.standard_normal((d, r)))[0]
    dist2 = np.array([_dist2_to_cone(goe_frobenius(d, rng), U) for _ in range(n)])
    upper = statistical_dimension_finite(d, r, samples=4000, seed=1).delta
    mean, err = dist2.mean(), dist2.std() / math.sqrt(n)
    assert mean < upper + 3 * err
    # the gap E min <= min E plus Monte Carlo error (err = 0.64 % of upper at n = 1500): observed -1.8 %
    assert mean == pytest.approx(upper, rel=0.04)


@needs_cvxpy
def test_sdp_gaussian_measurements_recover_above_and_fail_below():
    d, rho = 8, 0.25
    S = sample_teacher(d, rho, seed=0, backend="numpy")
    delta = statistical_dimension_finite(d, 2).delta
    errors = {}
    for m in (int(0.5 * delta), int(1.5 * delta)):
        A, b = gaussian_measurements(S, m, seed=1)
        S_hat = min_trace_solve(A, b)
        assert np.allclose(np.einsum("kij,ij->k", A, S_hat), b, atol=1e-6)
        errors[m] = np.linalg.norm(S_hat - S) / np.linalg.norm(S)
    low, high = sorted(errors)
    assert errors[high] < 1e-5 and errors[low] > 1e-2


def test_softmax_measurements_are_the_index_differences():
    data = sample_dataset(0.3, 7, 3, 0.5, make_channel("softmax"), seed=2, backend="numpy")
    A, b = softmax_measurements(data.X, y=data.y, beta=1.0)
    assert A.shape == (data.n * 5, 7, 7) and np.allclose(A, np.swapaxes(A, 1, 2))
    assert np.allclose(np.einsum("kij,ij->k", A, data.S), b, atol=1e-12)
    shifted = data.h + np.random.default_rng(0).normal(size=(data.n, 3, 1))  # row constants
    A2, b2 = softmax_measurements(data.X, h=shifted)
    assert np.allclose(A2, A) and np.allclose(b2, b, atol=1e-12)
    h11 = data.h[:, 0, 0]
    assert np.allclose(b.reshape(data.n, 5)[:, 0], data.h[:, 0, 1] - h11)


@needs_cvxpy
def test_min_trace_estimate_recovers_softmax_data_with_many_samples():
    data = sample_dataset(0.5, 6, 2, 0.5, make_channel("softmax"), seed=4, backend="numpy")
    S_hat = min_trace_estimate(data.X, y=data.y, beta=1.0)
    assert np.linalg.norm(S_hat - data.S) / np.linalg.norm(data.S) < 1e-5
    row = recovery_trial("softmax", 6, 0.5, 0.5, 2, seed=4)
    assert row["m"] == data.n * 2 and row["rel_error"] < 1e-5 and row["r"] == 3


@needs_cvxpy
def test_infeasible_sdp_raises():
    with pytest.raises(ConvergenceError, match="infeasible"):
        min_trace_solve(np.eye(3)[None], np.array([-1.0]))


def test_cli_min_trace_threshold(capsys):
    assert cli.main(["threshold", "--channel", "softmax", "--estimator", "min-trace",
                     "--rho", "0.5", "--T", "2"]) == 0
    assert float(capsys.readouterr().out) == pytest.approx(min_trace_threshold(0.5, 2), rel=1e-12)
    assert cli.main(["threshold", "--rho", "0.5", "--T", "2"]) == 0
    assert float(capsys.readouterr().out) == pytest.approx(0.1875, rel=1e-6)


@pytest.mark.parametrize("args", [
    ["--channel", "hardmax", "--rho", "0.5"], ["--channel", "linear", "--rho", "0.5"],
    ["--noise", "0.1", "--rho", "0.5"], ["--rho", "0"], ["--rho", "0.5", "--T", "1"],
])
def test_cli_min_trace_bad_input_exits_2(args, capsys):
    assert cli.main(["threshold", "--estimator", "min-trace", *args]) == 2
    err = capsys.readouterr().err
    assert "error" in err and err.count("\n") == 1


def test_cli_unknown_estimator_exits_2():
    with pytest.raises(SystemExit) as exc:
        cli.main(["threshold", "--estimator", "ridge"])
    assert exc.value.code == 2


@pytest.mark.parametrize("call, exc, match", [
    (lambda: statistical_dimension(0), ValueError, "rho"),
    (lambda: statistical_dimension("a"), TypeError, "rho"),
    (lambda: min_trace_threshold(0.5, 1), ValueError, "T"),
    (lambda: min_trace_threshold(0.5, 2.5), TypeError, "T"),
    (lambda: statistical_dimension_finite(10, 11), ValueError, "r"),
    (lambda: statistical_dimension_finite(10, 0), ValueError, "r"),
    (lambda: statistical_dimension_finite(10, 2, samples=0), ValueError, "samples"),
    (lambda: semicircle_tail(0.1, 3), ValueError, "power"),
    (lambda: goe_frobenius(0), ValueError, "m"),
    (lambda: goe_frobenius(3, size=0), ValueError, "size"),
    (lambda: softmax_measurements(np.zeros((2, 2, 3))), ValueError, "exactly one"),
    (lambda: softmax_measurements(np.zeros((2, 2, 3)), h=np.zeros((2, 3, 3))), ValueError, "shape"),
    (lambda: softmax_measurements(np.zeros((2, 2, 3)), y=np.zeros((2, 2, 2)), beta=1.0),
     ValueError, "positive"),
    (lambda: gaussian_measurements(np.eye(3), 0), ValueError, "m"),
    (lambda: min_trace_solve(np.zeros((2, 3, 3)), np.zeros(3)), ValueError, "shape"),
    (lambda: recovery_trial("bernoulli", 6, 0.5, 0.5), ValueError, "measurements"),
    (lambda: recovery_trial("gaussian", 6, 0.5, 0.5, seed=-1), ValueError, "seed"),
])
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
