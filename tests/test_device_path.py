"""The CuPy code path of aimlib, run on the CPU against the strict CuPy stand-in.

``tests/strict_cupy.py`` reproduces CuPy's host/device rules (no implicit
conversion either way, ufuncs and NumPy functions dispatched to the device)
while computing with NumPy.  Every public array routine is run here with
device inputs (or ``backend='cupy'``) and compared with the NumPy run on the
same seed, and its outputs are checked to be where the docstring says:
host (NumPy) arrays at the public boundary, device arrays where a routine
documents that it follows the module of its input or of ``backend``.

This checks the discipline of the single code path, not the GPU: timing,
memory and CuPy's own numerics are out of its reach (``benchmarks/gpu.sh``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.special

from aimlib import amp, channels, cli, gd, model, rmt
from aimlib.channels import hardmax
from aimlib.backend import get_array_module, module_named, to_device, to_host

TOL = dict(rtol=1e-12, atol=1e-12)
ROOT = Path(__file__).resolve().parents[1]


def _same(dev, ref, where):
    """``dev`` (stand-in run) equals ``ref`` (NumPy run); arrays in ``dev`` live ``where`` ('host'/'device')."""
    if isinstance(ref, dict):
        assert dev.keys() == ref.keys()
        for key in ref:
            if key != "seconds":
                _same(dev[key], ref[key], where)
    elif dataclasses.is_dataclass(ref):
        _same(dataclasses.asdict(dev), dataclasses.asdict(ref), where)
    elif isinstance(ref, (list, tuple)):
        assert type(dev) is type(ref) and len(dev) == len(ref)
        for a, b in zip(dev, ref):
            _same(a, b, where)
    elif isinstance(ref, np.ndarray):
        if where == "host":
            assert type(dev) is np.ndarray, f"expected a host (NumPy) array, got {type(dev)}"
        else:
            assert get_array_module(dev) is not np, f"expected a device array, got {type(dev)}"
        np.testing.assert_allclose(to_host(dev), ref, **TOL)
    elif isinstance(ref, float):
        assert type(dev) is float, f"expected a Python float, got {type(dev)}"
        assert dev == pytest.approx(ref, rel=TOL["rtol"], abs=TOL["atol"]) or (math.isnan(dev) and math.isnan(ref))
    else:
        assert dev == ref


def _device(cp, *arrays):
    return tuple(to_device(a, cp) for a in arrays)


# ---------------------------------------------------------------------------
# the stand-in itself: it must stay as strict as CuPy
# ---------------------------------------------------------------------------

def test_stand_in_refuses_implicit_device_to_host(strict_cupy):
    a = strict_cupy.arange(6.0).reshape(2, 3)
    assert type(a).__module__ == "cupy" and not isinstance(a, np.ndarray)
    for convert in (np.asarray, np.array, lambda x: float(x[0]), lambda x: x.sum().reshape(1).__float__()):
        with pytest.raises(TypeError):
            convert(a)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="not a NumPy ufunc"):
        scipy.special.ndtr(a)
    with pytest.raises(TypeError):  # no device version: numpy refuses, as with CuPy
        np.linalg.eig(a[:, :2])
    # the explicit ways back, and conversions of 0-d arrays (CuPy synchronises)
    host = a.get()
    assert type(host) is np.ndarray and host.tolist() == [[0, 1, 2], [3, 4, 5]]
    host[0, 0] = 99.0
    assert float(a[0, 0]) == 0.0 and int(a.sum()) == 15 and bool(a[1, 2] == 5)
    assert type(strict_cupy.asnumpy(a)) is np.ndarray and a[1, 1].item() == 4.0


def test_stand_in_refuses_implicit_host_to_device(strict_cupy):
    a = strict_cupy.ones((2, 3))
    h = np.ones((2, 3))
    mixes = [lambda: a + h, lambda: h + a, lambda: a * np.ones(3), lambda: a @ np.ones(3),
             lambda: h @ a.T, lambda: a + np.array(1.0), lambda: np.add(a, h),
             lambda: strict_cupy.maximum(a, h), lambda: strict_cupy.stack([a, h]),
             lambda: np.concatenate([a, h]), lambda: strict_cupy.exp(h), lambda: a.dot(h.T)]
    for mix in mixes:
        with pytest.raises(TypeError, match="Unsupported type"):
            mix()
    b = a.copy()
    for write in (lambda: b.__iadd__(h), lambda: b.__setitem__(0, np.zeros(3)), lambda: b.fill(np.zeros(()))):
        with pytest.raises(TypeError, match="Unsupported type"):
            write()
    with pytest.raises(TypeError, match="Unsupported type"):
        h += a
    # scalars, 0-d host arrays in comparisons, and host indices are fine (as in CuPy)
    assert float((a * np.float64(2.0) + 1).sum()) == 18.0
    assert bool((a < np.float64(2.0)).all()) and bool((np.float64(0.5) < a).all())
    assert a[np.array([1, 0])].shape == (2, 3) and a[[0]].shape == (1, 3)
    c = strict_cupy.asarray(h)  # the explicit copy
    h[0, 0] = 5.0
    assert float(c[0, 0]) == 1.0


def test_stand_in_dispatches_numpy_to_the_device(strict_cupy):
    a = strict_cupy.asarray(np.array([[2.0, 1.0], [1.0, 2.0]]))
    for out in (np.exp(a), np.add(a, 1), np.sum(a, axis=0), np.linalg.eigh(a)[1], np.swapaxes(a, 0, 1),
                strict_cupy.trace(a), a.sum(), a.max(axis=-1, keepdims=True), a.T, a[0], -a, abs(a)):
        assert get_array_module(out) is strict_cupy
    w, _ = strict_cupy.linalg.eigh(a)
    np.testing.assert_allclose(w.get(), [1.0, 3.0])
    assert np.ndim(a) == 2 and strict_cupy.float64 is np.float64
    assert get_array_module(strict_cupy.random.default_rng(0).standard_normal(3)) is strict_cupy
    assert strict_cupy.cuda.runtime.getDeviceCount() == 1
    # aimlib's backend sees it as CuPy
    assert module_named("cupy") is strict_cupy and to_device(np.zeros(2), strict_cupy).shape == (2,)
    assert type(to_host(a)) is np.ndarray


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------

def test_model_sampling_on_the_device(strict_cupy):
    # backend='cupy' documents device results, equal to the NumPy draws of the same seed
    _same(model.sample_teacher(20, 0.5, 3, backend="cupy"), model.sample_teacher(20, 0.5, 3), "device")
    _same(model.sample_tokens(4, 3, 20, 3, backend="cupy"), model.sample_tokens(4, 3, 20, 3), "device")
    for ch in (channels.NoisySoftmax(2.0, noise=0.1), channels.Hardmax(), channels.Linear(noise=0.3)):
        dev = model.sample_dataset(0.05, 20, 3, 0.5, ch, 4, backend="cupy")
        ref = model.sample_dataset(0.05, 20, 3, 0.5, ch, 4)
        for name in ("S", "X", "h", "y"):
            _same(getattr(dev, name), getattr(ref, name), "device")
        assert (dev.n, dev.T, dev.d) == (ref.n, ref.T, ref.d)


def test_model_functions_of_device_arrays(strict_cupy):
    X, S = model.sample_tokens(5, 3, 16, 0), model.sample_teacher(16, 0.5, 1)
    S2 = model.sample_teacher(16, 0.5, 2)
    Xd, Sd, S2d = _device(strict_cupy, X, S, S2)
    _same(model.attention_indices(Xd, Sd), model.attention_indices(X, S), "device")
    # in chunks, several teachers, a non-symmetric S: the same numbers on the device
    _same(model.attention_indices(Xd, Sd, chunk_size=2), model.attention_indices(X, S), "device")
    _same(model.attention_indices(Xd, strict_cupy.stack([Sd, S2d]), chunk_size=3),
          model.attention_indices(X, np.stack([S, S2])), "device")
    _same(model.attention_indices(Xd, Sd @ S2d, symmetric=False, chunk_size=2),
          model.attention_indices(X, S @ S2, symmetric=False), "device")
    _same(model.index_covariance(Sd, S2d), model.index_covariance(S, S2), "host")
    _same(model.index_excess_kurtosis(Sd), model.index_excess_kurtosis(S), "host")
    # mixed host/device inputs: the computation moves to the device
    _same(model.attention_indices(X, Sd), model.attention_indices(X, S), "device")
    _same(model.index_covariance(Sd, S2), model.index_covariance(S, S2), "host")


# ---------------------------------------------------------------------------
# channels
# ---------------------------------------------------------------------------

CHANNELS = [channels.Softmax(1.5), channels.NoisySoftmax(0.7, noise=0.2), channels.Hardmax(),
            channels.Hardmax(noise=0.1), channels.Linear(), channels.Linear(noise=0.5)]


@pytest.mark.parametrize("ch", CHANNELS, ids=repr)
def test_channel_forward_on_the_device(strict_cupy, ch):
    h = model.attention_indices(model.sample_tokens(30, 3, 12, 0), model.sample_teacher(12, 0.5, 1))
    (hd,) = _device(strict_cupy, h)
    _same(ch.clean(hd), ch.clean(h), "device")
    _same(ch(hd, 5), ch(h, 5), "device")


@pytest.mark.parametrize("ch, T", [(channels.Softmax(1.5), 3), (channels.Linear(), 3),
                                   (channels.Linear(noise=0.5), 3), (channels.Hardmax(), 2),
                                   (channels.NoisySoftmax(1.0, noise=0.05), 2)], ids=repr)
def test_channel_bayes_side_on_the_device(strict_cupy, ch, T):
    rng = np.random.default_rng(7)
    h = rng.standard_normal((25, T, T))
    h = (h + np.swapaxes(h, 1, 2)) / 2
    y = ch(h, rng)
    omega = 0.8 * h + 0.3 * rng.standard_normal(h.shape)
    omega = (omega + np.swapaxes(omega, 1, 2)) / 2
    yd, omd = _device(strict_cupy, y, omega)
    for method in ("g_out", "log_partition"):
        _same(getattr(ch, method)(yd, omd, 0.4), getattr(ch, method)(y, omega, 0.4), "device")
    if isinstance(ch, channels.Softmax) and ch.noise == 0:
        _same(ch.preimage(yd), ch.preimage(y), "device")


# ---------------------------------------------------------------------------
# hardmax module
# ---------------------------------------------------------------------------

def test_hardmax_functions_of_device_arrays(strict_cupy):
    rng = np.random.default_rng(3)
    omega = rng.standard_normal((40, 2, 2))
    omega = (omega + np.swapaxes(omega, 1, 2)) / 2
    y = channels.Hardmax()(omega + 0.5 * rng.standard_normal(omega.shape))
    s = hardmax.signs_from_output(y)
    V = rng.uniform(0.2, 1.0, 40)
    yd, omd, sd, Vd = _device(strict_cupy, y, omega, s, V)
    for yy, yref in ((yd, y), (sd, s)):
        _same(hardmax.log_partition(yy, omd, 0.3), hardmax.log_partition(yref, omega, 0.3), "device")
        _same(hardmax.g_out(yy, omd, Vd), hardmax.g_out(yref, omega, V), "device")
    # host functions: device input, host output
    _same(hardmax.signs_from_output(yd), s, "host")
    _same(hardmax.output_from_signs(sd), hardmax.output_from_signs(s), "host")
    _same(hardmax.probabilities(omd, 0.3), hardmax.probabilities(omega, 0.3), "host")
    k = rng.standard_normal(40)
    (kd,) = _device(strict_cupy, k)
    _same(hardmax.log_bvn_cdf(kd, -kd, 0.3), hardmax.log_bvn_cdf(k, -k, 0.3), "host")
    _same(hardmax.bvn_cdf(kd, kd, -0.3), hardmax.bvn_cdf(k, k, -0.3), "host")


# ---------------------------------------------------------------------------
# random matrices
# ---------------------------------------------------------------------------

def test_rmt_estimators_on_the_device(strict_cupy):
    S, Y = rmt.sample_denoising(40, 0.5, 0.5, 0)
    (Yd,) = _device(strict_cupy, Y)
    S_rie = rmt.rie(Yd, 0.5, 0.5)
    _same(S_rie, rmt.rie(Y, 0.5, 0.5), "device")
    _same(rmt.linear_shrinkage(Yd, 0.5, 0.5), rmt.linear_shrinkage(Y, 0.5, 0.5), "device")
    # the error of a device estimate against the host teacher of sample_denoising
    _same(model.estimation_error(S_rie, S), model.estimation_error(rmt.rie(Y, 0.5, 0.5), S), "host")
    _same(model.estimation_error(S_rie, to_device(S, strict_cupy)), model.estimation_error(rmt.rie(Y, 0.5, 0.5), S),
          "host")


def test_rmt_spectra_of_device_points(strict_cupy):
    # eigenvalues computed on the device feed the (host) spectral functions
    _, Y = rmt.sample_denoising(30, 0.5, 0.5, 1)
    lam = np.linalg.eigvalsh(Y)
    lam_d = strict_cupy.linalg.eigvalsh(to_device(Y, strict_cupy))
    for fn in (rmt.density, rmt.hilbert, rmt.stieltjes, rmt.rie_eigenvalues, rmt.cdf):
        _same(fn(lam_d, 0.5, 0.5), fn(lam, 0.5, 0.5), "host")
    _same(rmt.density_S(lam_d, 0.5), rmt.density_S(lam, 0.5), "host")
    deltas = np.array([0.3, 1.0])
    _same(rmt.mmse(to_device(deltas, strict_cupy), 0.5), rmt.mmse(deltas, 0.5), "host")
    _same(rmt.mmse_gaussian(to_device(deltas, strict_cupy)), rmt.mmse_gaussian(deltas), "host")


# ---------------------------------------------------------------------------
# GAMP-RIE
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("ch, T, alpha", [(channels.Softmax(), 2, 0.1), (channels.Linear(noise=0.5), 3, 0.05),
                                          (channels.Hardmax(), 2, 0.4), (channels.NoisySoftmax(noise=0.05), 2, 0.1)],
                         ids=repr)
def test_gamp_rie_on_the_device(strict_cupy, ch, T, alpha):
    ref_data = model.sample_dataset(alpha, 30, T, 0.5, ch, 2)
    data = model.sample_dataset(alpha, 30, T, 0.5, ch, 2, backend="cupy")
    kw = dict(max_iter=6, on_max_iter="return", trace=True, chunk_size=17)
    ref = amp.gamp_rie(ref_data.X, ref_data.y, ch, 0.5, S=ref_data.S, **kw)
    dev = amp.gamp_rie(data.X, data.y, ch, 0.5, S=data.S, **kw)
    _same(dev, ref, "host")
    assert dev.iterations == 6 and len(dev.trace["error"]) == 6
    # an explicit start, on the device, and no teacher
    init = np.sqrt(0.5) * np.eye(30)
    _same(amp.gamp_rie(data.X, data.y, ch, 0.5, init=to_device(init, strict_cupy), max_iter=3,
                       on_max_iter="return"),
          amp.gamp_rie(ref_data.X, ref_data.y, ch, 0.5, init=init, max_iter=3, on_max_iter="return"), "host")


def test_run_amp_on_the_device(strict_cupy):
    kw = dict(max_iter=5, on_max_iter="return", trace=True)
    _same(amp.run_amp("softmax", 2, 0.5, 0.1, 30, 1, backend="cupy", **kw),
          amp.run_amp("softmax", 2, 0.5, 0.1, 30, 1, backend="numpy", **kw), "host")


# ---------------------------------------------------------------------------
# gradient descent
# ---------------------------------------------------------------------------

def test_gd_functions_of_device_arrays(strict_cupy):
    data = model.sample_dataset(0.3, 12, 3, 0.5, channels.Softmax(1.5), 0)
    W = gd.initial_weights(12, 6, 2, 1)
    _same(gd.initial_weights(12, 6, 2, 1, backend="cupy"), W, "device")
    Xd, yd, Wd = _device(strict_cupy, data.X, data.y, W)
    _same(gd.student_matrix(Wd), gd.student_matrix(W), "device")
    _same(gd.student_indices(Xd, Wd[0]), gd.student_indices(data.X, W[0]), "device")
    _same(gd.student_output(Xd, Wd, 1.5), gd.student_output(data.X, W, 1.5), "device")
    L, g = gd.loss_and_grad(data.X, data.y, W, 1.5)
    _same(gd.loss_and_grad(Xd, yd, Wd, 1.5), (L, g), "device")
    _same(gd.loss(Xd, yd, Wd[1], 1.5), gd.loss(data.X, data.y, W[1], 1.5), "host")
    # targets on the host, tokens on the device: the computation follows the tokens
    _same(gd.loss_and_grad(Xd, data.y, Wd, 1.5), (L, g), "device")
    S_hat = gd.student_matrix(W)
    _same(model.estimation_error(to_device(S_hat, strict_cupy), data.S), model.estimation_error(S_hat, data.S), "host")
    _same(model.estimation_error(S_hat[0], to_device(data.S, strict_cupy)), model.estimation_error(S_hat[0], data.S),
          "host")


@pytest.mark.parametrize("kw", [dict(), dict(batch_size=20, tol=1e-3, optimizer="gd", lr=1.0)], ids=str)
def test_train_gd_on_the_device(strict_cupy, kw):
    ref_data = model.sample_dataset(0.3, 12, 2, 0.5, channels.Softmax(), 0)
    data = model.sample_dataset(0.3, 12, 2, 0.5, channels.Softmax(), 0, backend="cupy")
    Xt = model.sample_tokens(30, 2, 12, 1)
    yt = channels.Softmax()(model.attention_indices(Xt, ref_data.S))
    Xtd, ytd = _device(strict_cupy, Xt, yt)
    opts = dict(rho=0.5, restarts=2, seed=3, steps=25, record_every=10, **kw)
    ref = gd.train_gd(ref_data.X, ref_data.y, S=ref_data.S, X_test=Xt, y_test=yt, **opts)
    dev = gd.train_gd(data.X, data.y, S=data.S, X_test=Xtd, y_test=ytd, **opts)
    _same(dev, ref, "host")
    # host targets and a host teacher next to device tokens
    _same(gd.train_gd(data.X, ref_data.y, S=ref_data.S, X_test=Xt, y_test=yt, **opts), ref, "host")
    # the averaged estimate (host) against the device teacher
    _same(model.estimation_error(dev.S_mean, data.S), ref.mmse_averaged, "host")


def test_run_gd_on_the_device(strict_cupy):
    kw = dict(restarts=2, steps=20, dtype=np.float64, return_result=True)
    dev = gd.run_gd(2, 0.5, 0.2, 10, 4, backend="cupy", **kw)
    ref = gd.run_gd(2, 0.5, 0.2, 10, 4, backend="numpy", **kw)
    _same(dev.pop("result"), ref.pop("result"), "host")
    dev_data, ref_data = dev.pop("data"), ref.pop("data")
    _same(dev_data.X, ref_data.X, "device")
    _same(dev, ref, "host")


# ---------------------------------------------------------------------------
# command line, in process
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["amp", "--channel", "softmax", "--T", "2", "--alpha", "0.1", "--d", "30", "--seed", "2", "--max-iter", "4",
     "--on-max-iter", "return"],
    ["amp", "--channel", "hardmax", "--T", "2", "--alpha", "0.4", "--d", "24", "--max-iter", "3",
     "--on-max-iter", "return"],
    ["gd", "--T", "2", "--alpha", "0.2", "--d", "10", "--restarts", "2", "--steps", "15"],
], ids=lambda a: a[0] + "-" + a[2])
def test_cli_on_the_device(strict_cupy, capsys, argv):
    rows = {}
    for backend in ("numpy", "cupy"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the iteration cap is reached on purpose
            assert cli.main(argv + ["--backend", backend, "--dtype", "float64"]) == 0
        header, row = capsys.readouterr().out.strip().splitlines()
        columns = header.split(",")
        rows[backend] = [x for c, x in zip(columns, row.split(",")) if c != "seconds"]  # all but the time
    assert rows["cupy"] == rows["numpy"]


def test_gpu_benchmarks_on_the_device(strict_cupy, tmp_path, monkeypatch):
    """The two benchmarks that ``benchmarks/gpu.sh`` runs with ``--backend cupy`` (``GPU_EXTRA=1``), at a tiny size."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_amp_scaling
    import bench_gd

    out = tmp_path / "amp_scaling_cupy.json"
    argv = ["--backend", "cupy", "--d", "20", "--iterations", "2", "--converge", "--out", str(out)]
    assert bench_amp_scaling.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["device"].startswith("strict CuPy stand-in") and result["rows"][0]["backend"] == "cupy"
    row = bench_gd.one(12, 2, 0.1, 2, np.float32, 20, "cupy")
    assert row["backend"] == "cupy" and math.isfinite(row["mmse_averaged"])
