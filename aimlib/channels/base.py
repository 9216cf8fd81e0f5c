r"""The channel contract: what every output channel of the AIM provides.

A channel maps the attention indices of a sample to its output, ``y = f(h)``,
and carries the *Bayes side* that state evolution and GAMP-RIE share (book,
chapter "The replica computation").

Indices
-------
A channel reads ``L = n_indices`` index matrices per sample.  ``L = 1`` (one
attention layer) takes ``h`` of shape ``(n, T, T)``; ``L > 1`` takes
``(n, L, T, T)``, layer ``l`` at ``h[:, l]``.  An index matrix is symmetric
(``sectors = ('S',)``, tied key and query; its independent entries ``h_ab``,
``a <= b``, have the covariance shape ``Sigma_ab = 2`` on the diagonal and ``1``
off it, :func:`sigma2`) or square (``sectors = ('A', 'B')``, untied key and query:
all ``T^2`` entries free, seen through their symmetric and antisymmetric parts,
``Pi_A = Pi_sym = (I + tau)/2`` and ``Pi_B = Pi_anti = (I - tau)/2`` on ``R^{T x T}``,
``tau`` the transposition, :func:`sector_projectors`).  The sectors are those of
the prior (:attr:`aimlib.priors.base.Prior.sectors`); a channel with several index
matrices has symmetric ones.

Bayes side
----------
Given the data, a fresh index of layer ``l`` is ``h_l ~ N(omega_l, C(V_l))``,
independent across layers, with the index covariance on ``R^{T x T}`` (row-major ``vec``)

.. math::  C(V) = 2 \sum_s V_s \Pi_s ,

one error ``V_s`` per sector (:meth:`Channel.index_fluctuation`; one sector: ``C = V (I + tau)``,
the entries ``h_ab``, ``a <= b``, independent of variance ``V Sigma_ab``), and

* ``Z_out(y, omega, V) = int dh N(h; omega, V Sigma) P(y | h)``
  (:meth:`Channel.log_partition`, one value per sample);
* ``g_out = d log Z_out / d omega_{l,ab}`` over the independent entries (``a <= b``,
  returned symmetric, for one sector; all ``T^2`` for a square index, not symmetric), with
  the shape of ``omega`` (:meth:`Channel.g_out`);
* ``F_c(q)``, one per component ``c`` (sector ``s`` of layer ``l``), with ``omega_l ~ N(0, C(q_l))``,
  ``h_l ~ N(omega_l, C(Q0_l - q_l))``, ``y ~ P(y | h)``: the state-evolution output function
  (:meth:`Channel.fisher`; its Monte Carlo definition :meth:`Channel.fisher_terms`),

  .. math::  F_c = \frac4K\,\frac{\partial\Psi_{\rm out}}{\partial q_c}
             = \frac4K\,\mathbb E\,\|\Pi_s G_l\|_F^2 ,

  ``K`` the number of sectors and ``G_l`` the gradient of ``log Z_out`` with respect to
  all ``T^2`` entries of ``omega_l`` (``dPsi_out/dq_c = (1/2) E[G^T (dC/dq_c) G]``, ``dC/dq_c =
  2 Pi_s``).  One sector: ``G_ab = g_ab/2`` off the diagonal and
  ``F = 2 sum_{a<=b} Sigma_ab E[g_ab^2]``; square: ``G = g`` and ``F_s = 2 E||Pi_s g||^2``.

The conjugate: one convention
-----------------------------
Every state evolution carries ``qhat_c = alpha F_c`` and sees component ``c`` of the
prior through the noise ``Delta_c = 1/qhat_c`` (:meth:`Channel.sector_noises`,
:func:`aimlib.state_evolution.fixed_point`), in the noise units of the prior
(:mod:`aimlib.priors.base`: ``R = S + sqrt(Delta) Z``, ``Z`` GOE for a symmetric ``S``,
Ginibre with ``N(0, 1/d)`` entries for a square one, ``Delta_s`` on its part ``s``).
The factor ``4/K`` makes these units agree.  The replica computation's conjugate
``4 alpha dPsi_out/dq_c`` (book, chapter "The replica computation") is the inverse
noise in GOE units.  The ``K = 2`` parts ``Pi_s Z`` of a Ginibre matrix have half the
variance of the GOE-type noises ``sqrt(2) Pi_s Z`` of the replica computation (for
``s = A`` a GOE matrix), so a sector's noise in prior units is twice its noise in GOE
units: ``Delta_s = 2/(4 alpha dPsi_out/dq_s) = 1/(alpha F_s)``.  With one sector,
``K = 1`` and both units are GOE.  The book's untied chapters write the replica
conjugate, ``2 alpha F_s = K qhat_s`` (``Delta_s = 2/qhat_s`` in their notation); the
library has one, ``qhat_c = alpha F_c``.

For ``L = 1``, ``omega`` has the shape of ``y`` and ``V``, ``q``, ``Q0`` are numbers;
for ``L > 1``, ``omega`` has an extra axis ``-3`` of length ``L`` and ``V``, ``q``,
``Q0`` are sequences of ``L`` numbers (of the two sectors for a square index).  One
overlap per index (a diagonal SE) is exact when the cross terms ``E[g_{l,ab} g_{l',ab}]``, ``l != l'``, vanish; a
channel whose outputs mix the layers' information more tightly needs ``L x L``
overlaps, which this contract does not cover.

Capabilities
------------
What a channel can do is declared on its class, and the command line, the sweep specs, the
panels and the state evolution ask those declarations, never the channel's name:
``parameters`` (what :func:`~aimlib.channels.make_channel` takes), ``layer_counts`` and
``indices_parameter``, ``sectors``, ``bayes_side``, ``max_T``
and ``noise_max_T`` (the range of its Bayes side, without and with label noise), ``threshold``
(``'perfect'``, ``'weak'``, ``'onsets'`` or ``None``) with ``threshold_max_T``, ``trainable`` (students of
gradient descent and the convex route), ``tabulated``, ``has_oracle`` and
:meth:`Channel.correlated_layers`.  :mod:`aimlib.channels.registry` reads them
(:func:`~aimlib.channels.registry.t_limit`, :func:`~aimlib.channels.registry.threshold_limit`).
"""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from .._lazy import LazyModule
from ..backend import get_array_module, to_common

