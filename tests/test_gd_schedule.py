"""Tests of aimlib.gd.schedule: the step decay, the parameters of lowest training loss, the curves at budgets."""
import numpy as np
import pytest

from aimlib import channels, cli, gd, model

T, RHO, D = 2, 0.5, 10


def _problem(seed=0, alpha=0.3):
    """A small softmax data set ``(X, y, S)``."""
    data = model.sample_dataset(alpha, D, T, RHO, channels.Softmax(1.0), seed=seed, backend="numpy")
    return np.asarray(data.X, dtype=np.float64), np.asarray(data.y, dtype=np.float64), np.asarray(data.S)


def test_step_decay_equals_two_runs_of_plain_gradient_descent():
    """Plain gradient descent has no state: a decay at step t is t steps at lr, then the rest at lr * factor."""
    X, y, S = _problem()
    common = dict(rho=RHO, restarts=3, seed=1, optimizer="gd", S=S, tol=0)
    decayed = gd.train_gd(X, y, steps=40, lr=0.5, lr_decay_at=15, lr_decay=0.2, **common)
    first = gd.train_gd(X, y, steps=15, lr=0.5, **common)
    second = gd.train_gd(X, y, steps=25, lr=0.1, init=first.W, **{**common, "restarts": 1})
    np.testing.assert_allclose(decayed.W, second.W, rtol=1e-10, atol=1e-12)
    assert decayed.lr == 0.5   # the step as given, before the decay
    fixed = gd.train_gd(X, y, steps=40, lr=0.5, **common)
    assert np.abs(fixed.W - decayed.W).max() > 1e-6


def test_lowest_loss_parameters_are_those_of_the_run_stopped_at_its_lowest_loss():
    """``keep='lowest'``: the argmin of the per-step training loss, rerun to that step, gives the same weights."""
    X, y, S = _problem()
    common = dict(rho=RHO, restarts=4, seed=2, S=S, tol=0, lr=0.3)
    last = gd.train_gd(X, y, steps=60, record_every=1, **common)
    low = gd.train_gd(X, y, steps=60, record_every=1, keep="lowest", **common)
    np.testing.assert_array_equal(last.train_loss, low.train_loss)   # the same trajectory
    best = np.argmin(last.train_loss, axis=1)
    np.testing.assert_array_equal(low.step_lowest, best)
    assert low.keep == "lowest" and last.keep == "last" and last.mmse_lowest_curve is None
    for i in range(4):
        if best[i] == 0:
            np.testing.assert_allclose(low.mmse_single[i], last.mmse_curve[i, 0])
            continue
        stopped = gd.train_gd(X, y, steps=int(best[i]), rho=RHO, restarts=4, seed=2, tol=0, lr=0.3)
        np.testing.assert_allclose(low.W[i], stopped.W[i], rtol=1e-5, atol=1e-6)
    # at each recorded step s, the error of the restart's parameters of lowest loss up to s
    for j in (5, 30, 60):
        upto = np.argmin(last.train_loss[:, :j + 1], axis=1)
        np.testing.assert_allclose(low.mmse_lowest_curve[:, j], last.mmse_curve[np.arange(4), upto], rtol=1e-5)
    np.testing.assert_allclose(low.mmse_lowest_curve[:, -1], low.mmse_single, rtol=1e-5)
    np.testing.assert_allclose(low.mmse_lowest_averaged_curve[-1], low.mmse_averaged, rtol=1e-5)


def test_run_gd_records_the_errors_at_the_budgets_of_one_run():
    """``record_every`` gives the errors at every budget; a run of that budget ends where the curve says."""
    kw = dict(restarts=2, dtype=np.float64, lr=0.1)
    out = gd.run_gd(T, RHO, 0.3, D, seed=3, steps=40, record_every=20, return_result=True, **kw)
    res = out["result"]
    np.testing.assert_array_equal(res.steps, [0, 20, 40])
    short = gd.run_gd(T, RHO, 0.3, D, seed=3, steps=20, **kw)
    np.testing.assert_allclose(res.mmse_curve[:, 1], short["mmse_single_all"], rtol=1e-8)
    assert out["keep"] == "last"


@pytest.mark.parametrize("options, name", [
    (dict(steps=10, lr_decay_at=10), "lr_decay_at"),
    (dict(steps=10, lr_decay_at=0), "lr_decay_at"),
    (dict(steps=1, lr_decay_at=1), "lr_decay_at"),
    (dict(steps=10, lr_decay_at=5, lr_decay=0.0), "lr_decay"),
    (dict(steps=10, lr_decay_at=5, lr_decay=1.5), "lr_decay"),
    (dict(steps=10, keep="best"), "keep"),
])
def test_bad_schedules_are_refused_by_name(options, name):
    X, y, _ = _problem()
    with pytest.raises(ValueError, match=name):
        gd.train_gd(X, y, rho=RHO, **options)


def test_command_line_schedule_reaches_the_run(capsys):
    """``gd --keep lowest --lr-decay-at`` gives the row of ``run_gd`` with the same options."""
    argv = ["gd", "--T", "2", "--rho", "0.5", "--alpha", "0.3", "--d", "10", "--seed", "4", "--restarts", "2",
            "--steps", "60", "--keep", "lowest", "--lr-decay-at", "20", "--lr-decay", "0.5", "--dtype", "float64"]
    assert cli.main(argv) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    printed = dict(zip(header.split(","), row.split(",")))
    out = gd.run_gd(T, RHO, 0.3, D, seed=4, restarts=2, steps=60, keep="lowest", lr_decay_at=20, lr_decay=0.5,
                    dtype=np.float64)
    assert float(printed["mmse_single"]) == pytest.approx(out["mmse_single"], rel=1e-9)
    plain = gd.run_gd(T, RHO, 0.3, D, seed=4, restarts=2, steps=60, dtype=np.float64)
    assert plain["mmse_single"] != pytest.approx(out["mmse_single"], rel=1e-6)
