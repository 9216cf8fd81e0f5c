"""The teacher's scale in layer 1's input that the cross overlap makes (``aimlib.channels.deep_moments.teacher_parts``,
``book/data/deep_three_scale.csv``, ``deep_three_cross_se_diagonal.csv``; chapter "Three layers: why GAMP-RIE leaves
its state evolution", section "What the denoisers make of their inputs"): the parts in closed form, the law's
scale against the runs', and the state evolution with the mixing's diagonal fed back."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments, teacher_parts
from aimlib.priors import Centred, Wishart
from aimlib.state_evolution.cross_fixed_point import ChannelSide, first_order_prior
from script_support import (assert_first_order_row, committed, made_by_args, rows_at, three_layer_traces)

THREE, CENTRED = DeepAttention(0.5, layers=3), (Centred(0.5),) * 3
SIZES, ITERATIONS = (200, 300, 400), (10, 20, 30, 40)


@functools.cache
def scale_rows() -> tuple:
    """The rows of ``book/data/deep_three_scale.csv`` (checked against their made-by command), read once."""
    args, rows = made_by_args("deep_three_scale", "deep_three_scale.csv")
    assert args.seeds == [0, 1, 2, 3] and args.n == 200_000
    return tuple(rows)


def kind(name: str) -> list[dict]:
    return [r for r in scale_rows() if r["kind"] == name]


def column(rows, key: str) -> np.ndarray:
    return np.array([float(r[key]) for r in rows])


@functools.cache
def first_order_at_1() -> tuple:
    """The alpha = 1 rows of ``deep_three_cross_se.csv`` (the first-order fixed points), read once."""
    return tuple(r for r in committed("deep_three_cross_se.csv")[1] if float(r["alpha"]) == 1.0)


def se_fixed_point() -> tuple:
    """``(mmse_1, mmse_2, mmse_3), e_12``: the means of the alpha = 1 rows of ``deep_three_cross_se.csv``."""
    rows = first_order_at_1()
    return tuple(column(rows, f"mmse_{k}").mean() for k in (1, 2, 3)), column(rows, "e_12").mean()


def test_teacher_parts_in_closed_form():
    """Mixing ``I`` and memory ``0`` (the Nishimori identities) leave no part; otherwise ``P = A + B diag(known) - I``
    with ``known_k = (q_k - s_k)/(Q0_k - s_k)``, by hand; matrices of the wrong size, or ``Q0`` at the known part,
    are refused by name."""
    q, Q0 = (0.6, 0.9, 0.3), (1.5, 1.5, 1.0)
    assert np.allclose(teacher_parts(np.eye(3), np.zeros((3, 3)), q, Q0, 0.5), 0.0)
    A, B = np.array([[0.95, 0.02], [0.17, 1.01]]), np.array([[-0.01, 0.3], [-0.2, -0.05]])
    P = teacher_parts(A, B, (0.6, 0.9), (1.5, 1.5), 0.5)
    known = np.array([0.1, 0.4])                        # (q - 0.5) / (1.5 - 0.5)
    assert P == pytest.approx(A + B * known[None, :] - np.eye(2), abs=1e-15)
    assert P[0, 0] == pytest.approx(-0.05 - 0.001) and P[0, 1] == pytest.approx(0.02 + 0.3 * 0.4)
    with pytest.raises(ValueError, match="must be 2 x 2"):
        teacher_parts(np.eye(3), B, (0.6, 0.9), (1.5, 1.5), 0.5)
    with pytest.raises(ValueError, match="must lie above the known parts"):
        teacher_parts(A, B, (0.6, 0.9), (1.5, 0.5), 0.5)


def test_the_two_layer_parts_are_the_committed_a_12_and_a_21():
    """``scripts/deep_cross_se.py`` writes ``a_12``, ``a_21`` through ``teacher_parts``: each committed row's pair is
    ``P_12``, ``P_21`` of its own mixing and memory (Wishart teachers, ``rho = 0.5``)."""
    prior = Wishart(0.5)
    Q0 = prior.second_moment()
    for r in committed("deep_cross_se.csv")[1]:
        x = {k: float(r[k]) for k in r}
        A = np.array([[x["mix_11"], x["mix_12"]], [x["mix_21"], x["mix_22"]]])
        B = np.array([[0.0, x["mem_12"]], [x["mem_21"], 0.0]])
        P = teacher_parts(A, B, (Q0 - x["mmse_1"], Q0 - x["mmse_2"]), (Q0, Q0), 0.5)
        assert (P[0, 1], P[1, 0]) == pytest.approx((x["a_12"], x["a_21"]), abs=1e-12)


def test_the_rows_are_at_the_states_the_script_names():
    """Four fixed-point rows at the mean state of ``deep_three_cross_se.csv``'s alpha = 1 rows, six of the sweep at
    the same errors, and one row per run of the traces (d = 200, 300, 400, three data sets) and iteration 10 to
    40, at that run's predictions ``m_l`` and measured ``e_12``."""
    m, e = se_fixed_point()
    assert column(kind("fixed_point"), "seed").tolist() == [0, 1, 2, 3]
    for r in kind("fixed_point") + kind("sweep"):
        assert [float(r[f"m_{k}"]) for k in (1, 2, 3)] == pytest.approx(m, abs=1e-12)
    assert column(kind("fixed_point"), "cross") == pytest.approx(e, abs=1e-12)
    assert column(kind("sweep"), "cross").tolist() == [-0.06, -0.042, -0.021, 0.0, 0.021, 0.042]
    traces, runs = three_layer_traces(), kind("run")
    assert sorted((int(r["d"]), int(r["seed"]), int(r["t"])) for r in runs) == sorted(
        (d, s, t) for d in SIZES for s in range(3) for t in ITERATIONS)
    for r in runs:
        tr = traces[int(r["d"]), int(r["seed"]), int(r["t"])]
        assert [float(r[k]) for k in ("m_1", "m_2", "m_3", "cross")] == pytest.approx(
            [float(tr[k]) for k in ("m_1", "m_2", "m_3", "e_12")], abs=1e-12)


