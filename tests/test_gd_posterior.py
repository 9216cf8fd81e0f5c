"""Posterior draws of the softmax AIM with label noise (aimlib.gd.posterior) and the committed comparison
with gradient descent (scripts/gd_vs_posterior.py, book/data/gd_vs_posterior.csv).

Independent routes: the prior's moments where the likelihood is flat, and the Nishimori identity
(a posterior draw and the teacher are exchangeable given the data, so a draw's error equals the
mean distance between two draws, averaged over data sets), which a sampler of a wrong likelihood
breaks; the committed rows obey the same identity and the chains' own diagnostics.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib import _validate as v
from aimlib import gd
from aimlib.backend import to_host
from aimlib.channels import NoisySoftmax
from aimlib.errors import ConvergenceError
from aimlib.model import estimation_error, sample_dataset
import script_support


def _data(d, alpha, noise, seed, rho=0.5, backend="numpy"):
    return sample_dataset(alpha, d, 2, rho, NoisySoftmax(1.0, noise), v.run_streams(seed).data,
                          backend=backend, dtype=np.float64)


def test_where_the_likelihood_is_flat_the_draws_have_the_prior_moments():
    """Noise ``1e8``: ``E (1/d) Tr S = sqrt(r/d)``, ``E (1/d)||S||^2 = (d + r + 1)/d`` (Wishart moments).
    On the default backend (the strict CuPy stand-in in that test run)."""
    d, r = 8, 4
    data = _data(d, 0.2, 1.0, seed=0, backend=None)
    post = gd.sample_posterior(data.X, data.y, 1e8, rank=r, chains=4, n_steps=1000, thin=1, seed=1)
    S = to_host(post.draws).reshape(-1, d, d)
    trace, norm = np.trace(S, axis1=1, axis2=2) / d, (S * S).sum(axis=(1, 2)) / d
    for x, exact, ess in ((trace, math.sqrt(r / d), post.ess["trace"]), (norm, (d + r + 1) / d, post.ess["norm"])):
        assert abs(x.mean() - exact) < 4 * x.std() / math.sqrt(ess)
    assert post.rhat["trace"] <= gd.posterior.RHAT_MAX and min(post.acceptance) > 0.5
    assert post.draws.shape == (4, 700, d, d)
    assert np.allclose(to_host(post.mean), S.mean(axis=0))


@pytest.mark.slow
def test_the_draws_obey_the_nishimori_identity_and_a_wrong_likelihood_does_not():
    """Over ten data sets, ``E (1/d)||S_hat - S||^2 - E (1/d)||S_hat - S_hat'||^2`` is 0 for the right noise
    (measured -0.01 +- 0.03); a sampler four times too confident gives +0.16 +- 0.02."""
    def gap(factor):
        diffs = []
        for seed in range(10):
            data = _data(10, 0.2, 1e-2, seed)
            post = gd.sample_posterior(data.X, data.y, 1e-2 * factor, rank=5, S=data.S, n_steps=400, thin=2,
                                       seed=seed)
            S = post.draws.reshape(-1, 10, 10)
            diffs.append(estimation_error(S, data.S).mean() - gd.mean_pair_distance(S))
        return np.mean(diffs)
    assert abs(gap(1.0)) < 0.08
    assert gap(0.25) > 0.1


def test_chains_too_short_to_agree_are_refused():
    """Twenty kept draws per chain do not show that the chains sample one law (split R-hat 1.06 of the
    norm): refused, not reported."""
    data = _data(10, 0.2, 1e-3, seed=2)
    with pytest.raises(ConvergenceError, match="posterior sampling of the softmax AIM has not mixed at noise=0.001"):
        gd.sample_posterior(data.X, data.y, 1e-3, rank=5, S=data.S, n_steps=40, warmup=0.5, thin=1, seed=0)


def test_planted_factor_and_the_pair_distance():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((9, 4))
    S = W @ W.T / 6.0
    P = gd.planted_factor(S, 4)
    assert P.shape == (9, 4) and np.allclose(P @ P.T / 6.0, S, atol=1e-12)
    with pytest.raises(ValueError, match="S must be positive semi-definite of rank at most r=3"):
        gd.planted_factor(S, 3)
    with pytest.raises(ValueError, match="S must be positive semi-definite"):
        gd.planted_factor(-S, 4)
    Ss = rng.standard_normal((5, 6, 6))
    loop = np.mean([((Ss[i] - Ss[j]) ** 2).sum() / 6 for i in range(5) for j in range(5) if i != j])
    assert gd.mean_pair_distance(Ss) == pytest.approx(loop, rel=1e-12)
    with pytest.raises(ValueError, match="S_hats must hold k >= 2 matrices"):
        gd.mean_pair_distance(Ss[:1])


def test_spectral_statistics_of_known_spectra():
    """``diag(3, 2, 1, 0)`` rotated, and ``diag(1, 1, 1, 1)``: their means, the r-th eigenvalue at r = 3."""
    Q = np.linalg.qr(np.random.default_rng(6).standard_normal((4, 4)))[0]
    S = np.stack([Q @ np.diag([3.0, 2.0, 1.0, 0.0]) @ Q.T, np.eye(4)])
    got = gd.spectral_statistics(S, 3)
    assert list(got) == list(gd.SPECTRAL_STATISTICS)
    assert [got[k] for k in gd.SPECTRAL_STATISTICS] == pytest.approx(
        [(6 / 4 + 1) / 2, (14 / 4 + 1) / 2, (36 / 4 + 1) / 2, 2.0, 1.0], rel=1e-12)
    with pytest.raises(ValueError, match="r must be <= 4"):
        gd.spectral_statistics(S, 5)


@pytest.mark.parametrize("kw, message", [({"noise": 0.0}, "noise must be > 0"),
                                         ({"chains": 1}, "chains must be >= 2"),
                                         ({"rank": 11}, "rank must be <= 10"),
                                         ({"n_steps": 39}, "n_steps must be >= 40"),
                                         ({"thin": 100}, "keep at least 20 draws per chain"),
                                         ({"warmup": 0.95}, "warmup")])
def test_bad_settings_are_refused_by_name(kw, message):
    data = _data(10, 0.2, 1e-2, seed=0)
    args = {"noise": 1e-2, "rank": 5, **kw}
    with pytest.raises(ValueError, match=message):
        gd.sample_posterior(data.X, data.y, args.pop("noise"), **args)


#: the committed comparisons: the default run, and the students trained four times longer
FILES = {"gd_vs_posterior.csv": "",
         "gd_vs_posterior_4000.csv": " --steps 4000 --out book/data/gd_vs_posterior_4000.csv"}


def read_committed(name: str):
    """The made-by command and the rows of ``book/data/<name>``, and the script module."""
    made_by, rows = script_support.committed(name)
    rows = [{k: (x if k == "method" else float(x)) for k, x in r.items()} for r in rows]
    return script_support.import_script("gd_vs_posterior"), made_by, rows


@pytest.fixture(scope="module")
def committed():
    """The default comparison ``book/data/gd_vs_posterior.csv``: script, made-by line, rows."""
    return read_committed("gd_vs_posterior.csv")


@pytest.mark.parametrize("name", FILES)
def test_the_committed_draws_mixed_and_obey_the_nishimori_identity(name):
    """Every data set of the made-by line has its three rows; every posterior row passed the sampler's
    checks; averaged over the data sets of each ``d``, a draw's error is twice the posterior variance."""
    _, made_by, rows = read_committed(name)
    assert made_by == "OPENBLAS_NUM_THREADS=1 python scripts/gd_vs_posterior.py" + FILES[name]
    keys = {(r["d"], r["seed"]) for r in rows}
    assert sorted(r["method"] for r in rows) == sorted(["posterior", "gd", "gd_clean"] * len(keys))
    post = [r for r in rows if r["method"] == "posterior"]
    assert all(r["rhat"] <= 1.05 and r["ess"] >= 50 and r["acceptance"] >= 0.3 for r in post)
    for d in {r["d"] for r in post}:
        gaps = np.array([r["single"] - 2 * r["half_pair"] for r in post if r["d"] == d])
        assert abs(gaps.mean()) < 4 * gaps.std(ddof=1) / math.sqrt(len(gaps)) + 0.02, d


