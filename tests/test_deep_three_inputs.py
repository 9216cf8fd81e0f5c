"""What three-layer GAMP-RIE's denoisers make of their inputs (``book/data/deep_three_inputs.csv`` and ``_d400.csv``,
chapter "Three layers: why GAMP-RIE leaves its state evolution", section "What the denoisers make of their inputs"):
the columns of ``scripts/deep_three_inputs.py`` on inputs of known law, the files' runs against the traces, and the
chapter's findings."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from script_support import by_run, committed, import_script, made_by_args, rows_at, three_layer_traces

NAMES = ("deep_three_inputs.csv", "deep_three_inputs_d400.csv")
#: the rungs of the chapter's ladder, each keeping more of the input than the last
LADDER = ("pred", "law", "sized", "synth", "rotated", "fresh")


@functools.cache
def all_rows() -> list[dict]:
    """The rows of both committed files (d = 100 to 300, and 400), read once."""
    return [r for name in NAMES for r in committed(name)[1]]


@pytest.mark.parametrize("scale", [0.0, -0.25])
def test_the_ladder_reads_an_input_of_known_law_right(scale):
    """``layer_row`` fed ``R = S + scale C + sqrt(Delta) Z'`` (d = 300, a centred Wishart teacher, Delta = 2): it reads
    the teacher's part back (``self`` within 0.02 of ``scale``), the noise ratio is the one handed to it and
    ``pred`` the prediction the denoiser returns at Delta; ``law`` is within 0.03 of ``pred`` (one draw at d =
    300) and ``sized`` within 0.01 of ``law`` (nu near 1); the rotated input's error is within 0.03 of ``fresh``
    and so is the synthetic one's, whose own GOE differs from Z'.  The teacher's scale is read as such: ``synth``
    within 0.01 of ``sized`` at scale 0, above it by more than 0.05 at 3/4 of the teacher.  A rest whose spectrum
    is not a semicircle (that GOE plus a diagonal of standard deviation sqrt(Delta), whose free sum has the fourth
    moment 2 + 1/4 in units of its variance squared): ``rotated`` follows ``fresh`` while ``synth``, a GOE of the
    same size, misses it by more than 0.05."""
    from aimlib.model import matrix_overlap
    from aimlib.priors import Centred
    from aimlib.rmt.spectrum import sample_goe

    prior, d, delta = Centred(0.5), 300, 2.0
    S = prior.sample(d, seed=1)
    R = S + scale * S + np.sqrt(delta) * sample_goe(d, seed=2)
    layer_row = import_script("deep_three_inputs").layer_row

    def read(R):
        ratio = matrix_overlap(R - S, R - S) / delta
        return ratio, layer_row(prior, R, S, S, (delta,), ratio, np.random.default_rng(3))

    ratio, row = read(R)
    assert row["self"] == pytest.approx(scale, abs=0.02) and row["noise"] == ratio and row["delta"] == delta
    assert row["pred"] == pytest.approx(sum(prior.denoise(R, (delta,))[1]), rel=1e-9)   # the prediction it returns
    assert abs(row["law"] - row["pred"]) < 0.03 and abs(row["sized"] - row["law"]) < 0.01
    assert max(abs(row["synth"] - row["fresh"]), abs(row["rotated"] - row["fresh"])) < 0.03
    if scale == 0.0:
        assert abs(row["synth"] - row["sized"]) < 0.01
    else:
        assert row["synth"] - row["sized"] > 0.05
    diagonal = np.sqrt(delta) * np.diag(np.random.default_rng(4).standard_normal(d))
    _, wide = read(R + diagonal)        # free sum with a Gaussian diagonal: no semicircle
    assert abs(wide["rotated"] - wide["fresh"]) < 0.03 and wide["fresh"] - wide["synth"] > 0.05


@pytest.mark.parametrize("name", NAMES)
def test_the_rows_are_the_made_by_runs_and_their_errors_the_traces(name):
    """Every iteration 1..40 of the (d, seed) the made-by command names, at alpha = 1; the errors of the damped
    estimate and the noise ratios are those of the same runs in ``deep_three_trace.csv``, ``_d300.csv`` and
    ``_d400.csv`` (the same data set, start and algorithm, run at another time, some with two BLAS threads) to 1e-11
    relative, at every iteration both hold."""
    args, rows = made_by_args("deep_three_inputs", name)
    runs, traces = by_run(rows), three_layer_traces()
    assert sorted(runs) == sorted((d, s) for d in args.d for s in args.seeds)
    for key, found in runs.items():
        assert [int(r["t"]) for r in found] == list(range(1, args.iterations + 1))
        assert all(float(r["alpha"]) == 1.0 for r in found)
        shared = [(r, traces[(*key, int(r["t"]))]) for r in found if (*key, int(r["t"])) in traces]
        assert len(shared) == args.iterations
        for mine, trace in shared:
            for k in ("1", "2", "3"):
                assert float(mine["error_" + k]) == pytest.approx(float(trace["error_" + k]), rel=1e-11)
                assert float(mine["noise_" + k]) == pytest.approx(float(trace["noise_" + k]), rel=1e-11)


def test_the_denoisers_lose_what_they_lose_on_any_input_of_that_size_scale_and_spectrum():
    """The chapter's findings (three data sets per d = 100, 200, 300, 400).  From t = 10 to 40 Delta_2 lies between 16
    and 35.5 and Delta_1 between 4 and 8.  At t = 10 layer 1's ladder is flat at d >= 200 (every rung within 0.011 of
    the last, fresh within 0.01 of the prediction) and layer 2's teacher arrives above its size (s_2 > 0.08) at no
    cost (below 0.01).  At t = 40 fresh stands 0.04 to 0.25 above the prediction in layers 1 and 2 at d <= 300, 0.03
    at 400; the rotated input's error is within 0.012 of it on average and 0.03 in every run, in all three layers,
    and along the run (t = 10 to 40) within 0.052, 0.03, 0.02 and 0.015 at d = 100 to 400; the noise's size costs
    layers 1 and 2 less at every larger d (0.084, 0.024, 0.019, 0.005 and 0.080, 0.025, 0.010, 0.001, within
    0.001); layer 1's scale s_1 lies between -0.17 and -0.08 and costs 0.025 to 0.041, more at d = 300 and 400 than
    at 200 (every run at 400 at s_1 <= -0.085, costing 0.026 or more), layer 2's under 0.01; layer 2's spectral
    part falls with d, from 0.13 at 100 to 0.010 at 400, layer 1's is under 0.03."""
    rows = all_rows()
    spectral, scale_1 = [], []
    for d in (100, 200, 300, 400):
        early, late = rows_at(rows, d, 10), rows_at(rows, d, 40)
        run = {k: np.array([float(r[k]) for r in rows if int(r["d"]) == d and 10 <= int(r["t"]) <= 40])
               for k in rows[0] if k[-2:] in ("_1", "_2", "_3")}
        assert 16 <= run["delta_2"].min() and run["delta_2"].max() <= 35.5
        assert 4 <= run["delta_1"].min() and run["delta_1"].max() <= 8
        assert max(np.abs(run[f"fresh_{k}"] - run[f"rotated_{k}"]).max() for k in (1, 2, 3)) < {
            100: 0.052, 200: 0.03, 300: 0.02, 400: 0.015}[d]
        if d > 100:
            rungs = [early[f"{x}_1"].mean() for x in LADDER]
            assert np.abs(np.diff(rungs)).max() < 0.011 and abs(rungs[-1] - rungs[0]) < 0.01
            assert early["self_2"].mean() > 0.08 and early["synth_2"].mean() - early["sized_2"].mean() < 0.01
        for k in (1, 2, 3):
            gap = late[f"fresh_{k}"] - late[f"rotated_{k}"]
            assert abs(gap.mean()) < 0.012 and np.abs(gap).max() < 0.03
        mean = {f"{x}_{k}": late[f"{x}_{k}"].mean() for x in LADDER for k in (1, 2)}
        above = (0.025, 0.04) if d == 400 else (0.04, 0.25)
        assert all(above[0] < mean[f"fresh_{k}"] - mean[f"pred_{k}"] < above[1] for k in (1, 2))
        size = [mean[f"sized_{k}"] - mean[f"law_{k}"] for k in (1, 2)]
        assert size == pytest.approx({100: [0.084, 0.080], 200: [0.024, 0.025], 300: [0.019, 0.010],
                                      400: [0.005, 0.001]}[d], abs=0.001)
        assert -0.17 < late["self_1"].mean() < -0.08
        assert 0.025 < mean["synth_1"] - mean["sized_1"] < 0.041 and mean["synth_2"] - mean["sized_2"] < 0.01
        spectral.append(mean["rotated_2"] - mean["synth_2"])
        scale_1.append(mean["synth_1"] - mean["sized_1"])
        assert abs(mean["rotated_1"] - mean["synth_1"]) < 0.03
    assert min(spectral[:3]) > 0.025 and spectral == sorted(spectral, reverse=True)
    assert spectral[0] > 3 * spectral[2] and spectral[3] == pytest.approx(0.010, abs=0.001)
    assert scale_1[2] > scale_1[1] and scale_1[3] > scale_1[1]
    at_400 = rows_at(rows, 400, 40)
    assert at_400["self_1"].max() <= -0.085 and (at_400["synth_1"] - at_400["sized_1"]).min() > 0.026


