"""The two-noise prior side of untied key and query, by sampling its posterior, and the
exact two-overlap state evolution built on it."""
import math

import numpy as np
import pytest

from aimlib import untied as u
from aimlib.channels import untied_softmax as usm
from aimlib.rmt import rectangular as rr
from aimlib.errors import ConvergenceError
from aimlib.priors import Sampled, sampled


def _iso_share(d):
    """Share of the symmetric part in an isotropic error: ``d(d+1)/2`` of ``d^2`` directions."""
    return (d + 1) / (2 * d)


@pytest.mark.parametrize("delta", [0.3, 1.0])
def test_isotropic_noise_gives_the_rectangular_mmse(delta):
    """With ``Delta_A = Delta_B`` the noise is Ginibre and the error is ``mmse_rect`` (free probability),
    shared between the parts in proportion to their dimensions."""
    d = 50
    r = u.sample_two_noise(d, 0.5, (delta, delta), seed=3)
    assert r.mmse == pytest.approx(rr.mmse_rect(delta, 0.5), rel=0.03)
    assert r.errors[0] / r.mmse == pytest.approx(_iso_share(d), rel=0.03)
    assert 0.5 < r.acceptance <= 1 and max(r.stderr) < 0.01 * r.mmse


@pytest.mark.parametrize("deltas", [(0.15, 0.65), (0.6, 0.2)])
def test_each_part_between_its_isotropic_bounds(deltas):
    """More information never hurts: each part's error lies between its errors with both noises at
    ``min Delta`` and at ``max Delta``, and the better-seen part is the better estimated one."""
    d = 40
    r = u.sample_two_noise(d, 0.5, deltas, seed=1)
    lo, hi = (rr.mmse_rect(x, 0.5) for x in sorted(deltas))
    for err, share in zip(r.errors, (_iso_share(d), 1 - _iso_share(d))):
        assert lo * share * 0.97 < err < hi * share * 1.03
    better = int(np.argmin(deltas))
    assert r.errors[better] < r.errors[1 - better]


def test_planted_chain_agrees_with_a_chain_from_a_random_start():
    """The planted start is an equilibrium draw (Nishimori); a chain from a prior draw, measured against the
    truth after its warm-up, must find the same errors (no metastable state holds the planted chain)."""
    d, deltas = 36, (0.15, 0.65)
    rng = np.random.default_rng(7)
    Q, K, R = u.two_noise_problem(d, 0.5, deltas, rng, backend="numpy")
    S = u.factor_product(Q, K)
    opts = dict(n_steps=600, n_warmup=200, step=0.05, n_leapfrog=30)
    planted, acc1, _ = u.hmc_errors(Q, K, R, deltas, seed=1, **opts)
    Q1, K1 = rng.standard_normal(Q.shape), rng.standard_normal(K.shape)
    fresh, acc2, _ = u.hmc_errors(Q1, K1, R, deltas, seed=2, reference=S, **opts)
    assert min(acc1, acc2) > 0.5
    assert fresh.mean(axis=0) == pytest.approx(planted.mean(axis=0), rel=0.03)


def test_sampled_state_evolution_lies_in_the_bracket_and_is_a_fixed_point():
    """The exact two-overlap fixed point lies inside the bracket of the isotropic MMSE, and the sampled prior
    side evaluated at its noises gives it back."""
    alpha, T, rho, d = 0.2, 2, 0.5, 40
    se = u.sampled_state_evolution(alpha, T, rho, d, seed=0)
    lo, hi = u.bracket_untied(alpha, T, rho)
    assert lo < se.mmse < hi
    assert se.V[0] < se.V[1]                                     # the symmetric part is seen better
    deltas = tuple(1 / (alpha * F) for F in usm.sector_fisher(*se.V, T))
    again = u.sample_two_noise(d, rho, deltas, seed=0).errors
    assert again == pytest.approx(se.V, rel=0.01)
    assert se.trace.shape == (se.iterations, 4)


#: the former loop's answers (its own iteration, stopped when the mean of the last five totals moved by less than
#: tol = 2e-3 relative from the five before), computed with aimlib/untied/posterior.py at commit 99704170 on
#: 2026-12-03, before the function moved onto aimlib.iteration.iterate_map: (alpha, d, seed, n_steps) -> (V_A, V_B)
FORMER = {(0.15, 24, 0, 150): (0.3090675115225935, 0.37652089130239297),     # 14 iterations
          (0.15, 20, 2, 150): (0.28781152106796903, 0.38687269877612857)}    # 13 iterations


