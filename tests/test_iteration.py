"""The stopping rules of aimlib.iteration on sequences whose limit is known: geometric, two modes,
heavy damping, cycles, a drift that does not shrink, a power-law approach (issue 37, item 5); the map
engine iterate_map and the state evolution on it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib.errors import ConvergenceError
from aimlib.iteration import WindowRule, taken_further


def _run(xs, bound, window=10, atol=0.0, limit=0.0, span=None):
    """Feed the iterates ``xs`` (arrays) to a WindowRule; return ``(t, verdict, |x_t - limit|)`` at its stop."""
    rule, past = WindowRule(window, atol, span), []
    for t, x in enumerate(xs):
        x = np.atleast_1d(np.asarray(x, dtype=float))
        if past:
            back = [float(np.linalg.norm(x - p)) for p in reversed(past[-rule.span:])]
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


def test_a_spiral_with_jittery_steps_converges_within_the_bound():
    """Two modes that rotate at different angles and contract at the same rate 0.98: the steps jump up and down
    from one iteration to the next (their one-step ratios exceed 1), their envelope contracts; the envelope
    of a span of 40 certifies the stop within the bound, a span of 10 never does."""
    def x(t):
        return 0.98 ** t * np.array([np.cos(2.0 * t) + 0.8 * np.cos(0.3 * t), np.sin(2.0 * t) - 0.8 * np.sin(0.3 * t)])
    steps = [np.linalg.norm(x(t) - x(t - 1)) for t in range(1, 60)]
    assert max(b / a for a, b in zip(steps[:-1], steps[1:])) > 1.2
    t, verdict, left = _run(_sequence(x, 3000), 1e-4, span=40)
    assert verdict.converged and left <= 1e-4 and t < 800      # (the bound first met near t = 480)
    assert _run(_sequence(x, 3000), 1e-4)[1].state != "converged"


def test_a_cycle_longer_than_the_window_is_found_within_the_span():
    """Period 17 (GAMP-RIE's at softmax, T = 2, alpha = 0.1, d = 80): a span of 10 sees iterates that wander
    without a period; a span of 40 reports the period within two periods of its start."""
    corners = np.random.default_rng(17).standard_normal((17, 5))
    seq = lambda: _sequence(lambda t: corners[t % 17])  # noqa: E731
    short = _run(seq(), 1e-6)[1]
    assert short.state == "oscillating" and short.period == 0
    t, verdict, _ = _run(seq(), 1e-6, span=40)
    assert verdict.state == "oscillating" and verdict.period == 17 and t <= 2 * 17 + 11


@pytest.mark.parametrize("amplitude, state", [(1e-2, "oscillating"), (1e-8, "converged")])
def test_a_wander_without_a_period_is_an_oscillation_or_a_floor(amplitude, state):
    """Iterates drawn at random in a ball around 1 (no period, steps that do not shrink): an oscillation of
    period 0 with the ball's size as amplitude; a floor (converged) when the ball is within the bound."""
    rng = np.random.default_rng(0)
    t, verdict, left = _run(_sequence(lambda t: 1.0 + amplitude * rng.uniform(-1, 1, 3)), 1e-6, span=40, limit=1.0)
    assert verdict.state == state and verdict.period == 0 and t <= 60
    assert amplitude <= verdict.amplitude <= 2 * math.sqrt(3) * amplitude


@pytest.mark.parametrize("r", [0.99, 0.999])
def test_a_slow_drift_is_no_wander(r):
    """A slow geometric approach over a long span: its distances back grow with the lag; it converges."""
    t, verdict, left = _run(_sequence(lambda t: np.array([r ** t, 2 * r ** t])), 1e-6, span=40)
    assert verdict.converged and left <= 1e-6


# --- the map engine: iterate_map, and the state evolution on it --------------------------------

from aimlib.iteration import iterate_map  # noqa: E402


def test_iterate_map_damps_traces_calls_back_and_reports_divergence():
    calls = []
    run = iterate_map(lambda x: 0.5 * x + 1.0, [0.0, 4.0], 1e-12, damping=0.5,
                      callback=lambda t, x: calls.append(t))
    assert run.verdict.converged and np.allclose(run.x, 2.0, atol=1e-11)
    assert run.trace.shape == (run.iterations + 1, 2) and calls == list(range(1, run.iterations + 1))
    np.testing.assert_allclose(run.trace[1], [0.5, 3.5])        # (1 - 0.5) F(x0) + 0.5 x0
    with np.errstate(over="ignore"):
        blown = iterate_map(lambda x: x * 1e200, [1.0], 1e-12)
    assert blown.verdict.state == "diverged" and blown.iterations == 2 and np.isfinite(blown.x).all()
    capped = iterate_map(lambda x: x + 1.0, [0.0], 1e-12, max_iter=7)
    assert capped.verdict.state == "running" and capped.iterations == 7
    with pytest.raises(ValueError, match="rule"):
        iterate_map(lambda x: x, [0.0], 1e-12, rule="steps")


def test_the_window_rule_reaches_the_fixed_point_where_the_step_rule_stops_early():
    """x <- 0.99 x + 0.01 (0.5 x + 1): the step rule stops 1e-4 from 2 at tol 1e-6, the window rule within it."""
    F = lambda x: 0.5 * x + 1.0  # noqa: E731
    step = iterate_map(F, [0.0], 1e-6, damping=0.99)
    window = iterate_map(F, [0.0], 1e-6, damping=0.99, rule="window")
    assert step.verdict.converged and abs(step.x[0] - 2.0) > 1e-4
    assert window.verdict.converged and abs(window.x[0] - 2.0) <= 1e-6


def test_the_state_evolution_takes_the_window_rule():
    """Hardmax, T = 2, rho = 0.5, alpha = 1 at damping 0.99: 'window' lands within tol of the undamped fixed
    point (0.0789), 'step' stops a hundred times tol away; both rules agree without damping."""
    from aimlib.state_evolution import fixed_point

    exact = fixed_point(1.0, "hardmax", tol=1e-13).mmse
    step = fixed_point(1.0, "hardmax", damping=0.99, tol=1e-7)
    window = fixed_point(1.0, "hardmax", damping=0.99, tol=1e-7, stop="window")
    assert abs(window.mmse - exact) <= 1e-7 < 1e-5 < abs(step.mmse - exact)
    assert window.iterations > step.iterations
    assert fixed_point(1.0, "hardmax", tol=1e-12, stop="window").mmse == pytest.approx(exact, abs=1e-11)


def test_taken_further_refuses_a_slow_mode_and_keeps_a_fixed_point():
    """A map contracting by 0.99 per step stops on the step rule far from its fixed point 0; taken
    further it moves by more than the tolerance.  A map contracting by 0.1 stays within it."""
    slow = iterate_map(lambda x: 0.99 * x, np.array([1.0]), 1e-3)
    assert slow.verdict.converged and slow.x[0] > 0.05
    with pytest.raises(ConvergenceError, match="the slow map moved"):
        taken_further(lambda x: 0.99 * x, slow.x, 10, 4e-3, "the slow map")
    fast = iterate_map(lambda x: 0.1 * x, np.array([1.0]), 1e-6)
    seen = []
    kept = taken_further(lambda x: 0.1 * x, fast.x, 3, 4e-6, "the fast map",
                         callback=lambda t, x: seen.append(t), start=fast.iterations)
    assert len(kept) == 4 and kept[0] == fast.x
    assert seen == [fast.iterations + 1, fast.iterations + 2, fast.iterations + 3]
    with pytest.raises(ValueError, match="further"):
        taken_further(lambda x: x, fast.x, 0, 1e-3, "a map")
