r"""Moments of layered channels under the law that GAMP-RIE's estimates meet (book, chapter
"Correlated layers").

Two layers ``l = 1, 2`` with one denoiser each leave the estimates' residuals a cross-covariance
``e_12`` (of three layers, layers 1 and 2: the third keeps none).  Given the estimates ``omega`` the
indices are then ``h = M omega + K^{1/2} xi`` (:func:`residual_law`), not ``N(omega, V)`` as
:meth:`~aimlib.channels.DeepAttention.g_out` assumes.  Under that law, with the weights of the state evolution
(``2 sum_{a<=b} Sigma_ab``, as in ``F``),

.. math::  F_{ll'} = 2\sum_{a\le b}\Sigma_{ab}\,\mathbb E[g_{l,ab}\,g_{l',ab}],\quad
           \Gamma_{ll'} = 2\sum_{a\le b}\Sigma_{ab}\,
               \mathbb E\Big[\frac{\partial g_{l,ab}}{\partial h_{l',ab}}\Big],\quad
           \Lambda_{ll'} = 2\sum_{a\le b}\Sigma_{ab}\,
               \mathbb E\Big[\frac{\partial g_{l,ab}}{\partial \omega_{l',ab}}\Big].

The backward pass reads ``B = alpha (Gamma S + Lambda S_hat) + noise``, so the input of the
layers' denoisers is ``R = F^{-1} Gamma S + (I + F^{-1} Lambda) S_hat + noise``: the *mixing*
``F^{-1} Gamma`` and the *memory* ``I + F^{-1} Lambda``.  Where the law is the one ``g_out``
assumes (``e_12 = 0``) the Nishimori identities give ``Gamma = -Lambda = F``, mixing ``I`` and
memory ``0``; their off-diagonal entries at ``e_12 != 0`` put a part of the other layer's
teacher into each input.  ``Gamma`` is estimated by Stein's identity,
``E[dg/dh] = E[g (K^{-1}(h - M omega))/Sigma]``; ``Lambda`` by central differences of ``g_out``
in ``omega`` at fixed outputs.

Along a run nothing need be assumed of the law: :func:`input_teacher_parts` reads the teachers' parts in the
inputs off a channel step's own outputs and indices, and :func:`index_moments` with :func:`draw_gaussian` keeps
that step's law to its second moments.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from .base import sample_indices, sigma2

__all__ = ["residual_law", "law_moments", "draw_law", "response_moments", "sample_moments", "teacher_parts",
           "ResponseMoments", "index_moments", "draw_gaussian", "input_teacher_parts"]

#: index entries ``a <= b`` of a ``2 x 2`` index matrix, and their weights ``Sigma_ab``
_IU = np.triu_indices(2)
_SIGMA = sigma2(2)[_IU]


def _estimates_covariance(q, s, cross: float, L: int) -> tuple:
    """``(C, Omega)``: ``C`` with ``e_12 = cross`` at ``(1, 2)`` and ``(2, 1)``, and the estimates' covariance
    ``Omega = sqrt(s s^T) + diag(q - s) + C``."""
    C = np.zeros((L, L))
    C[0, 1] = C[1, 0] = cross
    root = np.sqrt(np.asarray(s, dtype=float))
    return C, np.outer(root, root) + np.diag(np.asarray(q, dtype=float) - s) + C


def residual_law(q, Q0, s, cross: float, L: int):
    r"""``(M, K^{1/2}, w)``: ``h = M omega + K^{1/2} xi`` given the estimates, and the signs ``w`` of the
    estimates' shared draw ``sqrt(|e_12|) w_l z_12`` (:func:`draw_law`).

    With ``C`` the ``L x L`` matrix with ``e_12 = cross`` at ``(1, 2)`` and ``(2, 1)`` (layers 1 and 2;
    a third layer, ``L = 3``, keeps no cross term: ``F_13 = F_23 = 0`` for centred teachers) and
    ``Omega`` the estimates' covariance (``sqrt(s_l s_l') + (q_l - s_l) delta_ll' + C``),
    ``M = I - C Omega^{-1}`` and ``K = diag(Q0 - q) + C - C Omega^{-1} C``; at ``cross = 0``,
    ``M = I`` and ``K = diag(V)``.  The law exists while ``e_12^2 < (q_1 - s_1)(q_2 - s_2)`` and ``K``
    is positive definite.
    """
    if L < 2:
        raise ValueError(f"the law with a cross term needs at least two layers, got L={L!r}")
    V = np.asarray(Q0) - q
    if not cross:
        return np.eye(L), np.diag(np.sqrt(V)), None
    C, Omega = _estimates_covariance(q, s, cross, L)
    own = np.asarray(q) - s
    too_large = own[0] * own[1] <= cross * cross
    if not too_large:
        K = np.diag(V) + C - C @ np.linalg.solve(Omega, C)
        too_large = np.linalg.eigvalsh(K).min() <= 0
    if too_large:
        raise ValueError(f"cross = {cross!r} is too large for the overlaps q = {q} and known parts {s}: the "
                         "joint law of the indices and the estimates is not a covariance (cross^2 must stay "
                         "below (q_1 - s_1)(q_2 - s_2) and leave h | omega a positive variance)")
    w = np.zeros(L)
    w[:2] = 1.0, np.sign(cross)
    return np.eye(L) - C @ np.linalg.inv(Omega), np.linalg.cholesky(K), w


def law_moments(q, Q0, s, cross: float, L: int) -> np.ndarray:
    r"""The ``2L x 2L`` second moments of ``x = (h, omega)`` per unit of ``Sigma`` under the law of
    :func:`residual_law`, in the order of :func:`index_moments`:

    .. math::  \mathrm{Var}(\omega) = \Omega,\qquad \mathrm{Cov}(h, \omega) = \Omega - C,\qquad
               \mathrm{Var}(h) = \sqrt{s s^\top} + \mathrm{diag}(Q_0 - s),

    from ``h = M omega + K^{1/2} xi``: ``M Omega = Omega - C`` and ``M Omega M^T + K = Omega - C + diag(Q0 - q)``.
    At ``cross = 0`` the estimates' norm equals their overlap (the Nishimori identity) and ``h | omega`` has
    variance ``Q0 - q``, the law ``g_out`` assumes.  Refused where :func:`residual_law` refuses the law.
    """
    residual_law(q, Q0, s, cross, L)
    C, Omega = _estimates_covariance(q, s, cross, L)
    overlap = Omega - C
    return np.block([[overlap + np.diag(np.asarray(Q0, dtype=float) - q), overlap], [overlap, Omega]])


def draw_law(q, Q0, s, cross: float, L: int, n: int, rng):
    r"""``n`` draws ``(omega, h, r, K^{1/2})`` of the estimates and the indices, ``r = h - M omega``.

    Where ``|e_12| < q_l - s_l`` for ``l = 1, 2`` (and always at ``e_12 = 0``),
    ``omega_l = sqrt(s_l) z_0 + sqrt(q_l - s_l - |e_12| w_l^2) z_l + sqrt(|e_12|) w_l z_12`` (each ``z``
    ``N(0, Sigma)`` per entry, drawn from ``rng`` in that order; ``w = (1, sign e_12, 0)``: a third
    layer shares no draw); otherwise the same law with layer 2 drawn from layer 1's own part
    ``u_1 = omega_1 - sqrt(s_1) z_0``, ``omega_2 = sqrt(s_2) z_0 + (e_12/(q_1 - s_1)) u_1 +
    sqrt(q_2 - s_2 - e_12^2/(q_1 - s_1)) z_2`` (the estimates barely informed, where ``e_12`` is of
    the order of ``sqrt(q_1 q_2)``).  Then ``h = M omega + K^{1/2} xi`` (:func:`residual_law`).  ``rng`` is a seed
    or a Generator, one Generator for all the draws.
    """
    mean, chol, w = residual_law(q, Q0, s, cross, L)
    rng = v.generator(rng)
    own = np.asarray(q, dtype=float) - s
    shared = w is not None and min(own[:2]) > abs(cross)
    z0 = sample_indices(n, 2, 1.0, rng)
    share = np.abs(cross) * w * w if shared else np.zeros(L)
    if w is not None and not shared:
        share[1] = cross * cross / own[0]
    omega = np.stack([np.sqrt(s[l]) * z0 + sample_indices(n, 2, own[l] - share[l], rng) for l in range(L)], axis=1)
    xi = np.stack([sample_indices(n, 2, 1.0, rng) for _ in range(L)], axis=1)
    if shared:
        omega += np.sqrt(abs(cross)) * np.einsum("l,nab->nlab", w, sample_indices(n, 2, 1.0, rng))
    elif w is not None:
        omega[:, 1] += cross / own[0] * (omega[:, 0] - np.sqrt(s[0]) * z0)
    r = np.einsum("lm,nmab->nlab", chol, xi)
    return omega, np.einsum("lm,nmab->nlab", mean, omega) + r, r, chol


def _weighted_mean(u, w):
    """``2 sum_k Sigma_k mean_n(u_nlk w_nmk)`` per batch: shape ``(batches, L, L)``."""
    return 2 * np.einsum("bnlk,bnmk,k->blm", u, w, _SIGMA) / u.shape[1]


@dataclass(frozen=True)
class ResponseMoments:
    """``F``, ``Gamma``, ``Lambda`` (:mod:`aimlib.channels.deep_moments`), the mixing ``F^{-1} Gamma`` and
    the memory ``I + F^{-1} Lambda``, each an ``(L, L)`` mean over batches with its standard error
    (``Lambda`` and the memory ``None`` where they were not asked for)."""

    F: np.ndarray
    Gamma: np.ndarray
    Lambda: np.ndarray
    mixing: np.ndarray
    memory: np.ndarray
    se: dict


def _finite_difference(ch, y, omega, V, eps: float):
    """``2 sum_k Sigma_k dg_{l,k}/d omega_{m,k}`` per sample by central differences: ``(n, L, L)``."""
    n, L = omega.shape[:2]
    out = np.zeros((n, L, L))
    for m in range(L):
        for k, (a, b) in enumerate(zip(*_IU)):
            step = np.zeros_like(omega)
            step[:, m, a, b] = step[:, m, b, a] = eps
            dg = ch.g_out(y, omega + step, V)[..., a, b] - ch.g_out(y, omega - step, V)[..., a, b]
            out[:, :, m] += 2 * _SIGMA[k] * dg / (2 * eps)
    return out


def sample_moments(ch, y, omega, V, g=None, eps: float = 1e-4) -> tuple:
    r"""``(F, Lambda)`` (module docstring) as means over the given samples, under whatever law they have.

    Along a GAMP-RIE run these are the two estimates of each layer's Fisher information that its channel
    step can form, ``F`` from the outputs' squares and ``-Lambda`` from their derivatives in the estimates
    (the Nishimori identity ``-E[dg_l/domega_l'] = E[g_l g_l']`` makes them equal where ``h | omega`` has the
    law ``g_out`` assumes).  ``y``, ``omega`` as :meth:`~aimlib.channels.DeepAttention.g_out` takes them
    (host arrays, ``T = 2``), ``V`` the variances ``g_out`` is given, ``g`` its outputs if already at hand,
    ``eps`` the step of the central differences.
    """
    g = ch.g_out(y, omega, V) if g is None else g
    gk = np.asarray(g)[None, ..., _IU[0], _IU[1]]          # one batch: all the samples
    return _weighted_mean(gk, gk)[0], _finite_difference(ch, y, omega, V, v.positive("eps", eps)).mean(axis=0)


def response_moments(ch, q, Q0, *, shared=0.0, cross: float = 0.0, n: int = 200_000, batches: int = 10,
                     seed=0, eps: float = 1e-4, memory: bool = True) -> ResponseMoments:
    r"""``F``, ``Gamma``, ``Lambda``, the mixing ``F^{-1} Gamma`` and the memory ``I + F^{-1} Lambda`` by Monte
    Carlo under the law of :func:`draw_law` (the module docstring has the formulas).

    Parameters
    ----------
    ch : DeepAttention
        Two or three hardmax layers (``T = 2``); every moment is ``L x L``.
    q, Q0 : sequences of floats, one per layer
        The estimates' overlaps and the teachers' second moments, ``0 <= q_l < Q0_l``.
    shared : float or one per layer
        The estimates' known parts ``s_l`` (Wishart teachers: ``rho_l``; centred: ``0``).
    cross : float
        The residual cross-covariance ``e_12`` (:func:`aimlib.state_evolution.cross_overlap`).
    n, batches : int
        Draws, split into ``batches`` equal batches; the standard errors are those of the batch means
        (for the mixing and the memory, of the batches' own ratios).
    seed : int or Generator
    eps : float
        Step of the central differences of ``Lambda``.
    memory : bool
        Whether to compute ``Lambda`` and the memory (twelve more calls of ``g_out``); without
        them both are ``None`` (the first-order cross overlap does not need them,
        :func:`aimlib.state_evolution.cross_fixed_point.cross_fixed_point`).
    """
    rng = v.generator(seed)
    L = ch.n_indices
    q, Q0, V, s = ch.law_args(q, Q0, shared)
    batches = v.integer("batches", batches, minimum=2)
    n = v.integer("n", n, minimum=100 * batches) // batches * batches
    omega, h, r, chol = draw_law(q, Q0, s, v.real("cross", cross), L, n, rng)
    y = ch(h, seed=rng)
    g = ch.g_out(y, omega, V)
    K_inv = np.linalg.inv(chol @ chol.T)
    score = np.einsum("lm,nmk->nlk", K_inv, r[..., _IU[0], _IU[1]]) / _SIGMA
    gk = g[..., _IU[0], _IU[1]]
    split = (batches, n // batches)
    F = _weighted_mean(gk.reshape(*split, L, 3), gk.reshape(*split, L, 3))
    Gamma = _weighted_mean(gk.reshape(*split, L, 3), score.reshape(*split, L, 3))
    parts = {"F": F, "Gamma": Gamma, "Lambda": None, "mixing": np.linalg.solve(F, Gamma), "memory": None}
    if memory:
        Lam = _finite_difference(ch, y, omega, V, v.positive("eps", eps)).reshape(*split, L, L).mean(axis=1)
        parts.update(Lambda=Lam, memory=np.eye(L) + np.linalg.solve(F, Lam))
    se = {k: x.std(axis=0, ddof=1) / np.sqrt(batches) for k, x in parts.items() if x is not None}
    return ResponseMoments(*(None if x is None else x.mean(axis=0) for x in parts.values()), se=se)


def teacher_parts(mixing, memory, q, Q0, shared=0.0) -> np.ndarray:
    r"""``P``: the part of layer ``k``'s centred teacher ``C_k`` in layer ``l``'s input, beyond ``C_l`` itself,

    .. math::  P_{lk} = (F^{-1}\Gamma)_{lk} + (I + F^{-1}\Lambda)_{lk}\,\frac{q_k - s_k}{Q_{0,k} - s_k}
               - \delta_{lk},

    since the centred part of the estimate ``S_hat_k`` overlaps ``C_k`` by ``q_k - s_k`` (book, chapter
    "Correlated layers", equation ``deep-eq-mixing``).  Off the diagonal ``a_12 = P_12``, ``a_21 = P_21``; on it
    the teacher's scale ``s_l = P_ll`` in ``R_l = (1 + s_l) C_l + ...`` (zero where the law is the one ``g_out``
    assumes: mixing ``I``, memory ``0``).  ``mixing`` and ``memory`` are ``(L, L)``
    (:class:`ResponseMoments`), ``q``, ``Q0`` and ``shared`` as :func:`response_moments` takes them.

    Raises
    ------
    ValueError
        ``mixing`` or ``memory`` not ``(L, L)`` for the ``L`` layers of ``q``, or ``Q0`` not above ``shared``.
    """
    q, Q0 = np.asarray(q, dtype=float), np.asarray(Q0, dtype=float)
    mixing, memory = np.asarray(mixing, dtype=float), np.asarray(memory, dtype=float)
    L = len(q)
    if mixing.shape != (L, L) or memory.shape != (L, L) or Q0.shape != (L,):
        raise ValueError(f"teacher_parts: mixing and memory must be {L} x {L} and Q0 hold {L} values for the {L} "
                         f"layers of q, got {mixing.shape}, {memory.shape} and {Q0.shape}")
    if np.any(Q0 <= shared):
        raise ValueError(f"teacher_parts: Q0 = {Q0} must lie above the known parts shared = {shared}")
    known = (q - shared) / (Q0 - shared)
    return mixing + memory * known[None, :] - np.eye(L)


def index_moments(h, omega) -> np.ndarray:
    r"""The ``2L x 2L`` second moments of ``x = (h_1, ..., h_L, omega_1, ..., omega_L)`` per unit of ``Sigma``.

    For indices ``x_ab ~ N(0, Sigma_ab C)`` (``a <= b``, ``T = 2``) each entry estimates ``C``;
    ``C = (1/3) sum_{a<=b} mean_n(x_ab x_ab^T) / Sigma_ab``.  ``h`` and ``omega`` are ``(n, L, 2, 2)``: a
    GAMP-RIE run's teacher indices and its estimates (what :meth:`~aimlib.channels.DeepAttention.g_out`
    is given), or draws of a law.  Its ``(l, L + k)`` entry is ``Cov(h_l, omega_k)``, the estimates'
    overlap as the channel sees it, and its lower right block their norms.
    """
    h, omega = np.asarray(h, dtype=float), np.asarray(omega, dtype=float)
    if h.shape != omega.shape or h.ndim != 4 or h.shape[2:] != (2, 2):
        raise ValueError(f"index_moments: h and omega must both be (n, L, 2, 2), got {h.shape} and {omega.shape}")
    x = np.concatenate([h, omega], axis=1)[..., _IU[0], _IU[1]]
    return np.einsum("nik,njk,k->ij", x, x, 1 / _SIGMA) / (3 * x.shape[0])


def draw_gaussian(cov, n: int, rng) -> tuple:
    r"""``n`` draws ``(omega, h)`` of indices jointly Gaussian with second moments ``Sigma_ab cov`` per entry.

    ``cov`` is ``2L x 2L`` in the order of :func:`index_moments`; ``x = cov^{1/2} z`` with ``2L`` independent
    draws ``z`` of :func:`~aimlib.channels.base.sample_indices` from ``rng`` (a seed or a Generator).  A ``cov``
    that is not symmetric positive definite gets a ``ValueError`` naming it.
    """
    cov, rng = np.asarray(cov, dtype=float), v.generator(rng)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or cov.shape[0] % 2 or not np.allclose(cov, cov.T):
        raise ValueError(f"cov must be a symmetric 2L x 2L matrix (indices, then estimates), got shape {cov.shape}")
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError(f"cov must be positive definite (a law of the indices and the estimates); its least "
                         f"eigenvalue is {np.linalg.eigvalsh(cov).min():.3g}") from None
    z = np.stack([sample_indices(n, 2, 1.0, rng) for _ in range(cov.shape[0])], axis=1)
    x = np.einsum("ij,njab->niab", chol, z)
    L = cov.shape[0] // 2
    return x[:, L:], x[:, :L]


def input_teacher_parts(g, h, overlap, Q0) -> np.ndarray:
    r"""``P``: the part of centred teacher ``C_k`` in layer ``l``'s input, from a channel step's outputs directly,

    .. math::  P_{lk} = \frac{\hat O_{lk} + (F^{-1} T)_{lk}}{Q_{0,k}} - \delta_{lk},\qquad
               F_{ll'} = 2\sum_{a\le b}\Sigma_{ab}\,\overline{g_{l,ab}\,g_{l',ab}},\quad
               T_{lk} = 2\sum_{a\le b}\overline{g_{l,ab}\,h_{k,ab}},

    means over the samples.  Why: ``R_l = S_hat_l + sum_l' (F_hat^{-1})_{ll'} B_l'`` and the adjoint of the
    indices gives ``(1/d) Tr(B_l' C_k) = alpha T_l'k`` with ``F_hat = alpha F``, so ``(1/d) Tr(R_l C_k) = O_lk +
    (F^{-1} T)_{lk}`` exactly, whatever the law of ``(h, omega)``.  ``g`` are the outputs the backward pass
    uses (damped or not) and ``h`` the teachers' centred indices, both ``(n, L, 2, 2)``; ``overlap`` is ``O_lk =
    (1/d) Tr(S_hat_l C_k)`` and ``Q0_k = (1/d) Tr(C_k^2)``.  Where ``(h, omega)`` is Gaussian, Stein's identity
    turns ``T_lk`` into ``Q0_k Gamma_lk + sum_j Lambda_lj Cov(omega_j, h_k)``, and where moreover ``O = Cov(omega,
    h)`` is diagonal, ``P`` into :func:`teacher_parts`; here nothing is assumed of the law, so on a run's own
    samples this is the run's own teacher scale (a test checks it to 1e-9).
    """
    g, h = np.asarray(g, dtype=float), np.asarray(h, dtype=float)
    if g.shape != h.shape or g.ndim != 4 or g.shape[2:] != (2, 2):
        raise ValueError(f"input_teacher_parts: g and h must both be (n, L, 2, 2), got {g.shape} and {h.shape}")
    gk = g[None, ..., _IU[0], _IU[1]]
    F = _weighted_mean(gk, gk)[0]
    T = 2 * np.einsum("nlk,nmk->lm", gk[0], h[..., _IU[0], _IU[1]]) / g.shape[0]
    parts = np.asarray(overlap, dtype=float) + np.linalg.solve(F, T)
    return parts / np.asarray(Q0, dtype=float)[None, :] - np.eye(g.shape[1])