integrate = LazyModule("scipy.integrate")   # loaded on first use: `se` never needs it

__all__ = ["Channel", "sigma2", "sector_projectors", "sample_indices", "sample_se_measure", "fisher_mc"]

#: the sectors of an index matrix by their number: a symmetric one, a square one (its symmetric and
#: antisymmetric parts); the names are the priors' (:attr:`aimlib.priors.base.Prior.sectors`)
SECTORS = {1: ("S",), 2: ("A", "B")}


def sigma2(T: int, xp=None, dtype=np.float64):
    """The covariance shape ``Sigma`` of one index matrix: ``2`` on the diagonal, ``1`` off it (``T x T``),
    an array of the module ``xp`` (default: numpy)."""
    xp = np if xp is None else xp
    return xp.ones((T, T), dtype=dtype) + xp.eye(T, dtype=dtype)


def sector_projectors(T: int, sectors: int = 1) -> tuple:
    r"""The orthogonal projectors ``Pi_s`` of the sectors on ``R^{T x T}`` (row-major ``vec``, ``T^2 x T^2``).

    ``Pi_sym = (I + tau)/2`` (``tau`` the transposition) for one sector; ``(Pi_sym, Pi_anti)``,
    ``Pi_anti = I - Pi_sym``, for the two of a square index matrix.
    """
    T = v.integer("T", T, minimum=1)
    v.choice("sectors", sectors, SECTORS)
    eye = np.eye(T * T)
    tau = eye.reshape(T * T, T, T).transpose(0, 2, 1).reshape(T * T, T * T)
    sym = (eye + tau) / 2
    return (sym,) if sectors == 1 else (sym, eye - sym)


