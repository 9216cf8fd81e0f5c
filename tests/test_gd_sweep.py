"""Sweeps of gradient descent with weight decay: the spec options, the new columns, old files."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aimlib import sweep
from aimlib.sweep import SpecError, expand, read_results, run_sweep
from aimlib.sweep.store import COLUMNS, OLD_COLUMNS

ROOT = Path(__file__).resolve().parents[1]

TINY = {"method": "gd", "T": 2, "rho": 0.25, "alpha": [0.1], "d": 12, "seeds": [0],
        "options": {"gd": {"steps": 30, "weight_decay": [0.0, 0.01],
                           "student": ["factorised", "direct"], "rank": [3, 12]}}}


@pytest.mark.parametrize("options, field, words", [
    ({"weight_decay": -1.0}, "options.gd.weight_decay", ">= 0"),
    ({"weight_decay": "big"}, "options.gd.weight_decay", "real number"),
    ({"student": "diagonal"}, "options.gd.student", "'factorised', 'direct'"),
    ({"student": ["direct", "factorized"]}, "options.gd.student[1]", "did you mean 'factorised'"),
])
def test_bad_options_name_the_field(options, field, words):
    spec = dict(TINY, options={"gd": options})
    with pytest.raises(SpecError, match=re.escape(f"spec field '{field}'") + ".*" + re.escape(words)):
        sweep.load_spec(spec)


def test_the_direct_student_drops_rank_and_keys_are_stable():
    runs = expand(TINY)
    # 2 lambdas x (2 factorised widths + 1 direct)
    assert len(runs) == 6
    direct = [dict(r.options) for r in runs if dict(r.options)["student"] == "direct"]
    assert len(direct) == 2 and all("rank" not in o for o in direct)
    # without the new options a spec has the keys it had before (committed caches stay valid)
    old = expand({"method": "gd", "T": 2, "rho": 0.5, "alpha": [0.1], "d": 300})
    assert "weight_decay" not in dict(old[0].options)


def test_rows_record_train_and_test_loss_and_nonzero_eigenvalues(tmp_path):
    out = tmp_path / "wd.csv"
    rep = run_sweep(TINY, out, workers=1, progress=False)
    assert rep.complete and not rep.failures
    rows = read_results(out)
    for r in rows:
        opts = json.loads(r["options"])
        width = 12 if opts["student"] == "direct" else opts["rank"]
        assert 0 <= r["n_nonzero"] <= width and r["n_nonzero"] == int(r["n_nonzero"])
        assert 0 < r["train_loss"] < 1 and 0 < r["test_loss"] < 1
    # executing one run again reproduces its row
    run = expand(TINY)[-1]
    again = sweep.execute(run)
    row = {r["key"]: r for r in rows}[run.key]
    for c in ("mmse", "train_loss", "test_loss", "n_nonzero", "iterations"):
        assert again[c] == pytest.approx(row[c], rel=1e-5), c


def test_files_with_the_old_header_are_read_and_upgraded(tmp_path):
    path = ROOT / "sweeps" / "amp_finite_size.csv"
    old_text = path.read_text()
    assert old_text.splitlines()[0].split(",") == OLD_COLUMNS[2]      # before train_loss, reason and curve
    rows = read_results(path)
    assert len(rows) == 40 and all(r["train_loss"] is None and r["mmse"] > 0 for r in rows)
    copy = tmp_path / "amp_finite_size.csv"
    copy.write_text(old_text)
    spec = ROOT / "sweeps" / "amp_finite_size.yaml"
    rep = run_sweep(spec, copy, workers=1, progress=False)
    assert rep.n_computed == 0 and rep.n_cached == 40
    assert copy.read_text().splitlines()[0].split(",") == COLUMNS
    assert read_results(copy) == rows


def test_a_committed_weight_decay_row_is_reproduced():
    spec = ROOT / "sweeps" / "weight_decay_d100.yaml"
    rows = sweep.load_results(spec)
    runs = {r.key: r for r in expand(spec)}
    cheapest = min(rows, key=lambda r: r["seconds"])
    again = sweep.execute(runs[cheapest["key"]])
    for c in ("mmse", "train_loss", "test_loss", "n_nonzero"):
        assert again[c] == pytest.approx(cheapest[c], rel=1e-3, abs=1e-6), c
