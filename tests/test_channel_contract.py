"""The channel contract: the shipped check (aimlib.channels.check) on every channel, its power to fail,
and property tests (hypothesis) over random shapes and parameters."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimlib.channels import (CHANNELS, ConcatenatedSoftmax, DeepAttention, Hardmax, Linear, NoisySoftmax, Softmax,
                             UntiedSoftmax, fisher_mc, make_channel, sample_indices, sample_se_measure)
from aimlib.channels.check import check_channel

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def channel_cases(draw):
    """A channel with its parameters and a token count its Bayes side supports."""
    kind = draw(st.sampled_from(["softmax", "noisy-softmax", "hardmax", "linear"]))
    beta = draw(st.floats(0.1, 8.0))
    noise = draw(st.floats(0.02, 1.0))
    if kind == "softmax":
        return Softmax(beta=beta), draw(st.integers(2, 5))
    if kind == "noisy-softmax":
        return NoisySoftmax(beta=beta, noise=noise), 2
    if kind == "hardmax":
        return Hardmax(), 2
    return Linear(noise=draw(st.sampled_from([0.0, noise]))), draw(st.integers(2, 5))


@SETTINGS
@given(case=channel_cases(), n=st.integers(1, 6), var=st.floats(0.1, 3.0), seed=st.integers(0, 2**16))
def test_forward_map_shape_and_range(case, n, var, seed):
    ch, T = case
    y = ch(sample_indices(n, T, var, seed), seed=seed)
    assert y.shape == (n, T, T) and np.all(np.isfinite(y))
    if isinstance(ch, Softmax) and ch.noise == 0:
        assert np.allclose(y.sum(axis=-1), 1.0) and np.all(y > 0)
    if isinstance(ch, Hardmax):
        assert np.all((y == 0) | (y == 1)) and np.all(y.sum(axis=-1) == 1)


@SETTINGS
@given(case=channel_cases(), n=st.integers(1, 5), q=st.floats(0.0, 1.2), seed=st.integers(0, 2**16))
def test_bayes_side_shapes_symmetry_and_finiteness(case, n, q, seed):
    ch, T = case
    Q0 = 1.5
    omega, _, y = sample_se_measure(ch, n, q, Q0, T, seed)
    V = Q0 - q
    g = ch.g_out(y, omega, V)
    logz = ch.log_partition(y, omega, V)
    assert g.shape == omega.shape and np.allclose(g, np.swapaxes(g, -1, -2))
    assert np.all(np.isfinite(g)) and logz.shape == (n,) and np.all(np.isfinite(logz))


@pytest.mark.slow
@SETTINGS
@given(case=channel_cases(), q1=st.floats(0.0, 1.0), dq=st.floats(0.05, 0.4))
def test_fisher_is_positive_and_grows_with_the_overlap(case, q1, dq):
    """More overlap, less fluctuation: every channel's F_out(q) is positive and increasing in q."""
    ch, T = case
    Q0 = 1.5
    F1, F2 = ch.fisher(q1, Q0, T), ch.fisher(q1 + dq, Q0, T)
    assert 0 < F1 < np.inf and F2 > F1 * (1 - 1e-3)


@SETTINGS
@given(name=st.sampled_from(["softmax", "hardmax", "linear"]), beta=st.floats(0.1, 10.0),
       noise=st.floats(0.0, 1.0))
def test_the_registry_builds_each_channel_once(name, beta, noise):
    params = {"noise": noise} | ({"beta": beta} if name == "softmax" else {})
    ch = make_channel(name, **params)
    assert make_channel(ch) is ch and ch.name == name and ch.noise == noise
    expected = (NoisySoftmax(beta, noise) if noise > 0 else Softmax(beta)) if name == "softmax" \
        else CHANNELS[name](noise=noise)
    assert ch == expected and hash(ch) == hash(expected)
    if name != "softmax":
        with pytest.raises(ValueError, match=f"beta is not a parameter of the {name} channel"):
            make_channel(name, beta=beta)
    with pytest.raises(TypeError, match="already an instance"):
        make_channel(ch, noise=noise)