def sample_indices(n: int, T: int, var: float, seed=None) -> np.ndarray:
    """``n`` symmetric ``T x T`` matrices with independent entries ``h_ab ~ N(0, var Sigma_ab)``, ``a <= b``.

    The limiting law of the indices of a teacher with ``(1/d) Tr S^2 = var``
    (book, chapter "The model").
    """
    n, T = v.integer("n", n, minimum=1), v.integer("T", T, minimum=1)
    var = v.nonnegative("var", var)
    A = np.triu(v.generator(seed).standard_normal((n, T, T)))
    return (A + np.triu(A, 1).transpose(0, 2, 1)) * np.sqrt(var * sigma2(T))


def sample_se_measure(channel, n: int, q, Q0, T: int, seed=None):
    """``(omega, h, y)`` from the measure of the SE output term (one index per sample).

    ``omega ~ N(0, C(q))``, ``h = omega + N(0, C(Q0 - q))``, ``y = channel(h)`` (:meth:`Channel.index_fluctuation`;
    ``q``, ``Q0`` numbers, or pairs for a square channel), all from one generator (in that order).
    """
    rng = v.generator(seed)
    Q0 = channel._sector_values("Q0", Q0)
    q = tuple(v.in_range("q", x, 0.0, Q0[i]) for i, x in enumerate(channel._sector_values("q", q, v.real)))
    omega = channel.sample_fluctuation(n, T, q, rng)
    h = omega + channel.sample_fluctuation(n, T, tuple(a - b for a, b in zip(Q0, q)), rng)
    return omega, h, channel(h, seed=rng)


def fisher_mc(channel, q, Q0, T: int, n: int = 40_000, seed=None):
    """Monte Carlo estimate of ``F_c`` (:meth:`Channel.fisher_terms`) over :func:`sample_se_measure`.

    An independent route to :meth:`Channel.fisher` (the estimate has relative
    standard error of order ``1/sqrt(n)``): a float for one sector, a pair for a square channel.
    """
    omega, _, y = sample_se_measure(channel, n, q, Q0, T, seed)
    V = np.asarray(Q0, dtype=float) - np.asarray(q, dtype=float)
    F = np.mean(channel.fisher_terms(channel.g_out(y, omega, V if V.ndim else float(V))), axis=0)
    return float(F[0]) if len(F) == 1 else tuple(float(x) for x in F)


