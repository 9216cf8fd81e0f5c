r"""The Bayes-optimal denoiser of ``S = Q K^T/sqrt(r d)`` under two noises, by sampling its posterior.

Book, chapter "Untied key and query: algorithms and the exact error",
section "The Bayes-optimal error, sampled".  For

.. math::  R = S + \sqrt{\Delta_A}\,\Pi_{\rm sym}G + \sqrt{\Delta_B}\,\Pi_{\rm anti}G',

``G, G'`` Ginibre with i.i.d. ``N(0, 1/d)`` entries (noise of variance ``Delta_s/d``
per direction of each part), the posterior on the factors is

.. math::  -\log p(Q, K\mid R) = \tfrac12\|Q\|^2 + \tfrac12\|K\|^2
    + \tfrac{d}{2\Delta_A}\|A_R - A\|^2 + \tfrac{d}{2\Delta_B}\|B_R - B\|^2 + {\rm const},

``A, B`` the parts of ``S``.  Hamiltonian Monte Carlo (:func:`hmc_chain`) samples
it; :class:`Sampled` is the prior whose denoiser is the mean of the draws (GAMP's
Bayes-optimal prior step).  :mod:`aimlib.untied.posterior` builds the sampled
two-noise MMSE and the exact two-overlap state evolution on the same chain.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import get_array_module
from ..errors import ConvergenceError
from .gaussian import matrix_parts
from .hmc import TRAJECTORY, hmc
from .rectangular import FactorProduct, check_sector_pair, part_norms
from .wishart import teacher_width

__all__ = ["Sampled", "hmc_chain", "first_step", "chain_settings", "refuse", "MIN_ACCEPTANCE", "N_BATCHES"]

#: a chain whose mean acceptance after warm-up falls below this is refused
MIN_ACCEPTANCE = 0.3
#: batches of the kept draws whose means give the Monte Carlo error of the sampled posterior mean
N_BATCHES = 10


def first_step(rho: float, deltas) -> tuple:
    """``(step, n_leapfrog)``: ``0.5/sqrt(lambda)``, ``lambda = 1 + (1 + sqrt(rho))^2/(rho Delta_min)`` the
    largest curvature of the potential near the truth, and a trajectory of length ``TRAJECTORY``."""
    step = 0.5 / math.sqrt(1 + (1 + math.sqrt(rho)) ** 2 / (rho * min(deltas)))
    return step, math.ceil(TRAJECTORY / step)


def _potential(Q, K, R, weights):
    """``(U, (dU/dQ, dU/dK), S)``: minus the log posterior of the module docstring, its gradient, ``S``."""
    c = 1.0 / math.sqrt(Q.shape[0] * Q.shape[1])
    S = c * (Q @ K.T)
    EA, EB = matrix_parts(S - R)
    W = weights[0] * EA + weights[1] * EB
    U = 0.5 * float((Q * Q).sum() + (K * K).sum() + weights[0] * (EA * EA).sum() + weights[1] * (EB * EB).sum())
    return U, (Q + c * (W @ K), K + c * (W.T @ Q)), S


def hmc_chain(Q, K, R, deltas, visit, *, n_steps: int, n_warmup: int, step: float, n_leapfrog: int, seed=None):
    r"""Hamiltonian Monte Carlo (:func:`aimlib.priors.hmc.hmc`) on the posterior of ``(Q, K)`` given ``R``.

    The chain starts at ``(Q, K)``; each of ``n_steps`` steps runs ``n_leapfrog``
    leapfrog steps of size ``step`` (tuned during the first ``n_warmup``), and
    ``visit(S_t)`` is called with each state after warm-up.  Returns
    ``(Q, K, acceptance, step)``: the last factors, the mean acceptance after
    warm-up and the tuned step.
    """
    deltas, rng, d = check_sector_pair(deltas), v.generator(seed), Q.shape[0]
    weights = (d / deltas[0], d / deltas[1])
    (Q, K), acc, step = hmc((Q, K), lambda X: _potential(*X, R, weights), visit, n_steps=n_steps,
                            n_warmup=n_warmup, step=step, n_leapfrog=n_leapfrog, rng=rng)
    return Q, K, acc, step


def chain_settings(n_steps: int, warmup: float) -> tuple:
    """``(n_steps, warmup, n_warmup)`` of a chain carried across GAMP's calls, validated: ``n_steps >= 20``
    trajectories per call, the share ``warmup`` in ``[0, 0.9]`` tuning the step, at least ``N_BATCHES`` draws
    (one per batch) kept after it."""
    n_steps = v.integer("n_steps", n_steps, minimum=20)
    warmup = v.in_range("warmup", warmup, 0.0, 0.9)
    n_warmup = int(warmup * n_steps)
    if n_steps - n_warmup < N_BATCHES:
        raise ValueError(f"n_steps and warmup must keep at least {N_BATCHES} draws after the warm-up "
                         f"(one per batch), got n_steps={n_steps}, warmup={warmup}")
    return n_steps, warmup, n_warmup


def refuse(acc: float, what: str, problem: str = "two-noise posterior sampling") -> None:
    """Raise :class:`~aimlib.errors.ConvergenceError` if the acceptance ``acc`` is below ``MIN_ACCEPTANCE``."""
    if not acc >= MIN_ACCEPTANCE:
        raise ConvergenceError(f"{problem}: acceptance {acc:.2f} after warm-up (at least "
                               f"{MIN_ACCEPTANCE} needed) {what}")


class Sampled(FactorProduct):
    r"""``S = Q K^T/sqrt(r d)`` whose denoiser is the posterior mean under the two noises, sampled.

    Parameters
    ----------
    rho : float
        Width ratio, finite, in ``RHO_RANGE``.
    seed : int, Generator or None
        Draws the chain's start (a prior draw, at the first call of :meth:`denoise`)
        and then the chain.
    n_steps : int
        HMC steps per call (``>= 20``).
    warmup : float in [0, 0.9]
        Share of them spent tuning the step size; at least ``N_BATCHES`` draws must remain.

    :meth:`denoise` runs :func:`hmc_chain` on the posterior of the module docstring
    and returns ``(F, V, V_ons)``, ``F`` the mean of the draws after warm-up.  For a
    posterior mean under Gaussian noise the Jacobian is the posterior covariance over
    the noise variance, so ``V_ons,s = Delta_s div_s F/d^2`` is the posterior variance
    of each part, ``(1/d)(mean ||Pi_s S_t||^2 - ||Pi_s F||^2) + m_s``, and the error of
    ``F`` is that plus the Monte Carlo error ``m_s`` of the mean once more:
    ``V = V_ons + m``, with ``m_s = (1/d) sum_k ||Pi_s(F_k - F)||^2/(K(K - 1))`` from
    the means ``F_k`` of ``K = N_BATCHES`` consecutive batches.  (The chain's noise is
    independent of ``R``, so it adds to the error and not to the divergence.)  The
    chain starts from a prior draw and carries its last state over to the next call
    (the posterior moves little between GAMP's iterations): make one prior per run.

    :meth:`sector_mmse` is exact at equal noises only (``mmse_rect``, half per part);
    at unequal ones the two-noise MMSE has no formula and is sampled at a finite
    ``d`` by :func:`aimlib.untied.sample_two_noise`.
    """

    name = "sampled"

    def __init__(self, rho: float = 0.5, seed=None, n_steps: int = 200, warmup: float = 0.3):
        super().__init__(rho)
        self.n_steps, self.warmup, self.n_warmup = chain_settings(n_steps, warmup)
        self._rng = v.generator(seed)
        self._chain = None

    def seeded(self, seed) -> "Sampled":
        """A fresh prior with the same chain settings whose start and chain are drawn from ``seed``."""
        return Sampled(self.rho, seed, self.n_steps, self.warmup)

    def _params(self) -> str:
        return super()._params() + f", n_steps={self.n_steps}, warmup={self.n_warmup / self.n_steps:g}"

    def sector_mmse(self, deltas) -> tuple:
        """``(m/2, m/2)``, ``m = mmse(Delta)``, at equal noises; unequal ones raise ``NotImplementedError``."""
        dA, dB = check_sector_pair(deltas, allow_zero=True)
        if dA != dB:
            raise NotImplementedError(f"{self!r}: the two-noise MMSE at deltas={tuple(deltas)} has no formula; "
                                      "sample it with aimlib.untied.sample_two_noise (the exact two-overlap "
                                      "state evolution: aimlib.untied.sampled_state_evolution)")
        m = self.mmse(dA)
        return (m / 2, m / 2)

    def _start(self, d: int, xp):
        """The chain's state: a prior draw of ``(Q, K)`` at the first call at dimension ``d``, then the last one."""
        if self._chain is None or self._chain[0].shape[0] != d:
            r = teacher_width(d, self.rho)
            self._chain = tuple(xp.asarray(self._rng.standard_normal((d, r))) for _ in range(2))
        return self._chain

    def denoise(self, R, deltas, noise=None):
        """The sampled posterior mean and its errors (class docstring); ``noise`` is not used."""
        deltas = check_sector_pair(deltas)
        xp, d = get_array_module(R), R.shape[0]
        n_kept = self.n_steps - self.n_warmup
        sums, squares = xp.zeros((N_BATCHES, d, d), dtype=R.dtype), np.zeros((N_BATCHES, 2))
        sizes = np.zeros(N_BATCHES, dtype=int)

        def visit(S):
            k = sizes.sum() * N_BATCHES // n_kept
            sums[k] += S
            squares[k] += part_norms(S)
            sizes[k] += 1

        step, n_leapfrog = first_step(self.rho, deltas)
        Q, K, acc, _ = hmc_chain(*self._start(d, xp), R, deltas, visit, n_steps=self.n_steps,
                                 n_warmup=self.n_warmup, step=step, n_leapfrog=n_leapfrog, seed=self._rng)
        self._chain = (Q, K)
        refuse(acc, f"in GAMP's prior step at deltas={deltas}")
        F = sums.sum(axis=0) / n_kept
        raw = squares.sum(axis=0) / n_kept - np.array(part_norms(F))
        batch_spread = np.sum([part_norms(sums[k] / sizes[k] - F) for k in range(N_BATCHES)], axis=0)
        mc = batch_spread / (N_BATCHES * (N_BATCHES - 1))
        post = np.maximum(raw + mc, 0.0) / d
        return F, tuple(float(x) for x in post + mc / d), tuple(float(x) for x in post)
