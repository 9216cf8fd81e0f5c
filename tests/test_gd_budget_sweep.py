"""The training budget through the sweep runner: the schedule options of a ``gd`` sweep, the
recorded curve of a row (option ``record_every``, column ``curve``), and the committed sweeps
``sweeps/gd_budget*.yaml`` behind the chapter's figure.

A run of ``s`` steps is the first ``s`` steps of a longer one (a fixed step, or a decay before
``s``; ``keep='lowest'`` looks back over the steps ``<= s`` only), so on one machine the curve of a
run of 4000 steps equals, at step 1000, the row of a run of 1000 steps, to the last digit.  On
another machine round-off enters: the chapter's earlier curves, made elsewhere, agreed with these
rows to eight digits up to step 1000 and under the decayed step, but at a fixed step past the
training loss's minimum (near step 1500) Adam amplified it to 1e-3 (relative) at step 4000
(6e-3 stopped at the lowest loss), so the rerun below is of a run of 1000 steps.
"""
from __future__ import annotations

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


def budget_rows() -> dict:
    """``(spec, d, seed, keep, steps) -> row`` of the two committed budget sweeps, each complete."""
    out = {}
    for name in ("gd_budget", "gd_budget_decayed"):
        spec = ROOT / "sweeps" / f"{name}.yaml"
        rows = sweep.load_results(spec)
        assert len(rows) == len(expand(spec))                      # the sweep is complete
        for r in rows:
            opts = json.loads(r["options"])
            out[name, r["d"], r["seed"], opts.get("keep", "last"), opts["steps"]] = r
    return out


def test_a_row_carries_the_curve_of_the_parameters_it_keeps():
    """With ``record_every`` a row's ``curve`` ends at the row's own errors, and its point at a step
    ``s`` is the row of a run of ``s`` steps; without it the column is empty."""
    rows = {}
    for keep in ("last", "lowest"):
        for steps in (20, 40):
            (run,) = expand(with_gd(keep=keep, steps=steps, record_every=10))
            rows[keep, steps] = sweep.execute(run)
    for (keep, steps), row in rows.items():
        curve = row["curve"]
        assert curve["step"] == list(range(0, steps + 1, 10))
        assert curve["single"][-1] == pytest.approx(row["mmse_single"], rel=1e-12)
        assert curve["averaged"][-1] == pytest.approx(row["mmse_averaged"], rel=1e-12)
        assert curve["single_std"][-1] == pytest.approx(row["mmse_single_std"], rel=1e-12)
        assert curve["train_loss"][-1] == pytest.approx(row["train_loss"], rel=1e-12)
    for keep in ("last", "lowest"):
        long, short = rows[keep, 40]["curve"], rows[keep, 20]["curve"]
        for column in ("single", "averaged", "single_std", "train_loss"):
            assert long[column][:3] == pytest.approx(short[column], rel=1e-12), (keep, column)
    assert rows["last", 40]["curve"]["train_loss"] == rows["lowest", 40]["curve"]["train_loss"]
    assert sweep.execute(expand(TINY)[0])["curve"] is None


def test_spread_and_centre_split_the_errors_by_the_mean_pair_distance():
    """``D/2`` from the single and averaged errors equals half the mean distance between two runs
    (:func:`aimlib.gd.mean_pair_distance`, another route), and ``E_inf + D/2`` is the single error."""
    from aimlib.gd.schedule import spread_and_centre
    from aimlib.model import estimation_error
    rng = np.random.default_rng(0)
    S, S_hat = rng.standard_normal((6, 6)), rng.standard_normal((5, 6, 6))
    single = float(np.mean(estimation_error(S_hat, S)))
    averaged = float(estimation_error(S_hat.mean(axis=0), S))
    spread, centre = spread_and_centre(single, averaged, 5)
    assert spread == pytest.approx(gd.mean_pair_distance(S_hat) / 2, rel=1e-12)
    assert centre + spread == pytest.approx(single, rel=1e-12)
    with pytest.raises(ValueError, match="k"):
        spread_and_centre(single, averaged, 1)


def test_the_committed_budget_sweeps_are_the_curves_of_one_run():
    """Each 4000-step row records every 250 steps; its point at step 1000 is the 1000-step row
    (last and lowest); the decayed run is the fixed one before its decay; the fixed and stopped
    rows are one trajectory (equal training losses)."""
    rows, seen = budget_rows(), 0
    for (name, d, seed, keep, steps), r in rows.items():
        curve = r["curve"]
        assert curve["step"] == list(range(0, steps + 1, 250)) and r["restarts"] == 16
        assert curve["single"][-1] == pytest.approx(r["mmse_single"], rel=1e-12)
        assert curve["averaged"][-1] == pytest.approx(r["mmse_averaged"], rel=1e-12)
        if name == "gd_budget" and steps == 4000:
            short = rows[name, d, seed, keep, 1000]
            assert curve["single"][4] == pytest.approx(short["mmse_single"], rel=1e-12)
            assert curve["averaged"][4] == pytest.approx(short["mmse_averaged"], rel=1e-12)
            seen += 1
        if name == "gd_budget_decayed":
            fixed = rows["gd_budget", d, seed, "last", 4000]["curve"]
            assert curve["single"][:4] == pytest.approx(fixed["single"][:4], rel=1e-12)
            assert curve["single"][-1] > fixed["single"][-1] + 0.1    # the decay froze the run
            lowest = rows["gd_budget", d, seed, "lowest", 4000]["curve"]
            assert lowest["train_loss"] == pytest.approx(fixed["train_loss"], rel=1e-12)
    assert seen == 2 * 3 * 4                     # last and lowest, d = 50, 100, 140, four data sets


@pytest.mark.slow
def test_a_committed_budget_row_is_rerun():
    """The run of 1000 steps at d = 50, seed 0, is rerun: its curve to 1e-6 (round-off of another machine)."""
    spec = ROOT / "sweeps" / "gd_budget.yaml"
    run = next(r for r in expand(spec) if r.d == 50 and r.seed == 0 and dict(r.options)["steps"] == 1000
               and "keep" not in dict(r.options))
    committed = {r["key"]: r for r in sweep.load_results(spec)}[run.key]["curve"]
    again = sweep.execute(run)["curve"]
    for column in ("single", "averaged", "single_std", "train_loss"):
        assert again[column] == pytest.approx(committed[column], rel=1e-6), column
