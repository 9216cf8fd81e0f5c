"""``se --channel deep-hardmax`` and the cross overlap of layers 1 and 2 (aimlib/cli_deep.py): the columns of
``--cross first-order`` and ``--cross iterated``, their values against the library called directly on the
same Monte Carlo draws, and the refusals of ``--cross``, ``--draws`` and ``--seed`` where they do not apply."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from aimlib import cli, state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.cli_deep import DRAWS, cross_tol, iteration
from aimlib.priors import Centred, Wishart
from aimlib.state_evolution.cross_fixed_point import cross_fixed_point, monte_carlo_side

ROOT = Path(__file__).resolve().parents[1]
CH, WISHART = DeepAttention(0.5), (Wishart(0.5), Wishart(0.5))
BASE = ["se", "--channel", "deep-hardmax", "--rho", "0.5", "0.5", "--c", "0.5"]
SEPARABLE = ["alpha", "mmse_1", "mmse_2", "q_1", "q_2", "oracle_1", "oracle_2", "q_12"]
CROSS = ["mmse_1_cross", "mmse_2_cross", "q_12_cross"]
THREE = ["se", "--channel", "deep-hardmax", "--layers", "3", "--rho", "0.5", "0.5", "0.5", "--teachers", "centred"]
THREE_CH = DeepAttention(0.5, layers=3)


def _table(capsys, argv):
    """The exit status and the CSV rows (dicts of floats) of ``python -m aimlib`` on ``argv``."""
    status = cli.main(argv)
    out, err = capsys.readouterr()
    if status != 0:
        return status, err
    rows = list(csv.DictReader(io.StringIO(out)))
    return status, [{k: float(x) for k, x in r.items()} for r in rows]


def _direct(alpha, draws, seed):
    """The separable fixed point, its first-order ``q_12`` and the iterated fixed point, called directly as the
    command calls them (same start, draws and tolerance)."""
    res = se.curve([alpha], CH, T=2, rho=WISHART)
    first = se.cross_overlap(alpha, res.q[0], res.mmse[0], CH, WISHART).q_12
    side = monte_carlo_side(CH, (0.5, 0.5), n=draws, seed=seed)
    return res, first, cross_fixed_point(alpha, CH, WISHART, (*res.mmse[0], first), side=side, tol=cross_tol(draws))


@pytest.mark.slow
def test_iterated_is_the_default_and_its_columns_are_cross_fixed_point_on_the_same_draws(capsys):
    """Two layers of Wishart teachers: the separable columns, then the iterated fixed point, equal to
    ``cross_fixed_point`` started where the command starts it, with the same draws and tolerance (so the same
    ``--seed`` gives the same columns, another seed others).  About 8 s (the oracle's two fixed points)."""
    status, rows = _table(capsys, BASE + ["--alpha", "0.5", "--draws", "2000", "--seed", "1"])
    assert status == 0 and list(rows[0]) == SEPARABLE + CROSS
    res, first, x = _direct(0.5, 2000, 1)
    r = rows[0]
    assert (r["mmse_1"], r["mmse_2"], r["q_12"]) == (*res.mmse[0], first)
    assert [r[k] for k in CROSS] == [*x.mmse, x.e_12]
    assert _direct(0.5, 2000, 2)[2].e_12 != x.e_12


@pytest.mark.slow
def test_at_the_default_draws_the_iterated_columns_meet_the_committed_runs(capsys):
    """At the default draws (seed 0), ``alpha = 0.5``: the errors within 0.005 of the separable ones and
    ``q_12_cross`` within 0.005 of the mean of the committed runs (four sets of 5e5 draws,
    ``book/data/deep_cross_se.csv``: -0.0254), about four times the spread over seeds at 1e5 draws (0.0011,
    four seeds, measured); the first order (-0.0218) is short of it.  About 12 s on one core."""
    status, rows = _table(capsys, BASE + ["--alpha", "0.5"])
    r = rows[0]
    assert status == 0 and np.allclose([r["mmse_1_cross"], r["mmse_2_cross"]], [r["mmse_1"], r["mmse_2"]], atol=5e-3)
    committed = [float(x["e_12"]) for x in csv.DictReader(line for line in open(ROOT / "book/data/deep_cross_se.csv")
                                                          if not line.startswith("#")) if x["alpha"] == "0.5"]
    assert np.mean(committed) == pytest.approx(-0.0254, abs=2e-4)
    assert r["q_12_cross"] == pytest.approx(np.mean(committed), abs=5e-3) and r["q_12_cross"] < r["q_12"]


def test_first_order_keeps_the_former_columns_and_alpha_zero_is_the_prior(capsys):
    """``--cross first-order``: the columns as before; at ``alpha = 0`` the iterated columns are the prior's
    errors and no cross overlap (no data: each estimate its prior mean)."""
    status, rows = _table(capsys, BASE + ["--alpha", "0", "--cross", "first-order"])
    assert status == 0 and list(rows[0]) == SEPARABLE and rows[0]["q_12"] == 0.0
    status, rows = _table(capsys, BASE + ["--alpha", "0", "--draws", "2000", "--seed", "4"])
    assert status == 0 and list(rows[0]) == SEPARABLE + CROSS and [rows[0][k] for k in CROSS] == [1.0, 1.0, 0.0]


def test_three_layers_keep_the_first_order_column(capsys):
    status, rows = _table(capsys, THREE + ["--alpha", "1"])
    assert status == 0 and list(rows[0])[-1] == "q_12" and not set(CROSS) & set(rows[0])
    assert rows[0]["q_12"] == pytest.approx(-0.034826, abs=2e-5)       # tests/test_deep_cross.py: regression value


@pytest.mark.slow
def test_three_layers_iterated_is_cross_fixed_point_and_meets_the_committed_rows(capsys):
    """Three layers, ``--cross iterated``: a column per layer's error, equal to ``cross_fixed_point`` started
    where the command starts it with the three-layer setup (window rule, undamped, 20 further iterations) on
    the same draws; at alpha = 1 the errors and ``q_12_cross`` within 0.01 of the mean of the committed rows
    (``book/data/deep_three_cross_se.csv``, four sets of 2e5 draws), layer 1's below the separable one."""
    status, rows = _table(capsys, THREE + ["--alpha", "1", "--cross", "iterated", "--draws", "20000"])
    cross3 = ["mmse_1_cross", "mmse_2_cross", "mmse_3_cross", "q_12_cross"]
    assert status == 0 and list(rows[0])[-4:] == cross3
    r, centred = rows[0], (Centred(0.5),) * 3
    side = monte_carlo_side(THREE_CH, (0.0,) * 3, n=20_000, seed=0)
    start = (r["mmse_1"], r["mmse_2"], r["mmse_3"], r["q_12"])
    x = cross_fixed_point(1.0, THREE_CH, centred, start, side=side, **iteration(3, 20_000))
    assert [r[k] for k in cross3] == [*x.mmse, x.e_12]
    committed = [c for c in csv.DictReader(line for line in open(ROOT / "book/data/deep_three_cross_se.csv")
                                           if not line.startswith("#")) if c["alpha"] == "1.0"]
    for k, col in zip(("mmse_1", "mmse_2", "mmse_3", "e_12"), cross3):
        assert r[col] == pytest.approx(np.mean([float(c[k]) for c in committed]), abs=0.01), col
    assert r["mmse_1_cross"] < r["mmse_1"] - 0.01


@pytest.mark.parametrize("argv, words", [
    (BASE + ["--teachers", "centred", "--cross", "iterated"], ["--cross:", "centred teachers", "q_12 = 0 exactly"]),
    (BASE + ["--teachers", "centred", "--seed", "1"], ["--seed:", "centred teachers", "give no --seed"]),
    (["se", "--channel", "softmax", "--cross", "first-order"], ["--cross:", "one index matrix"]),
    (["se", "--channel", "heads-concatenated", "--rho", "0.5", "0.5", "--draws", "2000"],
     ["--draws:", "no cross term"]),
    (THREE + ["--seed", "2"], ["--seed:", "3 layers print, unless --cross iterated, q_12 to first order"]),
    (THREE + ["--cross", "first-order", "--draws", "5000"], ["--draws:", "--cross first-order prints"]),
    (BASE + ["--cross", "first-order", "--draws", "5000"],
     ["--draws:", "--cross first-order prints", "give no --draws"]),
    (BASE + ["--draws", "999"], ["--draws must be an integer in [1000, 2000000], got 999"]),
    (BASE + ["--draws", "3000000"], ["--draws must be an integer in [1000, 2000000]"]),
    (BASE + ["--cross", "second-order"], ["--cross", "invalid choice"]),
])
def test_the_options_are_refused_where_they_do_not_apply(capsys, argv, words):
    try:
        status = cli.main(argv + ["--alpha", "0.5"])
    except SystemExit as exc:                                           # argparse's own refusals
        status = exc.code
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words), err


