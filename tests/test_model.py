"""Sampling the AIM: shapes, scalings (book, chapter "The model") against closed forms, seeds, bad inputs."""
import numpy as np
import pytest

from aimlib import model
from aimlib.backend import to_host
from aimlib.channels import Softmax


def test_teacher_shape_symmetry_psd(backend):
    S = to_host(model.sample_teacher(50, 0.3, seed=0, backend=backend))
    assert S.shape == (50, 50)
    np.testing.assert_array_equal(S, S.T)
    assert np.linalg.eigvalsh(S).min() > -1e-12
    assert np.linalg.matrix_rank(S) == model.teacher_width(50, 0.3) == 15


def test_teacher_moments_match_exact_finite_d_means():
    # E Tr(S)/d = sqrt(r/d) and E Tr(S^2)/d = 1 + rho + 1/d exactly (book, chapter "The model").
    d, rho, reps = 40, 0.5, 400
    rng = np.random.default_rng(0)
    t1, t2 = [], []
    for _ in range(reps):
        S = model.sample_teacher(d, rho, rng, backend="numpy")
        t1.append(np.trace(S) / d)
        t2.append(model.index_covariance(S))
    for vals, exact in [(t1, np.sqrt(rho)), (t2, 1 + rho + 1 / d)]:
        se = np.std(vals) / np.sqrt(reps)
        assert abs(np.mean(vals) - exact) < 4 * se


@pytest.mark.parametrize("rho", [0.2, 1.0, 3.0])
def test_teacher_limits_at_large_d(rho):
    S = model.sample_teacher(800, rho, seed=1, backend="numpy")
    r = model.teacher_width(800, rho)
    # one teacher at d = 800: Tr(S)/d = ||W||^2 / (d sqrt(r d)) has mean sqrt(r/d) and sd sqrt(2)/d = 0.0018
    # (0.01 is 5.7 sd); Tr(S^2)/d has mean 1 + r/d + 1/d and sd 0.006-0.008 over seeds (0.03 is ~4 sd)
    assert np.trace(S) / 800 == pytest.approx(np.sqrt(r / 800), abs=0.01)
    assert model.index_covariance(S) == pytest.approx(1 + r / 800, abs=0.03)


def test_indices_match_definition_elementwise(backend):
    rng = np.random.default_rng(2)
    X = model.sample_tokens(5, 3, 30, rng, backend=backend)
    S = model.sample_teacher(30, 0.5, rng, backend=backend)
    h = to_host(model.attention_indices(X, S))
    Xh, Sh = to_host(X), to_host(S)
    for mu in range(5):
        for a in range(3):
            for b in range(3):
                expect = Xh[mu, a] @ Sh @ Xh[mu, b] / np.sqrt(30) - (a == b) * np.trace(Sh) / np.sqrt(30)
                assert h[mu, a, b] == pytest.approx(expect, rel=1e-12, abs=1e-12)


def test_indices_equal_sensing_form():
    # h_ab = <Z_ab, S>/sqrt(d) with Z_ab = (x_a x_b^T + x_b x_a^T)/2 - delta_ab I.
    rng = np.random.default_rng(3)
    X = model.sample_tokens(1, 2, 20, rng, backend="numpy")[0]
    S = model.sample_teacher(20, 1.0, rng, backend="numpy")
    h = model.attention_indices(X[None], S)[0]
    for a in range(2):
        for b in range(2):
            Z = (np.outer(X[a], X[b]) + np.outer(X[b], X[a])) / 2 - (a == b) * np.eye(20)
            assert h[a, b] == pytest.approx(np.sum(Z * S) / np.sqrt(20), rel=1e-12)


def test_non_symmetric_S_gives_the_untied_indices():
    # symmetric=False: any real square S, h_ab = x_a^T S x_b/sqrt(d) - delta_ab Tr(S)/sqrt(d), not symmetrised
    rng = np.random.default_rng(7)
    n, T, d = 4, 3, 15
    X, S = rng.standard_normal((n, T, d)), rng.standard_normal((d, d))
    h = model.attention_indices(X, S, symmetric=False)
    expect = np.einsum("nad,de,nbe->nab", X, S, X) / np.sqrt(d) - np.eye(T) * np.trace(S) / np.sqrt(d)
    np.testing.assert_allclose(h, expect, rtol=1e-12, atol=1e-12)
    assert not np.allclose(h, np.swapaxes(h, 1, 2))
    # a symmetric S gives the tied indices up to rounding; symmetric=True makes them exactly symmetric
    S_sym = (S + S.T) / 2
    tied = model.attention_indices(X, S_sym)
    np.testing.assert_array_equal(tied, np.swapaxes(tied, 1, 2))
    np.testing.assert_allclose(model.attention_indices(X, S_sym, symmetric=False), tied, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="S must be symmetric"):
        model.attention_indices(X, S)


