"""Output channels: shapes, invariances, limits, noise, bad inputs."""
import numpy as np
import pytest

from aimlib import channels, model
from aimlib.channels import registry
from aimlib.channels.base import fisher_mc
from aimlib.backend import to_host, to_device


@pytest.fixture
def h(xp):
    rng = np.random.default_rng(0)
    S = model.sample_teacher(40, 0.5, rng)
    return to_device(model.attention_indices(model.sample_tokens(200, 4, 40, rng), S), xp)


def test_softmax_rows_are_distributions(h):
    y = to_host(channels.Softmax(beta=1.5)(h))
    assert y.shape == h.shape
    assert (y > 0).all()
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-13)


def test_softmax_is_invariant_to_row_shifts(h, xp):
    sm = channels.Softmax(beta=2.0)
    shift = xp.asarray(np.random.default_rng(1).normal(size=(h.shape[0], h.shape[1], 1)))
    np.testing.assert_allclose(to_host(sm(h + shift)), to_host(sm(h)), atol=1e-13)


def test_softmax_matches_direct_formula(h):
    hh = to_host(h)
    e = np.exp(0.7 * hh)
    np.testing.assert_allclose(to_host(channels.Softmax(beta=0.7)(h)), e / e.sum(-1, keepdims=True), rtol=1e-12)


def test_softmax_is_stable_for_huge_beta(h):
    y = to_host(channels.Softmax(beta=1e6)(h))
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, to_host(channels.Hardmax()(h)), atol=1e-8)


def test_hardmax_is_one_hot_at_argmax(h):
    y = to_host(channels.Hardmax()(h))
    assert set(np.unique(y)) == {0.0, 1.0}
    np.testing.assert_array_equal(y.sum(-1), 1.0)
    np.testing.assert_array_equal(y.argmax(-1), to_host(h).argmax(-1))


def test_linear_is_identity_and_copies(h):
    y = channels.Linear()(h)
    np.testing.assert_array_equal(to_host(y), to_host(h))
    assert y is not h


def test_label_noise_has_the_stated_variance(h):
    ch = channels.Linear(noise=0.25)
    resid = to_host(ch(h, seed=3)) - to_host(h)
    # 3200 i.i.d. noise entries: the sample variance has relative standard error sqrt(2/3200) = 2.5 %, so
    # 0.05 is only 2 of them; the seed is fixed (observed +1.1 %)
    assert resid.var() == pytest.approx(0.25, rel=0.05)
    np.testing.assert_array_equal(to_host(ch(h, seed=3)), to_host(ch(h, seed=3)))


def test_make_channel_and_equality():
    assert channels.make_channel("softmax", beta=2.0) == channels.Softmax(beta=2.0)
    assert channels.make_channel("hardmax") != channels.make_channel("linear")
    assert "beta=2" in repr(channels.Softmax(beta=2.0))
    assert len({channels.Softmax(beta=2.0), channels.Softmax(beta=2.0)}) == 1


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: channels.Softmax(beta=0.0), ValueError, r"beta must be in \(0, 1e\+30\]"),
        (lambda: channels.Softmax(beta=-1.0), ValueError, r"beta must be in \(0, 1e\+30\]"),
            (lambda: channels.Softmax(beta=1e308), ValueError, r"beta must be in \(0, 1e\+30\]"),
        (lambda: channels.Linear(noise=-0.1), ValueError, "noise must be >= 0"),
        (lambda: channels.Hardmax(noise=float("inf")), ValueError, "noise must be finite"),
        (lambda: channels.make_channel("relu"), ValueError, "channel must be one of"),
        (lambda: channels.Softmax()(np.ones((2, 3))), ValueError, "h must have 3 dimensions"),
        (lambda: channels.Softmax()(np.ones((2, 3, 2))), ValueError, r"h must have shape \(n, T, T\)"),
        (lambda: channels.Softmax()(np.array([[[np.inf, 0], [0, 0]]])), ValueError, "h must contain only finite"),
    ],
)
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_one_k_per_channel():
    """``k`` with ``F_out = k/V``: ``softmax_k`` for the softmax, ``T(T+1)`` noiseless linear, else ``None``.
    The softmax's ``k`` against ``F_out``'s Monte Carlo definition (:func:`aimlib.channels.base.fisher_mc`,
    2e4 draws: about 1 % relative error, 3 % allowed) at two ``beta``."""
    for T in (1, 2, 3, 7):
        assert channels.softmax_k(T) == T * T + T - 2
        assert channels.Linear().linear_k(T) == T * (T + 1)
    for T, beta in ((2, 2.5), (3, 0.5)):
        ch, V = channels.Softmax(beta=beta), 0.9
        assert ch.linear_k(T) == T * T + T - 2
        assert fisher_mc(ch, 1.5 - V, 1.5, T, n=20_000, seed=1) * V == pytest.approx(ch.linear_k(T), rel=0.03)
    for ch in (channels.NoisySoftmax(noise=0.1), channels.Linear(noise=0.1), channels.Hardmax(),
               channels.DeepAttention()):
        assert ch.linear_k(2) is None
    with pytest.raises(ValueError, match="T must be >= 1"):
        channels.softmax_k(0)


def test_registry_lists_every_channel_once():
    assert set(registry.PARAMETERS) == set(registry.CHANNELS)
    assert set(registry.MAX_T) <= set(registry.CHANNELS)
    for name in registry.CHANNELS:
        assert isinstance(channels.make_channel(name), registry.CHANNELS[name])
