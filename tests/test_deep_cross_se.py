"""The state evolution of two-layer GAMP-RIE with the cross overlap and the mixing
(aimlib.state_evolution.cross_fixed_point): its first-order prior side against measured RIEs, its
reduction to the separable state evolution, and its refusals."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.errors import ConvergenceError
from aimlib.priors import Centred, Gaussian, Wishart
from aimlib.priors.correlated import cross_residual, measure_cross_residual
from aimlib.state_evolution.cross_fixed_point import (ChannelSide, cross_fixed_point, monte_carlo_side,
                                                      separable_side)

CH = DeepAttention(0.5)
WISHART = (Wishart(0.5), Wishart(0.5))


def _paired(priors, deltas, kappa, d, seeds, **parts):
    """Measured ``e_12`` with the planted parts minus the same instances without them (the instances'
    own scatter cancels), and the same instances' ``e_12`` with them."""
    with_parts = [measure_cross_residual(priors, deltas, kappa, d, s, **parts)["e_12"] for s in seeds]
    without = [measure_cross_residual(priors, deltas, kappa, d, s)["e_12"] for s in seeds]
    return np.subtract(with_parts, without), np.array(with_parts)


def test_gaussian_teachers_the_first_order_with_mixing_is_exact():
    """Linear denoisers: ``e_12 = mmse_1 mmse_2 (kappa/sqrt(D1 D2) - a_12/D1 - a_21/D2)`` holds with no
    higher order, so two RIEs at ``d = 400`` meet it within their sampling error."""
    deltas, kappa, mixing = (0.8, 0.5), -0.4, (0.3, 0.2)
    _, e = _paired((Gaussian(), Gaussian()), deltas, kappa, 400, range(4), mixing=mixing)
    m = [x / (1 + x) for x in deltas]
    exact = cross_residual(m, deltas, kappa, mixing)
    assert abs(exact - cross_residual(m, deltas, kappa)) > 0.05            # the mixing matters here
    assert abs(e.mean() - exact) < 4 * e.std(ddof=1) / 2 + 2e-3


def test_wishart_teachers_mixing_enters_through_the_mean_jacobian():
    """Wishart teachers at the alpha = 0.5 fixed point's noises (d = 500): planted parts ``a_lk C_k`` move
    ``e_12`` by ``-mmse_1 mmse_2 (a_12/D1 + a_21/D2)`` within 8 % (the next order), while a part of the
    other layer's centred estimate (the memory) moves it by under a tenth of that."""
    deltas, kappa = (2.80, 1.22), -0.136
    m = [p.mmse(x) for p, x in zip(WISHART, deltas)]
    shift, _ = _paired(WISHART, deltas, kappa, 500, range(3), mixing=(0.05, 0.03))
    predicted = cross_residual(m, deltas, kappa, (0.05, 0.03)) - cross_residual(m, deltas, kappa)
    assert predicted < -0.01
    assert abs(shift.mean() / predicted - 1) < 0.08
    memory, _ = _paired(WISHART, deltas, kappa, 500, range(3), memory=(0.05, 0.03))
    assert abs(memory.mean()) < 0.1 * abs(predicted)


@pytest.mark.parametrize("alpha", [0.3, 1.0])
def test_without_cross_terms_it_is_the_separable_state_evolution(alpha):
    """With the channel side at ``e_12 = 0`` and the mixing ``I`` the iteration lands on the separable fixed
    point, and its ``e_12`` on the first-order cross overlap there."""
    fp = se.fixed_point(alpha, CH, T=2, rho=WISHART, tol=1e-12)
    first = se.cross_overlap(alpha, fp.q, fp.mmse, CH, WISHART).q_12
    x = cross_fixed_point(alpha, CH, WISHART, (1.0, 1.0, 0.0), side=separable_side(CH, (0.5, 0.5)), tol=1e-11,
                          max_iter=5000, damping=0.0, further=2)
    assert np.allclose(x.mmse, fp.mmse, atol=1e-8)
    assert x.e_12 == pytest.approx(first, abs=1e-8)
    assert np.array_equal(x.mixing, np.eye(2))


def test_centred_teachers_monte_carlo_side_keeps_the_separable_errors():
    """Centred teachers have ``F_12 = 0`` exactly: the Monte Carlo channel side leaves ``kappa``, the mixing and
    ``e_12`` at zero within their draws' error, and the errors at the (Bayes) separable fixed point."""
    centred = (Centred(0.5), Centred(0.5))
    fp = se.fixed_point(1.0, CH, T=2, rho=centred, tol=1e-12)
    side = monte_carlo_side(CH, (0.0, 0.0), n=20_000, seed=1)
    x = cross_fixed_point(1.0, CH, centred, (*fp.mmse, 0.0), side=side, tol=2e-3, max_iter=40, further=2)
    assert np.allclose(x.mmse, fp.mmse, atol=0.02)
    se_12, se_21 = x.mixing_se[0, 1], x.mixing_se[1, 0]
    spread = x.mmse[0] * x.mmse[1] * np.hypot(se_12 / x.deltas[0], se_21 / x.deltas[1])
    assert abs(x.kappa) < 0.05 and abs(x.e_12) < 5 * spread + 1e-3
    assert np.all(np.abs(x.mixing[[0, 1], [1, 0]]) < 5 * np.array([se_12, se_21]) + 0.01)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="kappa"):
        cross_residual((0.5, 0.5), (1.0, 1.0), 1.0, (0.1, 0.1))
    with pytest.raises(ValueError, match="mixing"):
        cross_residual((0.5, 0.5), (1.0, 1.0), 0.1, (0.1,))
    with pytest.raises(ValueError, match="alpha"):
        cross_fixed_point(0.0, CH, WISHART, (0.5, 0.5, 0.0), side=separable_side(CH, (0.5, 0.5)))
    with pytest.raises(ValueError, match="two layers"):
        cross_fixed_point(0.5, DeepAttention(0.5, layers=3), (Centred(0.5),) * 3, (0.5, 0.5, 0.0))
    with pytest.raises(ValueError, match=r"init\[0\]"):
        cross_fixed_point(0.5, CH, WISHART, (1.2, 0.5, 0.0), side=separable_side(CH, (0.5, 0.5)))

    def singular(q, Q0, e_12):
        return ChannelSide(np.ones((2, 2)), np.eye(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="singular"):
        cross_fixed_point(0.5, CH, WISHART, (0.5, 0.5, 0.0), side=singular)
    with pytest.raises(ConvergenceError, match="did not converge"):
        cross_fixed_point(0.5, CH, WISHART, (1.0, 1.0, 0.0), side=separable_side(CH, (0.5, 0.5)), max_iter=2)