def test_the_state_evolution_holds_layer_1s_teacher_below_its_size():
    """At the fixed point with the cross overlap (four sets of draws): the mixing's diagonal ``A_11`` is below one
    by more than ten standard errors of the mean (about 0.952), the teacher's scale with the memory ``s_1`` lies
    between -0.06 and -0.04, and layer 2's within 0.025 of zero.  A fresh recomputation (other draws, no memory)
    puts ``A_11`` within four of its standard errors of the rows' mean, and below one."""
    fp = kind("fixed_point")
    a11, s1, s2 = (column(fp, k) for k in ("mix_11", "s_1", "s_2"))
    assert 1 - a11.mean() > 10 * a11.std(ddof=1) / 2
    assert -0.06 < s1.mean() < -0.04 and np.all(s1 < -0.03)
    assert abs(s2.mean()) < 0.025
    m, e = se_fixed_point()
    again = response_moments(THREE, tuple(1.0 - x for x in m), (1.0,) * 3, cross=e, n=100_000, seed=11,
                             memory=False)
    err = again.se["mixing"][0, 0]
    assert abs(again.mixing[0, 0] - a11.mean()) < 4 * err and again.mixing[0, 0] < 1 - 2 * err


def test_the_lost_scale_follows_the_cross_overlap():
    """The sweep (same draws): ``A_11 - 1`` vanishes at ``e_12 = 0`` within three standard errors, has the sign of
    ``e_12`` at every other value and grows with it, about 1.5 times ``e_12`` near zero."""
    sweep = kind("sweep")
    cross, lost, err = column(sweep, "cross"), column(sweep, "mix_11") - 1, column(sweep, "mix_11_se")
    assert abs(lost[cross == 0][0]) < 3 * err[cross == 0][0]
    assert np.all(np.sign(lost[cross != 0]) == np.sign(cross[cross != 0]))
    assert np.all(np.diff(lost) > 0)
    slope = (lost[cross == 0.021][0] - lost[cross == -0.021][0]) / 0.042
    assert 1.2 < slope < 1.8


