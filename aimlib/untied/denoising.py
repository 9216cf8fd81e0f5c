r"""Denoising a square non-symmetric matrix ``Y = S + sqrt(Delta) Z``, ``Z`` i.i.d. ``N(0, 1/d)``.

Book, chapter "Beyond", section "Untied key and query".  ``S = Q K^T / sqrt(r d)``
is bi-rotationally invariant; the Bayes-optimal estimator is the rectangular RIE
(singular vectors of ``Y``, singular values ``sigma -> sigma - 2 Delta h(sigma)``
with ``h`` the Hilbert transform of the symmetrised singular-value law of ``Y``),
and its error per dimension ``(1/d) E ||S_hat - S||_F^2`` is the prior MMSE
``mmse_rect(Delta)``: ``~ rho (2 - rho) Delta`` as ``Delta -> 0``, ``-> 1`` as
``Delta -> inf``.

``mmse_rect`` is a large-matrix numerical estimate (documented first
implementation): the oracle spectral estimator ``sum_i (u_i^T S v_i) u_i v_i^T``
(the best estimator with the singular vectors of ``Y``, whose error tends to the
MMSE) on fixed draws ``(S, Z)``, tabulated on a grid of ``log Delta`` and
interpolated.  Its finite-size error is ``O(1/d)``: within 0.6% of the published
analytical MMSE of Troiani et al. (2022) (tests).
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.interpolate import CubicSpline

from .. import _validate as v
from .model import sample_teacher_untied, unknowns_fraction

__all__ = ["sample_denoising_untied", "oracle_error", "oracle_curve", "rie_rect", "mmse_rect", "make_table",
           "DELTA_GRID"]

#: dimension and seeds of the estimate of ``mmse_rect`` for a ``rho`` not in the shipped table
TABLE_D, TABLE_SEEDS = 300, 2
#: the tabulated ``Delta``; outside, the leading asymptotics (``c Delta``, ``1 - c'/Delta``)
DELTA_GRID = np.logspace(-3, 3, 37)
TABLE_FILE = "mmse_rect_table.csv"


def sample_denoising_untied(d: int, rho: float, delta: float, seed=None):
    """Draw ``S`` (:func:`~aimlib.untied.sample_teacher_untied`) and ``Y = S + sqrt(Delta) Z``."""
    delta = v.nonnegative("delta", delta)
    rng = v.generator(seed)
    S = sample_teacher_untied(d, rho, rng)
    return S, S + math.sqrt(delta) * rng.standard_normal((d, d)) / math.sqrt(d)


def oracle_error(S, Y) -> float:
    r"""``(1/d) ||S - sum_i (u_i^T S v_i) u_i v_i^T||_F^2`` with ``Y = U diag(sigma) V^T``.

    The error of the best estimator built on the singular vectors of ``Y``.
    """
    S = v.finite_array("S", S, ndim=2)
    Y = v.finite_array("Y", Y, ndim=2)
    if S.shape != Y.shape or S.shape[0] != S.shape[1]:
        raise ValueError(f"S and Y must be square of the same shape, got {S.shape} and {Y.shape}")
    U, _, Vt = np.linalg.svd(Y)
    xi = np.sum(U * (S @ Vt.T), axis=0)
    return float((np.sum(S * S) - np.sum(xi * xi)) / S.shape[0])


def _hilbert_empirical(sigma, eta):
    r"""``h(x) = p.v. int mu(y)/(x - y) dy`` of the symmetrised law ``(1/2d) sum_j (delta_{s_j} + delta_{-s_j})``.

    Smoothed with a Cauchy kernel of width ``eta`` (the real part of the Stieltjes
    transform at ``x + i eta``), evaluated at the points ``sigma`` themselves.
    """
    x = sigma[:, None] + 1j * eta
    g = 0.5 * (1.0 / (x - sigma[None, :]) + 1.0 / (x + sigma[None, :]))
    return g.real.mean(axis=1)


def rie_rect(Y, delta: float, eta: float | None = None):
    r"""The rectangular RIE of a square ``Y``: ``U diag(sigma - 2 Delta h(sigma)) V^T``.

    ``h`` is the Hilbert transform of the symmetrised singular-value law of ``Y``,
    estimated from ``Y`` itself (Cauchy kernel of width ``eta``, default
    ``d^{-1/2}``); the estimator uses no knowledge of the prior.
    """
    Y = v.finite_array("Y", Y, ndim=2)
    if Y.shape[0] != Y.shape[1]:
        raise ValueError(f"Y must be square, got shape {Y.shape}")
    delta = v.nonnegative("delta", delta)
    d = Y.shape[0]
    eta = 1.0 / math.sqrt(d) if eta is None else v.positive("eta", eta)
    U, s, Vt = np.linalg.svd(Y)
    xi = s - 2.0 * delta * _hilbert_empirical(s, eta)
    return (U * xi) @ Vt


def oracle_curve(rho: float, deltas, d: int, seeds: int):
    """Mean :func:`oracle_error` over ``seeds`` fixed draws ``(S, Z)`` (seeds ``0..seeds-1``) at each ``Delta``.

    The same draws serve every ``Delta``, so the curve is smooth in ``Delta``.
    """
    d = v.integer("d", d, minimum=2)
    seeds = v.integer("seeds", seeds, minimum=1)
    deltas = np.asarray(deltas, dtype=float)
    vals = np.zeros(deltas.size)
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        S = sample_teacher_untied(d, rho, rng)
        Z = rng.standard_normal((d, d)) / math.sqrt(d)
        vals += [oracle_error(S, S + math.sqrt(dl) * Z) for dl in deltas]
    return vals / seeds


def _load_table():
    """The shipped table ``{rho: values on DELTA_GRID}`` (``mmse_rect_table.csv``, made by ``make_table``)."""
    path = Path(__file__).with_name(TABLE_FILE)
    if not path.exists():
        return {}
    arr = np.loadtxt(path, delimiter=",", comments="#")
    return {float(row[0]): row[1:] for row in np.atleast_2d(arr)}


@lru_cache(maxsize=32)
def _table(rho: float):
    """``log(mmse/Delta)`` on ``DELTA_GRID`` as a spline: the shipped table, else computed here."""
    vals = _load_table().get(rho)
    if vals is None:
        vals = oracle_curve(rho, DELTA_GRID, TABLE_D, TABLE_SEEDS)
    return CubicSpline(np.log(DELTA_GRID), np.log(vals / DELTA_GRID))


def make_table(rhos, d: int = 600, seeds: int = 2) -> str:
    """Write ``mmse_rect_table.csv`` (one row per ``rho``: ``rho`` then the values on ``DELTA_GRID``)."""
    rows = [[float(r), *oracle_curve(float(r), DELTA_GRID, d, seeds)] for r in rhos]
    path = Path(__file__).with_name(TABLE_FILE)
    header = (f"made by: python -c \"from aimlib.untied.denoising import make_table; "
              f"make_table({list(map(float, rhos))}, d={d}, seeds={seeds})\"\n"
              f"oracle error of the rectangular RIE at d={d}, mean of seeds 0..{seeds - 1}; "
              f"columns: rho, then Delta = logspace(-3, 3, {DELTA_GRID.size})")
    np.savetxt(path, np.array(rows), delimiter=",", header=header, fmt="%.10g")
    _table.cache_clear()
    return str(path)


def mmse_rect(delta, rho: float):
    r"""``mmse_rect(Delta)``: the MMSE of denoising the untied ``S`` from ``Y = S + sqrt(Delta) Z``.

    Numerical (see the module docstring): the shipped table for its ``rho``
    (``d = 600``), else an estimate at ``TABLE_D`` computed once per ``rho``
    (seconds).  ``rho = inf`` is the Gaussian prior, ``Delta / (1 + Delta)``.
    Outside ``DELTA_GRID`` the leading asymptotics ``c Delta`` and ``1 - c'/Delta``,
    matched at the grid's ends, take over.
    """
    rho = v.rho(rho, allow_inf=True)
    arr = np.asarray(delta, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("delta must be finite and > 0")
    if math.isinf(rho):
        out = arr / (1.0 + arr)
        return out if arr.ndim else float(out)
    spline, (lo, hi) = _table(rho), (DELTA_GRID[0], DELTA_GRID[-1])
    c_lo = math.exp(spline(math.log(lo)))
    c_hi = (1.0 - hi * math.exp(spline(math.log(hi)))) * hi
    out = arr * np.exp(spline(np.log(np.clip(arr, lo, hi))))
    out = np.where(arr < lo, c_lo * arr, np.where(arr > hi, 1.0 - c_hi / arr, out))
    return out if arr.ndim else float(out)
