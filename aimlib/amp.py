r"""GAMP-RIE: approximate message passing for the attention-indexed model.

The attention indices are linear measurements of the key-query matrix ``S``,

.. math::

    h^\mu_{ab} = \langle Z^\mu_{ab}, S\rangle / \sqrt d, \qquad
    Z^\mu_{ab} = (x^\mu_a x^{\mu\top}_b + x^\mu_b x^{\mu\top}_a)/2 - \delta_{ab} I_d ,

observed through a channel ``y = g(h)``.  GAMP-RIE (book chapter "GAMP-RIE")
alternates a channel step, which turns the outputs into an effective Gaussian
observation ``R = S + sqrt(Delta) W`` of the whole matrix (``W`` a GOE matrix
with off-diagonal variance ``1/d``), and a prior step, the rotationally
invariant estimator (RIE) of ``S`` from ``R``.  One iteration, with ``m`` the
predicted per-``d`` error of the current estimate and ``sigma2_ab = 2`` on the
diagonal and ``1`` off it:

.. math::

    V_{ab} &= \sigma^2_{ab} m, \qquad
    \omega^\mu = h^\mu(\hat S) - V \odot g^\mu_{\rm prev}, \qquad
    g^\mu = g_{\rm out}(y^\mu, \omega^\mu, m), \\
    \Delta &= d^2 \Big/ \Big(2 \sum_\mu \sum_{a\le b} \sigma^2_{ab} (g^\mu_{ab})^2\Big), \\
    R &= \hat S + \frac{2\Delta}{d} \frac{1}{\sqrt d}
         \Big[\sum_\mu X_\mu^\top G^\mu X_\mu - \Big(\sum_\mu \sum_a g^\mu_{aa}\Big) I_d\Big],
    \qquad G^\mu_{aa} = g^\mu_{aa},\; G^\mu_{ab} = g^\mu_{ab}/2, \\
    \hat S &\leftarrow \mathrm{RIE}(R; \Delta), \qquad m \leftarrow \mathrm{mmse}_S(\Delta),

with damping of ``g`` (in the channel step) and of ``(S_hat, m)``.
``1/Delta`` is the empirical version
of the state-evolution conjugate ``qhat = alpha F_out``.

Cost: the per-sample ``d x d`` matrices ``Z`` are never built.  The forward
pass is ``(X S_hat) X^T`` and the backward pass ``X^T G X``, both processed in
chunks of samples, so memory is ``O(n T d + d^2)`` (plus the chunk) and time
per iteration ``O(n T d^2 + d^3)``.
"""
from __future__ import annotations

import math
import time
import warnings
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from . import _validate as v
from .backend import float_dtype, get_array_module, module_named, to_device, to_host
from .channels import Channel, make_channel
from .errors import ConvergenceError

__all__ = ["AMPResult", "gamp_rie", "run_amp", "chunk_size_for", "sigma2_matrix", "flops_per_iteration"]


@dataclass
class AMPResult:
    """Outcome of :func:`gamp_rie`.

    Attributes
    ----------
    S_hat : numpy.ndarray of shape (d, d)
        Final estimate (host array, symmetric).
    mmse : float or None
        Estimation error ``(1/d) ||S_hat - S||_F^2`` if the teacher ``S`` was
        given, else None.
    m : float
        The algorithm's own prediction of that error, ``mmse_S(Delta)`` at the
        last iteration (damped); it is what the state evolution tracks.
    delta : float
        Last effective noise variance ``Delta`` of the channel step.
    iterations : int
        Number of iterations run.
    converged : bool
        Whether the stopping criterion was met.
    reason : str
        Why the loop stopped: ``'tol'``, ``'perfect'`` (``m`` fell below
        ``m_floor``) or ``'max_iter'``.
    trace : dict of lists or None
        Per-iteration record (see :func:`gamp_rie`, option ``trace``).
    seconds : float
        Wall time of the iteration loop.
    """

    S_hat: np.ndarray
    mmse: float | None
    m: float
    delta: float
    iterations: int
    converged: bool
    reason: str
    trace: dict | None = None
    seconds: float = 0.0
    options: dict = field(default_factory=dict)


def sigma2_matrix(T: int, xp=np, dtype=np.float64):
    """The ``T x T`` index-covariance shape: ``2`` on the diagonal, ``1`` off it."""
    return xp.ones((T, T), dtype=dtype) + xp.eye(T, dtype=dtype)


