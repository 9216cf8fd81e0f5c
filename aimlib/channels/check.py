r"""The channel contract check, shipped with the library: run it on any new channel.

:func:`check_channel` tests the identities of :mod:`aimlib.channels.base` that a
channel's forward map and Bayes side must satisfy, each by an independent route,
on samples of the state-evolution measure (``omega_l ~ N(0, C(q_l))``,
``h_l = omega_l + N(0, C(Q0_l - q_l))``, ``y = f(h)``, every layer; ``C`` the index
covariance, :meth:`~aimlib.channels.base.Channel.index_fluctuation`, one ``q`` per sector):

* the forward map returns finite outputs of shape ``(n, ..., T, T)``;
* ``g_out`` is finite, of the shape of ``omega`` (symmetric for symmetric index matrices),
  and it *is* the gradient of ``log_partition`` with respect to the independent entries
  (``omega_ab``, ``a <= b``, moved with ``omega_ba``; every ``omega_ab`` of a square index
  matrix; central finite differences);
* ``fisher`` equals its definition, one value per component (layer and sector),
  :meth:`~aimlib.channels.base.Channel.fisher_terms` estimated by Monte Carlo
  (within five standard errors), is positive and grows with ``q``.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from .base import Channel

__all__ = ["check_channel"]


def _measure(channel, n, q, Q0, T, rng):
    """``(omega, y)`` with the layer axis ``-3`` when the channel reads ``L > 1`` indices.

    ``q``, ``Q0``: one value per component, each layer's (symmetric indices) or each sector's (one index).
    """
    split = (lambda x: [tuple(x)]) if channel.n_indices == 1 else list
    omega = np.stack([channel.sample_fluctuation(n, T, ql, rng) for ql in split(q)], axis=1)
    h = omega + np.stack([channel.sample_fluctuation(n, T, Vl, rng) for Vl in split(np.subtract(Q0, q))], axis=1)
    if channel.n_indices == 1:
        omega, h = omega[:, 0], h[:, 0]
    return omega, channel(h, seed=rng)


def _entries(T, square):
    """The independent entries ``(a, b)`` of an index matrix: all of a square one, ``a <= b`` of a symmetric one."""
    if square:
        return [(a, b) for a in range(T) for b in range(T)]
    return list(zip(*np.triu_indices(T)))


def _gradient_check(channel, y, omega, V, T, eps):
    """Largest gap between ``g_out`` and the finite-difference gradient of ``log_partition``."""
    g = channel.g_out(y, omega, V)
    gap = 0.0
    for layer in range(channel.n_indices):
        for a, b in _entries(T, channel.square):
            E = np.zeros(omega.shape[1:])
            at = (layer,) * (omega.ndim == 4)
            E[at + (a, b)] = eps
            if not channel.square:
                E[at + (b, a)] = eps
            fd = (channel.log_partition(y, omega + E, V) - channel.log_partition(y, omega - E, V)) / (2 * eps)
            g_ab = g[:, layer, a, b] if omega.ndim == 4 else g[:, a, b]
            gap = max(gap, float(np.max(np.abs(fd - g_ab) / (1.0 + np.abs(fd)))))
    return g, gap


def _fisher_check(channel, q, Q0, V, T, n_mc, rng):
    """``(F, F_mc, se)``: the channel's ``F_c``, their Monte Carlo estimates and standard errors."""
    omega, y = _measure(channel, n_mc, q, Q0, T, rng)
    terms = channel.fisher_terms(channel.g_out(y, omega, V)).reshape(n_mc, -1)    # (n_mc, components)
    F = np.atleast_1d(channel.fisher(*_args(channel, q, Q0), T))
    return F, terms.mean(axis=0), terms.std(axis=0) / np.sqrt(n_mc)


def _args(channel, q, Q0):
    """``(q, Q0)`` as :meth:`~aimlib.channels.base.Channel.fisher` takes them: numbers for one component."""
    return (q[0], Q0[0]) if len(q) == 1 else (tuple(q), tuple(Q0))


def check_channel(channel: Channel, T: int = 2, *, q: float = 0.6, Q0: float = 1.5, n: int = 16,
                  n_mc: int = 20_000, eps: float = 1e-4, grad_tol: float = 1e-3, seed=0) -> None:
    """Check ``channel`` against the contract of :mod:`aimlib.channels.base` (module docstring).

    Parameters
    ----------
    channel : Channel
    T : int
        Tokens per sample (one its Bayes side supports).
    q, Q0 : float
        Overlap and second moment of the measure (``0 < q < Q0``), the same for every component
        (layer, and sector of a square index matrix).
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
    rng, C = v.generator(seed), channel.n_indices * len(channel.sectors)
    qs, Q0s = (q,) * C, (Q0,) * C
    V = _args(channel, np.subtract(Q0s, qs), Q0s)[0]
    fails = []
    omega, y = _measure(channel, n, qs, Q0s, T, rng)
    if y.shape[0] != n or y.shape[-2:] != (T, T) or not np.all(np.isfinite(y)):
        fails.append(f"the forward map returned shape {y.shape} (want ({n}, ..., {T}, {T})) or non-finite values")
    g, gap = _gradient_check(channel, y, omega, V, T, eps)
    symmetric = channel.square or np.allclose(g, np.swapaxes(g, -1, -2))
    if g.shape != omega.shape or not np.all(np.isfinite(g)) or not symmetric:
        fails.append(f"g_out must be finite, {'' if channel.square else 'symmetric '}and of the shape "
                     f"{omega.shape} of omega")
    if gap > grad_tol:
        fails.append(f"g_out is not the gradient of log_partition: relative gap {gap:.2e} > {grad_tol:g}")
    F, F_mc, se = _fisher_check(channel, qs, Q0s, V, T, n_mc, rng)
    if F.shape != F_mc.shape or np.any(np.abs(F - F_mc) > 5 * se + 1e-9 * F):
        fails.append(f"fisher = {F} but its Monte Carlo definition gives {F_mc} +- {se}")
    F_up = np.atleast_1d(channel.fisher(*_args(channel, (min(q + 0.1 * Q0, 0.99 * Q0),) * C, Q0s), T))
    if np.any(F <= 0) or np.any(F_up < F * (1 - 1e-3)):
        fails.append(f"fisher must be positive and grow with q: F({q:g}) = {F}, F({q + 0.1 * Q0:g}) = {F_up}")
    if fails:
        raise AssertionError(f"{channel!r} breaks the channel contract:\n  " + "\n  ".join(fails))
