r"""The Bayes-optimal error of denoising ``S`` under two noises, by sampling its posterior.

Book, chapter "Untied key and query: algorithms and the exact error",
section "The Bayes-optimal error, sampled".  The prior side
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

:func:`sample_two_noise` averages this along the chain (:func:`aimlib.priors.sampled.hmc_chain`)
and reports its integrated autocorrelation time (:mod:`aimlib.priors.diagnostics`).  A chain
that has not decorrelated from the planted start underestimates ``mmse_s`` by its
autocovariance at lag ``t`` (the book's proposition "The Bayes error from a planted chain"); one started from a
fresh prior draw and measured against the truth (``start="prior"``) starts high and comes
down, so the two starts bracket it (``scripts/untied_mixing.py`` compares them).
:func:`sampled_state_evolution` iterates the two-overlap equations with it;
GAMP's prior step is the posterior mean itself (:class:`aimlib.priors.Sampled`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, module_named
from ..channels.untied_softmax import sector_fisher
from ..errors import ConvergenceError
from ..iteration import Verdict, iterate_map
from ..priors.diagnostics import effective_sample_size, integrated_autocorrelation_time
from ..priors.rectangular import check_sector_pair
from ..priors.sampled import N_BATCHES, first_step, hmc_chain, refuse
from ..priors.wishart import teacher_width
from .model import count_threshold, factor_product, part_errors, parts

__all__ = ["two_noise_problem", "hmc_errors", "TwoNoiseResult", "sample_two_noise", "SampledSE",
           "sampled_state_evolution", "STARTS"]

#: where :func:`sample_two_noise` starts its chain: at the planted factors, or at a fresh prior draw
STARTS = ("planted", "prior")


def two_noise_problem(d: int, rho: float, deltas, seed=None, *, backend: str | None = None):
    r"""Draw ``Q, K`` (``(d, r)``, i.i.d. ``N(0, 1)``, ``r = round(rho d)``) and ``R`` (module docstring).

    Returns ``(Q, K, R)`` on the array module named by ``backend``; ``S = Q K^T/sqrt(r d)``.
    """
    d, rho = v.integer("d", d, minimum=2), v.rho(rho)
    (dA, dB), rng, xp = check_sector_pair(deltas), v.generator(seed), module_named(backend)
    r = teacher_width(d, rho)
    Q, K = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    G1, G2 = rng.standard_normal((2, d, d)) / math.sqrt(d)
    R = factor_product(Q, K) + math.sqrt(dA) * parts(G1)[0] + math.sqrt(dB) * parts(G2)[1]
    return xp.asarray(Q), xp.asarray(K), xp.asarray(R)


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
    tau : tuple
        ``(tau_A, tau_B)``, the integrated autocorrelation times of the two errors after warm-up,
        in trajectories (:func:`~aimlib.priors.diagnostics.integrated_autocorrelation_time`).
    ess : tuple
        ``(ESS_A, ESS_B)``: the kept trajectories over ``tau``, the number of independent draws they
        are worth (:func:`~aimlib.priors.diagnostics.effective_sample_size`).
    start : str
        Where the chain started, one of :data:`STARTS`.
    """

    errors: tuple
    stderr: tuple
    acceptance: float
    step: float
    n_leapfrog: int
    seconds: float
    tau: tuple = (math.nan, math.nan)
    ess: tuple = (math.nan, math.nan)
    start: str = "planted"

    @property
    def mmse(self) -> float:
        """``mmse_A + mmse_B``."""
        return sum(self.errors)


