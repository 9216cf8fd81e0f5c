r"""The channel contract: what every output channel of the AIM provides.

A channel maps the attention indices of a sample to its output, ``y = f(h)``,
and carries the *Bayes side* that state evolution and GAMP-RIE share (book,
chapter "The replica computation").

Indices
-------
A channel reads ``L = n_indices`` index matrices per sample.  ``L = 1`` (one
attention layer) takes ``h`` of shape ``(n, T, T)``; ``L > 1`` takes
``(n, L, T, T)``, layer ``l`` at ``h[:, l]``.  Each index matrix is symmetric;
its independent entries ``h_ab``, ``a <= b``, have the covariance shape
``Sigma_ab = 2`` on the diagonal and ``1`` off it (:func:`sigma2`).

Bayes side
----------
Given the data, a fresh index of layer ``l`` is ``h_l ~ N(omega_l, V_l Sigma)``,
independent across entries and layers, and

* ``Z_out(y, omega, V) = int dh N(h; omega, V Sigma) P(y | h)``
  (:meth:`Channel.log_partition`, one value per sample);
* ``g_out = d log Z_out / d omega_{l,ab}``, ``a <= b``, returned symmetric with
  the shape of ``omega`` (:meth:`Channel.g_out`);
* ``F_l(q) = 2 sum_{a<=b} Sigma_ab E[g_{l,ab}^2]`` with ``omega_l ~ N(0, q_l Sigma)``,
  ``h_l ~ N(omega_l, (Q0_l - q_l) Sigma)``, ``y ~ P(y | h)``: the state-evolution
  output function, ``qhat_l = alpha F_l(q)`` (:meth:`Channel.fisher`).

For ``L = 1``, ``omega`` has the shape of ``y`` and ``V``, ``q``, ``Q0`` are numbers;
for ``L > 1``, ``omega`` has an extra axis ``-3`` of length ``L`` and ``V``, ``q``,
``Q0`` are sequences of ``L`` numbers.  One overlap per index (a diagonal SE) is
exact when the cross terms ``E[g_{l,ab} g_{l',ab}]``, ``l != l'``, vanish; a
channel whose outputs mix the layers' information more tightly needs ``L x L``
overlaps, which this contract does not cover.

Capabilities
------------
What a channel can do is declared on its class, and the command line, the sweep specs, the
panels and the state evolution ask those declarations, never the channel's name:
``parameters`` (what :func:`~aimlib.channels.make_channel` takes), ``layer_counts``, ``max_T``
and ``noise_max_T`` (the range of its Bayes side, without and with label noise), ``threshold``
(``'perfect'``, ``'weak'`` or ``'onsets'``) with ``threshold_max_T``, ``trainable`` (students of
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

__all__ = ["Channel", "sigma2", "sample_indices", "sample_se_measure", "fisher_mc"]


def sigma2(T: int, xp=None, dtype=np.float64):
    """The covariance shape ``Sigma`` of one index matrix: ``2`` on the diagonal, ``1`` off it (``T x T``),
    an array of the module ``xp`` (default: numpy)."""
    xp = np if xp is None else xp
    return xp.ones((T, T), dtype=dtype) + xp.eye(T, dtype=dtype)


def sample_indices(n: int, T: int, var: float, seed=None) -> np.ndarray:
    """``n`` symmetric ``T x T`` matrices with independent entries ``h_ab ~ N(0, var Sigma_ab)``, ``a <= b``.

    The limiting law of the indices of a teacher with ``(1/d) Tr S^2 = var``
    (book, chapter "The model").
    """
    n, T = v.integer("n", n, minimum=1), v.integer("T", T, minimum=1)
    var = v.nonnegative("var", var)
    A = np.triu(v.generator(seed).standard_normal((n, T, T)))
    return (A + np.triu(A, 1).transpose(0, 2, 1)) * np.sqrt(var * sigma2(T))


def sample_se_measure(channel, n: int, q: float, Q0: float, T: int, seed=None):
    """``(omega, h, y)`` from the measure of the SE output term (one index per sample).

    ``omega ~ N(0, q Sigma)``, ``h = omega + N(0, (Q0 - q) Sigma)``, ``y = channel(h)``,
    all from one generator (in that order).
    """
    rng = v.generator(seed)
    Q0 = v.positive("Q0", Q0)
    q = v.in_range("q", q, 0.0, Q0)
    omega = sample_indices(n, T, q, rng)
    h = omega + sample_indices(n, T, Q0 - q, rng)
    return omega, h, channel(h, seed=rng)


def fisher_mc(channel, q: float, Q0: float, T: int, n: int = 40_000, seed=None) -> float:
    """Monte Carlo estimate of ``F_out = 2 sum_{a<=b} Sigma_ab E[g_ab^2]`` over :func:`sample_se_measure`.

    An independent route to :meth:`Channel.fisher` (the estimate has relative
    standard error of order ``1/sqrt(n)``).
    """
    omega, _, y = sample_se_measure(channel, n, q, Q0, T, seed)
    g = channel.g_out(y, omega, Q0 - q)
    iu = np.triu_indices(T)
    return float(2 * np.mean(np.sum((sigma2(T) * g**2)[:, iu[0], iu[1]], axis=1)))


class Channel:
    """Base class: a deterministic map ``g`` of ``n_indices`` index matrices plus optional Gaussian label noise."""

    name = "channel"
    #: number of index matrices ``L`` read per sample
    n_indices = 1
    #: whether the index matrices are square (untied key and query) rather than symmetric
    square = False
    #: whether one output mixes several index matrices (layers), so that the Bayes side of a layer
    #: depends on the others' indices; its diagonal state evolution then needs independent
    #: estimates across layers, which priors with a non-zero mean (a shared known part) break
    joint_output = False

    # -- capabilities: what the interfaces (command line, sweeps, panels, state evolution) ask of a
    # channel class instead of testing its name; :mod:`aimlib.channels.registry` reads them.
    #: the keyword parameters that :func:`~aimlib.channels.make_channel` takes for it
    parameters = ("noise",)
    #: the numbers of index matrices (layers) it can be made with
    layer_counts = (1,)
    #: the largest ``T`` of its Bayes side (``None``: every ``T >= 2``), and why
    max_T = None
    max_T_why = ""
    #: the largest ``T`` of its Bayes side with label noise (``None``: as without; ``0``: none)
    noise_max_T = None
    #: the threshold it has: ``'perfect'`` (perfect recovery, noiseless), ``'weak'`` (weak recovery
    #: as ``rho -> 0``, in ``alpha_bar = alpha/rho``) or ``'onsets'`` (each layer's ``rho -> 0`` onset)
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
        """``k`` with ``F_out = k / V`` exactly, for channels that reveal ``k/2`` linear measurements; else ``None``."""
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
