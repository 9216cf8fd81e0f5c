r"""State evolution (SE) of the attention-indexed model: the Bayes-optimal error.

The replica-symmetric free entropy (book, chapter "The replica computation")
is

.. math::

    \Phi(q, \hat q) = -\frac{q \hat q}{4} + \psi_S(\hat q) + \alpha\, \Psi_{\rm out}(q),
    \qquad
    \psi_S(\hat q) = \frac14 \int_0^{\hat q} \bigl(Q_0 - \mathrm{mmse}_S(1/s)\bigr)\, ds ,

with ``Q0 = 1 + rho``, ``mmse_S(Delta)`` the prior MMSE of extensive-rank
denoising ``Y = S + sqrt(Delta) Z`` (:func:`aimlib.rmt.mmse`; the integral is
the I-MMSE relation ``d psi_S / d qhat = q / 4``), and ``Psi_out(q) =
E log Z_out`` the output term.  Its stationary points are the SE fixed points

.. math::

    \hat q = \alpha F_{\rm out}(q), \qquad q = Q_0 - \mathrm{mmse}_S(1/\hat q),

with ``F_out = 4 dPsi_out/dq = 2 sum_{a<=b} sigma2_ab E[g_ab^2]``
(:meth:`aimlib.channels.Channel.fisher`).  The estimation error is
``E_S = (1/d)||S_hat - S||_F^2 = Q0 - q = V``.

Noiseless linear-type channels (softmax at any ``beta``, the identity) have
``F_out = k / V`` with ``k = T^2 + T - 2`` (softmax) or ``T (T + 1)``
(identity), so the fixed point solves the scalar equation

.. math::

    V = \mathrm{mmse}_S(V / \bar\alpha), \qquad \bar\alpha = k\, \alpha ,

equivalently ``mmse_S(Delta) / Delta = alpha_bar`` with ``V = alpha_bar Delta``:
a one-dimensional root find (:func:`solve` with ``method='closed'``).  Every
other channel is iterated (``method='iterate'``) through its ``fisher``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from . import _validate as v
from .channels import Channel, Linear, Softmax, make_channel
from .errors import ConvergenceError

__all__ = [
    "SEResult",
    "SECurve",
    "make_se_channel",
    "effective_alpha",
    "prior_mmse",
    "solve",
    "fixed_point",
    "curve",
    "perfect_recovery_threshold",
    "prior_free_entropy",
    "output_free_entropy",
    "free_entropy",
    "generalization_error",
]


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SEResult:
    """A state-evolution fixed point.

    Attributes
    ----------
    alpha : float
        Sample complexity ``n / d^2``.
    mmse : float
        Estimation error ``E_S = Q0 - q = V`` (``0`` at perfect recovery).
    q, qhat : float
        Overlap and its conjugate (``qhat = inf`` at perfect recovery; for
        ``rho = inf`` the overlap is infinite and only ``mmse`` is meaningful).
    iterations : int
        SE iterations (``method='iterate'``) or prior-MMSE evaluations of the
        root find (``method='closed'``).
    trace : numpy.ndarray
        The successive values of ``V`` visited.
    method : str
        ``'closed'`` or ``'iterate'``.
    """

    alpha: float
    mmse: float
    q: float
    qhat: float
    iterations: int
    trace: np.ndarray = field(repr=False)
    method: str = "iterate"

    @property
    def V(self) -> float:
        """Fluctuation variance ``V = Q0 - q`` (equal to ``mmse``)."""
        return self.mmse


@dataclass(frozen=True)
class SECurve:
    """State evolution along a list of sample complexities (arrays in the input order)."""

    alpha: np.ndarray
    mmse: np.ndarray
    q: np.ndarray
    qhat: np.ndarray
    iterations: np.ndarray
    method: str
    evaluations: int = 0

    def __len__(self) -> int:
        return len(self.alpha)


# ---------------------------------------------------------------------------
# channels and the prior
# ---------------------------------------------------------------------------

def make_se_channel(channel="softmax", *, beta: float = 1.0, noise: float = 0.0) -> Channel:
    """Return a :class:`~aimlib.channels.Channel` from a name or pass an instance through.

    ``beta`` is used by the softmax only; ``noise`` is the label-noise variance.
    """
    if isinstance(channel, Channel):
        return channel
    if not isinstance(channel, str):
        raise TypeError(f"channel must be a channel name or an aimlib.channels.Channel, "
                        f"got {type(channel).__name__}")
    params = {"noise": noise}
    if channel == "softmax":
        params["beta"] = beta
    return make_channel(channel, **params)


def _linear_k(channel: Channel, T: int):
    """``k`` with ``F_out = k / V`` for the noiseless linear-type channels, else ``None``."""
    if channel.noise > 0:
        return None
    if type(channel) is Softmax:
        return T * T + T - 2
    if type(channel) is Linear:
        return T * (T + 1)
    return None


def effective_alpha(alpha: float, T: int, channel="softmax") -> float:
    """``alpha_bar = k alpha``: ``k = T^2 + T - 2`` (softmax), ``T (T + 1)`` (noiseless identity).

    The number of exact scalar measurements of ``S`` per sample is ``k / 2``.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=1)
    k = _linear_k(make_se_channel(channel), T)
    if k is None:
        raise ValueError(f"channel must be a noiseless softmax or linear channel for alpha_bar, got {channel!r}")
    return k * alpha


