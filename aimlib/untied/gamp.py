r"""GAMP for untied key and query: the noiseless softmax channel with two sectors.

Book, chapter "Beyond", section "GAMP for untied key and query".  Each sample
gives ``T^2`` indices ``z_ab = <G_ab, S>``, ``G_ab = (x_a x_b^T - delta_ab I)/sqrt(d)``,
and the softmax reveals them up to one shift per row.  With ``V_A, V_B`` the
errors of the symmetric and antisymmetric parts of the estimate, the indices
fluctuate around ``omega`` with covariance ``C = 2 V_A Pi_sym + 2 V_B Pi_anti``
(on ``R^{T x T}``), and the posterior of ``z`` on the affine set
``z0 + span(shifts)`` (``z0 = log(y)/beta``) gives

.. math::

    g = \Gamma (z_0 - \omega), \qquad
    \Gamma = C^{-1} - C^{-1}U(U^\top C^{-1}U)^{-1}U^\top C^{-1} = -\partial_\omega g ,

``U`` the ``T^2 x T`` basis of row shifts (``Gamma U = 0``, so the choice of
``z0`` within its row class does not matter).  The backward step sees each part
of ``S`` through its own noise, ``Delta_s = 1/(2 alpha Tr(Gamma Pi_s))`` (equal to
``2/qhat_s`` of :func:`~aimlib.untied.sector_qhat`):

.. math::

    R = \hat S + \sum_{s\in\{A, B\}} \frac{\Delta_s}{d}\,\Pi_s\Big[\frac1{\sqrt d}\sum_\mu
        \big(X_\mu^\top g_\mu X_\mu - \operatorname{tr}(g_\mu) I\big)\Big],
    \qquad \omega = h(\hat S) - C g_{\rm prev}.

Prior step ``S_hat = f(R)``, returning the errors ``V`` that the next ``g_out``
uses and the Onsager terms ``V_ons,s = Delta_s div_s f / d^2``:

* Gaussian prior (``rho = inf``): ``f`` shrinks each part by ``1/(1 + Delta_s)``,
  the exact posterior mean, and ``V = V_ons`` (:func:`gaussian_prior_step`);
* ``S = Q K^T/sqrt(r d)``, ``denoiser='equalised'``: an independent Ginibre
  matrix lifts the better-seen part to ``max_s Delta_s``, then the rectangular
  RIE, the posterior mean given what is kept; its state evolution is the upper
  end of :func:`~aimlib.untied.bracket_untied` (:func:`rect_prior_step`);
* ``denoiser='tuned'``: the rectangular RIE of ``R`` itself at the effective noise
  that minimises Stein's estimate of its error, ``V`` from that estimate
  (:func:`tuned_prior_step`);
* ``denoiser='sampled'``: the posterior mean under the two noises, by Hamiltonian
  Monte Carlo, ``V_ons`` its posterior variance and ``V`` that plus the Monte
  Carlo error of the mean (:class:`~aimlib.untied.SampledPriorStep`):
  Bayes-optimal up to the sampling, so its state evolution is the exact
  two-overlap one.

The divergences of the spectral maps on the two parts come from
:func:`~aimlib.untied.spectral_divergences`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, module_named, to_host
from ..errors import ConvergenceError
from .denoising import mmse_rect, rect_shrinkage, spectral_divergences
from .model import part_errors, part_norms, parts, sample_teacher_untied, untied_indices, untied_softmax
from .posterior import SampledPriorStep

__all__ = ["shift_basis", "sector_projector", "channel_matrices", "sector_deltas", "untied_g_out",
           "gaussian_prior_step", "rect_prior_step", "sure_errors", "tuned_prior_step", "UntiedGAMPResult",
           "untied_gamp", "run_untied_gamp"]

#: the run stops with ``reason='perfect'`` once the predicted error ``V_A + V_B`` falls below this
V_FLOOR = 1e-10
#: values of ``Delta_eff`` tried by :func:`tuned_prior_step`
TUNING_GRID = 7
#: the prior steps of the rank-r prior, by name
DENOISERS = ("equalised", "tuned", "sampled")


def shift_basis(T: int) -> np.ndarray:
    """``U`` of shape ``(T^2, T)``: column ``a`` is ``vec(e_a 1^T)``, the shift of row ``a`` (row-major ``vec``)."""
    T = v.integer("T", T, minimum=2)
    return np.kron(np.eye(T), np.ones((T, 1)))


def sector_projector(T: int) -> np.ndarray:
    r"""``Pi_sym = (I + tau)/2`` on ``R^{T x T}`` (row-major ``vec``); ``Pi_anti = I - Pi_sym``."""
    T = v.integer("T", T, minimum=2)
    eye = np.eye(T * T)
    tau = eye.reshape(T * T, T, T).transpose(0, 2, 1).reshape(T * T, T * T)
    return (eye + tau) / 2


def channel_matrices(VA: float, VB: float, T: int):
    r"""``(C, Gamma)``: the index covariance ``2 V_A Pi_sym + 2 V_B Pi_anti`` and ``-dg/domega``."""
    VA, VB = v.positive("VA", VA), v.positive("VB", VB)
    P = sector_projector(T)
    C = 2 * VA * P + 2 * VB * (np.eye(T * T) - P)
    Cinv = P / (2 * VA) + (np.eye(T * T) - P) / (2 * VB)
    CU = Cinv @ shift_basis(T)
    Gamma = Cinv - CU @ np.linalg.solve(shift_basis(T).T @ CU, CU.T)
    return C, (Gamma + Gamma.T) / 2


def sector_deltas(Gamma, T: int, alpha: float) -> tuple:
    r"""``Delta_s = 1/(2 alpha Tr(Gamma Pi_s))``: the noise of each part of ``R`` (``alpha = n/d^2``)."""
    alpha = v.positive("alpha", alpha)
    P = sector_projector(T)
    trA, trB = float(np.sum(Gamma * P)), float(np.sum(Gamma * (np.eye(T * T) - P)))
    return 1.0 / (2 * alpha * trA), 1.0 / (2 * alpha * trB)


def untied_g_out(z0, omega, Gamma):
    r"""``g = Gamma (z0 - omega)`` for arrays of shape ``(n, T, T)``: the noiseless softmax channel."""
    xp = get_array_module(z0, omega)
    n, T, _ = omega.shape
    G = xp.asarray(Gamma, dtype=omega.dtype)
    return ((z0 - omega).reshape(n, T * T) @ G).reshape(n, T, T)


def _dims(d: int) -> tuple:
    """Dimensions ``d(d+1)/2`` and ``d(d-1)/2`` of the symmetric and antisymmetric matrices."""
    return d * (d + 1) / 2, d * (d - 1) / 2


def _spectral(U, s, Vt, delta: float, rho: float):
    """``(F, (div_A, div_B))``: the rectangular RIE at noise ``delta`` on the SVD of ``R``, its divergences."""
    xp = get_array_module(U)
    xi, dxi = rect_shrinkage(to_host(s), delta, rho)
    return (U * xp.asarray(xi, dtype=U.dtype)) @ Vt, spectral_divergences(U, s, Vt, xi, dxi)


def gaussian_prior_step(R, deltas, noise=None, Z=None):
    r"""Posterior mean for ``S`` with i.i.d. ``N(0, 1/d)`` entries: ``A_R/(1 + Delta_A) + B_R/(1 + Delta_B)``.

    Returns ``(S_hat, V, V_ons)``, both ``(V_A, V_B)`` with ``V_s = Delta_s div_s/d^2``
    (Bayes-optimal, so the Onsager terms are the errors): the sectors have
    ``d(d+1)/2`` and ``d(d-1)/2`` directions, so ``V_A = Delta_A (1 + 1/d)/(2 (1 + Delta_A))``.
    ``noise`` and ``Z`` are not used.
    """
    d = R.shape[0]
    A, B = parts(R)
    V = tuple(dl * n_s / (d * d * (1 + dl)) for dl, n_s in zip(deltas, _dims(d)))
    return A / (1 + deltas[0]) + B / (1 + deltas[1]), V, V


def rect_prior_step(R, deltas, noise, Z, rho: float):
    r"""Equalise the two noises, then the rectangular RIE: ``(S_hat, V, V_ons)``.

    An independent Ginibre matrix ``Z`` (i.i.d. ``N(0, 1/d)``, drawn once per run so
    that damping does not average it away) lifts the better-seen part to
    ``Delta = max(Delta_A, Delta_B)``: ``R' = S + sqrt(Delta) G`` with ``G`` Ginibre, whose
    posterior mean is the rectangular RIE with error ``m = mmse_rect(Delta)``,
    half in each part: ``V = (m/2, m/2)``.  The Onsager terms use the exact
    divergences of the map ``R -> S_hat``, ``V_ons,s = Delta_s div_s/d^2``
    (:func:`~aimlib.untied.spectral_divergences`), about ``(Delta_s/Delta) m/2``.
    ``noise`` (the measured noise of ``R``) is not used: the step is consistent
    with its own ``Delta_s``.
    """
    d, xp = R.shape[0], get_array_module(R)
    top = max(deltas)
    ZA, ZB = parts(Z)
    R = R + math.sqrt(top - deltas[0]) * ZA + math.sqrt(top - deltas[1]) * ZB
    F, divs = _spectral(*xp.linalg.svd(R), top, rho)
    m = mmse_rect(top, rho)
    return F, (m / 2, m / 2), tuple(dl * dv / d**2 for dl, dv in zip(deltas, divs))


def sure_errors(R, F, deltas, divs) -> tuple:
    r"""Stein's unbiased estimates of the errors ``(1/d)||Pi_s(F(R) - S)||^2`` of the two parts.

    For ``R = S + N`` with ``N`` Gaussian of variance ``Delta_s/d`` per direction of
    part ``s`` (``n_s = d(d +- 1)/2`` directions),
    ``E||Pi_s(F - S)||^2 = E||Pi_s(F - R)||^2 + 2 (Delta_s/d) div_s F - n_s Delta_s/d``.
    """
    d = R.shape[0]
    res = part_norms(F - R)
    return tuple((q + 2 * dl / d * dv - n_s * dl / d) / d for q, dl, dv, n_s in zip(res, deltas, divs, _dims(d)))


def tuned_prior_step(R, deltas, noise, Z, rho: float):
    r"""The rectangular RIE of ``R`` itself at the noise ``Delta_eff`` that minimises Stein's estimate.

    ``noise`` are the noise variances of the two parts of ``R`` measured on the
    messages (:func:`_backward`), ``deltas`` the backward scalings.
    ``Delta_eff`` runs over ``TUNING_GRID`` values geometrically spaced between the
    two noises; the one with the smallest :func:`sure_errors` total is kept.
    Returns ``(S_hat, V, V_ons)`` with ``V`` those estimates (floored at
    ``V_FLOOR``) and ``V_ons,s = Delta_s div_s/d^2``.  Not Bayes-optimal (the
    noise is not bi-rotationally invariant) but it keeps all the information,
    unlike :func:`rect_prior_step`.  ``Z`` is not used.
    """
    d, xp = R.shape[0], get_array_module(R)
    svd = xp.linalg.svd(R)
    best = None
    for delta_eff in np.geomspace(min(noise), max(noise), TUNING_GRID):
        F, divs = _spectral(*svd, float(delta_eff), rho)
        V = sure_errors(R, F, noise, divs)
        if best is None or sum(V) < sum(best[1]):
            best = (F, V, divs)
    F, V, divs = best
    return F, tuple(max(x, V_FLOOR) for x in V), tuple(dl * dv / d**2 for dl, dv in zip(deltas, divs))


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
    trace : dict of lists
        Per iteration: ``V_A, V_B, Delta_A, Delta_B`` and, with ``S``, ``E_A, E_B``.
    """

    S_hat: np.ndarray
    V: tuple
    errors: tuple | None
    deltas: tuple
    iterations: int
    converged: bool
    reason: str
    seconds: float
    trace: dict

    @property
    def mmse(self):
        """The actual estimation error ``(1/d)||S_hat - S||_F^2`` (None without ``S``)."""
        return None if self.errors is None else sum(self.errors)


