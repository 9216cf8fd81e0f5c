r"""Hamiltonian Monte Carlo on a tuple of factor matrices, the engine of the sampled posteriors.

A posterior ``p(X | R) ∝ exp(-U(X))`` on factors ``X = (X_1, ..., X_k)`` is sampled by
drawing a Gaussian momentum ``p_i ~ N(0, I)`` for each factor, integrating Hamilton's
equations of ``H = U(X) + ||p||^2/2`` with ``n_leapfrog`` leapfrog steps of size ``step``,

.. math::  p \leftarrow p - \tfrac{\epsilon}{2}\nabla U,\quad X \leftarrow X + \epsilon\,p,\quad
           p \leftarrow p - \tfrac{\epsilon}{2}\nabla U,

and accepting the end point with probability ``min(1, exp(H_0 - H_1))``: the chain leaves the
posterior invariant for any fixed ``step``.  The caller gives ``U`` as a function of the factors
that returns ``(U, gradients, S)``, ``S`` what the chain reports at each kept state (the matrix
or matrices the factors make).  :func:`aimlib.priors.sampled.hmc_chain` (untied key and query),
:func:`aimlib.priors.joint.sample_joint` (two layers seen through correlated noises) and
:func:`aimlib.gd.posterior.sample_posterior` (the softmax AIM given its data, with label noise)
are its three posteriors.
"""
from __future__ import annotations

import math

from ..backend import get_array_module

__all__ = ["hmc", "TARGET_ACCEPTANCE", "TRAJECTORY"]

#: acceptance rate the step size is tuned to during warm-up
TARGET_ACCEPTANCE = 0.75
#: length of a leapfrog trajectory, in units of the prior's time scale
TRAJECTORY = 1.5


def _kinetic(momenta) -> float:
    """``||p||^2/2`` summed over the factors."""
    return 0.5 * sum(float((p * p).sum()) for p in momenta)


def _trajectory(state, potential, step: float, n_leapfrog: int, rng):
    """One leapfrog trajectory from ``state = (X, U, gradients, S)``; returns ``(proposal, acceptance prob)``."""
    X, U, grads, _ = state
    xp = get_array_module(X[0])
    momenta = [xp.asarray(rng.standard_normal(x.shape)) for x in X]
    H0 = U + _kinetic(momenta)
    momenta = [p - 0.5 * step * g for p, g in zip(momenta, grads)]
    for i in range(n_leapfrog):
        X = tuple(x + step * p for x, p in zip(X, momenta))
        U, grads, S = potential(X)
        kick = step if i < n_leapfrog - 1 else 0.5 * step
        momenta = [p - kick * g for p, g in zip(momenta, grads)]
    H1 = U + _kinetic(momenta)
    return (X, U, grads, S), (math.exp(min(0.0, H0 - H1)) if math.isfinite(H1) else 0.0)


def hmc(factors, potential, visit, *, n_steps: int, n_warmup: int, step: float, n_leapfrog: int, rng):
    r"""Run ``n_steps`` HMC steps from ``factors`` on ``exp(-U)`` (module docstring).

    ``potential(X)`` returns ``(U, gradients, S)`` for a tuple of factors ``X``.  During the
    first ``n_warmup`` steps the step size moves towards ``TARGET_ACCEPTANCE``
    (``step *= exp(0.1 (a - target))``); after them it is fixed, so the chain leaves the
    posterior invariant, and ``visit(S_t)`` is called with each state.  ``rng`` is a
    Generator.  Returns ``(X, acceptance, step)``: the last factors, the mean acceptance
    after warm-up and the tuned step.
    """
    X = tuple(factors)
    state, accepted = (X, *potential(X)), 0.0
    for t in range(n_steps):
        proposal, a = _trajectory(state, potential, step, n_leapfrog, rng)
        if rng.uniform() < a:
            state = proposal
        if t < n_warmup:
            step *= math.exp(0.1 * (a - TARGET_ACCEPTANCE))
        else:
            accepted += a
            visit(state[-1])
    return state[0], accepted / max(1, n_steps - n_warmup), step
