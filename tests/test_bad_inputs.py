"""Regression tests of a bad-input campaign: the exit-status contract and the errors that name parameters.

Every command exits 0 with a result, 1 on a solver failure, 2 on bad input
(one line naming the parameter); never a traceback, never a wrong number
reported as a success.
"""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import amp, cli, model
from aimlib import state_evolution as se
from aimlib.channels import Softmax, hardmax


def run(capsys, argv):
    """``(status, stdout, stderr)`` of ``python -m aimlib ARGV``, in process (argparse exits too)."""
    try:
        status = cli.main(argv)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def _one_line_error(err, *words):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:   # a word, or a tuple of alternatives
        assert any(a in lines[0] for a in ((w,) if isinstance(w, str) else w)), (w, lines[0])


# Far below any threshold the iteration is unstable, and rounding (the BLAS, its thread
# count, a GPU) decides which guard trips first at d = 100: either is a clean failure.
@pytest.mark.parametrize("argv, words", [
    (["amp", "--alpha", "0.005", "--d", "50", "--seed", "0"], ["inconsistent state", "measured error"]),
    (["amp", "--alpha", "0.01", "--d", "100", "--seed", "0"], [("inconsistent state", "did not converge")]),
    (["amp", "--alpha", "0.1", "--d", "20", "--max-iter", "2"], ["did not converge", "max_iter=2"]),
])
def test_solver_failures_exit_1(capsys, argv, words):
    status, out, err = run(capsys, argv)
    assert status == 1 and out == ""
    _one_line_error(err, *words)


def test_an_unconverged_row_only_on_request(capsys):
    status, out, _ = run(capsys, ["amp", "--alpha", "0.1", "--d", "20", "--max-iter", "2",
                                  "--on-max-iter", "return"])
    assert status == 0 and out.splitlines()[0] == "alpha,d,seed,mmse,iterations,seconds"


@pytest.mark.parametrize("argv, words", [
    (["amp", "--alpha", "1e308", "--d", "50"], ["alpha must be in (0, "]),
    (["amp", "--alpha", "0.1", "--d", "100000000"], ["more than memory_mb", "d = 100000000"]),
    (["gd", "--alpha", "1e308", "--d", "20"], ["alpha"]),
    (["gd", "--alpha", "0.1", "--d", "20", "--steps", "5", "--restarts", "100000000"], ["restarts"]),
    (["amp", "--rho", "2e4", "--alpha", "0.1", "--d", "30"], ["rho must be in [0.0001, 10000.0]"]),
    (["amp", "--beta", "100", "--alpha", "0.1", "--d", "30"], ["beta = 100", "beta must be lower"]),
    (["gd", "--beta", "1e308", "--alpha", "0.1", "--d", "20"], ["beta must be in (0, 1e+30]"]),
    (["se", "--T", "1", "--alpha", "0.1"], ["T must be >= 2"]),
    (["threshold", "--T", "1"], ["T must be >= 2"]),
    (["se", "--channel", "hardmax", "--beta", "2", "--alpha", "0.1"], ["beta is not a parameter of the hardmax"]),
    (["amp", "--channel", "linear", "--beta", "2", "--alpha", "0.1", "--d", "20"], ["beta is not a parameter"]),
    (["threshold", "--channel", "hardmax", "--rho", "0", "--T", "3", "--noise", "1"], ["--T 2, no --noise"]),
    (["se", "--alpha", "0.1", "--alpha", "0.2"], ["--alpha given twice"]),
])
def test_bad_input_exits_2_naming_the_parameter(capsys, argv, words):
    status, out, err = run(capsys, argv)
    assert status == 2 and out == ""
    _one_line_error(err, *words)


def test_cupy_without_a_gpu_is_bad_input(capsys, monkeypatch):
    from aimlib import backend

    monkeypatch.setattr(backend, "_CUPY", None)
    monkeypatch.setattr(backend, "_CUPY_CHECKED", True)
    status, _, err = run(capsys, ["amp", "--backend", "cupy", "--alpha", "0.1", "--d", "20"])
    assert status == 2
    _one_line_error(err, "'cupy' was asked for but CuPy is not usable")


@pytest.mark.parametrize("argv, expected", [
    (["se", "--alpha", "1e-320"], 1.0),
    (["se", "--alpha", "1e-13"], 1.0),
    (["se", "--channel", "hardmax", "--alpha", "1e6"], 0.0),
])
def test_extreme_but_valid_alpha_gives_the_limit_value(capsys, argv, expected):
    status, out, err = run(capsys, argv)
    assert status == 0 and err == ""
    mmse = float(out.splitlines()[1].split(",")[1])
    assert mmse == pytest.approx(expected, abs=1e-9)


def test_library_errors_name_their_parameter():
    with pytest.raises(ValueError, match="E must be in"):
        hardmax.limit_map(0.0, 1.0)
    with pytest.raises(ValueError, match="alpha_bar must be > 0"):
        hardmax.limit_map(0.5, 0.0)
    with pytest.raises(ValueError, match="memory_mb must be > 0"):
        amp.chunk_size_for(2, 10, 8, memory_mb=-1)
    with pytest.raises(ValueError, match=r"beta must be in \(0, 1e\+30\]"):
        Softmax(beta=1e308)
    with pytest.raises(ValueError, match=r"X must have shape \(n, T, d\) with n >= 1"):
        amp.gamp_rie(np.zeros((0, 2, 5)), np.zeros((0, 2, 2)), Softmax(), 0.5)
    with pytest.raises(ValueError, match="rho must be in"):
        se.solve(0.1, rho=1e-6)
    with pytest.raises(ValueError, match="alpha must be in"):
        model.n_samples(1e308, 10)


def test_hardmax_limit_follows_the_iteration_cap_rule():
    from aimlib import ConvergenceError

    with pytest.raises(ConvergenceError, match="did not converge"):
        hardmax.limit_error(0.6, max_iter=2)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        E = hardmax.limit_error(0.6, max_iter=2, on_max_iter="warn")
    assert 0 < E <= 1
    assert se.fixed_point(0.1, "hardmax", max_iter=2, on_max_iter="return").converged is False


@pytest.mark.parametrize("value, words", [
    ("bogus", ["--tokens", "tokens.name must be one of"]),
    ('{"name": "sparse", "p": 2}', ["--tokens", "tokens.p must be <= 1"]),
    ('{"name": ', ["--tokens", "a law name or a JSON object"]),
    ('{"name": "uniform", "p": 0.5}', ["tokens.p is not a parameter of law 'uniform'"]),
])
def test_a_bad_token_law_exits_2_naming_it(capsys, value, words):
    status, out, err = run(capsys, ["gd", "--alpha", "0.3", "--d", "12", "--tokens", value])
    assert status == 2 and out == ""
    _one_line_error(err, *words)


def test_the_token_law_reaches_the_run(capsys):
    """``--tokens`` samples the same data as ``tokens=`` in Python (GD at d = 12, 50 steps)."""
    from aimlib import gd

    status, out, _ = run(capsys, ["gd", "--alpha", "0.3", "--d", "12", "--steps", "50",
                                  "--tokens", '{"name": "sparse", "p": 0.3}'])
    assert status == 0
    expected = gd.run_gd(2, 0.5, 0.3, 12, 0, steps=50, tokens={"name": "sparse", "p": 0.3})
    assert float(out.splitlines()[1].split(",")[4]) == pytest.approx(expected["mmse_single"], rel=1e-6)
    plain = gd.run_gd(2, 0.5, 0.3, 12, 0, steps=50)
    assert expected["mmse_single"] != pytest.approx(plain["mmse_single"], rel=1e-3)