def test_the_help_names_the_columns_and_the_default_draws():
    text = " ".join(cli.build_parser()._subparsers._group_actions[0].choices["se"].format_help().split())
    assert all(w in text for w in ["--cross {first-order,iterated}", "mmse_1_cross, mmse_2_cross, q_12_cross",
                                   f"default {DRAWS}", "--seed"])


def test_a_known_part_above_the_overlap_by_rounding_only_is_the_overlap(capsys):
    """A state evolution's ``q = Q0 - mmse`` at an error within rounding of the prior's is ``rho`` less a last
    digit: the known part ``rho`` is taken as ``q`` (``se`` at ``--rho 1e-4`` refused it before); a known part
    above ``q`` by more is still refused."""
    q = 1e-4 - 1e-17
    assert CH.law_args((q, 0.5), (1 + 1e-4, 1.5), shared=(1e-4, 0.4))[3] == (q, 0.4)
    with pytest.raises(ValueError, match=r"shared\[0\]"):
        CH.law_args((q, 0.5), (1 + 1e-4, 1.5), shared=(1.01e-4, 0.4))
    status, rows = _table(capsys, BASE[:3] + ["--rho", "1e-4", "1e-4", "--alpha", "0.001", "--cross", "first-order"])
    assert status == 0 and abs(rows[0]["q_12"]) < 1e-6
