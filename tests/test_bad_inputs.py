"""Regression tests of a bad-input campaign: the exit-status contract and the errors that name parameters.

Every command exits 0 with a result, 1 on a solver failure, 2 on bad input
(one line naming the parameter); never a traceback, never a wrong number
reported as a success.
"""
from __future__ import annotations

import re

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
    (["amp", "--alpha", "0.01", "--d", "100", "--seed", "0"], [("inconsistent state", "did not converge",
                                                                "no tolerance accepts")]),
    (["amp", "--alpha", "0.1", "--d", "20", "--max-iter", "2"], ["did not converge", "max_iter=2"]),
    # softmax, T = 2, alpha = 0.1, d = 40, seed 0: iterates that wander 0.25 sqrt(m) apart
    (["amp", "--alpha", "0.1", "--d", "40", "--seed", "0"], ["oscillating", "wanders without a period",
                                                              "sqrt(m) apart", "larger d", "tol >= 0.0"]),
])
def test_solver_failures_exit_1(capsys, argv, words):
    status, out, err = run(capsys, argv)
    assert status == 1 and out == ""
    _one_line_error(err, *words)


def test_an_unconverged_row_only_on_request(capsys):
    status, out, _ = run(capsys, ["amp", "--alpha", "0.1", "--d", "20", "--max-iter", "2",
                                  "--on-max-iter", "return"])
    header, row = out.splitlines()
    assert status == 0 and header == "alpha,d,seed,mmse,iterations,seconds,converged,reason"
    assert row.split(",")[-2:] == ["0", "max_iter"]   # the row says it did not converge, and why