@pytest.mark.parametrize("symmetric", [True, False])
def test_chunked_indices_equal_unchunked(symmetric):
    rng = np.random.default_rng(8)
    n, T, d = 23, 3, 12
    X = rng.standard_normal((n, T, d))
    S = np.stack([to_host(model.sample_teacher(d, rho, rng)) for rho in (0.5, 2.0)])
    if not symmetric:
        S = S + rng.standard_normal(S.shape)
    for teachers in (S[0], S):
        whole = model.attention_indices(X, teachers, symmetric=symmetric)
        assert whole.shape == ((n, T, T) if teachers.ndim == 2 else (n, 2, T, T))
        for c in (1, 5, 23, 99):
            chunked = model.attention_indices(X, teachers, symmetric=symmetric, chunk_size=c)
            np.testing.assert_array_equal(to_host(chunked), to_host(whole))  # bit for bit: the same products per sample
        tiny = model.attention_indices(X, teachers, symmetric=symmetric, memory_mb=1e-3)
        np.testing.assert_array_equal(to_host(tiny), to_host(whole))
    # one chunk of c samples: X S (c T d), four c T^2 temporaries and the chunk's L indices
    assert model.index_chunk_size(T, d, 8, 2, 1e-3) == int(1e-3 * 2**20) // ((T * d + 6 * T * T) * 8)
    assert model.index_chunk_size(T, d, 8, 1, 1e-9) == 1


def test_stacked_teachers_are_checked_one_by_one():
    X = np.ones((2, 3, 2))
    S = np.stack([np.eye(2), [[1.0, 2.0], [0.0, 1.0]]])
    with pytest.raises(ValueError, match=r"S\[1\] must be symmetric"):
        model.attention_indices(X, S)
    assert model.attention_indices(X, S, symmetric=False).shape == (2, 2, 3, 3)
    with pytest.raises(ValueError, match=r"S\[0\] must have shape \(2, 2\)"):
        model.attention_indices(X, np.ones((2, 3, 3)))


def test_index_covariance_is_goe_shaped():
    # Var h_ab = Q0 (a != b), 2 Q0 (a = b), zero correlation between entries (exact at finite d).
    d, n, T = 60, 60_000, 3
    rng = np.random.default_rng(4)
    S = model.sample_teacher(d, 0.5, rng, backend="numpy")
    h = model.attention_indices(model.sample_tokens(n, T, d, rng, backend="numpy"), S)
    Q0 = model.index_covariance(S)
    iu = np.triu_indices(T)
    C = np.cov(h[:, iu[0], iu[1]].T) / Q0
    expected = np.diag(np.where(iu[0] == iu[1], 2.0, 1.0))
    # entry-wise standard error of a sample covariance of ~unit-variance variables: ~sqrt(2*4/n)
    assert np.abs(C - expected).max() < 6 * np.sqrt(8 / n)


def test_cross_covariance_of_two_teachers():
    d, n = 60, 60_000
    rng = np.random.default_rng(5)
    S, S2 = model.sample_teacher(d, 0.5, rng), model.sample_teacher(d, 0.5, rng)
    X = model.sample_tokens(n, 2, d, rng)
    h, h2 = model.attention_indices(X, S), model.attention_indices(X, S2)
    q = model.index_covariance(S, S2)
    prod = h[:, 0, 1] * h2[:, 0, 1]
    assert abs(prod.mean() - q) < 5 * prod.std() / np.sqrt(n)
    prod = h[:, 0, 0] * h2[:, 0, 0]
    assert abs(prod.mean() - 2 * q) < 5 * prod.std() / np.sqrt(n)


