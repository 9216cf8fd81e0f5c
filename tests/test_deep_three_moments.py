"""Which second moments of three-layer GAMP-RIE's channel step carry layer 1's lost scale
(``scripts/deep_three_moments.py``, ``book/data/deep_three_moments.csv``; chapter "Three layers: why GAMP-RIE leaves
its state evolution", section "What the denoisers make of their inputs"): the versions of a step's moments, and the
findings."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from aimlib.channels.deep_moments import law_moments
from script_support import committed, import_script, made_by_args, rows_at

Q0, V = np.array([1.02, 0.98, 1.0]), np.array([0.82, 0.96, 0.5])


def a_row(cov) -> dict:
    """A row of ``deep_three_law.csv`` with the second moments ``cov`` and the state ``(Q0, V)`` above."""
    law = import_script("deep_three_law")
    row = {"alpha": 1.0, "d": 200, "seed": 0, "t": 10}
    row |= {f"{x}_{k + 1}": a[k] for x, a in (("Q0", Q0), ("V", V), ("shat", Q0 - V)) for k in range(3)}
    return row | {name: cov[i, j] for (i, j), name in zip(law.PAIRS, law.MOMENTS)}


def test_each_version_changes_its_own_part_and_the_four_make_the_law():
    """Each version is the step's moments with one part moved to the law (at ``m = Q0 - V``, the step's own
    ``e_12``): ``excess`` sets each norm to its overlap, ``overlap`` moves the overlap to ``m`` and the norm with it,
    ``indices`` the teachers' own moments, ``between`` the moments between layers but ``e_12``; applied together
    they give the law; a row already on the law has every version equal to it, and the same scale from every
    version (the same draws)."""
    script = import_script("deep_three_moments")
    law = law_moments(Q0 - V, Q0, np.zeros(3), -0.035, 3)
    run = law + np.diag([0.01, -0.02, 0.0, 0.03, 0.01, 0.02])
    run[0, 3] = run[3, 0] = law[0, 3] + 0.015
    run[0, 4] = run[4, 0] = 0.01
    run[3, 5] = run[5, 3] = -0.004
    versions = script.versions(a_row(run), Q0, V)
    assert np.array_equal(versions["run"], run) and np.allclose(versions["law"], law)
    layer = np.arange(3)
    excess, overlap = versions["excess"], versions["overlap"]
    assert np.allclose(excess[3 + layer, 3 + layer], run[layer, 3 + layer])
    assert np.allclose(overlap[layer, 3 + layer], Q0 - V)
    assert np.allclose(np.diag(overlap - run)[3:], Q0 - V - run[layer, 3 + layer])       # the excess kept
    assert np.allclose(versions["indices"][:3, :3], np.diag(Q0))
    assert versions["between"][0, 4] == 0 and versions["between"][3, 5] == 0 and versions["between"][3, 4] == -0.035
    moved = sum(versions[p] - run for p in script.PARTS)
    assert np.allclose(run + moved, law)                 # the parts are disjoint and together make the law
    on_law = script.row_scales(a_row(law), 20_000)
    for v in script.VERSIONS:
        assert on_law[f"{v}_1"] == pytest.approx(on_law["law_1"], abs=1e-12)
        assert on_law[f"{v}_2"] == pytest.approx(on_law["law_2"], abs=1e-12)


@functools.cache
def moves() -> tuple:
    """The rows of ``book/data/deep_three_moments.csv`` (checked against their made-by command), read once."""
    args, rows = made_by_args("deep_three_moments", "deep_three_moments.csv")
    assert args.draws == 100_000 and args.law.endswith("book/data/deep_three_law.csv")
    return tuple(rows)


def at(d: int, t: int) -> dict:
    """The columns at ``d`` and iteration ``t``, over the three data sets."""
    return rows_at(moves(), d, t)


def test_the_file_holds_the_steps_of_the_law_file_and_its_gaussian_version():
    """One row per row of ``deep_three_law.csv``; the step's own version agrees with that file's ``gauss_1`` (the
    same law, 10^6 other draws) within the two routes' Monte Carlo errors (about 0.006 and 0.004 near the runs'
    states, 0.007 together; rms under 0.012 leaves room for states where they are larger)."""
    law = {(r["d"], r["seed"], r["t"]): r for r in committed("deep_three_law.csv")[1]}
    assert sorted(law) == sorted((r["d"], r["seed"], r["t"]) for r in moves())
    gap = np.array([float(r["run_1"]) - float(law[r["d"], r["seed"], r["t"]]["gauss_1"]) for r in moves()])
    assert np.sqrt(np.mean(gap ** 2)) < 0.012 and np.abs(gap).max() < 0.025


def test_the_moves_add_up_and_their_monte_carlo_error_is_small():
    """The four parts' moves add up to the whole within 0.0015 for layer 1 in every row (the step is nearly linear
    in its moments there); on one row at d = 400, four sets of draws put the Monte Carlo error of a move at
    10^5 draws under 0.001 (each value's is about 0.006)."""
    script = import_script("deep_three_moments")
    for r in moves():
        parts = sum(float(r[f"{p}_1"]) - float(r["run_1"]) for p in script.PARTS)
        assert abs(parts - (float(r["law_1"]) - float(r["run_1"]))) < 0.0015
    row = next(r for r in committed("deep_three_law.csv")[1] if r["d"] == "400" and r["t"] == "40")
    draws = [script.row_scales({**row, "seed": key}, 25_000) for key in (10, 11, 12, 13)]
    move = np.array([[x[f"{p}_1"] - x["run_1"] for p in ("law",) + script.PARTS] for x in draws])
    value = np.array([x["run_1"] for x in draws])
    assert np.all(move.std(axis=0, ddof=1) / 2 < 0.001) and value.std(ddof=1) / 2 > 0.002


def test_layer_ones_norm_excess_carries_most_of_what_the_second_moments_add():
    """The chapter's findings (layer 1, means of three data sets): at iteration 40 the norm excess moves ``s_1`` by
    0.055, 0.034, 0.014 of the whole 0.058, 0.045, 0.023 at d = 200, 300, 400, and at iteration 10 the other way; its
    move follows the excess ``q_1 - c_1`` (0.042, 0.042, 0.013 at iteration 40; slope 1.13, correlation 0.94 over the
    36 rows); the moments between layers 0.006 to 0.008 at iteration 40, the overlaps at most 0.014 and the teachers'
    own moments about 0.002 at most in the means; at d = 400 single runs' excess moves 0.002 to 0.030 of a whole of
    0.012 to 0.039."""
    SIZES = (200, 300, 400)

    def move(part, d, t):
        x = at(d, t)
        return (x[f"{part}_1"] - x["run_1"]).mean()

    assert np.allclose([move("excess", d, 40) for d in SIZES], [0.055, 0.034, 0.014], atol=0.0006)
    assert np.allclose([move("law", d, 40) for d in SIZES], [0.058, 0.045, 0.023], atol=0.0006)
    assert all(move("excess", d, 10) < 0 for d in SIZES)
    law = {(r["d"], r["seed"], r["t"]): r for r in committed("deep_three_law.csv")[1]}
    excess = np.array([float(law[k]["w1w1"]) - float(law[k]["h1w1"]) for k in
                       ((r["d"], r["seed"], r["t"]) for r in moves())])
    moved = np.array([float(r["excess_1"]) - float(r["run_1"]) for r in moves()])
    assert np.polyfit(excess, moved, 1)[0] == pytest.approx(1.13, abs=0.005)
    assert np.corrcoef(excess, moved)[0, 1] == pytest.approx(0.94, abs=0.005)
    at40 = [np.mean([excess[i] for i, r in enumerate(moves()) if r["d"] == str(d) and r["t"] == "40"]) for d in SIZES]
    assert np.allclose(at40, [0.042, 0.042, 0.013], atol=0.0006)
    assert [round(move("between", d, 40), 3) for d in SIZES] == [0.007, 0.006, 0.008]
    means = {p: [move(p, d, t) for d in SIZES for t in (10, 20, 30, 40)] for p in ("overlap", "indices")}
    assert max(np.abs(means["overlap"])) == pytest.approx(0.014, abs=0.0005)
    assert max(np.abs(means["indices"])) < 0.0022
    last = at(400, 40)
    single = {p: np.sort(last[f"{p}_1"] - last["run_1"]) for p in ("excess", "law")}
    assert np.allclose(single["excess"][[0, -1]], [0.002, 0.030], atol=0.0006)
    assert np.allclose(single["law"][[0, -1]], [0.012, 0.039], atol=0.0006)
