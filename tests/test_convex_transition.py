"""The crossing of a recovery probability (aimlib.convex.transition) on synthetic data whose answer is known."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.convex import extrapolate_crossing, transition_crossing


def _draws(rng, alpha, trials, centre=0.15, width=0.004):
    p = 1 / (1 + np.exp(-(alpha - centre) / width))
    return rng.binomial(trials, p)


def test_the_crossing_of_a_known_logistic_curve_is_found_within_its_error_bar():
    rng = np.random.default_rng(0)
    alpha = np.linspace(0.135, 0.165, 7)
    fit = transition_crossing(alpha, _draws(rng, alpha, 400), np.full(7, 400))
    assert abs(fit.alpha - 0.15) < 3 * fit.se and fit.se < 5e-4
    assert abs(fit.width - 0.004) < 0.001


def test_the_error_bar_covers_the_truth_as_often_as_it_should():
    """Eight trials per point, as in the book's runs: z-scores of 300 experiments ~ N(0, 1)."""
    rng = np.random.default_rng(1)
    alpha = 0.15 * np.array([0.8, 0.9, 1.0, 1.1, 1.2])
    z = []
    for _ in range(300):
        fit = transition_crossing(alpha, _draws(rng, alpha, 8, width=0.01), np.full(5, 8))
        z.append((fit.alpha - 0.15) / fit.se)
    z = np.array(z)
    assert abs(np.mean(z)) < 0.2 and 0.7 < np.std(z) < 1.3
    assert 0.88 < np.mean(np.abs(z) < 2) <= 1.0          # nominal 95 %


def test_a_separated_grid_gives_a_finite_crossing_between_the_last_failure_and_first_success():
    alpha, trials = np.array([0.8, 0.9, 1.0, 1.1]), np.full(4, 4)
    fit = transition_crossing(alpha, [0, 0, 4, 4], trials)
    assert fit.alpha == pytest.approx(0.95, abs=1e-9)    # the data are symmetric about 0.95
    assert 0 < fit.se < 0.1
    lopsided = transition_crossing(alpha, [0, 0, 1, 4], trials)
    assert 0.95 < lopsided.alpha < 1.1


@pytest.mark.parametrize("args, match", [
    (([0.1, 0.1], [0, 1], [2, 2]), "two distinct"),
    (([0.1, 0.2], [0, 3], [2, 2]), "successes"),
    (([0.1, 0.2], [0.5, 1], [2, 2]), "integers"),
    (([0.1, 0.2, 0.3], [0, 1], [2, 2]), "one shape"),
    (([0.1, 0.2, 0.3], [4, 2, 0], [4, 4, 4]), "does not increase"),
    (([0.1, 0.2, 0.3], [0, 0, 0], [4, 4, 4]), "bracket"),
    (([0.1, 0.2, 0.3], [1, 1, 1], [1, 1, 1]), "bracket"),
])
def test_bad_input_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        transition_crossing(*args)


def test_two_sizes_extrapolate_through_both_points_with_the_propagated_error():
    d, y, s = np.array([50.0, 100.0]), np.array([0.160, 0.155]), np.array([0.002, 0.003])
    fit = extrapolate_crossing(d, y, s)
    x = 1 / d
    limit = (x[1] * y[0] - x[0] * y[1]) / (x[1] - x[0])
    se = np.hypot(x[1] * s[0], x[0] * s[1]) / abs(x[1] - x[0])
    assert fit.limit == pytest.approx(limit) and fit.se == pytest.approx(se)
    assert fit.limit == pytest.approx(0.150) and fit.slope == pytest.approx(0.5)


def test_points_on_a_curve_in_one_over_sqrt_d_give_its_limit():
    d = np.array([50.0, 100.0, 200.0, 400.0])
    fit = extrapolate_crossing(d, 0.147 + 0.3 / np.sqrt(d), np.full(4, 1e-3), exponent=0.5)
    assert fit.limit == pytest.approx(0.147, abs=1e-12) and fit.slope == pytest.approx(0.3)
    with pytest.raises(ValueError, match="distinct positive"):
        extrapolate_crossing([50, 50], [0.1, 0.1], [1e-3, 1e-3])
    with pytest.raises(ValueError, match="se must be positive"):
        extrapolate_crossing([50, 100], [0.1, 0.1], [0, 1e-3])
