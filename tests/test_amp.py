"""Tests of :mod:`aimlib.amp` (GAMP-RIE): tracking of the state evolution, the
calibration of the channel step, chunking, precision, input checks and
divergence handling.

Finite-size tolerance
---------------------
AMP at finite ``d`` sits on the SE curve only up to fluctuations and a
finite-size bias.  A scan at ``rho = 0.5`` (4 seeds per point, default
options, ``max_iter = 300``) gave the mean of (AMP error - SE error), with the
seed-to-seed standard deviation in brackets:

=================  ======  ==============  ==============  ==============
channel            alpha   d = 50          d = 80          d = 120
=================  ======  ==============  ==============  ==============
softmax T = 2      0.10    +0.028 (0.044)  +0.017 (0.030)  +0.026 (0.021)
softmax T = 3      0.04    +0.017 (0.031)  +0.030 (0.010)  +0.022 (0.022)
linear, noise 0.5  0.10    +0.036 (0.028)  +0.020 (0.024)  +0.023 (0.010)
hardmax T = 2      0.50    +0.017 (0.014)  +0.013 (0.009)  +0.004 (0.004)
=================  ======  ==============  ==============  ==============

(SE errors 0.392, 0.392, 0.426, 0.213.)  Four seeds do not resolve the
decay of the bias between d = 80 and 120, but it does decay: linear channel,
two seeds, +0.009 and +0.007 at d = 200, +0.008 and +0.004 at d = 300;
softmax T = 2, alpha = 0.1, one seed at d = 500 (benchmarks/bench_amp.py):
+0.004.  Over d = 80..120 the largest single-seed deviation was 0.051, so at
d = 100 we allow 0.06; the seeds used below are fixed (their deviations are
between -0.021 and +0.021).

The noise-variance diagnostic ``||R - S||_F^2 / (d Delta)`` has a positive
``O(1/d)`` bias from the fourth moments of the tokens (``~ 1 + 8/d`` at the
first iteration for ``T = 2``: 1.20, 1.11, 1.05 at d = 40, 80, 160).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from aimlib import ConvergenceError, amp, channels, model, state_evolution
from aimlib.channels import Softmax
from aimlib.priors import Centred, Gaussian, Wishart

RHO = 0.5
D = 100
TOL_SE = 0.06   # finite-size allowance at d = 100: the scan in the module docstring


def _run(ch, T, alpha, d=D, seed=0, backend=None, **kw):
    data = model.sample_dataset(alpha, d, T, RHO, ch, seed, backend=backend)
    kw.setdefault("max_iter", 100)
    kw.setdefault("on_max_iter", "return")
    return data, amp.gamp_rie(data.X, data.y, ch, RHO, S=data.S, **kw)


def _se(ch, T, alpha):
    return state_evolution.fixed_point(alpha, ch, T=T, rho=RHO).mmse


@pytest.mark.parametrize("T, alpha", [(2, 0.05), (2, 0.12), (3, 0.02), (3, 0.04)])
def test_softmax_tracks_se(T, alpha, backend):
    ch = channels.Softmax()
    _, res = _run(ch, T, alpha, backend=backend)
    se = _se(ch, T, alpha)
    assert abs(res.mmse - se) < TOL_SE, (res.mmse, se)
    # the algorithm's own prediction m also sits near the SE value; m was not part of the
    # scan behind TOL_SE, so it gets twice that (these seeds: |m - SE| <= 0.042, at T = 3, alpha = 0.02)
    assert abs(res.m - se) < 2 * TOL_SE


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_linear_noisy_tracks_se(alpha):
    ch = channels.Linear(noise=0.5)
    _, res = _run(ch, 2, alpha)
    assert abs(res.mmse - _se(ch, 2, alpha)) < TOL_SE


@pytest.mark.parametrize("alpha", [0.2, 0.5])
def test_hardmax_tracks_se(alpha, backend):
    ch = channels.Hardmax()
    _, res = _run(ch, 2, alpha, d=80, backend=backend)
    assert abs(res.mmse - _se(ch, 2, alpha)) < TOL_SE


def test_perfect_recovery_beyond_threshold():
    # alpha_PR = 0.1875 for T = 2, rho = 0.5; well above it AMP recovers S.  (This test
    # used to accept d = 80, seed 0, whose prediction collapses to m ~ 1e-7 at an error
    # of 0.0067: a false "perfect recovery", now a ConvergenceError, see
    # tests/test_amp_convergence.py.)  Seed 1 at d = 40 does recover S: its m decays
    # slowly, and the run ends as "perfect" once m has stalled below 2/d^2.
    ch = channels.Softmax()
    _, res = _run(ch, 2, 0.3, d=40, seed=1, max_iter=300, on_max_iter="raise")
    assert res.converged and res.reason == "perfect"
    assert res.m < 2 / 40**2 and res.mmse < 1e-4


@pytest.fixture(scope="module")
def hardmax_undamped():
    """Hardmax T = 2 at alpha = 0.5, d = 100, without damping: the cleanest comparison with SE."""
    ch = channels.Hardmax()
    _, res = _run(ch, 2, 0.5, d=100, trace=True, damp="state", damping=0.0, max_iter=15)
    return ch, res


def test_noise_variance_diagnostic(hardmax_undamped):
    """The channel step is calibrated: R = S + sqrt(Delta) GOE, ||R - S||^2/(d Delta) ~ 1."""
    _, res = hardmax_undamped
    ratio = np.asarray(res.trace["noise_ratio"])
    # 0.08: the O(1/d) bias of the module docstring, ~8/d at the first iteration (this run: <= 0.036)
    assert np.all(np.abs(ratio - 1) < 0.08), ratio
    # and the RIE output has (close to) the predicted error m_new = mmse(Delta), up to the RIE's
    # finite-d error at d = 100 (this run: |err_new - m_new| <= 0.013)
    err_new, m_new = np.asarray(res.trace["error_new"]), np.asarray(res.trace["m_new"])
    assert np.all(np.abs(err_new - m_new) < 0.03)


def test_noise_variance_diagnostic_linear():
    ch = channels.Linear(noise=0.5)
    _, res = _run(ch, 2, 0.1, d=120, trace=True, damp="state", damping=0.3)
    ratio = np.asarray(res.trace["noise_ratio"])
    # the O(1/d) bias of the module docstring, largest in the first damped iterations
    # (d = 120: 0.066, 0.131, 0.082, ...); it has decayed at the end (last five: mean -0.002)
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    assert abs(np.mean(ratio[-5:]) - 1) < 0.05


def test_trace_follows_se_iteration(hardmax_undamped):
    """Iteration by iteration, AMP's error and its prediction m follow the SE iteration."""
    ch, res = hardmax_undamped
    se_trace = state_evolution.fixed_point(0.5, ch, T=2, rho=RHO).trace
    k = min(len(res.trace["m"]), len(se_trace) - 1)
    amp_m = np.asarray(res.trace["m"][:k])
    amp_err = np.asarray(res.trace["error"][:k])
    assert k >= 10
    # finite-d deviation of one run at d = 100 (hardmax: seed-to-seed sd 0.004-0.009 at d = 80-120 in the
    # module docstring); this run: <= 0.008 for m, <= 0.007 for the error
    assert np.max(np.abs(amp_m - se_trace[1:k + 1])) < 0.02
    assert np.max(np.abs(amp_err - se_trace[1:k + 1])) < 0.03


