"""The joint Bayes denoiser of two layers under correlated noises (aimlib.priors.joint), sampled by HMC.

Checked against the Gaussian closed form (exact at every d), the separate denoisers at kappa = 0,
and refused where its chain has not mixed.
"""
from __future__ import annotations

import numpy as np
import pytest

from aimlib.errors import ConvergenceError
from aimlib.priors import Wishart, joint
from aimlib.priors.correlated import gaussian_pair
from aimlib.priors.joint import joint_problem, sample_joint
from script_support import import_script

#: the separable fixed point of Wishart teachers at alpha = 0.5 (as in test_deep_cross.py)
DELTAS_05, KAPPA_05 = (2.8010, 1.2226), -0.13602


def _seeds(d, rho, deltas, kappa, seeds, **chain):
    """``(mmse_1, mmse_2, e_12)`` of each seed, as rows."""
    return np.array([[*r.mmse, r.e_12] for r in
                     (sample_joint(d, rho, deltas, kappa, seed=s, **chain) for s in seeds)])


def test_the_problem_has_the_asked_teachers_and_noises():
    W, S, R = joint_problem(300, (0.5, np.inf), (0.7, 1.3), -0.6, seed=0, backend="numpy")
    assert W[0].shape == (300, 150) and W[1].shape == (300, 300)
    np.testing.assert_allclose(S[0], W[0] @ W[0].T / np.sqrt(300 * 150))
    np.testing.assert_allclose(S[1], S[1].T)
    Z = [(r - s) / np.sqrt(x) for r, s, x in zip(R, S, (0.7, 1.3))]
    off = ~np.eye(300, dtype=bool)
    assert np.var(Z[0][off]) * 300 == pytest.approx(1, rel=0.02)
    assert np.corrcoef(Z[0][off], Z[1][off])[0, 1] == pytest.approx(-0.6, abs=0.01)
    assert np.sum(S[1] * S[1]) / 300 == pytest.approx(1, rel=0.05)       # a GOE teacher of unit moment


def test_gaussian_teachers_give_the_closed_form():
    """The linear posterior mean's error matrix at dimension d is (1 + 1/d)(I + N^{-1})^{-1}."""
    d, deltas, kappa = 40, (0.8, 0.5), -0.6
    rows = _seeds(d, np.inf, deltas, kappa, range(8), n_steps=300)
    _, J = gaussian_pair(deltas, kappa)
    exact = (1 + 1 / d) * np.array([J[0, 0], J[1, 1], J[0, 1]])
    sem = rows.std(axis=0, ddof=1) / np.sqrt(len(rows))
    assert np.all(np.abs(rows.mean(axis=0) - exact) < 4 * sem + 1e-3), (rows.mean(axis=0), exact, sem)
    assert np.all(np.abs(rows.mean(axis=0) - exact) < 0.03 * np.abs(exact))


def test_at_kappa_zero_each_layer_has_its_own_bayes_error_and_no_cross_term():
    rows = _seeds(80, 0.5, DELTAS_05, 0.0, range(4))
    sem = rows.std(axis=0, ddof=1) / 2
    separate = [Wishart(0.5).mmse(x) for x in DELTAS_05]
    np.testing.assert_allclose(rows[:, :2].mean(axis=0), separate, rtol=0.03)
    assert abs(rows[:, 2].mean()) < 4 * sem[2] + 2e-3


def test_correlated_noises_lower_the_joint_errors():
    """Numerical finding (the Gaussian closed form's order): at kappa = -0.5 the joint posterior mean is
    more accurate in both layers than at kappa = 0, on the same teachers and noises Z_1."""
    at_zero = _seeds(80, 0.5, DELTAS_05, 0.0, range(4))
    at_half = _seeds(80, 0.5, DELTAS_05, -0.5, range(4))
    gain = at_zero[:, :2] - at_half[:, :2]
    assert np.all(gain.mean(axis=0) > 3 * gain.std(axis=0, ddof=1) / 2)
    assert np.all(at_half[:, 2] < 0)


def test_a_chain_that_has_not_mixed_is_refused(monkeypatch):
    monkeypatch.setattr(joint, "joint_first_step", lambda rhos, P: (1e-3, 1))   # a step too short, never tuned
    with pytest.raises(ConvergenceError, match="has not mixed.*effective sample sizes"):
        sample_joint(40, 0.5, DELTAS_05, KAPPA_05, seed=0, n_steps=200, warmup=0.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kappa=1.0), "kappa"),
    (dict(deltas=(1.0, -0.5)), r"deltas\[1\]"),
    (dict(deltas=(1.0, 2.0, 3.0)), "deltas must hold one value per layer"),
    (dict(rho=0.0), r"rho"),
    (dict(n_steps=100), "n_steps and warmup"),
])
def test_bad_inputs_name_the_parameter(kwargs, match):
    args = dict(d=20, rho=0.5, deltas=(1.0, 1.0), kappa=0.2) | kwargs
    with pytest.raises(ValueError, match=match):
        sample_joint(args.pop("d"), args.pop("rho"), args.pop("deltas"), args.pop("kappa"), seed=0, **args)


def test_the_script_samples_both_chains_at_the_fixed_points_noises():
    """scripts/deep_joint_denoiser.py: the noises of the separable fixed point at alpha = 0.5, and two
    chains on one instance (kappa = 0 and the fixed point's kappa) that have mixed."""
    script = import_script("deep_joint_denoiser")
    row = script.run(0.5, 30, 0, 150, script.fixed_point(0.5))
    assert (row["delta_1"], row["delta_2"]) == pytest.approx(DELTAS_05, abs=1e-4)
    assert row["kappa"] == pytest.approx(KAPPA_05, abs=1e-5) and row["se_q_12"] < 0
    assert set(script.COLUMNS) == set(row)
    assert min(row["ess_0"], row["ess_k"]) >= joint.MIN_ESS
    assert 0 < row["mmse_2_k"] < row["mmse_1_k"] < 1
