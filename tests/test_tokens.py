"""Token laws (aimlib.tokens): moments, seeds, validation, the Gaussian stream, correlated tokens."""
from __future__ import annotations

import math

import numpy as np
import pytest

from aimlib import amp, gd
from aimlib.backend import to_host
from aimlib.channels import Softmax
from aimlib.model import attention_indices, sample_dataset, sample_teacher, sample_tokens
from aimlib.tokens import LAWS, covariance_sqrt, token_law, toeplitz_covariance

LAW_SPECS = ["gaussian", "rademacher", "uniform", {"name": "sparse", "p": 0.1},
             {"name": "student-t", "nu": 5}, {"name": "student-t", "nu": 10},
             {"name": "correlated", "c": 0.5}]


def _draws(law, n=40_000, d=10, seed=3):
    return sample_tokens(n, 2, d, seed, tokens=law, backend="numpy")


@pytest.mark.parametrize("law", LAW_SPECS, ids=str)
def test_each_law_has_mean_zero_and_unit_variance(law):
    X = _draws(law)
    x = X.reshape(-1)
    N = x.size
    m4 = token_law(law).fourth_moment()
    # five standard errors: the mean has variance 1/N, the variance (m4 - 1)/N per entry
    # (correlated entries: at most d times larger)
    inflate = X.shape[-1] if token_law(law).name == "correlated" else 1
    assert abs(x.mean()) < 5 * math.sqrt(inflate / N)
    assert abs(np.mean(x * x) - 1.0) <= 5 * math.sqrt(inflate * (m4 - 1.0) / N)


@pytest.mark.parametrize("law, m4, m8", [
    ("gaussian", 3.0, 105.0), ("rademacher", 1.0, 1.0), ("uniform", 1.8, 9.0),
    ({"name": "sparse", "p": 0.1}, 30.0, 105.0 / 0.1 ** 3),
    # scaled Student t: E x^8 = 105 (nu-2)^3 / ((nu-4)(nu-6)(nu-8)) = 1120 at nu = 10
    ({"name": "student-t", "nu": 10}, 4.0, 1120.0)], ids=str)
def test_fourth_moments(law, m4, m8):
    x = _draws(law, n=100_000).reshape(-1)
    assert token_law(law).fourth_moment() == pytest.approx(m4)
    # six standard errors of the sample mean of x^4
    assert abs(np.mean(x ** 4) - m4) <= 1e-12 + 6 * math.sqrt((m8 - m4 ** 2) / x.size)


def test_named_fourth_moments():
    assert token_law({"name": "sparse", "p": 0.25}).fourth_moment() == pytest.approx(12.0)
    assert token_law({"name": "student-t", "nu": 6}).fourth_moment() == pytest.approx(6.0)
    assert token_law({"name": "student-t", "nu": 3}).fourth_moment() == math.inf
    assert token_law("uniform").fourth_moment() == pytest.approx(1.8)


def test_rademacher_and_sparse_supports():
    x = _draws("rademacher", n=1000).reshape(-1)
    assert set(np.unique(x)) == {-1.0, 1.0}
    s = _draws({"name": "sparse", "p": 0.2}, n=20_000).reshape(-1)
    frac = np.mean(s != 0)
    assert abs(frac - 0.2) < 5 * math.sqrt(0.2 * 0.8 / s.size)
    u = _draws("uniform", n=1000).reshape(-1)
    assert np.all(np.abs(u) <= math.sqrt(3.0))


def test_correlated_tokens_have_the_covariance():
    d, c = 8, 0.6
    X = _draws({"name": "correlated", "c": c}, n=50_000, d=d).reshape(-1, d)
    C = toeplitz_covariance(d, c)
    emp = X.T @ X / X.shape[0]
    # each entry's standard error is at most sqrt((1 + C_ij^2)/N) <= sqrt(2/N)
    assert np.max(np.abs(emp - C)) < 6 * math.sqrt(2.0 / X.shape[0])
    assert C[0, 3] == pytest.approx(c ** 3)


