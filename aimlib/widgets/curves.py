"""The panels' computations, cached: state-evolution curves, thresholds, the phase grid, spectra.

Each function is wrapped in :func:`functools.lru_cache` and called with parameters already
rounded to 3 significant digits (:func:`aimlib.widgets.base.round_sig`), so that moving a
control back and forth redraws from the cache; :func:`clear_caches` empties them all.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import rmt, state_evolution as se
from ..channels import DeepAttention, hardmax_polytope, make_channel, softmax_k, softmax_noisy as ns
from ..channels.registry import capabilities
from ..model import estimation_error
from ..priors import make_priors

__all__ = ["se_curve_cached", "noisy_curve_cached", "thresholds_cached", "phase_grid_cached",
           "spectrum_sample_cached", "deep_curve_cached", "clear_caches", "SE_TOL"]

#: the state-evolution tolerance of a channel's curves where the default is too slow for a redraw
SE_TOL = {"hardmax": 1e-8}

def _alpha_grid(lo: float, hi: float, scale: str, n: int) -> np.ndarray:
    return np.geomspace(lo, hi, n) if scale == "log" else np.linspace(lo, hi, n)


@functools.lru_cache(maxsize=512)
def se_curve_cached(channel: str, T: int, rho: float, lo: float, hi: float, scale: str,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(alphas, E_S)`` from :func:`aimlib.state_evolution.curve` (cached; arguments already rounded).

    Hardmax curves are iterated to ``tol = 1e-8`` (about 1e-7 in ``E_S``) to
    keep a redraw interactive.  At ``T = 3`` the hardmax ``F_out`` is the shipped table
    (:func:`aimlib.channels.hardmax_polytope.fisher_scaled`), which ends where the error
    falls below ``1/1000`` of the overlap: the curve is ``NaN`` from there on.
    """
    alphas = _alpha_grid(lo, hi, scale, n)
    kw = {"tol": SE_TOL[channel]} if channel in SE_TOL else {}
    if T > 2 and capabilities(channel).max_T is not None:   # a tabulated Bayes side beyond T = 2
        mmse = _curve_within_table(alphas, channel, T, rho, kw)
    else:
        mmse = np.asarray(se.curve(alphas, channel, T=T, rho=rho, **kw).mmse, dtype=float)
    alphas.setflags(write=False)
    mmse.setflags(write=False)
    return alphas, mmse


def _curve_within_table(alphas: np.ndarray, channel: str, T: int, rho: float, kw: dict) -> np.ndarray:
    """``E_S`` along increasing ``alphas``, ``NaN`` from the first one beyond the ``T``'s table."""
    mmse = np.full(len(alphas), np.nan)
    for i, a in enumerate(alphas):
        try:
            mmse[i] = se.solve(float(a), channel, T=T, rho=rho, **kw).mmse
        except hardmax_polytope.OutsideTable:  # q/V beyond LAMBDA_MAX: so is every larger alpha
            break
    return mmse


@functools.lru_cache(maxsize=64)
def noisy_curve_cached(rho: float, beta: float, noise: float, lo: float, hi: float,
                       n: int) -> dict:
    """SE of the noisy softmax (``T = 2``) on a log grid, with the tail law (cached; arguments rounded).

    ``mmse`` from :func:`aimlib.state_evolution.solve`; ``tail = c0 / (alpha F_out(Q0))``
    (:func:`aimlib.channels.softmax_noisy.fisher_at_q0`, ``c0 = k alpha_PR`` the slope of
    the prior MMSE at zero noise, ``k = T^2 + T - 2``).
    """
    alphas = _alpha_grid(lo, hi, "log", n)
    mmse = np.array([se.solve(a, T=2, rho=rho, beta=beta, noise=noise).mmse for a in alphas])
    c0 = softmax_k(2) * se.perfect_recovery_threshold(rho, 2)
    tail = c0 / (alphas * ns.fisher_at_q0(1 + rho, beta, noise))
    for a in (alphas, mmse, tail):
        a.setflags(write=False)
    return {"alpha": alphas, "mmse": mmse, "tail": tail}


