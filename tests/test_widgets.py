"""The interactive panels of :mod:`aimlib.widgets`, driven from Python (no browser, no kernel).

Each panel is built, each control is changed, and the test checks that the
plot changed and that the plotted data are what a direct call of the
library returns.  Bad inputs must give a readable one-line message.  The
redraw times of the state-evolution panel are measured by
``benchmarks/bench_widgets.py``.
"""
from __future__ import annotations

import html
import math
import time

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

from aimlib import rmt  # noqa: E402
from aimlib.channels import CHANNELS, hardmax, hardmax_polytope  # noqa: E402
from aimlib import state_evolution as se  # noqa: E402
from aimlib import widgets as aw  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _shown_png(panel) -> bytes:
    """The PNG bytes the panel's output area currently holds."""
    outs = panel.out.outputs
    assert len(outs) == 1 and outs[0]["output_type"] == "display_data"
    data = outs[0]["data"]["image/png"]
    import base64

    return base64.b64decode(data) if isinstance(data, str) else data


def _changes(panel, name, value):
    """Set a control and return (old png, new png)."""
    before = panel.last_png
    panel.controls[name].value = value
    assert panel.error == "", f"{name}={value!r}: {panel.error}"
    return before, panel.last_png


def _readable(panel):
    text = panel.error
    assert text, "expected a message in the panel"
    assert "Traceback" not in text and "File \"" not in text and "\n" not in text
    assert html.escape(text) in panel.message.value
    return text


# --------------------------------------------------------------------------- SE panel
@pytest.fixture(scope="module")
def se_p():
    return aw.se_panel()


def test_se_panel_is_a_widget_with_controls(se_p):
    import ipywidgets as W

    assert isinstance(se_p, W.VBox)
    assert set(se_p.controls) >= {"channel", "rho", "T", "alpha_range", "xscale", "yscale"}
    assert se_p.last_png.startswith(PNG) and _shown_png(se_p) == se_p.last_png
    assert se_p.error == ""


def test_se_panel_data_match_state_evolution(se_p):
    se_p.controls["channel"].value = "softmax"
    for name, value in [("rho", 0.3), ("T", 3), ("alpha_range", "0.002, 0.5"), ("xscale", "linear")]:
        old, new = _changes(se_p, name, value)
        assert new != old, f"changing {name} did not change the plot"
    data = se_p.last_data
    p = data["params"]
    assert (p["rho"], p["T"], p["lo"], p["hi"]) == (0.3, 3, 0.002, 0.5)
    assert np.allclose(data["alpha"], np.linspace(0.002, 0.5, len(data["alpha"])))
    # against the softmax's equation, not the state evolution's code: V = mmse_S(V / (alpha (T^2 + T - 2)))
    # below the counting threshold 2 (rho - rho^2/2) / (T^2 + T - 2), V = 0 above it
    alpha, V, k = np.asarray(data["alpha"]), np.asarray(data["mmse"]), 10
    assert data["alpha_pr"] == pytest.approx(2 * (0.3 - 0.3**2 / 2) / k, rel=1e-6)
    below = alpha < data["alpha_pr"]
    assert np.all(V[below] > 0) and np.all(V[~below] == 0)
    np.testing.assert_allclose(V[below], [rmt.mmse(x / (a * k), 0.3) for x, a in zip(V[below], alpha[below])],
                               rtol=1e-8)
    assert data["alpha_wr"] is None
    old, new = _changes(se_p, "yscale", "log")
    assert new != old


