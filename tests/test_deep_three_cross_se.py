"""The state evolution with the cross overlap and the mixing for three layers, centred teachers (chapter
"Correlated layers", section "Three layers"): layers 1 and 2 coupled, layer 3 on its own."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib import state_evolution as se
from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments
from aimlib.priors import Centred
from aimlib.state_evolution.cross_fixed_point import cross_fixed_point, separable_side
from script_support import assert_first_order_row, committed, import_script, made_by_args

THREE, CENTRED = DeepAttention(0.5, layers=3), (Centred(0.5),) * 3


def _separable(alpha):
    fp = se.fixed_point(alpha, THREE, T=2, rho=CENTRED, tol=1e-12)
    return fp, se.cross_overlap(alpha, fp.q, fp.mmse, THREE, CENTRED).q_12


@pytest.mark.parametrize("alpha, rule", [(1.0, "step"), (2.0, "step"), (2.0, "window")])
def test_without_cross_terms_three_layers_are_the_separable_state_evolution(alpha, rule):
    """With the tabulated moment matrix at ``e_12 = 0`` and the mixing ``I``, the iteration started off the
    separable fixed point lands on it (all three errors), and its ``e_12`` on the first-order cross overlap,
    whichever rule stops it."""
    fp, first = _separable(alpha)
    start = (*np.minimum(np.add(fp.mmse, 0.05), 1.0), 0.0)
    x = cross_fixed_point(alpha, THREE, CENTRED, start, side=separable_side(THREE, (0.0,) * 3), tol=1e-11,
                          max_iter=5000, damping=0.0, further=2, rule=rule)
    assert np.allclose(x.mmse, fp.mmse, atol=1e-8)
    assert x.e_12 == pytest.approx(first, abs=1e-8)
    assert len(x.deltas) == 3 and x.trace.shape[1] == 4


def test_layer_three_stays_uncoupled_under_the_law_with_the_cross_overlap():
    """The flip of layer 3 (its draws enter the law with ``e_12`` alone) keeps ``F``, the mixing and the memory
    zero between layer 3 and layers 1, 2: measured within four standard errors, while layers 1 and 2's
    ``F_12`` and ``a_21`` are many standard errors from zero."""
    fp, first = _separable(1.0)
    Q0 = tuple(q + m for q, m in zip(fp.q, fp.mmse))
    m = response_moments(THREE, fp.q, Q0, shared=0.0, cross=first, n=40_000, seed=2, memory=True)
    off = (np.array([0, 1, 2, 2]), np.array([2, 2, 0, 1]))
    for name in ("F", "mixing", "memory"):
        value, err = getattr(m, name), m.se[name]
        assert np.all(np.abs(value[off]) < 4 * err[off] + 1e-3), name
    assert m.F[0, 1] > 20 * m.se["F"][0, 1]
    assert m.mixing[1, 0] > 4 * m.se["mixing"][1, 0]


def test_the_committed_rows_are_fixed_points_of_the_first_order_prior_side():
    """``book/data/deep_three_cross_se.csv``: its rows are the (alpha, seed) of its made-by command; each starts
    at the separable fixed point, and at each the prior side of its own noises and mixing returns its errors
    and ``e_12`` within the iteration's tolerance (a fixed point, not a last iterate)."""
    args, rows = made_by_args("deep_cross_se", "deep_three_cross_se.csv")
    assert args.layers == 3 and args.prior == "first" and args.alpha is None and args.seeds == [0, 1, 2, 3]
    assert sorted((float(r["alpha"]), int(r["seed"])) for r in rows) == sorted(
        (a, s) for a in (1.0, 1.5, 2.0) for s in range(4))
    for r in rows:
        assert_first_order_row(r, THREE, CENTRED)


@pytest.mark.slow
def test_a_committed_row_is_its_command_run_again():
    """The script's first row (alpha = 1, seed 0), run again, is the committed one: the same draws give the
    same fixed point to rounding."""
    made_by, rows = committed("deep_three_cross_se.csv")
    n = int(rows[0]["n"])
    again = import_script("deep_cross_se").row(1.0, 0, n, layers=3)
    first = next(r for r in rows if float(r["alpha"]) == 1.0 and int(r["seed"]) == 0)
    for key in ("mmse_1", "mmse_2", "mmse_3", "e_12", "a_21"):
        assert again[key] == pytest.approx(float(first[key]), abs=1e-9), key


