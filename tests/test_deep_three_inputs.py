"""What three-layer GAMP-RIE's denoisers make of their inputs (``book/data/deep_three_inputs.csv``, chapter "Three
layers", section "What the denoisers make of their inputs"): the columns of ``scripts/deep_three_inputs.py`` on
inputs of known law, the file's runs against the traces, and the chapter's findings."""
from __future__ import annotations

import numpy as np
import pytest

from script_support import committed, import_script, made_by_args

NAME = "deep_three_inputs.csv"
#: the rungs of the chapter's ladder, each keeping more of the input than the last
LADDER = ("pred", "at_nu", "synth", "rotated", "fresh")


def at(d: int, t: int) -> dict:
    """The rows at ``d`` and iteration ``t``: per column, an array over the data sets (seeds in order)."""
    rows = sorted((r for r in committed(NAME)[1] if int(r["d"]) == d and int(r["t"]) == t), key=lambda r: r["seed"])
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}
@pytest.mark.parametrize("scale", [0.0, -0.25])
def test_the_prior_step_columns_read_an_input_of_known_law_right(scale):
    """``layer_row`` fed ``R = S + scale C + sqrt(Delta) Z`` (d = 300, a centred Wishart teacher, Delta = 2): it
    reads the teacher's part back (``self`` within 0.02 of ``scale``), the noise ratio is the one handed to it,
    ``pred`` is the prediction the denoiser returns at Delta and ``at_nu`` the prior's error at ``nu Delta``; on
    the law of the state evolution (``scale = 0``) the denoised error ``fresh`` is within 0.03 of ``pred``; in both
    cases the synthetic and the rotated inputs' errors are within 0.03 of ``fresh``, while a teacher at 3/4 of its
    size costs more than 0.02 beyond ``at_nu``.  A rest whose spectrum is not a semicircle (that GOE plus a
    diagonal of standard deviation sqrt(Delta), whose free sum has the fourth moment 2 + 1/4 in units of its
    variance squared): ``rotated`` follows ``fresh`` while ``synth``, a GOE of the same size, misses it by more
    than 0.05."""
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
    assert row["at_nu"] == pytest.approx(prior.mmse(ratio * delta), abs=1e-12)
    assert max(abs(row["synth"] - row["fresh"]), abs(row["rotated"] - row["fresh"])) < 0.03
    if scale == 0.0:
        assert abs(row["fresh"] - row["pred"]) < 0.03
    else:
        assert row["fresh"] > row["at_nu"] + 0.02
    diagonal = np.sqrt(delta) * np.diag(np.random.default_rng(4).standard_normal(d))
    _, wide = read(R + diagonal)        # free sum with a Gaussian diagonal: no semicircle
    assert abs(wide["rotated"] - wide["fresh"]) < 0.03 and wide["fresh"] - wide["synth"] > 0.05


def test_the_rows_are_the_made_by_runs_and_their_errors_the_traces():
    """Every iteration 1..40 of the (d, seed) the made-by command names, at alpha = 1; the errors of the damped
    estimate are those of the same runs in ``deep_three_trace.csv`` and ``_d300.csv`` (the same data set, start
    and algorithm, run at another time) to 1e-12, at every iteration both hold."""
    args, rows = made_by_args("deep_three_inputs", NAME)
    runs = {}
    for r in rows:
        runs.setdefault((int(r["d"]), int(r["seed"])), []).append(r)
    assert sorted(runs) == sorted((d, s) for d in args.d for s in args.seeds)
    traces = {}
    for name in ("deep_three_trace.csv", "deep_three_trace_d300.csv"):
        for r in committed(name)[1]:
            if float(r["alpha"]) == 1.0:
                traces[int(r["d"]), int(r["seed"]), int(r["t"])] = r
    for key, found in runs.items():
        assert [int(r["t"]) for r in found] == list(range(1, args.iterations + 1))
        assert all(float(r["alpha"]) == 1.0 for r in found)
        shared = [(r, traces[(*key, int(r["t"]))]) for r in found if (*key, int(r["t"])) in traces]
        assert len(shared) == args.iterations
        for mine, trace in shared:
            for k in ("1", "2", "3"):
                assert float(mine["error_" + k]) == pytest.approx(float(trace["error_" + k]), abs=1e-12)
                assert float(mine["noise_" + k]) == pytest.approx(float(trace["noise_" + k]), abs=1e-9)


def test_the_denoisers_do_with_their_inputs_what_they_do_with_any_input_of_that_scale_and_spectrum():
    """The chapter's findings (three data sets per d = 100, 200, 300).  From t = 10 to 40 Delta_2 lies between 16 and
    35.5 and Delta_1 between 4 and 8.  At t = 10 layer 1's ladder is flat at d = 200
    and 300 (every rung within 0.01 of the last, fresh within 0.01 of the prediction) and layer 2's teacher arrives
    above its size (s_2 > 0.08).  At t = 40 fresh stands 0.04 to 0.25 above the prediction in layers 1 and 2; the
    rotated input's error is within 0.012 of it on average and 0.03 in every run, in all three layers; the extra
    noise costs 0.035 at most; layer 1's scale s_1 lies between -0.17 and -0.08 at every d and its cost does not
    fall from d = 200 to 300; layer 2's spectral part exceeds 0.025 and falls with d, by more than three from 100
    to 300."""
    spectral = []
    for d in (100, 200, 300):
        early, late = at(d, 10), at(d, 40)
        for t in range(10, 41):                 # the noises the chapter quotes: layer 2's 16 to 35, layer 1's 4 to 8
            assert 16 <= at(d, t)["delta_2"].min() and at(d, t)["delta_2"].max() <= 35.5
            assert 4 <= at(d, t)["delta_1"].min() and at(d, t)["delta_1"].max() <= 8
        if d > 100:
            rungs = [early[f"{x}_1"].mean() for x in LADDER]
            assert np.abs(np.diff(rungs)).max() < 0.01 and abs(rungs[-1] - rungs[0]) < 0.01
            assert early["self_2"].mean() > 0.08
        for k in (1, 2, 3):
            gap = late[f"fresh_{k}"] - late[f"rotated_{k}"]
            assert abs(gap.mean()) < 0.012 and np.abs(gap).max() < 0.03
        mean = {f"{x}_{k}": late[f"{x}_{k}"].mean() for x in LADDER for k in (1, 2)}
        assert all(0.04 < mean[f"fresh_{k}"] - mean[f"pred_{k}"] < 0.25 for k in (1, 2))
        assert all(mean[f"at_nu_{k}"] - mean[f"pred_{k}"] < 0.035 for k in (1, 2))
        assert -0.17 < late["self_1"].mean() < -0.08
        spectral.append(mean["rotated_2"] - mean["synth_2"])
    assert min(spectral) > 0.025 and spectral[0] > spectral[1] > spectral[2] and spectral[0] > 3 * spectral[2]
    cost = [at(d, 40)["synth_1"].mean() - at(d, 40)["at_nu_1"].mean() for d in (200, 300)]
    assert cost[1] > cost[0]
