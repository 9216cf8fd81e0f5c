"""The law that three-layer GAMP-RIE's channel step meets along its run (``book/data/deep_three_fisher*.csv``,
chapter "Three layers", section "What the channel step meets"): the two Fisher estimates on given samples, the
script's reading of a known law, its rebuilding of the loop's own outputs, and the chapter's findings."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.channels import DeepAttention
from aimlib.channels.base import sample_indices
from aimlib.channels.deep_moments import draw_law, response_moments, sample_moments
from script_support import by_run, committed, import_script, made_by_args, rows_at, three_layer_traces

NAMES = ("deep_three_fisher.csv", "deep_three_fisher_d300.csv")


def _rows():
    """``(args, rows)`` of each committed file, by name."""
    return {name: made_by_args("deep_three_fisher", name) for name in NAMES}


def test_sample_moments_are_response_moments_on_the_same_draws():
    """``sample_moments`` on the draws ``response_moments`` makes from the same seed returns its ``F`` and ``Lambda``
    (means of equal batches' means), with or without the outputs handed to it; where the law is the one ``g_out``
    assumes, each layer's two Fisher estimates agree within five standard errors (``-Lambda_ll = F_ll``)."""
    ch, q, Q0 = DeepAttention(0.5, layers=3), (0.3, 0.4, 0.5), (1.0, 1.0, 1.0)
    ref = response_moments(ch, q, Q0, n=20_000, seed=7)
    rng = np.random.default_rng(7)
    _, Q0v, V, s = ch.law_args(q, Q0, 0.0)
    omega, h, _, _ = draw_law(q, Q0v, s, 0.0, 3, 20_000, rng)
    y = ch(h, seed=rng)
    F, Lam = sample_moments(ch, y, omega, V)
    np.testing.assert_allclose(F, ref.F, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Lam, ref.Lambda, rtol=1e-8, atol=1e-10)
    F2, Lam2 = sample_moments(ch, y, omega, V, g=ch.g_out(y, omega, V))
    assert np.array_equal(F2, F) and np.array_equal(Lam2, Lam)
    se = np.sqrt(np.diag(ref.se["F"]) ** 2 + np.diag(ref.se["Lambda"]) ** 2)
    assert np.all(np.abs(np.diag(Lam) + np.diag(F)) < 5 * se)
    with pytest.raises(ValueError, match="eps"):
        sample_moments(ch, y, omega, V, eps=0.0)


@pytest.mark.parametrize("gain", [1.0, 0.6])
def test_the_residual_law_reads_a_known_law(gain):
    """``residual_law`` on ``h = gain omega + r`` with ``r`` of variance ``m_l`` per layer (in units of ``Sigma``) and a
    correlation ``-0.3`` between layers 1 and 2, none with layer 3: ``var_l`` is one plus ``(gain - 1)^2 q_l / m_l``,
    ``slope_l`` is ``gain - 1``, ``q_l`` the estimates' variance, ``corr_12`` about ``-0.3`` at ``gain = 1`` and the
    other correlations about zero (200 000 samples: within 0.02)."""
    rng, n = np.random.default_rng(1), 200_000
    q, m, rho = np.array([0.5, 0.8, 0.3]), (0.4, 0.25, 0.6), -0.3
    omega = np.stack([np.sqrt(x) * sample_indices(n, 2, 1.0, rng) for x in q], axis=1)
    xi = [sample_indices(n, 2, 1.0, rng) for _ in range(3)]
    r = np.stack([xi[0], rho * xi[0] + np.sqrt(1 - rho ** 2) * xi[1], xi[2]], axis=1) * np.sqrt(m)[:, None, None]
    out = import_script("deep_three_fisher").residual_law(gain * omega + r, omega, m)
    for l in range(3):
        assert out[f"var_{l + 1}"] == pytest.approx(1 + (gain - 1) ** 2 * q[l] / m[l], abs=0.02)
        assert out[f"slope_{l + 1}"] == pytest.approx(gain - 1, abs=0.02)
        assert out[f"q_{l + 1}"] == pytest.approx(q[l], rel=0.02) and out[f"m_{l + 1}"] == m[l]
    if gain == 1.0:
        assert out["corr_12"] == pytest.approx(rho, abs=0.02)
    assert abs(out["corr_13"]) < 0.02 and abs(out["corr_23"]) < 0.02


def test_the_script_rebuilds_the_loops_own_outputs():
    """At d = 30, six iterations: from the state the loop hands its callback (``IterationState.onsager`` among it) the
    script's estimates ``omega`` give outputs whose damped mix is the loop's, to rounding, at every iteration from
    the second; the rows carry every column."""
    script = import_script("deep_three_fisher")
    rows = script.run(30, 0, 0.1, 6)
    assert [r["t"] for r in rows] == [2, 3, 4, 5, 6]
    assert all(r["match"] < 1e-12 for r in rows)
    assert all(set(r) == set(script.COLUMNS) and all(np.isfinite(r[k]) for k in script.COLUMNS[4:]) for r in rows)


def test_where_gamp_rie_follows_its_state_evolution_the_channel_step_meets_its_law():
    """The control: one hardmax layer (``T = 2``, Wishart ``rho = 0.5``, alpha = 0.3, d = 100), whose GAMP-RIE
    follows its state evolution (``tests/test_amp.py``).  From iteration 20 to its stop the estimates ``omega``
    are indices of a fresh token (``q`` within 0.006 of ``fq``, ``c`` of ``fc``: 0.0048 and 0.0051 in this run, at
    a variance near 1.2), the estimate's norm exceeds its
    overlap by a steady amount, the RIE's at this ``d`` (``fq - fc`` 0.045 to 0.06 at a variance near 1.2, so a
    slope of -0.045 to -0.03), and the residual has nearly the law ``g_out`` assumes: ``var`` within 0.1 of one
    (the three-layer runs at d = 100 reach slopes of -0.37 and variances of 1.16)."""
    from aimlib import amp, channels, model
    from aimlib.index_map import IndexMap

    script = import_script("deep_three_fisher")
    ch = channels.Hardmax()
    data = model.sample_dataset(0.3, 100, 2, 0.5, ch, seed=0)
    index, before, rows = IndexMap(data.X), [], []
    teacher = script.indices(index, [data.S])

    def record(state):
        if before:
            rows.append(script.law_columns(index, before[0], [data.S], teacher) | {"t": state.t})
        before[:] = [script.snapshot(state)]

    res = amp.gamp_rie(data.X, data.y, ch, data.priors, S=data.S, callback=record)
    late = [r for r in rows if r["t"] >= 20]
    assert res.reason == "tol" and len(late) >= 10
    for r in late:
        assert abs(r["q_1"] - r["fq_1"]) < 0.006 and abs(r["c_1"] - r["fc_1"]) < 0.006
        assert 0.045 < r["fq_1"] - r["fc_1"] < 0.06 and -0.045 < r["slope_1"] < -0.03
        assert abs(r["var_1"] - 1) < 0.1


def test_the_rows_are_the_made_by_runs_and_their_states_the_traces():
    """Every iteration 2..40 of the (d, seed) each made-by command names, at alpha = 1, the rebuilt outputs the loop's
    to 1e-10; the variances handed to ``g_out`` at iteration t are the predictions the traces record after iteration
    t - 1 (the same runs, ``deep_three_trace.csv`` and ``_d300.csv``) to 1e-11 relative."""
    traces = three_layer_traces()
    for args, rows in _rows().values():
        runs = by_run(rows)
        assert sorted(runs) == sorted((d, s) for d in args.d for s in args.seeds)
        for key, found in runs.items():
            assert [int(r["t"]) for r in found] == list(range(2, args.iterations + 1))
            assert all(float(r["alpha"]) == 1.0 and float(r["match"]) < 1e-10 for r in found)
            for r in found:
                trace = traces[(*key, int(r["t"]) - 1)]
                for k in ("1", "2", "3"):
                    assert float(r["m_" + k]) == pytest.approx(float(trace["m_" + k]), rel=1e-11)


#: the chapter's numbers: the largest ``|q - fq|``, ``|c - fc|`` from iteration 10 on, and the gaps ``fq - fc`` of
#: layers 1 and 2 at iteration 40 (means of three data sets)
FRESH = {100: 0.0121, 200: 0.0066, 300: 0.0033}
GAP_1, GAP_2 = {100: 0.111, 200: 0.043, 300: 0.042}, {100: 0.070, 200: 0.048, 300: 0.030}


def _state_evolution_ratios() -> np.ndarray:
    """``-Lambda_ll / F_ll`` at the fixed point of the state evolution with ``q_12`` carried (alpha = 1, the means of
    ``book/data/deep_three_cross_se.csv``), under its law with the cross term (30 000 draws): near 1.01, 1.04, 1.00
    (within 0.03; the chapter prints them from 60 000 draws)."""
    rows = [r for r in committed("deep_three_cross_se.csv")[1] if float(r["alpha"]) == 1.0]
    m = np.array([np.mean([float(r[f"mmse_{k}"]) for r in rows]) for k in (1, 2, 3)])
    e12 = np.mean([float(r["e_12"]) for r in rows])
    law = response_moments(DeepAttention(0.5, layers=3), tuple(1.0 - m), (1.0,) * 3, cross=e12, n=30_000, seed=0)
    ratio = -np.diag(law.Lambda) / np.diag(law.F)
    assert ratio == pytest.approx([1.01, 1.04, 1.00], abs=0.03)
    return ratio


def test_the_estimates_leave_the_nishimori_identity_while_the_onsager_terms_do_their_part():
    """The chapter's findings (alpha = 1, three data sets per d = 100, 200, 300).

    From iteration 10 on every run's estimates are indices of a fresh token: the largest ``|q - fq|`` and ``|c -
    fc|`` over the runs and layers is FRESH[d] (within 5e-5), falling with d.  At iteration 10 the means sit on the
    Nishimori identity (``|fq - fc| < 0.021``) with ``var_1``, ``var_2`` within 0.021 of one, while layer 3's
    residual still exceeds its prediction (``var_3`` 1.04 to 1.11) and layer 1's Fisher ratio is 0.915 to 0.93
    (layer 3's 0.91 to 0.97, layer 2's 0.99 to 1.01; the estimates faint, ``fq`` about 0.14 and below 0.04).
    At iteration 40 the gaps ``fq - fc`` are GAP_1[d] and GAP_2[d] (means, within 0.001), every run's layer 1 gap
    above 0.02; the slopes of layers 1 and 2 below -0.2, the variances above 1.05 (layer 1) and 1.02 (layer 2), the
    Fisher ratios of layers 1 and 2 above their iteration-10 values by more than 0.08, layer 2's above 1.08 and
    the state evolution's by more than 0.03; ``corr_12`` between -0.11 and -0.05, within 0.01 of the state
    evolution's -0.048 at d = 200 and 300; layer 2's mean ratio stays above the state evolution's from the 12th,
    17th and 25th iteration.
    """
    rows = [r for _, rs in _rows().values() for r in rs]
    ratio_se = _state_evolution_ratios()
    fresh = []
    for d in (100, 200, 300):
        late = {k: np.array([float(r[k]) for r in rows if int(r["d"]) == d and int(r["t"]) >= 10]) for k in rows[0]}
        worst = max(np.abs(late[f"{a}_{k}"] - late[f"f{a}_{k}"]).max() for a in ("q", "c") for k in (1, 2, 3))
        assert worst == pytest.approx(FRESH[d], abs=5e-5)
        fresh.append(worst)
        early, end = rows_at(rows, d, 10), rows_at(rows, d, 40)
        assert all(abs(np.mean(early[f"fq_{k}"] - early[f"fc_{k}"])) < 0.021 for k in (1, 2, 3))
        assert all(abs(early[f"var_{k}"].mean() - 1) < 0.021 for k in (1, 2))
        assert 1.04 < early["var_3"].mean() < 1.11 and 0.915 < early["ratio_1"].mean() < 0.93
        assert 0.91 < early["ratio_3"].mean() < 0.97 and 0.99 < early["ratio_2"].mean() < 1.01
        assert early["fq_1"].mean() == pytest.approx(0.14, abs=0.008) and early["fq_2"].mean() < 0.04
        gaps = [np.mean(end[f"fq_{k}"] - end[f"fc_{k}"]) for k in (1, 2)]
        assert gaps == pytest.approx([GAP_1[d], GAP_2[d]], abs=0.001)
        assert np.all(end["fq_1"] - end["fc_1"] > 0.02)
        for k, least in ((1, 1.05), (2, 1.02)):
            assert end[f"slope_{k}"].mean() < -0.2 and end[f"var_{k}"].mean() > least
            assert end[f"ratio_{k}"].mean() - early[f"ratio_{k}"].mean() > 0.08
        assert end["ratio_2"].mean() > max(1.08, ratio_se[1] + 0.03) and -0.11 < end["corr_12"].mean() < -0.05
        assert d == 100 or abs(end["corr_12"].mean() + 0.048) < 0.01
        run = [rows_at(rows, d, t)["ratio_2"].mean() for t in range(2, 41)]
        assert max(t for t, x in zip(range(2, 41), run) if x <= ratio_se[1]) + 1 == {100: 12, 200: 17, 300: 25}[d]
    assert fresh[0] > fresh[1] > fresh[2]
