"""GAMP-RIE's stopping rules and final check as the predicted error ``m`` goes to 0 (issue 22, item 6).

Above perfect recovery (softmax, T = 2, rho = 0.5: alpha_PR = 0.1875) GAMP-RIE
at small ``d`` does one of two things:

* its prediction *collapses*: ``m`` halves at every iteration down to 0 (the
  effective noise ``Delta`` vanishes) while the measured error stays at
  ``10^-3 .. 10^-1``.  The old rules reported this as convergence ('tol' once
  the move was small in units of the vanishing ``m``, or 'perfect'), and the old
  absolute check (``|e - m| <= 0.25 + max(e, m)/2``) let it pass: exit 0 with a
  wrong answer.  It must be a ConvergenceError (exit 1).
* it *does* recover ``S``, but ``m`` decays only like ``t^-2`` and stays about a
  hundred times above the measured error (``m = 4e-4``, error ``2e-6`` at
  iteration 300 for d = 40): the old relative rule ``change <= tol m`` never
  fired and the run failed at ``max_iter``.  It must end as 'perfect' (exit 0).

Every case below was checked to behave wrongly before the fix.  Each run takes
well under two seconds.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aimlib import ConvergenceError, amp, channels, model

ROOT = Path(__file__).resolve().parents[1]
RHO = 0.5


def _run(channel="softmax", T=2, rho=RHO, alpha=0.3, d=40, seed=0, **kw):
    return amp.run_amp(channel, T, rho, alpha, d, seed, **kw)


# ----------------------------------------------------------------------------- collapsed predictions
@pytest.mark.parametrize("kw", [
    dict(seed=4),                           # the report: exit 0 with mmse 0.0442 at m ~ 1e-6
    dict(seed=0),                           # mmse 0.0106 at m ~ 3e-7
    dict(seed=2),                           # mmse 0.0021 at m ~ 5e-8: close to S, but GAMP is stuck there
    dict(alpha=20.0, d=20),                 # the report: exit 0 with 0.384
    dict(T=200, d=10, alpha=0.05),          # the report's T = 1000 case (exit 0, "perfect", 0.414), faster
    dict(channel="hardmax", rho=1e-3, alpha=0.5),        # tiny rho: m -> 0 at errors 0.06 .. 0.26
    dict(tokens="rademacher"),              # non-Gaussian tokens: 0.024 at m ~ 6e-7
    dict(dtype="float32"),                  # float32: stopped as 'perfect' at m < sqrt(eps_32), error 0.011
    dict(channel="linear", T=3, alpha=0.1, d=30, seed=0),   # linear noiseless, T = 3: 0.061 at m ~ 7e-7
], ids=["seed4", "seed0", "seed2", "alpha20", "T200", "hardmax-rho1e-3", "rademacher", "float32", "linear-T3"])
def test_a_collapsed_prediction_is_a_convergence_error(kw):
    with pytest.raises(ConvergenceError, match="inconsistent state"):
        _run(**kw)


def test_the_collapse_is_a_failure_whatever_on_max_iter():
    # the check applies to every run that claims convergence, also with on_max_iter="return"
    with pytest.raises(ConvergenceError, match=r"measured error 0\.044.*predicted"):
        _run(seed=4, on_max_iter="return")


def test_a_collapse_returned_at_the_cap_is_a_failure():
    # at max_iter=20 the prediction has collapsed to 1e-4 while the error is 0.044: a row
    # returned unconverged may lag behind (m above e), never claim better than it measured
    with pytest.raises(ConvergenceError, match="at the cap"):
        _run(seed=4, max_iter=20, on_max_iter="return")


def test_a_slow_recovery_returned_at_the_cap_is_flagged_not_refused():
    r = _run(seed=1, max_iter=60, on_max_iter="return")   # m decays slowly, the error faster
    assert not r["converged"] and r["reason"] == "max_iter" and r["mmse"] < r["m"]


# ----------------------------------------------------------------------------- slow perfect recovery
@pytest.mark.parametrize("seed", [1, 5, 6, 7])
def test_slow_perfect_recovery_ends_as_perfect(seed):
    d = 40
    r = _run(seed=seed, trace=True)
    assert r["converged"] and r["reason"] == "perfect"
    assert r["iterations"] < 250                      # 170 .. 193 for these seeds
    assert r["m"] < 2 / d**2                          # stalled below the resolution 2/d^2
    assert r["mmse"] < 1e-4 and r["mmse"] <= r["m"]   # and the estimate is at least as good as predicted
    # the run ended because m stopped falling fast, not because the estimate stopped moving
    m = np.asarray(r["trace"]["m"])
    assert m[-1] * 2 >= m[-11]


@pytest.mark.parametrize("kw", [
    dict(channel="linear", seed=0),        # noiseless linear channel
    dict(tokens="rademacher", seed=1),
    dict(dtype="float32", seed=1),
], ids=["linear", "rademacher", "float32"])
def test_slow_perfect_recovery_other_channels(kw):
    r = _run(**kw)
    assert r["reason"] == "perfect" and r["mmse"] < 1e-4 and r["m"] < 2 / 40**2


def test_a_stall_claims_an_error_below_the_resolution():
    # d = 20: m stalls near 4e-3 (resolution 2/d^2 = 5e-3) on its way to a collapse at an error
    # of 8e-3; e and m agree within the relative allowance at d = 20, but the stop claims e < 5e-3
    with pytest.raises(ConvergenceError, match="stalled below 0.005 needs an error below it"):
        _run(alpha=0.2, d=20, seed=11)
    r = _run(channel="linear", alpha=0.2, d=20, seed=11)   # the same stop, where the claim holds
    assert r["reason"] == "perfect" and r["mmse"] < 2 / 20**2


def test_resolution_zero_restores_the_old_stopping():
    # without the stall rule the slowly converging run is not done at 300 iterations
    with pytest.raises(ConvergenceError, match="did not converge in max_iter=300"):
        _run(seed=1, resolution=0.0)


def test_fast_perfect_recovery_goes_on_to_m_floor():
    # a run still converging fast is not cut at the resolution: it reaches m < sqrt(eps)
    r = _run(rho=0.1, seed=0)
    assert r["reason"] == "perfect" and r["m"] < np.sqrt(np.finfo(float).eps)
    assert r["mmse"] < 1e-6


# ----------------------------------------------------------------------------- the check itself
def test_a_state_below_threshold_with_a_large_gap_passes_the_check():
    # the largest relative gap between e and m at d = 40 (e = 0.49, m = 0.35): the check allows it.  The
    # step rule calls the run converged; its iterates wander, which the window rule reports
    r = _run(alpha=0.1, seed=0, stop="estimate")
    assert r["reason"] == "tol" and 0.3 < r["mmse"] < 0.6
    cyc = _run(alpha=0.1, seed=0, on_max_iter="return")
    assert cyc["reason"] == "oscillating" and not cyc["converged"] and 0.3 < cyc["mmse"] < 0.6
    with pytest.raises(ConvergenceError, match="oscillating .* wanders without a period"):
        _run(alpha=0.1, seed=0)


def test_user_tolerances_stop_without_m():
    # tol * m + atol: with the stall rule and m_floor off, a run that reaches S exactly still stops
    ch = channels.Linear()
    data = model.sample_dataset(1.0, 20, 2, RHO, ch, 0)
    res = amp.gamp_rie(data.X, data.y, ch, RHO, S=data.S, m_floor=0.0, resolution=0.0, max_iter=300)
    assert res.converged and res.mmse < 1e-8
    assert res.options["m_floor"] == 0.0 and res.options["resolution"] == 0.0


@pytest.mark.parametrize("kwargs, match", [(dict(resolution=-1.0), "resolution"),
                                           (dict(m_floor=-1.0), "m_floor")])
def test_bad_floors(kwargs, match):
    ch = channels.Linear(noise=0.5)
    data = model.sample_dataset(0.05, 20, 2, RHO, ch, 0)
    with pytest.raises(ValueError, match=match):
        amp.gamp_rie(data.X, data.y, ch, RHO, **kwargs)


# ----------------------------------------------------------------------------- command line
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "aimlib", "amp", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_exit_status_follows_the_check():
    bad = _cli("--alpha", "0.3", "--d", "40", "--seed", "4")
    assert bad.returncode == 1, (bad.stdout, bad.stderr)
    assert "inconsistent state" in bad.stderr and bad.stdout == ""
    good = _cli("--alpha", "0.3", "--d", "40", "--seed", "1")
    assert good.returncode == 0, good.stderr
    header, row = good.stdout.strip().splitlines()
    values = dict(zip(header.split(","), row.split(",")))
    assert float(values["mmse"]) < 1e-4 and int(values["iterations"]) < 300


# --- the rule stop='drift': extrapolated distance to the limit -----------------------------

class _Rules:
    tol, m_floor = 1e-4, 1e-8


def _drift_stop(r, wobble=0.0, d=20, k=10, max_iter=2000):
    """Feed ``S_t = S* + r^t E + wobble (-1)^t F`` to :class:`aimlib.amp.loop.BlockDrift` (m = 1);
    return the iteration it stops at and the squared distance per d of that block's mean to ``S*``."""
    rng = np.random.default_rng(0)
    S_star, E, F = (rng.standard_normal((d, d)) for _ in range(3))
    E *= np.sqrt(d / np.sum(E * E))                  # ||E||_F^2 / d = 1
    drift, block = amp.loop.BlockDrift(k), []
    for t in range(1, max_iter + 1):
        S = S_star + r**t * E + wobble * (-1) ** t * F
        block.append(S)
        _, still = drift.update([S], np.array([1.0]), d, _Rules, 0.0, np)
        if still:
            mean = np.mean(block[-k:], axis=0)
            return t, float(np.sum((mean - S_star) ** 2)) / d
    return None, None


