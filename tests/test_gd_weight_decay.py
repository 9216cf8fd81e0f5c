"""Weight decay, the direct student and the spectra of learned matrices (aimlib.gd)."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import channels, gd, model, rmt


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    n, T, d, beta = 20, 3, 6, 1.3
    X = rng.standard_normal((n, T, d))
    S = model.sample_teacher(d, 0.5, rng, backend="numpy")
    y = channels.Softmax(beta)(model.attention_indices(X, S))
    return X, y, beta, rng


def test_factorised_weight_decay_is_half_lambda_times_the_trace(small):
    X, y, beta, rng = small
    W = rng.standard_normal((6, 4))
    lam = 0.7
    extra = gd.loss(X, y, W, beta, weight_decay=lam) - gd.loss(X, y, W, beta)
    assert extra == pytest.approx(lam / 2 * np.trace(gd.student_matrix(W)), rel=1e-12)
    L, g = gd.loss_and_grad(X, y, W, beta, weight_decay=lam)
    eps, fd = 1e-6, np.zeros_like(W)
    for i, j in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[i, j] = eps
        fd[i, j] = (gd.loss(X, y, W + E, beta, weight_decay=lam)
                    - gd.loss(X, y, W - E, beta, weight_decay=lam)) / (2 * eps)
    assert np.abs(g - fd).max() < 1e-7 * max(1.0, np.abs(g).max())
    # the penalty's gradient is lambda W / sqrt(r d)
    g0 = gd.loss_and_grad(X, y, W, beta)[1]
    np.testing.assert_allclose(g - g0, lam * W / np.sqrt(4 * 6), rtol=1e-10, atol=1e-14)


def _sym_fd(f, S, eps=1e-6):
    """Gradient of ``f`` over symmetric matrices (an off-diagonal step moves two entries)."""
    fd = np.zeros_like(S)
    for i in range(S.shape[0]):
        for j in range(i, S.shape[0]):
            E = np.zeros_like(S)
            E[i, j] = E[j, i] = eps
            v = (f(S + E) - f(S - E)) / (2 * eps)
            fd[i, j] = fd[j, i] = v if i == j else v / 2
    return fd


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_direct_gradient_matches_finite_differences(small, lam):
    X, y, beta, rng = small
    A = rng.standard_normal((6, 6))
    S_hat = (A + A.T) / 2
    L, g = gd.direct_loss_and_grad(X, y, S_hat, beta, weight_decay=lam)
    fd = _sym_fd(lambda S: gd.direct_loss(X, y, S, beta, weight_decay=lam), S_hat)
    assert np.abs(g - fd).max() < 1e-7 * max(1.0, np.abs(g).max())
    np.testing.assert_allclose(g, g.T, atol=1e-14)
    # its data loss is the loss of the factorised student with the same S_hat
    W = rng.standard_normal((6, 3))
    assert gd.direct_loss(X, y, gd.student_matrix(W), beta) == pytest.approx(gd.loss(X, y, W, beta))
    assert L - gd.direct_loss(X, y, S_hat, beta) == pytest.approx(lam / 2 * np.sum(S_hat**2))
    # a batch of k matrices gives k losses
    Lk, gk = gd.direct_loss_and_grad(X, y, np.stack([S_hat, 2 * S_hat]), beta, weight_decay=lam)
    assert Lk[0] == pytest.approx(L) and np.allclose(gk[0], g)


@pytest.mark.parametrize("call, match", [
    (lambda X, y: gd.loss(X, y, np.ones((6, 2)), weight_decay=-1.0), "weight_decay must be >= 0"),
    (lambda X, y: gd.direct_loss(X, y, np.eye(6), weight_decay=float("nan")), "weight_decay"),
    (lambda X, y: gd.direct_loss(X, y, np.triu(np.ones((6, 6)))), "symmetric"),
    (lambda X, y: gd.direct_loss(X, y, np.eye(5)), r"S_hat must have shape \(6, 6\)"),
    (lambda X, y: gd.train_gd(X, y, weight_decay=-0.1, steps=2), "weight_decay must be >= 0"),
    (lambda X, y: gd.train_gd(X, y, student="diagonal", steps=2), "student"),
    (lambda X, y: gd.train_gd(X, y, student="direct", rank=3, steps=2), "rank"),
    (lambda X, y: gd.count_nonzero(np.ones(3), tol=-1), "tol must be >= 0"),
    (lambda X, y: gd.eigenvalues(np.ones((2, 3))), "S_hat must have shape"),
])
def test_bad_inputs_name_the_parameter(small, call, match):
    X, y, _, _ = small
    with pytest.raises(ValueError, match=match):
        call(X, y)


def test_defaults_unchanged_and_direct_starts_where_the_width_d_student_does(small):
    X, y, beta, _ = small
    kw = dict(beta=beta, restarts=2, seed=3, steps=20)
    a = gd.train_gd(X, y, rank=3, **kw)
    b = gd.train_gd(X, y, rank=3, weight_decay=0.0, student="factorised", **kw)
    np.testing.assert_array_equal(a.W, b.W)
    assert a.student == "factorised" and a.weight_decay == 0.0
    S0 = gd.initial_matrices(6, 2, seed=3, backend="numpy")
    np.testing.assert_allclose(S0, gd.student_matrix(gd.initial_weights(6, 6, 2, seed=3, backend="numpy")))
    one = gd.train_gd(X, y, beta=beta, student="direct", init=S0, steps=1, lr=1e-3,
                      optimizer="gd")
    g = gd.direct_loss_and_grad(X, y, S0, beta)[1]
    np.testing.assert_allclose(one.S_hat, S0 - 1e-3 * g, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(one.eigenvalues, np.linalg.eigvalsh(one.S_hat), atol=1e-10)


def test_weight_decay_shrinks_the_trace_and_the_rank():
    out = {}
    for lam in (0.0, 0.05):
        r = gd.run_gd(2, 0.25, 0.2, 24, seed=1, rank=24, steps=300, weight_decay=lam,
                      dtype=np.float64, return_result=True)
        out[lam] = (np.trace(r["result"].S_hat[0]), r["n_nonzero"][0], r)
    assert out[0.05][0] < 0.8 * out[0.0][0]
    assert out[0.05][1] < out[0.0][1]
    r = out[0.05][2]
    assert r["weight_decay"] == 0.05 and r["student"] == "factorised" and r["rank"] == 24
    # n_nonzero counts |eigenvalue| > EIG_TOL
    assert r["n_nonzero"][0] == int((np.abs(r["result"].eigenvalues[0]) > gd.EIG_TOL).sum())


def test_direct_student_learns_and_weight_decay_shrinks_its_norm():
    runs = [gd.run_gd(2, 0.25, 0.15, 16, seed=2, student="direct", steps=300, weight_decay=lam,
                      dtype=np.float64, return_result=True) for lam in (0.0, 0.1)]
    for r in runs:
        assert r["student"] == "direct" and r["result"].W.shape == (1, 16, 16)
        assert r["train_loss"][0] < 0.2 * r["result"].train_loss[0, 0]
        assert r["result"].mmse_curve[0, -1] < r["result"].mmse_curve[0, 0]
    norms = [np.linalg.norm(r["result"].S_hat[0]) for r in runs]
    assert norms[1] < norms[0]


def test_teacher_spectrum_scale_is_that_of_rmt():
    S = model.sample_teacher(400, 0.25, 0)
    eigs = gd.eigenvalues(S)
    assert gd.count_nonzero(eigs) == model.teacher_width(400, 0.25)
    lo, hi = rmt.support_S(0.25)
    big = eigs[np.abs(eigs) > gd.EIG_TOL]
    assert lo - 0.2 < big.min() and big.max() < hi + 0.3
    np.testing.assert_array_equal(gd.count_nonzero(np.array([[0.0, 0.2], [0.05, -0.5]])), [1, 1])


def test_cli_gd_takes_the_student_and_weight_decay(capsys):
    from aimlib import cli

    args = ["gd", "--T", "2", "--rho", "0.25", "--alpha", "0.1", "--d", "12", "--steps", "20"]
    assert cli.main(args + ["--student", "direct", "--weight-decay", "0.01"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    direct = gd.run_gd(2, 0.25, 0.1, 12, 0, steps=20, student="direct", weight_decay=0.01)
    assert float(row.split(",")[header.split(",").index("mmse_single")]) == pytest.approx(
        direct["mmse_single"], rel=1e-5)
    assert cli.main(args + ["--weight-decay", "-1"]) == 2
    assert "--weight-decay must be" in capsys.readouterr().err
    assert cli.main(args + ["--student", "direct", "--rank", "3"]) == 2


@pytest.mark.parametrize("student", ["factorised", "direct"])
def test_run_gd_with_weight_decay_on_the_device(strict_cupy, student):
    from aimlib.backend import get_array_module, to_device, to_host

    kw = dict(restarts=2, steps=20, dtype=np.float64, return_result=True, student=student,
              weight_decay=1e-3)
    dev = gd.run_gd(2, 0.5, 0.2, 10, 4, backend="cupy", **kw)
    ref = gd.run_gd(2, 0.5, 0.2, 10, 4, backend="numpy", **kw)
    for name in ("S_hat", "eigenvalues", "train_loss", "test_loss", "mmse_curve"):
        got = getattr(dev["result"], name)
        assert type(got) is np.ndarray
        np.testing.assert_allclose(got, getattr(ref["result"], name), rtol=1e-10, atol=1e-12)
    assert dev["n_nonzero"] == ref["n_nonzero"]
    # the public direct functions follow the tokens to the device
    data = ref["data"]
    S0 = gd.initial_matrices(10, 2, seed=1)
    Xd, yd, Sd = (to_device(a, strict_cupy) for a in (data.X, data.y, S0))
    L, g = gd.direct_loss_and_grad(data.X, data.y, S0, weight_decay=0.1)
    Ld, gdev = gd.direct_loss_and_grad(Xd, yd, Sd, weight_decay=0.1)
    assert get_array_module(gdev) is not np
    np.testing.assert_allclose(to_host(gdev), g, rtol=1e-12)
    np.testing.assert_allclose(to_host(Ld), L, rtol=1e-12)