def test_sampled_state_evolution_agrees_with_the_former_loop():
    """On iterate_map's window rule the iteration is the same (bit for bit: the trace is the former loop's), only
    the stop differs: the answer agrees with the former one within the tolerance ``tol = 2e-3``."""
    se = u.sampled_state_evolution(0.15, 2, 0.5, 24, seed=0, n_steps=150)
    assert se.verdict.converged
    assert se.V == pytest.approx(FORMER[0.15, 24, 0, 150], rel=2e-3)
    assert se.mmse == pytest.approx(sum(FORMER[0.15, 24, 0, 150]), rel=2e-3)
    assert se.trace.shape == (se.iterations, 4) and np.all(se.trace[:, 2:] > 0)
    again = usm.sector_fisher(*se.trace[-2, :2], 2)                          # each row's noises are the previous V's
    assert tuple(se.trace[-1, 2:]) == pytest.approx(tuple(1 / (0.15 * F) for F in again), rel=1e-12)


def test_a_floor_wider_than_tol_is_reported_with_its_centre():
    """At d = 20 the iterates settle on a cycle of period 2 wider than ``tol``: the run stops there, says so in its
    verdict, and reports the cycle's centre, which the former loop also found."""
    se = u.sampled_state_evolution(0.15, 2, 0.5, 20, seed=2, n_steps=150)
    assert se.verdict.state == "oscillating" and se.verdict.amplitude > 2e-3
    assert se.mmse == pytest.approx(sum(FORMER[0.15, 20, 2, 150]), rel=2e-3)


def test_too_few_iterations_raise_naming_max_iter():
    """A verdict takes a whole window (``window + 1`` iterations); a run capped below that raises, naming the cap,
    the point and the last V."""
    with pytest.raises(ConvergenceError, match=r"within max_iter=10 iterations at alpha=0\.15, T=2, d=24 \(last V = "):
        u.sampled_state_evolution(0.15, 2, 0.5, 24, seed=0, n_steps=150, max_iter=10)


def test_past_the_counting_threshold_the_equations_recover():
    se = u.sampled_state_evolution(0.4, 2, 0.5, 30, seed=0)      # threshold 0.375
    assert se.V == (0.0, 0.0) and se.iterations == 0


