"""The index operator h and its adjoint (aimlib.index_map), symmetric and square: the dot test, the explicit
sum over samples, and agreement with the forward pass of aimlib.model and the backward passes of GAMP-RIE,
gradient descent (by finite differences); the untied student's gradient: tests/test_untied.py."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from aimlib.amp.steps import channel_sums
from aimlib.backend import to_device, to_host
from aimlib.gd.student import index_grad
from aimlib.index_map import IndexMap, adjoint_product, adjoint_sums
from aimlib.model import attention_indices


def _draw(n=7, T=3, d=5, seed=0, square=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    S = rng.standard_normal((d, d))
    return X, (S if square else (S + S.T) / 2), rng.standard_normal((n, T, T))


def _explicit_adjoint(X, G, square):
    """The sum over mu, a, b of G_ab (x_a x_b^T - delta_ab I)/sqrt d, one outer product at a time."""
    n, T, d = X.shape
    M = sum(G[m, a, b] * (np.outer(X[m, a], X[m, b]) - (a == b) * np.eye(d))
            for m in range(n) for a in range(T) for b in range(T)) / math.sqrt(d)
    return M if square else (M + M.T) / 2


@pytest.mark.parametrize("square", [False, True])
@pytest.mark.parametrize("chunk_size", [None, 1, 3])
def test_dot_test_and_forward(xp, square, chunk_size):
    """<h(S), G> = <S, h*(G)> on the backend under test (AIMLIB_TEST_BACKEND), G not symmetric."""
    X, S, G = _draw(square=square)
    h = IndexMap(to_device(X, xp), square=square, chunk_size=chunk_size)
    hS, hG = h.forward(to_device(S, xp)), h.adjoint(to_device(G, xp))
    assert isinstance(hS, xp.ndarray) and isinstance(hG, xp.ndarray)
    hS, hG = to_host(hS), to_host(hG)
    assert np.sum(hS * G) == pytest.approx(np.sum(S * hG), rel=1e-12)
    assert np.allclose(hS, attention_indices(X, S, symmetric=not square), atol=1e-13)
    assert np.allclose(hG, _explicit_adjoint(X, G, square), atol=1e-12)
    assert np.array_equal(hG, hG.T) != square       # the square adjoint is not symmetrised


def test_the_square_variant_needs_no_symmetry():
    """The symmetric variant reads only sym(S) and sym(G); the square one tells S from S^T."""
    X, S, G = _draw(square=True, seed=6)
    sym, square = IndexMap(X), IndexMap(X, square=True)
    assert np.allclose(sym.adjoint(G), sym.adjoint(np.swapaxes(G, 1, 2)), atol=1e-13)
    assert not np.allclose(square.adjoint(G), square.adjoint(np.swapaxes(G, 1, 2)), atol=1e-3)
    assert np.allclose(square.adjoint(np.swapaxes(G, 1, 2)), square.adjoint(G).T, atol=1e-13)
    assert np.allclose(square.forward(S.T), np.swapaxes(square.forward(S), 1, 2), atol=1e-13)


@pytest.mark.parametrize("square", [False, True])
def test_dot_test_on_the_strict_stand_in(strict_cupy, square):
    X, S, G = _draw(seed=2, square=square)
    h = IndexMap(to_device(X, strict_cupy), square=square, chunk_size=2)
    hS, hG = h.forward(to_device(S, strict_cupy)), h.adjoint(to_device(G, strict_cupy))
    assert isinstance(hS, strict_cupy.ndarray) and isinstance(hG, strict_cupy.ndarray)
    lhs, rhs = (hS * to_device(G, strict_cupy)).sum(), (to_device(S, strict_cupy) * hG).sum()
    assert float(lhs) == pytest.approx(float(rhs), rel=1e-12)
    assert np.allclose(to_host(hG), IndexMap(X, square=square).adjoint(G), atol=1e-13)


@pytest.mark.parametrize("square", [False, True])
def test_chunk_level_passes_add_up_to_the_whole(square):
    """indices() of each chunk is forward(); the sums() of the chunks, added, give adjoint() via from_sums()."""
    X, S, G = _draw(n=9, square=square, seed=7)
    h = IndexMap(X, square=square, chunk_size=4)
    parts = [(h.indices(Xc, S), h.sums(Xc, G[s:s + Xc.shape[0]])) for s, Xc in h.chunks()]
    assert [len(hc) for hc, _ in parts] == [4, 4, 1]
    assert np.allclose(np.concatenate([hc for hc, _ in parts]), h.forward(S), atol=1e-13)
    M, tr = sum(m for _, (m, _) in parts), sum(t for _, (_, t) in parts)
    assert np.allclose(h.from_sums(M, tr), _explicit_adjoint(X, G, square), atol=1e-12)


@pytest.mark.parametrize("square", [False, True])
def test_adjoint_product_is_the_adjoint_times_a_matrix(square):
    """adjoint_product of the sums with right = X W is h*(G) W, with h*(G) never formed; batched over k."""
    X, _, G = _draw(n=6, T=3, d=5, seed=8)
    W = np.random.default_rng(9).standard_normal((2, 5, 3))
    Gk = np.stack([G, 2 * G])
    M, tr = adjoint_sums(X, Gk, X @ W[:, None], square=square)
    want = np.stack([IndexMap(X, square=square).adjoint(g) @ w for g, w in zip(Gk, W)])
    assert np.allclose(adjoint_product(M, tr, W, math.sqrt(5)), want, atol=1e-12)


def test_agrees_with_the_students_gradient():
    """index_grad at S = W W^T / sqrt(r d) is the chain rule, checked by central differences of <h(S(W)), G>."""
    X, _, G = _draw(n=6, T=3, d=5, seed=3)
    r = 2
    W = np.random.default_rng(4).standard_normal((5, r))
    grad = index_grad(X.reshape(-1, 5), W[None], (X @ W)[None], G[None])[0]

    def f(W):
        return np.sum(attention_indices(X, W @ W.T / math.sqrt(r * 5)) * G)

    eps, fd = 1e-6, np.zeros_like(W)
    for i in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[i] = eps
        fd[i] = (f(W + E) - f(W - E)) / (2 * eps)
    assert np.allclose(grad, fd, atol=1e-7)


def test_agrees_with_the_gamp_backward_pass():
    """channel_sums' B and tr (pairs a <= b, G_ab = g_ab / 2) against the explicit sum over the samples."""
    X, S, g = _draw(n=6, T=3, d=5, seed=5)
    g = g + np.swapaxes(g, 1, 2)
    channel = SimpleNamespace(n_indices=1, g_out=lambda y, omega, m: y)   # returns the fixed g
    p = SimpleNamespace(xp=np, X=X, dtype=np.float64, d=5, T=3, n=6, chunk_size=4, channel=channel,
                        y=g, damp_g=False, damping=0.0, index=IndexMap(X, chunk_size=4))
    B, _, tr = channel_sums(p, [S], [1.0], np.zeros((1, 1)), np.zeros((6, 1, 3, 3)), np.empty((6, 1, 3, 3)), 1)
    G = g * (0.5 + 0.5 * np.eye(3))
    assert np.allclose(p.index.from_sums(B[0], tr[0]), _explicit_adjoint(X, G, False), atol=1e-12)
    assert tr[0] == pytest.approx(np.einsum("naa->", g), rel=1e-13)


@pytest.mark.parametrize("call, match", [
    (lambda: IndexMap(np.zeros((2, 3))), "X"),
    (lambda: IndexMap(np.zeros((2, 2, 3)), chunk_size=0), "chunk_size"),
    (lambda: IndexMap(np.zeros((2, 2, 3))).forward(np.eye(4)), "S must have shape"),
    (lambda: IndexMap(np.zeros((2, 2, 3))).adjoint(np.zeros((2, 3, 3))), "G must have shape"),
])
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