def prior_mmse(rho: float, mmse=None):
    """Return ``Delta -> mmse_S(Delta)`` for the width ratio ``rho``.

    ``rho = inf`` is the Gaussian (GOE) prior of unit variance, ``Delta / (1 + Delta)``.
    ``mmse`` (a callable ``mmse(delta, rho)``) replaces :func:`aimlib.rmt.mmse`.
    The edge cases ``Delta = 0`` (``0``) and ``Delta = inf`` (``1``) are handled here.
    """
    rho = v.rho(rho, allow_inf=True)
    if math.isinf(rho):
        base = lambda d: d / (1.0 + d)  # noqa: E731
    else:
        if mmse is None:
            try:
                from . import rmt
            except ImportError as exc:  # pragma: no cover - depends on the checkout
                raise ImportError("aimlib.rmt (the prior MMSE mmse(delta, rho)) is required by the "
                                  "state evolution but could not be imported") from exc
            mmse = rmt.mmse
        f = mmse
        base = lambda d: float(f(d, rho))  # noqa: E731

    def m(delta: float) -> float:
        if delta <= 0:
            return 0.0
        if math.isinf(delta):
            return 1.0
        return base(delta)

    return m


def _aitken_slope(m) -> float:
    """``lim_{Delta -> 0} mmse(Delta) / Delta`` by Aitken extrapolation on a geometric grid.

    ``s(Delta) = c0 + A Delta^p + ...`` with unknown ``p`` (``p = 1`` for
    ``rho != 1``; slower at ``rho = 1``); Aitken's delta-squared removes the
    leading correction exactly for a geometric sequence of ``Delta``.
    """
    deltas = 1e-3 * 4.0 ** -np.arange(4)
    s = np.array([m(d) / d for d in deltas])
    x0, x1, x2 = s[-3:]
    den = (x2 - x1) - (x1 - x0)
    if den == 0 or not np.isfinite(den):
        return float(x2)
    est = x2 - (x2 - x1) ** 2 / den
    # the extrapolation must stay between the last value and the bound 1
    return float(min(max(est, x2), 1.0)) if x2 <= 1.0 else float(est)


@lru_cache(maxsize=64)
def _slope_cached(rho: float) -> float:
    return _aitken_slope(prior_mmse(rho))


def _zero_slope(rho: float, mmse=None) -> float:
    if math.isinf(rho):
        return 1.0
    return _slope_cached(rho) if mmse is None else _aitken_slope(prior_mmse(rho, mmse))


def perfect_recovery_threshold(rho: float, T: int, channel="softmax", *, beta: float = 1.0,
                               mmse=None) -> float:
    r"""The perfect-recovery threshold ``alpha_PR`` of a noiseless linear-type channel.

    ``E_S = 0`` iff ``alpha_bar = k alpha >= lim_{Delta->0} mmse_S(Delta)/Delta``:
    the fixed point ``V = mmse_S(V/alpha_bar)`` leaves 0 when the slope of
    ``mmse_S`` at the origin equals ``alpha_bar``.  The slope is computed from
    the prior MMSE (:func:`_aitken_slope`), not typed in; it equals the
    fraction of degrees of freedom of a rank-``rho d`` symmetric matrix,
    ``2 rho - rho^2`` for ``rho < 1`` and ``1`` for ``rho >= 1``.

    Parameters
    ----------
    rho : float
        Width ratio, ``> 0`` (``inf`` allowed: Gaussian prior, slope 1).
    T : int
        Sequence length, ``>= 2`` for the softmax.
    channel : str or Channel
        ``'softmax'`` (``k = T^2+T-2``) or ``'linear'`` (``k = T(T+1)``), noiseless.
    """
    rho = v.rho(rho, allow_inf=True)
    T = v.integer("T", T, minimum=1)
    ch = make_se_channel(channel, beta=beta)
    k = _linear_k(ch, T)
    if k is None:
        raise ValueError(f"channel: perfect recovery threshold defined for noiseless softmax/linear "
                         f"channels only, got {ch!r}")
    if k == 0:
        return math.inf
    return _zero_slope(rho, mmse) / k


