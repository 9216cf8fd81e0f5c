"""The square (untied) and heads channels on the command line and in sweeps: what they print, checked against
independent routes, and their refusals, which name the option and the allowed range."""
from __future__ import annotations

import csv
import io

import pytest

from aimlib import cli, untied as u
from aimlib import state_evolution as se
from aimlib.channels import CHANNELS
from aimlib.channels.heads import count_threshold
from aimlib.sweep import SpecError, SweepSpec, expand, read_results, run_sweep


def _main(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, list(csv.reader(io.StringIO(out))), err


def test_every_channel_of_the_registry_is_a_choice():
    assert {"untied-softmax", "heads", "heads-concatenated"} <= set(CHANNELS)


def test_untied_se_is_equalised_gamp_s_the_upper_end_of_the_bracket(capsys):
    """With a width ratio the prior is ``Rectangular`` (equalised denoiser): ``mmse = V_A + V_B`` is the upper end
    of the bracket of the exact two-overlap SE, the isotropic fixed point at the smaller ratio (``mmse_rect``, another
    route), split equally; ``q = 1 - mmse``."""
    status, rows, err = _main(capsys, "se", "--channel", "untied-softmax", "--T", "3", "--rho", "0.5",
                              "--alpha", "0.05", "0.1", "0.2")
    assert status == 0, err
    assert rows[0] == ["alpha", "mmse", "q", "mmse_A", "mmse_B"]
    for alpha, mmse, q, mA, mB in ([float(x) for x in r] for r in rows[1:]):
        assert mmse == pytest.approx(mA + mB) and q == pytest.approx(1 - mmse) and mA == pytest.approx(mB)
        assert mmse == pytest.approx(u.bracket_untied(alpha, 3, 0.5)[1], rel=1e-8, abs=1e-9)
    assert float(rows[-1][1]) < 1e-9        # alpha = 0.2 > rho (2 - rho)/(T - 1)^2: the upper end's threshold


def test_untied_threshold_is_the_counting_one(capsys):
    status, rows, err = _main(capsys, "threshold", "--channel", "untied-softmax", "--T", "3", "--rho", "0.5")
    assert status == 0, err
    assert float(rows[0][0]) == pytest.approx(0.5 * (2 - 0.5) / (3 * 3 - 3), rel=1e-12)


def test_untied_amp_prints_one_row_that_its_seed_reproduces(capsys):
    """The equalising draw of the denoiser comes from the run's seed: the same seed prints the same error."""
    argv = ("amp", "--channel", "untied-softmax", "--rho", "0.5", "--alpha", "0.2", "--d", "12",
            "--on-max-iter", "return", "--seed", "0")
    (status, rows, err), (again, rows_again, _) = _main(capsys, *argv), _main(capsys, *argv)
    assert status == again == 0, err
    assert rows[0][:4] == ["alpha", "d", "seed", "mmse"] and 0 < float(rows[1][3]) < 2
    assert rows[1][:5] == rows_again[1][:5]


def test_concatenated_heads_se_is_the_softmax_se_of_each_head(capsys):
    """Heads side by side: each head's error is the one-head softmax's (its closed form)."""
    status, rows, err = _main(capsys, "se", "--channel", "heads-concatenated", "--heads", "2",
                              "--rho", "0.5", "0.25", "--alpha", "0.05")
    assert status == 0, err
    assert rows[0] == ["alpha", "mmse_1", "mmse_2", "q_1", "q_2"]
    m1, m2 = float(rows[1][1]), float(rows[1][2])
    assert m1 == pytest.approx(se.solve(0.05, "softmax", T=2, rho=0.5).mmse, rel=1e-6)
    assert m2 == pytest.approx(se.solve(0.05, "softmax", T=2, rho=0.25).mmse, rel=1e-6)


@pytest.mark.parametrize("argv, words", [
    (["se", "--channel", "untied-softmax", "--noise", "0.1", "--alpha", "0.1"], "--noise 0.1: the untied-softmax "
                                                                              "channel has no Bayes side with label"),
    (["se", "--channel", "untied-softmax", "--teachers", "centred", "--alpha", "0.1"], "--teachers centred"),
    (["se", "--channel", "heads", "--rho", "0.5", "0.5", "--alpha", "0.1"], "--channel heads: the heads channel "
                                                                            "has no Bayes side"),
    (["amp", "--channel", "heads", "--rho", "0.5", "0.5", "--alpha", "0.1", "--d", "10"], "amp needs one"),
    (["threshold", "--channel", "heads", "--rho", "0.5", "0.5"], "offers no recovery threshold"),
    (["threshold", "--channel", "heads-concatenated", "--rho", "0.5", "0.5"], "offers no recovery threshold"),
    (["se", "--channel", "heads-concatenated", "--heads", "1", "--rho", "0.5", "--alpha", "0.1"],
     "--heads: heads must be >= 2"),
    (["se", "--channel", "heads-concatenated", "--heads", "3", "--rho", "0.5", "0.5", "--alpha", "0.1"],
     "--rho must hold 3 width ratios"),
    (["se", "--channel", "softmax", "--heads", "2", "--alpha", "0.1"], "--heads is not an option of --channel softmax"),
])
def test_refusals_name_the_option_and_the_range(capsys, argv, words):
    status, _, err = _main(capsys, *argv)
    assert status == 2 and words in err and err.count("\n") == 1


def test_averaged_heads_keep_their_counting_bound():
    """What the averaged heads offer: the counting bound (the one-head softmax's at ``H = 1``)."""
    assert count_threshold(0.5, 2, 1) == pytest.approx(se.perfect_recovery_threshold(0.5, 2), rel=1e-6)


def test_a_sweep_of_the_untied_channel_runs(tmp_path):
    """``se`` and ``amp`` rows of ``untied-softmax``; ``alpha_bar = (T^2 - T) alpha``; the se row's ``mmse`` is
    ``V_A + V_B`` of the two-overlap state evolution."""
    spec = {"method": ["se", "amp"], "channel": "untied-softmax", "T": 2, "rho": 0.5, "alpha_bar": [0.2, 0.5],
            "d": 10, "options": {"amp": {"max_iter": 40}}}
    assert [r.alpha for r in expand(spec)][:2] == [0.1, 0.25]
    report = run_sweep(spec, tmp_path / "untied.csv", scheduler="serial", progress=False)
    assert not report.failures and report.n_computed == 4
    rows = read_results(tmp_path / "untied.csv")
    se_rows = sorted((r for r in rows if r["method"] == "se"), key=lambda r: r["alpha"])
    assert [r["mmse"] for r in se_rows] == pytest.approx([sum(u.solve_sectors(a, 2, 0.5)) for a in (0.1, 0.25)])
    assert [r["alpha_bar"] for r in se_rows] == pytest.approx([0.2, 0.5])
    assert sum(r["method"] == "amp" for r in rows) == 2


@pytest.mark.parametrize("changes, field, words", [
    ({"channel": "untied-softmax", "teachers": "centred"}, "teachers", "square teachers"),
    ({"channel": "untied-softmax", "noise": 0.1}, "noise", "no Bayes side with label noise"),
    ({"channel": "heads"}, "channel", "no Bayes side"),
    ({"channel": "untied-softmax", "options": {"se": {"solver": "closed"}}}, "options.se.solver", "closed"),
    ({"channel": "untied-softmax", "method": "gd", "d": 10}, "channel", "softmax students"),
])
def test_sweep_refusals_of_the_new_channels(changes, field, words):
    with pytest.raises(SpecError) as info:
        SweepSpec.from_dict({"method": "se", "T": 2, "rho": 0.5, "alpha": 0.1, **changes})
    assert f"spec field {field!r}" in str(info.value) and words in str(info.value)
