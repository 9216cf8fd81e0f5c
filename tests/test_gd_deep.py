"""Tests of aimlib.gd.deep: the two-layer softmax student, its gradient, training and runs."""
import tracemalloc

import numpy as np
import pytest

from aimlib import gd, model
from aimlib.channels import DeepAttention
from aimlib.gd import deep


def _data(n=9, T=3, d=6, c=0.5, beta=1.5, seed=0):
    """Tokens and targets from random teachers of widths (2, 4)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    W1, W2 = rng.standard_normal((d, 2)), rng.standard_normal((d, 4))
    S = np.stack([gd.student_matrix(W1), gd.student_matrix(W2)])
    return X, DeepAttention(c, "softmax", beta)(model.attention_indices(X, S)), W1, W2


def _central_differences(f, W, eps=1e-6):
    fd = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[idx] = eps
        fd[idx] = np.sum(f(W + E) - f(W - E)) / (2 * eps)
    return fd


@pytest.mark.parametrize("c,beta,k", [(0.5, 1.5, None), (-0.3, 0.7, 2), (2.0, 3.0, None)])
def test_gradient_of_both_layers_matches_central_differences(c, beta, k):
    X, y, _, _ = _data(beta=beta)
    rng = np.random.default_rng(1)
    shape = () if k is None else (k,)
    W1, W2 = rng.standard_normal(shape + (6, 3)), rng.standard_normal(shape + (6, 2))
    L, g1, g2 = deep.deep_loss_and_grad(X, y, W1, W2, c, beta)
    assert g1.shape == W1.shape and g2.shape == W2.shape
    fd1 = _central_differences(lambda W: deep.deep_loss(X, y, W, W2, c, beta), W1)
    fd2 = _central_differences(lambda W: deep.deep_loss(X, y, W1, W, c, beta), W2)
    for g, fd in ((g1, fd1), (g2, fd2)):
        assert np.max(np.abs(fd - g)) < 1e-8 * max(1.0, np.max(np.abs(g)))
        assert np.max(np.abs(g)) > 1e-3          # not a vanishing gradient that passes trivially
    assert np.allclose(np.atleast_1d(L), np.atleast_1d(deep.deep_loss(X, y, W1, W2, c, beta)))


def test_output_is_the_channel_forward_map_of_the_student_indices():
    X, y, W1, W2 = _data()
    rng = np.random.default_rng(4)
    V1, V2 = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 5))
    S_hat = np.stack([gd.student_matrix(V1), gd.student_matrix(V2)], axis=1)      # (k, 2, d, d)
    h = deep.deep_student_indices(X, V1, V2)
    assert h.shape == (2, 9, 2, 3, 3)
    channel = DeepAttention(0.7, "softmax", 1.5)
    for i in range(2):
        ref = model.attention_indices(X, S_hat[i])
        assert np.allclose(h[i], ref, atol=1e-12)
        out = deep.deep_student_output(X, V1[i], V2[i], c=0.7, beta=1.5)
        assert np.allclose(out, channel.clean(ref), atol=1e-12)
        assert np.allclose(deep.deep_student_output(X, V1, V2, 0.7, 1.5)[i], out, atol=1e-14)
        L = deep.deep_loss(X, y, V1[i], V2[i], 0.7, 1.5)
        assert np.isclose(L, 0.5 * np.sum((channel.clean(ref) - y) ** 2) / 9)


def test_loss_and_gradient_vanish_at_the_teacher():
    X, y, W1, W2 = _data()
    L, g1, g2 = deep.deep_loss_and_grad(X, y, W1, W2, 0.5, 1.5)
    assert L < 1e-28
    assert np.max(np.abs(g1)) < 1e-12 and np.max(np.abs(g2)) < 1e-12
    assert deep.deep_loss(X, y, W1, 1.1 * W2, 0.5, 1.5) > 1e-6


def test_training_reaches_the_teachers_above_the_counting_bound():
    out = deep.run_deep_gd(3, (0.5, 0.5), 1.0, 12, 0.5, seed=3, restarts=2, steps=400, dtype=np.float64,
                           record_every=20, return_result=True)
    res = out["result"]
    assert res.train_loss.shape == (2, res.steps.size) and res.mmse_curve.shape == (2, 2, res.steps.size)
    assert res.mmse_averaged_curve.shape == (2, res.steps.size) and res.S_hat.shape == (2, 2, 12, 12)
    assert np.all(res.train_loss[:, -1] < 1e-3 * res.train_loss[:, 0])
    # the teachers are reached: final errors observed 4.6e-8 .. 1.1e-5 (the bound was 0.01)
    assert np.all(res.mmse_curve[..., 0] > 1.0) and np.all(res.mmse_curve[..., -1] < 1e-3)
    S = out["data"].S
    for layer in (0, 1):
        assert np.allclose(res.mmse_single[:, layer], model.estimation_error(res.S_hat[:, layer], S[layer]))
        assert np.isclose(res.mmse_averaged[layer], model.estimation_error(res.S_mean[layer], S[layer]))
    assert out["mmse_single"] == pytest.approx(res.mmse_single.mean(axis=0).tolist())
    assert np.array_equal(out["curve_single"], res.mmse_curve) and out["ranks"] == (6, 6)


def test_train_deep_gd_options_and_teacher_shape():
    X, y, W1, W2 = _data(n=30, T=2, d=6)
    S = np.stack([gd.student_matrix(W1), gd.student_matrix(W2)])
    res = deep.train_deep_gd(X, y, ranks=(2, 4), restarts=3, seed=1, steps=30, S=S, optimizer="gd", lr=0.5,
                             batch_size=10, record_every=10, c=0.5, beta=1.5)
    assert res.W1.shape == (3, 6, 2) and res.W2.shape == (3, 6, 4) and res.test_loss is None
    assert np.all(res.train_loss[:, -1] < res.train_loss[:, 0])
    with pytest.raises(ValueError, match="S must have 3 dimensions"):
        deep.train_deep_gd(X, y, ranks=(2, 4), steps=2, S=S[0])
    with pytest.raises(ValueError, match=r"S must have shape \(2, 6, 6\)"):
        deep.train_deep_gd(X, y, ranks=(2, 4), steps=2, S=np.concatenate([S, S[:1]]))
    no_teacher = deep.train_deep_gd(X, y, rho=(0.5, 0.3), steps=2)
    assert no_teacher.mmse_curve is None and no_teacher.W2.shape == (1, 6, 2)


def test_seeds_are_reproducible():
    kw = dict(restarts=2, steps=15, record_every=5)
    a, b = (deep.run_deep_gd(2, (0.5, 0.25), 0.3, 10, 0.5, seed=7, **kw) for _ in range(2))
    c = deep.run_deep_gd(2, (0.5, 0.25), 0.3, 10, 0.5, seed=8, **kw)
    assert np.array_equal(a["curve_single"], b["curve_single"]) and a["train_loss"] == b["train_loss"]
    assert not np.array_equal(a["curve_single"], c["curve_single"])
    assert a["ranks"] == (5, 2) and a["n"] == 30


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(rho=0.5), ValueError, "rho must hold 2 width ratios"),
    (dict(rho=(0.5, -0.1)), ValueError, "rho"),
    (dict(alpha=0.0), ValueError, "alpha must be > 0"),
    (dict(T=1), ValueError, "T must be"),
    (dict(d=1), ValueError, "d must be"),
    (dict(c=float("nan")), ValueError, "c must be"),
    (dict(beta=0.0), ValueError, "beta"),
    (dict(restarts=0), ValueError, "restarts"),
    (dict(seed=-1), ValueError, "seed must be a non-negative"),
    (dict(ranks=(3,)), ValueError, "ranks must be a pair"),
    (dict(ranks=(3, 0)), ValueError, r"ranks\[1\]"),
    (dict(X=np.zeros((2, 2, 2))), TypeError, "unexpected option 'X'"),
    (dict(alpha=50.0, memory_mb=1.0), ValueError, r"alpha must be in \(0, "),
    (dict(lr=-1.0), ValueError, "lr"),
])
def test_run_deep_gd_rejects_bad_inputs(kwargs, exc, match):
    args = dict(T=2, rho=(0.5, 0.5), alpha=0.2, d=8, c=0.5, seed=0, steps=2)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        deep.run_deep_gd(**args)


def test_loss_rejects_mismatched_weights():
    X, y, W1, W2 = _data()
    with pytest.raises(ValueError, match="same number of restarts"):
        deep.deep_loss(X, y, W1, np.stack([W2, W2]))
    with pytest.raises(ValueError, match="W must have shape"):
        deep.deep_loss(X, y, W1, W2[:4])
    with pytest.raises(ValueError, match="y must have shape"):
        deep.deep_loss(X, y[:, :2], W1, W2)


def test_memory_estimate_bounds_the_measured_peak():
    """An upper estimate, within a factor 3 of the peak that tracemalloc sees."""
    T, alpha, d, k = 3, 0.4, 24, 4
    n = model.n_samples(alpha, d)
    est = deep.deep_memory_estimate(n, T, d, (12, 6), k, n_test=n, itemsize=4)
    tracemalloc.start()
    try:
        deep.run_deep_gd(T, (0.5, 0.25), alpha, d, seed=0, restarts=k, steps=6, record_every=5, backend="numpy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= est <= 3 * peak
    assert deep.deep_memory_estimate(n, T, d, (12, 6), k) > gd.memory_estimate(n, T, d, 18, k)


def test_deep_functions_on_the_device(strict_cupy):
    X, y, W1, W2 = _data()
    Xd, yd = strict_cupy.asarray(X), strict_cupy.asarray(y)
    W1d, W2d = strict_cupy.asarray(np.stack([W1, W1])), strict_cupy.asarray(np.stack([W2, 2 * W2]))
    L, g1, g2 = deep.deep_loss_and_grad(X, y, np.stack([W1, W1]), np.stack([W2, 2 * W2]))
    Ld, g1d, g2d = deep.deep_loss_and_grad(Xd, yd, W1d, W2d)
    assert isinstance(g1d, strict_cupy.ndarray)
    for a, b in ((Ld, L), (g1d, g1), (g2d, g2)):
        assert np.allclose(strict_cupy.asnumpy(a), b)
    kw = dict(restarts=2, steps=12, record_every=5, dtype=np.float64)
    dev = deep.run_deep_gd(2, (0.5, 0.5), 0.3, 10, seed=4, backend="cupy", **kw)
    ref = deep.run_deep_gd(2, (0.5, 0.5), 0.3, 10, seed=4, backend="numpy", **kw)
    assert isinstance(dev["curve_single"], np.ndarray)
    assert np.allclose(dev["curve_single"], ref["curve_single"])


def test_centred_two_layer_students_carry_the_known_means():
    """Centred teachers S_l = W_l W_l^T/sqrt(r_l d) - sqrt(r_l/d) I: the students with those shifts
    have zero loss and zero gradient at the teachers' weights, and run_deep_gd(teachers='centred')
    learns them (the same protocol and tolerance as the Wishart run above)."""
    X, _, W1, W2 = _data(n=30, T=2, d=6)
    m = (np.sqrt(2 / 6), np.sqrt(4 / 6))
    S = np.stack([gd.student_matrix(W1) - m[0] * np.eye(6), gd.student_matrix(W2) - m[1] * np.eye(6)])
    ch = DeepAttention(0.5, "softmax", 1.5)
    y = ch(model.attention_indices(X, S))
    W3 = np.concatenate([W1, W2], axis=1)[None]
    L, g = deep.deep_loss_grad(X.reshape(-1, 6), y, W3, 2, ch, 30, 2, shifts=m)
    assert L[0] < 1e-28 and np.abs(g).max() < 1e-14
    out = deep.run_deep_gd(3, (0.5, 0.5), 1.0, 12, 0.5, seed=3, restarts=2, steps=400, dtype=np.float64,
                           record_every=20, teachers="centred", return_result=True)
    res, data = out["result"], out["data"]
    assert np.allclose(np.trace(data.S, axis1=1, axis2=2) / 12, 0.0, atol=0.3)     # centred teachers
    for layer in (0, 1):
        assert np.allclose(res.mmse_single[:, layer], model.estimation_error(res.S_hat[:, layer], data.S[layer]))
    assert np.all(res.mmse_curve[..., -1] < 1e-3)