# ---------------------------------------------------------------------------
# solvers
# ---------------------------------------------------------------------------

def _solve_closed(abar: float, m, c0: float, guess: float | None, tol: float, gaussian: bool = False):
    """Solve ``mmse(Delta)/Delta = abar`` for ``t = log Delta``; return ``(V, Delta, evals, trace)``.

    ``guess`` is a starting ``t`` (warm start).  Secant iterations inside a
    maintained bracket (``h`` decreasing in ``t``), bisection as fallback.
    ``gaussian``: the prior is ``Delta/(1+Delta)`` (``rho = inf``), solved exactly,
    ``V = 1 - abar``, ``Delta = 1/abar - 1``.
    """
    if abar <= 0:
        return 1.0, math.inf, 0, [1.0]
    if abar >= c0:
        return 0.0, 0.0, 0, [0.0]
    if gaussian:
        return 1.0 - abar, 1.0 / abar - 1.0, 0, [1.0 - abar]
    la = math.log(abar)
    evals = 0
    trace = []

    def h(t):
        nonlocal evals
        evals += 1
        mv = m(math.exp(t))
        trace.append(mv)
        if mv <= 0:
            return math.inf
        return math.log(mv) - t - la

    t_hi_bound = -la  # Delta = 1/abar: mmse < 1 gives h < 0
    t0 = min(guess, t_hi_bound) if guess is not None else t_hi_bound - 1.0
    h0 = h(t0)
    if h0 == 0:
        return abar * math.exp(t0), math.exp(t0), evals, trace
    step = 0.05 if guess is not None else 1.0
    # bracket: lo has h > 0, hi has h < 0
    if h0 > 0:
        lo, hlo = t0, h0
        hi = t0 + step
        hhi = h(hi)
        while hhi > 0:
            lo, hlo = hi, hhi
            step *= 4
            hi = min(hi + step, t_hi_bound)
            hhi = h(hi)
            if hi == t_hi_bound and hhi > 0:
                raise ConvergenceError(f"SE root find failed to bracket the fixed point at alpha_bar={abar:g}")
    else:
        hi, hhi = t0, h0
        lo = t0 - step
        hlo = h(lo)
        while hlo < 0:
            hi, hhi = lo, hlo
            step *= 4
            lo = lo - step
            if lo < math.log(1e-15):  # numerically at perfect recovery
                return 0.0, 0.0, evals, trace
            hlo = h(lo)
    # secant / bisection inside [lo, hi] (Illinois-type regula falsi)
    side = 0
    for _ in range(200):
        t = hi - hhi * (hi - lo) / (hhi - hlo)
        if not lo < t < hi:
            t = 0.5 * (lo + hi)
        ht = h(t)
        if abs(ht) < 1e-15 or (hi - lo) < tol:
            break
        if ht > 0:
            lo, hlo = t, ht
            if side == -1:
                hhi /= 2
            side = -1
        else:
            hi, hhi = t, ht
            if side == 1:
                hlo /= 2
            side = 1
        if abs(hi - lo) < tol:
            break
    else:  # pragma: no cover
        raise ConvergenceError(f"SE root find did not converge at alpha_bar={abar:g}")
    delta = math.exp(t)
    return abar * delta, delta, evals, trace


def _resolve_method(method: str, ch: Channel, T: int) -> str:
    v.choice("method", method, {"auto", "closed", "iterate"})
    k = _linear_k(ch, T)
    if method == "closed" and k is None:
        raise ValueError(f"method='closed' needs a noiseless softmax or linear channel, got {ch!r}")
    if method == "auto":
        return "closed" if k is not None else "iterate"
    return method


