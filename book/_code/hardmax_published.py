r"""The hardmax (``T = 2``) output function of the published code, kept for comparison only.

The code published with Boncoraglio, Troiani, Erba and Zdeborová (NeurIPS 2025;
repository ``FabrizioBoncoraglio/BO_ExtensiveRankAttention``: ``SE_hardmax.py``,
function ``sum_G_squared_hard``, lines 75-103; ``SE_hardmax_rho=0.py``, the same
function; ``AMP_hardmax.py``, function ``gOut``, lines 137-163; commit ``5f1b99c``)
uses, in the notation of :mod:`aimlib.channels.hardmax`,

.. math::  g^{\rm pub}_{ii} = \frac{s_i R}{\sqrt{3V}},\qquad g^{\rm pub}_{12} = -(g^{\rm pub}_{11} + g^{\rm pub}_{22}),
           \qquad R = \frac{\phi_2(\kappa_1, \kappa_2; r)}{\Phi_2(\kappa_1, \kappa_2; r)},

with the joint density ``phi_2`` where the gradient of ``log Z_out`` has
``A_i = phi(kappa_i) Phi((kappa_j - r kappa_i)/c) / Phi_2`` (one factor per
coordinate).  ``g^pub`` is not a gradient and fails the Nishimori identity;
its state evolution reproduces the published hardmax curves (book, chapter
"Results at a glance").

Book code, not part of :mod:`aimlib`: the chapters "The hardmax channel" and
"Results at a glance" import it with ``book/_code`` on ``sys.path``, and
``tests/test_hardmax_published.py`` tests it.  It uses only the public API of
:mod:`aimlib.channels.hardmax` (its reduced inputs, its quadrature rule and window).
"""
from __future__ import annotations

import math

import numpy as np

from aimlib.backend import to_device
from aimlib.channels import hardmax as hm
from aimlib.channels.base import sample_se_measure
from aimlib.channels.hardmax import CORRELATION, Hardmax, log_bvn_cdf

__all__ = ["PublishedHardmax", "published_g_out", "published_fisher_scaled", "published_fisher",
           "published_threshold", "threshold_standard_error", "nishimori_terms",
           "PUBLISHED_THRESHOLD", "PUBLISHED_SE", "PUBLISHED_AMP", "PUBLISHED_MC_SAMPLES"]

#: the published weak-recovery threshold of the ``rho -> 0`` limit (Boncoraglio et al. 2025)
PUBLISHED_THRESHOLD = 0.5635
#: Monte Carlo samples per SE step of the published code (``nsamp_out`` in ``SE_hardmax.py``)
PUBLISHED_MC_SAMPLES = 25_000
#: ``(alpha, E_S)`` quoted from the published ``data/SE_hardmax_rho=0.5.csv`` (``rho = 0.5``)
PUBLISHED_SE = ((0.0200000, 0.97355), (0.209466, 0.71899), (0.505411, 0.48638),
                (1.21948, 0.27491), (2.94243, 0.13720), (7.09967, 0.06337))
#: ``(alpha, E_S, spread over seeds)`` quoted from the published ``data/AMP_hardmax_rho=0.5.csv``
#: (their AMP, with their output function, ``d = 100``, ``rho = 0.5``)
PUBLISHED_AMP = ((0.105906, 0.8557, 0.0532), (0.217745, 0.6908, 0.0350), (0.373869, 0.5663, 0.0412),
                 (0.536086, 0.4768, 0.0341), (0.768685, 0.3851, 0.0330), (1.10220, 0.3199, 0.0334))

#: the independent entries ``(a, b)``, ``a <= b``, of a ``2 x 2`` index
_ENTRIES = ((0, 0), (1, 1), (0, 1))


def _checked(name: str, x, lowest: float, *, strict: bool = False) -> float:
    """``x`` as a finite float ``>= lowest`` (``> lowest`` if ``strict``), or a ``ValueError`` naming it."""
    x = float(x)
    if not (math.isfinite(x) and (x > lowest if strict else x >= lowest)):
        raise ValueError(f"{name} must be finite and {'>' if strict else '>='} {lowest:g}, got {x!r}")
    return x


