"""The responses of two layers under the law GAMP-RIE's estimates meet (aimlib.channels.deep_moments):
the Nishimori identities where that law is the one g_out assumes, and the mixing the cross term makes."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from aimlib.channels import DeepAttention
from aimlib.channels.deep_moments import response_moments
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