@pytest.mark.parametrize("r", [0.8, 0.95, 0.99])
def test_drift_stops_when_the_distance_left_is_within_tol(r):
    """A geometric drift stops once the block mean is within tol (times a margin for the
    lag of one block) of the limit, where one iteration's step is far smaller."""
    t, left = _drift_stop(r)
    assert t is not None and left <= 4 * _Rules.tol
    step = (r ** (t - 1) - r**t) ** 2                 # ||S_t - S_{t-1}||^2 / d at the stop
    assert step < _Rules.tol * (1 - r) ** 1.5         # the step rule would have stopped long before


def test_drift_averages_out_an_oscillation_of_period_two():
    t, left = _drift_stop(0.95, wobble=0.05)
    assert t is not None and left <= 4 * _Rules.tol


def test_a_drift_that_does_not_shrink_never_stops():
    rng = np.random.default_rng(1)
    drift, E = amp.loop.BlockDrift(10), rng.standard_normal((10, 10))
    for t in range(1, 300):
        _, still = drift.update([t * 1e-3 * E], np.array([1.0]), 10, _Rules, 0.0, np)
        assert not still


@pytest.mark.slow
def test_drift_reaches_the_limit_where_the_step_rule_stops_early():
    """Hardmax, T = 2, rho = 0.5, alpha = 1, d = 50: the step rule ('estimate') stops about 10 % above the
    algorithm's limit (contraction per iteration about 0.96); 'drift' lands within 0.5 % of a run
    with a ten times smaller tolerance."""
    step = (("stop", "estimate"),)
    runs = {kw: amp.run_amp("hardmax", 2, 0.5, 1.0, 50, seed=0, max_iter=600, **dict(kw))
            for kw in (step, (("stop", "drift"),), (("stop", "drift"), ("tol", 1e-5)))}
    default, drift, tight = (r["mmse"] for r in runs.values())
    assert drift == pytest.approx(tight, rel=5e-3)
    assert default > 1.05 * tight
    assert runs[(("stop", "drift"),)]["iterations"] > 3 * runs[step]["iterations"]