def test_a_committed_gradient_descent_row_is_reproduced(committed):
    """The d = 30, seed 0 data set, its students retrained: the gd row's errors and spectra to 1e-6."""
    script, _, rows = committed
    row = next(r for r in rows if (r["d"], r["seed"], r["method"]) == (30, 0, "gd"))
    data = script.data_set(30, 0)
    res = gd.train_gd(data.X, data.y, rank=15, restarts=script.RESTARTS, seed=v.run_streams(0).student, steps=1000)
    again = script.summary(res.S_hat, data.S, np.zeros((30, 30)), 15)
    for column in ("single", "average", "half_pair", "overlap", *script.STATS):
        assert again[column] == pytest.approx(row[column], rel=1e-6), column


def test_the_longer_budget_reran_the_same_draws():
    """The run with ``--steps 4000`` sampled the same posteriors (same seeds): its posterior rows equal
    the default run's, and only the students' rows differ."""
    _, _, short = read_committed("gd_vs_posterior.csv")
    _, _, long = read_committed("gd_vs_posterior_4000.csv")
    key = lambda r: (r["d"], r["seed"], r["method"])          # noqa: E731
    short, long = {key(r): r for r in short}, {key(r): r for r in long}
    assert set(short) == set(long)
    columns = ("single", "average", "half_pair", "overlap", "rhat", "ess", "acceptance", *gd.SPECTRAL_STATISTICS)
    for k, row in short.items():
        if k[2] == "posterior":
            assert [long[k][c] for c in columns] == pytest.approx([row[c] for c in columns], rel=1e-12), k
        else:
            assert long[k]["single"] != pytest.approx(row["single"], rel=1e-3), k
