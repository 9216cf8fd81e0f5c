"""Gradient descent fails loudly (issue 22, item 7): the rules of :mod:`aimlib.gd.checks`.

Divergence and no progress raise ``ConvergenceError`` (exit status 1), the
iteration cap follows ``on_max_iter``, and inputs that would be changed in
silence (``n`` or a width clamped to 1, targets uniform to ``tol``) are refused.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from aimlib import ConvergenceError, channels, cli, gd, model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def small():
    """A softmax data set at d = 12 (n = 43) where Adam at the defaults trains well."""
    return model.sample_dataset(0.3, 12, 2, 0.5, channels.Softmax(), 0)


# ---------------------------------------------------------------------------
# divergence
# ---------------------------------------------------------------------------

def test_an_estimate_far_worse_than_the_data_free_one_is_divergence():
    # rho = 100: Adam at lr = 0.1 doubles Tr S_hat^2/d, error 57.6 against 1 for sqrt(rho) I; the digits after
    # "57." follow float32 rounding, which a diverging run amplifies (the order of the index sums moves them)
    with pytest.raises(ConvergenceError, match=r"diverged: the estimation error of restart 0 \(of 1\) is 57\.\d+, "
                                               r"above 20 times .* \(Tr S/d\) I \(0\.96.*lower lr"):
        gd.run_gd(2, 100, 0.3, 20, 0, steps=50, lr=0.1)
    # the advice works: at lr = 0.01 the same data train to an error near the prior's; it is the default
    # there, 0.1 / sqrt(r/d) for Adam on a student of width r = 100 d (aimlib.gd.optim.default_lr)
    out = gd.run_gd(2, 100, 0.3, 20, 0, steps=50, lr=0.01)
    assert out["mmse_single"] < 3 and out["train_loss"][0] < 0.035
    default = gd.run_gd(2, 100, 0.3, 20, 0, steps=50)
    assert default["lr"] == 0.01 and default["mmse_single"] == out["mmse_single"]


def test_a_loss_that_rises_is_divergence_and_one_restart_fails_the_run(small):
    with pytest.raises(ConvergenceError, match=r"diverged: the training loss of restart 0 \(of 2\) went from "
                                               r"0\.3673 to 0\.5946 in 20 steps \(optimizer='adam', lr=10"):
        gd.train_gd(small.X, small.y, rho=0.5, restarts=2, seed=3, steps=20, lr=10.0)
    # restart 0 trains, restart 1 rises: the run fails, naming restart 1
    with pytest.raises(ConvergenceError, match=r"restart 1 \(of 2\) went from 0\.2094 to 0\.3391"):
        gd.train_gd(small.X, small.y, rho=0.5, restarts=2, seed=3, steps=20, lr=3.0)


# ---------------------------------------------------------------------------
# no progress, beta
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("steps", [1, 50])
def test_a_saturated_softmax_makes_no_progress(steps):
    # beta = 1e30: every row one-hot, the gradient exactly zero, the loss flat
    with pytest.raises(ConvergenceError, match=r"no progress: the training loss of restart 0 \(of 1\) went from "
                                               rf"0\.7417 to 0\.7417 in {steps} steps .*beta=1e\+30"):
        gd.run_gd(2, 0.5, 0.3, 20, 0, steps=steps, beta=1e30)


def test_a_step_too_small_to_move_the_weights_makes_no_progress(small):
    with pytest.raises(ConvergenceError, match="no progress"):
        gd.train_gd(small.X, small.y, rho=0.5, steps=5, lr=1e-30)


def test_one_step_that_lowers_the_loss_is_a_result(small):
    out = gd.run_gd(2, 0.5, 0.3, 20, 0, steps=1, return_result=True)
    loss = out["result"].train_loss[0]
    assert loss[-1] < loss[0] and out["n_steps"] == [1] and out["converged"] == [False]


@pytest.mark.parametrize("steps", [1, 50, 500])
def test_targets_uniform_to_tol_are_refused_naming_beta(steps):
    # beta = 1e-30: softmax(beta h) is exactly 1/T, every student fits, training would stop at step 0
    with pytest.raises(ValueError, match=r"no information at tol=1e-10: .* loss 0 <= tol, .* beta=1e-30 is too "
                                         r"small .* raise beta or lower tol"):
        gd.run_gd(2, 0.5, 0.3, 20, 0, steps=steps, beta=1e-30)


def test_uniform_targets_are_refused_by_every_student(small):
    y = np.full_like(small.y, 0.5)
    for train in (gd.train_gd, gd.train_deep_gd, gd.train_heads_gd):
        with pytest.raises(ValueError, match="no information at tol=0"):
            train(small.X, y, steps=3, tol=0.0)


def test_a_student_started_at_a_zero_loss_needs_no_progress(small):
    # the stopping rule, not a failure: a restart at loss <= tol (here the teacher) stops at step 0
    out = gd.train_gd(small.X, small.y, student="direct", init=small.S, steps=3, on_max_iter="raise")
    assert out.converged.all() and (out.n_steps == 0).all() and out.train_loss[0, -1] <= 1e-10


def test_a_tol_that_the_uniform_output_meets_is_refused(small):
    with pytest.raises(ValueError, match=r"no information at tol=1: the constant output 1/T already has training "
                                         r"loss 0\.174 <= tol, .* \(or tol too large\)"):
        gd.train_gd(small.X, small.y, rho=0.5, steps=3, tol=1.0)


# ---------------------------------------------------------------------------
# the iteration cap
# ---------------------------------------------------------------------------

def test_the_cap_follows_on_max_iter(small):
    kw = dict(rho=0.5, restarts=2, seed=3, steps=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = gd.train_gd(small.X, small.y, **kw)          # default 'return': a fixed budget of steps
    assert not quiet.converged.any()
    with pytest.warns(RuntimeWarning, match=r"2 of 2 restarts did not reach training loss tol=1e-10 within "
                                            r"steps=5 \(returned as not converged\)"):
        warned = gd.train_gd(small.X, small.y, on_max_iter="warn", **kw)
    np.testing.assert_array_equal(warned.W, quiet.W)
    with pytest.raises(ConvergenceError, match="did not reach training loss tol"):
        gd.train_gd(small.X, small.y, on_max_iter="raise", **kw)
    with pytest.raises(ConvergenceError, match="did not reach"):
        gd.train_deep_gd(small.X, small.y, steps=3, on_max_iter="raise")
    with pytest.raises(ConvergenceError, match="did not reach"):
        gd.run_heads_gd(2, 0.5, 0.3, 12, heads=2, seed=0, steps=3, on_max_iter="raise")
    with pytest.raises(ValueError, match="on_max_iter must be one of"):
        gd.train_gd(small.X, small.y, on_max_iter="ignore", **kw)
    # met tol: nothing to say whatever on_max_iter
    assert gd.train_gd(small.X, small.y, student="direct", init=small.S, steps=5, on_max_iter="raise").converged.all()


# ---------------------------------------------------------------------------
# values that would change in silence
# ---------------------------------------------------------------------------

def test_an_alpha_that_gives_no_sample_is_refused():
    match = r"alpha must give at least one sample, n = round\(alpha d\^2\) >= 1: alpha > 0\.00125 at d = 20, got 1e-300"
    for run in (gd.run_gd, gd.run_deep_gd, gd.run_heads_gd):
        with pytest.raises(ValueError, match=match):
            run(2, (0.5, 0.5) if run is gd.run_deep_gd else 0.5, 1e-300, 20, seed=0, steps=3)
    assert gd.run_gd(2, 0.5, 0.6 / 400, 20, seed=0, steps=3)["n"] == 1   # rounds to one sample


def test_a_width_ratio_that_gives_no_column_is_refused(small):
    with pytest.raises(ValueError, match=r"rho must give a width r = round\(rho d\) >= 1: rho > 0\.025 at d = 20, "
                                         r"got 0\.001"):
        gd.run_gd(2, 0.001, 0.3, 20, 0, steps=3)
    with pytest.raises(ValueError, match=r"rho\[1\] must give a width .* rho\[1\] > 0\.025 at d = 20"):
        gd.run_deep_gd(2, (0.5, 0.001), 0.3, 20, seed=0, steps=3)
    with pytest.raises(ValueError, match=r"rho must give a width .* rho > 0\.04167 at d = 12"):
        gd.train_gd(small.X, small.y, rho=0.001, steps=3)
    with pytest.raises(ValueError, match=r"rho\[0\] must give a width"):
        gd.train_heads_gd(small.X, small.y, heads=2, rho=(0.001, 0.5), steps=3)


# ---------------------------------------------------------------------------
# the command line: exit 1 (solver failure) or 2 (bad input), one line
# ---------------------------------------------------------------------------

def _gd_args(extra):
    args = {"--alpha": "0.3", "--rho": "0.5", "--d": "20", "--steps": "50"}
    args.update(dict(zip(extra[::2], extra[1::2])))
    return ["gd", *(x for kv in args.items() for x in kv)]


@pytest.mark.parametrize("extra, status, words", [
    (["--rho", "100", "--lr", "0.1"], 1, "gradient descent diverged: the estimation error of restart 0 (of 1) is 57."),
    (["--alpha", "1e-300"], 2, "alpha must give at least one sample"),
], ids=["rho100", "alpha1e-300"])
def test_cli_gd_failures_exit_nonzero_with_one_line(extra, status, words):
    proc = subprocess.run([sys.executable, "-m", "aimlib", *_gd_args(extra)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == status and proc.stdout == ""
    assert len(err) == 1 and words in err[0], proc.stderr


@pytest.mark.parametrize("extra, status, words", [
    (["--beta", "1e30"], 1, "gradient descent made no progress"),
    (["--beta", "1e-30"], 2, "beta=1e-30 is too small"),
], ids=["beta1e30", "beta1e-30"])
def test_cli_gd_beta_out_of_reach_exits_nonzero(capsys, extra, status, words):
    assert cli.main(_gd_args(extra)) == status
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and words in err[0]
