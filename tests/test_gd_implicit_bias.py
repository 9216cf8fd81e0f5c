"""Weight decay against minimum trace on the same data (aimlib.gd.implicit_bias).

The independent route is the small-penalty limit of the chapter "What training learns":
a global minimiser ``S_lambda`` of ``L + (lambda/2) Tr S`` has objective at most
``(lambda/2) Tr S_mt`` and trace at most ``Tr S_mt`` (``S_mt`` fits the data), and tends to
``S_mt`` as ``lambda -> 0``; ``S_mt`` itself comes from ADMM with its duality certificate.
"""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import _validate as v
from aimlib.channels import make_channel
from aimlib.gd.implicit_bias import compare_to_min_trace, min_trace_reference, weight_decay_ladder
from aimlib.model import sample_dataset
from script_support import committed, import_script

LAMBDAS = (1e-2, 1e-3, 1e-4)


@pytest.fixture(scope="module")
def instance():
    """``d = 16``, ``rho = 0.25``, ``alpha_bar = 1``: a data set and its minimum-trace matrix."""
    data = sample_dataset(0.25, 16, 2, 0.25, make_channel("softmax"), v.run_streams(3).data,
                          backend="numpy", dtype=np.float64)
    return data, min_trace_reference(data.X, data.y)


def test_the_teacher_fits_the_measurements_and_the_reference_is_certified(instance):
    data, ref = instance
    assert ref.result.converged and max(ref.result.residual, abs(ref.result.gap)) <= 1e-6
    teacher = compare_to_min_trace(data.S, ref, data.S)
    assert teacher["residual_gd"] < 1e-12 and teacher["err_gd"] == 0.0
    assert ref.result.trace <= np.trace(data.S) * (1 + 1e-6)   # the teacher is feasible
    self_cmp = compare_to_min_trace(ref.result.S, ref)
    assert self_cmp["dist_mt"] == 0.0 and "err_gd" not in self_cmp


def test_the_decayed_student_approaches_minimum_trace_as_lambda_shrinks(instance):
    data, ref = instance
    rows = list(weight_decay_ladder(data.X, data.y, ref, LAMBDAS, init_scale=0.1, seed=0,
                                    S=data.S, budgets=((3000, 1500),)))
    assert [r["lambda"] for r in rows] == list(LAMBDAS)
    assert all(r["settled"] and r["steps"] == 3000 for r in rows)
    for r in rows:   # the bounds every global minimiser obeys
        assert r["objective"] <= r["lambda"] / 2 * r["trace_mt"] * (1 + 1e-3)
        assert r["trace_gd"] <= r["trace_mt"] * (1 + 1e-6)
    dist = [r["dist_mt"] for r in rows]
    assert dist[0] > 10 * dist[1] > 100 * dist[2]
    assert dist[2] < 1e-3 and rows[2]["residual_gd"] < 1e-2


def test_bad_budgets_are_refused(instance):
    data, ref = instance
    with pytest.raises(ValueError, match="budgets"):
        next(weight_decay_ladder(data.X, data.y, ref, [0.0], budgets=()))


def committed_rows(name: str) -> tuple[str, list[dict]]:
    """The made-by command of a committed data file of the script, and its rows with numbers as floats."""
    made_by, rows = committed(name)
    return made_by, [{k: float(x) if k != "settled" else x == "True" for k, x in r.items()} for r in rows]


@pytest.mark.parametrize("name, d", [("weight_decay_vs_min_trace.csv", 100),
                                     ("weight_decay_vs_min_trace_d200.csv", 200)])
def test_the_committed_references_are_certified_and_the_bounds_hold(name, d):
    """Every reference of the chapter's data is certified, and every settled run obeys a minimiser's bounds."""
    made_by, rows = committed_rows(name)
    assert d == 100 or f"--d {d}" in made_by
    assert rows and all(r["d"] == d and abs(r["mt_gap"]) <= 1e-6 and r["residual_mt"] <= 1e-5
                        for r in rows)
    for r in rows:
        if r["settled"] and r["lambda"] > 0:
            assert r["objective"] <= r["lambda"] / 2 * r["trace_mt"] * (1 + 1e-2)
            assert r["trace_gd"] <= r["trace_mt"] * (1 + 1e-3)


@pytest.mark.slow
def test_a_committed_row_is_reproduced():
    """One run of the d = 100 file, rerun: the script's data set, its certified S_mt and the settled student."""
    _, rows = committed_rows("weight_decay_vs_min_trace.csv")
    row = next(r for r in rows if (r["seed"], r["alpha_bar"], r["lambda"], r["init_scale"], r["lr_decay_at"])
               == (0, 0.7, 1e-4, 1.0, -1))
    data = import_script("weight_decay_vs_min_trace").data_set(100, 0, 0.7)
    ref = min_trace_reference(data.X, data.y)
    (again,) = weight_decay_ladder(data.X, data.y, ref, [1e-4], init_scale=1.0, seed=0, S=data.S,
                                   budgets=((1000, None),))
    assert ref.result.iterations == row["mt_iterations"]
    for column in ("dist_mt", "err_gd", "err_mt", "trace_gd", "objective"):
        assert again[column] == pytest.approx(row[column], rel=1e-4, abs=1e-10), column
