"""Three-layer GAMP-RIE iteration by iteration (``book/data/deep_three_trace*.csv``): the rows are the runs their
made-by lines name, each run's last iterate is the committed row of ``scripts/deep_three_gamp.py`` for the same
run, and the chapter's finding on the path ("Correlated layers", section "Three layers")."""
from __future__ import annotations

import numpy as np
import pytest

from script_support import committed, import_script, made_by_args

#: the runs at GAMP-RIE's defaults, each ended by its stopping rule
NAMES = ["deep_three_trace.csv", "deep_three_trace_d300.csv", "deep_three_trace_d400.csv", "deep_three_trace_a1.5.csv"]
#: the same runs at alpha = 1 with damping 0.8 (d = 200), and for exactly 200 iterations (d = 100, 200; 300; 400)
DAMPED, LONG = "deep_three_trace_damped.csv", "deep_three_trace_long.csv"
LONG_300, LONG_400 = "deep_three_trace_long_d300.csv", "deep_three_trace_long_d400.csv"
#: the same runs for exactly 80 iterations with the RIEs' own Onsager coefficients from iteration 10 (d = 100, 200)
OWN = "deep_three_trace_own.csv"


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


@pytest.mark.parametrize("name", NAMES + [DAMPED, LONG, LONG_300, LONG_400, OWN])
def test_the_rows_are_every_iteration_of_the_runs_the_made_by_line_names(name):
    """Exactly the (alpha, d, seed) of the made-by command (read by the script's own parser and rebuilt from it);
    each run's rows are its iterations 1, 2, ... in order (all ``--iterations`` of them where it is given), with
    one stop reason; its residuals' cross-covariance and its inputs' noise correlation are within Cauchy-Schwarz
    and its noise ratios positive at every iteration."""
    args, _ = made_by_args("deep_three_trace", name)
    found = runs([name])
    assert sorted(found) == sorted((a, d, s) for d in args.d for a in args.alpha for s in args.seeds)
    for rows in found.values():
        assert [int(r["t"]) for r in rows] == list(range(1, len(rows) + 1))
        assert args.iterations is None or len(rows) == args.iterations
        assert len({r["reason"] for r in rows}) == 1
        assert rows[0]["reason"] in {"tol", "oscillating", "max_iter", "refused"}
        for r in rows:
            assert float(r["e_12"]) ** 2 <= float(r["error_1"]) * float(r["error_2"])
            assert abs(float(r["kappa_R"])) <= 1 and min(float(r[f"noise_{k}"]) for k in (1, 2, 3)) > 0


def test_the_noise_columns_are_the_noise_ratios_gamp_rie_records():
    """At d = 40, eight iterations: ``noise_l`` of the script equals the ``noise_ratio`` of
    :func:`aimlib.amp.gamp_rie`'s own trace and ``||R_l - S_l||^2/(d Delta_l)`` computed here from the callback's
    ``R`` and ``delta``, and the errors its ``error``, on the same data set, start and damping."""
    from aimlib.amp import gamp_rie
    from aimlib.backend import to_host
    from aimlib.model import matrix_overlap

    trace = import_script("deep_three_trace")
    rows = trace.run(1.0, 40, 0, 0.1, damping=0.7, iterations=8)
    ch, data, S, _, init, init_m = import_script("deep_three_gamp").problem(1.0, 40, 0, 0.1)
    here = []

    def ratios(state):
        here.append([matrix_overlap(to_host(R) - s, to_host(R) - s) / float(np.atleast_1d(dl)[0])
                     for R, s, dl in zip(state.R, S, state.delta)])

    rec = gamp_rie(data.X, data.y, ch, data.priors, S=S, init=init, init_m=init_m, damping=0.7, stop="prediction",
                   tol=1e-12, max_iter=8, on_max_iter="return", trace=True, callback=ratios).trace
    assert len(rows) == len(rec["noise_ratio"]) == len(here) == 8
    for r, ratio, mine, error in zip(rows, rec["noise_ratio"], here, rec["error"]):
        assert [r[f"noise_{k}"] for k in (1, 2, 3)] == pytest.approx(ratio, rel=1e-12)
        assert [r[f"noise_{k}"] for k in (1, 2, 3)] == pytest.approx(mine, rel=1e-9)
        assert [r[f"error_{k}"] for k in (1, 2, 3)] == pytest.approx(error, rel=1e-9)


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
    """The chapter's finding at alpha = 1, d = 200, 300 and 400 (nine runs): each layer's least error over the first
    15 iterations comes at iteration 5 to 9 and lies within 0.026 of the state evolution with q_12 and the mixing
    carried (the means of ``book/data/deep_three_cross_se.csv``); from the tenth iteration on the algorithm's
    prediction stays within 0.035 of it; the runs end with layer 1 0.055 to 0.10 and layer 2 0.03 to 0.18 above
    their least errors.  After 40 iterations, the mean excess over the prediction of layer 2 falls from d = 200
    to 300 to 400; that of layer 1 rises from 200 to 300 and is least at 400."""
    state, found = paths_at(1.0)
    above = {}
    for d, err, pred in found:
        if d < 200:
            continue
        least = err[:, :15].min(axis=1)
        assert set(err[:, :15].argmin(axis=1) + 1) <= set(range(5, 10))
        assert np.abs(least - state).max() < 0.026
        assert np.abs(pred[:, 9:] - state[:, None]).max() < 0.035
        rise = err[:, -1] - least
        assert 0.055 < rise[0] < 0.101 and 0.034 < rise[1] < 0.177
        above.setdefault(d, []).append(err[:2, 39] - pred[:2, 39])
    assert sorted(above) == [200, 300, 400] and all(len(v) == 3 for v in above.values())
    at_200, at_300, at_400 = (np.mean(above[d], axis=0) for d in (200, 300, 400))
    assert at_400[1] < at_300[1] < at_200[1] and at_300[0] > at_200[0] > at_400[0]


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


