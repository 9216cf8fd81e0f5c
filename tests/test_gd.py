"""Tests of aimlib.gd: gradient, training, batched restarts, averaging, validation, memory guard."""
import re
import tracemalloc
import warnings

import numpy as np
import pytest

from aimlib import ConvergenceError, channels, cli, gd, model
from aimlib.gd.objective import Objective
from aimlib.gd.student import loss_grad


def _data(n=20, T=3, d=7, beta=1.5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    y = channels.Softmax(beta)(rng.standard_normal((n, T, T)))
    return X, y


@pytest.mark.parametrize("shape", [(7, 4), (2, 7, 4), (7, 12)])
def test_gradient_matches_central_differences(shape):
    beta = 1.5
    X, y = _data(beta=beta)
    W = np.random.default_rng(1).standard_normal(shape)
    L, g = gd.loss_and_grad(X, y, W, beta)
    assert g.shape == W.shape
    eps = 1e-6
    fd = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        Wp, Wm = W.copy(), W.copy()
        Wp[idx] += eps
        Wm[idx] -= eps
        lp, lm = gd.loss(X, y, Wp, beta), gd.loss(X, y, Wm, beta)
        fd[idx] = np.sum(lp - lm) / (2 * eps)
    assert np.max(np.abs(fd - g)) < 1e-8 * max(1.0, np.max(np.abs(g)))
    assert np.allclose(np.atleast_1d(L), np.atleast_1d(gd.loss(X, y, W, beta)))


def test_student_indices_and_loss_definition():
    X, y = _data(n=5, T=3, d=6)
    W = np.random.default_rng(2).standard_normal((6, 3))
    S_hat = gd.student_matrix(W)
    assert np.allclose(S_hat, W @ W.T / np.sqrt(3 * 6))
    h = gd.student_indices(X, W)
    assert np.allclose(h, model.attention_indices(X, S_hat), atol=1e-12)
    y_hat = gd.student_output(X, W, beta=1.5)
    assert np.isclose(gd.loss(X, y, W, 1.5), 0.5 * np.sum((y_hat - y) ** 2) / 5)
    # the teacher itself has zero loss
    Wt = np.random.default_rng(3).standard_normal((6, 3))
    yt = channels.Softmax(1.5)(model.attention_indices(X, gd.student_matrix(Wt)))
    assert gd.loss(X, yt, Wt, 1.5) < 1e-28


def _instance(alpha_bar, d, T=2, rho=0.5, seed=0, dtype=np.float64, backend=None):
    alpha = alpha_bar / channels.softmax_k(T)
    return model.sample_dataset(alpha, d, T, rho, channels.Softmax(1.0), seed, dtype=dtype, backend=backend)


@pytest.mark.parametrize("optimizer,lr", [("adam", 0.1), ("gd", 2.0)])
def test_loss_decreases(optimizer, lr, backend):
    ds = _instance(0.4, 20, seed=1, backend=backend)
    res = gd.train_gd(ds.X, ds.y, rho=0.5, restarts=2, seed=0, optimizer=optimizer, lr=lr,
                      steps=200, S=ds.S, record_every=20)
    assert res.train_loss.shape == (2, len(res.steps))
    assert np.all(res.train_loss[:, -1] < 0.2 * res.train_loss[:, 0])
    if optimizer == "gd":  # small steps: monotone
        assert np.all(np.diff(res.train_loss, axis=1) <= 1e-15)
    assert np.all(res.mmse_curve[:, -1] < res.mmse_curve[:, 0])


def test_above_perfect_recovery_reaches_zero_loss_and_the_teacher():
    # alpha_bar = 1.2 > alpha_bar_PR = 2 (rho - rho^2 / 2) = 0.75 at rho = 0.5
    ds = _instance(1.2, 20, seed=2)
    Xt = model.sample_tokens(200, 2, 20, seed=9)
    yt = channels.Softmax(1.0)(model.attention_indices(Xt, ds.S))
    res = gd.train_gd(ds.X, ds.y, rho=0.5, restarts=2, seed=1, steps=1500, S=ds.S,
                      X_test=Xt, y_test=yt, tol=1e-12)
    assert np.all(res.train_loss[:, -1] < 1e-7)
    assert np.all(res.test_loss[:, -1] < 1e-4)
    assert np.all(res.mmse_single < 1e-6)       # observed 4e-10 and 3e-10 (was 1e-2)


def test_early_stopping():
    ds = _instance(0.4, 16, seed=3)
    res = gd.train_gd(ds.X, ds.y, rho=0.5, restarts=3, seed=0, steps=500, tol=1e-3)
    assert res.converged.all()
    assert np.all(res.n_steps < 500)
    assert np.all(res.train_loss[:, -1] <= 1e-3)


def test_batched_restarts_equal_separate_runs(backend):
    ds = _instance(0.4, 16, seed=4, backend=backend)
    W0 = gd.initial_weights(16, 8, 3, seed=5)
    assert np.array_equal(W0[:2], gd.initial_weights(16, 8, 2, seed=5))
    kw = dict(steps=150, S=ds.S, record_every=30, tol=1e-4)
    batched = gd.train_gd(ds.X, ds.y, rank=8, restarts=3, seed=5, **kw)
    assert np.array_equal(batched.W.shape, (3, 16, 8))
    for i in range(3):
        alone = gd.train_gd(ds.X, ds.y, init=W0[i], **kw)
        assert np.allclose(alone.W[0], batched.W[i], rtol=1e-9, atol=1e-9)
        assert np.isclose(alone.mmse_single[0], batched.mmse_single[i], rtol=1e-9)
        assert alone.n_steps[0] == batched.n_steps[i]


def test_averaging_reduces_the_error(backend):
    ds = _instance(0.4, 30, seed=6, backend=backend)
    k = 8
    res = gd.train_gd(ds.X, ds.y, rho=0.5, restarts=k, seed=2, steps=400, S=ds.S, record_every=100)
    single = res.mmse_single
    assert res.mmse_averaged < 0.8 * single.mean()
    # exact decomposition: ||mean - S||^2 = mean ||S_i - S||^2 - (1/(2 k^2)) sum_ij ||S_i - S_j||^2
    Sh, d = res.S_hat, ds.d
    spread = sum(np.sum((Sh[i] - Sh[j]) ** 2) for i in range(k) for j in range(k)) / d
    assert np.isclose(res.mmse_averaged, single.mean() - spread / (2 * k * k), rtol=1e-8)
    assert np.isclose(res.mmse_averaged, model.estimation_error(res.S_mean, ds.S))
    assert np.isclose(res.mmse_averaged_curve[-1], res.mmse_averaged)


def test_minibatch_and_float32():
    ds = _instance(0.4, 16, seed=7, dtype=np.float32)
    res = gd.train_gd(ds.X, ds.y, rho=0.5, restarts=2, seed=0, steps=200, batch_size=25,
                      S=ds.S, record_every=50)
    assert res.W.dtype == np.float32
    assert np.all(res.train_loss[:, -1] < 0.3 * res.train_loss[:, 0])
    L, g = gd.loss_and_grad(ds.X, ds.y, res.W)
    assert g.dtype == np.float32 and L.dtype == np.float32


def test_run_gd_dict_and_reproducible(backend):
    a = gd.run_gd(2, 0.5, 0.1, 12, 3, restarts=2, steps=30, backend=backend)
    for key in ("alpha", "d", "seed", "restarts", "mmse_single", "mmse_averaged", "seconds"):
        assert key in a
    assert len(a["mmse_single_all"]) == 2 and a["restarts"] == 2 and a["d"] == 12
    assert np.isclose(a["mmse_single"], np.mean(a["mmse_single_all"]))
    b = gd.run_gd(2, 0.5, 0.1, 12, 3, restarts=2, steps=30, backend=backend)
    assert a["mmse_single_all"] == b["mmse_single_all"] and a["mmse_averaged"] == b["mmse_averaged"]
    c = gd.run_gd(2, 0.5, 0.1, 12, 3, restarts=2, steps=30, dtype=np.float64, rank=12)
    assert c["rank"] == 12


@pytest.mark.parametrize("kwargs,match", [
    (dict(T=1), "T"), (dict(alpha=-0.1), "alpha"), (dict(rho=0), "rho"), (dict(d=0), "d"),
    (dict(restarts=0), "restarts"), (dict(optimizer="sgdx"), "optimizer"), (dict(lr=0.0), "lr"),
    (dict(beta=-1.0), "beta"), (dict(dtype=np.int32), "dtype"), (dict(steps=0), "steps"),
    (dict(seed=-1), "seed"), (dict(tol=-1.0), "tol"), (dict(rank=0), "rank"),
    (dict(batch_size=10**6), "batch_size"), (dict(init_scale=0.0), "scale"),
])
def test_run_gd_rejects_bad_inputs(kwargs, match):
    args = dict(T=2, rho=0.5, alpha=0.1, d=10, seed=0)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        gd.run_gd(args.pop("T"), args.pop("rho"), args.pop("alpha"), args.pop("d"), args.pop("seed"),
                  steps=args.pop("steps", 5), **args)


def test_train_gd_rejects_bad_arrays():
    X, y = _data(n=10, T=2, d=5)
    with pytest.raises(ValueError, match="y"):
        gd.train_gd(X, y[:, :1], steps=2)
    with pytest.raises(ValueError, match="init"):
        gd.train_gd(X, y, init=np.ones((4, 2)), steps=2)
    with pytest.raises(ValueError, match="X"):
        gd.train_gd(X[0], y, steps=2)
    with pytest.raises(ValueError, match="X"):
        gd.train_gd(np.full_like(X, np.nan), y, steps=2)
    with pytest.raises(ValueError, match="S"):
        gd.train_gd(X, y, S=np.eye(4), steps=2)
    with pytest.raises(ValueError, match="X_test"):
        gd.train_gd(X, y, X_test=X, steps=2)
    with pytest.raises(ValueError, match="W"):
        gd.loss_and_grad(X, y, np.ones((4, 2)))
    with pytest.raises(ValueError, match="adam_betas"):
        gd.train_gd(X, y, adam_betas=(0.9,), steps=2)


def test_divergence_raises_convergence_error():
    X, y = _data(n=10, T=2, d=5)
    with pytest.raises(ConvergenceError, match="diverged"):
        gd.train_gd(X, y, init=np.full((5, 2), 1e200), steps=5)
    with pytest.raises(ConvergenceError, match="lr"):
        gd.train_gd(X, y, rank=2, seed=0, optimizer="gd", lr=1e300, steps=50)


def test_posterior_sample_doubles_the_error():
    """Nishimori: for a Gaussian linear model, a posterior sample has twice the MMSE."""
    rng = np.random.default_rng(0)
    p, m, reps = 6, 4, 40000
    A = rng.standard_normal((m, p))
    C = np.linalg.inv(np.eye(p) + A.T @ A)        # posterior covariance (unit prior and noise)
    mmse = np.trace(C)
    s = rng.standard_normal((reps, p))
    y = s @ A.T + rng.standard_normal((reps, m))
    mean = y @ A @ C                                # C symmetric
    sample = mean + rng.standard_normal((reps, p)) @ np.linalg.cholesky(C).T
    # Monte Carlo over reps = 40 000: each squared error is a Gaussian quadratic form, relative standard
    # error sqrt(2 tr C^2 / reps) / tr C = 0.36 % here, so 3 % is about 8 of them (observed <= 0.33 %)
    assert np.isclose(np.mean(np.sum((mean - s) ** 2, 1)), mmse, rtol=0.03)
    assert np.isclose(np.mean(np.sum((sample - s) ** 2, 1)), 2 * mmse, rtol=0.03)
    k = 4
    samples = mean[:, None] + rng.standard_normal((reps, k, p)) @ np.linalg.cholesky(C).T
    err_avg = np.mean(np.sum((samples.mean(1) - s) ** 2, 1))
    assert np.isclose(err_avg, (1 + 1 / k) * mmse, rtol=0.03)


@pytest.mark.parametrize("X,y", [(np.zeros((0, 2, 5)), np.zeros((0, 2, 2))),
                                 (np.zeros((3, 2, 0)), np.zeros((3, 2, 2)))], ids=["n=0", "d=0"])
def test_empty_data_is_named(X, y):
    """No samples (or no dimensions) is a bad X, not a diverging run."""
    with pytest.raises(ValueError, match=r"X must have shape \(n, T, d\) with n >= 1"):
        gd.train_gd(X, y, steps=2)
    Xg, yg = _data(n=10, T=2, d=5)
    with pytest.raises(ValueError, match=r"X must have shape .* n >= 1"):
        gd.train_gd(Xg, yg, X_test=np.zeros((0, 2, 5)), y_test=np.zeros((0, 2, 2)), steps=2)


# ---------------------------------------------------------------------------
# inverse temperature: the range where the computation stays finite
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("beta", [1e308, gd.BETA_MAX * 1.01, float("inf"), 0.0, -1.0])
def test_beta_outside_its_range_is_rejected_by_every_entry_point(beta):
    X, y = _data(n=6, T=2, d=5)
    W = np.ones((5, 2))
    match = re.escape(f"beta must be in (0, {gd.BETA_MAX:g}]")
    for call in (lambda: gd.run_gd(2, 0.5, 0.1, 10, 0, beta=beta, steps=2),
                 lambda: gd.train_gd(X, y, beta=beta, steps=2),
                 lambda: gd.loss_and_grad(X, y, W, beta), lambda: gd.loss(X, y, W, beta),
                 lambda: gd.student_output(X, W, beta)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # rejected before any overflow
            with pytest.raises(ValueError, match=match):
                call()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_largest_beta_stays_finite(dtype):
    # no overflow; the saturated softmax has a zero gradient, so the run fails as "no progress"
    # (aimlib.gd.checks) with the finite losses in its message, not as a NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConvergenceError, match=r"no progress: .* went from \d\S* to \d\S* .*beta=1e\+30"):
            gd.run_gd(3, 0.5, 0.2, 12, 0, beta=gd.BETA_MAX, restarts=2, steps=20, dtype=dtype)


def test_cli_too_large_beta_is_one_line(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cli.main(["gd", "--alpha", "0.1", "--d", "20", "--steps", "5", "--beta", "1e308"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "beta must be in (0, 1e+30], got 1e+308" in err[0]


# ---------------------------------------------------------------------------
# memory guard
# ---------------------------------------------------------------------------

def _limit(exc, name):
    """The upper end of the range that the memory error quotes for ``name``."""
    return re.search(rf"{name} must be in [\[(]\S+, ([^\]]+)\]", str(exc.value)).group(1)


def test_too_many_restarts_are_refused_before_allocating(capsys):
    with pytest.raises(ValueError, match=r"restarts = 100000000: .* memory_mb = 8192") as exc:
        gd.run_gd(2, 0.5, 0.1, 20, 0, restarts=10**8, steps=5)
    assert int(_limit(exc, "restarts")) < 10**6
    assert cli.main(["gd", "--alpha", "0.1", "--d", "20", "--steps", "5", "--restarts", "100000000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "restarts must be in [1, " in err[0]
    X, y = _data(n=10, T=2, d=5)
    with pytest.raises(ValueError, match=r"restarts = 100000000: .*restarts must be in \[1, "):
        gd.train_gd(X, y, restarts=10**8, steps=2)


def test_the_quoted_limit_is_the_largest_that_fits():
    X, y = _data(n=10, T=2, d=5)
    with pytest.raises(ValueError, match="restarts") as exc:
        gd.train_gd(X, y, restarts=10**6, steps=1, memory_mb=0.5)
    k = int(_limit(exc, "restarts"))
    assert gd.train_gd(X, y, restarts=k, steps=1, memory_mb=0.5).W.shape[0] == k
    with pytest.raises(ValueError, match=f"more than memory_mb = 0.5; at restarts = {k + 1},"):
        gd.train_gd(X, y, restarts=k + 1, steps=1, memory_mb=0.5)


def test_too_many_samples_are_named():
    X, y = _data(n=2000, T=2, d=5)
    with pytest.raises(ValueError, match=r"n = 2000: .*n must be in \[1, \d+\]"):
        gd.train_gd(X, y, restarts=1, steps=1, memory_mb=0.1)
    with pytest.raises(ValueError, match=r"alpha = 1e\+308: .*alpha must be in \(0, ") as exc:
        gd.run_gd(2, 0.5, 1e308, 20, 0, steps=5)
    alpha_max = float(_limit(exc, "alpha"))
    assert 1e3 < alpha_max < 1e6  # about 3.8e4 at d = 20, T = 2 and 8 GiB
    with pytest.raises(ValueError, match=r"d = 100000"):
        gd.run_gd(2, 0.5, 0.1, 100000, 0, steps=5)


@pytest.mark.parametrize("memory_mb", [0, -1.0, float("nan"), "8"])
def test_memory_budget_is_validated(memory_mb):
    with pytest.raises((ValueError, TypeError), match="memory_mb"):
        gd.run_gd(2, 0.5, 0.1, 10, 0, steps=2, memory_mb=memory_mb)
    X, y = _data(n=10, T=2, d=5)
    with pytest.raises((ValueError, TypeError), match="memory_mb"):
        gd.train_gd(X, y, steps=2, memory_mb=memory_mb)


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0), "n"), (dict(T=1), "T"), (dict(d=0), "d"), (dict(rank=0), "rank"), (dict(restarts=0), "restarts"),
    (dict(n_test=-1), "n_test"), (dict(itemsize=0), "itemsize"), (dict(n=1.5), "n"),
])
def test_memory_estimate_rejects_bad_sizes(kwargs, match):
    args = dict(n=10, T=2, d=5, rank=2, restarts=1, n_test=0, itemsize=8)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        gd.memory_estimate(**args)


@pytest.mark.parametrize("T,alpha,d,k,dtype,kw", [
    (2, 0.1, 60, 1, np.float32, {}), (3, 0.3, 30, 8, np.float64, {}),
    (2, 0.02, 80, 1, np.float32, {"rank": 160}), (4, 0.5, 12, 64, np.float32, {"batch_size": 10}),
])
def test_memory_estimate_bounds_the_measured_peak(T, alpha, d, k, dtype, kw):
    """An upper estimate, within a factor 3 of the peak that tracemalloc sees (NumPy arrays, so on the host)."""
    n = model.n_samples(alpha, d)
    r = kw.get("rank", model.teacher_width(d, 0.5))
    est = gd.memory_estimate(n, T, d, r, k, n_test=min(n, 2000), itemsize=np.dtype(dtype).itemsize)
    tracemalloc.start()
    try:
        gd.run_gd(T, 0.5, alpha, d, 0, restarts=k, steps=6, record_every=5, dtype=dtype, backend="numpy", **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= est <= 3 * peak


def test_centred_students_carry_the_known_mean():
    """A centred teacher S = W W^T/sqrt(r d) - sqrt(rho) I is a zero of the loss of the student with
    shift sqrt(rho) at the teacher's weights (indices, matrix and error all exact), and its gradient
    matches central differences; gd --teachers centred trains such students and learns the teacher."""
    rng = np.random.default_rng(3)
    d, r, T, n = 12, 6, 2, 200
    W = rng.standard_normal((d, r))
    S = W @ W.T / np.sqrt(r * d) - np.sqrt(r / d) * np.eye(d)
    X = rng.standard_normal((n, T, d))
    y = channels.Softmax()(model.attention_indices(X, S))
    X2, W3 = X.reshape(n * T, d), W[None]
    L, g = loss_grad(X2, y, W3, 1.0, n, T, shift=np.sqrt(r / d))
    assert L[0] < 1e-28 and np.abs(g).max() < 1e-14
    assert np.allclose(Objective(shift=np.sqrt(r / d)).matrix(W3)[0], S, atol=1e-14)
    V = rng.standard_normal((1, d, r))
    _, g = loss_grad(X2, y, V, 1.0, n, T, shift=0.3)
    E = np.zeros_like(V)
    E[0, 2, 1] = 1e-6
    fd = (loss_grad(X2, y, V + E, 1.0, n, T, shift=0.3)[0]
          - loss_grad(X2, y, V - E, 1.0, n, T, shift=0.3)[0]) / 2e-6
    assert g[0, 2, 1] == pytest.approx(fd[0], rel=1e-6)
    with pytest.raises(ValueError, match="shift must be 0 for the direct student"):
        Objective("direct", shift=0.3)
    out = gd.run_gd(2, 0.5, 0.5, 16, seed=0, teachers="centred", restarts=2, steps=600, dtype=np.float64)
    assert out["mmse_averaged"] < 0.05
    with pytest.raises(TypeError, match="shift"):
        gd.run_gd(2, 0.5, 0.5, 16, seed=0, shift=0.7)
    assert cli.main(["gd", "--teachers", "centred", "--alpha", "0.5", "--d", "12", "--steps", "50"]) == 0
