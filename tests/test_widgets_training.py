"""The training panel (aimlib.widgets.training): stored runs of GD with weight decay."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

from aimlib import gd, rmt, sweep  # noqa: E402
from aimlib.widgets import training  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def panel():
    return training.training_panel()


def test_every_control_changes_the_plot(panel):
    assert panel.error == "" and panel.last_png.startswith(PNG)
    for name, value in [("student", "direct"), ("weight_decay", 0.0), ("alpha_bar", 1.0),
                        ("student", "k/d = 0.12")]:
        before = panel.last_png
        panel.controls[name].value = value
        assert panel.error == "", panel.error
        assert panel.last_png != before, name


def test_the_plotted_data_are_the_stored_runs(panel):
    panel.controls["student"].value = "k/d = 1"
    panel.controls["weight_decay"].value = 1e-4
    panel.controls["alpha_bar"].value = 0.6
    data = panel.last_data
    rows = [r for r in sweep.load_results(training.ROOT / training.SWEEPS[0])
            if json.loads(r["options"])["rank"] == 100
            and json.loads(r["options"])["weight_decay"] == 1e-4]
    np.testing.assert_allclose(data["alpha_bar"], [r["alpha_bar"] for r in rows])
    np.testing.assert_allclose(data["mmse"], [r["mmse"] for r in rows])
    np.testing.assert_allclose(data["train_loss"], [r["train_loss"] for r in rows])
    here = [r for r in rows if r["alpha_bar"] == 0.6][0]
    assert data["n_nonzero"] == here["n_nonzero"] == gd.count_nonzero(data["eigenvalues"])
    # the teacher's stored spectrum: rho d non-zero eigenvalues inside the support of density_S
    teacher = data["teacher"]
    assert gd.count_nonzero(teacher) == 25 and data["rho"] == 0.25
    lo, hi = rmt.support_S(0.25)
    big = teacher[teacher > gd.EIG_TOL]
    # 25 eigenvalues of one d = 100 teacher: its extreme eigenvalues stray from the limiting edges by up to
    # ~0.2 (fresh teachers, seeds 0-4: lowest 0.007-0.19 above lo, largest 0.63 below to 0.016 above hi)
    assert lo - 0.2 < big.min() and big.max() < hi + 0.3


def test_a_missing_combination_gives_a_message(panel):
    labels, lams, abars = training._choices(training.stored_runs(str(training.ROOT))["runs"])
    assert "direct" in labels and 0.0 in lams and 0.6 in abars
    panel.labels = dict(panel.labels, nowhere=("factorised", 7))
    panel.controls["student"].options = list(panel.labels)
    good = panel.last_png
    panel.controls["student"].value = "nowhere"
    assert "no stored runs" in panel.error and panel.last_png == good


def test_stored_runs_default_to_this_repository():
    """``root=None`` (not the build machine's path in the signature) reads this checkout's files."""
    assert training.stored_runs.__wrapped__.__defaults__ == (None,)
    here, explicit = training.stored_runs(), training.stored_runs(str(training.ROOT))
    assert here["runs"].keys() == explicit["runs"].keys() and here["rho"] == explicit["rho"]
    np.testing.assert_array_equal(here["teacher"], explicit["teacher"])