@functools.lru_cache(maxsize=512)
def thresholds_cached(channel: str, T: int, rho: float) -> dict:
    """Thresholds drawn on the SE plots: ``alpha_pr`` (softmax) or ``alpha_wr`` (hardmax, ``rho -> 0``).

    The hardmax ``alpha_bar_WR`` is the closed form at ``T = 2`` and the face formula at ``T = 3``
    (:func:`aimlib.channels.hardmax_polytope.weak_recovery_threshold`, under a second).
    """
    ch = make_channel(channel)
    if ch.threshold == "perfect":
        return {"alpha_pr": float(se.perfect_recovery_threshold(rho, T)), "alpha_wr": None}
    wr = ch.weak_threshold(T)
    return {"alpha_pr": None, "alpha_wr": float(rho * wr), "alpha_bar_wr": float(wr)}


@functools.lru_cache(maxsize=16)
def phase_grid_cached(channel: str, T: int, n_rho: int, n_alpha: int) -> dict:
    """``E_S`` on a log grid of ``(rho, alpha)``.

    Softmax: computed on a grid of ``alpha_bar = k alpha`` (``k = T^2 + T - 2``) and rescaled.
    """
    rhos = np.geomspace(0.05, 5.0, n_rho)
    ch = make_channel(channel)
    if ch.threshold == "perfect":
        k = ch.linear_k(T)
        abars = np.geomspace(1e-2, 2.0, n_alpha)
        E = np.array([se.curve(abars / k, ch, T=T, rho=float(r)).mmse for r in rhos])
        alphas = abars / k
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = np.array([se.perfect_recovery_threshold(float(r), T) for r in rho_line])
        name = "alpha_pr"
    else:
        alphas = np.geomspace(1e-2, 20.0, n_alpha)
        E = np.array([se.curve(alphas, ch, T=2, rho=float(r), tol=SE_TOL[channel]).mmse for r in rhos])
        rho_line = np.geomspace(rhos[0], rhos[-1], 80)
        line = rho_line * ch.weak_threshold(2)
        name = "alpha_wr"
    return {"rho": rhos, "alpha": alphas, "mmse": E, "rho_line": rho_line, name: line}


@functools.lru_cache(maxsize=64)
def spectrum_sample_cached(d: int, delta: float, rho: float, seed: int) -> dict:
    """A finite-``d`` draw of ``(S, Y)`` (:func:`aimlib.rmt.sample_denoising`) and its RIE."""
    S, Y = rmt.sample_denoising(d, delta, rho, seed)
    lam, U = np.linalg.eigh(Y)
    oracle = np.einsum("ij,ik,kj->j", U, S, U)  # u_i^T S u_i
    S_hat = rmt.rie(Y, delta, rho)
    return {"eigenvalues": lam, "oracle": oracle, "rie_error": estimation_error(S_hat, S)}


@functools.lru_cache(maxsize=64)
def deep_curve_cached(c: float, rho1: float, rho2: float, lo: float, hi: float, n: int,
                      teachers: str = "centred") -> tuple:
    """``(alphas, E_1, E_2, q_12)`` of the two-layer state evolution on a log grid (cached; arguments rounded).

    Centred teachers (:class:`aimlib.priors.Centred`): the Bayes error (exact), ``q_12 = 0``.  Wishart
    teachers, whose layers share the index of ``sqrt(rho) I``: the separable state evolution of GAMP-RIE
    with one denoiser per layer, the cross overlap of its layers left out, and ``q_12`` that cross overlap
    to first order at each point (:func:`aimlib.state_evolution.cross_overlap`, instant).  The state
    evolution that carries it (:func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point`) takes
    seconds of Monte Carlo per point, too slow for a panel (book, chapter "Deep attention").
    """
    alphas = _alpha_grid(lo, hi, "log", n)
    ch = DeepAttention(c=c)
    priors = make_priors(ch, (rho1, rho2), teachers)
    res = se.curve(alphas, ch, T=2, rho=priors, tol=1e-8)
    q_12 = np.array([se.cross_overlap(float(a), q, m, ch, priors).q_12 if res.prediction == "separable-gamp" else 0.0
                     for a, q, m in zip(alphas, res.q, res.mmse)])
    for a in (alphas, res.mmse, q_12):
        a.setflags(write=False)
    return alphas, res.mmse[:, 0], res.mmse[:, 1], q_12


def clear_caches() -> None:
    """Empty every cache of the panels (used by the timing measurements)."""
    for f in (se_curve_cached, noisy_curve_cached, thresholds_cached, phase_grid_cached,
              spectrum_sample_cached, deep_curve_cached):
        f.cache_clear()
