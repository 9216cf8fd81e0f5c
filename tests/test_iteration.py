"""The stopping rule of aimlib.iteration on sequences whose limit is known: geometric, two modes,
heavy damping, cycles, a drift that does not shrink, a power-law approach (issue 37, item 5)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib.iteration import WindowRule


def _run(xs, bound, window=10, atol=0.0, limit=0.0):
    """Feed the iterates ``xs`` (arrays) to a WindowRule; return ``(t, verdict, |x_t - limit|)`` at its stop."""
    rule, past = WindowRule(window, atol), []
    for t, x in enumerate(xs):
        x = np.atleast_1d(np.asarray(x, dtype=float))
        if past:
            back = [float(np.linalg.norm(x - p)) for p in reversed(past[-window:])]
            verdict = rule.update(back[0], bound, back)
            if verdict.state != "running":
                return t, verdict, float(np.linalg.norm(x - limit))
        past.append(x)
    return None, verdict, float(np.linalg.norm(x - limit))


def _sequence(f, n=20_000):
    return (f(t) for t in range(n))


@pytest.mark.parametrize("r", [0.5, 0.9, 0.99, 0.999])
def test_a_geometric_approach_stops_within_the_bound_with_the_distance_exact(r):
    t, verdict, left = _run(_sequence(lambda t: r ** t), bound=1e-6)
    assert verdict.converged and left <= 1e-6
    assert verdict.distance == pytest.approx(left, rel=1e-6) and verdict.rate == pytest.approx(r, rel=1e-9)
    assert left > 1e-6 * r ** 11      # and no more than a window past the first iterate within the bound


@pytest.mark.parametrize("a, b, B", [(0.3, 0.98, 1e-3), (0.5, 0.995, 1e-4), (0.1, 0.9, 1e-2), (0.6, 0.999, 1e-5)])
def test_a_slow_mode_under_a_fast_one_is_not_missed(a, b, B):
    """x_t = a^t + B b^t: the steps are the fast mode's at first; the stop is within the bound of 0."""
    bound = 1e-6
    t, verdict, left = _run(_sequence(lambda t: a ** t + B * b ** t), bound)
    assert verdict.converged and left <= bound, (t, left)
    step_rule = next(t for t in range(1, 20_000) if abs((a ** t + B * b ** t) - (a ** (t - 1) + B * b ** (t - 1)))
                     < bound)
    assert a ** step_rule + B * b ** step_rule > 5 * bound        # where "the step is small" stops, 5x outside


@pytest.mark.parametrize("damping", [0.9, 0.99, 0.999])
def test_heavy_damping_is_not_taken_for_convergence(damping):
    """x <- damping x + (1 - damping) F(x), F(x) = 0.5 x + 1 (fixed point 2), from x = 0."""
    def seq():
        x = np.zeros(3)
        while True:
            yield x
            x = damping * x + (1 - damping) * (0.5 * x + 1.0)
    t, verdict, left = _run(seq(), 1e-6, limit=2.0)
    assert verdict.converged and left <= 1e-6 and t > 10 / (1 - damping)


@pytest.mark.parametrize("period", [2, 3, 5])
def test_a_cycle_is_reported_with_its_period_and_amplitude(period):
    corners = np.random.default_rng(period).standard_normal((period, 4))
    t, verdict, _ = _run(_sequence(lambda t: corners[t % period] * (1 + 1e-9 * t)), 1e-6)
    assert verdict.state == "oscillating" and verdict.period == period and t <= 12
    diameter = max(np.linalg.norm(p - q) for p in corners for q in corners)
    assert verdict.amplitude == pytest.approx(diameter, rel=0.05) or verdict.amplitude <= diameter


def test_a_drift_that_does_not_shrink_never_stops():
    t, verdict, _ = _run(_sequence(lambda t: 1e-3 * t, n=5000), 1e-6)
    assert t is None and verdict.state == "running" and verdict.distance == math.inf


def test_a_damped_oscillation_converges():
    t, verdict, left = _run(_sequence(lambda t: (-0.8) ** t), 1e-8)
    assert verdict.converged and left <= 1e-8


def test_a_power_law_approach_is_underestimated_by_the_stated_factor():
    """x_t = 1/t: the estimate is about half the distance left, as the module docstring states."""
    rule = WindowRule(10)
    for t in range(1, 2000):
        verdict = rule.update(1 / t - 1 / (t + 1), 0.0)
    assert verdict.distance == pytest.approx(0.5 / 2000, rel=0.02)


def test_steps_at_the_rounding_level_are_converged_and_bad_steps_refused():
    assert WindowRule(10, atol=1e-12).update(1e-13, 1e-6).converged
    with pytest.raises(ValueError, match="step must be a distance >= 0"):
        WindowRule().update(math.nan, 1e-6)
    with pytest.raises(ValueError, match="window"):
        WindowRule(1)


def test_a_cycle_smaller_than_the_bound_is_a_floor_not_an_oscillation():
    corners = np.array([[0.0], [1e-9]])
    t, verdict, _ = _run(_sequence(lambda t: 1.0 + corners[t % 2]), 1e-6)
    assert verdict.converged and verdict.period == 2 and verdict.amplitude == pytest.approx(1e-9)