def sample_two_noise(d: int, rho: float, deltas, *, seed=None, n_steps: int = 300, warmup: float = 0.3,
                     start: str = "planted", backend: str | None = None) -> TwoNoiseResult:
    r"""The errors ``(mmse_A, mmse_B)`` of the posterior mean of ``S`` from one instance (module docstring).

    One Generator made from ``seed`` draws the instance (:func:`two_noise_problem`)
    and then the chain (:func:`hmc_errors`), whose step size starts at
    :func:`~aimlib.priors.sampled.first_step`'s.  ``start`` is ``"planted"`` (the
    chain starts at the instance's own ``Q, K``, a posterior draw) or ``"prior"``
    (it starts at ``Q, K`` drawn afresh from the prior by the same Generator, after
    the instance, and is measured against the planted ``S``: the same instance as
    the planted start of the same ``seed``).  The result carries the integrated
    autocorrelation times and effective sample sizes of the two errors after
    warm-up.  Raises :class:`~aimlib.errors.ConvergenceError` if the acceptance
    after warm-up is below :data:`aimlib.priors.sampled.MIN_ACCEPTANCE`.
    """
    deltas, rng = check_sector_pair(deltas), v.generator(seed)
    start = v.choice("start", start, STARTS)
    n_steps = v.integer("n_steps", n_steps, minimum=20)
    n_warm = int(v.in_range("warmup", warmup, 0.0, 0.9) * n_steps)
    if n_steps - n_warm < N_BATCHES:
        raise ValueError(f"n_steps and warmup must keep at least {N_BATCHES} draws after the warm-up "
                         f"(one per batch), got n_steps={n_steps}, warmup={warmup}")
    Q, K, R = two_noise_problem(d, rho, deltas, rng, backend=backend)
    reference = None
    if start == "prior":
        xp = get_array_module(Q)
        reference = factor_product(Q, K)
        Q, K = (xp.asarray(rng.standard_normal(Q.shape)) for _ in range(2))
    (step, n_leapfrog), began = first_step(rho, deltas), time.perf_counter()
    errors, acc, step = hmc_errors(Q, K, R, deltas, reference=reference, n_steps=n_steps, n_warmup=n_warm,
                                   step=step, n_leapfrog=n_leapfrog, seed=rng)
    refuse(acc, f"at deltas={deltas}, d={d}, start={start!r}; try a longer warmup")
    batches = np.array([b.mean(axis=0) for b in np.array_split(errors, N_BATCHES)])
    return TwoNoiseResult(errors=tuple(float(x) for x in errors.mean(axis=0)),
                          stderr=tuple(float(x) for x in batches.std(axis=0) / math.sqrt(len(batches))),
                          acceptance=acc, step=step, n_leapfrog=n_leapfrog, seconds=time.perf_counter() - began,
                          tau=tuple(float(x) for x in integrated_autocorrelation_time(errors)),
                          ess=tuple(float(x) for x in effective_sample_size(errors)), start=start)


@dataclass
class SampledSE:
    """Outcome of :func:`sampled_state_evolution`.

    ``V`` is ``(V_A, V_B)``, the mean of the last five iterates (``(0, 0)`` from
    the counting threshold on, where the equations recover ``S`` exactly);
    ``trace`` holds every iterate ``(V_A, V_B, Delta_A, Delta_B)``, ``Delta_s``
    the noises it was computed at.  ``verdict`` is the stopping rule's last
    :class:`~aimlib.iteration.Verdict` (None above the threshold): ``'converged'``,
    or ``'oscillating'`` when the iterates wander at the sampling floor of this
    ``d`` wider than ``tol`` (its ``amplitude`` is the relative width, ``period``
    0 for an aperiodic wander); ``V`` is then the floor's centre.
    """

    V: tuple
    iterations: int
    trace: np.ndarray
    seconds: float
    verdict: Verdict | None = None

    @property
    def mmse(self) -> float:
        """``V_A + V_B``."""
        return sum(self.V)