def _common(alpha, T, rho, channel, beta, noise, method):
    T = v.integer("T", T, minimum=1)
    rho = v.rho(rho, allow_inf=True)
    ch = make_se_channel(channel, beta=beta, noise=noise)
    meth = _resolve_method(method, ch, T)
    if meth == "iterate" and math.isinf(rho):
        raise ValueError("rho=inf is supported by method='closed' (noiseless softmax/linear) only")
    return T, rho, ch, meth


def _closed_result(alpha, V, delta, evals, trace, rho):
    Q0 = 1.0 + rho
    q = Q0 - V
    qhat = math.inf if delta == 0 else (0.0 if math.isinf(delta) else 1.0 / delta)
    return SEResult(alpha=alpha, mmse=V, q=q, qhat=qhat, iterations=evals,
                    trace=np.asarray(trace, dtype=float), method="closed")


def fixed_point(alpha: float, channel="softmax", *, T: int = 2, rho: float = 0.5, beta: float = 1.0,
                noise: float = 0.0, damping: float = 0.0, tol: float = 1e-10, max_iter: int = 10_000,
                init: float | None = None, mmse=None) -> SEResult:
    r"""Iterate ``qhat = alpha F_out(q)``, ``q = Q0 - mmse_S(1/qhat)`` to a fixed point.

    Works for every channel with a ``fisher`` method.  The state is
    ``V = Q0 - q``; one step is ``V <- (1 - damping) mmse_S(1/(alpha F_out(Q0 - V))) + damping V``.

    Parameters
    ----------
    alpha : float
        Sample complexity ``>= 0``.
    channel : str or Channel
        ``'softmax'``, ``'linear'``, ``'hardmax'`` or an instance.
    T, rho, beta, noise
        Sequence length, width ratio (finite), softmax inverse temperature,
        label-noise variance.
    damping : float in [0, 1)
    tol : float
        Stop when ``|V_{t+1} - V_t| < tol``.
    max_iter : int
    init : float or None
        Initial ``V``; default ``1`` (``q = rho``: the uninformative estimate ``E[S] = sqrt(rho) I``).
    mmse : callable or None
        ``mmse(delta, rho)``; default :func:`aimlib.rmt.mmse`.

    Raises
    ------
    aimlib.ConvergenceError
        If ``max_iter`` iterations do not reach ``tol``.
    """
    alpha = v.nonnegative("alpha", alpha)
    T = v.integer("T", T, minimum=1)
    rho = v.positive("rho", rho)
    ch = make_se_channel(channel, beta=beta, noise=noise)
    damping = v.in_range("damping", damping, 0.0, 0.999)
    tol = v.positive("tol", tol)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    Q0 = 1.0 + rho
    V = 1.0 if init is None else v.in_range("init", init, 0.0, Q0)
    m = prior_mmse(rho, mmse)
    trace = [V]
    qhat = 0.0
    for it in range(1, max_iter + 1):
        F = ch.fisher(Q0 - V, Q0, T)
        qhat = alpha * F if F != math.inf or alpha > 0 else 0.0
        V_new = m(1.0 / qhat) if qhat > 0 else 1.0
        V_new = (1 - damping) * V_new + damping * V
        trace.append(V_new)
        if not math.isfinite(V_new):
            raise ConvergenceError(f"SE diverged at alpha={alpha:g} (V={V_new!r}) after {it} iterations")
        if abs(V_new - V) < tol:
            V = V_new
            F = ch.fisher(Q0 - V, Q0, T)
            qhat = alpha * F if F != math.inf or alpha > 0 else 0.0
            return SEResult(alpha=alpha, mmse=V, q=Q0 - V, qhat=qhat, iterations=it,
                            trace=np.asarray(trace), method="iterate")
        V = V_new
    raise ConvergenceError(f"SE did not converge at alpha={alpha:g} within max_iter={max_iter} "
                           f"iterations (last change {abs(trace[-1] - trace[-2]):.3g} > tol={tol:g}); "
                           "increase max_iter or damping")


