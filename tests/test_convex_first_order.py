"""Minimum-trace recovery at scale (aimlib.convex.first_order, .operators): the matrix-free maps
against the explicit matrices, ADMM against CVXPY + SCS, the certificate and the failure modes."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from aimlib.backend import to_device, to_host
from aimlib.channels import make_channel
from aimlib.convex import (GaussianMeasurements, SoftmaxDifferences, conjugate_gradient,
                           min_trace_admm, min_trace_solve, psd_projection, recovery_trial,
                           softmax_measurements, softmax_targets)
from aimlib.errors import ConvergenceError
from aimlib.model import sample_dataset, sample_teacher

needs_cvxpy = pytest.mark.skipif(importlib.util.find_spec("cvxpy") is None,
                                 reason="cvxpy is not installed (it is in requirements.txt)")


def _softmax(d, alpha, T=2, rho=0.25, seed=1, **kw):
    data = sample_dataset(alpha, d, T, rho, make_channel("softmax"), seed=seed, backend="numpy")
    return (data, SoftmaxDifferences(data.X, chunk_size=7, **kw),
            softmax_targets(data.n, T, y=data.y, beta=1.0))


def _dense(op):
    """The measurement matrices, one adjoint per unit vector (an independent route for the forward map)."""
    return np.array([to_host(op.adjoint(e)) for e in np.eye(op.m)])


@pytest.mark.parametrize("T", [2, 3])
def test_softmax_map_is_the_explicit_measurements(T):
    data, op, b = _softmax(6, 0.4, T=T)
    A, b_ref = softmax_measurements(data.X, y=data.y, beta=1.0)
    assert np.allclose(_dense(op), A, atol=1e-12) and np.allclose(b, b_ref)
    assert np.allclose(op.forward(data.S), np.einsum("kij,ij->k", A, data.S), atol=1e-12)
    K = np.einsum("kij,lij->kl", A, A)
    P = op.gram_blocks().shape[1]
    blocks = [K[i * P:(i + 1) * P, i * P:(i + 1) * P] for i in range(data.n)]
    assert np.allclose(op.gram_blocks(), blocks, atol=1e-10)


def test_gaussian_map_regenerates_the_same_matrices():
    op = GaussianMeasurements(5, 23, seed=3, chunk_mb=3 * 8 * 25 / 2**20, cache_mb=0)   # 3 per chunk
    A = _dense(op)
    assert np.allclose(A, _dense(op), atol=0) and np.allclose(A, np.swapaxes(A, 1, 2))
    S = sample_teacher(5, 0.4, 0, backend="numpy")
    assert np.allclose(to_host(op.forward(S)), np.einsum("kij,ij->k", A, S), atol=1e-12)
    # standard Gaussian of the symmetric matrices: E ||A_k||^2 = d(d+1)/2 = 15 (23 draws: se 1.2)
    assert abs((A**2).sum(axis=(1, 2)).mean() - 15) < 5


def _gaussian(d, alpha, seed=4, **kw):
    op = GaussianMeasurements(d, 2 * round(alpha * d * d), seed=seed, **kw)
    return op, to_host(op.forward(sample_teacher(d, 0.25, 5, backend="numpy")))


@pytest.mark.parametrize("ensemble", ["softmax", "gaussian"])
def test_gram_solver_inverts_the_explicit_gram_matrix(ensemble):
    op, _ = _gaussian(10, 0.15) if ensemble == "gaussian" else _softmax(10, 0.15)[1:]
    A = _dense(op)
    K = np.einsum("kij,lij->kl", A, A)
    r = np.random.default_rng(0).standard_normal(op.m)
    assert np.allclose(K @ to_host(op.gram_solver()(to_device(r, op.xp))), r,
                       atol=1e-9 * np.abs(r).max())


def test_gram_solver_declines_a_singular_or_oversized_gram_matrix():
    assert _softmax(6, 0.4)[1].gram_solver() is None           # m = 28 > d(d+1)/2 = 21
    assert _gaussian(5, 0.9)[0].gram_solver() is None          # m = 44 > 15
    assert _gaussian(10, 0.15, cache_mb=0)[0].gram_solver() is None
    assert _softmax(10, 0.15, gram_mb=0.01)[1].gram_solver() is None
    m = _softmax(10, 0.15)[1].m                                 # K and its factor: 16 m^2 bytes
    assert _softmax(10, 0.15, gram_mb=16 * m * m / 2**20)[1].gram_solver() is not None
    assert _softmax(10, 0.15, gram_mb=16 * m * m / 2**20 * 0.99)[1].gram_solver() is None


@pytest.mark.parametrize("ensemble", ["softmax", "gaussian"])
def test_exact_gram_steps_reach_the_optimum_of_conjugate_gradient_steps(ensemble):
    op, b = _gaussian(10, 0.12) if ensemble == "gaussian" else _softmax(10, 0.12)[1:]
    exact = min_trace_admm(op, b, tol=1e-8)
    cg = min_trace_admm(op, b, tol=1e-8, exact_gram=False)
    assert exact.converged and cg.converged
    assert exact.trace == pytest.approx(cg.trace, rel=1e-6)
    assert exact.dual_bound <= cg.trace + 1e-6 and cg.dual_bound <= exact.trace + 1e-6


def test_psd_projection_is_the_nearest_psd_matrix():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((6, 6))
    M = M + M.T
    P = psd_projection(M)
    assert np.linalg.eigvalsh(P)[0] > -1e-12 and np.allclose(P @ (P - M), 0, atol=1e-10)  # P _|_ (P - M)
    assert np.linalg.eigvalsh(P - M)[0] > -1e-12                                        # P - M >= 0


def test_preconditioned_cg_solves_a_positive_definite_system():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((30, 30))
    K, rhs = M @ M.T + np.eye(30), rng.standard_normal(30)
    x, res = conjugate_gradient(lambda u: K @ u, rhs, np.zeros(30), tol=1e-12, max_iter=200,
                                precondition=lambda r: r / np.diag(K))
    assert res < 1e-12 and np.allclose(x, np.linalg.solve(K, rhs), atol=1e-8)


@needs_cvxpy
@pytest.mark.parametrize("ensemble, d, alpha", [("softmax", 10, 0.2),
                                                pytest.param("softmax", 12, 0.12, marks=pytest.mark.slow),
                                                ("gaussian", 10, 0.1), ("gaussian", 12, 0.12)])
def test_admm_agrees_with_cvxpy(ensemble, d, alpha):
    """Above and below the transition: the same optimum, to both solvers' tolerance."""
    if ensemble == "softmax":
        data, op, b = _softmax(d, alpha)
    else:
        op, b = _gaussian(d, alpha)
    res = min_trace_admm(op, b, tol=1e-7, max_iter=20_000)
    S_ref = min_trace_solve(_dense(op), b, eps=1e-9)
    opt = np.trace(S_ref)
    assert res.converged and res.residual < 1e-7 and abs(res.gap) < 1e-7
    assert res.dual_bound <= opt + 1e-6 and res.trace == pytest.approx(opt, rel=1e-5)
    # the optimum is unique here; at tolerance 1e-7 the iterates differ by 1e-6 .. 1e-4 relative
    assert np.linalg.norm(to_host(res.S) - S_ref) < 1e-3 * np.linalg.norm(S_ref)


