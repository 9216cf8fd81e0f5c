r"""GAMP for untied key and query: the noiseless softmax channel with two sectors.

Book, chapter "Untied key and query: algorithms and the exact error",
section "GAMP for untied key and query".  One iteration
is the square channel step (:func:`aimlib.amp.square_step.square_channel_step`:
the channel :class:`aimlib.channels.UntiedSoftmax` sees each part of ``S`` through
its own noise ``Delta_s``) followed by the prior's denoiser,
``(S_hat, V, V_ons) = prior.denoise(R, (Delta_A, Delta_B), noise=...)``:

* Gaussian prior (``rho = inf``, :class:`aimlib.priors.Gaussian` with
  ``symmetric=False``): the exact posterior mean, shrinking each part by
  ``1/(1 + Delta_s)``; GAMP is Bayes-optimal and follows :func:`~aimlib.untied.solve_sectors`;
* ``S = Q K^T/sqrt(r d)``, ``denoiser='equalised'`` or ``'tuned'``
  (:class:`aimlib.priors.Rectangular`): the rectangular RIE after equalising the two
  noises (its state evolution is the upper end of :func:`~aimlib.untied.bracket_untied`),
  or of ``R`` itself at the noise that minimises Stein's estimate of its error;
* ``denoiser='sampled'`` (:class:`aimlib.priors.Sampled`): the posterior mean under
  the two noises, by Hamiltonian Monte Carlo: Bayes-optimal up to the sampling,
  so its state evolution is the exact two-overlap one
  (:func:`~aimlib.untied.sampled_state_evolution`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..amp.gamp import gamp_rie
from ..backend import module_named, to_host
from ..channels.untied_softmax import UntiedSoftmax
from ..priors import Rectangular, Sampled, make_prior
from ..model import n_samples
from .model import part_errors, sample_teacher_untied, untied_softmax

__all__ = ["DENOISERS", "untied_prior", "UntiedGAMPResult", "untied_gamp", "run_untied_gamp"]

#: the run stops with ``reason='perfect'`` once the predicted error ``V_A + V_B`` falls below this
#: (GAMP-RIE's ``m_floor``, whose default is ``sqrt(eps)``; an error floor, unlike the prior step's noise
#: floor ``aimlib.amp.steps.DELTA_MIN``; the committed untied runs stopped by it)
V_FLOOR = 1e-10
#: the denoisers of the rank-``r`` prior, by name
DENOISERS = ("equalised", "tuned", "sampled")


def untied_prior(rho: float, denoiser: str = "equalised", seed=None):
    """The square prior of width ratio ``rho`` with ``denoiser`` (module docstring), its draws from ``seed``.

    ``rho = inf`` gives the square Gaussian prior (``denoiser`` is then not used:
    its posterior mean is exact), :func:`aimlib.priors.make_prior` with the family
    ``'rectangular'``.
    """
    v.choice("denoiser", denoiser, DENOISERS)
    prior = make_prior(v.rho(rho, allow_inf=True), "rectangular")
    if not isinstance(prior, Rectangular):
        return prior
    return Sampled(prior.rho, seed=seed) if denoiser == "sampled" else Rectangular(prior.rho, denoiser, seed)


@dataclass
class UntiedGAMPResult:
    """Outcome of :func:`untied_gamp`.

    Attributes
    ----------
    S_hat : numpy.ndarray of shape (d, d)
        Final estimate (not symmetric).
    V : tuple
        The algorithm's predicted errors ``(V_A, V_B)`` of the two parts.
    errors : tuple or None
        The actual errors ``((1/d)||A_hat - A||^2, (1/d)||B_hat - B||^2)`` if ``S`` was given.
    deltas : tuple
        The last noise variances ``(Delta_A, Delta_B)`` of the two parts of ``R``.
    iterations, converged, reason, seconds
        ``reason`` is ``'tol'``, ``'perfect'`` (``V_A + V_B < V_FLOOR``) or ``'max_iter'``.
    trace : dict of lists or None
        GAMP-RIE's per-iteration record (option ``trace``).
    """

    S_hat: np.ndarray
    V: tuple
    errors: tuple | None
    deltas: tuple
    iterations: int
    converged: bool
    reason: str
    seconds: float
    trace: dict | None

    @property
    def mmse(self):
        """The actual estimation error ``(1/d)||S_hat - S||_F^2`` (None without ``S``)."""
        return None if self.errors is None else sum(self.errors)


def untied_gamp(X, y, rho: float, *, beta: float = 1.0, S=None, denoiser: str = "equalised", seed=None,
                damping: float = 0.5, max_iter: int = 300, tol: float = 1e-7, on_max_iter: str = "raise",
                memory_mb: float = 64.0, trace: bool = False) -> UntiedGAMPResult:
    r"""GAMP-RIE (:func:`aimlib.amp.gamp_rie`) on noiseless untied softmax data ``y = row_softmax(beta h(S))``.

    The channel is :class:`~aimlib.channels.UntiedSoftmax`, the prior
    :func:`untied_prior` (module docstring); the loop, its damping and its final
    check are GAMP-RIE's, with the stopping rule ``stop='prediction'``: stop when
    ``|V_new - V| < tol V`` (``V = V_A + V_B``), or as ``'perfect'`` once ``V < V_FLOOR``.

    Parameters
    ----------
    X : array of shape (n, T, d)
        Tokens (NumPy or CuPy; the run stays on that device).
    y : array of shape (n, T, T)
        Softmax outputs.
    rho : float
        Prior: ``inf`` for i.i.d. ``N(0, 1/d)`` entries (exact posterior mean per
        part), else ``S = Q K^T/sqrt(r d)``, ``r = rho d`` (:func:`untied_prior`).
    beta : float
        Inverse temperature of the softmax.
    S : array of shape (d, d), optional
        The teacher: the errors of the two parts are reported and the final state checked.
    denoiser : {'equalised', 'tuned', 'sampled'}
        Prior step for finite ``rho`` (module docstring); not used when ``rho = inf``.
    seed : int or numpy.random.Generator, optional
        For the equalising noise of the rectangular prior step, or the sampler's chain.
    damping : float in [0, 1)
        ``x <- (1 - damping) new + damping old`` for ``g`` (from the second
        iteration on), ``S_hat`` and the predicted errors.
    max_iter, tol, on_max_iter, memory_mb, trace
        As in :func:`aimlib.amp.gamp_rie`.
    """
    channel = UntiedSoftmax(beta)
    channel.logits(v.finite_array("y", y, ndim=3))          # y must hold softmax outputs
    prior = untied_prior(rho, denoiser, v.generator(seed))
    res = gamp_rie(X, y, channel, prior, S=S, damping=damping, max_iter=max_iter, tol=tol, m_floor=V_FLOOR,
                   resolution=0.0, stop="prediction", on_max_iter=on_max_iter, memory_mb=memory_mb, trace=trace)
    return UntiedGAMPResult(S_hat=res.S_hat, V=res.V, deltas=res.delta, iterations=res.iterations,
                            errors=None if S is None else part_errors(res.S_hat, to_host(S)),
                            converged=res.converged, reason=res.reason, seconds=res.seconds, trace=res.trace)


def run_untied_gamp(alpha: float, T: int, d: int, rho: float, *, seed=None, beta: float = 1.0,
                    backend: str | None = None, **options) -> UntiedGAMPResult:
    r"""Sample a teacher (:func:`~aimlib.untied.sample_teacher_untied`), ``n = round(alpha d^2)``
    samples of ``T`` Gaussian tokens and their softmax outputs, and run :func:`untied_gamp`.

    One Generator made from ``seed`` draws the teacher, the tokens and then the
    prior step's randomness (the equalising noise, or the sampler's chain), in that
    order; ``backend`` (``'numpy'``, ``'cupy'`` or the default) holds the tokens.
    ``options`` go to :func:`untied_gamp`.
    """
    alpha = v.positive("alpha", alpha)
    T, d = v.integer("T", T, minimum=2), v.integer("d", d, minimum=2)
    rng = v.generator(seed)
    S = sample_teacher_untied(d, rho, rng)
    X = rng.standard_normal((n_samples(alpha, d), T, d))
    xp = module_named(backend)
    X, S_dev = xp.asarray(X), xp.asarray(S)
    return untied_gamp(X, untied_softmax(X, S_dev, beta), rho, beta=beta, S=S_dev, seed=rng, **options)
