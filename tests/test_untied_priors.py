"""The square priors of untied key and query (:class:`aimlib.priors.Rectangular`, :class:`aimlib.priors.Sampled`),
the untied softmax channel (:class:`aimlib.channels.UntiedSoftmax`) and GAMP's square channel step."""
import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from aimlib import untied as u
from aimlib.channels import untied_softmax as usm
from aimlib.priors import rectangular as pr
from aimlib.rmt import rectangular as rr
from aimlib.amp.square_step import square_channel_step, square_noises
from aimlib.channels import UntiedSoftmax
from aimlib.index_map import IndexMap
from aimlib.channels.base import sector_projectors
from aimlib.errors import ConvergenceError
from aimlib.priors import Gaussian, Rectangular, Sampled, check_prior, make_prior
from aimlib.state_evolution import fixed_point

# ------------------------------------------------------------------ priors


@pytest.mark.parametrize("denoiser", ["equalised", "tuned"])
def test_rectangular_prior_keeps_the_contract(denoiser):
    check_prior(Rectangular(0.5, denoiser, seed=0), seed=0)


def test_sampled_prior_keeps_the_contract():
    """At ``d = 60`` (the chain is slow): the finite-``d`` checks hold to ``O(1/sqrt(d))``, within the 10 %
    of ``check_prior`` here (at ``d = 40`` one instance in six misses it).  The two-noise MMSE itself, which
    ``check_prior`` does not reach, is checked in ``tests/test_untied_posterior.py``."""
    check_prior(Sampled(0.5, seed=0), d=60, seed=0)


@pytest.mark.parametrize("rho", [0.5, math.inf])
def test_teacher_is_the_prior_draw(rho):
    """``sample_teacher_untied`` is the prior's draw, bit for bit (one seed, one teacher), of the stated law:
    rank ``r = rho d`` (full for ``inf``, the square Gaussian prior), ``(1/d)||S||^2 -> 1``, half of it in the
    symmetric part (at ``d = 40`` both within 15 %: spreads of about 5 and 7 % over seeds)."""
    prior = make_prior(rho, "rectangular")
    assert not prior.symmetric and prior.sectors == ("A", "B") and prior.sector_moments() == (0.5, 0.5)
    S = prior.sample(40, 3)
    assert np.array_equal(S, u.sample_teacher_untied(40, rho, 3))
    assert np.linalg.matrix_rank(S) == (20 if rho == 0.5 else 40)
    assert np.sum(S**2) / 40 == pytest.approx(1.0, rel=0.15)
    assert np.sum(((S + S.T) / 2) ** 2) / 40 == pytest.approx(0.5, rel=0.15)
    assert make_prior(rho, "sampled").sample(40, 3).shape == (40, 40)
    assert make_prior(math.inf).symmetric                    # the tied families keep the GOE


def test_the_tuned_denoiser_has_a_state_evolution_at_equal_noises_only():
    """At equal noises both denoisers are the rectangular RIE of ``R`` (error ``mmse_rect``, half per part); at
    unequal ones the tuned denoiser has no formula and says so, instead of the equalised one's error."""
    tuned, m = Rectangular(0.5, "tuned"), rr.mmse_rect(0.4, 0.5)
    assert tuned.sector_mmse((0.4, 0.4)) == pytest.approx((m / 2, m / 2), rel=1e-12)
    assert tuned.sector_mmse((math.inf, math.inf)) == (0.5, 0.5)
    with pytest.raises(NotImplementedError, match="tuned denoiser has no state evolution"):
        tuned.sector_mmse((0.2, 0.7))


def test_rectangular_sector_mmse_is_the_equalised_closure():
    """Both parts at the larger noise, and the generic SE with it lands on the upper bracket."""
    prior = Rectangular(0.5)
    m = rr.mmse_rect(0.7, 0.5)
    assert prior.sector_mmse((0.2, 0.7)) == pytest.approx((m / 2, m / 2), rel=1e-12)
    assert prior.sector_mmse((math.inf, math.inf)) == (0.5, 0.5)
    assert prior.zero_slope() == pytest.approx(u.unknowns_fraction(0.5)) == 0.75
    for alpha, T in ((0.1, 2), (0.3, 2), (0.05, 3)):
        assert sum(u.solve_sectors(alpha, T, prior)) == pytest.approx(u.bracket_untied(alpha, T, 0.5)[1], rel=1e-8)
    se = fixed_point(0.2, UntiedSoftmax(), T=2, rho=prior, damping=0.5, tol=1e-13)
    assert se.mmse[0] == pytest.approx(se.mmse[1]) and sum(se.mmse) == pytest.approx(u.bracket_untied(0.2, 2, 0.5)[1])


