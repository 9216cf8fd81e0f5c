"""Gaussian measurements through their null space (aimlib.convex.null_space): the map's algebra, the same
optimum as the measurements on the same affine set, the law of the subspace, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.backend import to_host
from aimlib.convex import (GaussianMeasurements, GaussianNullSpace, min_trace_admm,
                           recovery_trial)
from aimlib.model import sample_teacher


def _symmetric(d, seed):
    M = np.random.default_rng(seed).standard_normal((d, d))
    return M + M.T


def test_coordinates_are_orthonormal_and_the_map_a_self_adjoint_projector_of_rank_m():
    op = GaussianNullSpace(6, 13, seed=0, backend="numpy")
    X, Y = _symmetric(6, 1), _symmetric(6, 2)
    assert op.m == 21 and op.rank == 13
    assert np.allclose(to_host(op.smat(op.svec(X))), X)
    assert np.isclose(float(op.svec(X) @ op.svec(Y)), (X * Y).sum())          # Frobenius
    w = np.random.default_rng(3).standard_normal(op.m)
    assert np.isclose(float(op.forward(X) @ w), (X * to_host(op.adjoint(w))).sum())
    P = np.array([to_host(op.forward(op.smat(e))) for e in np.eye(op.m)])    # the map in coordinates
    assert np.allclose(P, P.T) and np.allclose(P @ P, P) and np.isclose(np.trace(P), 13)
    r = op.forward(X)                                                        # on the range, A A^* = I
    assert np.allclose(op.gram_solver()(r), op.forward(op.adjoint(r)))


def _dense_rows(g, op):
    """The Gaussian measurement matrices in ``op``'s orthonormal coordinates, one row each."""
    return np.array([to_host(op.svec(g.adjoint(e))) for e in np.eye(g.m)])


@pytest.mark.parametrize("m", [20, 44])
def test_the_null_space_of_given_measurements_gives_their_optimum(m):
    """Below (m = 20) and above (44) the switch at d = 10, rho = 0.25: the same affine set, the same optimum."""
    d, S = 10, sample_teacher(10, 0.25, 5, backend="numpy")
    g = GaussianMeasurements(d, m, seed=3, backend="numpy")
    op = GaussianNullSpace(d, m, seed=0, backend="numpy")
    op.N = np.linalg.svd(_dense_rows(g, op))[2][m:].T                         # null(A), orthonormal
    a, b = min_trace_admm(op, op.forward(S), tol=1e-9), min_trace_admm(g, g.forward(S), tol=1e-9)
    assert a.converged and b.converged
    assert a.trace == pytest.approx(b.trace, rel=1e-7)
    assert np.abs(to_host(a.S) - to_host(b.S)).max() < 1e-6
    recovered = np.linalg.norm(to_host(a.S) - S) < 1e-5 * np.linalg.norm(S)
    assert recovered == (m == 44)


def test_the_subspace_has_the_measurements_law():
    """E ||A(e)||^2 = m / D for every unit direction e, diagonal or not, under both routes (200 draws each)."""
    d, m, draws = 4, 6, 200
    lengths = {"null": [], "measurements": []}
    for seed in range(draws):
        op = GaussianNullSpace(d, m, seed=seed, backend="numpy")
        A = _dense_rows(GaussianMeasurements(d, m, seed=10_000 + seed, backend="numpy"), op)
        Q = np.linalg.qr(A.T)[0]                                              # the span's basis
        for route, project in (("null", lambda u: to_host(op.forward(op.smat(u)))),
                               ("measurements", lambda u: Q @ (Q.T @ u))):
            lengths[route].append([np.sum(project(e) ** 2) for e in np.eye(op.m)[[0, 1]]])
    for route, values in lengths.items():
        diagonal, off = np.mean(values, axis=0)          # coordinate 0 is S_11, coordinate 1 is sqrt2 S_12
        assert diagonal == pytest.approx(m / 10, abs=0.03) and off == pytest.approx(m / 10, abs=0.03), route


def test_a_recovery_trial_through_the_null_space_switches_like_the_measurements():
    rows = [recovery_trial("gaussian", 12, 0.25, alpha, seed=seed, solver="admm",
                           gaussian_map="null_space", tol=1e-7)
            for alpha in (0.08, 0.2) for seed in (0, 1)]
    assert [row["m"] for row in rows] == [24, 24, 58, 58]
    assert all(row["converged"] for row in rows)
    assert all(row["rel_error"] > 1e-2 for row in rows[:2]) and all(row["rel_error"] < 1e-5 for row in rows[2:])


def test_as_many_measurements_as_entries_fix_the_matrix():
    op, S = GaussianNullSpace(6, 30, seed=0, backend="numpy"), _symmetric(6, 4)
    assert op.N.shape == (21, 0) and np.allclose(to_host(op.adjoint(op.forward(S))), S)


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="m must be >= 1"):
        GaussianNullSpace(6, 0, seed=0)
    with pytest.raises(ValueError, match="memory_mb"):
        GaussianNullSpace(60, 100, seed=0, memory_mb=1.0)
    with pytest.raises(ValueError, match="gaussian_map"):
        recovery_trial("gaussian", 8, 0.25, 0.2, gaussian_map="nullspace", solver="admm")
    with pytest.raises(ValueError, match="needs solver = 'admm'"):
        recovery_trial("gaussian", 8, 0.25, 0.2, gaussian_map="null_space")


def test_the_map_on_the_strict_stand_in(strict_cupy):
    """The device path: the same null space (drawn on the host), the same projections and the same optimum."""
    S = sample_teacher(8, 0.25, 1, backend="numpy")
    host = GaussianNullSpace(8, 30, seed=4, backend="numpy")
    dev = GaussianNullSpace(8, 30, seed=4, backend="cupy")
    assert isinstance(dev.N, strict_cupy.ndarray) and np.array_equal(to_host(dev.N), host.N)
    b = dev.forward(S)
    assert np.allclose(to_host(dev.adjoint(b)), to_host(host.adjoint(host.forward(S))), atol=1e-12)
    a, c = min_trace_admm(dev, b, tol=1e-8), min_trace_admm(host, host.forward(S), tol=1e-8)
    assert isinstance(a.S, strict_cupy.ndarray) and a.iterations == c.iterations
    assert np.allclose(to_host(a.S), to_host(c.S), atol=1e-10)