def _count(name: str, n, lowest: int) -> int:
    """``n`` as an int ``>= lowest``, or an error naming it."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n < lowest:
        raise ValueError(f"{name} must be >= {lowest}, got {n}")
    return int(n)


def _log_bvn_pdf(h, k, r):
    r"""``log phi_2(h, k; r)``, the standard bivariate normal log-density of correlation ``r``.

    ``phi_2 = exp(-(h^2 - 2 r h k + k^2) / (2 (1 - r^2))) / (2 pi sqrt(1 - r^2))``.
    """
    c2 = 1.0 - np.asarray(r, dtype=float) ** 2
    return -(h * h - 2 * r * h * k + k * k) / (2 * c2) - np.log(2 * math.pi * np.sqrt(c2))


def _ratio(k1, k2, r):
    """``R = phi_2 / Phi_2`` at ``(k1, k2; r)``, in log space."""
    return np.exp(_log_bvn_pdf(k1, k2, r) - log_bvn_cdf(k1, k2, r))


def published_g_out(y, omega, V):
    r"""The published output function ``g^pub`` (module docstring): ``R = phi_2/Phi_2`` for ``A_1`` and ``A_2``.

    Parameters, shapes and validation are those of :func:`aimlib.channels.hardmax.g_out`.

    Returns
    -------
    array of shape ``omega.shape``, symmetric: ``g_ii = s_i R / sqrt(3V)``, ``g_12 = -(g_11 + g_22)``.
    """
    xp, s, m1, m2, sv = hm.reduced_inputs(y, omega, V)
    R = _ratio(s[..., 0] * m1 / sv, s[..., 1] * m2 / sv, s[..., 0] * s[..., 1] * CORRELATION)
    g = np.empty(m1.shape + (2, 2))
    g[..., 0, 0] = s[..., 0] * R / sv
    g[..., 1, 1] = s[..., 1] * R / sv
    g[..., 0, 1] = g[..., 1, 0] = -(g[..., 0, 0] + g[..., 1, 1])
    return to_device(g, xp)


def _mean_ratio_sq(lam: float, r: float) -> float:
    r"""``J(r, lambda) = E[phi_2(kappa; r)^2 / Phi_2(kappa; r)]``, ``kappa ~ N(0, lambda C_r)``.

    ``kappa_1 = sqrt(lambda) t_1``, ``kappa_2 = r kappa_1 + c sqrt(lambda) t_2`` with
    independent standard ``t``; the integrand decays like ``phi_2`` in every
    direction, so tensor Gauss-Legendre rules on the windows of
    :mod:`aimlib.channels.hardmax` hold it.
    """
    sl, c = math.sqrt(lam), math.sqrt(1.0 - r * r)
    t1, w1 = hm.gauss_rule(sl, hm.BOX_K)
    t2, w2 = hm.gauss_rule(sl * c, hm.BOX_K * (1 + abs(r)))
    K1 = sl * t1[:, None]
    K2 = r * K1 + c * sl * t2[None, :]
    f = np.exp(2 * _log_bvn_pdf(K1, K2, r) - log_bvn_cdf(K1, K2, r))
    return float(np.sum(w1[:, None] * w2[None, :] * f))


def published_fisher_scaled(lam) -> float:
    r"""``G^pub(lambda) = V F^pub_out``, ``lambda = q/V``, by deterministic quadrature.

    ``2 sum_{a<=b} Sigma_ab g_ab^2 = 4 (3 + s_1 s_2) R^2 / (3V)``; averaging over the
    four outputs (probability ``Phi_2``) and ``omega`` turns ``kappa`` into
    ``N(0, lambda C_r)`` for each output, ``r = s_1 s_2 / 3``, so

    ``G^pub(lambda) = (8/3) [4 J(1/3, lambda) + 2 J(-1/3, lambda)]``
    with ``J`` of :func:`_mean_ratio_sq`.  At ``lambda = 0``,
    ``G^pub(0) = (3 / (2 pi^2)) (2/p_+ + 1/p_-)``, ``p_+- = 1/4 +- arcsin(1/3)/(2 pi)``.
    """
    lam = _checked("lam", lam, 0.0)
    return (8.0 / 3.0) * (4 * _mean_ratio_sq(lam, CORRELATION) + 2 * _mean_ratio_sq(lam, -CORRELATION))


def published_fisher(q, Q0) -> float:
    r"""The published SE output function ``F^pub_out(q) = 2 sum_{a<=b} Sigma_ab E[(g^pub_ab)^2] = G^pub(q/V)/V``.

    The average is over ``omega ~ N(0, q Sigma)`` and the outputs of the real
    channel, as in :func:`aimlib.channels.hardmax.fisher`; ``0 <= q < Q0``.
    """
    Q0 = _checked("Q0", Q0, 0.0, strict=True)
    q = _checked("q", q, -math.inf)
    if not 0 <= q < Q0:
        raise ValueError(f"q must be in [0, Q0) = [0, {Q0:g}), got {q!r}")
    return published_fisher_scaled(q / (Q0 - q)) / (Q0 - q)


def _trivial_point():
    """``(p_+, p_-)``, the output probabilities at ``kappa = 0``, and ``phi_2(0, 0; +-1/3)^2``."""
    p_plus = 0.25 + math.asin(CORRELATION) / (2 * math.pi)
    return p_plus, 0.5 - p_plus, 1.0 / (4 * math.pi**2 * (1 - CORRELATION**2))


def published_threshold() -> float:
    r"""``alpha_bar^pub_WR = 1 / G^pub(0) = 2 pi^2 / (3 (2/p_+ + 1/p_-))`` (about 0.56327), in closed form."""
    p_plus, p_minus, _ = _trivial_point()
    return 2 * math.pi**2 / (3.0 * (2.0 / p_plus + 1.0 / p_minus))


def threshold_standard_error(n: int = PUBLISHED_MC_SAMPLES) -> float:
    r"""Standard error of ``1 / F_hat``, ``F_hat`` an ``n``-sample Monte Carlo estimate of ``F^pub_out(0)``.

    At ``q = 0`` the per-sample value ``x = 2 sum_{a<=b} Sigma_ab (g^pub_ab)^2`` is
    ``(16/3) phi_2^2 / p_+^2`` on the outputs with ``s_1 s_2 = +1`` (probability ``2 p_+``)
    and ``(8/3) phi_2^2 / p_-^2`` otherwise, so its spread is exact; to first order
    the error of ``1/F_hat`` is ``alpha_bar^pub_WR sd(x) / (E[x] sqrt(n))``.
    """
    n = _count("n", n, 1)
    p_plus, p_minus, phi2_sq = _trivial_point()
    values = np.array([16 / 3 * phi2_sq / p_plus**2, 8 / 3 * phi2_sq / p_minus**2])
    probs = np.array([2 * p_plus, 2 * p_minus])
    mean = probs @ values
    return published_threshold() * math.sqrt(probs @ (values - mean) ** 2) / mean / math.sqrt(n)


class PublishedHardmax(Hardmax):
    """The hardmax channel with the published output function (:func:`published_g_out`, :func:`published_fisher`).

    Its forward map and ``log_partition`` are those of :class:`~aimlib.channels.hardmax.Hardmax`;
    ``g_out`` is not their gradient.  For comparison with the published curves only.
    """

    name = "hardmax_published"

    def g_out(self, y, omega, V):
        """The published output function (:func:`published_g_out`)."""
        self._require_bayes("g_out")
        return published_g_out(y, omega, V)

    def fisher(self, q, Q0, T):
        """``F^pub_out(q)`` (:func:`published_fisher`); ``T`` must be 2."""
        self._require_bayes("fisher")
        if _count("T", T, 1) != 2:
            raise ValueError(f"T must be 2 for the hardmax Bayes side, got T={T}")
        return published_fisher(q, Q0)


def nishimori_terms(g_out, q, Q0, *, n: int = 100_000, seed=None, eps: float = 1e-5):
    r"""Both sides of the Nishimori identity ``E[g g^T] = -E[d g / d omega]`` by Monte Carlo.

    ``omega ~ N(0, q Sigma)``, ``h ~ N(omega, (Q0 - q) Sigma)`` and ``y = Hardmax(h)``
    (:func:`aimlib.channels.base.sample_se_measure`); ``g = g_out(y, omega, Q0 - q)``
    over the independent entries ``(omega_11, omega_22, omega_12)``, its Jacobian by
    central differences of step ``eps``.  The identity holds for the gradient of
    the true ``log Z_out`` (book, chapter "The hardmax channel").

    Returns
    -------
    lhs, rhs, sem : numpy.ndarray of shape (3, 3)
        The means of ``g g^T`` and of ``-d g``, and the standard error of the mean of their difference.
    """
    n = _count("n", n, 2)
    eps = _checked("eps", eps, 0.0, strict=True)
    omega, _, y = sample_se_measure(Hardmax(), n, q, Q0, 2, seed)
    V = Q0 - q

    def entries(g):
        return np.stack([g[:, a, b] for a, b in _ENTRIES], axis=-1)

    gv = entries(g_out(y, omega, V))
    lhs = gv[:, :, None] * gv[:, None, :]
    rhs = np.empty_like(lhs)
    for c, (a, b) in enumerate(_ENTRIES):
        e = np.zeros((2, 2))
        e[a, b] = e[b, a] = eps
        rhs[:, :, c] = -(entries(g_out(y, omega + e, V)) - entries(g_out(y, omega - e, V))) / (2 * eps)
    diff = lhs - rhs
    return lhs.mean(0), rhs.mean(0), diff.std(0, ddof=1) / np.sqrt(n)