@pytest.mark.parametrize("channel, T", [
    (Softmax(), 2), (Softmax(beta=2.0), 3), (Linear(), 3), (Linear(noise=0.3), 2), (Hardmax(), 2),
    (NoisySoftmax(beta=1.0, noise=0.1), 2), (DeepAttention(c=0.5), 2), (ConcatenatedSoftmax(3, beta=2.0), 3),
    (UntiedSoftmax(), 2), (UntiedSoftmax(beta=0.7), 3),
], ids=repr)
def test_every_channel_passes_the_shipped_check(channel, T):
    check_channel(channel, T)


class _GradientOff(Softmax):
    """g_out 10 % too large: no longer the gradient of log Z_out (and F_out no longer its mean square)."""

    def g_out(self, y, omega, V):
        return 1.1 * super().g_out(y, omega, V)


class _FisherOff(Linear):
    def fisher(self, q, Q0, T):
        return 0.9 * super().fisher(q, Q0, T)


class _SquareFisherTwice(UntiedSoftmax):
    """``F_s`` doubled: the replica conjugate ``2 alpha F_s`` passed off as ``F_s`` (the other convention)."""

    def fisher(self, q, Q0, T):
        return tuple(2 * F for F in super().fisher(q, Q0, T))


class _SquareGradientTransposed(UntiedSoftmax):
    """``g_out`` transposed: what a symmetric-index habit does to a square channel's gradient."""

    def g_out(self, y, omega, V):
        return np.swapaxes(super().g_out(y, omega, V), -1, -2)


@pytest.mark.parametrize("channel, match", [(_GradientOff(), "not the gradient"), (_FisherOff(), "Monte Carlo"),
                                            (_SquareFisherTwice(), "Monte Carlo"),
                                            (_SquareGradientTransposed(), "not the gradient")])
def test_the_check_catches_a_broken_channel(channel, match):
    with pytest.raises(AssertionError, match=match):
        check_channel(channel, 3 if channel.square else 2)


def test_a_square_channel_declares_two_sectors_and_their_index_covariance():
    """``C(V) = 2 V_A Pi_sym + 2 V_B Pi_anti`` is the covariance of its draws (and ``V Sigma`` for one sector);
    ``F_s = 2 E||Pi_s g||^2`` by Monte Carlo against the closed form."""
    ch, T, V = UntiedSoftmax(), 3, (0.3, 0.1)
    assert ch.square and ch.sectors == ("A", "B") and not Softmax().square
    draws = ch.sample_fluctuation(200_000, T, V, seed=1).reshape(-1, T * T)
    assert np.abs(draws.T @ draws / len(draws) - ch.index_fluctuation(V, T)).max() < 0.01   # MC: ~2e-3
    one = Softmax().sample_fluctuation(200_000, T, 0.4, seed=1).reshape(-1, T * T)
    assert np.abs(one.T @ one / len(one) - Softmax().index_fluctuation(0.4, T)).max() < 0.02
    F_mc, F = fisher_mc(ch, (0.2, 0.4), (0.5, 0.5), T, seed=2), ch.fisher((0.2, 0.4), (0.5, 0.5), T)
    assert F_mc == pytest.approx(F, rel=0.03)          # 40 000 samples: relative standard error ~1 %
    with pytest.raises(ValueError, match="one per sector"):
        ch.index_fluctuation(0.3, T)


@pytest.mark.parametrize("kw, exc, match", [({"q": 2.0}, ValueError, "q"), ({"n_mc": 10}, ValueError, "n_mc"),
                                            ({"T": 1}, ValueError, "T")])
def test_the_check_refuses_bad_inputs(kw, exc, match):
    with pytest.raises(exc, match=match):
        check_channel(Softmax(), **kw)
    with pytest.raises(TypeError, match="Channel"):
        check_channel("softmax")