def flops_per_iteration(n: int, T: int, d: int) -> float:
    r"""Cost model of one GAMP-RIE iteration, in floating-point operations.

    ``4 n T d^2`` for the two batched products ``(X S_hat) X^T`` and
    ``X^T (G X)``, plus about ``11 d^3`` for the eigendecomposition in the RIE
    and the reconstruction ``U f(L) U^T``.  With ``n = alpha d^2`` this is
    ``4 alpha T d^4 + 11 d^3``.
    """
    n = v.integer("n", n, minimum=1)
    T = v.integer("T", T, minimum=2)
    d = v.integer("d", d, minimum=1)
    return 4.0 * n * T * d * d + 11.0 * d**3


def chunk_size_for(T: int, d: int, itemsize: int, memory_mb: float) -> int:
    """Samples per chunk so that the chunk's work arrays stay within ``memory_mb``.

    A chunk of ``c`` samples holds ``X S_hat`` and ``G X`` (each ``c T d``
    numbers) plus a few ``c T^2`` arrays; we budget ``3 c T d + 8 c T^2``
    numbers of ``itemsize`` bytes.
    """
    per_sample = (3 * T * d + 8 * T * T) * itemsize
    return max(1, int(memory_mb * 2**20 // per_sample))


_DELTA_MIN = 1e-11  # below this, Delta is zero for every purpose (aimlib.rmt accepts >= 1e-12)


def _rmt():
    from . import rmt  # imported lazily: the RMT module is independent of this one

    return rmt


def gamp_rie(X, y, channel: Channel, rho: float, *, S=None, damping: float = 0.5,
             max_iter: int = 300, tol: float = 1e-4, lookback: int = 10, min_iter: int = 3,
             chunk_size: int | None = None, memory_mb: float = 64.0, trace: bool = False,
             init=None, m_floor: float | None = None, on_max_iter: str = "warn",
             dtype=None, damp: str = "both") -> AMPResult:
    r"""Run GAMP-RIE on a data set ``(X, y)`` of the attention-indexed model.

    Parameters
    ----------
    X : array of shape (n, T, d)
        Token sequences (NumPy or CuPy; the backend follows ``X``).
    y : array of shape (n, T, T)
        Outputs of ``channel``.
    channel : aimlib.channels.Channel
        Must provide ``g_out(y, omega, V)``, the gradient of ``log Z_out``
        with respect to the independent entries ``omega_ab`` (``a <= b``) as
        a symmetric ``(n, T, T)`` array, for fluctuation variance ``V`` (the
        covariance of the fluctuation is ``V`` off the diagonal, ``2V`` on it).
    rho : float
        Width ratio of the teacher prior ``S = W W^T / sqrt(r d)``, ``r = rho d``.
    S : array of shape (d, d), optional
        Teacher, only used to report errors (never by the algorithm).
    damping : float in [0, 1)
        Damping factor: ``x <- (1 - damping) * new + damping * old`` for the
        quantities named by ``damp``.
    damp : {'both', 'state', 'messages'}
        What is damped: ``'state'`` is ``(S_hat, m)``, ``'messages'`` is the
        channel output ``g`` and ``m``, ``'both'`` (default) is ``g``,
        ``S_hat`` and ``m``.  The predicted error ``m`` feeds back into the
        effective noise (for a noiseless channel ``1/Delta`` is proportional
        to (true error)/``m**2``), and at finite ``d`` it can collapse below
        the true error; damping ``g`` as well prevents that at small
        ``alpha``, at ``d`` below ~100 and beyond perfect recovery, where
        ``'state'`` alone (at damping 0.3-0.6) can fail.  ``'state'``
        converges fastest when it is stable.
    max_iter : int
        Maximum number of iterations.
    tol : float
        Stop when ``||S_hat_t - S_hat_{t-k}||_F^2 / d <= tol * m_t`` for some
        ``k = 1..lookback``: the estimate moves by a negligible fraction of its
        own predicted error.  Comparing with iterates a few steps back also
        stops on tiny cycles of period ``<= lookback``, and measuring the
        motion in units of ``m`` makes the rule scale-free (at finite ``d``
        the iterates of the noiseless channels keep fluctuating at a small
        level that does not change the error).
    lookback : int
        How many past iterates to compare with.
    min_iter : int
        Never stop before this many iterations.
    chunk_size : int, optional
        Samples per chunk in the forward/backward passes.  Default: from
        ``memory_mb``.  ``chunk_size >= n`` processes all samples at once.
    memory_mb : float
        Work-memory budget for a chunk (used when ``chunk_size`` is None).
    trace : bool
        Record, per iteration: ``m`` (damped prediction), ``m_new``
        (``mmse_S(Delta)``), ``delta``, ``change`` (the quantity compared
        with ``tol``) and, if ``S`` is given, ``error`` (of the damped
        ``S_hat``), ``error_new`` (of the RIE output before damping) and
        ``noise_ratio = ||R - S||_F^2 / (d Delta)`` (close to 1 when the
        channel step is calibrated).
    init : array of shape (d, d), optional
        Starting estimate (default: the prior mean ``sqrt(rho) I``, with
        ``m = 1``, its error).
    m_floor : float, optional
        Stop (converged, ``reason='perfect'``) when ``m`` drops below it;
        default ``sqrt(machine epsilon)`` of ``dtype``.
    on_max_iter : {'raise', 'warn', 'return'}
        What to do when ``max_iter`` is reached without convergence.
    dtype : float32 or float64, optional
        Working precision (default: that of ``X`` if floating, else float64).

    Returns
    -------
    AMPResult

    Raises
    ------
    aimlib.ConvergenceError
        If an iterate becomes non-finite or blows up (divergence), or, with
        ``on_max_iter='raise'``, if ``max_iter`` is reached.
    """
    # ----- validation ---------------------------------------------------------------
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be an aimlib.channels.Channel, got {type(channel).__name__}")
    if not callable(getattr(channel, "g_out", None)):
        raise TypeError(f"channel {channel!r} has no g_out(y, omega, V); GAMP-RIE needs it")
    X = v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if T < 2:
        raise ValueError(f"X must have T >= 2 tokens per sample, got shape {tuple(X.shape)}")
    if d < 2:
        raise ValueError(f"X must have dimension d >= 2, got shape {tuple(X.shape)}")
    y = v.finite_array("y", y, ndim=3)
    if tuple(y.shape) != (n, T, T):
        raise ValueError(f"y must have shape {(n, T, T)} to match X, got {tuple(y.shape)}")
    rho = v.positive("rho", rho)
    damping = v.in_range("damping", damping, 0.0, 1.0)
    if damping >= 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    tol = v.positive("tol", tol)
    lookback = v.integer("lookback", lookback, minimum=1)
    min_iter = v.integer("min_iter", min_iter, minimum=1)
    if chunk_size is not None:
        chunk_size = v.integer("chunk_size", chunk_size, minimum=1)
    memory_mb = v.positive("memory_mb", memory_mb)
    v.choice("on_max_iter", on_max_iter, {"raise", "warn", "return"})
    v.choice("damp", damp, {"state", "messages", "both"})
    damp_g = damp in ("messages", "both")
    damp_S = damp in ("state", "both")
    dt = float_dtype(dtype, X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    if m_floor is None:
        m_floor = float(np.sqrt(np.finfo(dt).eps))
    m_floor = v.nonnegative("m_floor", m_floor)

    xp = get_array_module(X, y, S, init)
    X = to_device(X, xp).astype(dt, copy=False)
    y = to_device(y, xp).astype(dt, copy=False)
    if S is not None:
        S = v.symmetric_matrix("S", S)
        if tuple(S.shape) != (d, d):
            raise ValueError(f"S must have shape {(d, d)} to match X, got {tuple(S.shape)}")
        S = to_device(S, xp).astype(dt, copy=False)
    if init is not None:
        init = v.symmetric_matrix("init", init)
        if tuple(init.shape) != (d, d):
            raise ValueError(f"init must have shape {(d, d)} to match X, got {tuple(init.shape)}")
    if chunk_size is None:
        chunk_size = chunk_size_for(T, d, dt.itemsize, memory_mb)
    chunk_size = min(chunk_size, n)

    rmt = _rmt()
    Q0 = 1.0 + rho
    sqd = math.sqrt(d)
    eye_T = xp.eye(T, dtype=dt)
    sig2 = sigma2_matrix(T, xp, dt)
    # weights turning the full symmetric sum into the sum over pairs a <= b:
    # sum_{a<=b} sigma2_ab g_ab^2 = sum_{a,b} w_ab g_ab^2 with w_aa = 2, w_ab = 1/2
    w_pairs = xp.full((T, T), 0.5, dtype=dt) + 1.5 * eye_T
    # G = g with off-diagonal entries halved: sum_{a<=b} g_ab Z_ab = X^T G X - tr(g) I
    g_half = xp.full((T, T), 0.5, dtype=dt) + 0.5 * eye_T

    if init is None:
        S_hat = math.sqrt(rho) * xp.eye(d, dtype=dt)
        m = Q0 - rho  # = 1, the error of the prior mean
    else:
        S_hat = to_device(init, xp).astype(dt, copy=True)
        m = 1.0
    g_prev = xp.zeros((n, T, T), dtype=dt)
    g_new = xp.empty_like(g_prev)
    history: deque = deque(maxlen=lookback)
    rec = {k: [] for k in ("m", "m_new", "delta", "change")} if trace else None
    if trace and S is not None:
        for k in ("error", "error_new", "noise_ratio"):
            rec[k] = []

    def fail(t, what):
        raise ConvergenceError(
            f"GAMP-RIE diverged at iteration {t}: {what} (m={m:.4g}, damping={damping}). "
            "Try a larger damping, check that y was produced by this channel, "
            "or use float64.")

    t0 = time.perf_counter()
    converged, reason, delta, t = False, "max_iter", float("nan"), 0
    # overflow/invalid values are detected and turned into ConvergenceError below
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(1, max_iter + 1):
            # ----- channel step: forward (X S X^T), g_out, backward (X^T G X), chunked ------
            B = xp.zeros((d, d), dtype=dt)
            sum_w = 0.0
            sum_tr = 0.0
            tr_S = xp.trace(S_hat) / sqd
            V = m * sig2
            for s in range(0, n, chunk_size):
                e = min(n, s + chunk_size)
                Xc = X[s:e]
                c = e - s
                XS = (Xc.reshape(c * T, d) @ S_hat).reshape(c, T, d)
                h = XS @ xp.swapaxes(Xc, 1, 2) / sqd - tr_S * eye_T
                h = (h + xp.swapaxes(h, 1, 2)) / 2
                omega = h - V * g_prev[s:e]
                g = channel.g_out(y[s:e], omega, m)
                g = xp.asarray(g, dtype=dt)
                if damp_g and t > 1:
                    g = (1.0 - damping) * g + damping * g_prev[s:e]
                g_new[s:e] = g
                sum_w += float(xp.sum(w_pairs * g * g))
                sum_tr += float(xp.sum(xp.diagonal(g, axis1=1, axis2=2)))
                GX = (g * g_half) @ Xc
                B += Xc.reshape(c * T, d).T @ GX.reshape(c * T, d)
            if not (math.isfinite(sum_w) and math.isfinite(sum_tr)):
                fail(t, "g_out returned non-finite values")
            if sum_w <= 0.0:
                fail(t, "all g_out values vanish, so the effective noise Delta is infinite")
            delta = d * d / (2.0 * sum_w)
            R = S_hat + (2.0 * delta / d) * (B - sum_tr * xp.eye(d, dtype=dt)) / sqd
            R = (R + R.T) / 2
            if not bool(xp.all(xp.isfinite(R))):
                fail(t, "the effective observation R is not finite")
            if delta < _DELTA_MIN:
                # the channel pins S down to machine precision: R is the estimate
                S_hat, m, converged, reason = R, 0.0, True, "perfect"
                if trace:
                    for k, val in (("m", 0.0), ("m_new", 0.0), ("delta", delta), ("change", 0.0)):
                        rec[k].append(val)
                    if S is not None:
                        e_R = float(xp.sum((R - S) ** 2)) / d
                        for k, val in (("error", e_R), ("error_new", e_R),
                                       ("noise_ratio", e_R / delta)):
                            rec[k].append(val)
                break
            # ----- prior step: RIE denoiser and its MMSE -------------------------------------
            S_new = xp.asarray(rmt.rie(R, delta, rho), dtype=dt)
            m_new = float(rmt.mmse(delta, rho))
            if not (math.isfinite(m_new) and bool(xp.all(xp.isfinite(S_new)))):
                fail(t, f"the RIE output is not finite (Delta={delta:.4g})")
            if trace and S is not None:
                rec["noise_ratio"].append(float(xp.sum((R - S) ** 2)) / (d * delta))
                rec["error_new"].append(float(xp.sum((S_new - S) ** 2)) / d)
            # ----- damping ---------------------------------------------------------------------
            S_hat = (1.0 - damping) * S_new + damping * S_hat if damp_S else S_new
            m = (1.0 - damping) * m_new + damping * m
            g_prev, g_new = g_new, g_prev
            norm2 = float(xp.sum(S_hat * S_hat)) / d
            if not math.isfinite(norm2) or norm2 > 1e4 * Q0:
                fail(t, f"the estimate blew up (||S_hat||_F^2/d = {norm2:.3g})")
            # squared distance per dimension to the closest of the last `lookback`
            # iterates, in units of the predicted error m
            change = min((float(xp.sum((S_hat - old) ** 2)) for old in history),
                         default=float("inf")) / (d * max(m, m_floor, 1e-300))
            history.append(S_hat.copy())
            if trace:
                rec["m"].append(m)
                rec["m_new"].append(m_new)
                rec["delta"].append(delta)
                rec["change"].append(change)
                if S is not None:
                    rec["error"].append(float(xp.sum((S_hat - S) ** 2)) / d)
            if t >= min_iter and change <= tol:
                converged, reason = True, "tol"
                break
            if m < m_floor:
                converged, reason = True, "perfect"
                break
    seconds = time.perf_counter() - t0

    if not converged:
        msg = (f"GAMP-RIE did not converge in max_iter={max_iter} iterations "
               f"(last change {change:.3g} > tol={tol:g} in units of m={m:.4g}); "
               "increase max_iter or damping, or loosen tol")
        if on_max_iter == "raise":
            raise ConvergenceError(msg)
        if on_max_iter == "warn":
            warnings.warn(msg, RuntimeWarning, stacklevel=2)

    err = None if S is None else float(xp.sum((S_hat - S) ** 2)) / d
    return AMPResult(S_hat=to_host(S_hat), mmse=err, m=float(m), delta=float(delta),
                     iterations=t, converged=converged, reason=reason, trace=rec,
                     seconds=seconds,
                     options=dict(damping=damping, damp=damp, tol=tol, lookback=lookback,
                                  chunk_size=chunk_size, dtype=str(dt), max_iter=max_iter))


def run_amp(channel, T: int, rho: float, alpha: float, d: int, seed=None, *,
            backend: str | None = None, dtype=None, **options) -> dict:
    """Sample a data set of the AIM and run :func:`gamp_rie` on it.

    Parameters
    ----------
    channel : Channel or str
        A channel instance, or a name for :func:`aimlib.channels.make_channel`.
    T, rho, alpha, d :
        Tokens per sample, width ratio, ``alpha = n / d^2`` and dimension.
    seed : int, Generator or None
        Drives teacher, tokens and label noise (through
        :func:`aimlib.model.sample_dataset`).
    backend : {'numpy', 'cupy'} or None
        Where the data and the iteration live.
    dtype : float32 or float64, optional
        Working precision (default float64).
    **options :
        Passed to :func:`gamp_rie` (``damping``, ``tol``, ``max_iter``,
        ``chunk_size``, ``trace``, ...).

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``mmse`` (the measured error), ``iterations``,
        ``seconds`` (the iteration loop), plus ``T``, ``rho``, ``n``,
        ``channel``, ``converged``, ``m`` (the algorithm's predicted error),
        ``delta`` and, if ``trace=True``, ``trace``.
    """
    from .model import sample_dataset

    if isinstance(channel, str):
        channel = make_channel(channel)
    T = v.integer("T", T, minimum=2)
    d = v.integer("d", d, minimum=2)
    dt = float_dtype(dtype)
    module_named(backend)  # validates the backend name early
    seed_out = seed if seed is None or isinstance(seed, (int, np.integer)) else repr(seed)
    data = sample_dataset(alpha, d, T, rho, channel, seed, backend=backend, dtype=dt)
    res = gamp_rie(data.X, data.y, channel, rho, S=data.S, dtype=dt, **options)
    out = {"alpha": float(alpha), "d": d, "seed": seed_out, "mmse": res.mmse,
           "iterations": res.iterations, "seconds": res.seconds, "T": T, "rho": float(rho),
           "n": int(data.n), "channel": repr(channel), "converged": res.converged,
           "reason": res.reason, "m": res.m, "delta": res.delta}
    if res.trace is not None:
        out["trace"] = res.trace
    return out
