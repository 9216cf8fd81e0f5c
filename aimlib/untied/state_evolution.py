r"""State evolution of the untied noiseless softmax channel.

Split ``S = A + B`` into its symmetric and antisymmetric parts, with errors
``V_A = (1/d)||A - A_hat||^2`` and ``V_B = (1/d)||B - B_hat||^2``.  A fresh index
matrix has fluctuations ``2 V_A Pi_sym + 2 V_B Pi_anti`` (i.i.d. entries of
variance ``V`` when ``V_A = V_B = V/2``) and the softmax reveals it up to one
shift per row, so (up to constants)

.. math::  \Psi_{\rm out} = -\tfrac12\big[k_1\log V_A + k_2\log V_B + k_3\log(V_A + V_B)\big],

``k_1 = T(T-1)/2``, ``k_2 = (T-1)(T-2)/2``, ``k_3 = T - 1`` (``k_1 + k_2 + k_3 = T^2 - T``),
and ``qhat_s = -4 alpha dPsi_out/dV_s``: each part is observed through a Gaussian
channel of its own signal-to-noise ratio (:func:`sector_qhat`).  The channel is
anisotropic: at ``V_A = V_B`` the two parts get ``(T^2 - 1)/2`` and ``(T - 1)^2/2``
effective measurements per sample.  By Euler's identity
``V_A qhat_A + V_B qhat_B = 2 alpha (T^2 - T)`` at every ratio, which with the
low-noise identity of the prior, ``sum_s mmse_s qhat_s -> 2 rho (2 - rho)``, puts
the perfect-recovery threshold of the two-overlap SE at the counting threshold.

:func:`solve_sectors` iterates the exact two-overlap SE for a prior given by its
two sector MMSEs (closed form for the Gaussian prior, :func:`gaussian_sectors`).
:func:`solve_untied` solves its isotropic closure ``V = mmse_rect(V / alpha_bar)``,
``alpha_bar = (T^2 - T) alpha`` (both parts at the mean ratio), whose
perfect-recovery threshold is the counting threshold.  :func:`bracket_untied`
bounds the exact fixed point from both sides: the SE map is monotone, and giving
both parts the larger (smaller) of the two ratios can only lower (raise) the
error, so ``alpha_bar`` between ``(T - 1)^2 alpha`` and ``(T^2 - 1) alpha`` brackets it.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..state_evolution.closed import solve_closed
from .denoising import mmse_rect
from .model import measurements_per_sample, unknowns_fraction

__all__ = ["output_coefficients", "output_free_entropy", "sector_qhat", "gaussian_sectors",
           "solve_sectors", "solve_untied", "bracket_untied", "curve_untied", "untied_threshold", "make_comparison"]


def output_coefficients(T: int) -> tuple:
    """``(k_1, k_2, k_3) = (T(T-1)/2, (T-1)(T-2)/2, T-1)`` of :func:`output_free_entropy`."""
    T = v.integer("T", T, minimum=2)
    return T * (T - 1) / 2, (T - 1) * (T - 2) / 2, T - 1.0


def output_free_entropy(VA: float, VB: float, T: int) -> float:
    r"""``-(1/2)[k_1 log V_A + k_2 log V_B + k_3 log(V_A + V_B)]``: ``Psi_out`` up to a constant."""
    VA, VB = v.positive("VA", VA), v.positive("VB", VB)
    k1, k2, k3 = output_coefficients(T)
    return -0.5 * (k1 * math.log(VA) + k2 * math.log(VB) + k3 * math.log(VA + VB))


def sector_qhat(VA: float, VB: float, alpha: float, T: int) -> tuple:
    r"""``qhat_A = 2 alpha (k_1/V_A + k_3/(V_A+V_B))``, ``qhat_B = 2 alpha (k_2/V_B + k_3/(V_A+V_B))``."""
    alpha = v.nonnegative("alpha", alpha)
    k1, k2, k3 = output_coefficients(T)
    cross = k3 / (VA + VB)
    return 2 * alpha * (k1 / VA + cross), 2 * alpha * (k2 / VB + cross)


def gaussian_sectors(qA: float, qB: float) -> tuple:
    r"""Sector MMSEs ``(1/(2 + qhat_A), 1/(2 + qhat_B))`` of the Gaussian prior (``S`` i.i.d. ``N(0, 1/d)``).

    Each part has prior variance ``1/2`` per unit of ``(1/d)||.||^2`` and is seen
    with noise variance ``1/qhat`` (GOE-type, as in the tied prior term).
    """
    return 1.0 / (2.0 + qA), 1.0 / (2.0 + qB)


def solve_sectors(alpha: float, T: int, sectors=gaussian_sectors, *, damping: float = 0.5,
                  tol: float = 1e-12, max_iter: int = 100_000, on_max_iter: str = "raise"):
    r"""The two-overlap SE fixed point ``V_s = mmse_s(qhat_A, qhat_B)`` from ``V_A = V_B = 1/2``.

    ``sectors(qhat_A, qhat_B) -> (mmse_A, mmse_B)`` is the prior side.  Returns
    ``(V_A, V_B)``; ``(0, 0)`` once both fall below ``tol`` (perfect recovery).
    """
    alpha = v.nonnegative("alpha", alpha)
    check_on_max_iter(on_max_iter)
    VA, VB = 0.5, 0.5
    for _ in range(max_iter):
        nA, nB = sectors(*sector_qhat(VA, VB, alpha, T))
        nA, nB = damping * VA + (1 - damping) * nA, damping * VB + (1 - damping) * nB
        if not (math.isfinite(nA) and math.isfinite(nB)):
            raise ConvergenceError(f"untied SE diverged at alpha={alpha:g}")
        if nA + nB < tol:
            return 0.0, 0.0
        if abs(nA - VA) + abs(nB - VB) < tol * (nA + nB):
            return nA, nB
        VA, VB = nA, nB
    max_iter_reached(f"untied SE did not converge in {max_iter} iterations at alpha={alpha:g}", on_max_iter)
    return VA, VB


def untied_threshold(rho: float, T: int) -> float:
    r"""Perfect recovery of the isotropic closure: ``alpha_bar = lim mmse_rect(Delta)/Delta = rho(2 - rho)``.

    Equal to :func:`~aimlib.untied.count_threshold` (``rho (2 - rho)/(T^2 - T)``), and to
    the threshold of the two-overlap SE (the Euler identity of the module docstring).
    """
    return unknowns_fraction(rho) / measurements_per_sample(T)


def _closure(abar: float, rho: float, tol: float = 1e-10) -> float:
    """The fixed point ``V = mmse_rect(V / abar)`` reached from ``V = 1`` (``0`` from ``abar = rho(2 - rho)``)."""
    if math.isinf(rho):
        return max(0.0, 1.0 - abar)
    if abar >= unknowns_fraction(rho):
        return 0.0

    def m(delta):
        return mmse_rect(delta, rho) if 0 < delta < math.inf else (0.0 if delta <= 0 else 1.0)

    return float(solve_closed(abar, m, unknowns_fraction(rho), None, tol)[0])


def solve_untied(alpha: float, T: int, rho: float, *, tol: float = 1e-10):
    r"""Fixed point of the isotropic closure ``V = mmse_rect(V / alpha_bar)``, ``alpha_bar = (T^2 - T) alpha``.

    Returns ``(mmse, q)`` with ``q = Q0 - mmse``, ``Q0 = 1``.  Exact for the
    Gaussian prior (``rho = inf``: ``1 - alpha_bar``, as :func:`solve_sectors`); for
    finite ``rho`` an approximation that replaces the two sector ratios by their
    mean (see the module).  ``mmse = 0`` from :func:`count_threshold` on.
    """
    alpha = v.nonnegative("alpha", alpha)
    rho = v.rho(rho, allow_inf=True)
    V = _closure(measurements_per_sample(T) * alpha, rho, tol)
    return V, 1.0 - V


def bracket_untied(alpha: float, T: int, rho: float) -> tuple:
    r"""Lower and upper bounds on the exact two-overlap SE error reached from the prior.

    The fixed points of ``V = mmse_rect(V / ((T^2 - 1) alpha))`` and
    ``V = mmse_rect(V / ((T - 1)^2 alpha))``: both parts seen at the larger,
    respectively the smaller, of the two ratios ``qhat_A >= qhat_B`` at
    ``V_A = V_B`` (book, proposition "Bracketing the untied state evolution").
    The isotropic closure :func:`solve_untied` lies in between.
    """
    alpha = v.nonnegative("alpha", alpha)
    rho = v.rho(rho, allow_inf=True)
    T = v.integer("T", T, minimum=2)
    return _closure((T * T - 1) * alpha, rho), _closure((T - 1) ** 2 * alpha, rho)


def curve_untied(alphas, T: int, rho: float) -> np.ndarray:
    """:func:`solve_untied`'s ``mmse`` along ``alphas``."""
    return np.array([solve_untied(float(a), T, rho)[0] for a in np.atleast_1d(alphas)])


def make_comparison(path, rhos=(0.2, 0.5), Ts=(2, 3), alphas=None) -> str:
    """Write the tied (exact SE) and untied (isotropic closure) softmax errors along ``alphas`` to ``path``.

    Columns ``T, rho, alpha, E_tied, E_untied``; the header names the command.
    """
    from ..state_evolution import curve

    alphas = np.linspace(0.005, 0.4, 80) if alphas is None else np.asarray(alphas, dtype=float)
    rows = [(T, rho, a, et, eu) for rho in rhos for T in Ts
            for a, et, eu in zip(alphas, curve(alphas, "softmax", T=T, rho=rho).mmse,
                                 curve_untied(alphas, T, rho))]
    header = (f"made by: python -c \"from aimlib.untied.state_evolution import make_comparison; "
              f"make_comparison('{path}', rhos={tuple(rhos)}, Ts={tuple(Ts)})\"\n"
              "noiseless softmax, estimation error: tied (exact SE), untied (isotropic closure "
              "V = mmse_rect(V / ((T^2 - T) alpha)))\nT,rho,alpha,E_tied,E_untied")
    np.savetxt(path, np.array(rows), delimiter=",", fmt="%.10g", header=header)
    return str(path)
