r"""The two steps of one GAMP-RIE iteration, for ``L`` index matrices (one denoiser each).

Channel step (book chapter "GAMP-RIE"), for every layer ``l`` with current
estimate ``S_l`` and predicted error ``m_l``:

.. math::

    V_{l,ab} &= \Sigma_{ab} m_l, \qquad
    \omega^\mu_l = h^\mu(S_l) - \Sigma \odot \sum_{l'} O_{ll'}\, g^\mu_{l',\rm prev}, \qquad
    g^\mu = g_{\rm out}(y^\mu, \omega^\mu, m), \\
    \hat F_{ll'} &= \frac{2}{d^2} \sum_\mu \sum_{a\le b} \Sigma_{ab}\, g^\mu_{l,ab} g^\mu_{l',ab}, \qquad
    B_l = \frac{2}{d}\, h^*(G_l) = \frac{2}{d}\frac{1}{\sqrt d}
         \Big[\sum_\mu X_\mu^\top G^\mu_l X_\mu - \Big(\sum_\mu \sum_a g^\mu_{l,aa}\Big) I_d\Big], \\
    R_l &= S_l + \sum_{l'} (\hat F^{-1})_{ll'} B_{l'}, \qquad \Delta_l = (\hat F^{-1})_{ll},
    \qquad G_{aa} = g_{aa},\; G_{ab} = g_{ab}/2 .

``B = F_hat (S - S_hat) + F_hat^{1/2} xi`` (the Nishimori identity ``-E[dg_l/domega_l'] = E[g_l g_l']``),
so ``R_l`` is the teacher ``S_l`` seen through Gaussian noise of variance ``Delta_l``.  One
layer: ``Delta = 1/F_hat``.  Layers whose outputs are correlated (a cross term ``F_12 != 0``,
book chapter "Deep attention") need the full matrix ``F_hat``; with its diagonal alone ``R_1``
would carry the other layer's error ``(F_12/F_11)(S_2 - S_hat_2)``.  A channel whose output
factorises over its indices (``joint_output`` false: heads side by side) has ``dg_l/domega_l' = 0``
for ``l != l'`` on every sample, and keeps the diagonal.

Prior step: ``(S_l, m_l) <- prior_l.denoise(R_l, Delta_l)`` (:mod:`aimlib.priors`: for the Wishart
prior the RIE of ``R_l`` and ``m_l = mmse_S(Delta_l; rho_l)``), with the Onsager term ``o_l``, the
denoiser's mean divergence times ``Delta_l``.

The Onsager matrix ``O`` of the next channel step (:func:`onsager_rows`) is the derivative of each
layer's new estimate with respect to each layer's backward pass: ``R_l`` reads every ``B_l'`` through
``(F_hat^{-1})_{ll'}``, so ``O_{ll'} = (o_l / Delta_l) (F_hat^{-1})_{ll'}``.  Its diagonal is ``o_l``,
the one-layer term; its off-diagonal entries remove from ``omega_l`` the part of sample ``mu``'s own
``g_l'`` that reached layer ``l``'s estimate through ``R_l`` (book chapter "Correlated layers").

``h`` and its adjoint ``h^*`` are the index operator ``p.index`` (:class:`aimlib.index_map.IndexMap`):
the per-sample ``d x d`` matrices are never built, the forward pass is ``(X S_l) X^T`` and the
backward pass ``X^T G X``, fused chunk by chunk with ``g_out`` (:func:`message_pass`, the one loop of
the symmetric and the square channel steps), so memory is ``O(n T d + d^2)`` per layer plus the chunk.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import to_host
from ..channels import sigma2
from ..channels.deep_bayes_cross import cross_g_out
from ..errors import ConvergenceError

__all__ = ["channel_step", "channel_sums", "message_pass", "omega_map", "pair_weights", "prior_step", "onsager_rows",
           "diagonal_rows", "initial_state", "DELTA_MIN", "chunk_size_for"]

#: the prior step's noise floor: a layer whose every ``Delta`` is below this is observed exactly and keeps
#: ``R`` (ten times the smallest noise that aimlib.rmt and the priors accept, ``_validate.DELTA_RANGE``).
#: A floor on a noise, not on an error: GAMP-RIE's ``m_floor`` is the error below which a run is perfect
DELTA_MIN = 10 * v.DELTA_RANGE[0]


def chunk_size_for(T: int, d: int, itemsize: int, memory_mb: float) -> int:
    """Samples per chunk so that the chunk's work arrays stay within ``memory_mb``.

    A chunk of ``c`` samples holds ``X S_hat`` and ``G X`` (each ``c T d``
    numbers) plus a few ``c T^2`` arrays: ``3 c T d + 8 c T^2`` numbers of
    ``itemsize`` bytes.
    """
    T, d = v.integer("T", T, minimum=2), v.integer("d", d, minimum=1)
    itemsize, memory_mb = v.integer("itemsize", itemsize, minimum=1), v.positive("memory_mb", memory_mb)
    per_sample = (3 * T * d + 8 * T * T) * itemsize
    return max(1, int(memory_mb * 2**20 // per_sample))


def _g_out(channel, y, omega, m):
    """The channel's ``g_out`` with the layer axis kept: ``omega`` and the result are ``(c, L, T, T)``;
    ``m`` one variance per layer, or the residuals' ``2 x 2`` covariance (the joint denoiser:
    :func:`~aimlib.channels.deep_bayes_cross.cross_g_out`)."""
    if np.ndim(m) == 2:
        return cross_g_out(channel, y, omega, m)
    if channel.n_indices == 1:
        return channel.g_out(y, omega[:, 0], float(m[0]))[:, None]
    return channel.g_out(y, omega, tuple(float(x) for x in m))


def _residual_variances(p, V, V_ons):
    """What ``g_out`` takes: each layer's ``V_l``, or with the joint denoiser (``p.joint.joint``) the ``2 x 2``
    matrix whose off-diagonal is the Onsager matrix's, which is the posterior cross-covariance
    (:mod:`aimlib.priors.joint_pair`)."""
    m = [x for (x,) in V]
    if p.joint is None or not p.joint.joint:
        return m
    return np.array([[m[0], V_ons[0][1]], [V_ons[1][0], m[1]]])


def channel_step(p, S_hat, V, V_ons, g_prev, g_new, t):
    """Forward, ``g_out`` and backward pass over all samples; return ``(delta, R, None, cov)``.

    ``p`` is the validated problem (:class:`aimlib.amp.problem.Problem`), ``S_hat``
    a list of ``L`` estimates, ``V`` their predicted errors (``g_out``'s variances)
    and ``V_ons`` the rows of the Onsager matrix ``O`` (:func:`onsager_rows`,
    :func:`diagonal_rows` at the first iteration), ``g_prev`` the last
    (damped) channel outputs ``(n, L, T, T)``; the new ones are written to
    ``g_new`` (damped with ``g_prev`` when ``p.damp_g`` and ``t > 1``).  With
    ``p.shards`` (:class:`aimlib.amp.shards.Shards`) the sums come from the shards,
    which hold their own outputs, and ``g_prev``, ``g_new`` are not used.  ``delta`` are
    the layers' noises ``(Delta_l,)``, ``R`` their effective observations and ``cov`` the
    noises' covariance ``F_hat^{-1}`` (``L x L``).
    """
    m, ons = _residual_variances(p, V, V_ons), np.array(V_ons, dtype=float)
    if p.shards is None:
        B, sum_w, sum_tr = channel_sums(p, S_hat, m, ons, g_prev, g_new, t)
    else:
        B, sum_w, sum_tr = p.shards.channel_sums(S_hat, m, ons, t)
    if not p.channel.joint_output:      # factorised outputs: dg_l/domega_l' = 0 exactly for l != l'
        sum_w = np.diag(np.diag(sum_w))
    if not (np.all(np.isfinite(sum_w)) and np.all(np.isfinite(sum_tr))):
        raise ConvergenceError("g_out returned non-finite values")
    return _effective_observations(S_hat, [p.index.from_sums(Bl, tr) for Bl, tr in zip(B, sum_tr)], sum_w,
                                   p.d, p.xp)


def message_pass(p, S_hat, omega, g_out, moments, weight, g_prev, g_new, t):
    r"""The chunk loop of a channel step, fused through the index operator ``p.index``.

    For each chunk of samples (:meth:`aimlib.index_map.IndexMap.chunks`): the indices
    ``h(S_l)`` of every layer (``(c, L, T, T)``), ``omega(h, g_prev)`` (the Onsager
    correction with the chunk's last outputs), ``g = g_out(y, omega)``, damped with
    ``g_prev`` when ``p.damp_g`` and ``t > 1`` and written to ``g_new``, then the
    adjoint sums of ``G_l = weight * g_l`` (``weight`` ``(T, T)`` or None for ``G = g``)
    and ``moments(g)`` (a host array).  Only one chunk's work arrays are held.

    Returns ``(B, mom, tr)``: ``B_l = sum_mu X_mu^T G~^mu_l X_mu`` (``(L, d, d)``), the sum of
    ``moments`` over the chunks and ``tr_l = sum_mu Tr G^mu_l`` (host ``(L,)``); they add up over
    disjoint sets of samples, and :meth:`~aimlib.index_map.IndexMap.from_sums` makes ``h^*(G_l)``.
    """
    xp, dt, d, L, index = p.xp, p.dtype, p.d, len(S_hat), p.index
    B, tr, mom = xp.zeros((L, d, d), dtype=dt), np.zeros(L), 0.0
    for s, Xc in index.chunks():
        c = Xc.shape[0]
        h = xp.stack([index.indices(Xc, S) for S in S_hat], axis=1)
        g = xp.asarray(g_out(p.y[s:s + c], omega(h, g_prev[s:s + c])), dtype=dt)
        if p.damp_g and t > 1:
            g = (1.0 - p.damping) * g + p.damping * g_prev[s:s + c]
        g_new[s:s + c] = g
        mom = mom + moments(g)
        G = g if weight is None else g * weight
        for ell in range(L):        # one layer at a time: one (c, T, d) product held
            Bc, trc = index.sums(Xc, G[:, ell])
            B[ell] += Bc
            tr[ell] += float(trc)
    return B, mom, tr


def pair_weights(T: int, xp, dt):
    """``(T, T)`` weights that turn a symmetric channel's ``g`` (one entry per pair ``a <= b``) into the
    ``G`` of the adjoint ``h^*`` (both triangles): ``G_aa = g_aa``, ``G_ab = g_ab / 2``."""
    return xp.full((T, T), 0.5, dtype=dt) + 0.5 * xp.eye(T, dtype=dt)


def channel_sums(p, S_hat, m, ons, g_prev, g_new, t):
    r"""The sums of one channel step over the samples of ``p`` (:func:`message_pass`).

    Returns ``(B, W, tr)``: per layer ``B_l = sum_mu X_mu^T G^mu_l X_mu`` (``d x d``,
    ``G_aa = g_aa``, ``G_ab = g_ab / 2``), ``W_{ll'} = sum_mu sum_{a<=b} Sigma_ab
    g^mu_{l,ab} g^mu_{l',ab}`` and ``tr_l = sum_mu sum_a g^mu_{l,aa}`` (module docstring);
    ``m`` are each layer's variance and ``ons`` the ``L x L`` Onsager matrix.  Sums over
    disjoint sets of samples add up, which is how shards combine.
    """
    xp, dt, T = p.xp, p.dtype, p.T
    w_pairs = xp.full((T, T), 0.5, dtype=dt) + 1.5 * xp.eye(T, dtype=dt)   # sum_{a<=b} Sigma g^2
    return message_pass(p, S_hat, omega_map(ons, T, xp, dt), lambda y, om: _g_out(p.channel, y, om, m),
                        lambda g: to_host(xp.einsum("nlab,nmab,ab->lm", g, g, w_pairs)), pair_weights(T, xp, dt),
                        g_prev, g_new, t)


def omega_map(ons, T: int, xp, dt):
    r"""The Onsager-corrected estimates of a channel step, ``omega(h, g_prev)`` (module docstring):
    ``omega_l = h_l - Sigma (.) sum_l' O_ll' g_l',prev`` for indices ``h`` and last outputs ``g_prev`` of shape
    ``(c, L, T, T)``, with ``O`` the ``L x L`` Onsager matrix ``ons`` (:func:`onsager_rows`)."""
    sig2 = sigma2(T, xp, dt)
    ons = np.asarray(ons, dtype=float)
    own = xp.asarray(np.diag(ons), dtype=dt)[:, None, None] * sig2
    off = ons - np.diag(np.diag(ons))
    cross = xp.asarray(off, dtype=dt) if np.any(off) else None     # one layer, or factorised outputs: none

    def omega(h, gp):
        om = h - own * gp
        return om if cross is None else om - sig2 * xp.einsum("lk,nkab->nlab", cross, gp)

    return omega


def _effective_observations(S_hat, H, sum_w, d, xp):
    """``(Delta, R, None, F_hat^{-1})`` from the sums of one channel step: ``R = S_hat + (2/d) F_hat^{-1} h^*(G)``."""
    if np.any(np.diag(sum_w) <= 0.0):
        raise ConvergenceError("all g_out values of a layer vanish, so its effective noise Delta is infinite")
    F_hat = 2.0 * sum_w / (d * d)
    scale = np.sqrt(np.diag(F_hat))      # layers on different scales (one m collapsing) are not singular
    corr = F_hat / np.outer(scale, scale)
    if np.linalg.cond(corr) > 1e12:
        raise ConvergenceError(f"the layers' output moment matrix is singular (condition number of its "
                               f"correlations {np.linalg.cond(corr):.3g}): some layers' g_out are proportional on "
                               "every sample, so one denoiser per layer cannot tell them apart (as for three "
                               "hardmax layers at the uninformative start)")
    F_inv = np.linalg.inv(corr) / np.outer(scale, scale)
    R = []
    for ell in range(len(S_hat)):
        Rl = S_hat[ell] + sum((2.0 * float(F_inv[ell, k]) / d) * Hk for k, Hk in enumerate(H))
        R.append((Rl + Rl.T) / 2)
        if not bool(xp.all(xp.isfinite(R[-1]))):
            raise ConvergenceError("the effective observation R is not finite")
    return [(float(x),) for x in np.diag(F_inv)], R, None, F_inv


def onsager_rows(ons, delta, cov):
    r"""The rows of the Onsager matrix of the next channel step, ``O_{ll'} = (o_l / \Delta_l) (F_hat^{-1})_{ll'}``.

    Parameters
    ----------
    ons : list of one-entry tuples
        Each layer's Onsager term ``o_l`` from its prior step (the mean divergence of its
        denoiser times ``Delta_l``).
    delta : list of one-entry tuples
        The noises ``Delta_l = (F_hat^{-1})_{ll}`` that the denoisers were given.
    cov : (L, L) array or None
        ``F_hat^{-1}`` of the channel step that made their inputs; ``None`` (the square
        channel step, one layer) returns ``ons`` unchanged.

    Returns
    -------
    list of L-entry tuples (or ``ons``)
        Row ``l`` holds ``O_{ll'}`` for every ``l'``; the diagonal is ``o_l`` exactly.
    """
    if cov is None:
        return ons
    return [tuple(o if k == ell else (o / dl if o else 0.0) * float(c) for k, c in enumerate(row))
            for ell, ((o,), (dl,), row) in enumerate(zip(ons, delta, cov))]


def diagonal_rows(ons) -> list:
    """``[(o_1,), (o_2,), ...]`` as the rows of the diagonal Onsager matrix (the first iteration's)."""
    L = len(ons)
    return [tuple(o if k == ell else 0.0 for k in range(L)) for ell, (o,) in enumerate(ons)]


def initial_state(p, init_m=None):
    """The state before the first iteration: ``(S_hat, V, V_ons, g_prev, g_new)``.

    ``S_hat`` is ``p.init`` or each prior's mean; ``V`` each prior's per-sector error without data,
    or ``init_m`` (one value per layer); ``V_ons`` the Onsager rows (``V`` itself for a square
    channel, ``p.channel.square``, else :func:`diagonal_rows`); the message buffers hold ``n``
    samples (none with shards, which hold their own).
    """
    xp, L = p.xp, len(p.priors)
    S_hat = p.init or [pr.mean(p.d, xp, p.dtype) for pr in p.priors]
    V = ([tuple(pr.sector_mmse((math.inf,) * len(pr.sectors))) for pr in p.priors] if init_m is None
         else [(float(x),) for x in init_m])
    g_prev = xp.zeros((p.n if p.shards is None else 0, L, p.T, p.T), dtype=p.dtype)
    return S_hat, V, (V if p.channel.square else diagonal_rows(V)), g_prev, xp.empty_like(g_prev)


def prior_step(p, R, delta, noise=None, cov=None):
    """Each layer's prior denoises its ``R``: ``(S_new, V, O)``, lists over layers of per-sector tuples,
    ``O`` the rows of the next channel step's Onsager matrix (:func:`onsager_rows` with ``cov``, the
    noises' covariance ``F_hat^{-1}``).

    :meth:`aimlib.priors.base.Prior.denoise` (the RIE for the Wishart prior); a layer
    whose every ``Delta < DELTA_MIN`` keeps ``R`` with zero errors.  With ``p.joint``
    (:class:`~aimlib.priors.joint_pair.JointPair`) the two layers are denoised together and
    ``O`` is their posterior covariance (each layer alone: :func:`onsager_rows` of its diagonal).
    """
    if p.joint is not None:
        S_new, V, C = p.joint.denoise(R, cov)
        if not (np.all(np.isfinite(C)) and all(bool(p.xp.all(p.xp.isfinite(S))) for S in S_new)):
            raise ConvergenceError(f"the joint prior step of {p.joint!r} is not finite "
                                   f"(cov={np.asarray(cov).tolist()})")
        ons = [tuple(map(float, row)) for row in C] if p.joint.joint else \
            onsager_rows([(float(C[0, 0]),), (float(C[1, 1]),)], delta, cov)
        return [p.xp.asarray(S, dtype=p.dtype) for S in S_new], V, ons
    S_new, V, V_ons = [], [], []
    for ell, (prior, Rl, dl) in enumerate(zip(p.priors, R, delta)):
        dl = tuple(float(x) for x in np.atleast_1d(dl))
        if max(dl) < DELTA_MIN:
            S_new.append(Rl)
            V.append((0.0,) * len(dl))
            V_ons.append((0.0,) * len(dl))
            continue
        S, Vl, Ol = prior.denoise(Rl, dl, noise=None if noise is None else noise[ell])
        S_new.append(p.xp.asarray(S, dtype=p.dtype))
        if not (all(map(math.isfinite, Vl + Ol)) and bool(p.xp.all(p.xp.isfinite(S_new[-1])))):
            raise ConvergenceError(f"the prior step of {prior!r} is not finite (Delta={dl})")
        V.append(tuple(float(x) for x in Vl))
        V_ons.append(tuple(float(x) for x in Ol))
    return S_new, V, onsager_rows(V_ons, delta, cov)