def test_equaliser_is_drawn_once_and_the_denoisers_validate():
    d, rho = 30, 0.5
    S, R = u.sample_denoising_untied(d, rho, 0.3, seed=1)
    prior = Rectangular(rho, seed=2)
    first, again = prior.denoise(R, (0.1, 0.3)), prior.denoise(R, (0.1, 0.3))
    assert np.array_equal(first[0], again[0])                          # the same Ginibre matrix
    Z = np.random.default_rng(2).standard_normal((d, d)) / math.sqrt(d)
    assert np.array_equal(first[0], pr.rect_prior_step(R, (0.1, 0.3), Z, rho)[0])
    with pytest.raises(ValueError, match="denoiser"):
        Rectangular(rho, "bayes")
    with pytest.raises(ValueError, match="deltas must be a pair"):
        prior.denoise(R, (0.3,))
    with pytest.raises(ValueError, match=r"deltas\[1\]"):
        prior.denoise(R, (0.3, -0.1))
    sampled = Sampled(rho)
    assert sampled.sector_mmse((0.3, 0.3)) == prior.sector_mmse((0.3, 0.3))
    with pytest.raises(NotImplementedError, match="sample_two_noise"):
        sampled.sector_mmse((0.3, 0.5))


def test_seeded_priors_draw_from_the_seed_and_keep_their_settings():
    """``seeded`` gives a fresh prior of the same law whose denoiser's draws come from the seed: two copies seeded
    alike denoise alike, bit for bit (the equaliser; the chain), other seeds differ; a denoiser that draws nothing
    is its own seeded copy."""
    d, rho = 20, 0.5
    S, R = u.sample_denoising_untied(d, rho, 0.3, seed=1)
    for prior in (Rectangular(rho, seed=9), Rectangular(rho, "tuned"), Sampled(rho, n_steps=40, warmup=0.25)):
        a, b, c = prior.seeded(4), prior.seeded(4), prior.seeded(5)
        assert repr(a) == repr(prior) and a is not prior
        Fa, Fb, Fc = (p.denoise(R, (0.2, 0.4))[0] for p in (a, b, c))
        assert np.array_equal(Fa, Fb)
        assert np.array_equal(Fa, Fc) == (prior.denoiser == "tuned" if isinstance(prior, Rectangular) else False)
    gauss = make_prior(math.inf, "rectangular")
    assert gauss.seeded(3) is gauss


# ------------------------------------------------------------------ channel


@pytest.mark.parametrize("T", [2, 3, 4])
def test_fisher_is_the_noise_of_the_parts(T):
    """``Delta_s = 1/(alpha F_s)`` is GAMP's ``1/(2 alpha Tr(Gamma Pi_s))`` and ``2/qhat_s``; with the square
    Gaussian prior it gives the sector errors ``1/(2 + qhat_s)``."""
    ch, alpha = UntiedSoftmax(), 0.7
    for VA, VB in ((0.3, 0.1), (0.05, 0.4), (0.5, 0.5)):
        F = ch.fisher((0.5 - VA, 0.5 - VB), (0.5, 0.5), T)
        deltas = tuple(1 / (alpha * f) for f in F)
        assert deltas == pytest.approx(usm.sector_deltas(usm.channel_matrices(VA, VB, T)[1], T, alpha), rel=1e-12)
        assert deltas == pytest.approx(ch.sector_noises((0.5 - VA, 0.5 - VB), (0.5, 0.5), T, alpha), rel=1e-12)
        assert Gaussian(symmetric=False).sector_mmse(deltas) == pytest.approx(tuple(0.5 / (1 + alpha * f) for f in F))
    kA, kB = u.measurements_per_sample(T) + T - 1, (T - 1) ** 2
    assert ch.fisher((0.3, 0.3), (0.5, 0.5), T) == pytest.approx((kA / 0.4, kB / 0.4))
    assert ch.fisher((0.5, 0.2), (0.5, 0.5), T)[0] == math.inf


def test_g_out_is_the_gradient_of_log_partition():
    T, V, ch = 3, (0.2, 0.45), UntiedSoftmax(beta=1.5)
    rng = np.random.default_rng(0)
    y = ch(rng.standard_normal((4, T, T)))
    omega = rng.standard_normal((4, T, T))
    g, eps = ch.g_out(y, omega, V), 1e-6
    for a, b in ((0, 0), (0, 2), (2, 1)):
        E = np.zeros((T, T))
        E[a, b] = eps
        fd = (ch.log_partition(y, omega + E, V) - ch.log_partition(y, omega - E, V)) / (2 * eps)
        assert fd == pytest.approx(g[:, a, b], rel=1e-6, abs=1e-8)
    F = ch.fisher((0.5 - V[0], 0.5 - V[1]), (0.5, 0.5), T)
    _, Gamma = usm.channel_matrices(*V, T)
    P = sector_projectors(T)[0]
    assert F == pytest.approx((2 * np.sum(Gamma * P), 2 * np.sum(Gamma * (np.eye(T * T) - P))))
    psi = ch.output_free_entropy((0.5 - V[0], 0.5 - V[1]), (0.5, 0.5), T)
    assert psi == pytest.approx(usm.sector_free_entropy(*V, T))


