"""The committed minimum-trace runs at scale (``scripts/min_trace_recovery.py``): each file is its grid's,
row by row, and committed rows are reproduced (chapter "What training learns", section at scale)."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from aimlib.convex import MEASUREMENTS, recovery_trial

ROOT = Path(__file__).resolve().parents[1]
#: (file, grid, rho of its --rho or None)
FILES = [("min_trace_scale.csv", "scale", None), ("min_trace_tight.csv", "tight", None),
         ("min_trace_d200_rho0.25.csv", "d200", 0.25), ("min_trace_d200_rho0.5.csv", "d200", 0.5)]


@pytest.fixture
def script(monkeypatch):
    """``scripts/min_trace_recovery.py`` and the scripts' row reader, imported from ``scripts/``."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("min_trace_recovery"), importlib.import_module("_rows")


def _committed(script, name):
    path = ROOT / "book" / "data" / name
    with open(path) as fh:
        made_by = fh.readline().strip()
    return made_by, script[1].read_rows(path)


@pytest.mark.parametrize("name, grid_name, rho", FILES)
def test_each_file_holds_solves_of_its_grid(script, name, grid_name, rho):
    """The made-by line is the grid's command; every row is one of its solves, once, at the grid's alpha."""
    made_by, rows = _committed(script, name)
    grid = script[0].GRIDS[grid_name]
    assert made_by == "# made by: " + grid["command"] + ("" if rho is None else f" --rho {rho:g}")
    keys = [script[0].key(r) for r in rows]
    assert rows and len(set(keys)) == len(keys)
    cells = {}
    for r in rows:
        meas, d, r_rho, f, seed = script[0].key(r)
        assert meas in MEASUREMENTS and seed in grid["seeds"][d] and rho in (None, r_rho)
        if (d, r_rho) not in cells:
            cells[d, r_rho] = script[0].alphas(grid, d, r_rho)
        assert float(r["alpha"]) == cells[d, r_rho][f]
        assert int(r["m"]) == round(float(r["alpha"]) * d * d) * 2          # T = 2: two per sample
        assert float(r["seconds"] or 0) >= 0 and r["converged"] in ("True", "False")


@pytest.mark.parametrize("name, grid_name, pick", [
    ("min_trace_scale.csv", "scale", ("softmax", 50, 0.5, 1.05, 1)),
    ("min_trace_scale.csv", "scale", ("gaussian", 50, 0.25, 0.9, 2)),
    pytest.param("min_trace_d200_rho0.5.csv", "d200", ("gaussian", 200, 0.5, 1.1, 0), marks=pytest.mark.slow),
])
def test_a_committed_solve_is_reproduced(script, name, grid_name, pick):
    """The grid's own options, rerun on the row's seed: the same iterations and error."""
    _, rows = _committed(script, name)
    row = next(r for r in rows if script[0].key(r) == pick)
    meas, d, rho, _, seed = pick
    again = recovery_trial(meas, d, rho, float(row["alpha"]), 2, seed, **script[0].GRIDS[grid_name]["options"])
    assert again["iterations"] == int(row["iterations"]) and str(again["converged"]) == row["converged"]
    assert again["rel_error"] == pytest.approx(float(row["rel_error"]), rel=1e-6, abs=1e-12)


def test_the_tight_solves_are_the_scale_grid_s_data_sets(script):
    """Each solve of the tighter tolerance has a solve of the scale grid with its key, alpha and m."""
    scale = {script[0].key(r): r for r in _committed(script, "min_trace_scale.csv")[1]}
    tight = _committed(script, "min_trace_tight.csv")[1]
    assert tight and all((r["alpha"], r["m"]) == (scale[script[0].key(r)]["alpha"], scale[script[0].key(r)]["m"])
                         for r in tight)
