"""The index operator h and its adjoint (aimlib.index_map): the dot test, and agreement with the
forward pass of aimlib.model and the backward passes of GAMP-RIE and gradient descent."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from aimlib.amp.steps import channel_sums
from aimlib.backend import to_device, to_host
from aimlib.gd.student import index_grad
from aimlib.index_map import IndexMap
from aimlib.model import attention_indices


def _draw(n=7, T=3, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    S = rng.standard_normal((d, d))
    return X, (S + S.T) / 2, rng.standard_normal((n, T, T))


@pytest.mark.parametrize("chunk_size", [None, 1, 3])
def test_dot_test_and_forward(chunk_size):
    X, S, G = _draw()
    h = IndexMap(X, chunk_size=chunk_size)
    # <h(S), G> = <S, h*(G)> with both triangles of G summed; G is not symmetric here
    assert np.sum(h.forward(S) * G) == pytest.approx(np.sum(S * h.adjoint(G)), rel=1e-12)
    assert np.allclose(h.forward(S), attention_indices(X, S), atol=1e-13)
    A = h.adjoint(G)
    assert np.allclose(A, A.T, atol=0)


def test_adjoint_is_the_sum_of_the_per_sample_matrices():
    """The explicit sum over mu, a, b of G_ab (x_a x_b^T - delta_ab I)/sqrt d (an independent route)."""
    X, _, G = _draw(n=4, T=2, d=3, seed=1)
    d = 3
    M = sum(G[m, a, b] * (np.outer(X[m, a], X[m, b]) - (a == b) * np.eye(d))
            for m in range(4) for a in range(2) for b in range(2)) / math.sqrt(d)
    assert np.allclose(IndexMap(X).adjoint(G), (M + M.T) / 2, atol=1e-13)


def test_dot_test_on_the_strict_stand_in(strict_cupy):
    X, S, G = _draw(seed=2)
    h = IndexMap(to_device(X, strict_cupy), chunk_size=2)
    hS, hG = h.forward(to_device(S, strict_cupy)), h.adjoint(to_device(G, strict_cupy))
    assert isinstance(hS, strict_cupy.ndarray) and isinstance(hG, strict_cupy.ndarray)
    lhs, rhs = (hS * to_device(G, strict_cupy)).sum(), (to_device(S, strict_cupy) * hG).sum()
    assert float(lhs) == pytest.approx(float(rhs), rel=1e-12)
    assert np.allclose(to_host(hG), IndexMap(X).adjoint(G), atol=1e-13)


def test_agrees_with_the_students_gradient():
    """index_grad at S = W W^T / sqrt(r d) is the chain rule through h*: 2 h*(G) W / sqrt(r d)."""
    X, _, G = _draw(n=6, T=3, d=5, seed=3)
    r = 2
    W = np.random.default_rng(4).standard_normal((5, r))
    grad = index_grad(X.reshape(-1, 5), W[None], (X @ W)[None], G[None])[0]
    assert np.allclose(grad, 2 * IndexMap(X).adjoint(G) @ W / math.sqrt(r * 5), atol=1e-12)


def test_agrees_with_the_gamp_backward_pass():
    """channel_sums' B (pairs a <= b, G_ab = g_ab / 2) gives h*(G) = (B - tr I) / sqrt d."""
    X, S, g = _draw(n=6, T=3, d=5, seed=5)
    g = g + np.swapaxes(g, 1, 2)
    channel = SimpleNamespace(n_indices=1, g_out=lambda y, omega, m: y)   # returns the fixed g
    p = SimpleNamespace(xp=np, X=X, dtype=np.float64, d=5, T=3, n=6, chunk_size=4, channel=channel,
                        y=g, damp_g=False, damping=0.0)
    B, _, tr = channel_sums(p, [S], [1.0], np.zeros((1, 1)), np.zeros((6, 1, 3, 3)), np.empty((6, 1, 3, 3)), 1)
    G = g * (0.5 + 0.5 * np.eye(3))
    assert np.allclose((B[0] - tr[0] * np.eye(5)) / math.sqrt(5), IndexMap(X).adjoint(G), atol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda: IndexMap(np.zeros((2, 3))), "X"),
    (lambda: IndexMap(np.zeros((2, 2, 3)), chunk_size=0), "chunk_size"),
    (lambda: IndexMap(np.zeros((2, 2, 3))).forward(np.eye(4)), "S must have shape"),
    (lambda: IndexMap(np.zeros((2, 2, 3))).adjoint(np.zeros((2, 3, 3))), "G must have shape"),
])
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