def sampled_state_evolution(alpha: float, T: int, rho: float, d: int, *, seed=None, tol: float = 2e-3,
                            max_iter: int = 150, window: int = 10, **sampler) -> SampledSE:
    r"""Iterate ``V_s <- mmse_s(Delta_A, Delta_B)``, ``Delta_s = 1/qhat_s = 1/(alpha F_s)``, from ``V = (1/2, 1/2)``.

    The prior side is :func:`sample_two_noise` on one instance of dimension ``d``,
    the same at every iteration (common random numbers: ``seed`` is reused), so
    the map

    .. math::  V^{t+1}_s = \mathrm{mmse}_s\big(\Delta^t_A, \Delta^t_B\big), \qquad
        \Delta^t_s = 1/\big(\alpha F_s(V^t_A, V^t_B; T)\big),

    (``F_s``: :func:`~aimlib.channels.untied_softmax.sector_fisher`; the one conjugate of
    :mod:`aimlib.channels.base`) is smooth in ``V`` down to a floor set by ``d`` (the chain's accept/reject
    steps), where the iterates cycle or wander.  :func:`~aimlib.iteration.iterate_map`
    runs it on ``y = log V`` with ``rule='window'`` and bound ``tol``: its
    distance ``||y_t - y_{t-k}||_inf = max_s |log(V^t_s/V^{t-k}_s)|`` is the
    relative change of the worse part, so within ``tol`` each part, and hence
    ``V_A + V_B``, is within ``tol`` of itself.  It stops when, over ``window``
    iterates,

    * the estimated distance to the fixed point has stayed within ``tol``, or the
      iterates cycle or wander at a floor narrower than ``tol``: converged;
    * they cycle or wander at a floor wider than ``tol`` (``'oscillating'``): the
      floor of this ``d`` is wider than ``tol``, and more iterations would not narrow it.

    Either way ``V`` is the mean of the last five iterates, the verdict is
    returned with it, and ``tol`` must hold for the *iterates*, not only for the
    five-iterate means (the rule of old, which compared the means of
    ``V_A + V_B`` over the last five and the five before).  Raises
    :class:`~aimlib.errors.ConvergenceError` after ``max_iter`` iterations
    without a verdict (one takes ``window + 1`` iterations at least, unless an
    iterate repeats exactly), or at a non-finite iterate.  ``sampler`` goes to
    :func:`sample_two_noise`.
    """
    alpha, T, rho = v.positive("alpha", alpha), v.integer("T", T, minimum=2), v.rho(rho)
    tol, max_iter = v.positive("tol", tol), v.integer("max_iter", max_iter, minimum=10)
    if alpha >= count_threshold(rho, T):
        return SampledSE(V=(0.0, 0.0), iterations=0, trace=np.zeros((0, 4)), seconds=0.0)
    if not isinstance(seed, (int, np.integer)):          # one instance for every iteration
        seed = int(v.generator(seed).integers(2**63))
    rows, began = [], time.perf_counter()

    def log_map(y):
        """``log V -> log mmse(1/(alpha F(V)))``, each iterate and its noises appended to ``rows``."""
        # V itself, not exp(log V): that may miss V's last bit, which the chain can turn into another draw
        last = rows[-1][:2] if rows else (0.5, 0.5)
        V = last if np.array_equal(y, np.log(last)) else np.exp(y)
        deltas = tuple(1.0 / (alpha * F) for F in sector_fisher(*V, T))
        rows.append((*sample_two_noise(d, rho, deltas, seed=seed, **sampler).errors, *deltas))
        return np.log(rows[-1][:2])

    with np.errstate(divide="ignore"):                    # a zero error is not finite in log: 'diverged'
        run = iterate_map(log_map, np.log([0.5, 0.5]), tol, rule="window", max_iter=max_iter, window=window)
    trace = np.array(rows)
    if run.verdict.state not in ("converged", "oscillating"):
        why = f"no fixed point within max_iter={max_iter} iterations" if run.verdict.state == "running" \
            else f"a non-finite iterate at iteration {run.iterations}"
        raise ConvergenceError(f"sampled untied SE: {why} at alpha={alpha:g}, T={T}, d={d} "
                               f"(last V = {trace[-1, :2].sum():.4g})")
    VA, VB = trace[-5:, :2].mean(axis=0)
    return SampledSE(V=(float(VA), float(VB)), iterations=run.iterations, trace=trace,
                     seconds=time.perf_counter() - began, verdict=run.verdict)
