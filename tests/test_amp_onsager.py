"""GAMP-RIE's Onsager matrix for correlated layers (aimlib.amp.steps.onsager_rows) against the
leave-one-out estimates it stands for (aimlib.amp.leave_one_out)."""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.amp.leave_one_out import leave_one_out
from aimlib.amp.steps import diagonal_rows, onsager_rows
from aimlib.channels import DeepAttention, Softmax
from aimlib.model import sample_dataset


def test_the_onsager_rows_are_each_divergence_times_the_noise_covariance():
    """O_ll' = (o_l / Delta_l) (F^-1)_ll' with the diagonal o_l exactly; no covariance: unchanged."""
    cov = np.array([[2.0, -0.3], [-0.3, 0.5]])
    rows = onsager_rows([(0.8,), (0.2,)], [(2.0,), (0.5,)], cov)
    assert rows == [(0.8, 0.8 / 2.0 * -0.3), (0.2 / 0.5 * -0.3, 0.2)]
    assert onsager_rows([(0.8, 0.1)], [(2.0, 1.0)], None) == [(0.8, 0.1)]
    assert onsager_rows([(0.0,), (0.2,)], [(0.0,), (0.5,)], cov)[0] == (0.0, 0.0)
    assert diagonal_rows([(0.8,), (0.2,)]) == [(0.8, 0.0), (0.0, 0.2)]


def test_the_cross_onsager_term_is_the_leave_one_out_correction():
    """Two Wishart layers (alpha = 0.5, d = 60, three undamped iterations): the part of omega that
    the off-diagonal Onsager entries remove is what leaving the sample out removes (regression
    coefficient 1 within its error; 0.98 +- 0.08 at d = 100), and the term is not negligible."""
    ch = DeepAttention(0.5)
    data = sample_dataset(0.5, 60, 2, (0.5, 0.5), ch, seed=0, teachers="wishart")
    r = leave_one_out(data.X, data.y, ch, data.priors, samples=200, seed=1)
    assert abs(r.coefficient - 1.0) < 3 * r.stderr + 0.1
    assert r.coefficient - 2 * r.stderr > 0.4
    assert r.rms_cross > 0.2 * r.rms_full
    assert r.rms_full < r.rms_none / 2
    assert r.onsager[0][1] < 0 and r.onsager[1][0] < 0 and r.kappa < 0


def test_leave_one_out_refuses_a_channel_without_cross_terms_and_bad_arguments():
    data = sample_dataset(0.5, 20, 2, 0.5, Softmax(), seed=0)
    with pytest.raises(ValueError, match="no off-diagonal"):
        leave_one_out(data.X, data.y, Softmax(), data.priors, samples=5)
    with pytest.raises(ValueError, match="iterations"):
        leave_one_out(data.X, data.y, Softmax(), data.priors, iterations=1)
    with pytest.raises(ValueError, match="samples"):
        leave_one_out(data.X, data.y, Softmax(), data.priors, samples=10 ** 9)