def at_alpha_1(name, d):
    """The runs of ``name`` at alpha = 1 and ``d``: per run, a dict of its columns (arrays over ``t``)."""
    return [{k: np.array([float(r[k]) for r in rows]) for k in rows[0] if k != "reason"} | {"reason": rows[0]["reason"]}
            for (a, dd, _), rows in sorted(runs([name]).items()) if a == 1.0 and dd == d]


def test_as_the_runs_leave_the_state_evolution_their_inputs_leave_its_law():
    """The chapter's table at alpha = 1 (means of three data sets at d = 100, 200, 300, 400): at t = 10 every noise
    ratio is within [0.93, 1.0] and layer 1's falls with d; from t = 10 to 40 layer 1's rises by 0.19, 0.12, 0.12,
    0.08 (within 0.01), layer 2's by 0.07 to 0.14, layer 3's by 0.015 to 0.065, and a_21 grows from below 0.085 to
    above 0.2 (the state evolution's 0.16 between); at t = 40 layer 1's noise ratio falls with d, 1.19, 1.08, 1.06,
    1.02 (within 0.006); a_21 agrees across the four sizes within 0.025 at t = 40 and across d = 100 to 300 at t = 10
    and 20, and at t = 20 is largest at d = 400."""
    _, cse = committed("deep_three_cross_se.csv")
    a21_se = np.mean([float(r["a_21"]) for r in cse if float(r["alpha"]) == 1.0])
    mean = {d: {k: np.mean([r[k][:40] for r in at_alpha_1(name, d)], axis=0)
                for k in ("noise_1", "noise_2", "noise_3", "a_21")}
            for d, name in ((100, NAMES[0]), (200, NAMES[0]), (300, NAMES[1]), (400, NAMES[2]))}
    for d, m in mean.items():
        nu_10 = [m[f"noise_{k}"][9] for k in (1, 2, 3)]
        assert 0.93 <= min(nu_10) and max(nu_10) <= 1.0
        rises = [m[f"noise_{k}"][39] - m[f"noise_{k}"][9] for k in (1, 2, 3)]
        assert rises[0] == pytest.approx({100: 0.19, 200: 0.12, 300: 0.12, 400: 0.08}[d], abs=0.01)
        assert 0.07 < rises[1] < 0.14 and 0.015 < rises[2] < 0.065
        assert m["a_21"][9] < 0.085 < a21_se - 0.07 and m["a_21"][39] > 0.2 > a21_se
    for t in (10, 40):
        nu_1 = [mean[d]["noise_1"][t - 1] for d in (100, 200, 300, 400)]
        assert np.all(np.diff(nu_1) < 0)
    assert nu_1 == pytest.approx([1.19, 1.08, 1.06, 1.02], abs=0.006)
    a21 = {t: [mean[d]["a_21"][t - 1] for d in (100, 200, 300, 400)] for t in (10, 20, 40)}
    assert max(a21[40]) - min(a21[40]) < 0.025
    assert all(max(a21[t][:3]) - min(a21[t][:3]) < 0.025 for t in (10, 20)) and a21[20][3] == max(a21[20])