@pytest.mark.parametrize("name", ["deep_three_gamp.csv", "deep_three_gamp_d150.csv", "deep_three_gamp_d300.csv"])
def test_the_three_layer_runs_are_those_their_made_by_line_names(name):
    """The committed three-layer GAMP-RIE runs: exactly the (alpha, d, seed) of the made-by command (read by
    the script's own parser and rebuilt from it), each ended by a rule the script names, its residuals'
    cross-covariances within Cauchy-Schwarz, and the teachers of a seed and size the same at every alpha."""
    args, rows = made_by_args("deep_three_gamp", name)
    assert sorted((float(r["alpha"]), int(r["d"]), int(r["seed"])) for r in rows) == sorted(
        (a, d, s) for d in args.d for a in args.alpha for s in args.seeds)
    assert {r["reason"] for r in rows} <= {"tol", "oscillating", "max_iter", "refused"}
    for r in rows:
        x = {k: float(r[k]) for k in ("mmse_1", "mmse_2", "mmse_3", "e_12", "e_13", "e_23")}
        assert x["e_12"] ** 2 <= x["mmse_1"] * x["mmse_2"] and x["e_13"] ** 2 <= x["mmse_1"] * x["mmse_3"]
        assert x["e_23"] ** 2 <= x["mmse_2"] * x["mmse_3"]
    for key in {(r["d"], r["seed"]) for r in rows}:
        assert len({r["s_12"] for r in rows if (r["d"], r["seed"]) == key}) == 1


@pytest.mark.slow
def test_a_committed_three_layer_run_is_its_command_run_again():
    """``scripts/deep_three_gamp.py`` at alpha = 2, d = 60, seed 2 (a run its own rule stopped) gives the
    committed row again."""
    _, rows = committed("deep_three_gamp.csv")
    row = next(r for r in rows if (r["alpha"], r["d"], r["seed"]) == ("2.0", "60", "2"))
    again = import_script("deep_three_gamp").run(2.0, 60, 2, 0.1)
    assert again["reason"] == row["reason"] and again["iterations"] == int(row["iterations"])
    for key in ("mmse_1", "mmse_2", "mmse_3", "e_12", "a_21"):
        assert again[key] == pytest.approx(float(row[key]), abs=1e-9), key


def test_the_window_rule_does_not_stop_on_a_slow_mode():
    """A map with one slow mode (contraction 0.97 towards 0.5, the noises read back from a diagonal ``F``):
    a step of ``tol/4`` leaves it about ``8 tol`` short of its fixed point, which two further iterations
    do not see; the window rule's estimated distance stops it within ``tol``."""
    from aimlib.state_evolution.cross_fixed_point import ChannelSide

    alpha, tol = 1.0, 1e-3

    def side(q, Q0, e_12):
        return ChannelSide(np.diag([1.0 / (alpha * (top - x)) for x, top in zip(q, Q0)]), np.eye(2),
                           np.zeros((2, 2)))

    def prior(deltas, kappa, at):
        return np.array([0.5 + 0.97 * (x - 0.5) for x in deltas] + [0.0])

    ends = {rule: cross_fixed_point(alpha, DeepAttention(0.5), CENTRED[:2], (0.9, 0.9, 0.0), side=side, prior=prior,
                                    tol=tol, max_iter=2000, further=2, damping=0.0, rule=rule).mmse[0] - 0.5
            for rule in ("step", "window")}
    assert ends["step"] > 5 * tol and abs(ends["window"]) < tol


def test_three_layers_take_the_prior_side_to_all_orders_for_layers_one_and_two():
    """The measured prior side (two RIEs, here small) runs on layers 1 and 2's blocks of three layers' channel
    side: at its fixed point the same measurement, on the blocks of the reported mixing and memory, returns
    the fixed point's ``e_12``, and layer 3's error is its prior's at its own noise ``1/(alpha F_33)``."""
    from aimlib.state_evolution.cross_fixed_point import measured_prior, measured_shifts, monte_carlo_side

    fp, first = _separable(1.5)
    side = monte_carlo_side(THREE, (0.0,) * 3, n=10_000, seed=1, memory=True)
    tol, instances = 3e-2, (60, range(2))
    x = cross_fixed_point(1.5, THREE, CENTRED, (*fp.mmse, first), side=side, tol=tol, max_iter=40, further=3,
                          prior=measured_prior(CENTRED[:2], *instances))
    assert x.memory.shape == (3, 3) and len(x.mmse) == len(x.deltas) == 3
    shift, _ = measured_shifts(CENTRED[:2], x.deltas[:2], x.kappa, x.mixing[:2, :2], x.memory[:2, :2], *instances)
    assert x.e_12 == pytest.approx(shift[2], abs=tol / 2)
    assert x.mmse[2] == pytest.approx(CENTRED[2].mmse(x.deltas[2]), abs=tol / 2)
