r"""Two layers denoised one at a time under correlated noises: the residual cross-covariance.

GAMP-RIE with one denoiser per layer (book, chapter "Deep attention") hands layer ``l``
the observation ``R_l = S_l + sqrt(Delta_l) Z_l``, with ``(Delta_1, Delta_2, kappa)`` read
off the output moment matrix ``F`` by :func:`layer_noises`: ``Delta_l = (F^{-1})_ll/alpha``
and ``Z_1``, ``Z_2`` GOE matrices whose entries have correlation
``kappa = -F_12/sqrt(F_11 F_22)``.  Each layer's posterior mean ``S_hat_l`` given ``R_l``
alone leaves the residual ``E_l = S_hat_l - S_l``, and with ``kappa != 0`` the two
residuals are correlated even though the teachers are independent:

.. math::  e_{12}(\kappa) = \lim \tfrac1d\,\mathbb E\,\mathrm{Tr}(E_1E_2)
           = \kappa\,\frac{\mathrm{mmse}_1\,\mathrm{mmse}_2}{\sqrt{\Delta_1\Delta_2}} + O(\kappa^2).

The first order is Gaussian integration by parts in ``kappa``: the teachers are independent,
so only the noises couple the residuals, and to first order through each denoiser's mean
Jacobian, which for a posterior mean is ``mmse_l/Delta_l`` times the identity (the Onsager
term of :meth:`~aimlib.priors.base.Prior.denoise`, a Nishimori identity).  The higher orders
are the overlaps of the residuals' higher Wiener chaoses (non-negative for equal layers); a
linear denoiser has none, so for Gaussian priors the first order is exact
(:func:`gaussian_pair`).  For Wishart priors they are measured (:func:`measure_cross_residual`,
book, chapter "Correlated layers").
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..model import matrix_overlap
from ..rmt.spectrum import sample_goe

__all__ = ["SINGULAR", "check_kappa", "layer_noises", "cross_residual", "correlated_goe", "measure_cross_residual",
           "gaussian_pair"]


#: ``1 - kappa^2`` at or below which the moment matrix counts as singular (the layers' noises undefined)
SINGULAR = 1e-12


def check_kappa(kappa) -> float:
    """``kappa`` as a float if it lies in the open interval ``(-1, 1)``, else ``ValueError``."""
    kappa = v.real("kappa", kappa)
    if not -1.0 < kappa < 1.0:
        raise ValueError(f"kappa, the correlation of the two layers' noises, must lie in (-1, 1), got {kappa!r}")
    return kappa


def layer_noises(F, alpha: float) -> tuple:
    r"""``(Delta_1, Delta_2, kappa)``: the noises GAMP-RIE hands each layer, from the moment matrix ``F``.

    ``R = S + (alpha F)^{-1/2} xi`` (book, equation ``deep-eq-gamp-corr``): layer ``l`` sees
    noise of variance ``Delta_l = (F^{-1})_ll / alpha``, and the two noises have correlation
    ``kappa = (F^{-1})_12 / sqrt((F^{-1})_11 (F^{-1})_22) = -F_12/sqrt(F_11 F_22)``.
    ``F`` must be a symmetric positive-definite ``2 x 2`` matrix (a singular one leaves a
    direction of the two teachers unobserved, and ``kappa = +-1``).
    """
    F = v.symmetric_matrix("F", F)
    alpha = v.positive("alpha", alpha)
    if F.shape != (2, 2):
        raise ValueError(f"F must be the 2 x 2 output moment matrix of two layers, got shape {F.shape}")
    det = F[0, 0] * F[1, 1] - F[0, 1] ** 2
    if min(F[0, 0], F[1, 1]) <= 0 or det <= SINGULAR * F[0, 0] * F[1, 1]:
        raise ValueError(f"the output moment matrix F = {F.tolist()} is singular or not positive definite "
                         f"(det = {det:.3g}): the layers' noises are not defined")
    inv = np.linalg.inv(F)
    return float(inv[0, 0] / alpha), float(inv[1, 1] / alpha), float(-F[0, 1] / np.sqrt(F[0, 0] * F[1, 1]))


def cross_residual(mmse, deltas, kappa, mixing=(0.0, 0.0)) -> float:
    r"""``e_12 = mmse_1 mmse_2 (kappa / sqrt(Delta_1 Delta_2) - a_12/Delta_1 - a_21/Delta_2)``: the residual
    cross-covariance to first order in ``kappa`` and in the mixing ``(a_12, a_21)``.

    ``mmse_l`` is layer ``l``'s error at its noise ``Delta_l`` (module docstring).  With the mixing
    each input is ``R_l = S_l + a_lk S_k + sqrt(Delta_l) Z_l``.  The part along the identity,
    ``a_lk E[S_k]``, meets no first order (the other residual has mean zero); the rest is
    ``a_lk C_k``, ``C_k`` the other layer's centred teacher: the RIE passes it on through its mean
    Jacobian ``mmse_l/Delta_l`` (``C_k`` is free of ``R_l``'s eigenbasis), and the other residual meets
    it by ``(1/d) Tr(C_k E_k) = -mmse_k``.  A part ``b_lk S_hat_k`` of the other layer's estimate (the
    memory) adds nothing at this order: its centred part meets ``E_k`` by ``(1/d) Tr(C_hat_k E_k) = 0``
    for a posterior mean.
    Exact for Gaussian priors; for Wishart ones the next orders are measured
    (:func:`measure_cross_residual`).
    """
    m = [v.nonnegative(f"mmse[{i}]", x) for i, x in enumerate(mmse)]
    dl = [v.positive(f"deltas[{i}]", x, allow_inf=True) for i, x in enumerate(deltas)]
    a = [v.real(f"mixing[{i}]", x) for i, x in enumerate(mixing)]
    if len(m) != 2 or len(dl) != 2 or len(a) != 2:
        raise ValueError(f"mmse, deltas and mixing must hold two values (one per layer), got {len(m)}, "
                         f"{len(dl)} and {len(a)}")
    return m[0] * m[1] * (check_kappa(kappa) / float(np.sqrt(dl[0] * dl[1])) - a[0] / dl[0] - a[1] / dl[1])


def correlated_goe(d: int, kappa, seed=None) -> tuple:
    """``(Z_1, Z_2)``: GOE matrices (:func:`~aimlib.rmt.spectrum.sample_goe`) whose entries have correlation
    ``kappa``."""
    kappa = check_kappa(kappa)
    rng = v.generator(seed)
    Z1, Z = sample_goe(d, rng), sample_goe(d, rng)
    return Z1, kappa * Z1 + np.sqrt(1.0 - kappa * kappa) * Z


def _layer_matrix(name: str, x, diagonal: float) -> np.ndarray:
    """A ``2 x 2`` matrix from ``x``: a pair ``(x_12, x_21)`` of off-diagonal entries (the diagonal
    ``diagonal``), or the whole matrix."""
    m = np.asarray(x, dtype=float)
    if m.shape == (2,):
        m = np.array([[diagonal, m[0]], [m[1], diagonal]])
    if m.shape != (2, 2) or not np.all(np.isfinite(m)):
        raise ValueError(f"{name} must be a pair (x_12, x_21) or a finite 2 x 2 matrix, got {x!r}")
    return m


def measure_cross_residual(priors, deltas, kappa, d: int, seed=None, *, mixing=(0.0, 0.0),
                           memory=(0.0, 0.0)) -> dict:
    r"""One draw of ``(1/d) Tr(E_1 E_2)`` and of each ``(1/d) ||E_l||^2``, each layer denoised alone.

    Teachers ``S_l`` from ``priors`` (independent) and :func:`correlated_goe` noises ``Z_l``; each
    layer's own estimate ``S0_l`` (the prior's :meth:`~aimlib.priors.base.Prior.denoise` of
    ``S_l + sqrt(Delta_l) Z_l`` at ``Delta_l``, on the host).  The inputs are then the state
    evolution's

    .. math::  R_l = \sum_k A_{lk} S_k + B_{lk}\,S0_k + \sqrt{\Delta_l}\,Z_l ,

    ``A = mixing`` (``F^{-1} Gamma``) and ``B = memory`` (``I + F^{-1} Lambda``), each a ``2 x 2``
    matrix or a pair of off-diagonal entries (then ``A`` has ones and ``B`` zeros on the diagonal),
    and ``S_hat_l`` their posterior means at ``Delta_l``; with ``A = I``, ``B = 0``, ``S_hat_l = S0_l``.
    The parts ``A_lk S_k`` hold ``A_lk E[S_k]`` along the identity (``sqrt(rho_k) I`` for Wishart
    teachers), which no first order of ``e_12`` sees: the other residual has mean zero.

    Returns
    -------
    dict
        ``e_12`` and ``mmse`` (a pair): the measured cross-covariance and errors.
    """
    if len(priors) != 2 or len(deltas) != 2:
        raise ValueError(f"priors and deltas must hold two values (one per layer), got {len(priors)} and "
                         f"{len(deltas)}")
    dl = [v.positive(f"deltas[{i}]", x) for i, x in enumerate(deltas)]
    A, B = _layer_matrix("mixing", mixing, 1.0), _layer_matrix("memory", memory, 0.0)
    d = v.integer("d", d, minimum=2)
    rng = v.generator(seed)
    S = [p.sample(d, rng) for p in priors]
    Z = correlated_goe(d, kappa, rng)
    noise = [np.sqrt(x) * z for z, x in zip(Z, dl)]
    S_hat = [p.denoise(s + n, (x,))[0] for p, s, n, x in zip(priors, S, noise, dl)]
    if not (np.array_equal(A, np.eye(2)) and not B.any()):
        R = [A[l, 0] * S[0] + A[l, 1] * S[1] + B[l, 0] * S_hat[0] + B[l, 1] * S_hat[1] + noise[l] for l in (0, 1)]
        S_hat = [p.denoise(r, (x,))[0] for p, r, x in zip(priors, R, dl)]
    E = [s_hat - s for s_hat, s in zip(S_hat, S)]
    return {"e_12": matrix_overlap(*E), "mmse": tuple(matrix_overlap(e, e) for e in E)}


def gaussian_pair(deltas, kappa) -> tuple:
    r"""``(separate, joint)``: the ``2 x 2`` error matrices of two unit-variance GOE teachers.

    Observed as ``R_l = S_l + sqrt(Delta_l) Z_l`` with noise covariance
    ``N = [[Delta_1, kappa s], [kappa s, Delta_2]]``, ``s = sqrt(Delta_1 Delta_2)``, per entry.
    One posterior mean per layer, ``R_l/(1 + Delta_l)``, has errors ``Delta_l/(1 + Delta_l)``
    and cross-covariance :func:`cross_residual` exactly; the joint posterior mean
    ``(I + N^{-1})^{-1} N^{-1} R`` has the error matrix ``(I + N^{-1})^{-1}``, below the
    separate one in the positive semi-definite order.
    """
    dl = [v.positive(f"deltas[{i}]", x) for i, x in enumerate(deltas)]
    kappa = check_kappa(kappa)
    m = [x / (1.0 + x) for x in dl]
    cross = cross_residual(m, dl, kappa)
    separate = np.array([[m[0], cross], [cross, m[1]]])
    s = kappa * np.sqrt(dl[0] * dl[1])
    N = np.array([[dl[0], s], [s, dl[1]]])
    return separate, np.linalg.inv(np.eye(2) + np.linalg.inv(N))