class Channel:
    """Base class: a deterministic map ``g`` of ``n_indices`` index matrices plus optional Gaussian label noise."""

    name = "channel"
    #: number of index matrices ``L`` read per sample
    n_indices = 1
    #: the sectors of an index matrix (:data:`SECTORS`): ``('S',)`` symmetric, ``('A', 'B')`` square
    #: (untied key and query), each seen through its own noise; the prior's sectors must be these
    sectors = SECTORS[1]
    #: whether one output mixes several index matrices (layers), so that the Bayes side of a layer
    #: depends on the others' indices; its diagonal state evolution then needs independent
    #: estimates across layers, which priors with a non-zero mean (a shared known part) break
    joint_output = False

    # -- capabilities: what the interfaces (command line, sweeps, panels, state evolution) ask of a
    # channel class instead of testing its name; :mod:`aimlib.channels.registry` reads them.
    #: the keyword parameters that :func:`~aimlib.channels.make_channel` takes for it
    parameters = ("noise",)
    #: the numbers of index matrices (layers) it can be made with (``None``: any number from the
    #: smallest its ``indices_parameter`` accepts)
    layer_counts = (1,)
    #: the parameter that sets the number of index matrices (``None``: fixed)
    indices_parameter = None
    #: whether it has a Bayes side (``log_partition``, ``g_out``, ``fisher``: state evolution and
    #: GAMP-RIE) at all, and why not
    bayes_side = True
    bayes_side_why = ""
    #: the largest ``T`` of its Bayes side (``None``: every ``T >= 2``), and why
    max_T = None
    max_T_why = ""
    #: the largest ``T`` of its Bayes side with label noise (``None``: as without; ``0``: none)
    noise_max_T = None
    #: the threshold it has: ``'perfect'`` (perfect recovery, noiseless), ``'weak'`` (weak recovery
    #: as ``rho -> 0``, in ``alpha_bar = alpha/rho``), ``'onsets'`` (each layer's ``rho -> 0`` onset)
    #: or ``None`` (none offered)
    threshold = "perfect"
    #: the largest ``T`` of that threshold (``None``: every ``T``), and why
    threshold_max_T = None
    threshold_max_T_why = ""
    #: whether gradient-descent students and the convex route's exact measurements exist for it
    trainable = False
    #: whether its Bayes side is read from tables computed once (:func:`aimlib.cli` shows progress)
    tabulated = False
    #: whether it has an oracle side, a layer's Bayes side with the other layers known
    #: (``oracle_fisher``; :func:`aimlib.state_evolution.oracle_fixed_point`)
    has_oracle = False

    def __init__(self, noise: float = 0.0):
        self.noise = v.nonnegative("noise", noise)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._params()})"

    def _params(self) -> str:
        return f"noise={self.noise:g}"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))

    @property
    def square(self) -> bool:
        """Whether the index matrices are square (two sectors) rather than symmetric."""
        return len(self.sectors) == 2

    # -- the index covariance and the sectors' noises --------------------------

    def _sector_values(self, name: str, x, check=v.positive) -> tuple:
        """``x`` as one number per sector (a number for one sector, a pair for a square index)."""
        K = len(self.sectors)
        xs = tuple(np.atleast_1d(np.asarray(x, dtype=float)).tolist())
        if len(xs) != K:
            raise ValueError(f"{name} must hold {K} value{'s' if K > 1 else ''} (one per sector "
                             f"{self.sectors}), got {len(xs)}")
        return tuple(check(f"{name}[{i}]" if K > 1 else name, x) for i, x in enumerate(xs))

    def index_fluctuation(self, V, T: int) -> np.ndarray:
        r"""``C(V) = 2 sum_s V_s Pi_s``: the covariance of a fresh index matrix around ``omega`` given the
        data, on ``R^{T x T}`` (row-major ``vec``, ``T^2 x T^2``); ``V`` one error per sector.

        One sector: ``V (I + tau)``, i.e. ``V Sigma_ab`` (:func:`sigma2`) on the independent entries.
        """
        V = self._sector_values("V", V, v.nonnegative)
        P = sector_projectors(v.integer("T", T, minimum=1), len(self.sectors))
        return sum(2 * Vs * Ps for Vs, Ps in zip(V, P))

    def sample_fluctuation(self, n: int, T: int, V, seed=None) -> np.ndarray:
        """``n`` draws of ``N(0, C(V))`` (:meth:`index_fluctuation`) as ``(n, T, T)`` matrices.

        One sector: :func:`sample_indices`; square: ``sum_s sqrt(2 V_s) Pi_s G``, ``G`` i.i.d. standard.
        """
        V = self._sector_values("V", V, v.nonnegative)
        if len(V) == 1:
            return sample_indices(n, T, V[0], seed)
        n, T = v.integer("n", n, minimum=1), v.integer("T", T, minimum=1)
        G = v.generator(seed).standard_normal((n, T, T))
        sym = (G + G.transpose(0, 2, 1)) / 2
        return np.sqrt(2 * V[0]) * sym + np.sqrt(2 * V[1]) * (G - sym)

    def fisher_terms(self, g) -> np.ndarray:
        r"""The per-sample terms whose mean is ``F_c`` (module docstring), shape ``g.shape[:-2] + (K,)``.

        One sector (``g`` over the entries ``a <= b``, symmetric): ``2 sum_{a<=b} Sigma_ab g_ab^2``;
        square (``g`` over all entries): ``2 ||Pi_s g||_F^2`` for each sector.
        """
        xp = get_array_module(g)
        T = g.shape[-1]
        if len(self.sectors) == 1:
            iu = np.triu_indices(T)
            return 2 * xp.sum((sigma2(T, xp, g.dtype) * g**2)[..., iu[0], iu[1]], axis=-1)[..., None]
        sym = (g + xp.swapaxes(g, -1, -2)) / 2
        return xp.stack([2 * xp.sum(sym**2, axis=(-2, -1)), 2 * xp.sum((g - sym)**2, axis=(-2, -1))], axis=-1)

    def sector_noises(self, q, Q0, T: int, alpha: float) -> tuple:
        """``Delta_c = 1/qhat_c = 1/(alpha F_c)``: the noise through which the state evolution sees each
        component of the prior, in the prior's units (module docstring; ``inf`` where ``alpha F_c = 0``)."""
        alpha = v.nonnegative("alpha", alpha)
        return tuple(np.inf if alpha * F == 0 else 1.0 / (alpha * F)
                     for F in np.atleast_1d(np.asarray(self.fisher(q, Q0, T), dtype=float)))

    # -- forward map ---------------------------------------------------------

    def check_indices(self, h):
        """Validate ``h``: finite, ``(n, T, T)`` for one index, ``(n, L, T, T)`` for ``L`` of them."""
        L = self.n_indices
        h = v.finite_array("h", h, ndim=3 if L == 1 else 4)
        if h.shape[-1] != h.shape[-2] or (L > 1 and h.shape[1] != L):
            want = "(n, T, T)" if L == 1 else f"(n, {L}, T, T)"
            raise ValueError(f"h must have shape {want}, got {tuple(h.shape)}")
        return h

    def clean(self, h):
        """The noiseless output ``f(h)``."""
        raise NotImplementedError

    def __call__(self, h, seed=None):
        """Return ``y = f(h) + sqrt(noise) * xi`` with ``xi`` standard Gaussian.

        Parameters
        ----------
        h : array of shape (n, T, T), or (n, L, T, T) for ``L = n_indices > 1``
            Attention indices (NumPy or CuPy).
        seed : int, Generator or None
            Randomness for the label noise (unused when ``noise == 0``).
        """
        y = self.clean(self.check_indices(h))
        if self.noise > 0:
            xp = get_array_module(h)
            xi = v.generator(seed).standard_normal(y.shape)
            y = y + self.noise**0.5 * xp.asarray(xi, dtype=y.dtype)
        return y

    # -- Bayes side: argument checks -----------------------------------------

    def _per_index(self, name: str, x) -> tuple:
        """``x`` as a tuple of ``L = n_indices`` numbers (one per index matrix)."""
        x = tuple(np.atleast_1d(np.asarray(x, dtype=float)).tolist())
        if len(x) != self.n_indices:
            raise ValueError(f"{name} must hold {self.n_indices} values (one per index), got {len(x)}")
        return x

    def _variances(self, V):
        """``V`` as a float (``L = 1``) or a tuple of ``L`` floats, each ``> 0``."""
        if self.n_indices == 1:
            return v.positive("V", V)
        return tuple(v.positive(f"V[{i}]", x) for i, x in enumerate(self._per_index("V", V)))

    def _bayes_args(self, y, omega, V):
        """Validate ``(y, omega, V)``; return ``(xp, y, omega, V, T)``."""
        y = v.finite_array("y", y)
        omega = v.finite_array("omega", omega)
        if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
            raise ValueError(f"y must have shape (..., T, T), got {tuple(y.shape)}")
        want = y.shape if self.n_indices == 1 else y.shape[:-2] + (self.n_indices,) + y.shape[-2:]
        if omega.shape != want:
            raise ValueError(f"omega must have shape {tuple(want)} to match y, got {tuple(omega.shape)}")
        xp, y, omega = to_common(y, omega)
        return xp, y, omega, self._variances(V), y.shape[-1]

    def _fisher_args(self, q, Q0, T):
        """Validate ``(q, Q0, T)``; return ``(q, Q0, T, V)`` with ``V = Q0 - q`` (tuples when ``L > 1``)."""
        T = v.integer("T", T, minimum=1)
        if self.n_indices == 1:
            Q0 = v.positive("Q0", Q0)
            q = v.in_range("q", q, 0.0, Q0)
            return q, Q0, T, Q0 - q
        Q0 = tuple(v.positive(f"Q0[{i}]", x) for i, x in enumerate(self._per_index("Q0", Q0)))
        q = tuple(v.in_range(f"q[{i}]", x, 0.0, Q0[i]) for i, x in enumerate(self._per_index("q", q)))
        return q, Q0, T, tuple(a - b for a, b in zip(Q0, q))

    def _not_implemented(self, what: str):
        return NotImplementedError(
            f"{type(self).__name__}.{what} is not implemented: the Bayes side of the '{self.name}' "
            "channel" + (f" with label noise (noise={self.noise:g})" if self.noise > 0 else "")
            + " is not available")

    # -- Bayes side: the contract --------------------------------------------

    def correlated_layers(self, priors) -> bool:
        """Whether the output has cross terms between the layers for every prior (beyond a shared
        known part, :func:`aimlib.state_evolution.fixed_point.shares_known_part`): ``False`` here."""
        return False

    def linear_k(self, T: int):
        """``k`` with ``F_out = k / V`` exactly, for channels that reveal ``k/2`` linear measurements; else ``None``.

        For a square index matrix ``sum_s V_s F_s = k`` at every ratio ``V_A/V_B`` (``F`` is homogeneous of
        degree ``-1`` in the errors), and ``alpha_bar = k alpha``.
        """
        return None

    def log_partition(self, y, omega, V):
        """``log Z_out(y, omega, V)``, one value per sample (shape ``y.shape[:-2]``)."""
        raise self._not_implemented("log_partition")

    def g_out(self, y, omega, V):
        """``d log Z_out / d omega_ab`` (``a <= b``), symmetric, with the shape of ``omega``."""
        raise self._not_implemented("g_out")

    def fisher(self, q, Q0, T):
        """``F_out(q) = 2 sum_{a<=b} Sigma_ab E[g_ab^2]`` (``qhat = alpha F_out``); one value per index."""
        raise self._not_implemented("fisher")

    def output_free_entropy(self, q, Q0, T):
        r"""``Psi_out(q) = E log Z_out`` up to a ``q``-independent constant: ``(1/4) int_0^q F_out(s) ds``.

        The identity ``d Psi_out / dq = F_out / 4`` (book, chapter "The replica
        computation") makes this integral the generic route; channels with a
        closed form override it.  With ``L`` indices ``d Psi_out / dq_l = F_l / 4``
        for each ``l`` (the diagonal state evolution), and the integral runs along
        the segment from ``0`` to ``q``: ``(1/4) int_0^1 sum_l q_l F_l(t q) dt``.
        """
        q, Q0, T, _ = self._fisher_args(q, Q0, T)
        quad = integrate.quad
        if self.n_indices == 1:
            val, _ = quad(lambda s: self.fisher(s, Q0, T), 0.0, q, limit=200)
        else:
            qv = np.asarray(q)
            val, _ = quad(lambda t: float(np.dot(qv, self.fisher(tuple(t * qv), Q0, T))), 0.0, 1.0,
                          limit=200)
        return val / 4.0

    def generalization_error(self, q, Q0, T):
        """Bayes-optimal test error ``(1/T) E ||y_hat - y||_F^2`` per sample at overlap ``q``."""
        raise self._not_implemented("generalization_error")