def test_bad_stop_rule_is_named():
    with pytest.raises(ValueError, match="stop must be one of"):
        _run(d=20, stop="steps")


def test_sweeps_take_the_stopping_rule_and_key_the_default_apart_from_the_former_one():
    from aimlib import sweep
    spec = {"method": "amp", "channel": "hardmax", "T": 2, "rho": 0.5, "alpha": 1.0, "d": 20, "seeds": [0]}
    plain = sweep.expand(dict(spec))
    runs = sweep.expand(dict(spec, options={"amp": {"stop": ["estimate", "drift", "window"]}}))
    # the default ('window') is a key of its own; 'estimate' keeps the key of the rows written before the
    # option was keyed, whose runs it made
    assert len(runs) == 3 and ("stop", "window") in plain[0].options
    assert next(r for r in runs if ("stop", "window") in r.options).key == plain[0].key
    assert all(k != "stop" for k, _ in next(r for r in runs if r.key != plain[0].key
                                            and ("stop", "drift") not in r.options).options)
    drift = next(r for r in runs if ("stop", "drift") in r.options)
    row = sweep.execute(drift)
    alone = amp.run_amp("hardmax", 2, 0.5, 1.0, 20, seed=0, stop="drift")
    assert row["mmse"] == pytest.approx(alone["mmse"], abs=1e-12) and row["iterations"] == alone["iterations"]
    with pytest.raises(sweep.SpecError, match="stop"):
        sweep.expand(dict(spec, options={"amp": {"stop": "steps"}}))


