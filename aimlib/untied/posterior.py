r"""The Bayes-optimal error of denoising ``S`` under two noises, by sampling its posterior.

Book, chapter "Beyond", section "The Bayes-optimal error, sampled".  The prior side
of the exact two-overlap state evolution (:func:`~aimlib.untied.solve_sectors`) is
the error of estimating ``S = Q K^T/sqrt(r d)`` from

.. math::  R = S + \sqrt{\Delta_A}\,\Pi_{\rm sym}G + \sqrt{\Delta_B}\,\Pi_{\rm anti}G',

``G, G'`` Ginibre with i.i.d. ``N(0, 1/d)`` entries: noise of variance ``Delta_s/d``
per direction of each part.  The noise is invariant under ``S -> O S O^T`` only,
so no spectral formula gives this error.  Its posterior on the factors is

.. math::  -\log p(Q, K\mid R) = \tfrac12\|Q\|^2 + \tfrac12\|K\|^2
    + \tfrac{d}{2\Delta_A}\|A_R - A\|^2 + \tfrac{d}{2\Delta_B}\|B_R - B\|^2 + {\rm const},

``A, B`` the parts of ``S``.  Hamiltonian Monte Carlo samples it.  By the
Nishimori identity the planted factors are themselves a draw from the posterior,
so a chain that leaves it invariant, started there, is in equilibrium from the
first step (no metastable state can hold it), and for a posterior draw ``S_t``
that has decorrelated from the start

.. math::  \mathrm{mmse}_s = \tfrac1{2d}\,\mathbb E\|\Pi_s(S_t - S)\|^2 .

:func:`sample_two_noise` averages this along the chain;
:func:`sampled_state_evolution` iterates the two-overlap equations with it, and
:class:`SampledPriorStep` gives GAMP the posterior mean itself.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, module_named
from ..errors import ConvergenceError
from ..model import teacher_width
from .model import count_threshold, factor_product, part_errors, part_norms, parts
from .state_evolution import sector_qhat

__all__ = ["two_noise_problem", "hmc_chain", "hmc_errors", "TwoNoiseResult", "sample_two_noise", "SampledSE",
           "sampled_state_evolution", "SampledPriorStep"]

#: a chain whose mean acceptance after warm-up falls below this is refused
MIN_ACCEPTANCE = 0.3
#: acceptance rate the step size is tuned to during warm-up
TARGET_ACCEPTANCE = 0.75
#: length of a leapfrog trajectory, in units of the prior's time scale
TRAJECTORY = 1.5
#: batches of the kept draws whose means give the Monte Carlo error of GAMP's sampled prior step
N_BATCHES = 10


def _deltas(deltas) -> tuple:
    """Validate the pair ``(Delta_A, Delta_B)``: both finite and > 0."""
    if len(deltas) != 2:
        raise ValueError(f"deltas must be a pair (Delta_A, Delta_B), got {deltas!r}")
    return tuple(v.positive(f"deltas[{i}]", x) for i, x in enumerate(deltas))


def _first_step(rho: float, deltas) -> tuple:
    """``(step, n_leapfrog)``: ``0.5/sqrt(lambda)``, ``lambda = 1 + (1 + sqrt(rho))^2/(rho Delta_min)`` the
    largest curvature of the potential near the truth, and a trajectory of length ``TRAJECTORY``."""
    step = 0.5 / math.sqrt(1 + (1 + math.sqrt(rho)) ** 2 / (rho * min(deltas)))
    return step, math.ceil(TRAJECTORY / step)


def two_noise_problem(d: int, rho: float, deltas, seed=None, *, backend: str | None = None):
    r"""Draw ``Q, K`` (``(d, r)``, i.i.d. ``N(0, 1)``, ``r = round(rho d)``) and ``R`` (module docstring).

    Returns ``(Q, K, R)`` on the array module named by ``backend``; ``S = Q K^T/sqrt(r d)``.
    """
    d, rho = v.integer("d", d, minimum=2), v.rho(rho)
    (dA, dB), rng, xp = _deltas(deltas), v.generator(seed), module_named(backend)
    r = teacher_width(d, rho)
    Q, K = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    G1, G2 = rng.standard_normal((2, d, d)) / math.sqrt(d)
    R = factor_product(Q, K) + math.sqrt(dA) * parts(G1)[0] + math.sqrt(dB) * parts(G2)[1]
    return xp.asarray(Q), xp.asarray(K), xp.asarray(R)


def _potential(Q, K, R, weights):
    """``(U, dU/dQ, dU/dK, S)``: minus the log posterior of the module docstring and its gradient."""
    c = 1.0 / math.sqrt(Q.shape[0] * Q.shape[1])
    S = c * (Q @ K.T)
    EA, EB = parts(S - R)
    W = weights[0] * EA + weights[1] * EB
    U = 0.5 * float((Q * Q).sum() + (K * K).sum() + weights[0] * (EA * EA).sum() + weights[1] * (EB * EB).sum())
    return U, Q + c * (W @ K), K + c * (W.T @ Q), S


def _trajectory(state, R, weights, step: float, n_leapfrog: int, rng):
    """One leapfrog trajectory from ``state = (Q, K, U, gQ, gK, S)``; returns ``(proposal, acceptance prob)``."""
    xp = get_array_module(R)
    Q, K, U, gQ, gK, _ = state
    pQ, pK = (xp.asarray(rng.standard_normal(x.shape)) for x in (Q, K))
    H0 = U + 0.5 * float((pQ * pQ).sum() + (pK * pK).sum())
    pQ, pK = pQ - 0.5 * step * gQ, pK - 0.5 * step * gK
    for i in range(n_leapfrog):
        Q, K = Q + step * pQ, K + step * pK
        U, gQ, gK, S = _potential(Q, K, R, weights)
        kick = step if i < n_leapfrog - 1 else 0.5 * step
        pQ, pK = pQ - kick * gQ, pK - kick * gK
    H1 = U + 0.5 * float((pQ * pQ).sum() + (pK * pK).sum())
    return (Q, K, U, gQ, gK, S), (math.exp(min(0.0, H0 - H1)) if math.isfinite(H1) else 0.0)


def hmc_chain(Q, K, R, deltas, visit, *, n_steps: int, n_warmup: int, step: float, n_leapfrog: int, seed=None):
    r"""Hamiltonian Monte Carlo on the posterior of ``(Q, K)`` given ``R``, started at ``(Q, K)``.

    Each of ``n_steps`` steps draws a Gaussian momentum, runs ``n_leapfrog``
    leapfrog steps of size ``step`` and accepts by Metropolis.  During the first
    ``n_warmup`` steps the step size moves towards ``TARGET_ACCEPTANCE``
    (``step *= exp(0.1 (a - target))``); after them it is fixed, so the chain
    leaves the posterior invariant, and ``visit(S_t)`` is called with each state.
    Returns ``(Q, K, acceptance, step)``: the last factors, the mean acceptance
    after warm-up and the tuned step.
    """
    deltas, rng, d = _deltas(deltas), v.generator(seed), Q.shape[0]
    weights = (d / deltas[0], d / deltas[1])
    state, accepted = (Q, K, *_potential(Q, K, R, weights)), 0.0
    for t in range(n_steps):
        proposal, a = _trajectory(state, R, weights, step, n_leapfrog, rng)
        if rng.uniform() < a:
            state = proposal
        if t < n_warmup:
            step *= math.exp(0.1 * (a - TARGET_ACCEPTANCE))
        else:
            accepted += a
            visit(state[-1])
    return state[0], state[1], accepted / max(1, n_steps - n_warmup), step


def hmc_errors(Q, K, R, deltas, *, reference=None, **chain):
    r"""The half-distances ``(1/2d)||Pi_s(S_t - S)||^2`` of the draws of :func:`hmc_chain` to ``S = reference``.

    ``reference`` defaults to the start ``Q K^T/sqrt(r d)`` (planted).  Returns
    ``(errors, acceptance, step)``, ``errors`` of shape ``(n_steps - n_warmup, 2)``.
    """
    S0 = factor_product(Q, K) if reference is None else reference
    errors = []
    *_, acc, step = hmc_chain(Q, K, R, deltas, lambda S: errors.append([e / 2 for e in part_errors(S, S0)]),
                              **chain)
    return np.array(errors), acc, step


def _refuse(acc: float, what: str) -> None:
    """Raise :class:`~aimlib.errors.ConvergenceError` if ``acc < MIN_ACCEPTANCE``."""
    if not acc >= MIN_ACCEPTANCE:
        raise ConvergenceError(f"two-noise posterior sampling: acceptance {acc:.2f} after warm-up (at least "
                               f"{MIN_ACCEPTANCE} needed) {what}")


@dataclass
class TwoNoiseResult:
    """Outcome of :func:`sample_two_noise`.

    Attributes
    ----------
    errors : tuple
        ``(mmse_A, mmse_B)``, the chain averages of the module docstring.
    stderr : tuple
        Their standard errors from ``N_BATCHES`` batch means (the spread of the chain; the
        spread over instances, of order ``1/d``, is larger).
    acceptance, step, n_leapfrog, seconds
        Mean acceptance after warm-up, the tuned step size, leapfrog steps per trajectory, run time.
    """

    errors: tuple
    stderr: tuple
    acceptance: float
    step: float
    n_leapfrog: int
    seconds: float

    @property
    def mmse(self) -> float:
        """``mmse_A + mmse_B``."""
        return sum(self.errors)


def sample_two_noise(d: int, rho: float, deltas, *, seed=None, n_steps: int = 300, warmup: float = 0.3,
                     backend: str | None = None) -> TwoNoiseResult:
    r"""The errors ``(mmse_A, mmse_B)`` of the posterior mean of ``S`` from one instance (module docstring).

    One Generator made from ``seed`` draws the instance (:func:`two_noise_problem`)
    and then the chain (:func:`hmc_errors`), whose step size starts at
    :func:`_first_step`'s.  Raises :class:`~aimlib.errors.ConvergenceError` if
    the acceptance after warm-up is below ``MIN_ACCEPTANCE``.
    """
    deltas, rng = _deltas(deltas), v.generator(seed)
    n_steps = v.integer("n_steps", n_steps, minimum=20)
    n_warm = int(v.in_range("warmup", warmup, 0.0, 0.9) * n_steps)
    Q, K, R = two_noise_problem(d, rho, deltas, rng, backend=backend)
    (step, n_leapfrog), start = _first_step(rho, deltas), time.perf_counter()
    errors, acc, step = hmc_errors(Q, K, R, deltas, n_steps=n_steps, n_warmup=n_warm, step=step,
                                   n_leapfrog=n_leapfrog, seed=rng)
    _refuse(acc, f"at deltas={deltas}, d={d}; try a longer warmup")
    batches = np.array([b.mean(axis=0) for b in np.array_split(errors, N_BATCHES)])
    return TwoNoiseResult(errors=tuple(float(x) for x in errors.mean(axis=0)),
                          stderr=tuple(float(x) for x in batches.std(axis=0) / math.sqrt(len(batches))),
                          acceptance=acc, step=step, n_leapfrog=n_leapfrog, seconds=time.perf_counter() - start)


@dataclass
class SampledSE:
    """Outcome of :func:`sampled_state_evolution`.

    ``V`` is ``(V_A, V_B)``, the mean of the last five iterates (``(0, 0)`` from
    the counting threshold on, where the equations recover ``S`` exactly);
    ``trace`` holds every iterate ``(V_A, V_B, Delta_A, Delta_B)``.
    """

    V: tuple
    iterations: int
    trace: np.ndarray
    seconds: float

    @property
    def mmse(self) -> float:
        """``V_A + V_B``."""
        return sum(self.V)


def sampled_state_evolution(alpha: float, T: int, rho: float, d: int, *, seed=None, tol: float = 2e-3,
                            max_iter: int = 150, **sampler) -> SampledSE:
    r"""Iterate ``V_s <- mmse_s(2/qhat_A, 2/qhat_B)`` (:func:`~aimlib.untied.sector_qhat`) from ``V = (1/2, 1/2)``.

    The prior side is :func:`sample_two_noise` on one instance of dimension ``d``,
    the same at every iteration (common random numbers: ``seed`` is reused), so
    the map is smooth in ``V``.  The iteration stops when the mean of the last
    five iterates of ``V_A + V_B`` moves by less than ``tol`` (relative) from the
    five before; raises :class:`~aimlib.errors.ConvergenceError` after
    ``max_iter``.  ``sampler`` goes to :func:`sample_two_noise`.
    """
    alpha, T, rho = v.positive("alpha", alpha), v.integer("T", T, minimum=2), v.rho(rho)
    tol, max_iter = v.positive("tol", tol), v.integer("max_iter", max_iter, minimum=10)
    if alpha >= count_threshold(rho, T):
        return SampledSE(V=(0.0, 0.0), iterations=0, trace=np.zeros((0, 4)), seconds=0.0)
    if not isinstance(seed, (int, np.integer)):          # one instance for every iteration
        seed = int(v.generator(seed).integers(2**63))
    start, VA, VB, trace = time.perf_counter(), 0.5, 0.5, []
    for it in range(1, max_iter + 1):
        deltas = tuple(2.0 / q for q in sector_qhat(VA, VB, alpha, T))
        VA, VB = sample_two_noise(d, rho, deltas, seed=seed, **sampler).errors
        trace.append((VA, VB, *deltas))
        totals = np.array(trace)[:, :2].sum(axis=1)
        if it >= 10 and abs(totals[-5:].mean() - totals[-10:-5].mean()) < tol * totals[-5:].mean():
            VA, VB = np.array(trace)[-5:, :2].mean(axis=0)
            return SampledSE(V=(float(VA), float(VB)), iterations=it, trace=np.array(trace),
                             seconds=time.perf_counter() - start)
    raise ConvergenceError(f"sampled untied SE: no fixed point within {max_iter} iterations at alpha={alpha:g}, "
                           f"T={T}, d={d} (last V = {VA + VB:.4g})")


class SampledPriorStep:
    r"""GAMP's prior step for untied key and query: the posterior mean under the two noises, by sampling.

    Called as ``step(R, deltas, noise, Z)`` by :func:`~aimlib.untied.untied_gamp`
    (``denoiser='sampled'``): runs :func:`hmc_chain` on the posterior of the
    module docstring with noises ``deltas`` and returns ``(F, V, V_ons)``, ``F``
    the mean of the draws after warm-up.  For a posterior mean under Gaussian
    noise the Jacobian is the posterior covariance over the noise variance, so
    ``V_ons,s = Delta_s div_s F/d^2`` is the posterior variance of each part,
    ``(1/d)(mean ||Pi_s S_t||^2 - ||Pi_s F||^2) + m_s``, and the error of ``F``
    is that plus the Monte Carlo error ``m_s`` of the mean once more:
    ``V = V_ons + m``, with ``m_s = (1/d) sum_k ||Pi_s(F_k - F)||^2/(K(K - 1))``
    from the means ``F_k`` of ``K = N_BATCHES`` consecutive batches.  (The
    chain's noise is independent of ``R``, so it adds to the error and not to
    the divergence.)  There is no planted start here; the chain starts from a
    prior draw and carries its last state over to the next call (the posterior
    moves little between iterations).  ``noise`` and ``Z`` are not used.
    """

    def __init__(self, d: int, rho: float, seed=None, *, n_steps: int = 200, warmup: float = 0.3, xp=np):
        self.rho, self.rng = v.rho(rho), v.generator(seed)
        self.n_steps = v.integer("n_steps", n_steps, minimum=20)
        self.n_warmup = int(v.in_range("warmup", warmup, 0.0, 0.9) * self.n_steps)
        if self.n_steps - self.n_warmup < N_BATCHES:
            raise ValueError(f"n_steps and warmup must keep at least {N_BATCHES} draws after the warm-up "
                             f"(one per batch), got n_steps={self.n_steps}, warmup={warmup}")
        r = teacher_width(d, self.rho)
        self.Q, self.K = (xp.asarray(self.rng.standard_normal((d, r))) for _ in range(2))

    def __call__(self, R, deltas, noise=None, Z=None):
        xp, d = get_array_module(R), R.shape[0]
        n_kept = self.n_steps - self.n_warmup
        sums, squares = xp.zeros((N_BATCHES, d, d), dtype=R.dtype), np.zeros((N_BATCHES, 2))
        sizes = np.zeros(N_BATCHES, dtype=int)

        def visit(S):
            k = sizes.sum() * N_BATCHES // n_kept
            sums[k] += S
            squares[k] += part_norms(S)
            sizes[k] += 1

        step, n_leapfrog = _first_step(self.rho, deltas)
        self.Q, self.K, acc, _ = hmc_chain(self.Q, self.K, R, deltas, visit, n_steps=self.n_steps,
                                           n_warmup=self.n_warmup, step=step, n_leapfrog=n_leapfrog,
                                           seed=self.rng)
        _refuse(acc, f"in GAMP's prior step at deltas={tuple(deltas)}")
        F = sums.sum(axis=0) / n_kept
        raw = squares.sum(axis=0) / n_kept - np.array(part_norms(F))
        batch_spread = np.sum([part_norms(sums[k] / sizes[k] - F) for k in range(N_BATCHES)], axis=0)
        mc = batch_spread / (N_BATCHES * (N_BATCHES - 1))
        post = np.maximum(raw + mc, 0.0) / d
        return F, tuple(float(x) for x in post + mc / d), tuple(float(x) for x in post)
