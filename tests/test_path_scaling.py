"""aimlib.path_scaling: a delayed path and a slowed one, recognised on paths of known form, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.errors import ConvergenceError
from aimlib.path_scaling import first_crossing, fit_path

T = np.arange(1.0, 201.0)
DELAYS, CLOCKS = np.arange(0.0, 120.0, 0.25), np.arange(1.0, 5.0, 0.005)


def rise(t):
    """A path that leaves a fixed point and levels off: 1 + 0.3 (1 - e^{-t/40}), and 1 before t = 0."""
    return 1 + 0.3 * (1 - np.exp(-np.maximum(t, 0) / 40))


def test_a_slowed_clock_is_found_and_a_delay_does_not_fit_it():
    """The reference slowed 2.5 times is fitted by the clock 2.5, within the linear interpolation's error of the
    reference between its iterations; the best delay leaves a misfit a thousand times larger."""
    slowed = rise(T / 2.5)
    clock = fit_path(T, rise(T), T, slowed, "clock", CLOCKS, start=60)
    delay = fit_path(T, rise(T), T, slowed, "delay", DELAYS, start=60)
    assert clock.value == pytest.approx(2.5) and clock.rms < 1e-5 and clock.points == delay.points == 141
    assert delay.rms > 1000 * clock.rms


def test_a_delay_is_found_and_a_clock_does_not_fit_it():
    """The reference delayed by 30 iterations is fitted by the delay 30; the best clock leaves a misfit."""
    delayed = rise(T - 30)
    delay = fit_path(T, rise(T), T, delayed, "delay", DELAYS, start=60)
    clock = fit_path(T, rise(T), T, delayed, "clock", CLOCKS, start=60)
    assert delay.value == pytest.approx(30) and delay.rms < 1e-12
    assert clock.rms > 10 * delay.rms + 1e-3


def test_crossing_times_keep_differences_under_a_delay_and_ratios_under_a_clock():
    """On whole iterations: the delayed path crosses each level 30 later, the path slowed twice at twice the time
    to within the one iteration of rounding."""
    levels = (1.05, 1.1, 1.15, 1.2)
    ref = [first_crossing(T, rise(T), v) for v in levels]
    delayed = [first_crossing(T, rise(T - 30), v) for v in levels]
    slowed = [first_crossing(T, rise(T / 2), v) for v in levels]
    assert np.diff(ref).min() > 0 and np.allclose(np.subtract(delayed, ref), 30)
    assert np.abs(np.subtract(slowed, np.multiply(ref, 2))).max() <= 1
    assert first_crossing(T, rise(T), 1.5) is None
    assert first_crossing(T, 2 - rise(T), 0.9, start=50) is None
    assert first_crossing(T, np.r_[2.0, rise(T[1:])], 1.05, start=2) == ref[0]


def test_a_path_ahead_of_the_reference_is_fitted_inside_an_end():
    """A path 10 iterations ahead (delay -10) or 20 % faster (clock 1/1.2) maps its last iterations past the
    reference's 200: fitted up to ``end = 150`` it is found."""
    ahead = fit_path(T, rise(T), T, rise(T + 10), "delay", np.arange(-40.0, 40.0, 0.25), start=60, end=150)
    faster = fit_path(T, rise(T), T, rise(T * 1.2), "clock", np.arange(0.5, 2.0, 0.005), start=60, end=150)
    assert ahead.value == pytest.approx(-10) and ahead.points == faster.points == 91
    assert faster.value == pytest.approx(1 / 1.2, abs=0.003) and faster.rms < 1e-3


def test_only_values_that_keep_the_times_inside_the_reference_are_tried():
    """A delay of 60 would reach before the reference's start 10 from t = 60: the grid that holds it fails."""
    with pytest.raises(ValueError, match="no delay in values"):
        fit_path(T, rise(T), T, rise(T - 60), "delay", [60.0, 70.0], start=60, reference_start=10)
    with pytest.raises(ConvergenceError, match="edge of the admitted values"):
        fit_path(T, rise(T), T, rise(T - 30), "delay", np.arange(0.0, 20.0), start=60)


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "shift"}, "kind must be one of"),
    ({"values": [0.0, 1.0]}, "clock factors > 0"),
    ({"start": 199}, "start and end must leave at least 3"),
    ({"start": 60, "end": 61}, "start and end must leave at least 3"),
    ({"t": T[::-1]}, "path t must increase"),
    ({"path": np.full(200, np.nan)}, "path must contain only finite values"),
    ({"t_ref": T[:10]}, "reference and its t must have one equal length"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    args = {"t_ref": T, "reference": rise(T), "t": T, "path": rise(T / 2), "kind": "clock", "values": CLOCKS,
            "start": 60} | kwargs
    with pytest.raises(ValueError, match=match):
        fit_path(**args)
