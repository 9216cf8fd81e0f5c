"""The responses of two layers under the law GAMP-RIE's estimates meet (aimlib.channels.deep_moments):
the Nishimori identities where that law is the one g_out assumes, and the mixing the cross term makes."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import (draw_gaussian, draw_law, index_moments, input_teacher_parts, law_moments,
                                           response_moments, teacher_parts)
from conftest import ROOT

#: the Wishart fixed point at alpha = 0.3 (c = 0.5, rho = 0.5): overlaps and second moments
Q_FP, Q0_FP = (0.6432, 0.8261), (1.5, 1.5)


@pytest.mark.parametrize("shared", [0.0, 0.5])
def test_where_the_law_is_g_outs_the_nishimori_identities_hold(shared):
    """``cross = 0``: ``Gamma = F`` (Stein's identity on the indices) and ``Lambda = -F`` (differences of
    ``g_out`` in ``omega``), so the mixing is ``I`` and the memory ``0``, within five standard errors."""
    q = (0.3, 0.4) if shared == 0 else Q_FP
    Q0 = (1.0, 1.0) if shared == 0 else Q0_FP
    m = response_moments(DeepAttention(0.5), q, Q0, shared=shared, n=40_000, seed=3)
    scale = np.sqrt(m.se["F"] ** 2 + m.se["Gamma"] ** 2)
    assert np.all(np.abs(m.Gamma - m.F) < 5 * scale + 1e-3)
    assert np.all(np.abs(m.Lambda + m.F) < 5 * np.sqrt(m.se["F"] ** 2 + m.se["Lambda"] ** 2) + 1e-3)
    assert np.all(np.abs(m.mixing - np.eye(2)) < 5 * m.se["mixing"] + 1e-3)
    assert np.all(np.abs(m.memory) < 5 * m.se["memory"] + 1e-3)
    assert abs(m.F[0, 1]) > (0.1 if shared else -1)        # Wishart teachers: a real cross term


def test_the_cross_term_mixes_the_other_layers_teacher_into_layer_1():
    """At the Wishart fixed point with the runs' residual cross-covariance, layer 1's input carries a
    positive part of layer 2's teacher, many standard errors from zero (the sign the runs measure)."""
    m = response_moments(DeepAttention(0.5), Q_FP, Q0_FP, shared=0.5, cross=-0.03, n=60_000, seed=4)
    assert m.mixing[0, 1] > 3 * m.se["mixing"][0, 1]


def test_the_committed_prediction_has_the_runs_sign_and_size():
    """``book/data/deep_mixing.csv`` against ``book/data/deep_cross_overlap.csv``: at alpha = 0.3 the predicted
    ``a_12`` at the runs' cross-covariance is positive and within a factor two of the runs' mean."""
    def read(name):
        with open(ROOT / "book" / "data" / name, newline="") as fh:
            return list(csv.DictReader(line for line in fh if not line.startswith("#")))
    runs = [float(r["a_12"]) for r in read("deep_cross_overlap.csv") if float(r["alpha"]) == 0.3]
    pred = [r for r in read("deep_mixing.csv") if float(r["alpha"]) == 0.3 and r["source"] == "runs"]
    assert len(pred) == 1 and float(pred[0]["a_12"]) > 3 * float(pred[0]["mix_12_se"])
    assert 0.5 < float(pred[0]["a_12"]) / np.mean(runs) < 2.0


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="Q0 must hold 3"):
        response_moments(DeepAttention(0.5, layers=3), (0.3,) * 3, (1.0,) * 2, n=2000)
    with pytest.raises(ValueError, match="too large"):
        response_moments(DeepAttention(0.5), (0.3, 0.3), (1.0, 1.0), cross=0.31, n=2000)
    with pytest.raises(ValueError, match="q\\[1\\]"):
        response_moments(DeepAttention(0.5), (0.3, 1.2), (1.0, 1.0), n=2000)
    with pytest.raises(ValueError, match="n must be"):
        response_moments(DeepAttention(0.5), (0.3, 0.3), (1.0, 1.0), n=10)