def test_se_panel_hardmax(se_p):
    se_p.controls["T"].value = 2
    se_p.controls["xscale"].value = "log"
    se_p.controls["alpha_range"].value = "0.01, 10"
    old, new = _changes(se_p, "channel", "hardmax")
    assert new != old
    data = se_p.last_data
    rho = data["params"]["rho"]
    pick = [0, len(data["alpha"]) // 2, len(data["alpha"]) - 1]
    direct = se.curve(data["alpha"][pick], "hardmax", T=2, rho=rho).mmse
    np.testing.assert_allclose(data["mmse"][pick], direct, atol=1e-5)
    assert data["alpha_pr"] is None
    assert data["alpha_wr"] == pytest.approx(rho * hardmax.weak_recovery_threshold())
    assert np.all(np.diff(data["mmse"]) <= 1e-9)  # the error decreases with alpha
    assert data["mmse"][-1] > 0  # no perfect recovery


@pytest.mark.parametrize("name,value,words", [
    ("alpha_range", "abc, 1", "not a number"),
    ("alpha_range", "0.1", "two numbers"),
    ("alpha_range", "1, 0.1", "below"),
    ("alpha_range", "0.001, 1e9", "must be in [0.0001, 100.0]"),
    ("alpha_range", "nan, 1", "must be finite"),
])
def test_se_panel_bad_text_gives_a_message(name, value, words):
    p = aw.se_panel()
    good = p.last_png
    p.controls[name].value = value
    assert words in _readable(p)
    assert p.last_png == good  # the last good plot stays
    p.controls[name].value = "0.001, 1"
    assert p.error == "" and p.message.value == ""


def _count_redraws(panel) -> list:
    """Record each redraw of ``panel`` (its controls call ``panel.redraw`` through the instance)."""
    calls, redraw = [], panel.redraw

    def counted():
        calls.append((panel.controls["T"].value, panel.controls["T"].max))
        return redraw()

    panel.redraw = counted
    return calls


def test_the_T_slider_stops_at_the_channels_limit():
    """The slider offers the T the channel computes: hardmax up to its registry limit (one source:
    ``hardmax_polytope.MAX_T`` through ``registry.MAX_T``), never a T that only gives a message."""
    from aimlib.channels import registry

    limit = hardmax_polytope.MAX_T
    assert registry.max_t("hardmax") == registry.MAX_T["hardmax"][0] == limit
    assert registry.max_t("softmax") is None
    p = aw.se_panel(T=5, alpha_range="0.01, 10")
    T = p.controls["T"]
    top = T.max
    assert top > limit and T.value == 5
    calls = _count_redraws(p)
    p.controls["channel"].value = "hardmax"
    assert (T.max, T.value) == (limit, limit) and p.error == ""
    assert calls == [(limit, limit)]      # one redraw, at the lowered T
    assert p.last_data["params"]["T"] == limit
    p.controls["channel"].value = "softmax"
    assert (T.max, T.value) == (top, limit) and p.error == ""
    assert aw.se_panel(channel="hardmax", T=2).controls["T"].max == limit
    assert aw.amp_panel(channel="hardmax").controls["T"].max == limit
    phase = aw.phase_panel(channel="hardmax", contours=False)      # the hardmax diagram is T = 2
    assert phase.controls["T"].max == 2 and phase.last_data["params"]["T"] == 2


def test_se_panel_hardmax_three_tokens():
    p = aw.se_panel(T=3, alpha_range="0.01, 10")
    p.controls["channel"].value = "hardmax"
    assert p.error == "", p.error
    data = p.last_data
    rho = data["params"]["rho"]
    assert data["alpha_wr"] == pytest.approx(rho * hardmax_polytope.weak_recovery_threshold(3))
    # the table of F_out ends where E_S < 1e-3 of the overlap: the curve is NaN from there on
    ok = np.isfinite(data["mmse"])
    assert ok[0] and not ok[-1] and np.all(ok[:ok.sum()])
    pick = [0, ok.sum() // 2, ok.sum() - 1]
    direct = [se.solve(float(a), "hardmax", T=3, rho=rho).mmse for a in data["alpha"][pick]]
    np.testing.assert_allclose(data["mmse"][pick], direct, atol=1e-5)
    # the slider stops at 3; a T set past it from code (or a stale state) gives the message
    p.controls["T"].max = 6
    p.controls["T"].value = 4
    assert "T <= 3" in _readable(p)


def test_out_of_range_values_give_a_message():
    p = aw.se_panel()
    # a slider clamps what a user can do; code (or a stale state) may not
    p.controls["rho"].max = 100.0
    p.controls["rho"].value = 50.0
    assert "rho must be in [0.01, 10.0]" in _readable(p)
    s = aw.spectrum_panel(d=100)
    s.controls["seed"].value = -3
    assert "seed must be >= 0" in _readable(s)
    s.controls["seed"].value = 2**31
    assert "seed must be <= 2147483647" in _readable(s)


# --------------------------------------------------------------------------- label noise
def test_noise_panel_data_match_state_evolution():
    from aimlib.channels import softmax_noisy as ns

    p = aw.noise_panel(rho=0.5, beta=1.0, noise=0.01, alpha_range="0.05, 5")
    assert p.error == "" and p.last_png.startswith(PNG)
    d = p.last_data
    i = len(d["alpha"]) // 2
    a = d["alpha"][i]
    assert d["mmse"][i] == pytest.approx(se.solve(a, T=2, rho=0.5, noise=0.01).mmse, rel=1e-9)
    assert d["clean"][i] == pytest.approx(se.solve(a, T=2, rho=0.5).mmse, abs=1e-9)
    assert d["tail"][i] == pytest.approx(0.75 / (a * ns.fisher_at_q0(1.5, 1.0, 0.01)), rel=1e-6)
    assert np.all(d["mmse"] >= d["clean"])
    assert d["alpha_pr"] == pytest.approx(0.1875, rel=1e-6)
    before, after = _changes(p, "noise", 0.1)
    assert before != after and np.all(p.last_data["mmse"] > d["mmse"])


def test_noise_panel_messages():
    p = aw.noise_panel(alpha_range="0.05, 5")
    p.controls["alpha_range"].value = "5, 0.05"
    assert "lower end" in _readable(p)
    p.controls["alpha_range"].value = "0.05, 5"
    p.controls["noise"].min = -6  # a slider clamps what a user can do; code may not
    p.controls["noise"].value = 1e-5
    assert "noise must be in [0.003, 1.0]" in _readable(p)


def test_deep_panel_data_match_the_two_layer_state_evolution():
    """The panel draws the state evolution of centred teachers (exact for two hardmax layers)."""
    from aimlib.channels import DeepAttention
    from aimlib.priors import Centred, Wishart

    p = aw.deep_panel(c=0.5, alpha_range="0.1, 2")
    assert p.error == "" and p.last_png.startswith(PNG)
    d = p.last_data
    i = len(d["alpha"]) // 2
    expected = se.fixed_point(d["alpha"][i], DeepAttention(c=0.5), T=2, rho=(Centred(0.5), Centred(0.5)),
                              tol=1e-10).mmse
    assert (d["mmse_1"][i], d["mmse_2"][i]) == pytest.approx(expected, abs=1e-6)
    assert np.all(d["mmse_2"] < d["mmse_1"])           # the output layer is learned first
    before, after = _changes(p, "rho2", 2.0)
    assert before != after and p.last_data["params"]["rho2"] == 2.0
    p.controls["alpha_range"].value = "2, 0.1"
    assert "lower end" in _readable(p)
    # Wishart teachers: GAMP-RIE's separable state evolution, above the oracle's lower bound
    p.controls["alpha_range"].value = "0.1, 2"
    p.controls["rho2"].value = 0.5
    p.controls["teachers"].value = "wishart"
    d = p.last_data
    assert p.error == "" and d["params"]["teachers"] == "wishart"
    upper = se.fixed_point(d["alpha"][i], DeepAttention(c=0.5), T=2, rho=(0.5, 0.5), tol=1e-10)
    assert upper.prediction == "separable-gamp"
    assert (d["mmse_1"][i], d["mmse_2"][i]) == pytest.approx(upper.mmse, abs=1e-6)
    # its first-order cross overlap, read out in the legend, which says the SE that carries it is not drawn
    first = se.cross_overlap(d["alpha"][i], upper.q, upper.mmse, DeepAttention(c=0.5), (Wishart(0.5), Wishart(0.5)))
    assert d["q_12"][i] == pytest.approx(first.q_12, abs=1e-5) and np.all(d["q_12"] < 0)
    p.controls["teachers"].value = "centred"
    assert np.all(p.last_data["q_12"] == 0.0)


def test_untied_panel_data_match_both_state_evolutions():
    from aimlib import untied

    p = aw.untied_panel(T=2, rho=0.5, alpha_range="0.01, 0.45")
    assert p.error == "" and p.last_png.startswith(PNG)
    d = p.last_data
    i = len(d["alpha"]) // 3
    assert d["tied"][i] == pytest.approx(se.solve(d["alpha"][i], T=2, rho=0.5).mmse, abs=1e-8)
    assert d["untied"][i] == pytest.approx(untied.solve_untied(d["alpha"][i], 2, 0.5)[0], abs=1e-8)
    assert d["threshold_untied"] == pytest.approx(0.375) and np.all(d["untied"] >= d["tied"] - 1e-9)
    lower, upper = d["bracket"]
    assert (lower[i], upper[i]) == pytest.approx(untied.bracket_untied(d["alpha"][i], 2, 0.5))
    assert np.all(lower <= d["untied"] + 1e-9) and np.all(d["untied"] <= upper + 1e-9)
    before, after = _changes(p, "T", 3)
    assert before != after and p.last_data["params"]["T"] == 3
    p.controls["alpha_range"].value = "0.4, 0.1"
    assert "lower end" in _readable(p)


# --------------------------------------------------------------------------- phase diagram
@pytest.mark.slow
def test_phase_panel_softmax_and_T():
    p = aw.phase_panel()
    d = p.last_data
    i = len(d["rho"]) // 2
    direct = se.curve(d["alpha"], "softmax", T=2, rho=float(d["rho"][i])).mmse
    np.testing.assert_allclose(d["mmse"][i], direct, atol=1e-9)
    k = len(d["rho_line"]) // 3
    assert d["alpha_pr"][k] == pytest.approx(se.perfect_recovery_threshold(float(d["rho_line"][k]), 2))
    old, new = _changes(p, "T", 4)
    assert new != old
    d4 = p.last_data
    # softmax depends on alpha and T only through alpha_bar = (T^2+T-2) alpha: same grid of alpha_bar
    np.testing.assert_allclose(d4["alpha"] * 18, d["alpha"] * 4)
    np.testing.assert_allclose(d4["mmse"], d["mmse"], atol=1e-12)
    old, new = _changes(p, "contours", False)
    assert new != old


def test_phase_panel_hardmax():
    p = aw.phase_panel(channel="hardmax", contours=False)
    assert p.error == ""
    d = p.last_data
    np.testing.assert_allclose(d["alpha_wr"], d["rho_line"] * hardmax.weak_recovery_threshold())
    j = len(d["rho"]) - 1
    pick = [0, len(d["alpha"]) - 1]
    direct = se.curve(d["alpha"][pick], "hardmax", T=2, rho=float(d["rho"][j])).mmse
    np.testing.assert_allclose(d["mmse"][j][pick], direct, atol=1e-5)


# --------------------------------------------------------------------------- spectrum
def test_spectrum_panel_controls_and_data():
    p = aw.spectrum_panel(d=150)
    d = p.last_data
    np.testing.assert_allclose(d["density"], rmt.density(d["x"], 0.1, 0.3))
    assert len(d["support"]) == 2  # small noise, rho < 1: two bulks
    assert len(d["eigenvalues"]) == 150
    for name, value in [("delta", 1.0), ("rho", 0.5), ("d", 200), ("seed", 3)]:
        old, new = _changes(p, name, value)
        assert new != old, f"changing {name} did not change the plot"
    d = p.last_data
    assert d["params"] == {"delta": 1.0, "rho": 0.5, "d": 200, "seed": 3}
    np.testing.assert_allclose(d["density"], rmt.density(d["x"], 1.0, 0.5))
    assert d["support"] == rmt.support(1.0, 0.5) and len(d["support"]) == 1  # merged
    np.testing.assert_allclose(d["xi"], rmt.rie_eigenvalues(d["lam"], 1.0, 0.5))
    S, Y = rmt.sample_denoising(200, 1.0, 0.5, 3)
    np.testing.assert_allclose(d["eigenvalues"], np.linalg.eigvalsh(Y), atol=1e-10)
    assert d["mmse"] == pytest.approx(rmt.mmse(1.0, 0.5))
    # one draw at d = 200: the RIE's error is within 0.008 of mmse = 0.249 over seeds 3-9 (this seed: 2e-5)
    assert abs(d["rie_error"] - d["mmse"]) < 0.1


# --------------------------------------------------------------------------- AMP
def test_amp_panel_runs_on_click():
    p = aw.amp_panel(d=20, max_iter=5, alpha=0.1)
    assert p.last_data["last_run"] is None and p.runs == []
    png0 = p.last_png
    t0 = time.perf_counter()
    p.controls["run"].click()
    assert p.error == "", p.error
    assert p.last_png != png0 and len(p.runs) == 1
    r = p.last_data["last_run"]
    assert r["params"]["d"] == 20 and 1 <= len(r["error_trace"]) <= 5
    assert 0 <= r["mmse"] < 1.2      # a sanity bound: the prior's error 1, plus finite-size slack at d = 20
    assert r["se_mmse"] == pytest.approx(se.solve(0.1, "softmax", T=2, rho=0.5).mmse, abs=1e-6)
    print(f"\n[AMP panel] one run at d = 20: {time.perf_counter() - t0:.2f} s")
    old, new = _changes(p, "alpha", 0.2)  # moves the marker, keeps the points
    assert new != old and len(p.runs) == 1
    p.controls["clear"].click()
    assert p.runs == [] and p.last_data["last_run"] is None
    p.controls["channel"].value = "hardmax"
    p.controls["T"].value = 3
    assert p.error == "", p.error
    assert p.controls["T"].max == hardmax_polytope.MAX_T
    p.controls["T"].max = 4      # past the slider's top only from code
    p.controls["T"].value = 4
    assert "T <= 3" in _readable(p)
    p.controls["run"].click()
    assert "T <= 3" in _readable(p) and p.runs == []


@pytest.fixture(scope="module")
def box():
    return aw.playground()


def test_playground_collects_the_panels(box):
    assert set(box.panels) == {"se", "phase", "noise", "spectrum", "amp", "deep"}
    assert all(pn.error == "" and pn.last_png.startswith(PNG) for pn in box.panels.values())


# --------------------------------------------------------------------------- sliders in a browser
def _is_log(slider) -> bool:
    import ipywidgets as W

    return isinstance(slider, W.FloatLogSlider)


def _shown_at(slider, k: int) -> float:
    """The value a browser's slider takes at its stop ``k``: ipywidgets 8 draws it with noUiSlider over
    ``range {min, max}`` and ``step``, whose stops are ``min + k step`` (the exponent, for a log slider)."""
    x = slider.min + k * slider.step
    return slider.base ** x if _is_log(slider) else x


def _stop_of(slider) -> float:
    """Where the start value sits among the stops (an integer when it is one of them)."""
    x = math.log(slider.value) / math.log(slider.base) if _is_log(slider) else slider.value
    return (x - slider.min) / slider.step


def _readout(slider, x) -> str:
    return format(x, slider.readout_format)


def _sliders(box):
    import ipywidgets as W

    return {f"{name}.{c}": w for name, pn in box.panels.items() for c, w in pn.controls.items()
            if isinstance(w, (W.FloatLogSlider, W.FloatSlider, W.IntSlider))}


def test_one_step_right_and_one_left_return_to_the_start(box):
    """Issue 41: the rho readout went 0.500 -> 0.564 -> 0.502 (the start was off the slider's stops, which
    begin at min = log10(0.02): the first step snapped onto them).  Every slider of the panels starts on a stop."""
    rho = box.panels["se"].controls["rho"]
    k = round(_stop_of(rho))
    assert [_readout(rho, _shown_at(rho, j)) for j in (k, k + 1, k)] == ["0.5", "0.561", "0.5"]
    sliders = _sliders(box)
    assert len(sliders) >= 10
    for name, slider in sliders.items():
        k = _stop_of(slider)
        assert abs(k - round(k)) < 1e-9, f"{name}: start {slider.value} between stops ({k:.4f})"
        k = round(k)
        back = _shown_at(slider, k)
        assert back == pytest.approx(slider.value, rel=1e-12, abs=0), name
        assert _readout(slider, back) == _readout(slider, slider.value), name
        if _is_log(slider) and slider.value * slider.base ** slider.step <= slider.base ** slider.max:
            assert _shown_at(slider, k + 1) == pytest.approx(slider.value * slider.base ** slider.step, rel=1e-12)


@pytest.mark.parametrize("value, lo, hi, step", [(0.5, 0.02, 5.0, 0.05), (0.5, 0.05, 2.0, 0.05),
                                                 (1.0, 1e-3, 10.0, 0.05), (0.01, 3e-3, 1.0, 0.1),
                                                 (0.1, 0.005, 10.0, 0.05)])
def test_log_slider_stops_stay_inside_the_bounds(value, lo, hi, step):
    """The stops run through the start value; the ends are the last stops inside ``[lo, hi]`` (never a
    hair outside, 0.049999999999999996 for 0.05, which the panel's range check would refuse)."""
    s = aw.base.log_slider(value, lo, hi, "x", step=step)
    assert s.value == value
    assert lo <= 10 ** s.min < lo * 10 ** (step + 1e-12) and hi / 10 ** (step + 1e-12) < 10 ** s.max <= hi
    k = _stop_of(s)
    assert abs(k - round(k)) < 1e-9
    top = aw.base.log_slider(hi * 2, lo, hi, "x", step=step)       # a start past the end starts at it
    assert top.value == hi and top.max == pytest.approx(math.log10(hi))


@pytest.mark.parametrize("value, lo, hi, step", [(100, 50, 600, 50), (75, 50, 600, 50), (50, 20, 150, 10),
                                                 (4, 2, 6, 1)])
def test_int_slider_stops_run_through_the_start(value, lo, hi, step):
    s = aw.base.int_slider(value, lo, hi, "d", step=step)
    assert s.value == value and (value - s.min) % step == 0 and (s.max - value) % step == 0
    assert lo <= s.min < lo + step and hi - step < s.max <= hi


def test_panel_channels_come_from_the_registry():
    assert set(aw.base.CHANNELS) <= set(CHANNELS)


def test_deep_panel_takes_any_residual_in_range(monkeypatch):
    """A c without stored tables is tabulated (progress in the message line) and drawn; a c at a
    collision is refused in the message line with the margin."""
    from aimlib.channels import lambda_tables

    monkeypatch.setattr(lambda_tables, "_BUILT", {})
    p = aw.deep_panel(c=0.5, alpha_range="0.1, 2")
    seen = []
    p.message.observe(lambda change: seen.append(change["new"]), names="value")
    p.controls["c"].value = 0.7
    assert p.error == "" and p.last_data["params"]["c"] == 0.7
    assert "tabulating the output functions of c = 0.7: 11/11 nodes" in seen
    p.controls["c"].value = 1.0
    assert "at least 0.01 from each of -1, 0 and 1" in _readable(p)


def test_the_t3_hardmax_curve_ends_where_its_table_does():
    """At T = 3 the state evolution raises OutsideTable (a ValueError) past the shipped table's range; the panel's
    curve is NaN from the first alpha there on, and finite before (only that error ends it)."""
    from aimlib.widgets.curves import se_curve_cached

    with pytest.raises(hardmax_polytope.OutsideTable, match="tabulated for q/V"):
        se.solve(30.0, "hardmax", T=3, rho=0.5, tol=1e-8)
    alphas, mmse = se_curve_cached("hardmax", 3, 0.5, 0.1, 30.0, "log", 12)
    first = int(np.argmax(np.isnan(mmse)))
    assert 0 < first < len(alphas) and np.all(np.isfinite(mmse[:first])) and np.all(np.isnan(mmse[first:]))


# --------------------------------------------------------------------------- what a first draw costs
def test_importing_the_panels_loads_no_solver_they_do_not_draw():
    """``from aimlib.widgets import ...`` (the playground's first cell) leaves GAMP-RIE, the untied
    solvers (``scipy.optimize``) and gradient descent unloaded until a panel of theirs is built."""
    import subprocess
    import sys

    code = ("import sys; from aimlib import widgets; "
            "print(sorted(m for m in ('aimlib.amp', 'aimlib.untied', 'aimlib.gd', 'scipy.optimize') "
            "if m in sys.modules)); widgets.amp_panel; print('aimlib.amp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"], out.stdout


def test_the_noise_panels_first_figure_tabulates_nothing(monkeypatch):
    """At its defaults the noise panel reads the shipped table of ``F_out`` (no quadrature)."""
    from aimlib.channels import softmax_noisy as ns

    def refuse(*args):
        raise AssertionError(f"F_out tabulated at {args}")

    monkeypatch.setattr(ns, "fisher_direct", refuse)
    ns._cheb.cache_clear()
    aw.clear_caches()
    p = aw.noise_panel()
    assert p.error == "" and p.last_png.startswith(PNG)


def test_an_amp_panel_built_with_a_run_draws_one_figure(monkeypatch):
    """``amp_panel(run=True)`` (the playground's) renders once, with the run; without one, once too."""
    from aimlib.widgets import base

    drawn = []
    monkeypatch.setattr(base, "render_png", lambda fig: drawn.append(fig) or PNG)
    p = aw.amp_panel(d=20, max_iter=5, run=True)
    assert len(drawn) == 1 and len(p.runs) == 1 and p.error == ""
    aw.amp_panel(d=20, max_iter=5)
    assert len(drawn) == 2
