r"""Two attention layers as one AIM: the forward map, and for two hardmax layers at ``T = 2`` the exact Bayes side.

The network (book, chapter "Deep attention"): layer 1 mixes the
tokens, ``X_1 = A X`` with ``A = c I + sigma(h^(1))`` (``c`` the residual
strength, ``sigma`` the row-wise hardmax or softmax), and layer 2 reads the
mixed tokens, whose trace-subtracted indices are ``A h^(2) A^T`` in terms of the
indices ``h^(2)`` of the *original* tokens; the output is ``y = sigma(A h^(2) A^T)``.
So the channel reads ``L = 2`` index matrices per sample.

Bayes side (two hardmax layers, ``T = 2``): the exact sum over the four latent layer-1
patterns, :mod:`aimlib.channels.deep_patterns`.  The state evolution reads one overlap per
layer.  For centred teachers that is exact (:meth:`DeepAttention.fisher`); for teachers with
a known part ``sqrt(rho_l) I`` the layers' estimates share the index of the identity and
:meth:`DeepAttention.separable_fisher` gives the state evolution of GAMP-RIE with one
denoiser per layer (an upper bound on the Bayes error), :meth:`DeepAttention.oracle_fisher`
that of the oracle given the other layer (a lower bound).
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..errors import check_on_max_iter, max_iter_reached
from . import hardmax
from .base import Channel, sample_indices, sigma2
from .deep_patterns import (LAMBDA_MAX, PATTERNS, fisher_matrix, fisher_scaled, fisher_scaled_direct, layer1_terms,
                            layer2_terms, oracle_fisher_scaled, pattern_matrix, pattern_posterior)
from .softmax import check_beta, row_softmax

__all__ = ["DeepAttention", "limit_map", "limit_thresholds", "limit_error"]

class DeepAttention(Channel):
    """Two attention layers with residual strength ``c``: ``y = sigma(A h2 A^T)``, ``A = c I + sigma(h1)``.

    Parameters
    ----------
    c : float
        Residual strength; values for which two mixed tokens coincide under some
        layer-1 pattern (``c`` in ``{-1, 0, 1}`` for hardmax layers) are refused.
    layer : {'hardmax', 'softmax'}
        The row-wise map ``sigma`` of both layers (the Bayes side: hardmax, ``T = 2``).
    beta : float
        Inverse temperature of softmax layers.
    """

    name = "deep-attention"
    n_indices = 2
    joint_output = True

    def __init__(self, c: float = 0.5, layer: str = "hardmax", beta: float = 1.0):
        super().__init__(0.0)
        self.layer = v.choice("layer", layer, {"hardmax", "softmax"})
        self.beta = check_beta(beta)
        self.c = v.real("c", c)
        if layer == "hardmax":
            for s in PATTERNS:
                A = self.c * np.eye(2) + pattern_matrix(*s)
                if np.allclose(A[0], A[1]) or np.any(np.all(np.isclose(A, 0), axis=1)):
                    raise ValueError(f"c must make the two mixed tokens distinct under every layer-1 pattern: "
                                     f"c = {self.c:g} makes them collide (c must not be -1, 0 or 1)")

    def _params(self) -> str:
        return f"c={self.c:g}, layer={self.layer}" + (f", beta={self.beta:g}" if self.layer == "softmax" else "")

    def _sigma(self, h):
        if self.layer == "softmax":
            return row_softmax(self.beta * h)
        return hardmax.Hardmax().clean(h)

    def clean(self, h):
        """``y = sigma(A h2 A^T)`` with ``A = c I + sigma(h1)``, for ``h`` of shape ``(n, 2, T, T)``."""
        xp = get_array_module(h)
        A = self.c * xp.eye(h.shape[-1], dtype=h.dtype) + self._sigma(h[:, 0])
        return self._sigma(A @ h[:, 1] @ xp.swapaxes(A, -1, -2))

    # -- Bayes side: two hardmax layers, T = 2 ------------------------------------

    def _require_bayes(self, T: int):
        if self.layer != "hardmax" or T != 2:
            raise NotImplementedError(f"DeepAttention: the Bayes side is implemented for two hardmax layers "
                                      f"and T = 2, got layer={self.layer!r}, T={T}")

    def _log_z_and_g(self, y, omega, V):
        """``(xp, log Z_out, g)``: the pattern sum and the posterior-weighted pattern gradients."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        self._require_bayes(T)
        t = hardmax.signs_from_output(to_host(y))
        log_a, g1s = layer1_terms(to_host(omega[..., 0, :, :]), V[0])
        log_b, g2s = layer2_terms(self.c, t, to_host(omega[..., 1, :, :]), V[1])
        return (xp,) + pattern_posterior(log_a + log_b, g1s, g2s)

    def _tabulated(self, q, Q0, T):
        """Validated ``(q, Q0, V)``, refusing errors below the tabulated range ``V_l >= Q0_l/(1 + LAMBDA_MAX)``."""
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        self._require_bayes(T)
        if min(V) <= 0 or max(a / b for a, b in zip(q, V)) > LAMBDA_MAX:
            floor = tuple(float(f"{b / (1 + LAMBDA_MAX):.3g}") for b in Q0)
            raise ValueError(f"errors mmse_l below (1 + rho_l)/{1 + LAMBDA_MAX:g} = {floor} are outside the "
                             f"tabulated range of the deep-hardmax output function, got mmse = "
                             f"{tuple(float(f'{x:.3g}') for x in V)}: lower alpha, or raise rho where the error "
                             "is this small")
        return q, Q0, np.array(V)

    def fisher(self, q, Q0, T):
        r"""``(F_1, F_2) = (G_1/V_1, G_2/V_2)`` at ``lambda_l = q_l/V_l`` (:func:`~aimlib.channels.deep_patterns.fisher_scaled`).

        Independent estimates (centred teachers), where the cross term vanishes: the exact
        state evolution.  Tabulated for ``lambda_l <= LAMBDA_MAX``, that is ``V_l >= Q0_l / (1 + LAMBDA_MAX)``.
        """
        q, Q0, V = self._tabulated(q, Q0, T)
        return tuple(fisher_scaled(self.c, q[0] / V[0], q[1] / V[1]) / V)

    def separable_fisher(self, q, Q0, T, shared):
        r"""``F_l = 1 / (A^{-1})_ll``: the state evolution of GAMP-RIE with one denoiser per layer.

        Teachers ``S_l = m_l I + F_l`` with a known part of squared norm ``s_l = m_l^2``
        (``m_l >= 0``; Wishart: ``s_l = rho_l``) give the estimates ``omega_l = sqrt(s_l) z_0 +
        sqrt(q_l - s_l) z_l``, correlation ``r = sqrt(s_1 s_2 / (q_1 q_2))``.  With
        ``A_ll' = G_ll'(lambda, r) / sqrt(V_l V_l')`` (:func:`~aimlib.channels.deep_patterns.fisher_matrix`),
        GAMP's effective observations are ``R = S + (alpha A)^{-1/2} xi``: layer ``l`` sees its
        teacher through Gaussian noise of variance ``(A^{-1})_ll / alpha``, and one denoiser per
        layer reaches ``qhat_l = alpha / (A^{-1})_ll``.  A cross term ``A_12 != 0`` lowers it
        below ``alpha A_ll``.  An algorithm's error: an upper bound on the Bayes error.
        """
        q, Q0, V = self._tabulated(q, Q0, T)
        s = tuple(v.in_range(f"shared[{i}]", x, 0.0, q[i]) for i, x in enumerate(self._per_index("shared", shared)))
        r = float(np.sqrt(s[0] * s[1] / (q[0] * q[1]))) if min(q) > 0 else 0.0
        A = fisher_matrix(self.c, q[0] / V[0], q[1] / V[1], min(r, 1.0)) / np.sqrt(np.outer(V, V))
        return tuple(1.0 / np.diag(np.linalg.inv(A)))

    def oracle_fisher(self, layer: int, q: float, Q0, T, shared=(0.0, 0.0)) -> float:
        r"""``F`` of layer ``layer`` for the oracle given the other teacher: ``G / V`` (:func:`~aimlib.channels.deep_patterns.oracle_fisher_scaled`).

        ``q`` is the layer's overlap, ``Q0`` both layers' second moments, ``shared`` their known
        parts: the layer's estimate and the known index ``h_o`` (variance ``Q0_o``) share
        ``sqrt(s_l s_o) z_0``, correlation ``r = sqrt(s_l s_o / (q Q0_o))``.  Its state
        evolution is a lower bound on the layer's Bayes error.
        """
        layer = v.choice("layer", layer, {1, 2})
        Q0 = tuple(v.positive(f"Q0[{i}]", x) for i, x in enumerate(self._per_index("Q0", Q0)))
        l, o = layer - 1, 2 - layer
        q, T = v.in_range("q", q, 0.0, Q0[l]), v.integer("T", T, minimum=1)
        self._require_bayes(T)
        s = tuple(v.in_range(f"shared[{i}]", x, 0.0, Q0[i]) for i, x in enumerate(self._per_index("shared", shared)))
        V = Q0[l] - q
        if V <= 0:
            raise ValueError(f"q must be below Q0[{l}] = {Q0[l]:g} (a positive error), got {q:g}")
        r = float(np.sqrt(s[l] * s[o] / (q * Q0[o]))) if q > 0 else 0.0
        return oracle_fisher_scaled(self.c, layer, q / V, min(r, 1.0)) / V

    def log_partition(self, y, omega, V):
        """``log Z_out``: the log-probability of the output signs, summed over the four latent patterns."""
        xp, logz, _ = self._log_z_and_g(y, omega, V)
        return to_device(logz, xp)

    def g_out(self, y, omega, V):
        """``(g_1, g_2)``, each symmetric ``2 x 2``, stacked on axis ``-3``: posterior-weighted pattern gradients."""
        xp, _, g = self._log_z_and_g(y, omega, V)
        return to_device(g, xp)

    def output_moments(self, q, Q0, *, shared=(0.0, 0.0), n: int = 60_000, seed=0):
        r"""``M_{ll'} = 2 sum_{a<=b} Sigma_ab E[g_{l,ab} g_{l',ab}]`` by Monte Carlo, with standard errors.

        The estimates are ``omega_l = sqrt(s_l) z_0 + sqrt(q_l - s_l) z_l`` (``z_0, z_1, z_2``
        independent, each ``N(0, Sigma)``; ``s = shared``) and ``h_l | omega ~ N(omega_l,
        (Q0_l - q_l) Sigma)``.  Wishart teachers ``S_l = sqrt(rho_l) I + F_l`` share the index of
        the identity, ``s = rho`` (book, chapter "Deep attention"); centred teachers have
        ``s = 0``, the law of :meth:`fisher`.  The diagonal of ``M`` is ``F_l``
        under that law, the off-diagonal the cross term the diagonal state evolution drops.

        Returns
        -------
        (M, se) : two (2, 2) arrays, the moments and their standard errors.
        """
        rng = v.generator(seed)
        q, Q0, _, V = self._fisher_args(q, Q0, 2)
        s = tuple(v.in_range(f"shared[{i}]", x, 0.0, q[i]) for i, x in enumerate(np.broadcast_to(shared, (2,))))
        n = v.integer("n", n, minimum=100)
        z0 = sample_indices(n, 2, 1.0, rng)
        omega = np.stack([np.sqrt(s[l]) * z0 + sample_indices(n, 2, q[l] - s[l], rng) for l in range(2)], axis=1)
        h = omega + np.stack([sample_indices(n, 2, V[l], rng) for l in range(2)], axis=1)
        iu = np.triu_indices(2)
        g = self.g_out(self(h, seed=rng), omega, V)[..., iu[0], iu[1]]
        terms = 2 * np.einsum("nlk,nmk,k->nlm", g, g, sigma2(2)[iu])
        return terms.mean(axis=0), terms.std(axis=0) / np.sqrt(n)