def solve(alpha: float, channel="softmax", *, T: int = 2, rho: float = 0.5, beta: float = 1.0,
          noise: float = 0.0, method: str = "auto", tol: float = 1e-12, mmse=None, **iterate_kw) -> SEResult:
    r"""The SE fixed point at one ``alpha`` (see :func:`curve` for many).

    ``method='closed'`` (default for noiseless softmax/linear) solves
    ``V = mmse_S(V / alpha_bar)`` by a one-dimensional root find in ``log Delta``
    (``tol`` on ``log Delta``); ``'iterate'`` calls :func:`fixed_point`
    (``iterate_kw``: ``damping``, ``max_iter``, ``init``; ``tol`` is passed on).
    ``rho = inf`` (Gaussian prior) is allowed with ``'closed'``.
    """
    alpha = v.nonnegative("alpha", alpha)
    T, rho, ch, meth = _common(alpha, T, rho, channel, beta, noise, method)
    tol = v.positive("tol", tol)
    if meth == "iterate":
        return fixed_point(alpha, ch, T=T, rho=rho, tol=max(tol, 1e-13), mmse=mmse, **iterate_kw)
    if iterate_kw:
        raise TypeError(f"unexpected arguments for method='closed': {sorted(iterate_kw)}")
    k = _linear_k(ch, T)
    m = prior_mmse(rho, mmse)
    V, delta, evals, trace = _solve_closed(k * alpha, m, _zero_slope(rho, mmse), None, tol,
                                           gaussian=math.isinf(rho))
    return _closed_result(alpha, V, delta, evals, trace, rho)


def _table_curve(abars, m, c0, step):
    """Closed-form curve by interpolation of the parametric solution.

    Every ``Delta`` gives one exact point of the curve, ``alpha_bar(Delta) =
    mmse(Delta)/Delta`` and ``V(Delta) = mmse(Delta)``.  Tabulate
    ``log mmse(e^t)`` on a uniform grid of ``t = log Delta`` (spacing
    ``step``) covering the requested ``alpha_bar``, fit a cubic spline and
    invert ``phi(t) = log mmse(e^t) - t = log alpha_bar`` on the spline
    (vectorised Newton).  Returns ``(V, Delta, n_evals, inside)``; points
    outside the tabulated range are flagged ``inside = False``.
    """
    from scipy.interpolate import CubicSpline

    la = np.log(abars)
    t_hi = -float(la.min()) + step  # mmse < 1 there, so phi < log(min abar)
    ts, ys = [], []
    t = t_hi
    target = float(la.max())
    tmin = math.log(1e-12)
    while True:
        mv = m(math.exp(t))
        ts.append(t)
        ys.append(math.log(mv) if mv > 0 else -np.inf)
        if (ys[-1] - t >= target and len(ts) >= 4) or t - step < tmin:
            break
        t -= step
    ts = np.array(ts[::-1])
    ys = np.array(ys[::-1])
    spl = CubicSpline(ts, ys)
    phi_nodes = ys - ts  # decreasing in t
    inside = (la <= phi_nodes[0]) & (la >= phi_nodes[-1])
    # initial guess by linear interpolation of the inverse on the nodes, then Newton on the spline
    tt = np.interp(-la, -phi_nodes, ts)
    dspl = spl.derivative()
    for _ in range(8):
        f = spl(tt) - tt - la
        fp = dspl(tt) - 1.0
        tt = np.clip(tt - f / fp, ts[0], ts[-1])
    delta = np.exp(tt)
    return np.exp(la) * delta, delta, len(ts), inside


