"""The full-grid comparison with the published softmax curves (``scripts/compare_published_se.py``).

The published files are not part of the project; the committed summary
``book/data/published_softmax_grid.csv`` is checked for what the softmax
chapter says of it, and the summarising step on synthetic input.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import compare_published_se as cmp  # noqa: E402

GRID = np.genfromtxt(ROOT / "book" / "data" / "published_softmax_grid.csv", delimiter=",",
                     names=True, skip_header=1)


def test_summary_bins_every_point_and_signs_the_difference():
    alpha = np.linspace(1e-5, 0.2, 50)
    ours = 1.0 - alpha
    published = ours + np.where(alpha < 0.1, 1e-4, -2e-4)
    rows = cmp.summarise(0.5, alpha, published, ours, alpha_pr=0.2)
    assert sum(r["points"] for r in rows) == 50
    below = [r for r in rows if r["ratio_hi"] <= 0.5]
    assert all(r["published_above"] == r["points"] for r in below)
    assert max(r["max_abs_difference"] for r in rows) == pytest.approx(2e-4)


def test_summary_refuses_points_beyond_the_threshold():
    with pytest.raises(ValueError, match="outside"):
        cmp.summarise(0.5, np.array([0.1, 0.3]), np.zeros(2), np.zeros(2), alpha_pr=0.2)


def test_committed_grid_matches_the_chapter():
    assert set(np.unique(GRID["rho"])) == {0.1, 0.2, 0.3, 0.5, 1.0, 2.0}
    for rho in np.unique(GRID["rho"]):
        rows = GRID[GRID["rho"] == rho]
        assert rows["points"].sum() == 256
        body = rows[(rows["ratio_lo"] >= 0.001) & (rows["ratio_hi"] <= 0.9)]
        if rho >= 0.2:
            assert body["max_abs_difference"].max() < 4e-4
        if rho >= 0.3:
            assert (body["published_above"] == body["points"]).all()
        # the published first point exceeds the no-data error 1: ours does not
        first = rows[rows["ratio_lo"] == 0.0]
        assert first["points"].sum() == 1 and first["mean_difference"][0] > 8e-4