# -- the rho -> 0 limit at fixed alpha_bar = alpha / rho (both layers) ------------------

def limit_map(E, alpha_bar: float, c: float) -> np.ndarray:
    r"""One step of the two-layer state evolution as ``rho_1 = rho_2 = rho -> 0`` at fixed ``alpha_bar = alpha/rho``.

    Per layer, as for one hardmax layer: ``E_l -> 1 - (1 - delta_l)_+^2`` with
    ``delta_l = 1/(alpha_bar F_l)``, ``F_l = G_l(lambda_1, lambda_2) / E_l`` and
    ``lambda_l = (1 - E_l)/E_l`` (``Q0 -> 1``, ``V_l = E_l``): each prior has become a
    vanishing-rank-fraction spike whose Bayes error is the BBP formula.
    """
    E = np.asarray(E, dtype=float)
    if E.shape != (2,) or not np.all((E > 0) & (E <= 1)):
        raise ValueError(f"E must hold two errors in (0, 1], got {E!r}")
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    lam = np.minimum((1.0 - E) / E, LAMBDA_MAX)
    delta = E / (alpha_bar * fisher_scaled(c, *lam))
    return 1.0 - np.maximum(1.0 - delta, 0.0) ** 2


def limit_error(alpha_bar: float, c: float, *, tol: float = 1e-10, max_iter: int = 20_000,
                on_max_iter: str = "raise") -> np.ndarray:
    """Fixed point ``(E_1, E_2)`` of :func:`limit_map` from the uninformative start ``E = (1, 1)``.

    At ``max_iter`` the rule of :mod:`aimlib.errors` applies (``on_max_iter``).
    """
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    E = np.ones(2)
    for _ in range(max_iter):
        E_new = np.maximum(limit_map(E, alpha_bar, c), 1.0 / (1.0 + LAMBDA_MAX))
        if np.max(np.abs(E_new - E)) <= tol:
            return E_new
        E = E_new
    max_iter_reached(f"the rho -> 0 two-layer SE did not converge at alpha_bar={alpha_bar} in {max_iter} "
                     f"iterations (last E={E.tolist()})", on_max_iter)
    return E