def curve(alphas, channel="softmax", *, T: int = 2, rho: float = 0.5, beta: float = 1.0,
          noise: float = 0.0, method: str = "auto", tol: float = 1e-12, warm_start: bool = True,
          interpolate: bool = True, step: float = 0.1, mmse=None, **iterate_kw) -> SECurve:
    r"""SE fixed points along ``alphas`` (any order; results in the input order).

    Closed form (noiseless softmax/linear), ``interpolate=True`` (default):
    the curve is parametrised exactly by ``Delta`` (``alpha_bar = mmse(Delta)/Delta``,
    ``V = mmse(Delta)``); ``log mmse`` is tabulated on a grid of ``log Delta``
    of spacing ``step`` (a few dozen prior-MMSE evaluations for the whole
    curve), splined and inverted.  The interpolation error is about ``1e-7``
    in ``E_S`` at the default ``step`` (tested below ``1e-6`` against exact
    root finds).
    ``interpolate=False``: an exact root find per point, warm-started by
    extrapolating the previous roots (about six evaluations per point).

    Iterated channels: the points are solved in increasing ``alpha``, each
    one started from the previous ``V`` when ``warm_start`` (this follows a
    branch of fixed points continuously; ``warm_start=False`` starts every
    point from the uninformative ``V = 1``).

    Returns
    -------
    SECurve
        ``alpha``, ``mmse``, ``q``, ``qhat``, ``iterations`` (per point) and
        ``evaluations`` (prior-MMSE calls of the closed form).
    """
    a = np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-d sequence, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alphas must be finite and >= 0")
    T, rho, ch, meth = _common(float(a[0]), T, rho, channel, beta, noise, method)
    tol = v.positive("tol", tol)
    order = np.argsort(a, kind="stable")
    n = a.size
    out = {key: np.empty(n) for key in ("mmse", "q", "qhat")}
    its = np.zeros(n, dtype=int)
    if meth == "closed":
        if iterate_kw:
            raise TypeError(f"unexpected arguments for method='closed': {sorted(iterate_kw)}")
        k = _linear_k(ch, T)
        m = prior_mmse(rho, mmse)
        c0 = _zero_slope(rho, mmse)
        step = v.positive("step", step)
        abar_all = k * a
        todo = np.ones(n, dtype=bool)
        evaluations = 0
        if interpolate and not math.isinf(rho):
            interior = (abar_all > 0) & (abar_all < c0)
            Q0 = 1.0 + rho
            # exact end points: no data (V = 1) and perfect recovery (V = 0)
            for i in np.flatnonzero(~interior):
                V = 1.0 if abar_all[i] <= 0 else 0.0
                out["mmse"][i], out["q"][i] = V, Q0 - V
                out["qhat"][i] = 0.0 if V == 1.0 else math.inf
            todo = np.zeros(n, dtype=bool)
            if interior.any():
                idx = np.flatnonzero(interior)
                V, delta, evaluations, inside = _table_curve(abar_all[idx], m, c0, step)
                ok = idx[inside]
                out["mmse"][ok], out["q"][ok], out["qhat"][ok] = V[inside], Q0 - V[inside], 1.0 / delta[inside]
                todo[idx[~inside]] = True  # beyond the table (next to alpha_PR): exact root find
        hist = []  # (log abar, log Delta) of previous interior solutions
        for i in order:
            if not todo[i]:
                continue
            abar = k * a[i]
            guess = None
            if warm_start and 0 < abar < c0 and hist:
                if len(hist) >= 2 and hist[-1][0] != hist[-2][0]:
                    (x1, y1), (x2, y2) = hist[-2], hist[-1]
                    guess = y2 + (y2 - y1) / (x2 - x1) * (math.log(abar) - x2)
                else:
                    guess = hist[-1][1]
            V, delta, evals, _ = _solve_closed(abar, m, c0, guess, tol, gaussian=math.isinf(rho))
            if 0 < delta < math.inf:
                hist.append((math.log(abar), math.log(delta)))
            evaluations += evals
            r = _closed_result(float(a[i]), V, delta, evals, [], rho)
            out["mmse"][i], out["q"][i], out["qhat"][i], its[i] = r.mmse, r.q, r.qhat, r.iterations
    else:
        evaluations = 0
        init = iterate_kw.pop("init", None)
        for i in order:
            r = fixed_point(float(a[i]), ch, T=T, rho=rho, tol=max(tol, 1e-13), mmse=mmse,
                            init=init, **iterate_kw)
            if warm_start:
                init = r.mmse
            out["mmse"][i], out["q"][i], out["qhat"][i], its[i] = r.mmse, r.q, r.qhat, r.iterations
    return SECurve(alpha=a.copy(), mmse=out["mmse"], q=out["q"], qhat=out["qhat"],
                   iterations=its, method=meth, evaluations=int(evaluations))


# ---------------------------------------------------------------------------
# free entropy
# ---------------------------------------------------------------------------

def _integral_mmse(qhat: float, m) -> float:
    r"""``I(qhat) = int_0^qhat mmse_S(1/s) ds`` (``s < 1`` directly, ``s > 1`` in ``log s``)."""
    from scipy.integrate import quad

    if qhat == 0:
        return 0.0
    a = min(qhat, 1.0)
    val, _ = quad(lambda s: m(1.0 / s) if s > 0 else 1.0, 0.0, a, epsabs=1e-11, epsrel=1e-10, limit=200)
    if qhat > 1.0:
        val2, _ = quad(lambda t: m(math.exp(-t)) * math.exp(t), 0.0, math.log(qhat),
                       epsabs=1e-11, epsrel=1e-10, limit=200)
        val += val2
    return val