def test_chunked_equals_unchunked(backend):
    ch = channels.Softmax()
    data = model.sample_dataset(0.08, 50, 3, RHO, ch, 3, backend=backend)
    kw = dict(S=data.S, max_iter=15, on_max_iter="return", trace=True)
    a = amp.gamp_rie(data.X, data.y, ch, RHO, chunk_size=7, **kw)
    b = amp.gamp_rie(data.X, data.y, ch, RHO, chunk_size=data.n, **kw)
    c = amp.gamp_rie(data.X, data.y, ch, RHO, memory_mb=0.05, **kw)
    assert a.options["chunk_size"] == 7 and b.options["chunk_size"] == data.n
    assert 1 < c.options["chunk_size"] < data.n
    for r in (a, c):
        assert r.iterations == b.iterations
        np.testing.assert_allclose(r.S_hat, b.S_hat, rtol=0, atol=1e-9)
        np.testing.assert_allclose(r.trace["delta"], b.trace["delta"], rtol=1e-10)


def test_float32_close_to_float64():
    ch = channels.Linear(noise=0.5)
    data = model.sample_dataset(0.1, 80, 2, RHO, ch, 1)
    kw = dict(S=data.S, max_iter=30, on_max_iter="return")
    r64 = amp.gamp_rie(data.X, data.y, ch, RHO, **kw)
    r32 = amp.gamp_rie(data.X.astype(np.float32), data.y.astype(np.float32), ch, RHO, **kw)
    assert r32.S_hat.dtype == np.float32 and r64.S_hat.dtype == np.float64
    assert r32.options["dtype"] == "float32"
    assert abs(r32.mmse - r64.mmse) < 1e-3
    assert np.max(np.abs(r32.S_hat - r64.S_hat)) < 1e-3


