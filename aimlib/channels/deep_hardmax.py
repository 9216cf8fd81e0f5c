r"""Attention layers as one AIM: the forward map of ``L`` layers, the Bayes side of two or three hardmax
layers (``T = 2``).

The network (book, chapter "Deep attention"): layer 1 mixes the
tokens, ``X_1 = M X`` with ``M = c I + sigma(h^(1))`` (``c`` the residual
strength, ``sigma`` the row-wise hardmax or softmax), and layer 2 reads the
mixed tokens, whose trace-subtracted indices are ``M h^(2) M^T`` in terms of the
indices ``h^(2)`` of the *original* tokens; for two layers the output is
``y = sigma(M h^(2) M^T)``.  A third layer reads ``M_2 h^(3) M_2^T`` with ``M_1 = M`` and
``M_2 = (c I + sigma(M_1 h^(2) M_1^T)) M_1``.  So the channel reads ``L`` index matrices per sample.

Bayes side (hardmax layers, ``T = 2``): the exact sum over the latent pattern histories,
:mod:`aimlib.channels.deep_histories` (four patterns for two layers,
:mod:`aimlib.channels.deep_patterns`; sixteen histories for three).  Two layers: the state
evolution reads one overlap per layer.  For centred teachers that is exact
(:meth:`DeepAttention.fisher`); for teachers with a known part ``sqrt(rho_l) I`` the layers'
estimates share the index of the identity and :meth:`DeepAttention.separable_fisher` gives
the separable state evolution of GAMP-RIE with one denoiser per layer (which leaves out the
cross overlap the layers' correlated noises create, :mod:`aimlib.state_evolution.cross`),
:meth:`DeepAttention.oracle_fisher` that of the oracle given the other layer (a lower
bound).  Three layers: the output has a cross term between layers 1 and 2 even for centred
teachers (:meth:`DeepAttention.correlated_layers`), so their state evolution is the separable
one of GAMP-RIE.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..errors import check_on_max_iter, max_iter_reached
from . import hardmax
from .base import Channel, sigma2
from . import deep_histories, deep_patterns
from .deep_moments import draw_law
from .deep_histories import fisher_matrix3, fisher_matrix3_direct, log_z_and_g, separable_scaled3
from .deep_patterns import fisher_matrix, fisher_scaled, fisher_scaled_direct, oracle_fisher_scaled
from .lambda_tables import LAMBDA_MAX
from .softmax import check_beta, row_softmax

__all__ = ["DeepAttention", "check_residual", "C_MARGIN", "limit_map", "limit_thresholds", "limit_error"]

#: the least distance of ``c`` from each collision ``-1, 0, 1`` for two and three hardmax layers.  Near a
#: collision the two differences a layer's hardmax reads turn (anti)parallel under some pattern history:
#: ``F~`` grows without bound (``F~_2 ~ 1e8`` at ``c = -0.999``) and its interpolant in ``lambda`` fails
#: (a factor 200 there); the gradients of the orthant probabilities overflow at ``1e-4`` (two layers)
#: and ``1e-2`` (three).  At the margin the two-layer interpolant is within 0.4 % of direct quadrature
#: near -1 and 1 and 5 % near 0 (``tests/test_deep_hardmax.py``; the docstring of ``fisher_scaled``).
C_MARGIN = {2: 1e-2, 3: 3e-2}


def check_residual(c: float, layers: int = 2) -> float:
    """``c`` as a float if it lies at least :data:`C_MARGIN` ``[layers]`` from -1, 0 and 1, else ``ValueError``.

    At ``c`` in ``{-1, 0, 1}`` two mixed tokens coincide or vanish under some pattern history of
    hardmax layers (``det M`` in ``{(1 + c)^2, c (1 + c), c^2 - 1}``), a tie with probability one.
    """
    c = v.real("c", c)
    layers = v.choice("layers", v.integer("layers", layers), {2, 3})
    margin = C_MARGIN[layers]
    near = min((-1.0, 0.0, 1.0), key=lambda c0: abs(c - c0))
    if round(abs(c - near), 12) < margin:   # rounded: -0.999 lies 1e-3 from -1 to 12 digits
        raise ValueError(f"c = {c!r} lies {abs(c - near):.3g} from {near:g}, where two mixed tokens coincide or "
                         f"vanish under some hardmax pattern history; {layers} hardmax layers need c at least "
                         f"{margin:g} from each of -1, 0 and 1 (closer, the differences a layer's hardmax reads are "
                         "so nearly parallel that the orthant probabilities' gradients overflow)")
    return c

def _known_parts(shared, q) -> tuple:
    """The known parts ``s_l`` in ``[0, q_l]``; one above ``q_l`` by rounding only (``1e-12 (1 + q_l)``: a state
    evolution's ``q = Q0 - mmse`` at an error within rounding of the prior's, ``q = rho`` then) is ``q_l``."""
    return tuple(min(v.in_range(f"shared[{i}]", x, 0.0, q[i] + 1e-12 * (1 + q[i])), q[i]) for i, x in enumerate(shared))


class DeepAttention(Channel):
    """``L`` attention layers: ``X_l = M_l X``, ``M_l = (c I + sigma(M_{l-1} h_l M_{l-1}^T)) M_{l-1}`` (residual ``c``,
    ``M_0 = I``) and ``y = sigma(M_{L-1} h_L M_{L-1}^T)``; for ``L = 2``,
    ``y = sigma(M h2 M^T)`` with ``M = c I + sigma(h1)``.

    Parameters
    ----------
    c : float
        Residual strength; for hardmax layers at least :data:`C_MARGIN` from ``-1``, ``0`` and ``1``,
        where the two mixed tokens become linearly dependent (equal, or one of them zero) under
        some pattern history (:func:`check_residual`).
    layer : {'hardmax', 'softmax'}
        The row-wise map ``sigma`` of every layer (the Bayes side: hardmax, ``T = 2``).
    beta : float
        Inverse temperature of softmax layers.
    layers : {2, 3}
        The number of layers ``L`` (index matrices per sample, ``n_indices``).
    """

    name = "deep-attention"
    joint_output = True
    parameters = ("c", "layers")
    layer_counts = (2, 3)
    indices_parameter = "layers"
    max_T = 2
    max_T_why = "its Bayes side is tabulated for hardmax layers at T = 2"
    noise_max_T = 0
    threshold = "onsets"
    tabulated = True
    has_oracle = True

    def __init__(self, c: float = 0.5, layer: str = "hardmax", beta: float = 1.0, layers: int = 2):
        super().__init__(0.0)
        self.layer = v.choice("layer", layer, {"hardmax", "softmax"})
        self.beta = check_beta(beta)
        self.n_indices = v.choice("layers", v.integer("layers", layers), {2, 3})
        self.c = check_residual(c, self.n_indices) if layer == "hardmax" else v.real("c", c)

    def _params(self) -> str:
        return (f"c={self.c:g}, layer={self.layer}" + (f", beta={self.beta:g}" if self.layer == "softmax" else "")
                + (f", layers={self.n_indices}" if self.n_indices != 2 else ""))

    def _sigma(self, h):
        if self.layer == "softmax":
            return row_softmax(self.beta * h)
        return hardmax.Hardmax().clean(h)

    def clean(self, h):
        """``y = sigma(M h_L M^T)`` with ``M = A_{L-1} ... A_1``, for ``h`` of shape ``(n, L, T, T)``."""
        xp = get_array_module(h)
        eye = self.c * xp.eye(h.shape[-1], dtype=h.dtype)
        M = eye + self._sigma(h[:, 0])
        for ell in range(1, self.n_indices - 1):
            M = (eye + self._sigma(M @ h[:, ell] @ xp.swapaxes(M, -1, -2))) @ M
        return self._sigma(M @ h[:, -1] @ xp.swapaxes(M, -1, -2))

    # -- Bayes side: hardmax layers, T = 2 --------------------------------------

    def _require_bayes(self, T: int):
        if self.layer != "hardmax" or T != 2:
            raise NotImplementedError(f"DeepAttention: the Bayes side is implemented for hardmax layers "
                                      f"(two or three) and T = 2, got layers={self.n_indices}, "
                                      f"layer={self.layer!r}, T={T}")

    def _log_z_and_g(self, y, omega, V):
        """``(xp, log Z_out, g)``: the sum over pattern histories
        (:func:`~aimlib.channels.deep_histories.log_z_and_g`)."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        self._require_bayes(T)
        t = hardmax.signs_from_output(to_host(y))
        return (xp,) + log_z_and_g(self.c, t, to_host(omega), V)

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
        r"""``(F_1, F_2) = (F~_1/V_1, F~_2/V_2)`` at ``lambda_l = q_l/V_l``
        (:func:`~aimlib.channels.deep_patterns.fisher_scaled`).

        Two layers, independent estimates (centred teachers), where the cross term vanishes: the
        exact state evolution.  Tabulated for ``lambda_l <= LAMBDA_MAX``, that is
        ``V_l >= Q0_l / (1 + LAMBDA_MAX)``.  Three layers are refused: their output has a cross
        term ``F~_12`` between layers 1 and 2 for every prior (:meth:`correlated_layers`), which
        one overlap per layer would drop; :meth:`separable_fisher` gives GAMP-RIE's state evolution.
        """
        if self.n_indices == 3:
            raise NotImplementedError("DeepAttention(layers=3).fisher: the output of three hardmax layers has a "
                                      "cross term G_12 between layers 1 and 2 even for centred teachers, so one "
                                      "overlap per layer is not the Bayes state evolution (it needs a cross "
                                      "overlap); separable_fisher gives GAMP-RIE's separable state evolution")
        q, Q0, V = self._tabulated(q, Q0, T)
        return tuple(fisher_scaled(self.c, q[0] / V[0], q[1] / V[1]) / V)

    def correlated_layers(self, priors) -> bool:
        """Whether the output has cross terms ``E[<g_l, g_l'>_Sigma] != 0`` (``l != l'``) for ``priors``.

        Two layers: only for teachers with a known part (a prior of non-zero mean; centred teachers
        make the cross term vanish by the layer-2 sign flip).  Three layers: always (``F~_12 != 0``,
        :func:`~aimlib.channels.deep_histories.fisher_matrix3_direct`).
        """
        return self.n_indices == 3 or any(p.mean_square() > 0 for p in priors)

    def tables_ready(self, shared: bool = False) -> bool:
        """Whether the interpolants for this ``c`` (``shared``: those of teachers with a known part) are
        stored or already built in this session (:meth:`tabulate` would return at once)."""
        if self.n_indices == 3:
            return deep_histories.tables_ready3(self.c)
        return deep_patterns.tables_ready(self.c, shared)

    def tabulate(self, shared: bool = False, progress=None) -> None:
        """Build, once per session, the interpolants of ``F~`` for this ``c`` that are not stored: two layers'
        centred table (two seconds on one core), with ``shared`` their table in the correlation ``r``
        (fifteen), three layers' table (thirty).  ``progress(done, total)`` is called as they are built."""
        if self.n_indices == 3:
            deep_histories.table3(self.c, progress)
            return
        deep_patterns.centred_table(self.c, progress)
        if shared:
            deep_patterns.shared_table(self.c, progress)

    def separable_fisher(self, q, Q0, T, shared):
        r"""``F_l^sep = 1 / (F^{-1})_ll``: the state evolution of GAMP-RIE with one denoiser per layer.

        Teachers ``S_l = m_l I + C_l`` (``C_l`` centred) with a known part of squared norm ``s_l = m_l^2``
        (``m_l >= 0``; Wishart: ``s_l = rho_l``) give the estimates ``omega_l = sqrt(s_l) z_0 +
        sqrt(q_l - s_l) z_l``, correlation ``r = sqrt(s_1 s_2 / (q_1 q_2))``.  With the moment matrix
        ``F_ll' = F~_ll'(lambda, r) / sqrt(V_l V_l')`` (:func:`~aimlib.channels.deep_patterns.fisher_matrix`),
        GAMP's effective observations are ``R = S + (alpha F)^{-1/2} xi``: layer ``l`` sees its
        teacher through Gaussian noise of variance ``(F^{-1})_ll / alpha``, and one denoiser per
        layer reaches ``qhat_l = alpha / (F^{-1})_ll``.  A cross term ``F_12 != 0`` lowers it
        below ``alpha F_ll``.  The layers' noises are correlated (``kappa = -F_12/sqrt(F_11 F_22)``,
        :meth:`moment_matrix`), which leaves the two estimates a cross overlap this state evolution
        does not carry (:mod:`aimlib.state_evolution.cross`): it is GAMP-RIE's up to that term, and
        not established as a bound on the Bayes error.

        Three layers (centred teachers only, ``shared = 0``): ``F_13 = F_23 = 0`` and
        ``F^sep = (F~_11 (1 - r_12^2), F~_22 (1 - r_12^2), F~_33) / V`` with ``r_12 = F~_12 / sqrt(F~_11 F~_22)``
        (:func:`~aimlib.channels.deep_histories.fisher_matrix3`); ``r_12 = 1`` at ``lambda = 0``, so
        layers 1 and 2 get no information until layer 3 is learned.
        """
        q, Q0, V = self._tabulated(q, Q0, T)
        s = self._shared(shared, q)
        if self.n_indices == 3:
            return tuple(separable_scaled3(self.c, *(q / V)) / V)
        return tuple(1.0 / np.diag(np.linalg.inv(self._moments(q, V, s))))

    def _shared(self, shared, q) -> tuple:
        """The known parts ``s_l`` (one per layer), each in ``[0, q_l]``; three layers take centred teachers only."""
        s = _known_parts(self._per_index("shared", shared), q)
        if self.n_indices == 3 and any(s):
            raise NotImplementedError("DeepAttention(layers=3): teachers with a known part (Wishart) are not "
                                      f"implemented, got shared={s}; use centred teachers")
        return s

    def _moments(self, q, V, s):
        """Two layers' ``F_ll' = F~_ll'(lambda, r)/sqrt(V_l V_l')`` at validated ``(q, V, s)``."""
        r = float(np.sqrt(s[0] * s[1] / (q[0] * q[1]))) if min(q) > 0 else 0.0
        return fisher_matrix(self.c, q[0] / V[0], q[1] / V[1], min(r, 1.0)) / np.sqrt(np.outer(V, V))

    def moment_matrix(self, q, Q0, T, shared) -> np.ndarray:
        r"""The output moment matrix ``F`` (one row per layer) of layers whose estimates share ``sqrt(s_1 s_2)``.

        ``F_ll' = F~_ll'(lambda, r) / sqrt(V_l V_l')`` of :meth:`separable_fisher`, off-diagonal
        included: what :func:`~aimlib.priors.correlated.layer_noises` turns into GAMP-RIE's two
        noises and their correlation ``kappa = -F_12/sqrt(F_11 F_22)``.  Three layers (centred
        teachers, ``shared = 0``): the ``3 x 3`` matrix of
        :func:`~aimlib.channels.deep_histories.fisher_matrix3`, with ``F_13 = F_23 = 0``.
        """
        q, Q0, V = self._tabulated(q, Q0, T)
        s = self._shared(shared, q)
        if self.n_indices == 3:
            return fisher_matrix3(self.c, *(q / V)) / np.sqrt(np.outer(V, V))
        return self._moments(q, V, s)

    def oracle_fisher(self, layer: int, q: float, Q0, T, shared=(0.0, 0.0)) -> float:
        r"""``F`` of layer ``layer`` for the oracle given the other teacher: ``F~ / V``
        (:func:`~aimlib.channels.deep_patterns.oracle_fisher_scaled`).

        ``q`` is the layer's overlap, ``Q0`` both layers' second moments, ``shared`` their known
        parts: the layer's estimate and the known index ``h_o`` (variance ``Q0_o``) share
        ``sqrt(s_l s_o) z_0``, correlation ``r = sqrt(s_l s_o / (q Q0_o))``.  Its state
        evolution is a lower bound on the layer's Bayes error.  Two layers only.
        """
        if self.n_indices != 2:
            raise NotImplementedError(f"DeepAttention: the oracle side is implemented for two layers, "
                                      f"got layers={self.n_indices}")
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
        """``log Z_out``: the log-probability of the output signs, summed over the ``4^(L-1)`` pattern histories."""
        xp, logz, _ = self._log_z_and_g(y, omega, V)
        return to_device(logz, xp)

    def g_out(self, y, omega, V):
        """``(g_1, ..., g_L)``, each symmetric ``2 x 2``, stacked on axis ``-3``: posterior-weighted gradients."""
        xp, _, g = self._log_z_and_g(y, omega, V)
        return to_device(g, xp)

    def law_args(self, q, Q0, shared=0.0) -> tuple:
        """Validated ``(q, Q0, V, s)`` of the estimates' law (``T = 2``): one overlap ``0 <= q_l <= Q0_l``
        per layer, the errors ``V = Q0 - q`` and the known parts ``0 <= s_l <= q_l`` (``shared``: one
        value or one per layer)."""
        q, Q0, _, V = self._fisher_args(q, Q0, 2)
        return q, Q0, V, _known_parts(np.broadcast_to(shared, (self.n_indices,)), q)

    def output_moments(self, q, Q0, *, shared=0.0, cross: float = 0.0, n: int = 60_000, seed=0):
        r"""``F_{ll'} = 2 sum_{a<=b} Sigma_ab E[g_{l,ab} g_{l',ab}]`` by Monte Carlo, with standard errors.

        The estimates are ``omega_l = sqrt(s_l) z_0 + sqrt(q_l - s_l) z_l`` (``z_0, ..., z_L``
        independent, each ``N(0, Sigma)``; ``s = shared``, one value or one per layer) and
        ``h_l | omega ~ N(omega_l, (Q0_l - q_l) Sigma)``.  Wishart teachers ``S_l = sqrt(rho_l) I + C_l``
        share the index of the identity, ``s = rho`` (book, chapter "Deep attention"); centred
        teachers have ``s = 0``, the law of :meth:`fisher`.  The diagonal of ``F`` is ``F_l``
        under that law, the off-diagonal the cross terms a diagonal state evolution drops.

        ``cross`` (layers 1 and 2, of two or three) is the residual cross-covariance ``e_12`` that one denoiser per
        layer leaves under correlated noises (:mod:`aimlib.priors.correlated`): then
        ``Cov(omega_1, omega_2) = sqrt(s_1 s_2) + e_12`` while ``Cov(h_l, omega_l') = Cov(h_1, h_2)
        = sqrt(s_1 s_2)``, so ``h | omega`` has mean ``omega - C Omega^{-1} omega`` and covariance
        ``Q - Omega + 2 C - C Omega^{-1} C`` (``C`` the matrix with ``e_12`` off the diagonal,
        ``Omega`` the estimates' covariance, ``Q`` the indices'; :func:`aimlib.channels.deep_moments.draw_law`);
        ``g`` is still the algorithm's :meth:`g_out`, which assumes ``h | omega ~ N(omega, V)``.  The
        responses ``Gamma``, ``Lambda`` under that law: :func:`aimlib.channels.deep_moments.response_moments`.

        Returns
        -------
        (F, se) : two (L, L) arrays, the moments and their standard errors.
        """
        rng = v.generator(seed)
        q, Q0, V, s = self.law_args(q, Q0, shared)
        n = v.integer("n", n, minimum=100)
        omega, h, _, _ = draw_law(q, Q0, s, v.real("cross", cross), self.n_indices, n, rng)
        iu = np.triu_indices(2)
        g = self.g_out(self(h, seed=rng), omega, V)[..., iu[0], iu[1]]
        terms = 2 * np.einsum("nlk,nmk,k->nlm", g, g, sigma2(2)[iu])
        return terms.mean(axis=0), terms.std(axis=0) / np.sqrt(n)


