"""The interactive panels of :mod:`aimlib.widgets`, driven from Python (no browser, no kernel).

Each panel is built, each control is changed, and the test checks that the
plot changed and that the plotted data are what a direct call of the
library returns.  Bad inputs must give a readable one-line message.  The
redraw times of the state-evolution panel are measured by
``benchmarks/bench_widgets.py``.
"""
from __future__ import annotations

import html
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
    direct = se.curve(data["alpha"], "softmax", T=3, rho=0.3).mmse
    np.testing.assert_allclose(data["mmse"], direct, atol=1e-9)
    assert data["alpha_pr"] == pytest.approx(se.perfect_recovery_threshold(0.3, 3))
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
    from aimlib.priors import Centred

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
    p.controls["T"].value = 4
    assert "T <= 3" in _readable(p)
    p.controls["run"].click()
    assert "T <= 3" in _readable(p) and p.runs == []


def test_playground_collects_the_panels():
    box = aw.playground()
    assert set(box.panels) == {"se", "phase", "noise", "spectrum", "amp", "deep"}
    assert all(pn.error == "" and pn.last_png.startswith(PNG) for pn in box.panels.values())


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
