"""The training budget through the sweep runner: the schedule options of a ``gd`` sweep, and
the committed sweeps ``sweeps/gd_budget*.yaml`` against the curves of ``scripts/gd_budget.py``.

The chapter's curves record every budget of one run; the sweeps run each budget as a run of its
own.  A run of ``s`` steps is the first ``s`` steps of a longer one (a fixed step, or a decay
before ``s``; ``keep='lowest'`` looks back over the steps ``<= s`` only).  The curves were made
on another machine, so the two agree to round-off where the dynamics do not amplify it: up to
step 1000, and at 4000 under the decayed step, to the eight digits the curves are written with.
At a fixed step past the training loss's minimum (near step 1500) Adam amplifies round-off:
at step 4000 the sweeps differ from the curves by up to 5e-4 (relative) in the single-run
error and 5e-3 stopped at the lowest loss (the students' standard deviation by up to 10 %),
while on one machine the script's protocol gives the sweep's values exactly.  The bounds below
allow four times that on the means; a run of another schedule is 0.1 to 0.3 away.
"""
from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from aimlib import gd, sweep
from aimlib.sweep import SpecError, expand

ROOT = Path(__file__).resolve().parents[1]
TINY = {"method": "gd", "T": 2, "rho": 0.5, "alpha": 0.3, "d": 10, "seeds": [3],
        "options": {"gd": {"restarts": 2, "steps": 40, "dtype": "float64", "lr": 0.1}}}
#: which curve of the script a sweep run is: (spec, its options) -> the script's schedule
SCHEDULES = {("gd_budget", "last"): "fixed", ("gd_budget", "lowest"): "lowest",
             ("gd_budget_decayed", "last"): "decayed"}
#: relative agreement of a sweep row with the curve: to the curve's digits, or where round-off grows
DIGITS, AMPLIFIED = 2e-7, {"fixed": 2e-3, "lowest": 2e-2}


def with_gd(**options) -> dict:
    return dict(TINY, options={"gd": {**TINY["options"]["gd"], **options}})


@pytest.mark.parametrize("options, field, words", [
    ({"lr_decay_at": 40}, "options.gd.lr_decay_at", "must be < steps"),
    ({"steps": [20, 40], "lr_decay_at": 30}, "options.gd.lr_decay_at", "with steps = 20"),
    ({"lr_decay": 0.5}, "options.gd.lr_decay", "give lr_decay_at"),
    ({"lr_decay_at": 10, "lr_decay": 0.0}, "options.gd.lr_decay", "> 0"),
    ({"lr_decay_at": 10, "lr_decay": 1.5}, "options.gd.lr_decay", "<= 1"),
    ({"lr_decay_at": 0}, "options.gd.lr_decay_at", ">= 1"),
    ({"keep": "best"}, "options.gd.keep", "'last', 'lowest'"),
])
def test_bad_schedules_name_the_field(options, field, words):
    with pytest.raises(SpecError, match=re.escape(f"spec field '{field}'") + ".*" + re.escape(words)):
        sweep.load_spec(with_gd(**options))


def test_keep_last_is_the_run_without_the_option():
    """``keep: last`` is what a run does without ``keep``: the same key, so no cached row is computed twice."""
    assert [r.key for r in expand(with_gd(keep="last"))] == [r.key for r in expand(TINY)]
    assert expand(with_gd(keep="lowest"))[0].key != expand(TINY)[0].key


@pytest.mark.parametrize("options", [dict(keep="lowest"), dict(lr_decay_at=15, lr_decay=0.2)])
def test_a_sweep_row_is_the_run_of_its_schedule(options, monkeypatch):
    """The runner hands the schedule to :func:`aimlib.gd.run_gd`, and the row is that run's."""
    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return run_gd(*args, **kwargs)

    run_gd = gd.run_gd
    monkeypatch.setattr(gd, "run_gd", recording)
    (run,) = expand(with_gd(**options))
    row = sweep.execute(run)
    assert seen and all(seen[0][k] == x for k, x in options.items())
    direct = run_gd(2, 0.5, 0.3, 10, 3, restarts=2, steps=40, dtype=np.float64, lr=0.1, **options)
    assert row["mmse_single"] == pytest.approx(direct["mmse_single"], rel=1e-12)
    assert row["mmse_averaged"] == pytest.approx(direct["mmse_averaged"], rel=1e-12)
    assert json.loads(row["options"]) == {**TINY["options"]["gd"], **options}


def script_rows(monkeypatch) -> dict:
    """``(d, seed, schedule, step) -> row`` of the committed curves ``book/data/gd_budget_d*.csv``."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    read_rows = importlib.import_module("_rows").read_rows
    return {(int(r["d"]), int(r["seed"]), r["schedule"], int(r["step"])): r
            for path in sorted((ROOT / "book" / "data").glob("gd_budget_d*.csv")) for r in read_rows(path)}


def tolerance(schedule: str, steps: int) -> float:
    """How closely a sweep row must equal the curve: where round-off is not amplified, to its digits."""
    return DIGITS if steps <= 1000 or schedule == "decayed" else AMPLIFIED[schedule]


def test_the_committed_budget_sweeps_equal_the_curves_of_one_run(monkeypatch):
    """Every row of the two sweeps equals the script's curve at its budget, for every shared data set."""
    curves, compared = script_rows(monkeypatch), 0
    for name in ("gd_budget", "gd_budget_decayed"):
        spec = ROOT / "sweeps" / f"{name}.yaml"
        rows = sweep.load_results(spec)
        assert len(rows) == len(expand(spec))                      # the sweep is complete
        for r in rows:
            opts = json.loads(r["options"])
            schedule = SCHEDULES[name, opts.get("keep", "last")]
            curve = curves.get((r["d"], r["seed"], schedule, opts["steps"]))
            if curve is None:                                      # a data set the script has not run
                continue
            rel = tolerance(schedule, opts["steps"])
            assert r["mmse_single"] == pytest.approx(float(curve["single_mean"]), rel=rel)
            assert r["mmse_averaged"] == pytest.approx(float(curve["averaged"]), rel=rel)
            if rel == DIGITS:            # where not amplified, also the spread and the training loss
                assert r["mmse_single_std"] == pytest.approx(float(curve["single_std"]), rel=rel)
                assert r["train_loss"] == pytest.approx(float(curve["train_loss"]), rel=1e-6)
            compared += 1
    assert compared >= 5 * (4 + 3)                                 # d = 50: 4 data sets, d = 100: 3
