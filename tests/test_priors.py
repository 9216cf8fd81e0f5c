"""Priors (aimlib.priors): the shipped contract check, closed forms, and the check's power to fail."""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib import rmt
from aimlib.backend import to_host
from aimlib.model import sample_teacher
from aimlib.priors import Centred, Gaussian, Prior, Wishart, check_prior, make_prior, make_priors
from aimlib.channels import DeepAttention, Softmax


@pytest.mark.parametrize("prior", [Gaussian(), Gaussian(symmetric=False), Wishart(0.3), Wishart(1.0),
                                   Wishart(2.5), Centred(0.5)], ids=repr)
def test_contract(prior):
    check_prior(prior)


@pytest.mark.parametrize("rho, slope", [(0.25, 0.4375), (0.5, 0.75), (2.0, 1.0)])
def test_wishart_zero_slope_is_the_rank_fraction(rho, slope):
    """c0 = 2 rho - rho^2 (rho < 1), 1 beyond: the degrees of freedom of a rank-rho d symmetric matrix."""
    assert Wishart(rho).zero_slope() == pytest.approx(slope, rel=1e-6)


def test_wishart_is_the_rmt_mmse_and_rie():
    """The Wishart prior's Bayes side is aimlib.rmt's (one definition)."""
    p = Wishart(0.5)
    assert p.mmse(0.3) == rmt.mmse(0.3, 0.5)
    S = p.sample(60, 0)
    R = S + math.sqrt(0.3) * Gaussian().sample(60, 1)
    S_hat, V, V_ons = p.denoise(R, (0.3,))
    assert np.array_equal(S_hat, rmt.rie(R, 0.3, 0.5)) and V == V_ons == (rmt.mmse(0.3, 0.5),)


def test_wishart_sample_is_the_model_teacher():
    assert np.array_equal(Wishart(0.4).sample(30, 7), to_host(sample_teacher(30, 0.4, 7, backend="numpy")))


def test_centred_is_the_shifted_wishart():
    """Centring by the known mean sqrt(rho) I changes neither the draw's spread nor the MMSE."""
    c, w = Centred(0.5), Wishart(0.5)
    assert np.allclose(c.sample(40, 3) + math.sqrt(0.5) * np.eye(40), w.sample(40, 3))
    assert c.mmse(0.7) == w.mmse(0.7) and c.second_moment() == 1.0 and w.second_moment() == 1.5
    R = w.sample(40, 3) + 0.5 * Gaussian().sample(40, 4)
    shift = math.sqrt(0.5) * np.eye(40)
    assert np.allclose(c.denoise(R - shift, (0.25,))[0] + shift, w.denoise(R, (0.25,))[0])


def test_gaussian_closed_forms():
    g = Gaussian()
    assert g.mmse(0.5) == pytest.approx(1 / 3) and g.mmse(0.0) == 0.0 and g.mmse(math.inf) == 1.0
    sq = Gaussian(symmetric=False)
    assert sq.sector_mmse((2.0, 0.5)) == pytest.approx((1 / 3, 1 / 6))


def test_mmse_asymptotics_beyond_the_computed_range():
    """Below 1e-12 and above 1e12 the MMSE follows c Delta and 1 - c'/Delta, continuously."""
    p = Wishart(0.5)
    assert p.mmse(1e-14) == pytest.approx(p.mmse(1e-12) * 1e-2, rel=1e-12)
    assert 1.0 - p.mmse(1e14) == pytest.approx((1.0 - p.mmse(1e12)) * 1e-2, rel=1e-9)


def test_make_prior():
    assert make_prior(math.inf) == Gaussian() and make_prior(0.5) == Wishart(0.5)
    assert make_prior(0.5, "centred") == Centred(0.5)
    assert make_prior(Centred(0.2)) == Centred(0.2)
    assert make_priors(DeepAttention(c=0.5), (0.5, math.inf)) == (Wishart(0.5), Gaussian())
    assert make_priors(Softmax(), 0.3) == (Wishart(0.3),)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: make_prior(0.0), ValueError, "rho"),
    (lambda: make_prior(0.5, "uniform"), ValueError, "family"),
    (lambda: make_prior("wide"), TypeError, "rho"),
    (lambda: make_priors(DeepAttention(c=0.5), 0.5), ValueError, "2 width ratios"),
    (lambda: Gaussian(symmetric=1), TypeError, "symmetric"),
    (lambda: check_prior(0.5), TypeError, "Prior"),
    (lambda: check_prior(Wishart(0.5), d=5), ValueError, "d"),
    (lambda: check_prior(Wishart(0.5), deltas=(1.0, 0.5)), ValueError, "deltas"),
])
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


class _WrongMMSE(Wishart):
    """A prior whose claimed MMSE is 20 % too small: its denoiser no longer matches it."""

    def _mmse(self, delta):
        return 0.8 * super()._mmse(delta)


class _WrongSlope(Gaussian):
    def zero_slope(self):
        return 0.5


class _Unscaled(Wishart):
    """Draws twice too large: Q0 is wrong."""

    def sample(self, d, seed=None, **kw):
        return 2.0 * super().sample(d, seed, **kw)


@pytest.mark.parametrize("prior, match", [(_WrongMMSE(0.5), "measured error"), (_WrongSlope(), "zero_slope"),
                                          (_Unscaled(0.5), "Q0")])
def test_the_check_catches_a_broken_prior(prior, match):
    with pytest.raises(AssertionError, match=match):
        check_prior(prior)


def test_the_base_class_is_abstract():
    with pytest.raises(NotImplementedError):
        Prior().second_moment()
