r"""The Bayes output function of two hardmax layers whose estimates have a cross overlap (``T = 2``).

Book, chapter "Correlated layers", section "The coupled Bayes state evolution".  In the
Bayes-optimal state evolution of two layers the overlap is a ``2 x 2`` matrix: with teachers
``S_l = sqrt(s_l) I + C_l`` (``C_l`` centred, independent; Wishart: ``s_l = rho_l``) and the
posterior means' centred cross overlap ``q_12 = (1/d) Tr(C_hat_1 C_hat_2)``, the estimates and the
indices are, entry by entry (each entry of an index matrix with the weight ``Sigma``),

.. math::  \omega \sim N(0, Q\,\Sigma), \qquad h\mid\omega \sim N(\omega, V\,\Sigma), \qquad
           Q = \begin{pmatrix} q_1 & \sqrt{s_1s_2} + q_{12}\\ \cdot & q_2\end{pmatrix},\quad
           V = Q_0 - Q = \begin{pmatrix} V_1 & -q_{12}\\ \cdot & V_2\end{pmatrix},

``Q0`` the teachers' second moments with ``(Q0)_12 = sqrt(s_1 s_2)``.  By the Nishimori identity
the joint posterior mean's residual cross-covariance is ``e_12 = V_12 = -q_12`` (for one RIE per
layer, whose estimate of layer 1 does not see teacher 2, it is ``+q_12``).  The indices' residuals
are correlated, ``V_12 != 0``, and the output function is that of this law, not GAMP-RIE's
separable one (:meth:`~aimlib.channels.DeepAttention.g_out`, which takes ``V`` diagonal).

First order in ``V_12`` (Gaussian smoothing).  With ``Z_out(t) = sum_P a_P(omega_1) b_P(t; omega_2)``
at ``V_12 = 0`` (:mod:`aimlib.channels.deep_patterns`), the heat equation
``dZ/dV_12 = sum_k lambda_k d^2 Z/(d omega_{1,k} d omega_{2,k})`` (entries ``k = 11, 12, 22``,
``lambda = (2, 1, 2)`` their variances in units of ``V``) factorises per pattern:

.. math::  Z_{\rm out}(t) = \sum_P a_P b_P\,\big(1 + V_{12}\,c_P\big) + O(V_{12}^2),\qquad
           c_P = \sum_k \lambda_k\,\partial_k\log a_P\,\partial_k\log b_P ,

which sums to one over the four outputs ``t`` at every order kept.  :func:`pair_log_z` returns
``log Z0 + V_12 <c>``, ``<.>`` the pattern posterior at ``V_12 = 0`` (the same first order), and
:func:`pair_g_out` its gradient by central differences.  It is GAMP-RIE's channel step with the joint
denoiser (:func:`cross_g_out`).

All orders in ``V_12`` (:func:`exact_log_z`).  Per pattern the layer-1 signs and the output signs are the
signs of four linear functions of the indices, a four-variate normal whose covariance is linear in
``V_12``; Plackett's identity (the same heat equation, for an orthant probability) writes the derivative
in ``V_12`` as a sum of bivariate densities times bivariate orthant probabilities, and a Gauss-Legendre
rule integrates it from ``0`` to ``V_12`` to rounding.  :func:`bayes_moments_direct` averages

.. math::  \hat F_{ll'} = 2\sum_k\lambda_k\,\mathbb E_\omega\sum_t Z_{\rm out}(t)\,g_{l,k}\,g_{l',k}

with that ``Z_out`` and its gradient on the Sobol set of
:func:`~aimlib.channels.deep_patterns.fisher_matrix_direct`, the outputs summed exactly; at ``q_12 = 0``
it is that function's matrix divided by ``sqrt(V_l V_l')``.  The state evolution reads
:func:`bayes_moment_matrix`, the tabulated :meth:`~aimlib.channels.DeepAttention.moment_matrix` plus the
change ``q_12`` makes on the Sobol set, so that it is the tabulated matrix exactly at ``q_12 = 0``.
``tests/test_deep_bayes_se.py`` checks ``exact_log_z`` against a general-purpose four-variate normal
integrator and Monte Carlo draws of the law, and measures what the first order leaves out.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from . import hardmax
from ._bivariate import log_bvn_cdf
from .deep_patterns import (ENTRY_VAR, PATTERNS, SOBOL_LOG2, SOBOL_SEED, entries, entry_products, functionals,
                            layer1_terms, layer2_terms, mixed_functionals, symmetric_matrix)
from .polytope import sobol_normals

__all__ = ["pair_law", "pair_log_z", "pair_g_out", "cross_g_out", "exact_log_z", "bayes_moments_direct",
           "bayes_moment_matrix", "FD_STEP", "CROSS_NODES"]

#: relative step of the central differences of :func:`pair_g_out` (in units of ``sqrt(V_l)``)
FD_STEP = 1e-5


def pair_law(q, Q0, shared, q12: float) -> tuple:
    r"""``(Q, V)``: the estimates' and the residuals' ``2 x 2`` covariances of the module docstring.

    ``q`` the overlaps (``s_l <= q_l < Q0_l``), ``Q0`` the second moments, ``shared`` the known parts
    ``s_l``, ``q12`` the centred cross overlap.  Raises ``ValueError`` naming ``q12`` if ``Q`` or
    ``V`` is not positive definite (a cross overlap larger than the layers' own allow).
    """
    q = tuple(v.nonnegative(f"q[{i}]", x) for i, x in enumerate(q))
    Q0 = tuple(v.positive(f"Q0[{i}]", x) for i, x in enumerate(Q0))
    s = tuple(v.nonnegative(f"shared[{i}]", x) for i, x in enumerate(shared))
    if not len(q) == len(Q0) == len(s) == 2:
        raise ValueError(f"q, Q0 and shared must hold two values (one per layer), got {len(q)}, {len(Q0)}, {len(s)}")
    for i in range(2):
        if not s[i] <= q[i] < Q0[i]:
            raise ValueError(f"q[{i}] must lie in [shared[{i}], Q0[{i}]) = [{s[i]:g}, {Q0[i]:g}), got {q[i]:g}")
    q12 = v.real("q12", q12)
    root = np.sqrt(s[0] * s[1])
    Q = np.array([[q[0], root + q12], [root + q12, q[1]]])
    V = np.array([[Q0[0] - q[0], -q12], [-q12, Q0[1] - q[1]]])
    if min(np.linalg.eigvalsh(Q).min(), np.linalg.eigvalsh(V).min()) <= 0:
        raise ValueError(f"q12 = {q12:g} is too large for the overlaps q = {q}, second moments Q0 = {Q0} and "
                         f"known parts {s}: the estimates' covariance Q = {Q.tolist()} and the residuals' "
                         f"V = {V.tolist()} must both be positive definite")
    return Q, V


def _check_V(V) -> np.ndarray:
    V = np.asarray(V, dtype=float)
    if V.shape != (2, 2) or V[0, 1] != V[1, 0] or min(V[0, 0], V[1, 1]) <= 0:
        raise ValueError(f"V must be a symmetric 2 x 2 residual covariance with positive diagonal, got {V.tolist()}")
    return V


def _log_z_parts(c, t, o1, o2, V):
    """``(log Z0, <c>)`` on the samples: the pattern sum at ``V_12 = 0`` and its first order's mean ``c_P``."""
    log_a, g1 = layer1_terms(o1, V[0, 0])
    log_b, g2 = layer2_terms(c, t, o2, V[1, 1])
    logs = log_a + log_b
    top = logs.max(axis=-1, keepdims=True)
    w = np.exp(logs - top)
    total = w.sum(axis=-1, keepdims=True)
    cp = np.einsum("...pk,...pk,k->...p", entries(g1), g2, ENTRY_VAR)
    mean_c = (w * cp).sum(axis=-1) / total[..., 0]
    return (top + np.log(total))[..., 0], mean_c


def pair_log_z(c: float, t, omega, V):
    r"""``log Z_out = log Z0 + V_12 <c>`` to first order in ``V_12`` (module docstring).

    ``t`` the output signs (``(..., 2)`` or ``(2,)``), ``omega`` the estimates, shape ``(..., 2, 2, 2)``
    (layer, then the ``2 x 2`` index matrix), ``V`` the residuals' ``2 x 2`` covariance.
    """
    V = _check_V(V)
    t = np.broadcast_to(np.asarray(t, dtype=float), omega.shape[:-3] + (2,))
    log_z0, mean_c = _log_z_parts(c, t, omega[..., 0, :, :], omega[..., 1, :, :], V)
    return log_z0 + V[0, 1] * mean_c


def pair_g_out(c: float, t, omega, V, eps: float = FD_STEP, log_z=pair_log_z):
    """``g_l = d log Z_out / d omega_l`` of ``log_z`` (:func:`pair_log_z`, the first order, or :func:`exact_log_z`)
    by central differences over the independent entries ``(omega_11, omega_12, omega_22)`` of each layer, step
    ``eps sqrt(V_ll)``; shape ``(..., 2, 3)``."""
    V = _check_V(V)
    eps = v.positive("eps", eps)
    t = np.broadcast_to(np.asarray(t, dtype=float), omega.shape[:-3] + (2,))
    w = entries(omega)
    g = np.zeros(omega.shape[:-3] + (2, 3))
    for layer in range(2):
        step = eps * np.sqrt(V[layer, layer])
        for k in range(3):
            diff = []
            for sign in (1.0, -1.0):
                shifted = w.copy()
                shifted[..., layer, k] += sign * step
                diff.append(log_z(c, t, symmetric_matrix(shifted), V))
            g[..., layer, k] = (diff[0] - diff[1]) / (2 * step)
    return g


def cross_g_out(channel, y, omega, V):
    """:func:`pair_g_out` in the layout of :meth:`~aimlib.channels.DeepAttention.g_out`: ``y`` the channel's
    outputs ``(n, 2, 2)``, ``omega`` ``(n, 2, 2, 2)`` (layer, then the index matrix), ``V`` the residuals'
    ``2 x 2`` covariance; returns the symmetric ``(n, 2, 2, 2)`` gradients on ``omega``'s module (GAMP-RIE's
    channel step with the joint denoiser, :mod:`aimlib.priors.joint_pair`).  First order in ``V_12``: at the
    runs' ``|V_12| ~ 0.03`` within 0.1 % rms of the gradient of :func:`exact_log_z`."""
    xp = get_array_module(omega)
    t = hardmax.signs_from_output(to_host(y))
    return xp.asarray(symmetric_matrix(pair_g_out(channel.c, t, to_host(omega), V)))


# -- all orders in V_12: Plackett's identity integrated over the cross-covariance ---------------

#: Gauss-Legendre nodes of the integral over the cross-covariance in :func:`exact_log_z`
CROSS_NODES = 6
_LOG_2PI = float(np.log(2.0 * np.pi))


def _signed_rows(c, s, t):
    """``(G_1, G_2)``: the layer-1 differences ``s_i u_i`` and the layer-2 ones ``t_i w_i`` given the pattern
    ``s`` as rows on the entries ``(h_11, h_12, h_22)`` of each layer (the event is ``G_1 h_1 > 0, G_2 h_2 > 0``)."""
    return np.array(s)[:, None] * mixed_functionals(np.eye(2)), np.array(t)[:, None] * functionals(c, *s)


def _cross_rate(m, Sigma, B):
    r"""``dP/dV_12 = sum_{ij} B_ij d^2 Phi_Sigma(m)/(dm_i dm_j)`` (``i`` layer 1, ``j`` layer 2), each second
    derivative ``phi_2(m_i, m_j) Phi_2(m_rest | m_i, m_j)`` of the orthant probability ``P = Phi_Sigma(m)``."""
    rate = 0.0
    for i in (0, 1):
        for j in (2, 3):
            pair, rest = [i, j], [1 - i, 5 - j]
            S_pp = Sigma[np.ix_(pair, pair)]
            R = Sigma[np.ix_(rest, pair)] @ np.linalg.inv(S_pp)
            cond = Sigma[np.ix_(rest, rest)] - R @ Sigma[np.ix_(pair, rest)]
            mp = m[..., pair]
            log_density = (-0.5 * np.einsum("...a,ab,...b->...", mp, np.linalg.inv(S_pp), mp) - _LOG_2PI
                           - 0.5 * np.log(np.linalg.det(S_pp)))
            sd = np.sqrt(np.diag(cond))
            k = (m[..., rest] - mp @ R.T) / sd
            rate = rate + B[i, j - 2] * np.exp(log_density + log_bvn_cdf(k[..., 0], k[..., 1],
                                                                        cond[0, 1] / (sd[0] * sd[1])))
    return rate


def _cross_integral(m, G1, G2, V, nodes):
    """``P(V_12) - P(0) = int_0^{V_12} dP/dv dv`` of one pattern and output (:func:`_cross_rate`), by a
    ``nodes``-point Gauss-Legendre rule; ``m`` the signed differences' means, ``(..., 4)``."""
    B = (G1 * ENTRY_VAR) @ G2.T
    own = (V[0, 0] * (G1 * ENTRY_VAR) @ G1.T, V[1, 1] * (G2 * ENTRY_VAR) @ G2.T)
    total = 0.0
    for xn, wn in zip(*np.polynomial.legendre.leggauss(nodes)):
        vn = 0.5 * V[0, 1] * (1.0 + xn)
        total = total + 0.5 * V[0, 1] * wn * _cross_rate(m, np.block([[own[0], vn * B], [vn * B.T, own[1]]]), B)
    return total


def exact_log_z(c: float, t, omega, V, nodes: int = CROSS_NODES):
    r"""``log Z_out`` of the law with the residuals' cross-covariance ``V_12``, to all orders in ``V_12``.

    Per pattern ``P`` the signed differences ``X = (G_1 e(h_1), G_2 e(h_2))`` (:func:`_signed_rows`) are a
    four-variate normal of mean ``m = (G_1 e(omega_1), G_2 e(omega_2))`` and covariance
    ``Sigma(V_12)``, whose blocks are ``V_ll' G_l Lambda G_l'^T`` (``Lambda = diag(2, 1, 2)``), so the pattern's
    probability is the orthant probability ``P(V_12) = Phi_Sigma(m)``.  Plackett's identity (the heat equation
    of the normal law) gives ``dP/dV_12 = sum_{ij} B_ij d^2 Phi_Sigma/(dm_i dm_j)``, ``B = G_1 Lambda G_2^T``, a
    bivariate density times a bivariate orthant probability (:func:`_cross_rate`); so

    .. math::  Z_{\rm out}(t) = \sum_P\Big(a_P b_P + \int_0^{V_{12}} \frac{dP}{dv}\,dv\Big),

    the integral by a ``nodes``-point Gauss-Legendre rule (the integrand is analytic in ``v`` while
    ``Sigma(v)`` stays positive definite, as it does between ``0`` and a covariance ``V``).  To rounding
    :func:`pair_log_z`'s zeroth order at ``V_12 = 0``, and its slope in ``V_12`` there is the first order's.
    Arguments as :func:`pair_log_z`; raises ``ValueError`` naming ``V`` if it is not positive definite.
    """
    V = _check_V(V)
    if np.linalg.eigvalsh(V)[0] <= 0:
        raise ValueError(f"V must be positive definite (V_12^2 < V_11 V_22), got {V.tolist()}")
    nodes = v.integer("nodes", nodes, minimum=1)
    t = np.broadcast_to(np.asarray(t, dtype=float), omega.shape[:-3] + (2,))
    log_z0, _ = _log_z_parts(c, t, omega[..., 0, :, :], omega[..., 1, :, :], V)
    if V[0, 1] == 0.0:
        return log_z0
    z = np.exp(log_z0)
    e1, e2 = entries(omega[..., 0, :, :]), entries(omega[..., 1, :, :])
    for tt in PATTERNS:
        at = np.all(t == np.array(tt), axis=-1)
        if not np.any(at):
            continue
        for s in PATTERNS:
            G1, G2 = _signed_rows(c, s, tt)
            z[at] += _cross_integral(np.concatenate([e1[at] @ G1.T, e2[at] @ G2.T], axis=-1), G1, G2, V, nodes)
    if not np.all(z > 0):
        raise FloatingPointError(f"Z_out is not positive at V = {V.tolist()}: the quadrature over V_12 with "
                                 f"nodes={nodes} failed")
    return np.log(z)


def bayes_moments_direct(c: float, q, Q0, shared, q12: float, log_z=exact_log_z) -> np.ndarray:
    r"""``F_hat`` (``2 x 2``) of the module docstring on the fixed Sobol set, the outputs summed exactly.

    ``log_z`` is the output function's ``log Z_out``: :func:`exact_log_z` (the state evolution's), or
    :func:`pair_log_z` (its first order, to measure what that leaves out).

    ``omega = chol(Q) z`` entry by entry on the ``2^SOBOL_LOG2`` six-dimensional Sobol normals of
    :func:`~aimlib.channels.deep_patterns.fisher_matrix_direct` (the same points: at ``q12 = 0`` the
    two agree to the differences' rounding).  A deterministic function of ``(q, q12)``.
    """
    Q, V = pair_law(q, Q0, shared, q12)
    z = sobol_normals(6, 2**SOBOL_LOG2, SOBOL_SEED)
    rho = Q[0, 1] / np.sqrt(Q[0, 0] * Q[1, 1])
    scale = np.sqrt(ENTRY_VAR)
    o1 = symmetric_matrix(np.sqrt(Q[0, 0]) * z[:, :3] * scale)
    o2 = symmetric_matrix(np.sqrt(Q[1, 1]) * (rho * z[:, :3] + np.sqrt(1.0 - rho * rho) * z[:, 3:]) * scale)
    omega = np.stack([o1, o2], axis=1)
    F = np.zeros((2, 2))
    for t in PATTERNS:
        tt = np.broadcast_to(np.array(t), (len(z), 2))
        F += entry_products(np.exp(log_z(c, tt, omega, V)), pair_g_out(c, tt, omega, V, log_z=log_z))
    return F


def bayes_moment_matrix(ch, q, Q0, shared, q12: float, *, direct_zero=None) -> np.ndarray:
    """The channel side of the coupled Bayes state evolution: ``F_hat(q, q12)`` as the tabulated
    :meth:`~aimlib.channels.DeepAttention.moment_matrix` ``(q, Q0, 2, shared)`` plus
    ``bayes_moments_direct(q12) - bayes_moments_direct(0)`` (module docstring); exactly the tabulated
    matrix at ``q12 = 0``.  ``direct_zero``, if given, is ``bayes_moments_direct`` at ``q12 = 0``
    (to skip recomputing it)."""
    q12 = v.real("q12", q12)
    F = np.asarray(ch.moment_matrix(tuple(q), tuple(Q0), 2, tuple(shared)), dtype=float)
    if q12 == 0.0:
        return F
    zero = bayes_moments_direct(ch.c, q, Q0, shared, 0.0) if direct_zero is None else np.asarray(direct_zero)
    return F + bayes_moments_direct(ch.c, q, Q0, shared, q12) - zero