# --- the rule stop='window': the distance to the fixed point over a window (aimlib.iteration) ---

def test_window_does_not_take_heavy_damping_for_convergence():
    """Softmax, alpha = 0.1, d = 60, damping 0.99: the former default stops after 3 iterations at the prior's
    error (1.02, the state evolution 0.39); 'window' is still running at the cap."""
    kw = dict(alpha=0.1, d=60, damping=0.99, max_iter=150, on_max_iter="return")
    former = amp.run_amp("softmax", 2, RHO, seed=0, stop="estimate", **kw)
    window = amp.run_amp("softmax", 2, RHO, seed=0, **kw)
    assert former["converged"] and former["iterations"] <= 5 and former["mmse"] > 1.0
    assert not window["converged"] and window["iterations"] == 150


@pytest.mark.slow
def test_window_reaches_the_fixed_point_where_the_step_rule_stops_early():
    """Hardmax, T = 2, rho = 0.5, alpha = 0.7, d = 80, seed 0: the step rule stops at 0.1462 after 26
    iterations; the fixed point (tol 1e-8) is 0.1406; 'window' lands within 0.5 % of it."""
    former = amp.run_amp("hardmax", 2, RHO, 0.7, 80, seed=0, stop="estimate")
    window = amp.run_amp("hardmax", 2, RHO, 0.7, 80, seed=0, max_iter=600)
    tight = amp.run_amp("hardmax", 2, RHO, 0.7, 80, seed=0, tol=1e-8, max_iter=3000)
    assert window["converged"] and tight["converged"]
    assert window["mmse"] == pytest.approx(tight["mmse"], rel=5e-3)
    assert former["mmse"] > 1.03 * tight["mmse"]


def test_an_oscillation_is_reported_never_converged(monkeypatch):
    """A cycle found by the window rule ends the run as 'oscillating', with its period and amplitude."""
    from aimlib import iteration

    cycle = iteration.Verdict("oscillating", np.inf, 1.0, 3, 0.25)
    monkeypatch.setattr(iteration.WindowRule, "update", lambda self, step, bound, back=None: cycle)
    with pytest.raises(ConvergenceError, match=r"oscillating at iteration 2: .* 3 iterations before, the "
                                               r"iterates 0\.25 sqrt\(m\) apart, more than sqrt\(tol\) = 0\.01 "
                                               r".* larger d .* tol >= 0\.062"):
        _run(d=20, stop="window")
    res = _run(d=20, stop="window", on_max_iter="return")
    assert not res["converged"] and res["iterations"] == 2


def test_the_callback_sees_every_iteration_and_init_m_starts_the_prediction():
    """gamp_rie(callback=...) hands each iteration's state (scripts/hardmax_alpha1.py records its
    diagnostics this way); init_m sets the starting m."""
    seen = []
    res = _run(d=20, max_iter=5, tol=1e-300, on_max_iter="return", trace=True,
               callback=lambda s: seen.append((s.t, s.V[0][0], s.g.shape, float(np.sum(s.S_hat[0] ** 2)))))
    assert [t for t, *_ in seen] == [1, 2, 3, 4, 5] and res["iterations"] == 5
    assert seen[0][2] == (int(0.3 * 20 * 20), 1, 2, 2)
    started = []
    with contextlib.suppress(ConvergenceError):      # m = 0.25 from the prior mean: the final check refuses it
        _run(d=20, max_iter=1, on_max_iter="return", init_m=0.25, damping=0.5,
             callback=lambda s: started.append(s.V[0][0]))
    free = []
    _run(d=20, max_iter=1, on_max_iter="return", damping=0.5, callback=lambda s: free.append(s.V[0][0]))
    same = []
    _run(d=20, max_iter=1, on_max_iter="return", damping=0.5, init_m=1.0,     # the prior's own error, 1 - 0
         callback=lambda s: same.append(s.V[0][0]))
    assert same == free and started[0] < 0.6 * free[0]
    with pytest.raises(ValueError, match="init_m"):
        _run(d=20, init_m=-1.0)
