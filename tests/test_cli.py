"""Command line: python -m aimlib se / threshold (run as subprocesses)."""
from __future__ import annotations

import argparse
import ast
import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from aimlib import cli
from aimlib.amp import run_amp
from aimlib.channels import CHANNELS

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "-m", "aimlib", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def quoted_softmax_values():
    """(alpha, E_S) quoted by arXiv:2506.01582 for softmax, T = 2, rho = 0.5 (book/data/published_softmax_se.md)."""
    with open(ROOT / "book" / "data" / "published_softmax_se.csv", newline="") as fh:
        return [(r["alpha"], float(r["mmse"])) for r in csv.DictReader(fh)
                if (r["kind"], r["T"], r["rho"]) == ("quoted", "2", "0.5")]


def test_se_softmax_csv():
    quoted = quoted_softmax_values()
    assert len(quoted) >= 2
    p = run("se", "--channel", "softmax", "--T", "2", "--rho", "0.5", "--alpha", *[a for a, _ in quoted],
            "--beta", "2")
    assert p.returncode == 0, p.stderr
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0] == ["alpha", "mmse", "q"]
    assert len(rows) == 1 + len(quoted)
    for row, (quoted_alpha, expected) in zip(rows[1:], quoted):
        alpha, mmse, q = map(float, row)
        assert alpha == float(quoted_alpha)
        assert mmse == pytest.approx(expected, abs=3e-4)
        assert q == pytest.approx(1.5 - mmse)


@pytest.mark.slow
def test_se_softmax_with_label_noise():
    from aimlib import state_evolution as se

    p = run("se", "--channel", "softmax", "--T", "2", "--rho", "0.5", "--noise", "0.01", "--alpha", "1")
    assert p.returncode == 0, p.stderr
    alpha, mmse, q = map(float, list(csv.reader(io.StringIO(p.stdout)))[1])
    assert mmse == pytest.approx(se.solve(1.0, T=2, rho=0.5, noise=0.01).mmse, rel=1e-9)
    assert mmse > 0.01  # no perfect recovery with noise (the clean error is 0 at alpha = 1)


def test_threshold_softmax():
    p = run("threshold", "--channel", "softmax", "--T", "2", "--rho", "0.5")
    assert p.returncode == 0, p.stderr
    assert float(p.stdout) == pytest.approx(0.1875, rel=1e-5)


