"""Three-layer GAMP-RIE iteration by iteration (``book/data/deep_three_trace*.csv``): the rows are the runs their
made-by lines name, each run's last iterate is the committed row of ``scripts/deep_three_gamp.py`` for the same
run, and the chapter's finding on the path ("Correlated layers", section "Three layers")."""
from __future__ import annotations

import numpy as np
import pytest

from script_support import committed, made_by_args

NAMES = ["deep_three_trace.csv", "deep_three_trace_d300.csv", "deep_three_trace_a1.5.csv"]


def runs(names=NAMES) -> dict:
    """The committed rows, per ``(alpha, d, seed)``, in the order of ``t``."""
    out = {}
    for name in names:
        for r in committed(name)[1]:
            out.setdefault((float(r["alpha"]), int(r["d"]), int(r["seed"])), []).append(r)
    return out


def paths_at(alpha: float):
    """The state evolution with q_12 carried at ``alpha`` (the means of ``book/data/deep_three_cross_se.csv``,
    one per layer), and per run at ``alpha`` its ``d`` and its errors and predictions (``3 x t`` arrays)."""
    _, cse = committed("deep_three_cross_se.csv")
    state = np.array([np.mean([float(r[f"mmse_{k}"]) for r in cse if float(r["alpha"]) == alpha]) for k in (1, 2, 3)])
    found = [(d, *(np.array([[float(r[f"{x}_{k}"]) for r in rows] for k in (1, 2, 3)]) for x in ("error", "m")))
             for (a, d, _), rows in runs().items() if a == alpha]
    return state, found


@pytest.mark.parametrize("name", NAMES)
def test_the_rows_are_every_iteration_of_the_runs_the_made_by_line_names(name):
    """Exactly the (alpha, d, seed) of the made-by command (read by the script's own parser and rebuilt from it);
    each run's rows are its iterations 1, 2, ... in order, with one stop reason, and its residuals'
    cross-covariance is within Cauchy-Schwarz at every iteration."""
    args, _ = made_by_args("deep_three_trace", name)
    found = runs([name])
    assert sorted(found) == sorted((a, d, s) for d in args.d for a in args.alpha for s in args.seeds)
    for rows in found.values():
        assert [int(r["t"]) for r in rows] == list(range(1, len(rows) + 1))
        assert len({r["reason"] for r in rows}) == 1
        assert rows[0]["reason"] in {"tol", "oscillating", "max_iter", "refused"}
        for r in rows:
            assert float(r["e_12"]) ** 2 <= float(r["error_1"]) * float(r["error_2"])


@pytest.mark.parametrize("name, shared", [("deep_three_gamp.csv", 6), ("deep_three_gamp_d150.csv", 3),
                                          ("deep_three_gamp_d300.csv", 6)])
def test_each_last_iterate_is_the_committed_run_of_deep_three_gamp(name, shared):
    """The same data set, start and algorithm as ``scripts/deep_three_gamp.py``: where both hold a run (``shared``
    of them in ``name``), the trace's last row is that script's row (errors, predictions, e_12, stop reason and
    iteration count), run at another time."""
    found, seen = runs(), 0
    for e in committed(name)[1]:
        key = (float(e["alpha"]), int(e["d"]), int(e["seed"]))
        if key not in found:
            continue
        seen, last = seen + 1, found[key][-1]
        assert last["reason"] == e["reason"] and (e["reason"] == "refused" or int(last["t"]) == int(e["iterations"]))
        for k in ("1", "2", "3"):
            assert float(last["error_" + k]) == pytest.approx(float(e["mmse_" + k]), abs=1e-9)
            assert float(last["m_" + k]) == pytest.approx(float(e["m_" + k]), abs=1e-9)
        assert float(last["e_12"]) == pytest.approx(float(e["e_12"]), abs=1e-9)
    assert seen == shared


def test_at_alpha_1_the_runs_reach_the_state_evolution_and_then_climb_away():
    """The chapter's finding at alpha = 1, d = 200 and 300 (six runs): each layer's least error over the first 15
    iterations comes at iteration 6 to 9 and lies within 0.026 of the state evolution with q_12 and the mixing
    carried (the means of ``book/data/deep_three_cross_se.csv``); from the tenth iteration on the algorithm's
    prediction stays within 0.033 of it; the runs end with layer 1 0.07 to 0.10 and layer 2 0.03 to 0.18 above
    their least errors.  After 40 iterations, the mean excess over the prediction of layer 2 falls from d = 200
    to 300 and that of layer 1 does not."""
    state, found = paths_at(1.0)
    above = {}
    for d, err, pred in found:
        if d < 200:
            continue
        least = err[:, :15].min(axis=1)
        assert set(err[:, :15].argmin(axis=1) + 1) <= set(range(6, 10))
        assert np.abs(least - state).max() < 0.026
        assert np.abs(pred[:, 9:] - state[:, None]).max() < 0.033
        rise = err[:, -1] - least
        assert 0.069 < rise[0] < 0.101 and 0.034 < rise[1] < 0.177
        above.setdefault(d, []).append(err[:2, 39] - pred[:2, 39])
    assert sorted(above) == [200, 300] and all(len(v) == 3 for v in above.values())
    at_200, at_300 = np.mean(above[200], axis=0), np.mean(above[300], axis=0)
    assert at_300[1] < at_200[1] and at_300[0] > at_200[0]


def test_at_alpha_1_5_the_runs_level_off_above_the_state_evolution():
    """alpha = 1.5, d = 100 and 150 (six runs): each layer's least error along the path lies at least 0.07, 0.04 and
    0.025 above the state evolution with q_12 (0.437, 0.709, 0.259), while the last prediction is within 0.033 of
    it; after 40 iterations the mean excess over the prediction of layers 1 and 2 is smaller at d = 150."""
    state, found = paths_at(1.5)
    above = {}
    for d, err, pred in found:
        assert np.all(err.min(axis=1) - state > [0.07, 0.04, 0.025])
        assert np.abs(pred[:, -1] - state).max() < 0.033
        above.setdefault(d, []).append(err[:2, 39] - pred[:2, 39])
    assert sorted(above) == [100, 150]
    assert np.all(np.mean(above[150], axis=0) < np.mean(above[100], axis=0))