def test_run_amp_dict_and_reproducible(backend):
    kw = dict(max_iter=40, on_max_iter="return", backend=backend)
    a = amp.run_amp("softmax", 2, RHO, 0.05, 40, 7, **kw)
    b = amp.run_amp(channels.Softmax(), 2, RHO, 0.05, 40, 7, **kw)
    for key in ("alpha", "d", "seed", "mmse", "iterations", "seconds"):
        assert key in a
    assert a["alpha"] == 0.05 and a["d"] == 40 and a["seed"] == 7
    assert a["mmse"] == b["mmse"] and a["iterations"] == b["iterations"]
    assert math.isfinite(a["mmse"]) and a["seconds"] >= 0
    c = amp.run_amp("linear", 2, RHO, 0.05, 40, 7, dtype="float32", trace=True, **kw)
    assert "trace" in c and len(c["trace"]["m"]) == c["iterations"]


def test_without_teacher_and_init():
    ch = channels.Linear(noise=0.5)
    data = model.sample_dataset(0.05, 40, 2, RHO, ch, 2)
    res = amp.gamp_rie(data.X, data.y, ch, RHO, max_iter=5, on_max_iter="return",
                       init=np.sqrt(RHO) * np.eye(40), trace=True)
    assert res.mmse is None and "error" not in res.trace
    assert res.S_hat.shape == (40, 40) and np.allclose(res.S_hat, res.S_hat.T)


# ----------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def small():
    ch = channels.Linear(noise=0.5)
    return ch, model.sample_dataset(0.05, 20, 2, RHO, ch, 0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(rho=-1.0), ValueError, "rho"),
    (dict(damping=1.0), ValueError, "damping"),
    (dict(damping=-0.1), ValueError, "damping"),
    (dict(max_iter=0), ValueError, "max_iter"),
    (dict(tol=0.0), ValueError, "tol"),
    (dict(lookback=0), ValueError, "lookback"),
    (dict(chunk_size=0), ValueError, "chunk_size"),
    (dict(chunk_size=2.5), TypeError, "chunk_size"),
    (dict(memory_mb=-1), ValueError, "memory_mb"),
    (dict(dtype=np.int32), ValueError, "dtype"),
    (dict(on_max_iter="ignore"), ValueError, "on_max_iter"),
    (dict(damp="g"), ValueError, "damp"),
])
def test_bad_options(small, kwargs, exc, match):
    ch, data = small
    kw = dict(rho=RHO)
    kw.update(kwargs)
    rho = kw.pop("rho")
    with pytest.raises(exc, match=match):
        amp.gamp_rie(data.X, data.y, ch, rho, **kw)


def test_bad_arrays(small):
    ch, data = small
    with pytest.raises(ValueError, match="X"):
        amp.gamp_rie(data.X[0], data.y, ch, RHO)
    with pytest.raises(ValueError, match="y"):
        amp.gamp_rie(data.X, data.y[:-1], ch, RHO)
    Xnan = data.X.copy()
    Xnan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        amp.gamp_rie(Xnan, data.y, ch, RHO)
    with pytest.raises(ValueError, match="S"):
        amp.gamp_rie(data.X, data.y, ch, RHO, S=np.eye(5))
    with pytest.raises(ValueError, match="init"):
        amp.gamp_rie(data.X, data.y, ch, RHO, init=np.eye(5))
    with pytest.raises(TypeError, match="channel"):
        amp.gamp_rie(data.X, data.y, "linear", RHO)
    with pytest.raises(ValueError, match="d"):
        amp.run_amp("linear", 2, RHO, 0.05, 1, 0)
    with pytest.raises(ValueError, match="channel"):
        amp.run_amp("nonsense", 2, RHO, 0.05, 20, 0)