def test_admm_on_the_strict_stand_in(strict_cupy):
    data, op, b = _softmax(8, 0.3)
    ref = min_trace_admm(op, b, tol=1e-6)
    op_dev = SoftmaxDifferences(to_device(data.X, strict_cupy), chunk_size=7)
    dev = min_trace_admm(op_dev, to_device(b, strict_cupy), tol=1e-6)
    assert isinstance(dev.S, strict_cupy.ndarray) and dev.converged
    assert np.allclose(to_host(dev.S), ref.S, atol=1e-9)


def test_exact_gram_solve_on_the_strict_stand_in(strict_cupy):
    """The Cholesky factor and its triangular solves on the device (m = 30 <= d(d+1)/2 = 55)."""
    data, op, _ = _softmax(10, 0.15)
    dev = SoftmaxDifferences(to_device(data.X, strict_cupy), chunk_size=7)
    r = np.random.default_rng(2).standard_normal(op.m)
    x = dev.gram_solver()(to_device(r, strict_cupy))
    assert isinstance(x, strict_cupy.ndarray) and np.allclose(to_host(x), op.gram_solver()(r), atol=1e-12)


def test_unconverged_is_never_reported_solved():
    data, op, b = _softmax(10, 0.15)
    with pytest.raises(ConvergenceError, match="max_iter = 20"):
        min_trace_admm(op, b, tol=1e-9, max_iter=20)
    res = min_trace_admm(op, b, tol=1e-9, max_iter=20, on_max_iter="return")
    assert not res.converged and max(res.residual, abs(res.gap)) > 1e-9


@pytest.mark.parametrize("measurements", ["softmax", "gaussian"])
def test_recovery_trial_through_admm(measurements):
    """Well above alpha_cvx(0.25) = 0.147 the teacher comes back, to the solver's tolerance."""
    row = recovery_trial(measurements, 16, 0.25, 0.3, seed=2, solver="admm", tol=1e-7)
    assert row["converged"] and row["solver"] == "admm" and row["rel_error"] < 1e-5
    low = recovery_trial(measurements, 16, 0.25, 0.08, seed=2, solver="admm", tol=1e-5,
                         on_max_iter="return")
    assert low["rel_error"] > 1e-2     # below the transition: another matrix of smaller trace


class _Trace:
    """One measurement, Tr S: with b < 0 no PSD matrix is feasible."""
    m, d, xp = 1, 3, np

    def forward(self, S):
        return np.array([np.trace(S)])

    def adjoint(self, w):
        return w[0] * np.eye(3)


def test_infeasible_problem_stalls_and_raises():
    with pytest.raises(ConvergenceError, match="stalled"):
        min_trace_admm(_Trace(), np.array([-1.0]), patience=200, max_iter=5000)
    res = min_trace_admm(_Trace(), np.array([3.0]), tol=1e-8)
    assert res.converged and res.trace == pytest.approx(3.0, abs=1e-7)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: min_trace_admm(_Trace(), np.array([1.0]), S0=-np.eye(3)), ValueError, "positive semi-definite"),
    (lambda: min_trace_admm(_Trace(), np.array([1.0]), S0=np.eye(2)), ValueError, "S0 must have shape"),
    (lambda: min_trace_admm(_Trace(), np.ones(2)), ValueError, "b must have shape"),
    (lambda: min_trace_admm(_Trace(), np.ones(1), tol=0.5), ValueError, "tol"),
    (lambda: min_trace_admm(_Trace(), np.ones(1), on_max_iter="ignore"), ValueError, "on_max_iter"),
    (lambda: min_trace_admm(object(), np.ones(1)), TypeError, "measurement map"),
    (lambda: min_trace_admm(_Trace(), np.ones(1), cg_max_iter=0), ValueError, "cg_max_iter"),
    (lambda: GaussianMeasurements(5, 0), ValueError, "m"),
    (lambda: softmax_targets(2, 2), ValueError, "exactly one"),
    (lambda: recovery_trial("gaussian", 6, 0.5, 0.5, solver="cvx"), ValueError, "solver"),
])
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