def _check_outputs(y, n: int, T: int, xp):
    """``y`` of shape ``(n, T, T)``, positive, rows summing to one (softmax outputs)."""
    y = v.finite_array("y", y, ndim=3)
    if tuple(y.shape) != (n, T, T):
        raise ValueError(f"y must have shape ({n}, {T}, {T}) to match X, got {tuple(y.shape)}")
    if bool(xp.any(y <= 0)) or not bool(xp.allclose(y.sum(axis=2), 1.0, atol=1e-8)):
        raise ValueError("y must hold softmax outputs: entries > 0 and each row summing to 1")
    return y


def _mix(new, old, damping):
    """``(1 - damping) new + damping old``, entry by entry, for pairs of floats."""
    return tuple((1 - damping) * a + damping * b for a, b in zip(new, old))


def _prior_step(denoiser: str, rho: float, d: int, rng, xp):
    """The prior step that ``rho`` and ``denoiser`` name (module docstring)."""
    if math.isinf(rho):
        return gaussian_prior_step
    if denoiser == "sampled":
        return SampledPriorStep(d, rho, rng, xp=xp)
    return partial(rect_prior_step if denoiser == "equalised" else tuned_prior_step, rho=rho)


def _channel_step(X, z0, S_hat, g_prev, V, V_ons):
    """Onsager term with ``V_ons``, ``g_out`` with ``V``; return ``(g, (Delta_A, Delta_B))``."""
    xp, (n, T, d) = get_array_module(X), X.shape
    C_ons, _ = channel_matrices(*V_ons, T)
    _, Gamma = channel_matrices(*V, T)
    onsager = (g_prev.reshape(n, T * T) @ xp.asarray(C_ons, dtype=X.dtype)).reshape(n, T, T)
    g = untied_g_out(z0, untied_indices(X, S_hat) - onsager, Gamma)
    return g, sector_deltas(Gamma, T, n / d**2)