# ----------------------------------------------------------------------------- divergence
class _Poisoned(channels.Linear):
    """A linear channel whose g_out starts returning NaN after a few calls."""

    def __init__(self, after, value=np.nan):
        super().__init__(noise=0.5)
        self.calls, self.after, self.value = 0, after, value

    def g_out(self, y, omega, V):
        self.calls += 1
        g = super().g_out(y, omega, V)
        return g * self.value if self.calls > self.after else g


def test_nan_from_channel_raises(small):
    _, data = small
    with pytest.raises(ConvergenceError, match="iteration 3.*non-finite"):
        amp.gamp_rie(data.X, data.y, _Poisoned(after=2), RHO, chunk_size=data.n)


def test_overflow_raises_convergence_error(small):
    ch, data = small
    # outputs so large that g^2 overflows: must become a ConvergenceError, not NaN
    with pytest.raises(ConvergenceError, match="diverged"):
        amp.gamp_rie(data.X, data.y * 1e200, ch, RHO)


def test_inf_from_channel_raises(small):
    _, data = small
    with pytest.raises(ConvergenceError, match="iteration 2.*non-finite"):
        amp.gamp_rie(data.X, data.y, _Poisoned(after=1, value=np.inf), RHO, chunk_size=data.n)


def test_max_iter_policy(small):
    ch, data = small
    with pytest.raises(ConvergenceError, match="max_iter=2"):
        amp.gamp_rie(data.X, data.y, ch, RHO, max_iter=2, on_max_iter="raise")
    with pytest.raises(ConvergenceError, match="max_iter=2"):   # the default: not converged is an error
        amp.gamp_rie(data.X, data.y, ch, RHO, max_iter=2)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        r = amp.gamp_rie(data.X, data.y, ch, RHO, max_iter=2, on_max_iter="warn")
    assert not r.converged and r.reason == "max_iter" and r.iterations == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = amp.gamp_rie(data.X, data.y, ch, RHO, max_iter=2, on_max_iter="return")
    assert np.all(np.isfinite(r.S_hat))


def test_gamp_rie_with_the_gaussian_prior_lands_on_its_state_evolution():
    """The Gaussian prior (denoiser R/(1 + Delta), start 0): the SE is 1 - 4 alpha exactly; at d = 100 the
    run lands within TOL_SE of it (the finite-size allowance of this file's Wishart runs)."""
    prior, alpha = Gaussian(), 0.1
    rng = np.random.default_rng(0)
    S = prior.sample(D, rng)
    X = rng.standard_normal((round(alpha * D * D), 2, D))
    res = amp.gamp_rie(X, Softmax()(model.attention_indices(X, S)), Softmax(), prior, S=S)
    assert res.converged and abs(res.mmse - (1 - 4 * alpha)) < TOL_SE


def test_centred_prior_is_the_wishart_run_shifted():
    """Noiseless softmax: the outputs fix h(S) up to row constants, and h(S - c I) - h(S_hat - c I) = h(S) - h(S_hat),
    so GAMP-RIE with the centred prior on the centred teacher is the Wishart run shifted by sqrt(rho) I,
    iterate by iterate (an identity, checked to rounding)."""
    d, rho, alpha = 60, 0.5, 0.15
    rng = np.random.default_rng(1)
    S = Wishart(rho).sample(d, rng)
    X = rng.standard_normal((round(alpha * d * d), 2, d))
    shift = np.sqrt(rho) * np.eye(d)
    runs = [amp.gamp_rie(X, Softmax()(model.attention_indices(X, T)), Softmax(), prior, S=T, max_iter=40,
                         on_max_iter="return") for prior, T in ((Wishart(rho), S), (Centred(rho), S - shift))]
    assert runs[0].iterations == runs[1].iterations
    assert np.allclose(runs[1].S_hat + shift, runs[0].S_hat, atol=1e-9) and runs[0].m == pytest.approx(runs[1].m, 1e-9)
