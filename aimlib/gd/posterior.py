r"""Posterior draws of the key-query matrix of the softmax AIM with label noise, by Hamiltonian Monte Carlo.

Book, chapter "Gradient descent against posterior draws".  For the channel
``y = softmax(beta h) + sqrt(Delta) xi`` (``xi`` i.i.d. ``N(0, 1)`` on all ``T^2``
entries, :class:`~aimlib.channels.NoisySoftmax`) and the Wishart teacher
``S = W W^T/sqrt(r d)`` with ``W`` i.i.d. ``N(0, 1)``, the posterior on the factor is

.. math::  -\log p(W\mid X, y) = \tfrac12\|W\|_F^2
           + \frac1{2\Delta}\sum_{\mu=1}^n\bigl\|\mathrm{softmax}(\beta\hat h^\mu) - y^\mu\bigr\|_F^2
           + {\rm const} = \tfrac12\|W\|_F^2 + \frac n\Delta L(W) + {\rm const},

``L`` the training loss of gradient descent (:func:`aimlib.gd.student.loss_grad`), so the
gradient is ``W + (n/Delta) grad L``.  Hamiltonian Monte Carlo (:func:`aimlib.priors.hmc.hmc`)
leaves this law invariant, and its image under ``W -> W W^T/sqrt(r d)`` is the posterior of
``S`` (both the prior and the likelihood depend on ``W`` through ``W W^T`` only).

Mixing is checked, never assumed: :func:`sample_posterior` runs several chains, the first
from the planted factor when the teacher is given (by the Nishimori identity a posterior
draw: that chain is in equilibrium from its first step) and the others from prior draws,
and refuses the draws (:class:`~aimlib.errors.ConvergenceError`) when the acceptance is
low, when the split :func:`~aimlib.priors.diagnostics.potential_scale_reduction` of the
statistics ``(1/d) Tr S_hat`` and ``(1/d) ||S_hat||_F^2`` exceeds ``RHAT_MAX`` (the chains
disagree), or when they are worth fewer than ``MIN_ESS`` independent draws.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..channels.softmax import check_beta
from ..errors import ConvergenceError
from ..priors.diagnostics import effective_sample_size, potential_scale_reduction
from ..priors.hmc import TRAJECTORY, hmc
from ..priors.sampled import refuse
from .student import check_xy, gram, loss_grad

__all__ = ["PosteriorDraws", "sample_posterior", "planted_factor", "mean_pair_distance", "spectral_statistics",
           "SPECTRAL_STATISTICS", "RHAT_MAX", "MIN_ESS"]

#: the chains are refused when the split potential scale reduction of a statistic exceeds this
RHAT_MAX = 1.05
#: ... or when a statistic's draws, all chains together, are worth fewer independent draws than this
MIN_ESS = 50.0
#: the statistics of :func:`spectral_statistics`, in its order
SPECTRAL_STATISTICS = ("trace", "norm", "cube", "lmax", "lmin_r")


@dataclass(frozen=True)
class PosteriorDraws:
    """Outcome of :func:`sample_posterior`.

    Attributes
    ----------
    draws : array ``(chains, kept, d, d)``
        Every ``thin``-th matrix ``S_hat = W W^T/sqrt(r d)`` after warm-up, chain by chain.
    mean : array ``(d, d)``
        The posterior mean, the average of all states after warm-up (not only the kept ones).
    acceptance : tuple
        Mean acceptance probability after warm-up, per chain.
    rhat, ess : dict
        Split potential scale reduction and effective sample size (all chains) of the
        statistics ``'trace'`` ``(1/d) Tr S_hat`` and ``'norm'`` ``(1/d) ||S_hat||_F^2``.
    step, n_leapfrog : tuple
        The tuned leapfrog step and the leapfrog steps per kept trajectory, per chain.
    seconds : float
        Run time.
    """

    draws: object
    mean: object
    acceptance: tuple
    rhat: dict
    ess: dict
    step: tuple
    n_leapfrog: tuple
    seconds: float


def planted_factor(S, r: int):
    r"""A factor ``W`` of shape ``(d, r)`` with ``W W^T/sqrt(r d) = S``, from the top ``r`` eigenpairs of ``S``.

    ``S`` must be positive semi-definite of rank at most ``r`` (a Wishart teacher of width
    ``r``); the factor is defined up to ``W -> W O``, ``O`` orthogonal, which the posterior
    of :func:`sample_posterior` does not see.
    """
    S = v.finite_array("S", S, ndim=2)
    xp = get_array_module(S)
    d = S.shape[0]
    r = v.integer("r", r, minimum=1, maximum=d)
    lam, U = xp.linalg.eigh(S)                                      # ascending
    tol = 1e-8 * (float(xp.abs(lam).max()) or 1.0)
    rest = float(xp.abs(lam[: d - r]).max()) if d > r else 0.0
    if rest > tol or float(lam.min()) < -tol:
        raise ValueError(f"S must be positive semi-definite of rank at most r={r} to be planted, got its "
                         f"smallest eigenvalue {float(lam.min()):.3g} and its (d - r)-th largest {rest:.3g}")
    lam = xp.clip(lam[d - r:], 0.0, None)
    return U[:, d - r:] * xp.sqrt(lam * math.sqrt(r * d))[None, :]


def mean_pair_distance(S_hats) -> float:
    r"""``D``: the mean of ``(1/d) ||S_i - S_j||_F^2`` over ordered pairs ``i != j`` of the ``k`` matrices.

    Computed as ``D = (2k/(k-1)) (1/d) (mean_i ||S_i||^2 - ||mean_i S_i||^2)``, in ``O(k d^2)``;
    ``S_hats`` has shape ``(k, d, d)``, ``k >= 2``.  For posterior draws ``D/2`` is the
    posterior variance ``(1/d) E||S_hat - <S>||^2``, the MMSE by the Nishimori identity.
    """
    S_hats = v.finite_array("S_hats", S_hats, ndim=3)
    k, d = S_hats.shape[:2]
    if k < 2:
        raise ValueError(f"S_hats must hold k >= 2 matrices, got {k}")
    c = S_hats.mean(axis=0)
    spread = float((S_hats * S_hats).sum()) / k - float((c * c).sum())
    return 2 * k / (k - 1) * spread / d


def spectral_statistics(S_hats, r: int) -> dict:
    r"""Means over the matrices ``S_hats (k, d, d)`` of five statistics of their spectra (:data:`SPECTRAL_STATISTICS`).

    ``trace`` ``(1/d) Tr S``, ``norm`` ``(1/d) ||S||_F^2``, ``cube`` ``(1/d) Tr S^3``, ``lmax`` the
    largest eigenvalue and ``lmin_r`` the ``r``-th largest (``1 <= r <= d``; for a matrix of rank
    ``r`` its smallest non-zero one).  Given the data a posterior draw and the teacher are
    exchangeable, so over data sets each has the teacher's law; for Wishart teachers
    ``E (1/d) Tr S = sqrt(r/d)`` and ``E (1/d) ||S||^2 = (d + r + 1)/d``.
    """
    S_hats = v.finite_array("S_hats", S_hats, ndim=3)
    d = S_hats.shape[-1]
    r = v.integer("r", r, minimum=1, maximum=d)
    lam = to_host(get_array_module(S_hats).linalg.eigvalsh(S_hats))             # (k, d), ascending
    values = (lam.sum(-1) / d, (lam ** 2).sum(-1) / d, (lam ** 3).sum(-1) / d, lam[:, -1], lam[:, d - r])
    return {k: float(x.mean()) for k, x in zip(SPECTRAL_STATISTICS, values)}


def _potential(X2, y, n: int, T: int, beta: float, weight: float):
    """``W -> (U, (dU/dW,), S_hat)`` for the posterior of the module docstring (``weight = n/Delta``)."""
    def potential(factors):
        W3 = factors[0][None]
        L, g = loss_grad(X2, y, W3, beta, n, T)
        U = 0.5 * float((W3 * W3).sum()) + weight * float(L[0])
        return U, (factors[0] + weight * g[0],), gram(W3)[0]
    return potential


def _chain(start, potential, noise: float, n_warmup: int, n_kept: int, thin: int, rng):
    """One chain from ``start``: tune the step on ``n_warmup`` trajectories, then run ``n_kept`` at it.

    The first step ``min(sqrt(Delta), 1)/4`` is below the stiffest direction's stable step
    (curvature ``~ n/Delta`` along the measured directions, at least the prior's 1); the
    warm-up moves it towards ``TARGET_ACCEPTANCE``, and the kept trajectories take
    ``ceil(TRAJECTORY/step)`` leapfrog steps of it.  Returns ``(kept, stats, total, acceptance,
    step, n_leapfrog)``: every ``thin``-th state, ``((1/d) Tr S, (1/d) ||S||^2)`` of every
    state (the first two of :data:`SPECTRAL_STATISTICS`, for each state), and their sum.
    """
    xp, d = get_array_module(start), start.shape[0]
    kept, stats, total = [], [], [xp.zeros((d, d), dtype=start.dtype)]

    def visit(S_t):
        total[0] = total[0] + S_t
        stats.append((float(xp.trace(S_t)) / d, float((S_t * S_t).sum()) / d))
        if len(stats) % thin == 0:
            kept.append(S_t)

    step, W = 0.25 * min(math.sqrt(noise), 1.0), start
    if n_warmup:
        (W,), _, step = hmc((W,), potential, lambda S_t: None, n_steps=n_warmup, n_warmup=n_warmup, step=step,
                            n_leapfrog=math.ceil(TRAJECTORY / step), rng=rng)
    n_leapfrog = math.ceil(TRAJECTORY / step)
    _, a, step = hmc((W,), potential, visit, n_steps=n_kept, n_warmup=0, step=step, n_leapfrog=n_leapfrog, rng=rng)
    return xp.stack(kept), stats, total[0], a, step, n_leapfrog


def _check_settings(noise, chains, n_steps, warmup, thin):
    """Validate the sampler's settings; returns them with ``n_warmup``."""
    noise = v.positive("noise", noise)
    chains = v.integer("chains", chains, minimum=2)
    n_steps = v.integer("n_steps", n_steps, minimum=40)
    n_warmup = int(v.in_range("warmup", warmup, 0.0, 0.9) * n_steps)
    thin = v.integer("thin", thin, minimum=1)
    if (n_steps - n_warmup) // thin < 20:
        raise ValueError(f"n_steps, warmup and thin must keep at least 20 draws per chain, got n_steps={n_steps}, "
                         f"warmup={warmup}, thin={thin}")
    return noise, chains, n_steps, n_warmup, thin


def _checked_draws(stats, where: str):
    """Refuse chains that disagree or hold too few independent draws (module docstring); returns
    ``(rhat, ess)`` of the two statistics."""
    stats = np.asarray(stats)                                       # (chains, draws, 2)
    names = SPECTRAL_STATISTICS[:2]
    rhat = {k: float(potential_scale_reduction(stats[:, :, j].T)) for j, k in enumerate(names)}
    ess = {k: float(effective_sample_size(stats[:, :, j].T).sum()) for j, k in enumerate(names)}
    bad = [k for k in names if not (rhat[k] <= RHAT_MAX and ess[k] >= MIN_ESS)]
    if bad:
        raise ConvergenceError(f"posterior sampling of the softmax AIM has not mixed {where}: split R-hat "
                               f"{ {k: round(rhat[k], 3) for k in names} } (at most {RHAT_MAX}) and effective "
                               f"sample sizes { {k: round(ess[k], 1) for k in names} } (at least {MIN_ESS}) of "
                               f"{bad}; run more steps")
    return rhat, ess


def sample_posterior(X, y, noise: float, *, rank: int, beta: float = 1.0, chains: int = 4, n_steps: int = 600,
                     warmup: float = 0.3, thin: int = 10, S=None, seed=None) -> PosteriorDraws:
    r"""Draws of the posterior of ``S`` given softmax data with label noise ``noise`` (module docstring).

    Parameters
    ----------
    X, y : arrays ``(n, T, d)`` and ``(n, T, T)``
        The data (NumPy or CuPy), ``y`` the noisy outputs.
    noise : float
        The label-noise variance ``Delta > 0`` of the data (the likelihood's).
    rank : int
        The teacher's width ``r`` (``1 <= r <= d``): the prior is ``W W^T/sqrt(r d)``.
    beta : float
        Inverse temperature of the softmax, in ``(0, BETA_MAX]``.
    chains, n_steps, warmup, thin : int, int, float, int
        ``chains >= 2`` chains of ``n_steps >= 40`` HMC trajectories each, the first ``warmup``
        share (in ``[0, 0.9]``) tuning the step size; every ``thin``-th later state is kept
        (at least 20 per chain).
    S : array ``(d, d)``, optional
        The teacher: the first chain then starts at :func:`planted_factor` of it.
    seed : int, Generator or None
        Draws the starts and the chains.

    Returns
    -------
    PosteriorDraws
        Raises :class:`~aimlib.errors.ConvergenceError` if a chain's acceptance is below
        :data:`aimlib.priors.sampled.MIN_ACCEPTANCE` or the chains have not mixed (``RHAT_MAX``,
        ``MIN_ESS``).
    """
    beta = check_beta(beta)
    noise, chains, n_steps, n_warmup, thin = _check_settings(noise, chains, n_steps, warmup, thin)
    X, y, _ = check_xy(X, y)
    n, T, d = X.shape
    rank = v.integer("rank", rank, minimum=1, maximum=d)
    xp, rng, began = get_array_module(X), v.generator(seed), time.perf_counter()
    potential = _potential(X.reshape(n * T, d), y, n, T, beta, n / noise)
    where, runs = f"at noise={noise}, d={d}, n={n}", []
    for c in range(chains):
        start = planted_factor(S, rank) if (c == 0 and S is not None) else rng.standard_normal((d, rank))
        runs.append(_chain(xp.asarray(start, dtype=X.dtype), potential, noise, n_warmup, n_steps - n_warmup, thin,
                           rng))
        refuse(runs[-1][3], f"{where} (chain {c}); try a longer warmup", "posterior sampling of the softmax AIM")
    kept, stats, totals, acc, steps, leapfrogs = zip(*runs)
    rhat, ess = _checked_draws(stats, where)
    return PosteriorDraws(draws=xp.stack(kept), mean=sum(totals) / (chains * (n_steps - n_warmup)),
                          acceptance=tuple(acc), rhat=rhat, ess=ess, step=tuple(steps), n_leapfrog=tuple(leapfrogs),
                          seconds=time.perf_counter() - began)