def test_excess_kurtosis_closed_form_against_sampling():
    d, n = 12, 400_000  # small d: non-Gaussianity large enough to measure
    rng = np.random.default_rng(6)
    S = model.sample_teacher(d, 0.5, rng, backend="numpy")
    h = model.attention_indices(model.sample_tokens(n, 2, d, rng, backend="numpy"), S)
    k_off, k_diag = model.index_excess_kurtosis(S)
    from scipy import stats

    # sample kurtosis of n = 400 000 heavy-tailed indices (k_off = 2.25, k_diag = 4.5): relative standard
    # error ~1.5 % (from 8 sub-blocks), so 8 % is ~5 of them (observed -0.6 % and -4.1 %)
    assert stats.kurtosis(h[:, 0, 1]) == pytest.approx(k_off, rel=0.08)
    assert stats.kurtosis(h[:, 0, 0]) == pytest.approx(k_diag, rel=0.08)


def test_excess_kurtosis_decays_like_one_over_d():
    k = [model.index_excess_kurtosis(model.sample_teacher(d, 0.5, 0))[0] * d for d in (100, 400)]
    # one teacher each: d k moves with the teacher's t4/t2^2 and by O(1/d); over seeds 0-5 the two
    # differed by at most 3 %
    assert k[1] == pytest.approx(k[0], rel=0.15)


def test_seeds_reproduce_and_differ():
    a, b, c = (model.sample_dataset(0.02, 30, 2, 0.5, Softmax(), seed=s, backend="numpy")
               for s in (7, 7, 8))
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.S, b.S)
    assert not np.allclose(a.S, c.S)
    gen = np.random.default_rng(3)
    assert model.sample_teacher(10, 1.0, gen).shape == (10, 10)


def test_dataset_sizes_and_dtype():
    ds = model.sample_dataset(0.1, 40, 3, 0.5, Softmax(beta=2.0), seed=0, dtype=np.float32)
    assert ds.n == model.n_samples(0.1, 40) == 160
    assert (ds.T, ds.d) == (3, 40)
    assert ds.X.dtype == np.float32 and ds.y.shape == (160, 3, 3)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: model.sample_teacher(10, 0.0), ValueError, "rho must be > 0"),
        (lambda: model.sample_teacher(10, float("nan")), ValueError, "rho must be finite"),
        (lambda: model.sample_teacher(0, 0.5), ValueError, "d must be >= 1"),
        (lambda: model.sample_teacher(10.5, 0.5), TypeError, "d must be an integer"),
        (lambda: model.sample_tokens(5, 1, 10), ValueError, "T must be >= 2"),
        (lambda: model.n_samples(-0.1, 10), ValueError, "alpha must be > 0"),
        (lambda: model.sample_teacher(10, 0.5, seed="x"), TypeError, "seed must be"),
        (lambda: model.sample_teacher(10, 0.5, seed=-1), ValueError, "seed must be a non-negative"),
        (lambda: model.attention_indices(np.ones((2, 3)), np.eye(3)), ValueError, "X must have 3 dimensions"),
        (lambda: model.attention_indices(np.ones((2, 3, 4)), np.eye(3)), ValueError, "S must have shape"),
        (lambda: model.attention_indices(np.ones((2, 3, 2)), np.array([[1.0, 2.0], [0.0, 1.0]])),
         ValueError, "S must be symmetric"),
        (lambda: model.attention_indices(np.full((2, 3, 2), np.nan), np.eye(2)), ValueError,
         "X must contain only finite"),
        (lambda: model.sample_dataset(0.1, 10, 2, 0.5, "softmax"), TypeError, "channel must be"),
        (lambda: model.attention_indices(np.ones((2, 3, 2)), np.ones(2)), ValueError,
         r"S must have shape \(2, 2\) or"),
        (lambda: model.attention_indices(np.ones((2, 3, 2)), np.eye(2), symmetric="yes"), TypeError,
         "symmetric must be True or False"),
        (lambda: model.attention_indices(np.ones((2, 3, 2)), np.eye(2), chunk_size=0), ValueError,
         "chunk_size must be >= 1"),
        (lambda: model.attention_indices(np.ones((2, 3, 2)), np.eye(2), memory_mb=0), ValueError,
         "memory_mb must be > 0"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_matrix_overlap_is_the_normalised_trace_of_the_product():
    rng = np.random.default_rng(0)
    A, B = (x + x.T for x in rng.standard_normal((2, 30, 30)))
    assert model.matrix_overlap(A, B) == pytest.approx(np.trace(A @ B) / 30, rel=1e-12)
    with pytest.raises(ValueError, match="square matrices of one shape"):
        model.matrix_overlap(A, B[:20, :20])