def prior_free_entropy(qhat: float, rho: float, *, mmse=None) -> float:
    r"""``psi_S(qhat) = (1/4) int_0^qhat (Q0 - mmse_S(1/s)) ds``.

    The free entropy per ``d^2`` of denoising ``S`` from ``Y = S + Z / sqrt(qhat)``
    (``Z`` GOE), counted from the log-likelihood ratio so that ``psi_S(0) = 0``;
    it is fixed by the I-MMSE relation ``d psi_S / d qhat = q(qhat) / 4`` with
    ``q = (1/d) E Tr(S E[S|Y]) = Q0 - mmse_S(1/qhat)``.
    """
    qhat = v.nonnegative("qhat", qhat)
    rho = v.rho(rho)
    m = prior_mmse(rho, mmse)
    return ((1.0 + rho) * qhat - _integral_mmse(qhat, m)) / 4.0


def output_free_entropy(q: float, channel="softmax", *, T: int = 2, rho: float = 0.5,
                        beta: float = 1.0, noise: float = 0.0) -> float:
    r"""``Psi_out(q) = E log Z_out(y, omega, Q0 - q)``, up to a constant independent of ``q``.

    * softmax (noiseless): ``-(D-1)/2 (1 + log(2 pi V)) - (T/2) log 2 - (1/2) log(T^2/2)``,
      ``D = T(T+1)/2`` (the dropped constant is ``E log C(y)``, the softmax Jacobian);
    * linear: ``sum_{a<=b} -(1/2)(1 + log(2 pi (sigma2_ab V + Delta_ab)))`` plus,
      if ``noise > 0``, ``T(T-1)/2 * -(1/2)(1 + log(4 pi noise))`` (exact);
    * any other channel: ``(1/4) int_0^q F_out(s) ds`` (from ``dPsi_out/dq = F_out/4``).
    """
    T = v.integer("T", T, minimum=1)
    rho = v.rho(rho)
    Q0 = 1.0 + rho
    q = v.in_range("q", q, 0.0, Q0)
    V = Q0 - q
    ch = make_se_channel(channel, beta=beta, noise=noise)
    if type(ch) is Softmax and ch.noise == 0:
        if V == 0:
            return math.inf
        D = T * (T + 1) // 2
        return (-(D - 1) / 2 * (1 + math.log(2 * math.pi * V))
                - T / 2 * math.log(2.0) - 0.5 * math.log(T * T / 2.0))
    if type(ch) is Linear:
        var = ch._variances(T, V, np)[np.triu_indices(T)]
        if np.any(var == 0):
            return math.inf
        out = float(np.sum(-0.5 * (1 + np.log(2 * math.pi * var))))
        if ch.noise > 0:
            out += T * (T - 1) / 2 * (-0.5 * (1 + math.log(4 * math.pi * ch.noise)))
        return out
    from scipy.integrate import quad

    val, _ = quad(lambda s: ch.fisher(s, Q0, T), 0.0, q, limit=200)
    return val / 4.0


def free_entropy(q: float, qhat: float, alpha: float, channel="softmax", *, T: int = 2,
                 rho: float = 0.5, beta: float = 1.0, noise: float = 0.0, mmse=None) -> float:
    r"""The replica-symmetric potential ``Phi(q, qhat) = -q qhat/4 + psi_S(qhat) + alpha Psi_out(q)``.

    Evaluable at any ``0 <= q < Q0``, ``qhat >= 0``; up to a constant
    independent of ``(q, qhat)``.  Its stationary points are the SE fixed
    points; among several, the largest ``Phi`` is the Bayes-optimal one.
    """
    alpha = v.nonnegative("alpha", alpha)
    qhat = v.nonnegative("qhat", qhat)
    return (-q * qhat / 4.0 + prior_free_entropy(qhat, rho, mmse=mmse)
            + alpha * output_free_entropy(q, channel, T=T, rho=rho, beta=beta, noise=noise))


# ---------------------------------------------------------------------------
# generalization error
# ---------------------------------------------------------------------------