def test_the_indices_second_moments_come_back_from_their_draws():
    """``index_moments`` of ``draw_gaussian``'s draws is the covariance they were drawn with, and of the law
    with a cross term (``draw_law``) the law's: ``Cov(h, omega) = Omega - C``, ``Var(h) = Q0``."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 6))
    cov = A @ A.T / 6 + 0.2 * np.eye(6)
    omega, h = draw_gaussian(cov, 60_000, rng)
    assert np.allclose(index_moments(h, omega), cov, atol=0.03 * np.sqrt(np.outer(np.diag(cov), np.diag(cov))).max())
    by_seed = index_moments(*draw_gaussian(cov, 60_000, 8)[::-1])       # a seed: one Generator for all the draws
    assert np.allclose(by_seed, cov, atol=0.03 * np.diag(cov).max())
    q, e = (0.3, 0.4, 0.5), -0.05
    omega, h, _, _ = draw_law(np.array(q), np.ones(3), np.zeros(3), e, 3, 60_000, rng)
    law = np.eye(6)
    law[:3, 3:] = law[3:, :3] = law[3:, 3:] = np.diag(q)
    law[3, 4] = law[4, 3] = e
    assert np.all(np.abs(index_moments(h, omega) - law) < 0.02)
    assert np.array_equal(law_moments(q, np.ones(3), np.zeros(3), e, 3), law)


@pytest.mark.parametrize("shared", [0.0, 0.08])
def test_the_laws_second_moments_in_closed_form_against_its_draws(shared):
    """``law_moments`` (``Var(omega) = Omega``, ``Cov(h, omega) = Omega - C``, ``Var(h) = sqrt(s s^T) + diag(Q0 - s)``)
    against ``index_moments`` of ``draw_law``'s draws, both of its drawing routes (a cross term below and above the
    estimates' own parts), data of unequal ``Q0`` and known parts; ``draw_law`` given a seed makes one Generator of
    it (a seed per draw would repeat one draw and give moments of rank one)."""
    q, Q0, s = np.array([0.5, 0.1, 0.5]), np.array([1.1, 1.0, 0.9]), np.array([shared, shared / 2, 0.0])
    for cross in (-0.05, 0.12):
        law = law_moments(q, Q0, s, cross, 3)
        omega, h, _, _ = draw_law(q, Q0, s, cross, 3, 200_000, 11)
        assert np.all(np.abs(index_moments(h, omega) - law) < 0.01), (cross, index_moments(h, omega) - law)
        known = np.sqrt(s[0] * s[1])
        assert law[3, 4] == pytest.approx(cross + known) and law[0, 4] == pytest.approx(known)
    with pytest.raises(ValueError, match="too large"):
        law_moments(q, Q0, s, 0.3, 3)


@pytest.mark.parametrize("cross", [0.0, -0.04])
def test_the_teacher_scale_read_off_the_outputs_is_steins(cross):
    """``input_teacher_parts`` (``(O + F^{-1} T)/Q0 - I`` from ``g`` and ``h`` alone) against ``teacher_parts`` of
    the mixing and memory (Stein's identity and differences of ``g_out``) under the law with a cross term, each
    at its own draws: within four combined standard errors; at ``cross = 0`` both are zero (Nishimori).  Its Monte
    Carlo error at 10^6 draws, near the runs' states, is under 0.006 (0.003 to 0.004 from ten batches of 10^5 at three
    states; the drift chapter: about 0.004, and 8 batches estimate it within about 30 %)."""
    ch, q = DeepAttention(0.5, layers=3), (0.15, 0.1, 0.4)
    Q0 = (1.0,) * 3
    r = response_moments(ch, q, Q0, cross=cross, n=100_000, seed=6)
    stein = teacher_parts(r.mixing, r.memory, q, Q0)
    rng = np.random.default_rng(7)
    batches = []
    for _ in range(8):
        omega, h, _, _ = draw_law(np.array(q), np.array(Q0), np.zeros(3), cross, 3, 25_000, rng)
        g = ch.g_out(ch(h, seed=rng), omega, tuple(1 - x for x in q))
        batches.append(input_teacher_parts(g, h, np.diag(q), Q0))
    direct, se = np.mean(batches, axis=0), np.std(batches, axis=0, ddof=1) / np.sqrt(len(batches))
    assert se[0, 0] * np.sqrt(len(batches) * 25_000 / 10**6) < 0.006      # 10^6 draws (the chapter's): about 0.004
    bound = 4 * np.sqrt(se ** 2 + r.se["mixing"] ** 2 + (r.se["memory"] * np.array(q)) ** 2) + 2e-3
    assert np.all(np.abs(direct - stein) < bound), (direct, stein, bound)
    if cross == 0:
        assert np.all(np.abs(direct) < 4 * se + 2e-3)
    else:
        assert direct[1, 0] > 4 * se[1, 0]            # layer 1's teacher in layer 2's input, as the mixing has it


def test_the_channel_moments_refuse_bad_input():
    with pytest.raises(ValueError, match="positive definite"):
        draw_gaussian(np.diag([1.0, 1.0, -0.1, 1.0]), 10, 0)
    with pytest.raises(ValueError, match="symmetric 2L x 2L"):
        draw_gaussian(np.eye(3), 10, 0)
    with pytest.raises(ValueError, match="index_moments: h and omega"):
        index_moments(np.zeros((4, 2, 2, 2)), np.zeros((4, 3, 2, 2)))
    with pytest.raises(ValueError, match="input_teacher_parts: g and h"):
        input_teacher_parts(np.zeros((4, 2, 2, 2)), np.zeros((4, 2, 3, 3)), np.eye(2), (1.0, 1.0))
