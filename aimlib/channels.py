"""Output channels of the attention-indexed model: the map ``y = g(h)``.

A channel acts on a batch of attention-index matrices ``h`` of shape
``(n, T, T)`` and returns outputs ``y`` of the same shape:

* :class:`Softmax` -- row-wise softmax at inverse temperature ``beta``,
  ``y_ab = exp(beta h_ab) / sum_c exp(beta h_ac)``;
* :class:`Hardmax` -- the ``beta -> infinity`` limit: each row is one-hot at
  ``argmax_b h_ab``;
* :class:`Linear` -- the identity, ``y = h`` (a sanity channel).

Each takes an optional label-noise variance ``noise`` (``Delta_out`` in the
book): i.i.d. ``N(0, noise)`` is added to every entry of ``y``.
"""
from __future__ import annotations

import numpy as np

from . import _validate as v
from .backend import get_array_module, to_common

__all__ = ["Channel", "Softmax", "Hardmax", "Linear", "make_channel", "CHANNELS", "row_softmax", "softmax_k"]


def row_softmax(z):
    """Row-wise softmax ``exp(z_ab) / sum_c exp(z_ac)`` over the last axis (max-shifted, any backend)."""
    xp = get_array_module(z)
    z = z - z.max(axis=-1, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_k(T: int) -> int:
    """``k = T^2 + T - 2``: twice the number of exact linear measurements of ``S`` in one softmax sample.

    The noiseless softmax has ``F_out = k / V`` and ``alpha_bar = k alpha``.
    """
    T = v.integer("T", T, minimum=1)
    return T * T + T - 2


class Channel:
    """Base class: a deterministic map ``g`` plus optional Gaussian label noise."""

    name = "channel"

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

    def clean(self, h):
        """The noiseless output ``g(h)`` for indices ``h`` of shape ``(n, T, T)``."""
        raise NotImplementedError

    def __call__(self, h, seed=None):
        """Return ``y = g(h) + sqrt(noise) * xi`` with ``xi`` standard Gaussian.

        Parameters
        ----------
        h : array of shape (n, T, T)
            Attention indices (NumPy or CuPy).
        seed : int, Generator or None
            Randomness for the label noise (unused when ``noise == 0``).
        """
        h = v.finite_array("h", h, ndim=3)
        if h.shape[1] != h.shape[2]:
            raise ValueError(f"h must have shape (n, T, T), got {tuple(h.shape)}")
        y = self.clean(h)
        if self.noise > 0:
            xp = get_array_module(h)
            xi = v.generator(seed).standard_normal(h.shape)
            y = y + self.noise**0.5 * xp.asarray(xi, dtype=y.dtype)
        return y

    # ------------------------------------------------------------------
    # Bayes side: the output channel of state evolution and AMP.
    #
    # Conventions (CONTRIBUTING): the independent entries of a symmetric
    # T x T index matrix are h_ab, a <= b, with prior covariance shape
    # sigma2_ab = 2 (a = b), 1 (a != b).  Given the data, a fresh index is
    # h ~ N(omega, V Sigma) (independent entries), and
    #   Z_out(y, omega, V) = int dh N(h; omega, V Sigma) P(y | h),
    #   g_out = d log Z_out / d omega_ab  (a <= b, returned symmetric),
    #   F_out(q) = 2 sum_{a<=b} sigma2_ab E[g_ab^2],  qhat = alpha F_out(q),
    # the expectation over omega ~ N(0, q Sigma), h ~ N(omega, (Q0 - q) Sigma)
    # and y ~ P(y | h).
    # ------------------------------------------------------------------

    @staticmethod
    def sigma2(T: int, xp=None):
        """The covariance shape of the indices: ``2`` on the diagonal, ``1`` off it (``T x T``)."""
        xp = np if xp is None else xp
        return xp.ones((T, T)) + xp.eye(T)

    def _bayes_args(self, y, omega, V):
        """Validate ``(y, omega, V)`` for the Bayes-side methods; return ``(xp, y, omega, V, T)``."""
        y = v.finite_array("y", y)
        omega = v.finite_array("omega", omega)
        if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
            raise ValueError(f"y must have shape (..., T, T), got {tuple(y.shape)}")
        if omega.shape != y.shape:
            raise ValueError(f"omega must have the shape of y {tuple(y.shape)}, got {tuple(omega.shape)}")
        V = v.positive("V", V)
        xp, y, omega = to_common(y, omega)
        return xp, y, omega, V, y.shape[-1]

    @staticmethod
    def _fisher_args(q, Q0, T):
        """Validate ``(q, Q0, T)`` for :meth:`fisher`; return ``(q, Q0, T, V)`` with ``V = Q0 - q``."""
        Q0 = v.positive("Q0", Q0)
        q = v.in_range("q", q, 0.0, Q0)
        T = v.integer("T", T, minimum=1)
        return q, Q0, T, Q0 - q

    def _not_implemented(self, what: str):
        return NotImplementedError(
            f"{type(self).__name__}.{what} is not implemented: the Bayes side (log_partition, "
            f"g_out, fisher) of the '{self.name}' channel"
            + (f" with label noise (noise={self.noise:g})" if self.noise > 0 else "")
            + " is not available")

    def log_partition(self, y, omega, V):
        r"""``log Z_out(y, omega, V)``, one value per sample (shape ``y.shape[:-2]``).

        ``Z_out = int dh N(h; omega, V Sigma) P(y | h)`` over the independent
        entries ``h_ab`` (``a <= b``); for noiseless channels it is a density
        on the set of outputs and is defined up to a constant that depends on
        ``y`` only.
        """
        raise self._not_implemented("log_partition")

    def g_out(self, y, omega, V):
        r"""``d log Z_out / d omega_ab`` (``a <= b``), returned as a symmetric array of the shape of ``y``."""
        raise self._not_implemented("g_out")

    def fisher(self, q, Q0, T):
        r"""The SE output function ``F_out(q) = 2 sum_{a<=b} sigma2_ab E[g_ab^2]`` (``qhat = alpha F_out``)."""
        raise self._not_implemented("fisher")


class Softmax(Channel):
    """Row-wise softmax at inverse temperature ``beta`` (``beta > 0``)."""

    name = "softmax"

    def __init__(self, beta: float = 1.0, noise: float = 0.0):
        super().__init__(noise)
        self.beta = v.positive("beta", beta)

    def _params(self) -> str:
        return f"beta={self.beta:g}, " + super()._params()

    def clean(self, h):
        return row_softmax(self.beta * h)

    # -- Bayes side (noiseless) ------------------------------------------
    #
    # log y_ab = beta h_ab - L_a with L_a = log sum_c exp(beta h_ac): the
    # output fixes every row of beta h up to its own constant L_a, and the
    # symmetry h_ab = h_ba fixes the differences L_a - L_b.  So y determines
    # h up to ONE global shift h + c J (J the all-ones matrix): the preimage
    # of y is the line {h^y + c J}, and
    #   Z_out = C(y) int dc N(h^y + c J; omega, V Sigma)
    #         = C(y) (2 pi V)^{-(D-1)/2} (prod sigma2)^{-1/2} |J|_w^{-1}
    #           exp(-|P r|_w^2 / (2 V)),
    # with D = T(T+1)/2, r = h^y - omega, |u|_w^2 = sum_{a<=b} u_ab^2/sigma2_ab,
    # |J|_w^2 = T^2/2 and P the w-orthogonal projection removing J.  Hence
    #   g_out = (P r)_ab / (sigma2_ab V),    F_out = 2 (D - 1) / V = (T^2+T-2)/V.

    # -- Bayes side with label noise (T = 2): aimlib.noisy_softmax ---------
    #
    # With noise the output no longer pins h to a line; for T = 2 the two rows
    # see h through u_a = h_aa - h_12 only, and Z_out is a two-dimensional
    # integral (quadrature in aimlib.noisy_softmax).  For T > 2 it would be a
    # T(T-1)-dimensional one, which is not implemented.

    def _noisy_t2(self, what: str, T: int) -> bool:
        """True if the noisy T = 2 route applies; raise for noisy T > 2."""
        if self.noise == 0:
            return False
        if T != 2:
            raise NotImplementedError(
                f"Softmax.{what}: with label noise (noise={self.noise:g} > 0) the Bayes side is "
                f"implemented for T = 2 only (got T={T}); for T > 2 it needs a T(T-1)-dimensional "
                "integral. Use noise=0, where the channel is exactly solvable for every T")
        return True

    def preimage(self, y):
        r"""A symmetric ``h^y`` with ``softmax(beta h^y) = y`` (defined up to ``+ c J``).

        ``beta h_ab = log y_ab + L_a`` with ``L_a = (1/T) sum_b (log y_ba - log y_ab)``
        (the least-squares solution of ``L_a - L_b = log y_ba - log y_ab``), symmetrised.
        """
        y = v.finite_array("y", y)
        if y.ndim < 2 or y.shape[-1] != y.shape[-2]:
            raise ValueError(f"y must have shape (..., T, T), got {tuple(y.shape)}")
        xp = get_array_module(y)
        if not bool(xp.all(y > 0)):
            raise ValueError("y must have strictly positive entries (softmax outputs); "
                             "an entry <= 0 cannot come from the softmax channel")
        ly = xp.log(y)
        D = xp.swapaxes(ly, -1, -2) - ly
        L = D.mean(axis=-1)
        h = (ly + L[..., :, None]) / self.beta
        return (h + xp.swapaxes(h, -1, -2)) / 2

    def _residual(self, y, omega):
        """``P r`` with ``r = h^y - omega``: the shift along ``J`` chosen to minimise ``|r|_w``."""
        xp = get_array_module(y, omega)
        T = y.shape[-1]
        r = self.preimage(y) - omega
        upper = xp.triu(xp.ones((T, T)))
        w = upper / self.sigma2(T, xp)
        c = -(w * r).sum(axis=(-2, -1)) / (T * T / 2.0)
        return r + c[..., None, None], w

    def log_partition(self, y, omega, V):
        r"""``log Z_out`` of the noiseless softmax, up to a constant that depends on ``y`` only.

        ``log Z_out = -|P r|_w^2/(2V) - ((D-1)/2) log(2 pi V) - (1/2) sum_{a<=b} log sigma2_ab
        - (1/2) log(T^2/2)``, ``D = T(T+1)/2``: the Gaussian weight of the line of
        preimages ``{h^y + c J}`` (the Jacobian of the softmax map, a function of ``y``,
        is dropped).  With label noise (``T = 2``) it is the exact log-density of ``y``,
        :func:`aimlib.noisy_softmax.log_partition`.
        """
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        if self._noisy_t2("log_partition", T):
            from . import noisy_softmax

            return noisy_softmax.log_partition(y, omega, V, self.beta, self.noise)
        Pr, w = self._residual(y, omega)
        D = T * (T + 1) // 2
        const = -0.5 * (D - 1) * np.log(2 * np.pi * V) - 0.5 * T * np.log(2.0) - 0.5 * np.log(T * T / 2.0)
        return -(w * Pr * Pr).sum(axis=(-2, -1)) / (2 * V) + const

    def g_out(self, y, omega, V):
        r"""``g_ab = (P r)_ab / (sigma2_ab V)``: the posterior-mean shift of the index, ``(E[h|y,omega] - omega) / (V sigma2)``.

        With label noise (``T = 2``): :func:`aimlib.noisy_softmax.g_out`.
        """
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        if self._noisy_t2("g_out", T):
            from . import noisy_softmax

            return noisy_softmax.g_out(y, omega, V, self.beta, self.noise)
        Pr, _ = self._residual(y, omega)
        return Pr / (self.sigma2(T, xp) * V)

    def fisher(self, q, Q0, T):
        r"""``F_out = (T^2 + T - 2) / (Q0 - q)``, independent of ``beta`` (``inf`` at ``q = Q0``).

        With label noise (``T = 2``): :func:`aimlib.noisy_softmax.fisher`, finite at ``q = Q0``.
        """
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        if self._noisy_t2("fisher", T):
            from . import noisy_softmax

            return noisy_softmax.fisher(q, Q0, self.beta, self.noise)
        k = softmax_k(T)
        if k == 0:
            return 0.0
        return float("inf") if V == 0 else k / V


class Hardmax(Channel):
    """Row-wise one-hot argmax: ``y_ab = 1`` if ``b = argmax_c h_ac``, else 0."""

    name = "hardmax"

    def clean(self, h):
        xp = get_array_module(h)
        idx = xp.argmax(h, axis=-1)
        return (xp.arange(h.shape[-1]) == idx[..., None]).astype(h.dtype)

    # Bayes side: noiseless, T = 2 only (aimlib.hardmax); y may be the one-hot
    # output (..., 2, 2) or the signs (s_1, s_2) of shape (..., 2).
    def _require_bayes(self, what: str):
        if self.noise > 0:
            raise self._not_implemented(what)

    def log_partition(self, y, omega, V):
        r"""``log Z_out = log Phi_2(kappa_1, kappa_2; s_1 s_2 / 3)`` (see :func:`aimlib.hardmax.log_partition`)."""
        from . import hardmax

        self._require_bayes("log_partition")
        return hardmax.log_partition(y, omega, V)

    def g_out(self, y, omega, V):
        r"""``d log Z_out / d omega_ab`` as a symmetric ``(..., 2, 2)`` array (see :func:`aimlib.hardmax.g_out`)."""
        from . import hardmax

        self._require_bayes("g_out")
        return hardmax.g_out(y, omega, V)

    def fisher(self, q, Q0, T):
        r"""``F_out(q) = G(q/V)/V`` by deterministic quadrature; ``T`` must be 2 (see :func:`aimlib.hardmax.fisher`)."""
        from . import hardmax

        self._require_bayes("fisher")
        T = v.integer("T", T, minimum=1)
        if T != 2:
            raise ValueError(f"T must be 2 for the hardmax Bayes side (its Z_out is a bivariate "
                             f"orthant probability), got T={T}")
        return hardmax.fisher(q, Q0)


class Linear(Channel):
    """Identity channel ``y = h``."""

    name = "linear"

    def clean(self, h):
        return h.copy()

    # -- Bayes side --------------------------------------------------------
    #
    # y_ab = h_ab + sqrt(noise) xi_ab with xi i.i.d. over all T^2 entries (y is
    # not symmetric).  For a < b the two observations of h_ab combine as
    #   N(y_ab; h, D) N(y_ba; h, D) = N(y_ab - y_ba; 0, 2D) N(ybar_ab; h, D/2),
    # ybar = (y + y^T)/2, so with Delta_ab = noise (a = b), noise/2 (a != b):
    #   Z_out = prod_{a<b} N(y_ab - y_ba; 0, 2 noise) prod_{a<=b} N(ybar_ab; omega_ab, sigma2_ab V + Delta_ab),
    #   g_ab = (ybar_ab - omega_ab) / (sigma2_ab V + Delta_ab),
    #   F_out = 2 sum_{a<=b} sigma2_ab / (sigma2_ab V + Delta_ab) = T (T + 1) / (V + noise/2).
    # noise = 0 is the limit: Z_out is then the density of the independent entries.

    def _variances(self, T, V, xp):
        s2 = self.sigma2(T, xp)
        delta = self.noise * (xp.eye(T) + 0.5 * (1 - xp.eye(T)))
        return s2 * V + delta

    def log_partition(self, y, omega, V):
        r"""``log Z_out``: exact log-density of ``y`` (all ``T^2`` entries if ``noise > 0``;
        the ``T(T+1)/2`` independent entries if ``noise = 0``)."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        ybar = (y + xp.swapaxes(y, -1, -2)) / 2
        var = self._variances(T, V, xp)
        upper = xp.triu(xp.ones((T, T)))
        terms = -(ybar - omega) ** 2 / (2 * var) - 0.5 * xp.log(2 * np.pi * var)
        out = (upper * terms).sum(axis=(-2, -1))
        if self.noise > 0:
            strict = xp.triu(xp.ones((T, T)), 1)
            dif = y - xp.swapaxes(y, -1, -2)
            pair = -dif**2 / (4 * self.noise) - 0.5 * np.log(4 * np.pi * self.noise)
            out = out + (strict * pair).sum(axis=(-2, -1))
        return out

    def g_out(self, y, omega, V):
        r"""``g_ab = (ybar_ab - omega_ab) / (sigma2_ab V + Delta_ab)``, ``ybar = (y + y^T)/2``,
        ``Delta_ab = noise`` on the diagonal and ``noise/2`` off it."""
        xp, y, omega, V, T = self._bayes_args(y, omega, V)
        ybar = (y + xp.swapaxes(y, -1, -2)) / 2
        return (ybar - omega) / self._variances(T, V, xp)

    def fisher(self, q, Q0, T):
        r"""``F_out = T (T + 1) / (V + noise / 2)`` with ``V = Q0 - q`` (``T(T+1)/V`` when noiseless)."""
        q, Q0, T, V = self._fisher_args(q, Q0, T)
        den = V + self.noise / 2
        return float("inf") if den == 0 else T * (T + 1) / den


CHANNELS = {c.name: c for c in (Softmax, Hardmax, Linear)}


def make_channel(name: str, **params) -> Channel:
    """Build a channel by name: ``'softmax'``, ``'hardmax'`` or ``'linear'``.

    ``params`` are passed to the class (``beta`` for softmax, ``noise`` for all).
    """
    v.choice("channel", name, CHANNELS)
    return CHANNELS[name](**params)