def _softmax_rows(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _gauss_grid(step: float, width: float = 9.0, max_points: int = 20001):
    """Nodes and weights of ``E f(z)``, ``z ~ N(0, 1)``: the trapezoid rule on ``[-width, width]``.

    For integrands analytic in a strip of half-width ``a`` the error decays like
    ``exp(-2 pi a / step)``; callers pick ``step`` about half the strip width.
    """
    n = int(min(max_points, max(201, 2 * math.ceil(width / min(step, 0.05)) + 1)))
    z = np.linspace(-width, width, n)
    w = np.exp(-z * z / 2)
    return z, w / w.sum()


def generalization_error(q: float, Q0: float, T: int, channel="softmax", *, beta: float = 1.0,
                         noise: float = 0.0, n_qmc: int = 4096, seed: int = 0) -> float:
    r"""Bayes-optimal test error ``E_gen = (1/T) E ||y_hat - y||_F^2`` per sample.

    In the limit a fresh index is ``h ~ N(omega, V Sigma)`` given the data, with
    ``omega ~ N(0, q Sigma)`` and ``V = Q0 - q``; the Bayes predictor is
    ``y_hat = E[g(h) | omega]``, so ``E_gen = (1/T) E_omega tr Cov(g(h) | omega)``.

    * softmax (noiseless): rows are exchangeable and row ``a`` depends only on
      ``h_a. = (h_a1, ..., h_aT)``, independent entries of variances
      ``2V`` (``h_aa``) and ``V``: ``E_gen = E_omega tr Cov(softmax(beta h_1.))``.
      ``T = 2``: the row is a function of ``u = h_11 - h_12 ~ N(mu, 3V)``,
      ``mu ~ N(0, 3q)``, and ``E_gen = 2 E_mu Var(sigmoid(beta u))`` by nested
      trapezoid rules against the Gaussian weight, with steps adapted to the
      sigmoid's poles at distance ``pi / beta`` (spectrally accurate; about
      ``1e-12`` relative).  ``T >= 3``: scrambled
      Sobol points (fixed ``seed``; ``n_qmc // 4`` outer ``omega`` times
      ``n_qmc`` inner ``h``; relative accuracy about ``1e-3`` at the default).
    * linear: ``(T + 1) V + T noise`` (closed form).
    * label noise adds ``T noise`` to the softmax value too (``T^2`` entries of
      variance ``noise``, divided by ``T``): the predictor cannot foresee the noise.

    Checks: ``E_gen(q=0)`` is the prior variance ``(1/T) sum_ab Var(y_ab)``;
    ``E_gen(q=Q0) = 0`` for noiseless channels.
    """
    Q0 = v.positive("Q0", Q0)
    q = v.in_range("q", q, 0.0, Q0)
    T = v.integer("T", T, minimum=1)
    ch = make_se_channel(channel, beta=beta, noise=noise)
    V = Q0 - q
    if type(ch) is Linear:
        return (T + 1) * V + T * ch.noise
    if type(ch) is not Softmax:
        raise ValueError(f"channel: generalization_error supports 'softmax' and 'linear', got {ch!r}")
    return _softmax_gen_error(q, V, T, ch.beta, n_qmc, seed) + T * ch.noise


def _softmax_gen_error(q, V, T, b, n_qmc, seed):
    """The noiseless part ``(1/T) E_omega tr Cov(softmax(beta h) | omega)`` of :func:`generalization_error`."""
    if V == 0 or T == 1:
        return 0.0
    if T == 2:
        su, sm = math.sqrt(3 * V), math.sqrt(3 * q)
        z, wz = _gauss_grid(0.5 / (b * su))  # inner: u = mu + su z
        x, wx = _gauss_grid(0.5 * max(su, 1.0 / b) / sm if sm > 0 else 1.0)  # outer: mu = sm x
        u = sm * x[:, None] + su * z[None, :]
        s = 0.5 * (1 + np.tanh(0.5 * b * u))
        m1 = s @ wz
        m2 = (s * s) @ wz
        return float(2 * (wx @ np.maximum(m2 - m1 * m1, 0.0)))
    from scipy.stats import norm, qmc

    n_qmc = v.integer("n_qmc", n_qmc, minimum=64)
    n_out, n_in = max(64, n_qmc // 4), n_qmc
    scale = np.sqrt(np.r_[2.0, np.ones(T - 1)])
    z_out = norm.ppf(qmc.Sobol(d=T, scramble=True, seed=seed).random(n_out))
    z_in = norm.ppf(qmc.Sobol(d=T, scramble=True, seed=seed + 1).random(n_in))
    omega = math.sqrt(q) * z_out * scale
    fluct = math.sqrt(V) * z_in * scale
    var = np.empty(n_out)
    for lo in range(0, n_out, 64):
        h = omega[lo:lo + 64, None, :] + fluct[None, :, :]
        y = _softmax_rows(b * h)
        var[lo:lo + 64] = y.var(axis=1, ddof=1).sum(axis=-1)
    return float(var.mean())