def test_the_law_at_the_runs_state_gives_most_of_their_lost_scale():
    """Along the runs (means of three data sets): at the tenth iteration the law at the run's own ``m_l`` and
    ``e_12`` gives the runs' measured ``s_1`` within 0.016; at the 20th to 40th it gives 0.6 to 1 of it at every
    d, and at the 40th at d = 300 and 400 0.6 to 0.7 of it; single runs from the 20th spread over 0.5 to 2."""
    inputs = [r for name in ("deep_three_inputs.csv", "deep_three_inputs_d400.csv") for r in committed(name)[1]]
    runs, single = kind("run"), []
    for d in SIZES:
        for t in ITERATIONS:
            here = sorted((r for r in runs if (int(r["d"]), int(r["t"])) == (d, t)), key=lambda r: r["seed"])
            law, measured = column(here, "mix_11") - 1, rows_at(inputs, d, t)
            assert column(here, "seed").tolist() == measured["seed"].tolist() == [0, 1, 2]
            measured = measured["self_1"]
            if t == 10:
                assert abs(law.mean() - measured.mean()) < 0.016, (d, t)
            else:
                assert 0.6 < law.mean() / measured.mean() < 1.0, (d, t)
                single += list(law / measured)
            if t == 40 and d > 200:
                assert 0.6 < law.mean() / measured.mean() < 0.7, d
    assert 0.5 < min(single) < 0.55 and 1.95 < max(single) < 2.05


@pytest.mark.parametrize("seed", [1, 2])
def test_an_rie_tuned_to_delta_pays_for_the_lost_scale_what_the_closed_form_says(seed):
    """``R = A S + sqrt(Delta) Z`` (a centred Wishart teacher, d = 600, the fixed point's ``Delta_1``, two instances):
    the RIE tuned to ``Delta`` has the error ``mmse(Delta / A^2)`` within 0.003 at ``A = 0.952`` and ``0.9``, 0.017
    and 0.034 above ``mmse(Delta)``; its estimate's norm exceeds its overlap by 0.003 to 0.006 at ``A = 0.952``, within
    0.002 of it at ``A = 1``; and ``first_order_prior(diagonal=True)`` returns those errors."""
    from aimlib.model import matrix_overlap
    from aimlib.rmt.spectrum import sample_goe

    prior, delta, d = CENTRED[0], 5.626, 600
    S, Z = prior.sample(d, seed=seed), sample_goe(d, seed=seed + 10)
    for A, cost, gap in ((1.0, 0.0, (-0.002, 0.002)), (0.952, 0.017, (0.003, 0.006)), (0.9, 0.034, (0.006, 0.014))):
        estimate = prior.denoise(A * S + np.sqrt(delta) * Z, (delta,))[0]
        assert matrix_overlap(estimate - S, estimate - S) == pytest.approx(prior.mmse(delta / A**2), abs=3e-3)
        assert prior.mmse(delta / A**2) - prior.mmse(delta) == pytest.approx(cost, abs=1e-3)
        assert gap[0] < matrix_overlap(estimate, estimate) - matrix_overlap(S, estimate) < gap[1]
    side = ChannelSide(np.array([[2.0, -0.3], [-0.3, 1.0]]), np.diag([0.952, 1.01]), np.zeros((2, 2)))
    fed, kept = (first_order_prior(CENTRED[:2], diagonal=x)((5.6, 20.0), -0.2, side) for x in (True, False))
    assert fed[:2] == pytest.approx([prior.mmse(5.6 / 0.952**2), prior.mmse(20.0 / 1.01**2)], abs=1e-12)
    assert kept[:2] == pytest.approx([prior.mmse(5.6), prior.mmse(20.0)], abs=1e-12)
    with pytest.raises(ValueError, match="diagonal must be positive"):
        first_order_prior(CENTRED[:2], diagonal=True)((5.6, 20.0), -0.2, dataclasses.replace(side, mixing=-np.eye(2)))