@pytest.mark.parametrize("args, word", [
    (["se", "--rho", "-1", "--alpha", "0.1"], "rho"),
    (["se", "--T", "x", "--alpha", "0.1"], "--T"),
    (["se", "--alpha", "0.1", "--channel", "nope"], "channel"),
    (["se", "--alpha", "-0.5"], "--alpha must be a finite number >= 0"),
    (["se"], "--alpha"),
    (["se", "--T", "3", "--alpha", "0.1", "--noise", "0.1"], "T = 2 only"),
    (["threshold", "--rho", "0"], "rho"),
    (["threshold", "--channel", "hardmax", "--rho", "0.5"], "rho 0"),
    (["frobnicate"], "invalid choice"),
    (["se", "--channel", "hardmax", "--T", "5", "--rho", "0.5", "--alpha", "0.1"], "T <= 3"),
    (["threshold", "--channel", "hardmax", "--T", "5", "--rho", "0"], "T <= 4"),
])
def test_bad_arguments_exit_2_with_one_line(args, word):
    p = run(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert word in lines[0]
    assert p.stdout == ""


def test_threshold_hardmax_weak_recovery():
    from aimlib.channels import hardmax

    p = run("threshold", "--channel", "hardmax", "--rho", "0")
    assert p.returncode == 0, p.stderr
    assert float(p.stdout) == pytest.approx(hardmax.weak_recovery_threshold())
    p = run("threshold", "--channel", "hardmax", "--rho", "0.5")
    assert p.returncode == 2 and "weak-recovery" in p.stderr


def test_threshold_hardmax_T3():
    from aimlib.channels import hardmax_polytope

    p = run("threshold", "--channel", "hardmax", "--T", "3", "--rho", "0")
    assert p.returncode == 0, p.stderr
    # the same number as the library's (checked against a sampling route in tests/test_hardmax_polytope.py)
    assert float(p.stdout) == pytest.approx(hardmax_polytope.weak_recovery_threshold(3), rel=1e-9)
    assert 0.17 < float(p.stdout) < hardmax_polytope.weak_recovery_threshold(2)


@pytest.mark.slow
def test_se_hardmax_T3_against_sampled_output_function():
    from aimlib.channels import Hardmax
    from aimlib.channels.base import fisher_mc
    from aimlib.priors import make_prior

    p = run("se", "--channel", "hardmax", "--T", "3", "--rho", "0.5", "--alpha", "0.1", "0.3", "1")
    assert p.returncode == 0, p.stderr
    rows = [list(map(float, r)) for r in list(csv.reader(io.StringIO(p.stdout)))[1:]]
    assert [r[0] for r in rows] == [0.1, 0.3, 1.0]
    assert rows[0][1] > rows[1][1] > rows[2][1] > 0
    prior = make_prior(0.5)
    for alpha, mmse, q in rows[1:]:
        # the fixed point with F_out replaced by its Monte Carlo definition at the printed q
        # (3000 samples: F_out to ~3 %, which moves mmse by less than that)
        F = fisher_mc(Hardmax(), q, 1.5, 3, n=3000, seed=11)
        assert prior.mmse(1 / (alpha * F)) == pytest.approx(mmse, rel=0.05)


def test_registry_is_extensible(capsys):
    def add(p):
        p.add_argument("--x", type=int, required=True)

    def go(args):
        print(args.x * 2)
        return 0

    cli.register_command("double", "test command", add, go)
    try:
        assert cli.main(["double", "--x", "21"]) == 0
        assert capsys.readouterr().out.strip() == "42"
    finally:
        cli.COMMANDS.pop("double")


def test_amp_prints_one_csv_row_near_the_state_evolution():
    from aimlib import state_evolution as se

    # at d = 60 the iterates do not settle (the window rule ends the run as oscillating: exit 1); the row on request
    p = run("amp", "--channel", "softmax", "--T", "2", "--rho", "0.5", "--alpha", "0.1",
            "--d", "60", "--seed", "0", "--on-max-iter", "return")
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.strip().splitlines()
    assert header == "alpha,d,seed,mmse,iterations,seconds,converged,reason"
    alpha, d, seed, mmse, iterations, seconds, converged, reason = row.split(",")
    assert (float(alpha), int(d), int(seed)) == (0.1, 60, 0) and (converged, reason) == ("0", "oscillating")
    # against the state evolution (T = 2, rho = 0.5); finite-size spread at d = 60 is a few hundredths
    # (tests/test_amp.py allows 0.06 at d = 100; this seed: +0.042)
    assert abs(float(mmse) - se.solve(0.1, T=2, rho=0.5).mmse) < 0.08
    assert int(iterations) > 0 and float(seconds) > 0


def test_gd_prints_single_and_averaged_errors():
    p = run("gd", "--T", "2", "--rho", "0.5", "--alpha", "0.1", "--d", "30", "--seed", "1",
            "--restarts", "4", "--steps", "150")
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.strip().splitlines()
    assert header == "alpha,d,seed,restarts,mmse_single,mmse_averaged,seconds,lr,mmse_data_free,worse_than_data_free"
    values = row.split(",")
    assert len(values) == 10 and int(values[3]) == 4
    single, averaged = float(values[4]), float(values[5])
    assert 0 < averaged < single
    # the default step (r = d/2: the paper's 0.1) and an error below the data-free estimate's (about 1)
    assert float(values[7]) == 0.1 and single < float(values[8]) and values[9] == "0" and p.stderr == ""


@pytest.mark.parametrize("argv, match", [
    (("amp", "--alpha", "0.1", "--d", "1"), "--d must be an integer >= 2"),
    (("amp", "--alpha", "-0.1", "--d", "20"), "--alpha must be a finite number > 0"),
    (("amp", "--alpha", "0.1", "--d", "20", "--backend", "torch"), "invalid choice"),
    (("gd", "--alpha", "0.1", "--d", "20", "--restarts", "0"), "restarts"),
    (("gd", "--d", "20"), "--alpha"),
])
def test_amp_gd_bad_arguments_exit_2(argv, match):
    p = run(*argv)
    assert p.returncode == 2
    assert match in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ["se", "--channel", "hardmax", "--alpha", "1e-320"],            # 1/qhat overflows to inf: mmse 1, exact
    ["se", "--channel", "softmax", "--noise", "0.1", "--alpha", "1e-320"],
])
def test_a_result_comes_without_floating_point_warnings(args):
    """Exit 0 prints the result and nothing on stderr (a NumPy overflow warning is no message for the user)."""
    p = run(*args)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert float(p.stdout.splitlines()[1].split(",")[1]) == 1.0