# -- the rho -> 0 limit at fixed alpha_bar = alpha / rho (every layer) ------------------

def _scaled(c: float, E: np.ndarray) -> np.ndarray:
    """``F_l V_l`` at ``V = E``, ``lambda_l = (1 - E_l)/E_l``: ``F~_l`` (two layers), the separable
    ``(F~_11 (1 - r_12^2), F~_22 (1 - r_12^2), F~_33)`` (three)."""
    lam = np.minimum((1.0 - E) / E, LAMBDA_MAX)
    return fisher_scaled(c, *lam) if len(E) == 2 else separable_scaled3(c, *lam)


def limit_map(E, alpha_bar: float, c: float) -> np.ndarray:
    r"""One step of the ``L``-layer state evolution as ``rho_l = rho -> 0`` at fixed ``alpha_bar = alpha/rho``.

    Per layer, as for one hardmax layer: ``E_l -> 1 - (1 - delta_l)_+^2`` with
    ``delta_l = 1/(alpha_bar F_l)``, ``F_l = F~_l(lambda) / E_l`` and ``lambda_l = (1 - E_l)/E_l``
    (``Q0 -> 1``, ``V_l = E_l``): each prior has become a vanishing-rank-fraction spike whose
    Bayes error is the BBP formula.  ``E`` holds two or three errors; for three, ``F~_l`` is the
    separable one of :meth:`DeepAttention.separable_fisher` (GAMP-RIE's state evolution).
    """
    E = np.asarray(E, dtype=float)
    if E.shape not in ((2,), (3,)) or not np.all((E > 0) & (E <= 1)):
        raise ValueError(f"E must hold two or three errors in (0, 1], got {E!r}")
    alpha_bar = v.positive("alpha_bar", alpha_bar)
    with np.errstate(divide="ignore"):
        delta = E / (alpha_bar * _scaled(c, E))
    return 1.0 - np.maximum(1.0 - delta, 0.0) ** 2