def test_committed_fixed_points_are_reproduced():
    """A row of ``book/data/untied_bayes_se.csv`` (``scripts/untied_bayes_se.py``) is what the library gives
    today (within the chain's own noise: the last digits follow the BLAS)."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "book" / "data" / "untied_bayes_se.csv"
    assert path.read_text().startswith("# made by: python scripts/untied_bayes_se.py")
    rows = np.genfromtxt(path, delimiter=",", names=True, skip_header=1)
    row = rows[(rows["T"] == 2) & (rows["d"] == 60) & (rows["seed"] == 1) & (rows["alpha"] == 0.1)][0]
    se = u.sampled_state_evolution(0.1, 2, 0.5, 60, seed=1, backend="numpy")
    assert se.V == pytest.approx((row["V_A"], row["V_B"]), rel=0.01)


def test_reproducible_and_on_the_device(strict_cupy):
    """Same seed, same chain; the device path gives the host numbers (strict CuPy stand-in)."""
    runs = [u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=5, n_steps=40, backend=b)
            for b in ("numpy", "numpy", "cupy")]
    assert runs[0].errors == runs[1].errors
    assert runs[2].errors == pytest.approx(runs[0].errors, rel=1e-9)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"deltas\[1\]"):
        u.sample_two_noise(10, 0.5, (0.3, -1.0))
    with pytest.raises(ValueError, match="deltas must be a pair"):
        u.two_noise_problem(10, 0.5, (0.3,))
    with pytest.raises(ValueError, match="rho"):
        u.sample_two_noise(10, math.inf, (0.3, 0.3))
    with pytest.raises(ValueError, match="warmup"):
        u.sample_two_noise(10, 0.5, (0.3, 0.3), warmup=0.95)
    with pytest.raises(ValueError, match="n_steps"):
        u.sample_two_noise(10, 0.5, (0.3, 0.3), n_steps=5)
    with pytest.raises(ValueError, match="alpha"):
        u.sampled_state_evolution(-0.1, 2, 0.5, 10)
    with pytest.raises(ValueError, match="d"):
        u.two_noise_problem(1, 0.5, (0.3, 0.3))
    with pytest.raises(ValueError, match="n_steps and warmup"):
        Sampled(0.5, n_steps=20, warmup=0.9)
    with pytest.raises(ValueError, match="denoiser"):
        u.run_untied_gamp(0.1, 2, 10, 0.5, denoiser="posterior")


def test_refusals(monkeypatch):
    """A chain that accepts too rarely, and an iteration that does not settle, raise instead of answering."""
    with pytest.raises(ConvergenceError, match="max_iter|within 10 iterations"):
        u.sampled_state_evolution(0.3, 2, 0.5, 16, seed=0, tol=1e-12, max_iter=10, n_steps=40)
    monkeypatch.setattr(sampled, "MIN_ACCEPTANCE", 0.999)
    with pytest.raises(ConvergenceError, match="acceptance"):
        u.sample_two_noise(16, 0.5, (0.3, 0.8), seed=0, n_steps=40)


# ------------------------------------------------------------------ GAMP with the sampled prior step


def test_sampled_prior_step_predicts_its_error():
    """The step's posterior variance (its Onsager term) is the planted chain's error; its predicted error adds
    the Monte Carlo error of the mean, and matches the actual error of the mean, over several calls (each
    call starts from the last one's state)."""
    d, deltas = 30, (0.2, 0.7)
    Q, K, R = u.two_noise_problem(d, 0.5, deltas, seed=3, backend="numpy")
    S = u.factor_product(Q, K)
    prior = Sampled(0.5, seed=4)
    calls = [prior.denoise(R, deltas) for _ in range(6)]
    V, V_ons = (np.mean([c[k] for c in calls], axis=0) for k in (1, 2))
    assert all(0 < vo < v < 1.1 * vo for v, vo in zip(V, V_ons))
    assert V_ons == pytest.approx(u.sample_two_noise(d, 0.5, deltas, seed=3).errors, rel=0.05)
    actual = np.mean([u.part_errors(c[0], S) for c in calls], axis=0)
    assert actual == pytest.approx(V, rel=0.05)


@pytest.mark.slow
def test_sampled_gamp_lands_on_the_exact_state_evolution():
    """GAMP whose prior step is the sampled posterior mean reaches the sampled two-overlap fixed point
    (means over three instances each, d = 30), predicts its own error, and errs well below the equalised
    GAMP's state evolution (the upper end of the bracket)."""
    alpha, T, d = 0.2, 2, 30
    runs = [u.run_untied_gamp(alpha, T, d, 0.5, seed=s, backend="numpy", denoiser="sampled", max_iter=40,
                              tol=1e-12, on_max_iter="return") for s in range(3)]
    exact = np.mean([u.sampled_state_evolution(alpha, T, 0.5, d, seed=s).mmse for s in range(3)])
    assert np.mean([r.mmse for r in runs]) == pytest.approx(exact, rel=0.08)
    assert np.mean([sum(r.V) for r in runs]) == pytest.approx(exact, rel=0.08)
    assert all(r.errors[0] < r.errors[1] for r in runs)
    assert np.mean([r.mmse for r in runs]) < 0.8 * u.bracket_untied(alpha, T, 0.5)[1]   # the equalised GAMP's SE


def test_sampled_gamp_on_the_device(strict_cupy):
    """The sampled prior step keeps device arrays on the device and gives the host numbers."""
    from aimlib.backend import to_device
    S = u.sample_teacher_untied(12, 0.5, seed=0)
    X = np.random.default_rng(1).standard_normal((40, 2, 12))
    y = u.untied_softmax(X, S)
    host = u.untied_gamp(X, y, 0.5, denoiser="sampled", seed=2, max_iter=3, on_max_iter="return")
    dev = u.untied_gamp(to_device(X, strict_cupy), to_device(y, strict_cupy), 0.5, denoiser="sampled", seed=2,
                        max_iter=3, on_max_iter="return")
    assert isinstance(dev.S_hat, np.ndarray)
    assert np.allclose(dev.S_hat, host.S_hat, atol=1e-9)


def test_parts_split_the_matrix_orthogonally():
    """``A + B = M`` and ``||A||^2 + ||B||^2 = ||M||^2`` (the two parts are orthogonal); ``factor_product`` has the
    teacher's scale ``(1/d)||S||^2 -> 1``."""
    M = np.random.default_rng(0).standard_normal((7, 7))
    A, B = u.parts(M)
    assert np.allclose(A + B, M) and np.allclose(A, A.T) and np.allclose(B, -B.T)
    assert sum(u.part_norms(M)) == pytest.approx(float((M * M).sum()), rel=1e-12)
    Q, K, _ = u.two_noise_problem(400, 0.5, (1.0, 1.0), seed=1, backend="numpy")
    S = u.factor_product(Q, K)
    assert float((S * S).sum()) / 400 == pytest.approx(1.0, abs=0.02)
