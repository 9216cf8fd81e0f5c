"""Priors (aimlib.priors): the shipped contract check, closed forms, and the check's power to fail."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from aimlib.backend import to_host
from aimlib.model import sample_teacher
from aimlib.priors import Centred, Gaussian, Prior, Wishart, check_prior, make_prior, make_priors
from aimlib.amp import gamp_rie
from aimlib.channels import DeepAttention, Linear, Softmax


@pytest.mark.parametrize("prior", [Gaussian(), Gaussian(symmetric=False), Wishart(0.3), Wishart(1.0),
                                   Wishart(2.5), Centred(0.5)], ids=repr)
def test_contract(prior):
    check_prior(prior)


@pytest.mark.parametrize("rho, slope", [(0.25, 0.4375), (0.5, 0.75), (2.0, 1.0)])
def test_wishart_zero_slope_is_the_rank_fraction(rho, slope):
    """c0 = 2 rho - rho^2 (rho < 1), 1 beyond: the degrees of freedom of a rank-rho d symmetric matrix."""
    assert Wishart(rho).zero_slope() == pytest.approx(slope, rel=1e-6)


def _oracle_spectral_error(R, S) -> float:
    """The error of the best estimator with ``R``'s eigenvectors, ``sum_a (u_a^T S u_a) u_a u_a^T``, which knows
    ``S``: a rotation-invariant prior's posterior mean is a spectral estimator, so it attains this at large ``d``."""
    _, U = np.linalg.eigh(R)
    xi = np.einsum("ia,ij,ja->a", U, S, U)
    return float(np.sum(((U * xi) @ U.T - S) ** 2)) / S.shape[0]


def test_wishart_denoiser_attains_the_oracle_spectral_error():
    """The Wishart prior's denoiser (the RIE) against the oracle spectral estimator, which knows ``S``, and its
    predicted error against both: no formula of aimlib.rmt on the other side.  At ``d = 300`` the three agree
    to the finite-``d`` gap and fluctuation, ``O(1/d)`` relative, well within 5 %."""
    p, d, delta = Wishart(0.5), 300, 0.3
    S = p.sample(d, 0)
    R = S + math.sqrt(delta) * Gaussian().sample(d, 1)
    S_hat, V, V_ons = p.denoise(R, (delta,), noise=None)
    oracle, measured = _oracle_spectral_error(R, S), float(np.sum((S_hat - S) ** 2)) / d
    assert oracle <= measured <= 1.05 * oracle
    assert V[0] == V_ons[0] == p.mmse(delta) and V[0] == pytest.approx(oracle, rel=0.05)


def test_wishart_sample_is_the_model_teacher():
    """The same draw as the model's teacher (one seed, one teacher for GAMP and gradient descent), and of the
    law the prior states: rank ``r = rho d``, positive semi-definite, ``(1/d) Tr S = sqrt(rho)`` (exactly in
    expectation; ``r d`` squared Gaussians, relative spread ``sqrt(2/(r d))`` = 7 % here)."""
    S = Wishart(0.4).sample(30, 7)
    assert np.array_equal(S, to_host(sample_teacher(30, 0.4, 7, backend="numpy")))
    eig = np.linalg.eigvalsh(S)
    assert np.sum(eig > 1e-10) == 12 and eig.min() > -1e-10
    assert np.trace(S) / 30 == pytest.approx(math.sqrt(0.4), rel=0.25)


def test_centred_is_the_shifted_wishart():
    """Centring by the known mean sqrt(rho) I changes neither the draw's spread nor the MMSE: the centred
    prior's predicted error against the error measured on a draw (``d = 200``, within 5 %)."""
    c, w = Centred(0.5), Wishart(0.5)
    assert np.allclose(c.sample(40, 3) + math.sqrt(0.5) * np.eye(40), w.sample(40, 3))
    assert c.second_moment() == 1.0 and w.second_moment() == 1.5
    S = c.sample(200, 5)
    S_hat, V, _ = c.denoise(S + math.sqrt(0.7) * Gaussian().sample(200, 6), (0.7,), noise=None)
    assert float(np.sum((S_hat - S) ** 2)) / 200 == pytest.approx(V[0], rel=0.05)
    assert V[0] == pytest.approx(c.mmse(0.7), rel=1e-12)
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


class _NoNoiseKeyword(Gaussian):
    """``denoise(R, deltas)`` as the base class once declared it: GAMP-RIE passes ``noise=`` and fails."""

    def denoise(self, R, deltas):
        return super().denoise(R, deltas)


@pytest.mark.parametrize("prior, match", [(_WrongMMSE(0.5), "measured error"), (_WrongSlope(), "zero_slope"),
                                          (_Unscaled(0.5), "Q0"), (_NoNoiseKeyword(), "as GAMP-RIE calls it")])
def test_the_check_catches_a_broken_prior(prior, match):
    with pytest.raises(AssertionError, match=match):
        check_prior(prior)


def test_a_prior_written_to_the_base_class_runs_in_gamp_rie():
    """The base class's ``denoise`` signature is the one GAMP-RIE calls: a prior that copies it and passes
    ``check_prior`` runs (a few iterations of the linear channel, no TypeError)."""
    assert "noise" in inspect.signature(Prior.denoise).parameters

    class Copied(Gaussian):
        def denoise(self, R, deltas, noise=None):
            return super().denoise(R, deltas, noise)

    check_prior(Copied())
    rng = np.random.default_rng(0)
    S = Gaussian().sample(20, rng)
    X = rng.standard_normal((200, 2, 20))
    y = Linear().clean(np.einsum("nai,ij,nbj->nab", X, S, X) / math.sqrt(20))
    res = gamp_rie(X, y, Linear(), Copied(), max_iter=3, on_max_iter="return")
    assert res.iterations >= 1


def test_the_base_class_is_abstract():
    with pytest.raises(NotImplementedError):
        Prior().second_moment()