def limit_error(alpha_bar: float, c: float, *, layers: int = 2, tol: float = 1e-10, max_iter: int = 20_000,
                on_max_iter: str = "raise") -> np.ndarray:
    """Fixed point ``(E_1, ..., E_L)`` of :func:`limit_map` from the uninformative start ``E = 1``.

    At ``max_iter`` the rule of :mod:`aimlib.errors` applies (``on_max_iter``).
    """
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    E = np.ones(v.choice("layers", layers, {2, 3}))
    for _ in range(max_iter):
        E_new = np.maximum(limit_map(E, alpha_bar, c), 1.0 / (1.0 + LAMBDA_MAX))
        if np.max(np.abs(E_new - E)) <= tol:
            return E_new
        E = E_new
    max_iter_reached(f"the rho -> 0 {len(E)}-layer SE did not converge at alpha_bar={alpha_bar} in "
                     f"{max_iter} iterations (last E={E.tolist()})", on_max_iter)
    return E


def limit_thresholds(c: float, *, layers: int = 2, tol: float = 1e-6, alpha_bar_max: float = 100.0) -> np.ndarray:
    r"""``(alpha_bar_1, ..., alpha_bar_L)``: where each layer's error leaves 1 in the ``rho -> 0`` limit.

    ``E = 1`` loses stability first in the layer of the largest ``F_l(0)``, at ``1/F_l(0)``, exact:
    at ``lambda = 0`` the estimates vanish and ``F~(0)`` is a finite sum over the outputs and
    histories (:func:`fisher_scaled_direct`; for three layers ``fisher_matrix3_direct`` and its
    separable ``F``, where ``r_12 = 1`` gives layers 1 and 2 no information).  Every other
    layer's onset is found by bisection on :func:`limit_error` (the smallest ``alpha_bar`` with
    ``E_l < 1 - 1e-9``, through the interpolants), to ``tol`` in ``alpha_bar``.
    """
    tol = v.positive("tol", tol)
    layers = v.choice("layers", layers, {2, 3})
    if layers == 2:
        at_zero = fisher_scaled_direct(c, 0.0, 0.0)
    else:
        G = fisher_matrix3_direct(c, 0.0, 0.0, 0.0)
        at_zero = np.diag(G) - np.array([G[0, 1] ** 2 / G[1, 1], G[0, 1] ** 2 / G[0, 0], 0.0])
    first = int(np.argmax(at_zero))
    out = np.full(layers, 1.0 / at_zero[first])
    top = v.positive("alpha_bar_max", alpha_bar_max)
    for ell in set(range(layers)) - {first}:
        lo, hi = out[first], top
        if limit_error(hi, c, layers=layers)[ell] > 1 - 1e-9:
            raise ValueError(f"layer {ell + 1} keeps E = 1 up to alpha_bar_max = {hi:g}; raise alpha_bar_max")
        while hi - lo > tol:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if limit_error(mid, c, layers=layers)[ell] > 1 - 1e-9 else (lo, mid)
        out[ell] = hi
    return out