def limit_thresholds(c: float, *, tol: float = 1e-6, alpha_bar_max: float = 100.0) -> np.ndarray:
    r"""``(alpha_bar_1, alpha_bar_2)``: where each layer's error leaves 1 in the ``rho -> 0`` limit.

    ``E = (1, 1)`` loses stability in layer ``l`` at ``1/G_l(0, 0)``; the smaller of the
    two is the weak-recovery threshold of that layer.  ``G_l(0, 0)`` is exact (at
    ``lambda = 0`` the estimates vanish and :func:`fisher_scaled_direct` is a finite sum
    over the outputs and patterns, not the interpolant).  The other layer's onset is
    found by bisection on :func:`limit_error` (the smallest ``alpha_bar`` with
    ``E_l < 1 - 1e-9``, through the interpolant), to ``tol`` in ``alpha_bar``.
    """
    tol = v.positive("tol", tol)
    linear = 1.0 / fisher_scaled_direct(c, 0.0, 0.0)
    first = int(np.argmin(linear))
    lo, hi = linear[first], v.positive("alpha_bar_max", alpha_bar_max)
    if limit_error(hi, c)[1 - first] > 1 - 1e-9:
        raise ValueError(f"layer {2 - first} keeps E = 1 up to alpha_bar_max = {hi:g}; raise alpha_bar_max")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if limit_error(mid, c)[1 - first] > 1 - 1e-9 else (lo, mid)
    out = np.empty(2)
    out[first], out[1 - first] = linear[first], hi
    return out