@pytest.mark.parametrize("argv, words", [
    (["amp", "--alpha", "1e308", "--d", "50"], ["alpha must be in (0, "]),
    (["amp", "--alpha", "0.1", "--d", "100000000"], ["MiB allowed", "d = 100000000", "d must be in [2, "]),
    (["gd", "--alpha", "1e308", "--d", "20"], ["alpha"]),
    (["gd", "--alpha", "0.1", "--d", "20", "--steps", "5", "--restarts", "100000000"], ["restarts"]),
    (["amp", "--rho", "2e4", "--alpha", "0.1", "--d", "30"], ["--rho must be in [0.0001, 10000]"]),
    (["amp", "--beta", "100", "--alpha", "0.1", "--d", "30"], ["beta = 100", "lower beta"]),
    (["gd", "--beta", "1e308", "--alpha", "0.1", "--d", "20"], ["--beta must be in (0, 1e+30]"]),
    (["se", "--T", "1", "--alpha", "0.1"], ["--T must be an integer >= 2"]),
    (["threshold", "--T", "1"], ["--T must be an integer >= 2"]),
    (["se", "--channel", "hardmax", "--beta", "2", "--alpha", "0.1"], ["beta is not a parameter of the hardmax"]),
    (["amp", "--channel", "linear", "--beta", "2", "--alpha", "0.1", "--d", "20"], ["beta is not a parameter"]),
    (["threshold", "--channel", "hardmax", "--rho", "0", "--T", "3", "--noise", "1"], ["--rho 0, no --noise"]),
    (["threshold", "--channel", "hardmax", "--rho", "0", "--T", "5"], ["--T", "T <= 4 only", "got --T 5"]),
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


# --------------------------------------------------------------------------- issue 22, items 10-12
def _options():
    """``(command, action)`` for every option of every command of the parser."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    return [(name, a) for name, sub in commands.items() for a in sub._actions
            if a.option_strings and a.dest != "help"]


_VALID = {"--d": "20", "--T": "2", "--tokens": "gaussian", "--out": "x.csv", "--scheduler": "serial",
          "--damping": "0.5", "--tol": "0.001"}


def _value(action):
    if action.nargs == 0:
        return []
    return [action.choices[0] if action.choices else _VALID.get(action.option_strings[0], "1")]


@pytest.mark.parametrize("command, action", _options(), ids=lambda x: getattr(x, "dest", x))
def test_every_option_refuses_a_repeat(capsys, command, action):
    """Item 12: one rule for every option, choices and flags included (no 'last one wins')."""
    opt = action.option_strings[-1]
    status, out, err = run(capsys, [command, opt, *_value(action), opt, *_value(action)])
    assert status == 2 and out == ""
    _one_line_error(err, f"{opt} given twice")


_NUMERIC = [(c, a) for c, a in _options()
            if a.type not in (None, str) and a.choices is None and a.nargs != 0 and a.dest != "tokens"]


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999"])
@pytest.mark.parametrize("command, action", _NUMERIC, ids=lambda x: getattr(x, "dest", x))
def test_every_number_must_be_finite_and_in_its_range(capsys, command, action, value):
    """Item 12: ``--rho inf`` was accepted; ``-inf`` read as an option.  Now: the option and its range."""
    opt = action.option_strings[-1]
    required = {"se": ["--alpha", "0.1"], "amp": ["--alpha", "0.1", "--d", "20"], "gd": ["--alpha", "0.1", "--d", "20"],
                "sweep": ["spec.yaml"]}.get(command, [])
    if opt in required:
        i = required.index(opt)
        required = required[:i] + required[i + 2:]
    status, out, err = run(capsys, [command, *required, opt, value])
    assert status == 2 and out == ""
    _one_line_error(err, f"{opt} must be ", (" in [", " in (", ">= ", "> "))


_INTERNAL = re.compile(r"\b(q must|Q0|delta must|omega|y must|memory_mb|lr|max_iter)\b")


@pytest.mark.parametrize("argv, words", [
    (["se", "--channel", "deep-hardmax", "--rho", "1e-4", "1e-4", "--teachers", "centred", "--alpha", "0.1"],
     ["lower alpha", "raise rho"]),
    (["se", "--channel", "hardmax", "--alpha", "1e300"], ["alpha = 1e+300", "smaller alpha"]),
    (["se", "--rho", "inf", "--alpha", "0.1"], ["--rho", "[0.0001, 10000]"]),
    (["se", "--noise", "1e300", "--alpha", "0.1"], ["--noise", "[0, 1e+06]"]),
    (["amp", "--channel", "linear", "--noise", "1e300", "--alpha", "0.1", "--d", "20"], ["--noise", "[0, 1e+06]"]),
    (["se", "--channel", "deep-hardmax", "--rho", "0.5", "0.5", "--c", "1e10", "--alpha", "0.1"],
     ["--c", "[-100, 100]"]),
    (["se", "--channel", "deep-hardmax", "--rho", "2e3", "2e3", "--alpha", "0.1"], ["--rho", "[0.0001, 1000]"]),
    (["amp", "--channel", "hardmax", "--T", "4", "--alpha", "0.1", "--d", "20"], ["--T", "T <= 3 only"]),
    (["se", "--channel", "hardmax", "--T", "3", "--alpha", "10"], ["hardmax T = 3", "lower alpha"]),
    (["se", "--channel", "hardmax", "--noise", "0.1", "--alpha", "0.1"], ["--noise", "no Bayes side"]),
    (["threshold", "--channel", "linear", "--noise", "0.1"], ["--noise", "needs --noise 0"]),
    (["threshold", "--channel", "deep-hardmax", "--rho", "0.5", "0.5"], ["--rho", "rho -> 0 onset", "no --rho"]),
    (["amp", "--beta", "1e4", "--alpha", "0.1", "--d", "20"], ["beta = 10000", "lower beta or rho"]),
    (["amp", "--T", "1000000000", "--alpha", "0.1", "--d", "10"], ["T = 1000000000", "T must be in [2, "]),
    (["gd", "--rank", "1000000000", "--alpha", "0.1", "--d", "12"], ["rank = 1000000000", "rank must be in [1, "]),
    (["gd", "--d", "1000000000", "--alpha", "0.1"], ["d = 1000000000", "d must be in [2, "]),
    (["gd", "--weight-decay", "1e300", "--alpha", "0.1", "--d", "12"], ["--weight-decay", "[0, 1e+06]"]),
    (["gd", "--rho", "0", "--alpha", "0.1", "--d", "12"], ["--rho must be in [0.0001, 10000]"]),
    (["amp", "--seed", "-1", "--alpha", "0.1", "--d", "12"], ["--seed", ">= 0"]),
    (["se", "--channel", "deep-hardmax", "--layers", "4", "--rho", "0.5", "0.5", "0.5", "0.5", "--teachers", "centred",
      "--alpha", "0.1"], ["--layers must be 2 or 3"]),
    (["se", "--channel", "deep-hardmax", "--c", "-1", "--rho", "0.5", "0.5", "--alpha", "0.1"],
     ["--c: c = -1.0 lies 0 from -1", "at least 0.01 from each of -1, 0 and 1"]),
    (["threshold", "--channel", "deep-hardmax", "--c", "0"], ["--c: c = 0.0", "at least 0.01"]),
    (["threshold", "--channel", "deep-hardmax", "--c", "0.999999999999"],          # every digit, and the margin
     ["--c: c = 0.999999999999 lies 1e-12 from 1", "at least 0.01 from each"]),
    (["se", "--channel", "deep-hardmax", "--layers", "3", "--c", "0.0001", "--rho", "0.5", "0.5", "0.5", "--teachers",
      "centred", "--alpha", "0.1"], ["--c: c = 0.0001 lies 0.0001 from 0", "3 hardmax layers need c at least 0.03"]),
    (["threshold", "--channel", "deep-hardmax", "--beta", "2"], ["--beta", "takes no", "--estimator"]),
    (["threshold", "--channel", "deep-hardmax", "--noise", "0.1"], ["--noise", "takes no"]),
    (["threshold", "--channel", "deep-hardmax", "--estimator", "min-trace"], ["--estimator", "takes no"]),
    (["se", "--channel", "deep-hardmax", "--layers", "3", "--rho", "0.5", "0.5", "0.5", "--alpha", "0.1"],
     ["--teachers", "centred"]),
    (["se", "--channel", "deep-hardmax", "--layers", "3", "--T", "3", "--rho", "0.5", "0.5", "0.5", "--teachers",
      "centred", "--alpha", "0.1"], ["--T", "T = 2 only"]),
    (["amp", "--channel", "deep-hardmax", "--layers", "3", "--rho", "0.5", "0.5", "0.5", "--teachers", "centred",
      "--alpha", "0.1", "--d", "12"], ["--layers 3", "se gives its state evolution"]),
    (["amp", "--alpha", "1e-300", "--d", "20"], ["--alpha", "at least one sample", "alpha > 0.00125 at d = 20"]),
    (["amp", "--damping", "1", "--alpha", "0.1", "--d", "20"], ["--damping", "[0, 1)"]),
    (["amp", "--tokens", '{"name": "sparse", "p": ' + "[" * 3000 + "]" * 3000 + "}", "--alpha", "0.1", "--d", "12"],
     ["--tokens", "nested at most"]),
])
def test_messages_name_the_option_its_range_and_followable_advice(capsys, argv, words):
    """Item 11 (and 10): no internal variable (q, Q0, delta, omega, y, memory_mb, lr) and no advice that
    the command line cannot follow; item 10: deeply nested --tokens JSON is one line, not a RecursionError."""
    status, out, err = run(capsys, argv)
    assert status == 2 and out == ""
    _one_line_error(err, *words)
    assert not _INTERNAL.search(err), err


def test_the_advised_d_fits():
    """``amp --d 1e9`` advised a d whose n = alpha d^2 then failed again; the advised d now fits in memory."""
    with pytest.raises(ValueError) as exc:
        model.sample_dataset(0.1, 10**9, 2, 0.5, Softmax(), 0)
    err = str(exc.value)
    d_max = int(re.search(r"d must be in \[2, (\d+)\]", err).group(1))
    for d, fits in [(d_max, True), (d_max + 1, False)]:
        need = model.dataset_bytes(model.n_samples(0.1, d), d, 2, rhos=(0.5,))
        assert (need <= model.v.MEMORY_MB * 2**20) == fits


def test_the_advised_damping_and_tol_are_options(capsys, monkeypatch):
    """GAMP's failures advise "a larger damping" and "loosen tol": both are options of amp (item 11),
    passed to GAMP only when given (its own defaults otherwise)."""
    from aimlib.amp import run as amp_run

    seen, gamp_rie = [], amp_run.gamp_rie
    monkeypatch.setattr(amp_run, "gamp_rie", lambda *a, **k: seen.append(k) or gamp_rie(*a, **k))
    ended = ["--on-max-iter", "return"]    # at d = 20 the iterates oscillate: the row, flagged
    assert run(capsys, ["amp", "--alpha", "0.1", "--d", "20", "--damping", "0.7", "--tol", "1e-3", *ended])[0] == 0
    assert run(capsys, ["amp", "--alpha", "0.1", "--d", "20", *ended])[0] == 0
    assert (seen[0]["damping"], seen[0]["tol"]) == (0.7, 1e-3)
    assert "damping" not in seen[1] and "tol" not in seen[1]