def _backward(X, g, S_hat, deltas):
    r"""``(R, noise)``: the effective observation (module docstring) and the noise of its parts.

    ``noise_s = Delta_s^2 2 alpha mean_mu ||Pi_s g_mu||^2`` is measured on the messages;
    it equals ``Delta_s`` when ``g_out`` is given the actual errors.
    """
    xp, (n, T, d) = get_array_module(X), X.shape
    back = X.reshape(n * T, d).T @ (g @ X).reshape(n * T, d)
    (A, B), (bA, bB) = parts(S_hat), parts(back - float(xp.einsum("naa->", g)) * xp.eye(d, dtype=X.dtype))
    g_sym = (g + xp.swapaxes(g, 1, 2)) / 2
    sq_A, sq = float(xp.sum(g_sym * g_sym)) / n, float(xp.sum(g * g)) / n
    noise = tuple(dl * dl * 2 * n / d**2 * q for dl, q in zip(deltas, (sq_A, sq - sq_A)))
    return A + deltas[0] / d**1.5 * bA + B + deltas[1] / d**1.5 * bB, noise


def untied_gamp(X, y, rho: float, *, beta: float = 1.0, S=None, denoiser: str = "equalised", seed=None,
                damping: float = 0.5, max_iter: int = 300, tol: float = 1e-7) -> UntiedGAMPResult:
    r"""GAMP on noiseless untied softmax data ``y = row_softmax(beta h(S))`` (module docstring).

    Parameters
    ----------
    X : array of shape (n, T, d)
        Tokens (NumPy or CuPy; the run stays on that device).
    y : array of shape (n, T, T)
        Softmax outputs.
    rho : float
        Prior: ``inf`` for i.i.d. ``N(0, 1/d)`` entries (exact posterior mean per
        part), else ``S = Q K^T/sqrt(r d)``, ``r = rho d``.
    beta : float
        Inverse temperature of the softmax.
    S : array of shape (d, d), optional
        The teacher, to record the actual errors.
    denoiser : {'equalised', 'tuned', 'sampled'}
        Prior step for finite ``rho``: :func:`rect_prior_step` (Bayes-optimal for
        what it keeps; its state evolution is the upper end of
        :func:`~aimlib.untied.bracket_untied`), :func:`tuned_prior_step` (all the
        information, errors estimated by Stein's formula) or
        :class:`~aimlib.untied.SampledPriorStep` (the posterior mean, sampled; its
        state evolution is :func:`~aimlib.untied.sampled_state_evolution`'s).
        Not used when ``rho = inf``.
    seed : int or numpy.random.Generator, optional
        For the equalising noise ``Z`` of the rectangular prior step, then the sampler's chain.
    damping : float in [0, 0.99]
        ``x <- (1 - damping) new + damping old`` for ``g`` (from the second
        iteration on), ``S_hat`` and the predicted errors, as in GAMP-RIE.
    max_iter, tol
        Stop when ``|V_new - V| < tol V`` (``V = V_A + V_B``) or after ``max_iter`` iterations.
    """
    X = v.finite_array("X", X, ndim=3)
    (n, T, d), xp = X.shape, get_array_module(X)
    y = _check_outputs(y, n, T, xp)
    rho, beta, rng = v.rho(rho, allow_inf=True), v.positive("beta", beta), v.generator(seed)
    max_iter, tol = v.integer("max_iter", max_iter, minimum=1), v.positive("tol", tol)
    damping = v.in_range("damping", damping, 0.0, 0.99)
    if S is not None:
        S = xp.asarray(v.finite_array("S", S, ndim=2), dtype=X.dtype)
    if denoiser not in DENOISERS:
        raise ValueError(f"denoiser must be one of {DENOISERS}, got {denoiser!r}")
    Z = xp.asarray(rng.standard_normal((d, d)) / math.sqrt(d), dtype=X.dtype)
    step = _prior_step(denoiser, rho, d, rng, xp)
    z0, S_hat, g = xp.log(y) / beta, xp.zeros((d, d), dtype=X.dtype), xp.zeros((n, T, T), dtype=X.dtype)
    V = V_ons = (0.5, 0.5)
    trace = {k: [] for k in ("V_A", "V_B", "Delta_A", "Delta_B", "E_A", "E_B")}
    reason, start = "max_iter", time.perf_counter()
    for it in range(1, max_iter + 1):
        g_new, deltas = _channel_step(X, z0, S_hat, g, V, V_ons)
        g = g_new if it == 1 else (1 - damping) * g_new + damping * g
        R, noise = _backward(X, g, S_hat, deltas)
        if not (bool(xp.all(xp.isfinite(R))) and all(map(math.isfinite, noise))):
            raise ConvergenceError(f"untied GAMP: the effective observation R is not finite at iteration {it}")
        S_new, V_new, ons_new = step(R, deltas, noise, Z)
        S_hat = (1 - damping) * S_new + damping * S_hat
        old, V, V_ons = V, _mix(V_new, V, damping), _mix(ons_new, V_ons, damping)
        if not all(math.isfinite(x) and x > 0 for x in V + V_ons):
            raise ConvergenceError(f"untied GAMP: predicted errors {V}, Onsager terms {V_ons} at iteration {it}; "
                                   "try a larger damping")
        for key, val in zip(trace, (*V, *deltas, *(part_errors(S_hat, S) if S is not None else ()))):
            trace[key].append(val)
        if sum(V) < V_FLOOR:
            reason = "perfect"
            break
        if abs(sum(V) - sum(old)) < tol * sum(old):
            reason = "tol"
            break
    return UntiedGAMPResult(S_hat=to_host(S_hat), V=V, deltas=tuple(deltas),
                            errors=None if S is None else part_errors(S_hat, S), iterations=it,
                            converged=reason != "max_iter", reason=reason,
                            seconds=time.perf_counter() - start, trace=trace)


def run_untied_gamp(alpha: float, T: int, d: int, rho: float, *, seed=None, beta: float = 1.0,
                    backend: str | None = None, **options) -> UntiedGAMPResult:
    r"""Sample a teacher (:func:`~aimlib.untied.sample_teacher_untied`), ``n = round(alpha d^2)``
    samples of ``T`` Gaussian tokens and their softmax outputs, and run :func:`untied_gamp`.

    One Generator made from ``seed`` draws the teacher, the tokens and the
    equalising noise, in that order; ``backend`` (``'numpy'``, ``'cupy'`` or the
    default) holds the tokens.  ``options`` go to :func:`untied_gamp`.
    """
    alpha = v.positive("alpha", alpha)
    T, d = v.integer("T", T, minimum=2), v.integer("d", d, minimum=2)
    rng = v.generator(seed)
    S = sample_teacher_untied(d, rho, rng)
    X = rng.standard_normal((max(1, round(alpha * d * d)), T, d))
    xp = module_named(backend)
    X, S_dev = xp.asarray(X), xp.asarray(S)
    return untied_gamp(X, untied_softmax(X, S_dev, beta), rho, beta=beta, S=S_dev, seed=rng, **options)
