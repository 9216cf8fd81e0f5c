r"""The coupled Bayes-optimal state evolution of two hardmax layers with a matrix overlap.

Book, chapter "Correlated layers", section "The coupled Bayes state evolution".  For two
layers whose teachers share a known part (Wishart: ``S_l = sqrt(rho_l) I + C_l``) the
replica-symmetric state evolution carries the ``2 x 2`` overlap of the centred estimates,
``(q_1, q_2, q_12)``, and its conjugate ``Q_hat = alpha F_hat``, a ``2 x 2`` matrix:

1. channel side: ``F_hat(q, q_12)``, the output moments of the Bayes output function of the
   law with the cross overlap (:func:`~aimlib.channels.deep_bayes_cross.bayes_moment_matrix`,
   to all orders in the residuals' cross-covariance ``V_12 = -q_12``
   (:func:`~aimlib.channels.deep_bayes_cross.exact_log_z`); at ``q_12 = 0`` the tabulated
   :meth:`~aimlib.channels.DeepAttention.moment_matrix` exactly);
2. the layers' effective observations ``R = S + N^{1/2} xi`` with ``N = (alpha F_hat)^{-1}``:
   noises ``Delta_l = N_ll`` of correlation ``kappa = -F_12/sqrt(F_11 F_22)``
   (:func:`~aimlib.priors.correlated.layer_noises`);
3. prior side: the error matrix of the *joint* posterior mean of the pair at those noises,
   ``(mmse_1, mmse_2, e_12)`` (a ``prior_side`` callable: :func:`sampled_prior_side`, the
   Hamiltonian Monte Carlo of :func:`~aimlib.priors.joint.sample_joint` averaged over instances;
   :func:`gaussian_prior_side`, the closed form ``(1 + 1/d)(I + N^{-1})^{-1}`` of Gaussian teachers);
   then ``q_l = Q0_l - mmse_l`` and, by the Nishimori identity, ``q_12 = -e_12``.

Only the layers' noises enter the prior side, and only ``(q, q_12)`` the channel side, so the map
``x = (mmse_1, mmse_2, e_12) -> step(x)`` closes.  With ``q_12`` forced to zero and each layer
denoised alone it is the separable state evolution of GAMP-RIE
(:meth:`~aimlib.channels.DeepAttention.separable_fisher`).  The iteration is damped,
``x <- damping x + (1 - damping) step(x)`` (:func:`~aimlib.iteration.iterate_map`), until a step moves
every component by less than ``tol/4``; then it is taken ``further`` iterations on, each of which must
stay within ``tol`` of the converged iterate (:func:`~aimlib.iteration.taken_further`), and the fixed point reported is
the mean of the converged iterate and those further ones.  A sampled prior side draws the same
instances at every step (common random numbers); what remains of its Monte Carlo in the fixed point
is measured by repeats with independent instances.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..channels.deep_hardmax import DeepAttention
from ..channels.deep_bayes_cross import bayes_moment_matrix, bayes_moments_direct
from ..errors import ConvergenceError
from ..priors.correlated import gaussian_pair, layer_noises
from ..priors.joint import sample_joint
from ..iteration import iterate_map, taken_further
from .fixed_point import components

__all__ = ["PriorStep", "BayesPairPoint", "sampled_prior_side", "gaussian_prior_side", "bayes_pair_step",
           "bayes_pair_fixed_point"]


@dataclass(frozen=True)
class PriorStep:
    """What a prior side returns: ``x = (mmse_1, mmse_2, e_12)`` of the joint posterior mean at the noises
    it was given, and their standard errors (zeros where exact)."""

    x: np.ndarray
    stderr: np.ndarray


@dataclass(frozen=True)
class BayesPairPoint:
    """A fixed point of :func:`bayes_pair_fixed_point`.

    Attributes
    ----------
    alpha : float
    mmse, q : pairs
        The layers' Bayes errors and overlaps.
    e_12, q_12 : float
        The joint posterior mean's residual cross-covariance and the centred cross overlap, ``-e_12``.
    stderr : (3,) array
        The prior side's standard errors of ``(mmse_1, mmse_2, e_12)`` at the last step.
    spread : float
        The largest distance of the ``further`` iterates from the converged one.
    deltas, kappa : pair, float
        The layers' noises and their correlation at the fixed point.
    F : (2, 2) array
        The channel side ``F_hat`` there.
    iterations : int
        Iterations to convergence, not counting the ``further`` ones.
    trace : (iterations + further + 1, 3) array
        ``(mmse_1, mmse_2, e_12)`` at every iterate.
    """

    alpha: float
    mmse: tuple
    q: tuple
    e_12: float
    q_12: float
    stderr: np.ndarray
    spread: float
    deltas: tuple
    kappa: float
    F: np.ndarray
    iterations: int
    trace: np.ndarray


def sampled_prior_side(d: int, rho, seeds, *, n_steps: int = 400):
    r"""The joint denoiser's errors by :func:`~aimlib.priors.joint.sample_joint`, averaged over the instances
    ``seeds`` (the same at every call): a function ``(deltas, kappa) -> PriorStep`` whose standard errors
    are those of the mean over the instances (at least two).  ``rho`` one width ratio per layer or one for
    both (``inf``: Gaussian teachers)."""
    d = v.integer("d", d, minimum=2)
    seeds = [v.integer(f"seeds[{i}]", s, minimum=0) for i, s in enumerate(seeds)]
    if len(seeds) < 2:
        raise ValueError(f"seeds must name at least two instances (their spread is the error bar), got {seeds}")
    n_steps = v.integer("n_steps", n_steps, minimum=20)

    def side(deltas, kappa) -> PriorStep:
        runs = [sample_joint(d, rho, deltas, kappa, seed=s, n_steps=n_steps) for s in seeds]
        x = np.array([[*r.mmse, r.e_12] for r in runs])
        return PriorStep(x.mean(axis=0), x.std(axis=0, ddof=1) / math.sqrt(len(seeds)))
    return side


def gaussian_prior_side(d: float = math.inf):
    """Two unit-variance GOE teachers: the joint posterior mean's error matrix ``(1 + 1/d)(I + N^{-1})^{-1}``
    (:func:`~aimlib.priors.correlated.gaussian_pair`; ``1/d`` the diagonal's double variance at dimension
    ``d``, nothing at ``d = inf``), exact: a function ``(deltas, kappa) -> PriorStep``."""
    factor = 1.0 + 1.0 / v.positive("d", d, allow_inf=True)

    def side(deltas, kappa) -> PriorStep:
        _, joint = gaussian_pair(deltas, kappa)
        return PriorStep(factor * joint[[0, 1, 0], [0, 1, 1]], np.zeros(3))
    return side


def _check_state(x, V0) -> np.ndarray:
    """``(mmse_1, mmse_2, e_12)`` with each error in ``(0, V0_l]`` and ``e_12^2 < mmse_1 mmse_2``."""
    x = np.array([v.real(f"x[{i}]", a) for i, a in enumerate(x)], dtype=float)
    if x.shape != (3,):
        raise ValueError(f"the state must be (mmse_1, mmse_2, e_12), got {len(x)} values")
    for i in range(2):
        if not 0.0 < x[i] <= V0[i] * (1 + 1e-9):
            raise ValueError(f"mmse_{i + 1} must lie in (0, {V0[i]:g}], the prior's error before any data, "
                             f"got {x[i]:g}")
    if x[2] ** 2 >= x[0] * x[1]:
        raise ValueError(f"e_12 = {x[2]:g} makes the error matrix not positive definite (e_12^2 must stay below "
                         f"mmse_1 mmse_2 = {x[0] * x[1]:g})")
    return x


def bayes_pair_step(alpha: float, channel, priors, x, prior_side, *, direct_zero=None,
                    separable: bool = False) -> tuple:
    r"""One step of the coupled state evolution at ``x = (mmse_1, mmse_2, e_12)`` (module docstring).

    Returns ``(PriorStep, F_hat, (Delta_1, Delta_2, kappa))``.  ``direct_zero`` as in
    :func:`~aimlib.channels.deep_bayes_cross.bayes_moment_matrix`.  With ``separable`` the cross
    overlap is left out on both sides: the channel side at ``q_12 = 0``, each layer denoised alone
    (the prior side called at ``kappa = 0``) and ``e_12 = 0``: GAMP-RIE's separable state evolution
    with the same prior side, the reference that cancels the prior side's finite-``d`` bias.
    Raises ``ValueError`` naming ``F`` if the channel side is singular (``kappa = +-1``) and
    naming ``q12`` if the state's cross overlap does not leave the law a covariance.
    """
    alpha = v.positive("alpha", alpha)
    _checked_channel(channel, priors)
    Q0, V0 = components(priors)
    x = _check_state(x, V0)
    shared = tuple(p.mean_square() for p in priors)
    q = tuple(float(a) for a in Q0 - x[:2])
    F = bayes_moment_matrix(channel, q, tuple(Q0), shared, 0.0 if separable else -float(x[2]),
                            direct_zero=direct_zero)
    noises = layer_noises(F, alpha)
    if not separable:
        return prior_side(noises[:2], noises[2]), F, noises
    out = prior_side(noises[:2], 0.0)
    return PriorStep(np.array([out.x[0], out.x[1], 0.0]), np.array([out.stderr[0], out.stderr[1], 0.0])), F, noises


def _checked_channel(channel, priors):
    """Two hardmax attention layers (:class:`~aimlib.channels.DeepAttention`) and one prior per layer."""
    if not isinstance(channel, DeepAttention) or channel.n_indices != 2 or len(priors) != 2:
        raise ValueError(f"the coupled Bayes state evolution needs two attention layers (DeepAttention, layers=2) "
                         f"with one prior each, got {channel!r} and {len(priors)} priors")


def bayes_pair_fixed_point(alpha: float, channel, priors, init, prior_side, *, damping: float = 0.3,
                           tol: float = 1e-3, max_iter: int = 30, further: int = 2, separable: bool = False,
                           progress=None) -> BayesPairPoint:
    r"""Iterate ``(mmse_1, mmse_2, e_12)`` to a fixed point of the coupled Bayes state evolution.

    Parameters
    ----------
    alpha : float
        Sample complexity, ``> 0``.
    channel : DeepAttention
        Two hardmax layers (``T = 2``).
    priors : pair of Priors
        The teachers' priors (``components`` gives ``Q0``; ``mean_square`` the known parts).
    init : triple
        The start, e.g. the separable fixed point's errors with ``e_12 = 0``.
    prior_side : callable
        ``(deltas, kappa) -> PriorStep`` (:func:`sampled_prior_side`, :func:`gaussian_prior_side`).
    damping : float
        Weight of the old iterate, in ``[0, 0.95]``.
    tol : float
        How far the ``further`` iterates may move from the converged one (a step of ``tol/4`` ends the
        iteration); with a sampled prior side set it above the map's Monte Carlo graininess.
    max_iter, further : int
    separable : bool
        Leave the cross overlap out on both sides (:func:`bayes_pair_step`).
    progress : callable, optional
        Called as ``progress(t, x)`` after every iterate.

    Raises
    ------
    ConvergenceError
        No step below ``tol/4`` within ``max_iter``, or a further iterate more than ``tol`` away.
    """
    alpha = v.positive("alpha", alpha)
    _checked_channel(channel, priors)
    Q0, V0 = components(priors)
    damping = v.in_range("damping", damping, 0.0, 0.95)
    tol = v.positive("tol", tol)
    max_iter, further = v.integer("max_iter", max_iter, minimum=1), v.integer("further", further, minimum=1)
    x = _check_state(init, V0)
    shared = tuple(p.mean_square() for p in priors)
    zero_cache, last = {}, {}

    def evaluate(x):
        """The undamped map at ``x``; the step's noises and moments are kept for the result."""
        q = tuple(float(a) for a in Q0 - x[:2])
        if q not in zero_cache and not separable:
            zero_cache.clear()
            zero_cache[q] = bayes_moments_direct(channel.c, q, tuple(Q0), shared, 0.0)
        out, F, noises = bayes_pair_step(alpha, channel, priors, x, prior_side, direct_zero=zero_cache.get(q),
                                         separable=separable)
        last["step"] = (out, F, noises)
        return out.x

    run = iterate_map(evaluate, x, tol / 4, damping=damping, max_iter=max_iter, callback=progress)
    if not run.verdict.converged:
        raise ConvergenceError(f"the coupled Bayes state evolution at alpha={alpha:g} did not converge within "
                               f"max_iter={max_iter} ({run.verdict.state}, last step {run.verdict.distance:.3g} > "
                               f"tol/4={tol / 4:g}); raise max_iter, damping or tol")
    kept = taken_further(lambda x: damping * x + (1 - damping) * evaluate(x), run.x, further, tol,
                         f"the coupled Bayes state evolution at alpha={alpha:g}", callback=progress,
                         start=run.iterations)
    out, F, noises = last["step"]
    trace, converged = np.vstack([run.trace, kept[1:]]), run.iterations
    point = np.mean(kept, axis=0)
    return BayesPairPoint(alpha=alpha, mmse=(float(point[0]), float(point[1])),
                          q=tuple(float(a) for a in Q0 - point[:2]), e_12=float(point[2]), q_12=-float(point[2]),
                          stderr=out.stderr, spread=float(max(np.max(np.abs(k - kept[0])) for k in kept)),
                          deltas=noises[:2], kappa=noises[2], F=F, iterations=converged, trace=trace)
