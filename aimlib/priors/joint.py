r"""The Bayes-optimal joint denoiser of two layers seen through correlated noises, by sampling.

Book, chapter "Correlated layers", section "A joint denoiser".  Two independent teachers
are observed as

.. math::  R_\ell = S_\ell + \sqrt{\Delta_\ell}\,Z_\ell, \qquad \ell = 1, 2,

``Z_1, Z_2`` GOE matrices whose entries have correlation ``kappa``
(:func:`~aimlib.priors.correlated.correlated_goe`).  Each teacher is made of a factor
``W_l`` with i.i.d. ``N(0, 1)`` entries: a Wishart teacher ``S = W W^T/sqrt(r d)``
(``W`` of shape ``(d, r)``, ``r = round(rho d)``), or, at ``rho = inf``, a Gaussian one
``S = (W + W^T)/sqrt(2d)`` (``W`` of shape ``(d, d)``: ``S`` is a GOE matrix).  With
``N = [[Delta_1, kappa s], [kappa s, Delta_2]]``, ``s = sqrt(Delta_1 Delta_2)``, the
noises' covariance and ``P = N^{-1}``, the posterior on the factors is (the GOE density is
``exp(-(d/4) Tr Z^2)``)

.. math::  -\log p(W_1, W_2\mid R) = \tfrac12\sum_\ell\|W_\ell\|^2
           + \tfrac d4\sum_{\ell\ell'}P_{\ell\ell'}\,\mathrm{Tr}(E_\ell E_{\ell'}) + {\rm const},
           \qquad E_\ell = S_\ell - R_\ell .

Its gradient in ``S_l`` is ``G_l = (d/2) sum_l' P_ll' E_l'``, and in the factors
``W_l + (2/sqrt(r d)) G_l W_l`` (Wishart) or ``W_l + sqrt(2/d) G_l`` (Gaussian).
Hamiltonian Monte Carlo (:func:`~aimlib.priors.hmc.hmc`) samples it.  By the Nishimori
identity the planted factors are a posterior draw, so a chain started there is in
equilibrium from its first step, and for a draw ``S_t`` that has decorrelated from the start

.. math::  \mathrm{mmse}_\ell = \tfrac1{2d}\,\mathbb E\|S_{\ell,t} - S_\ell\|^2, \qquad
           e_{12} = \tfrac1{2d}\,\mathbb E\,\mathrm{Tr}\big((S_{1,t} - S_1)(S_{2,t} - S_2)\big),

the errors and the residual cross-covariance of the joint posterior mean.  A chain that has
not decorrelated from the planted start underestimates them; :func:`sample_joint` refuses a
chain whose effective sample size is below ``MIN_ESS``.  For Gaussian teachers the
posterior mean is linear, and its error matrix at dimension ``d`` is exactly
``(1 + 1/d) (I + N^{-1})^{-1}`` (the joint matrix of
:func:`~aimlib.priors.correlated.gaussian_pair`, ``1/d`` from the diagonal's double
variance): the check of the sampler.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import module_named
from ..errors import ConvergenceError
from .correlated import check_kappa, correlated_goe
from .diagnostics import effective_sample_size, integrated_autocorrelation_time
from .hmc import TRAJECTORY, hmc
from .sampled import N_BATCHES, refuse
from .wishart import teacher_width

__all__ = ["JointErrors", "joint_problem", "sample_joint", "joint_potential", "joint_first_step", "layer_pair",
           "MIN_ESS"]

#: a chain whose three error series are worth fewer independent draws than this is refused
MIN_ESS = 10.0


def layer_pair(name: str, values, check) -> tuple:
    """Two checked values, one per layer (a single value serves both)."""
    values = tuple(np.atleast_1d(values).tolist()) * (2 if np.ndim(values) == 0 else 1)
    if len(values) != 2:
        raise ValueError(f"{name} must hold one value per layer (two), got {len(values)}")
    return tuple(check(f"{name}[{i}]", x) for i, x in enumerate(values))


def _precision(deltas, kappa) -> np.ndarray:
    """``P = N^{-1}``, ``N`` the noises' ``2 x 2`` covariance (module docstring)."""
    s = kappa * math.sqrt(deltas[0] * deltas[1])
    return np.linalg.inv(np.array([[deltas[0], s], [s, deltas[1]]]))