def test_heavier_damping_follows_the_same_path_in_the_time_one_minus_damping_times_t():
    """The three data sets at d = 200 with damping 0.8 against the same at 0.5: at iteration 5 tau and 2 tau
    (equal (1 - damping) t), for tau from 5 on as far as both run, the errors agree within 0.026, 0.042 and 0.004;
    the damped runs' least errors lie within 0.035 of the state evolution, and each climbs at least 0.05 above
    its least in layer 1."""
    state, _ = paths_at(1.0)
    for slow, fast in zip(at_alpha_1(DAMPED, 200), at_alpha_1(NAMES[0], 200)):
        taus = np.arange(5, min(len(fast["t"]) // 2, len(slow["t"]) // 5) + 1)
        assert len(taus) >= 6
        for k, tol in zip((1, 2, 3), (0.026, 0.042, 0.004)):
            e = slow[f"error_{k}"]
            assert np.abs(e[5 * taus - 1] - fast[f"error_{k}"][2 * taus - 1]).max() < tol
            assert abs(e.min() - state[k - 1]) < 0.035
        assert slow["error_1"][-1] - slow["error_1"].min() > 0.05


def test_taken_past_the_stopping_rule_the_runs_keep_climbing():
    """200 iterations at d = 100 and 200 (six runs): each run's first rows are its stopped run's (to the last
    digit); over iterations 181-200 the errors of layers 1 and 2 average 0.035 to 0.16 above their average over
    81-100, layer 2's above the prior mean's error 1; at iteration 200 every noise ratio exceeds 1.1 and every
    prediction lies below the state evolution, and the final check refuses every state."""
    state, _ = paths_at(1.0)
    base = runs([NAMES[0]])
    for d in (100, 200):
        for key, long in zip(sorted(k for k in base if k[:2] == (1.0, d)), at_alpha_1(LONG, d)):
            stopped = base[key]
            for k in ("error_1", "m_2", "noise_3", "a_21"):
                assert np.array_equal(long[k][:len(stopped)], [float(r[k]) for r in stopped])
            late = [long[f"error_{k}"][180:].mean() - long[f"error_{k}"][80:100].mean() for k in (1, 2)]
            assert 0.035 < min(late) and max(late) < 0.16
            assert long["error_2"][180:].mean() > 1.0
            assert min(long[f"noise_{k}"][-1] for k in (1, 2, 3)) > 1.1
            assert all(long[f"m_{k}"][-1] < state[k - 1] for k in (1, 2, 3))
            assert long["reason"] == "refused"



def test_own_onsager_hands_the_loop_the_ries_own_coefficient_from_its_iteration_on():
    """``OwnOnsager`` returns the RIE's estimate and prediction, and as the Onsager term ``mmse(Delta)`` before its
    iteration and the RIE's own coefficient (``Centred.onsager``) from it on; a run with it from iteration 5 (d = 40,
    eight iterations) has the rows of the plain run to the last digit up to iteration 5 (the coefficient enters
    the channel step after that prior step) and other rows after."""
    from aimlib.priors import Centred
    from aimlib.rmt import sample_goe

    script = import_script("deep_three_trace")
    R, delta = Centred(0.5).sample(60, seed=1) + 2.0 * sample_goe(60, seed=2), 4.0
    prior, plain = script.OwnOnsager(0.5, 3), Centred(0.5).denoise(R, (delta,))
    for t, coefficient in ((2, plain[2][0]), (3, Centred(0.5).onsager(R, delta))):
        prior.t = t
        S_hat, V, V_ons = prior.denoise(R, (delta,))
        assert np.array_equal(S_hat, plain[0]) and V == plain[1] and V_ons == (coefficient,)
    base, own = (script.run(1.0, 40, 0, 0.1, iterations=8, own_onsager=x) for x in (None, 5))
    keys = [k for k in base[0] if k != "reason"]
    assert all(base[t][k] == own[t][k] for t in range(5) for k in keys)
    assert all(base[t]["error_1"] != own[t]["error_1"] for t in range(5, 8))


def test_with_the_ries_own_coefficients_the_drift_slows_and_goes_on():
    """The chapter's table (``deep_three_trace_own.csv`` against ``deep_three_trace_long.csv``, the same runs with
    mmse(Delta); means of three data sets): the two agree to the last digit up to iteration 10; at iteration 80
    layer 1's noise ratio exceeds one by 0.17 and 0.10 (d = 100, 200) against 0.26 and 0.16, 36 and 42 % less
    (within a per cent); layer 1's error is 0.92 and 0.88 against 1.005 and 0.90 (0.85 and 0.81 at iteration 10),
    layer 2's 1.146 and 1.070 against 1.115 and 1.123; every noise ratio is higher at iteration 80 than at 10."""
    own, base = runs([OWN]), runs([LONG])
    mean = {}
    for name, found in (("own", own), ("mmse", base)):
        for d in (100, 200):
            keys = sorted(k for k in found if k[:2] == (1.0, d))
            assert len(keys) == 3
            mean[name, d] = {c: np.mean([[float(r[c]) for r in found[k][:80]] for k in keys], axis=0)
                             for c in ("error_1", "error_2", "noise_1", "noise_2", "noise_3")}
    for key in own:
        assert all(own[key][t][c] == base[key][t][c] for t in range(10) for c in own[key][t] if c != "reason")
    for d, excess, cut, errors in ((100, (0.17, 0.26), 0.36, (0.92, 1.005, 1.146, 1.115)),
                                   (200, (0.10, 0.16), 0.42, (0.88, 0.90, 1.070, 1.123))):
        o, b = mean["own", d], mean["mmse", d]
        assert [round(o["noise_1"][-1] - 1, 2), round(b["noise_1"][-1] - 1, 2)] == list(excess)
        assert 1 - (o["noise_1"][-1] - 1) / (b["noise_1"][-1] - 1) == pytest.approx(cut, abs=0.01)
        found_errors = (o["error_1"][-1], b["error_1"][-1], o["error_2"][-1], b["error_2"][-1])
        assert found_errors == pytest.approx(errors, abs=0.005)
        assert all(o[f"noise_{k}"][-1] > o[f"noise_{k}"][9] for k in (1, 2, 3))
        assert round(o["error_1"][9], 2) == {100: 0.85, 200: 0.81}[d]
