r"""The channel contract check, shipped with the library: run it on any new channel.

:func:`check_channel` tests the identities of :mod:`aimlib.channels.base` that a
channel's forward map and Bayes side must satisfy, each by an independent route,
on samples of the state-evolution measure (``omega_l ~ N(0, q_l Sigma)``,
``h_l = omega_l + N(0, (Q0_l - q_l) Sigma)``, ``y = f(h)``, every layer):

* the forward map returns finite outputs of shape ``(n, ..., T, T)``;
* ``g_out`` is finite, symmetric, of the shape of ``omega``, and it *is* the
  gradient of ``log_partition`` with respect to the independent entries
  ``omega_ab``, ``a <= b`` (central finite differences);
* ``fisher`` equals its definition ``2 sum_{a<=b} Sigma_ab E[g_ab^2]`` estimated
  by Monte Carlo (within five standard errors), is positive and grows with ``q``.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from .base import Channel, sample_indices, sigma2

__all__ = ["check_channel"]


def _measure(channel, n, q, Q0, T, rng):
    """``(omega, y)`` with the layer axis ``-3`` when the channel reads ``L > 1`` indices."""
    L = channel.n_indices
    omega = np.stack([sample_indices(n, T, q[l], rng) for l in range(L)], axis=1)
    h = omega + np.stack([sample_indices(n, T, Q0[l] - q[l], rng) for l in range(L)], axis=1)
    if L == 1:
        omega, h = omega[:, 0], h[:, 0]
    return omega, channel(h, seed=rng)


def _gradient_check(channel, y, omega, V, T, eps):
    """Largest gap between ``g_out`` and the finite-difference gradient of ``log_partition``."""
    g = channel.g_out(y, omega, V)
    gap = 0.0
    for layer in range(channel.n_indices):
        for a, b in zip(*np.triu_indices(T)):
            E = np.zeros(omega.shape[1:])
            E[(layer,) * (omega.ndim == 4) + (a, b)] = E[(layer,) * (omega.ndim == 4) + (b, a)] = eps
            fd = (channel.log_partition(y, omega + E, V) - channel.log_partition(y, omega - E, V)) / (2 * eps)
            g_ab = g[:, layer, a, b] if omega.ndim == 4 else g[:, a, b]
            gap = max(gap, float(np.max(np.abs(fd - g_ab) / (1.0 + np.abs(fd)))))
    return g, gap


def _fisher_check(channel, q, Q0, T, n_mc, rng):
    """``(F, F_mc, se)``: the channel's ``F_l``, their Monte Carlo estimates and standard errors."""
    omega, y = _measure(channel, n_mc, q, Q0, T, rng)
    V = tuple(a - b for a, b in zip(Q0, q))
    g = channel.g_out(y, omega, V[0] if channel.n_indices == 1 else V)
    g = g[:, None] if channel.n_indices == 1 else g
    iu = np.triu_indices(T)
    terms = 2 * np.sum((sigma2(T) * g**2)[..., iu[0], iu[1]], axis=-1)       # (n_mc, L)
    F = np.atleast_1d(channel.fisher(q[0] if channel.n_indices == 1 else q,
                                     Q0[0] if channel.n_indices == 1 else Q0, T))
    return F, terms.mean(axis=0), terms.std(axis=0) / np.sqrt(n_mc)


def check_channel(channel: Channel, T: int = 2, *, q: float = 0.6, Q0: float = 1.5, n: int = 16,
                  n_mc: int = 20_000, eps: float = 1e-4, grad_tol: float = 1e-3, seed=0) -> None:
    """Check ``channel`` against the contract of :mod:`aimlib.channels.base` (module docstring).

    Parameters
    ----------
    channel : Channel
    T : int
        Tokens per sample (one its Bayes side supports).
    q, Q0 : float
        Overlap and second moment of the measure (``0 < q < Q0``), the same for every layer.
    n : int
        Samples of the forward-map and gradient checks.
    n_mc : int
        Samples of the Monte Carlo estimate of ``F_out``.
    eps, grad_tol : float
        Finite-difference step and the tolerance on ``|fd - g| / (1 + |fd|)``: ``eps^2``
        truncation plus the rounding of ``log_partition`` over ``eps``; the default
        leaves a margin for channels whose ``log_partition`` is a quadrature.
    seed : int or Generator

    Raises
    ------
    AssertionError
        Listing every identity that fails.
    """
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be an aimlib.channels.Channel, got {type(channel).__name__}")
    T, n, n_mc = v.integer("T", T, minimum=2), v.integer("n", n, minimum=1), v.integer("n_mc", n_mc, minimum=100)
    Q0 = v.positive("Q0", Q0)
    q = v.in_range("q", q, 1e-3 * Q0, 0.95 * Q0)
    eps, grad_tol = v.positive("eps", eps), v.positive("grad_tol", grad_tol)
    rng, L = v.generator(seed), channel.n_indices
    qs, Q0s = (q,) * L, (Q0,) * L
    V = Q0 - q if L == 1 else (Q0 - q,) * L
    fails = []
    omega, y = _measure(channel, n, qs, Q0s, T, rng)
    if y.shape[0] != n or y.shape[-2:] != (T, T) or not np.all(np.isfinite(y)):
        fails.append(f"the forward map returned shape {y.shape} (want ({n}, ..., {T}, {T})) or non-finite values")
    g, gap = _gradient_check(channel, y, omega, V, T, eps)
    if g.shape != omega.shape or not np.all(np.isfinite(g)) or not np.allclose(g, np.swapaxes(g, -1, -2)):
        fails.append(f"g_out must be finite, symmetric and of the shape {omega.shape} of omega")
    if gap > grad_tol:
        fails.append(f"g_out is not the gradient of log_partition: relative gap {gap:.2e} > {grad_tol:g}")
    F, F_mc, se = _fisher_check(channel, qs, Q0s, T, n_mc, rng)
    if np.any(np.abs(F - F_mc) > 5 * se + 1e-9 * F):
        fails.append(f"fisher = {F} but its Monte Carlo definition gives {F_mc} +- {se}")
    F_up = np.atleast_1d(channel.fisher(min(q + 0.1 * Q0, 0.99 * Q0) if L == 1 else
                                        (min(q + 0.1 * Q0, 0.99 * Q0),) * L, Q0 if L == 1 else Q0s, T))
    if np.any(F <= 0) or np.any(F_up < F * (1 - 1e-3)):
        fails.append(f"fisher must be positive and grow with q: F({q:g}) = {F}, F({q + 0.1 * Q0:g}) = {F_up}")
    if fails:
        raise AssertionError(f"{channel!r} breaks the channel contract:\n  " + "\n  ".join(fails))