def _teacher(W, rho: float):
    """``S`` from its factor: ``W W^T/sqrt(r d)``, or ``(W + W^T)/sqrt(2d)`` at ``rho = inf``."""
    if math.isinf(rho):
        return (W + W.T) / math.sqrt(2 * W.shape[0])
    return (W @ W.T) / math.sqrt(W.shape[0] * W.shape[1])


def _factor_gradient(W, G, rho: float):
    """``d Tr(G S)/dW`` for a symmetric ``G``, ``S = _teacher(W, rho)``."""
    if math.isinf(rho):
        return math.sqrt(2.0 / W.shape[0]) * G
    return (2.0 / math.sqrt(W.shape[0] * W.shape[1])) * (G @ W)


def joint_potential(W, R, P, rhos):
    """``(U, gradients, (S_1, S_2))``: minus the log posterior of the module docstring, its gradient."""
    d = R[0].shape[0]
    S = [_teacher(w, r) for w, r in zip(W, rhos)]
    E = [s - x for s, x in zip(S, R)]
    G = [0.5 * d * (P[l, 0] * E[0] + P[l, 1] * E[1]) for l in range(2)]
    U = 0.5 * sum(float((w * w).sum()) for w in W) + 0.5 * sum(float((g * e).sum()) for g, e in zip(G, E))
    return U, tuple(w + _factor_gradient(w, g, r) for w, g, r in zip(W, G, rhos)), tuple(S)


def joint_problem(d: int, rho, deltas, kappa, seed=None, *, backend: str | None = None):
    """Draw the factors ``(W_1, W_2)``, the teachers ``(S_1, S_2)`` and ``(R_1, R_2)`` (module docstring).

    ``rho`` is each layer's width ratio (one value serves both; ``inf``: Gaussian teachers),
    ``deltas`` the two noise variances, ``kappa`` their correlation, in ``(-1, 1)``.
    Everything is drawn on the host by one Generator and returned on ``backend``'s module.
    """
    return _draw(*_checked(d, rho, deltas), check_kappa(kappa), v.generator(seed), backend)


def _checked(d: int, rho, deltas) -> tuple:
    """``(d, rhos, deltas)`` validated: ``d >= 2``, a width ratio (or ``inf``) and a noise ``> 0`` per layer."""
    return (v.integer("d", d, minimum=2), layer_pair("rho", rho, lambda name, x: v.rho(x, allow_inf=True)),
            layer_pair("deltas", deltas, v.positive))


def _draw(d: int, rhos, deltas, kappa: float, rng, backend):
    """:func:`joint_problem` at validated arguments."""
    xp = module_named(backend)
    W = [rng.standard_normal((d, d if math.isinf(r) else teacher_width(d, r))) for r in rhos]
    S = [_teacher(w, r) for w, r in zip(W, rhos)]
    Z = correlated_goe(d, kappa, rng)
    R = [s + math.sqrt(x) * z for s, x, z in zip(S, deltas, Z)]
    return tuple(tuple(xp.asarray(a) for a in group) for group in (W, S, R))


@dataclass(frozen=True)
class JointErrors:
    """Outcome of :func:`sample_joint`: the joint posterior mean's errors on one instance.

    Attributes
    ----------
    mmse : tuple
        ``(mmse_1, mmse_2)``, the chain averages of the module docstring.
    e_12 : float
        The residual cross-covariance of the joint posterior mean.
    stderr : tuple
        Standard errors of ``(mmse_1, mmse_2, e_12)`` from ``N_BATCHES`` batch means (the
        chain's spread; the spread over instances, of order ``1/d``, is larger).
    tau, ess : tuple
        Integrated autocorrelation times (in trajectories) and effective sample sizes of
        the three series after warm-up (:mod:`aimlib.priors.diagnostics`).
    acceptance, step, n_leapfrog, seconds
        Mean acceptance after warm-up, the tuned step, leapfrog steps per trajectory, run time.
    """

    mmse: tuple
    e_12: float
    stderr: tuple
    tau: tuple
    ess: tuple
    acceptance: float
    step: float
    n_leapfrog: int
    seconds: float