def test_layer_1s_lost_scale_keeps_the_iterations_clock_while_the_noise_comes_later():
    """The chapter's table (means of three data sets): from d = 200 to 400, s_1 at each of the 10th, 20th and 30th
    iterations is at least as far below zero at the larger size (-0.05 to -0.07 at the 20th, -0.07 to -0.09 at the
    30th), while nu_1 - 1 at the 20th and 30th is lower at each larger size (0.050, 0.027, -0.011 at the 30th)."""
    rows = all_rows()
    mean = {(d, t, x): rows_at(rows, d, t)[x].mean() for d in (200, 300, 400) for t in (10, 20, 30)
            for x in ("self_1", "noise_1")}
    for t in (10, 20, 30):
        scale = [mean[d, t, "self_1"] for d in (200, 300, 400)]
        assert scale == sorted(scale, reverse=True) and scale[0] < 0
    for t in (20, 30):
        noise = [mean[d, t, "noise_1"] for d in (200, 300, 400)]
        assert noise == sorted(noise, reverse=True)
    assert [round(mean[d, 30, "noise_1"] - 1, 3) for d in (200, 300, 400)] == [0.050, 0.027, -0.011]
    assert -0.075 < mean[400, 20, "self_1"] < mean[200, 20, "self_1"] < -0.045
    assert -0.09 < mean[400, 30, "self_1"] < mean[200, 30, "self_1"] < -0.07