@pytest.mark.parametrize("law", LAW_SPECS, ids=str)
def test_seeds_are_reproducible(law):
    a, b, c = _draws(law, n=50, seed=1), _draws(law, n=50, seed=1), _draws(law, n=50, seed=2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_default_gaussian_stream_is_unchanged():
    # the implementation before token laws: tokens = rng.standard_normal((n, T, d))
    X = sample_tokens(5, 3, 4, 7, backend="numpy")
    assert np.array_equal(X, np.random.default_rng(7).standard_normal((5, 3, 4)))
    assert np.array_equal(sample_tokens(5, 3, 4, 7, tokens="gaussian", backend="numpy"), X)
    data = sample_dataset(0.5, 6, 2, 0.5, Softmax(), 11, backend="numpy")
    rng = np.random.default_rng(11)
    S = sample_teacher(6, 0.5, rng, backend="numpy")
    X_old = rng.standard_normal((data.n, 2, 6))
    assert np.array_equal(data.S, S)
    assert np.array_equal(data.X, X_old)
    again = sample_dataset(0.5, 6, 2, 0.5, Softmax(), 11, backend="numpy", tokens="gaussian")
    assert np.array_equal(again.y, data.y)
    other = sample_dataset(0.5, 6, 2, 0.5, Softmax(), 11, backend="numpy", tokens="rademacher")
    assert np.array_equal(other.S, data.S) and not np.array_equal(other.X, data.X)


@pytest.mark.parametrize("tokens, words", [
    ("cauchy", "tokens.name must be one of"),
    ({"name": "sparse", "p": 0.0}, "tokens.p must be > 0"),
    ({"name": "sparse", "p": 1.5}, "tokens.p must be <= 1"),
    ({"name": "student-t", "nu": 2}, "tokens.nu must be > 2"),
    ({"name": "correlated", "c": 1.0}, "tokens.c must be < 1"),
    ({"name": "correlated"}, "exactly one of tokens.c and tokens.cov"),
    ({"name": "correlated", "c": 0.1, "cov": np.eye(3)}, "exactly one of"),
    ({"name": "correlated", "cov": [[1.0, 0.5], [0.4, 1.0]]}, "tokens.cov must be symmetric"),
    ({"name": "correlated", "cov": [[1.0, 2.0], [2.0, 1.0]]}, "positive definite"),
    ({"name": "gaussian", "p": 0.1}, "tokens.p is not a parameter of law 'gaussian'"),
    ({"name": "uniform", "nu": 3}, "allowed: none"),
])
def test_bad_laws_are_refused(tokens, words):
    with pytest.raises(ValueError, match=words):
        token_law(tokens)


def test_bad_types_and_shapes_are_refused():
    with pytest.raises(TypeError, match="tokens must be"):
        token_law(3)
    with pytest.raises(ValueError, match=r"cov must have shape \(5, 5\)"):
        sample_tokens(2, 2, 5, 0, tokens={"name": "correlated", "cov": np.eye(4)})
    with pytest.raises(ValueError, match="c must be > -1"):
        toeplitz_covariance(4, -1.0)


def test_every_law_is_tested():
    names = {token_law(law).name for law in LAW_SPECS}
    assert names == set(LAWS)


def test_correlated_indices_are_white_indices_of_the_effective_teacher():
    # x = C^{1/2} z: h(X; S) = h(Z; C^{1/2} S C^{1/2}) + I (Tr S_eff - Tr S)/sqrt(d), exactly
    d, T = 12, 3
    C = toeplitz_covariance(d, 0.7)
    root = covariance_sqrt(C)
    Z = np.random.default_rng(0).standard_normal((20, T, d))
    S = sample_teacher(d, 0.5, 1, backend="numpy")
    S_eff = root @ S @ root
    lhs = attention_indices(Z @ root, S)
    shift = (np.trace(S_eff) - np.trace(S)) / math.sqrt(d)
    rhs = attention_indices(Z, S_eff) + shift * np.eye(T)
    np.testing.assert_allclose(lhs, rhs, atol=1e-12)
    # sampling uses the same square root: the law's draws are z C^{1/2} for the same z
    law = {"name": "correlated", "cov": C}
    np.testing.assert_allclose(sample_tokens(4, T, d, 5, tokens=law, backend="numpy"),
                               np.random.default_rng(5).standard_normal((4, T, d)) @ root,
                               atol=1e-12)


def test_runners_take_the_token_law():
    base = amp.run_amp("softmax", 2, 0.5, 0.3, 12, 0, max_iter=5, on_max_iter="return")
    rad = amp.run_amp("softmax", 2, 0.5, 0.3, 12, 0, max_iter=5, on_max_iter="return",
                      tokens="rademacher")
    same = amp.run_amp("softmax", 2, 0.5, 0.3, 12, 0, max_iter=5, on_max_iter="return",
                       tokens="gaussian")
    assert base["mmse"] == same["mmse"] and base["mmse"] != rad["mmse"]
    g0 = gd.run_gd(2, 0.5, 0.3, 8, 0, steps=5, return_result=True)
    g1 = gd.run_gd(2, 0.5, 0.3, 8, 0, steps=5, return_result=True, tokens="rademacher")
    assert set(np.unique(to_host(g1["data"].X)).tolist()) == {-1.0, 1.0}
    assert not np.array_equal(g0["data"].X, g1["data"].X)
    with pytest.raises(ValueError, match="tokens.nu"):
        gd.run_gd(2, 0.5, 0.3, 8, 0, steps=5, tokens={"name": "student-t", "nu": 1})


@pytest.mark.parametrize("law", ["gaussian", "rademacher", "uniform", {"name": "sparse", "p": 0.3}],
                         ids=str)
def test_index_covariance_for_iid_entries(law):
    # book, beyond-eq-cov: off-diagonal Tr(S S')/d, diagonal (2 Tr(S S') + (m4 - 3) sum S_ii S'_ii)/d
    d, n = 30, 60_000
    S = sample_teacher(d, 0.5, 1, backend="numpy")
    S2 = sample_teacher(d, 0.5, 2, backend="numpy")
    X = sample_tokens(n, 2, d, 4, tokens=law, backend="numpy")
    h, h2 = attention_indices(X, S), attention_indices(X, S2)
    m4 = token_law(law).fourth_moment()
    exact = {(0, 1): np.sum(S * S2) / d,
             (0, 0): (2 * np.sum(S * S2) + (m4 - 3) * np.sum(np.diag(S) * np.diag(S2))) / d}
    for (a, b), value in exact.items():
        prod = h[:, a, b] * h2[:, a, b]
        assert abs(prod.mean() - value) < 6 * prod.std() / math.sqrt(n)
    cross = h[:, 0, 0] * h2[:, 0, 1]
    assert abs(cross.mean()) < 6 * cross.std() / math.sqrt(n)


def test_the_shift_of_the_effective_teacher_has_the_stated_mean_and_variance():
    # book, beyond-prop-effective: delta = Tr((C - I) S)/sqrt(d) has mean sqrt(r/d) Tr(C - I)/sqrt(d)
    # and variance 2 Tr((C - I)^2)/d^2 over the teacher
    d, rho, N = 40, 0.5, 3000
    C = 1.3 * toeplitz_covariance(d, 0.5)
    A = C - np.eye(d)
    rng = np.random.default_rng(0)
    deltas = np.array([np.trace(A @ sample_teacher(d, rho, rng, backend="numpy"))
                       for _ in range(N)]) / math.sqrt(d)
    var = 2 * np.sum(A * A) / d ** 2
    mean = math.sqrt(round(rho * d) / d) * np.trace(A) / math.sqrt(d)
    assert abs(deltas.mean() - mean) < 5 * math.sqrt(var / N)
    # a sample variance has relative variance (2 + kappa)/N; delta is a Wishart trace, not Gaussian
    # (excess kurtosis kappa = 0.31 here), and the factor 1.5 allows kappa up to 2.5 (observed 0.030 < 0.19)
    assert abs(deltas.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / N) * 1.5


@pytest.mark.parametrize("text", [
    '{"name": "sparse", "p": ' + "[" * 5000 + "]" * 5000 + "}",   # json.loads itself recurses too deeply
    '{"a": ' * 5000 + "1" + "}" * 5000,
    '{"name": "sparse", "p": [[[[0.3]]]]}',                        # parses, but deeper than any law
])
def test_deeply_nested_json_is_a_value_error(text):
    """Issue 22, item 10: a RecursionError (a traceback at the command line) became a ValueError."""
    from aimlib.tokens import MAX_DEPTH, parse_token_law

    with pytest.raises(ValueError, match=f"nested at most {MAX_DEPTH} levels deep"):
        parse_token_law(text)
    assert parse_token_law('{"name": "correlated", "cov": [[1, 0], [0, 1]]}').name == "correlated"