def joint_first_step(rhos, P) -> tuple:
    """``(step, n_leapfrog)``: ``0.5/sqrt(lambda)``, ``lambda = 1 + c max eig(P)`` a bound on the potential's
    curvature near the truth (``c = (1 + sqrt(rho))^2/rho`` for a Wishart factor, 1 for a Gaussian one),
    and a trajectory of length ``TRAJECTORY``."""
    c = max(1.0 if math.isinf(r) else (1 + math.sqrt(r)) ** 2 / r for r in rhos)
    step = 0.5 / math.sqrt(1 + c * float(np.linalg.eigvalsh(P).max()))
    return step, math.ceil(TRAJECTORY / step)


def sample_joint(d: int, rho, deltas, kappa, *, seed=None, n_steps: int = 400, warmup: float = 0.3,
                 backend: str | None = None) -> JointErrors:
    r"""The errors and cross-covariance of the joint posterior mean on one instance (module docstring).

    One Generator made from ``seed`` draws the instance (:func:`joint_problem`) and then
    the chain, started at the planted factors; ``n_steps`` HMC trajectories, the first
    ``warmup`` share of them tuning the step size.  Raises
    :class:`~aimlib.errors.ConvergenceError` if the acceptance after warm-up is below
    :data:`aimlib.priors.sampled.MIN_ACCEPTANCE`, or if any of the three series is worth
    fewer than ``MIN_ESS`` independent draws (the chain has not decorrelated from its
    planted start, and its averages would be too low).
    """
    kappa, rng = check_kappa(kappa), v.generator(seed)
    n_steps = v.integer("n_steps", n_steps, minimum=20)
    n_warm = int(v.in_range("warmup", warmup, 0.0, 0.9) * n_steps)
    if n_steps - n_warm < 10 * N_BATCHES:
        raise ValueError(f"n_steps and warmup must keep at least {10 * N_BATCHES} draws after the warm-up, "
                         f"got n_steps={n_steps}, warmup={warmup}")
    d, rhos, deltas = _checked(d, rho, deltas)
    W, S, R = _draw(d, rhos, deltas, kappa, rng, backend)
    P, errors = _precision(deltas, kappa), []

    def visit(S_t):
        E = [a - b for a, b in zip(S_t, S)]
        errors.append([float((x * y).sum()) / (2 * d) for x, y in ((E[0], E[0]), (E[1], E[1]), (E[0], E[1]))])

    (step, n_leapfrog), began = joint_first_step(rhos, P), time.perf_counter()
    _, acc, step = hmc(W, lambda X: joint_potential(X, R, P, rhos), visit, n_steps=n_steps, n_warmup=n_warm,
                       step=step, n_leapfrog=n_leapfrog, rng=rng)
    where = f"at deltas={deltas}, kappa={kappa}, d={d}"
    refuse(acc, f"{where}; try a longer warmup", "joint posterior sampling of two layers")
    errors = np.array(errors)
    ess = effective_sample_size(errors)
    if not np.all(ess >= MIN_ESS):
        raise ConvergenceError(f"joint posterior sampling of two layers has not mixed {where}: effective sample "
                               f"sizes {np.round(ess, 1).tolist()} of (mmse_1, mmse_2, e_12), at least {MIN_ESS} "
                               f"needed; run more steps (n_steps={n_steps})")
    batches = np.array([b.mean(axis=0) for b in np.array_split(errors, N_BATCHES)])
    mean = errors.mean(axis=0)
    return JointErrors(mmse=(float(mean[0]), float(mean[1])), e_12=float(mean[2]),
                       stderr=tuple(float(x) for x in batches.std(axis=0, ddof=1) / math.sqrt(N_BATCHES)),
                       tau=tuple(float(x) for x in integrated_autocorrelation_time(errors)),
                       ess=tuple(float(x) for x in ess), acceptance=acc, step=step, n_leapfrog=n_leapfrog,
                       seconds=time.perf_counter() - began)