def test_channel_choices_are_the_registry():
    """Every command's ``--channel`` offers exactly the channels of :data:`aimlib.channels.CHANNELS`."""
    commands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    offered = {name: [a.choices for a in p._actions if "--channel" in a.option_strings]
               for name, p in commands.choices.items()}
    with_channel = {name: c[0] for name, c in offered.items() if c}
    assert {"se", "threshold", "amp"} <= set(with_channel)
    assert all(list(c) == list(CHANNELS) for c in with_channel.values())


def test_import_and_se_load_only_what_they_use():
    """`import aimlib` loads no subpackage (scipy.stats costs a quarter second); `se` loads no amp, gd, sweep,
    convex or untied code and none of scipy.stats (the channels' Sobol points load it when first drawn),
    scipy.integrate (the generic output free entropy), scipy.interpolate (the untied prior's MMSE table)
    or scipy.optimize, each a tenth of a second or more."""
    code = ("import sys, contextlib, io, aimlib\n"
            "print(sorted(m for m in sys.modules if m.startswith(('aimlib.', 'scipy'))))\n"
            "from aimlib import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert cli.main(['se', '--alpha', '0.1', '0.2']) == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith(('aimlib.', 'scipy.'))))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    after_import, after_se = (ast.literal_eval(line) for line in p.stdout.splitlines())
    assert after_import == ["aimlib._lazy", "aimlib.errors"]   # the on-demand import helper
    heavy = ("scipy.special", "scipy.stats", "scipy.integrate", "scipy.interpolate", "scipy.optimize",
             "aimlib.amp", "aimlib.gd", "aimlib.sweep", "aimlib.convex", "aimlib.untied")
    assert "aimlib.state_evolution.solve" in after_se
    assert not [m for m in after_se if m.startswith(heavy)]


def test_amp_tokens_storage():
    """--tokens-storage regenerate runs GAMP-RIE on regenerated tokens: the row of run_amp on the same law."""
    args = ["amp", "--T", "2", "--rho", "0.5", "--alpha", "0.12", "--d", "40", "--seed", "3", "--max-iter", "400",
            "--on-max-iter", "return"]
    p = run(*args, "--tokens-storage", "regenerate")
    assert p.returncode == 0, p.stderr
    row = dict(zip(*csv.reader(io.StringIO(p.stdout))))
    want = run_amp("softmax", 2, 0.5, 0.12, 40, 3, tokens={"name": "gaussian", "storage": "regenerate"}, max_iter=400,
                   on_max_iter="return")
    assert row["reason"] == want["reason"] and int(row["iterations"]) == want["iterations"]
    assert float(row["mmse"]) == pytest.approx(want["mmse"], abs=1e-12)
    bad = run(*args, "--tokens", '{"name": "gaussian", "storage": "regenerate"}')
    assert bad.returncode == 2 and "--tokens-storage" in bad.stderr
    bad = run(*args, "--tokens-storage", "disk")
    assert bad.returncode == 2 and "--tokens-storage" in bad.stderr
