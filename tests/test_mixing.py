"""MCMC diagnostics (integrated autocorrelation time, effective sample size) and the mixing of the
two-noise posterior chain: a planted start against a start from a fresh prior draw."""
import math

import numpy as np
import pytest
from scipy.signal import lfilter

from aimlib import untied as u
from aimlib.priors.diagnostics import (MIN_LENGTH, autocorrelation, effective_sample_size,
                                       integrated_autocorrelation_time, potential_scale_reduction)


def _ar1(phi, n, columns, seed):
    """``columns`` AR(1) series ``x_{i+1} = phi x_i + e_i`` of length ``n``, started in equilibrium."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n, columns))
    e[0] /= math.sqrt(1 - phi * phi)
    return lfilter([1.0], [1.0, -phi], e, axis=0)


@pytest.mark.parametrize("phi", [0.5, 0.8])
def test_ar1_autocorrelation_time_is_the_closed_form(phi):
    """``tau = 1 + 2 sum_t phi^t = (1 + phi)/(1 - phi)``; estimators that drop the factor 2, the leading 1 or
    the tail (``1 + 2 phi``) miss it by 10 % or more."""
    x = _ar1(phi, 100_000, 4, seed=0)
    exact = (1 + phi) / (1 - phi)
    tau = integrated_autocorrelation_time(x)
    assert tau.shape == (4,)
    assert np.all(np.abs(tau / exact - 1) < 0.08)
    assert tau.mean() == pytest.approx(exact, rel=0.04)
    assert effective_sample_size(x) == pytest.approx(100_000 / tau, rel=1e-12)
    assert autocorrelation(x)[:4, 0] == pytest.approx(phi ** np.arange(4), abs=0.02)


def test_independent_draws_have_tau_one_and_full_sample_size():
    x = np.random.default_rng(1).standard_normal(50_000)
    tau = integrated_autocorrelation_time(x)
    assert isinstance(tau, float) and tau == pytest.approx(1.0, abs=0.06)
    assert effective_sample_size(x) == pytest.approx(50_000, rel=0.06)


def test_anticorrelated_series_is_not_cut_after_one_term():
    """``phi = -0.5``: ``tau = 1/3`` (an ESS above ``n``), while the first partial sum ``1 + 2 rho(1)`` is 0."""
    tau = integrated_autocorrelation_time(_ar1(-0.5, 100_000, 2, seed=2))
    assert tau == pytest.approx([1 / 3, 1 / 3], abs=0.04)


def test_a_series_shorter_than_its_window_and_a_constant_one():
    """A slow chain seen briefly gives an underestimate, never an error; a constant column has no tau."""
    slow = _ar1(0.99, 30, 1, seed=3)[:, 0]
    assert 0 < integrated_autocorrelation_time(slow) < 199
    tau = integrated_autocorrelation_time(np.column_stack([np.ones(20), np.arange(20.0) % 2]))
    assert math.isnan(tau[0]) and tau[1] < 1


def test_bad_inputs_to_the_diagnostics():
    with pytest.raises(ValueError, match=f"x must hold at least {MIN_LENGTH} draws"):
        integrated_autocorrelation_time(np.arange(MIN_LENGTH - 1.0))
    with pytest.raises(ValueError, match="x must contain only finite values"):
        effective_sample_size(np.r_[np.arange(20.0), np.nan])
    with pytest.raises(ValueError, match="x must be a 1-d series or a 2-d array"):
        integrated_autocorrelation_time(np.zeros((20, 2, 2)))
    with pytest.raises(ValueError, match="c must be > 0"):
        integrated_autocorrelation_time(np.arange(20.0), c=0)
    with pytest.raises(TypeError, match="x must be a real numeric array"):
        integrated_autocorrelation_time(np.array(["a"] * 20))


def test_potential_scale_reduction_is_its_closed_form_on_built_chains():
    """Half-chains ``m_j + z`` with ``z`` of mean 0 and variance 1 give ``W = 1``, ``B/N = var(m_j)``:
    ``R-hat = sqrt((N - 1)/N + var(m_j))``, each half seen separately (a drift within a chain
    counts); the middle draw of an odd chain is left out."""
    N = 25
    z = np.random.default_rng(4).standard_normal(N)
    z = (z - z.mean()) / z.std(ddof=1)
    means = np.array([[0.0, 0.5], [1.0, -0.5], [0.2, 0.3]])             # (chain, half)
    x = np.concatenate([means[:, 0][None] + z[:, None], means[:, 1][None] + z[:, None]])
    exact = math.sqrt((N - 1) / N + means.ravel().var(ddof=1))
    assert potential_scale_reduction(x) == pytest.approx(exact, rel=1e-12)
    assert potential_scale_reduction(5 * x - 3) == pytest.approx(exact, rel=1e-12)
    odd = np.vstack([x[:N], np.full((1, 3), 99.0), x[N:]])
    assert potential_scale_reduction(odd) == pytest.approx(exact, rel=1e-12)


def test_potential_scale_reduction_of_one_law_is_near_one_and_of_two_laws_is_not():
    rng = np.random.default_rng(5)
    assert potential_scale_reduction(rng.standard_normal((4000, 4))) == pytest.approx(1.0, abs=0.005)
    shifted = rng.standard_normal((4000, 2)) + np.array([0.0, 1.0])
    assert potential_scale_reduction(shifted) > 1.1
    assert potential_scale_reduction(np.ones((40, 2))) == 1.0
    assert potential_scale_reduction(np.column_stack([np.ones(40), 2 * np.ones(40)])) == math.inf
    with pytest.raises(ValueError, match="x must hold m >= 2 chains"):
        potential_scale_reduction(np.zeros((40, 1)))
    with pytest.raises(ValueError, match=f"at least {2 * MIN_LENGTH} draws"):
        potential_scale_reduction(np.zeros((2 * MIN_LENGTH - 1, 3)))


def test_prior_start_agrees_with_the_planted_start():
    """The same instance (same seed), sampled from the planted factors and from a fresh prior draw measured
    against the truth: the errors agree within the two chains' combined error bars, and the planted chain
    reports how many independent draws it held."""
    d, deltas, n_steps = 30, (0.2, 0.7), 600
    planted = u.sample_two_noise(d, 0.5, deltas, seed=0, n_steps=n_steps)
    prior = u.sample_two_noise(d, 0.5, deltas, seed=0, n_steps=n_steps, start="prior")
    assert (planted.start, prior.start) == ("planted", "prior")
    for s in range(2):
        assert abs(prior.errors[s] - planted.errors[s]) < 3 * math.hypot(prior.stderr[s], planted.stderr[s])
    kept = n_steps - int(0.3 * n_steps)
    for r in (planted, prior):
        assert all(1 <= t < 10 for t in r.tau)                  # a few trajectories
        assert all(e > 0 for e in r.ess)
        assert np.array(r.ess) * np.array(r.tau) == pytest.approx([kept, kept], rel=1e-12)


def test_planted_start_is_the_default_and_prior_start_reproducible():
    default = u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=5, n_steps=40)
    planted = u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=5, n_steps=40, start="planted")
    assert (default.errors, default.tau) == (planted.errors, planted.tau)
    a, b = (u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=5, n_steps=40, start="prior") for _ in range(2))
    assert a.errors == b.errors and a.errors != default.errors


def test_prior_start_on_the_device(strict_cupy):
    host, dev = (u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=5, n_steps=40, start="prior", backend=b)
                 for b in ("numpy", "cupy"))
    assert dev.errors == pytest.approx(host.errors, rel=1e-9)


def test_unknown_start_and_too_few_kept_draws_are_refused():
    with pytest.raises(ValueError, match=r"start must be one of \['planted', 'prior'\], got 'random'"):
        u.sample_two_noise(10, 0.5, (0.3, 0.3), start="random")
    with pytest.raises(ValueError, match="n_steps and warmup must keep at least 10 draws"):
        u.sample_two_noise(10, 0.5, (0.3, 0.3), n_steps=20, warmup=0.9)