def test_channel_forward_map_and_bad_inputs():
    S = u.sample_teacher_untied(16, 0.5, seed=1)
    X = np.random.default_rng(2).standard_normal((5, 3, 16))
    ch = UntiedSoftmax(2.0)
    assert np.allclose(ch(u.untied_indices(X, S)), u.untied_softmax(X, S, beta=2.0))
    y = ch(u.untied_indices(X, S))
    assert np.allclose(ch.logits(y) - u.untied_indices(X, S), (ch.logits(y) - u.untied_indices(X, S))[..., :1])
    with pytest.raises(ValueError, match="softmax outputs"):
        ch.logits(2 * y)
    with pytest.raises(ValueError, match="V must be a pair"):
        ch.g_out(y, np.zeros_like(y), 0.3)
    with pytest.raises(ValueError, match=r"q\[1\]"):
        ch.fisher((0.1, 0.7), (0.5, 0.5), 2)
    with pytest.raises(ValueError, match="beta"):
        UntiedSoftmax(-1.0)


# ------------------------------------------------------------------ GAMP's square channel step


def test_square_step_does_not_depend_on_the_chunks():
    """The channel step in one chunk and in chunks of 7 samples: the same noises, ``R`` and measured noise."""
    d, T, n = 14, 3, 40
    rng = np.random.default_rng(0)
    S = u.sample_teacher_untied(d, 0.5, rng)
    X = rng.standard_normal((n, T, d))
    y = u.untied_softmax(X, S)
    g_prev = 0.1 * rng.standard_normal((n, 1, T, T))
    S_hat = 0.5 * S + 0.1 * rng.standard_normal((d, d))
    out = []
    for chunk in (n, 7):
        p = SimpleNamespace(xp=np, X=X, y=y, channel=UntiedSoftmax(), priors=[Rectangular(0.5)], n=n, T=T, d=d,
                            dtype=X.dtype, chunk_size=chunk, damping=0.5, damp_g=True,
                            index=IndexMap(X, square=True, chunk_size=chunk))
        g_new = np.empty_like(g_prev)
        out.append((square_channel_step(p, [S_hat], [(0.2, 0.3)], [(0.15, 0.25)], g_prev, g_new, 2), g_new))
    ((deltas, R, noise, cov), g), ((deltas7, R7, noise7, cov7), g7) = out
    assert cov is None and cov7 is None      # one layer: no covariance between layers
    assert deltas == deltas7 and np.allclose(R[0], R7[0], atol=1e-12) and np.allclose(g, g7, atol=1e-12)
    assert noise[0] == pytest.approx(noise7[0], rel=1e-12)


@pytest.mark.parametrize("T", [2, 3])
def test_square_step_noises_are_gamps_derivative(T):
    """The square step's ``Delta_s`` (the contract's ``sector_noises`` at ``q = Q0 - V``) is GAMP's own
    ``1/(2 alpha Tr(Gamma Pi_s))``, ``Gamma = -dg/domega`` (an independent route: the matrices of ``g_out``),
    also where a damped run's first iterates predict errors above the prior's sector moments (0.5 each)."""
    p = SimpleNamespace(channel=UntiedSoftmax(), priors=[Rectangular(0.5)], T=T, n=90, d=12)
    for V in ((0.3, 0.1), (0.05, 0.4), (0.5, 0.5), (1e-3, 2e-3), (0.6, 0.1), (0.35, 0.52)):
        Gamma = usm.channel_matrices(*V, T)[1]
        assert square_noises(p, V) == pytest.approx(usm.sector_deltas(Gamma, T, 90 / 144), rel=1e-12)


def test_untied_gamp_follows_the_rule_at_the_cap():
    """At ``max_iter`` the rule of :mod:`aimlib.errors`: raise, warn or return, flagged ``converged=False``."""
    rng = np.random.default_rng(0)
    S = u.sample_teacher_untied(12, 0.5, rng)
    X = rng.standard_normal((30, 2, 12))
    y = u.untied_softmax(X, S)
    with pytest.raises(ConvergenceError, match="max_iter=2"):
        u.untied_gamp(X, y, math.inf, max_iter=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = u.untied_gamp(X, y, math.inf, max_iter=2, on_max_iter="warn")
    assert not r.converged and r.reason == "max_iter" and caught
    with pytest.raises(ValueError, match="on_max_iter"):
        u.untied_gamp(X, y, math.inf, on_max_iter="ignore")