def test_the_state_evolution_with_the_diagonal_fed_back():
    """``book/data/deep_three_cross_se_diagonal.csv``: the rows of its made-by command (alpha = 1, 1.5, 2, two sets of
    draws), each a fixed point of the first-order prior side with the mixing's diagonal fed back.  At alpha = 1 it
    puts layer 1's error at 0.854 and 0.856, above the separable 0.836 and the first order's 0.812 (means), with
    ``A_11`` at 0.93; at 1.5 it raises the mean by 0.005 to 0.02 over the first order's; at 2 by under 0.001."""
    args, rows = made_by_args("deep_cross_se", "deep_three_cross_se_diagonal.csv")
    assert args.layers == 3 and args.prior == "diagonal" and args.alpha is None and args.seeds == [0, 1]
    assert [(float(r["alpha"]), int(r["seed"])) for r in rows] == [(a, s) for s in (0, 1) for a in (1.0, 1.5, 2.0)]
    first = committed("deep_three_cross_se.csv")[1]
    for r in rows:
        assert_first_order_row(r, THREE, CENTRED, diagonal=True)

    def mean(table, a, key="mmse_1"):
        return np.mean([float(r[key]) for r in table if float(r["alpha"]) == a])
    at1 = sorted(float(r["mmse_1"]) for r in rows if float(r["alpha"]) == 1.0)
    assert at1 == pytest.approx([0.854, 0.856], abs=6e-4) and mean(first, 1.0) == pytest.approx(0.812, abs=6e-4)
    assert mean(rows, 1.0, "sep_mmse_1") == pytest.approx(0.836, abs=6e-4)
    assert mean(rows, 1.0, "mix_11") == pytest.approx(0.93, abs=5e-3)
    assert 0.005 < mean(rows, 1.5) - mean(first, 1.5) < 0.02
    assert abs(mean(rows, 2.0) - mean(first, 2.0)) < 0.001


def test_the_runs_at_400_pass_near_the_state_evolution_with_the_diagonal():
    """From the 20th to the 40th iteration the runs at d = 400 (three data sets) have layer-1 errors 0.852 to 0.864
    and predictions 0.845 to 0.833, about the fixed point's 0.855 and ``mmse_1(Delta_1)`` 0.833."""
    traces = three_layer_traces()
    mean = {(t, k): np.mean([float(traces[400, s, t][k]) for s in range(3)])
            for t in (20, 40) for k in ("error_1", "m_1")}
    assert (mean[20, "error_1"], mean[40, "error_1"]) == pytest.approx((0.852, 0.864), abs=6e-4)
    assert (mean[20, "m_1"], mean[40, "m_1"]) == pytest.approx((0.845, 0.833), abs=6e-4)
    _, rows = committed("deep_three_cross_se_diagonal.csv")
    at1 = [r for r in rows if float(r["alpha"]) == 1.0]
    assert np.mean([float(r["mmse_1"]) for r in at1]) == pytest.approx(0.855, abs=6e-4)
    assert np.mean([CENTRED[0].mmse(float(r["delta_1"])) for r in at1]) == pytest.approx(0.833, abs=6e-4)


def test_the_prior_side_to_all_orders_measures_the_closed_form_cost():
    """At the first order's alpha = 1 fixed point (means of its four rows), the prior side to all orders, measured on
    two RIEs at d = 600 (eight instances, the chapter's), raises layer 1's error by about what the closed form of the
    diagonal alone says, ``mmse_1(Delta_1 / A_11^2) - mmse_1(Delta_1)`` (0.017), within 0.003."""
    from aimlib.state_evolution.cross_fixed_point import measured_shifts

    rows = first_order_at_1()
    A, B = (np.array([[column(rows, f"{x}_{l}{k}").mean() for k in (1, 2)] for l in (1, 2)]) for x in ("mix", "mem"))
    deltas = (column(rows, "delta_1").mean(), column(rows, "delta_2").mean())
    shift, _ = measured_shifts(CENTRED[:2], deltas, column(rows, "kappa").mean(), A, B, 600, range(8))
    closed = CENTRED[0].mmse(deltas[0] / A[0, 0] ** 2) - CENTRED[0].mmse(deltas[0])
    assert closed == pytest.approx(0.017, abs=1e-3)
    assert shift[0] == pytest.approx(closed, abs=3e-3)
