"""GAMP-RIE: the iteration loop, its stopping rules and its result (steps in :mod:`aimlib.amp.steps`)."""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..backend import float_dtype, get_array_module, to_device, to_host
from ..channels import Channel
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from ..model import estimation_error, widths
from .steps import DELTA_MIN, channel_step, chunk_size_for, prior_step

__all__ = ["AMPResult", "Problem", "gamp_rie"]

#: default ``resolution`` of :func:`gamp_rie`, in units of ``1/d^2``: an error of ``2/d^2``
#: is that of one symmetric pair of entries of ``S`` wrong by their standard deviation ``1/sqrt(d)``
RESOLUTION_D2 = 2.0
#: relative allowance of the consistency check, ``CHECK_K / sqrt(d)`` (see :func:`_check_result`)
CHECK_K = 10.0
#: a predicted error below ``resolution`` that fell by less than this factor over
#: ``lookback`` iterations has stalled (see :func:`_stalled`)
STALL_FACTOR = 2.0


@dataclass
class AMPResult:
    """Outcome of :func:`gamp_rie` (per layer, as tuples, when the channel reads ``L > 1`` indices).

    Attributes
    ----------
    S_hat : numpy.ndarray of shape (d, d), or (L, d, d)
        Final estimate (host array, symmetric).
    mmse : float, tuple or None
        Estimation error ``(1/d) ||S_hat - S||_F^2`` if the teacher ``S`` was given.
    m : float or tuple
        The algorithm's own prediction of that error, ``mmse_S(Delta)`` (damped);
        it is what the state evolution tracks.
    delta : float or tuple
        Last effective noise variance ``Delta`` of the channel step.
    iterations : int
    converged : bool
    reason : str
        ``'tol'``, ``'perfect'`` (``m`` fell below ``m_floor``, stalled below
        ``resolution``, or the channel pinned ``S`` down: ``Delta -> 0``) or ``'max_iter'``.
    trace : dict of lists or None
        Per-iteration record (option ``trace`` of :func:`gamp_rie`).
    seconds : float
        Wall time of the iteration loop.
    """

    S_hat: np.ndarray
    mmse: float | tuple | None
    m: float | tuple
    delta: float | tuple
    iterations: int
    converged: bool
    reason: str
    trace: dict | None = None
    seconds: float = 0.0
    options: dict = field(default_factory=dict)


@dataclass
class Problem:
    """The validated inputs of one GAMP-RIE run, on one device."""

    xp: object
    X: object
    y: object
    S: list | None
    init: list | None
    channel: Channel
    rho: tuple
    dtype: np.dtype
    n: int
    T: int
    d: int
    chunk_size: int
    damping: float
    damp_g: bool
    damp_S: bool


def _teachers(name, S, L, d, xp, dt):
    """``S`` (``(d, d)`` or ``(L, d, d)``) as a list of ``L`` symmetric device matrices, or None."""
    if S is None:
        return None
    S = v.finite_array(name, S)
    want = (d, d) if L == 1 else (L, d, d)
    if tuple(S.shape) != want:
        raise ValueError(f"{name} must have shape {want} to match X, got {tuple(S.shape)}")
    mats = [S] if L == 1 else [S[i] for i in range(L)]
    return [to_device(v.symmetric_matrix(name, M), xp).astype(dt) for M in mats]


def _problem(X, y, channel, rho, S, init, dtype, chunk_size, memory_mb, damping, damp) -> Problem:
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be an aimlib.channels.Channel, got {type(channel).__name__}")
    X = v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if n < 1 or T < 2 or d < 2:
        raise ValueError(f"X must have shape (n, T, d) with n >= 1, T >= 2, d >= 2, got {tuple(X.shape)}")
    L = channel.n_indices
    y = v.finite_array("y", y)
    if tuple(y.shape[:1]) != (n,):
        raise ValueError(f"y must hold one output per sample of X (n={n}), got shape {tuple(y.shape)}")
    if L == 1 and tuple(y.shape) != (n, T, T):
        raise ValueError(f"y must have shape {(n, T, T)} to match X, got {tuple(y.shape)}")
    rho = widths(channel, rho)
    damping = v.in_range("damping", damping, 0.0, 1.0)
    if damping >= 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    v.choice("damp", damp, {"state", "messages", "both"})
    dt = float_dtype(dtype, X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    if chunk_size is None:
        chunk_size = chunk_size_for(T, d, dt.itemsize, v.positive("memory_mb", memory_mb))
    chunk_size = min(v.integer("chunk_size", chunk_size, minimum=1), n)
    xp = get_array_module(X, y, S, init)
    return Problem(xp=xp, X=to_device(X, xp).astype(dt, copy=False), y=to_device(y, xp).astype(dt, copy=False),
                   S=_teachers("S", S, L, d, xp, dt), init=_teachers("init", init, L, d, xp, dt),
                   channel=channel, rho=rho, dtype=dt, n=n, T=T, d=d, chunk_size=chunk_size,
                   damping=damping, damp_g=damp in ("messages", "both"), damp_S=damp in ("state", "both"))


def _pack(values):
    """A float for one layer, a tuple of floats for several."""
    values = [float(x) for x in values]
    return values[0] if len(values) == 1 else tuple(values)


def _error(p, mats, xp):
    """``(1/d) ||M_l - S_l||_F^2`` per layer (:func:`aimlib.model.estimation_error`)."""
    return [estimation_error(M, S) for M, S in zip(mats, p.S)]


class _Recorder:
    """The optional per-iteration trace (keys of :func:`gamp_rie`)."""

    def __init__(self, on: bool, with_teacher: bool):
        keys = ("m", "m_new", "delta", "change") + (("error", "error_new", "noise_ratio") if with_teacher else ())
        self.rec = {k: [] for k in keys} if on else None

    def add(self, **values):
        if self.rec is not None:
            for k, val in values.items():
                if k in self.rec:
                    self.rec[k].append(_pack(val) if isinstance(val, (list, np.ndarray)) else val)


def _check_result(p, S_hat, m, xp, floor, stalled=False, capped=False):
    r"""Measured errors, or a :class:`ConvergenceError` if they are not a self-consistent state.

    With ``e`` the measured error ``(1/d) ||S_hat - S||_F^2`` of a layer, ``m`` its
    prediction and ``hi, lo = max(e, m), min(e, m)``, the state is rejected when

    * ``e > e_0 + 0.1``, with ``e_0`` the error of the prior mean ``sqrt(rho) I``, or
    * ``hi > (1 + CHECK_K / sqrt(d)) lo + floor`` with ``CHECK_K = 10`` and
      ``floor = max(resolution, m_floor, sqrt(eps))`` (default ``2/d^2``), or
    * the run ended because ``m`` stalled below ``resolution`` (``stalled``) and
      ``e > floor``: that stop claims an error below the resolution, so the
      claim is checked as such (at d = 20 a prediction can stall at ``m = 4e-3``
      on its way to a collapse at ``e = 8e-3``, which the relative test allows).

    A run returned unconverged at the cap (``capped``, ``on_max_iter`` ``'warn'``
    or ``'return'``) is checked in one direction only: ``e > (1 + CHECK_K /
    sqrt(d)) m + floor``, a prediction better than the estimate, is rejected (a
    collapse that reached the cap), while ``m`` above ``e`` is what a run still
    converging towards perfect recovery shows (``m`` decays like ``t^-2``, ``e``
    faster).

    Why this form.  At a fixed point the measured error fluctuates around the
    prediction by a *relative* amount that shrinks with ``d`` (for i.i.d. entry
    errors ``std(e) = sqrt(2) e / d``; GAMP-RIE's own finite-size noise is a few
    times larger, and for hardmax ``m`` lags ``e`` by up to 10 % at
    ``d = 200..300``), so the allowance scales with the error itself and with
    ``1/sqrt(d)``; an absolute allowance would let a collapsed prediction
    (``m -> 0`` while ``e`` stays at ``10^-2``) pass, which is the false
    "perfect recovery" this check exists to catch.  Calibration: over the
    committed GAMP runs (``sweeps/*.csv``, Gaussian tokens, d = 50..400) and
    runs at d = 20..100 (softmax, linear, hardmax, T = 2..4, float32, Rademacher
    tokens) the converged states need ``(hi/lo - 1) sqrt(d) <= 3.8`` (at most 9 at
    d = 20), so ``CHECK_K = 10`` leaves a margin; collapsed states have
    ``hi/lo`` of ``10^2`` to ``10^11``.  Near perfect recovery both errors tend to
    0 and the relative test alone would demand agreement below the precision of
    the run, hence the absolute ``floor``: the resolution at which
    :func:`gamp_rie` declares a stalled run perfect (such a run has
    ``m < resolution`` and, slowly converging, ``e`` far below ``m``).  Collapsed runs end with ``e``
    of ``4/d^2`` to ``70/d^2`` (softmax above perfect recovery, d = 40 and 80)
    and are rejected.  The noise ratio ``||R - S||_F^2/(d Delta)`` is not used:
    it is ``e/Delta`` once ``Delta`` has collapsed (no extra information) and
    ranges over 0.3..7 in runs that do converge (about 0.5 while ``m`` decays
    slowly to 0, 4 to 7 at genuine perfect recovery).
    """
    if p.S is None:
        return None
    err = _error(p, S_hat, xp)
    trivial = _error(p, [math.sqrt(r) * xp.eye(p.d, dtype=p.dtype) for r in p.rho], xp)
    slack = 1.0 + CHECK_K / math.sqrt(p.d)
    for ell, (e, mm, tv) in enumerate(zip(err, m, trivial)):
        hi, lo = (e, mm) if capped else (max(e, mm), min(e, mm))
        if e > tv + 0.1 or hi > slack * lo + floor or (stalled and e > floor):
            rule = (f"a stop on a prediction stalled below {floor:.2g} needs an error below it" if stalled
                    and hi <= slack * lo + floor else f"at d={p.d} they must agree within a factor "
                    f"{slack:.3g} plus {floor:.2g}" + (" (at the cap: the error may not exceed that "
                                                       "allowance above the prediction)" if capped else ""))
            raise ConvergenceError(
                f"GAMP-RIE stopped in an inconsistent state (layer {ell}): measured error {e:.4g}, "
                f"predicted {mm:.4g} ({rule}), prior mean's error {tv:.4g}. Try a larger damping or more samples")
    return err


def gamp_rie(X, y, channel: Channel, rho, *, S=None, damping: float = 0.5, max_iter: int = 300,
             tol: float = 1e-4, lookback: int = 10, min_iter: int = 3, chunk_size: int | None = None,
             memory_mb: float = 64.0, trace: bool = False, init=None, m_floor: float | None = None,
             on_max_iter: str = "raise", dtype=None, damp: str = "both",
             resolution: float | None = None) -> AMPResult:
    r"""Run GAMP-RIE on a data set ``(X, y)`` of the attention-indexed model.

    Parameters
    ----------
    X : array (n, T, d)
        Token sequences (NumPy or CuPy; the backend follows ``X``).
    y : array
        Outputs of ``channel``, ``(n, T, T)`` for one index per sample.
    channel : aimlib.channels.Channel
        Provides ``g_out`` (one RIE denoiser runs per index matrix it reads).
    rho : float, or sequence of ``L`` floats
        Width ratios of the teachers.
    S : array (d, d) or (L, d, d), optional
        Teacher, used only to report errors and to check the final state.
    damping, damp : float in [0, 1), {'both', 'state', 'messages'}
        ``x <- (1 - damping) new + damping old`` for ``(S_hat, m)`` (``'state'``),
        ``(g, m)`` (``'messages'``) or all three (``'both'``, stable at small ``d``).
    max_iter, tol, lookback, min_iter
        Stop (``reason='tol'``) when ``||S_hat_t - S_hat_{t-k}||_F^2 / d <= tol * m_t + atol``
        for some ``k <= lookback`` (a negligible move in units of the predicted
        error, robust to tiny cycles), after at least ``min_iter`` iterations;
        ``atol = eps (1 + max rho)`` is the rounding level of ``||S_hat||_F^2 / d``
        (``eps`` of the working dtype), so the rule needs no ``m > 0``.
    chunk_size, memory_mb
        Samples per chunk (default: from the ``memory_mb`` work budget).
    trace : bool
        Record ``m``, ``m_new``, ``delta``, ``change`` and, with ``S``, ``error``,
        ``error_new`` and ``noise_ratio = ||R - S||_F^2/(d Delta)`` per iteration.
    init : array (d, d) or (L, d, d), optional
        Starting estimate (default: the prior mean ``sqrt(rho) I``, ``m = 1``).
    m_floor : float, optional
        Stop (``reason='perfect'``) when every ``m`` drops below it (default ``sqrt(eps)``).
    resolution : float, optional
        Also stop as ``'perfect'`` when every ``m`` has stayed below ``resolution``
        for the last ``lookback + 1`` iterations and fell by less than a factor 2
        over them (default ``2/d^2``, the error of one symmetric pair of entries of
        ``S`` wrong by their standard deviation; 0 turns this off).  Above perfect
        recovery a noiseless channel often lets ``m`` decay only like ``t^-2``
        while the measured error is a hundred times smaller (softmax, d = 40,
        alpha = 0.3: ``m = 4e-4``, error ``2e-6`` after 300 iterations, still
        falling); this rule ends such runs, after 160 to 260 iterations at
        d = 40..60, while a run still converging fast goes on to ``m_floor``.
        The slow decay, ``m ~ 4e-4 (300/t)^2``, hardly depends on ``d``, so at
        larger ``d`` such a run needs about ``4 d`` iterations (d = 80: 330) and
        otherwise ends at ``max_iter``.
        Such a stop claims a measured error below ``resolution``, and the final
        check holds it to that; ``resolution`` is also the absolute allowance of
        the check (below).
    on_max_iter : {'raise', 'warn', 'return'}
        The rule of :mod:`aimlib.errors` at the iteration cap.
    dtype : float32 or float64, optional
        Working precision (default: that of ``X`` if floating, else float64).

    Raises
    ------
    aimlib.ConvergenceError
        On divergence, at the cap with ``on_max_iter='raise'``, or when the final
        state is inconsistent with the teacher ``S``: measured error and prediction
        ``m`` must agree within a factor ``1 + 10/sqrt(d)`` plus
        ``max(resolution, m_floor, sqrt(eps))`` (the error alone must be below it
        after a stop on a stalled ``m``), and the error must not exceed the
        prior mean's by more than 0.1 (see :func:`_check_result`).  A prediction
        that collapsed (``m -> 0``, ``Delta -> 0``) while the estimate stays wrong is
        such a state; it is reported as a failure, never as perfect recovery.  A
        run returned at the cap is rejected when its error exceeds that allowance
        above ``m`` (a collapse that reached the cap), not when ``m`` lags above it.
    """
    p = _problem(X, y, channel, rho, S, init, dtype, chunk_size, memory_mb, damping, damp)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    tol, lookback = v.positive("tol", tol), v.integer("lookback", lookback, minimum=1)
    min_iter = v.integer("min_iter", min_iter, minimum=1)
    check_on_max_iter(on_max_iter)
    sqrt_eps = float(np.sqrt(np.finfo(p.dtype).eps))
    m_floor = v.nonnegative("m_floor", sqrt_eps if m_floor is None else m_floor)
    resolution = v.nonnegative("resolution", RESOLUTION_D2 / p.d**2 if resolution is None else resolution)
    rec = _Recorder(trace, p.S is not None)
    t0 = time.perf_counter()
    S_hat, m, delta, t, reason, change = _iterate(p, rec, max_iter, tol, lookback, min_iter, m_floor,
                                                  resolution)
    seconds = time.perf_counter() - t0
    converged, xp, L = reason != "max_iter", p.xp, len(p.rho)
    stalled = reason == "stalled"
    reason = "perfect" if stalled else reason
    if not converged:
        max_iter_reached(f"GAMP-RIE did not converge in max_iter={max_iter} iterations (last change "
                         f"{change:.3g} > tol={tol:g} in units of m={_pack(m)}); increase max_iter or "
                         "damping, or loosen tol", on_max_iter)
    floor = max(resolution, m_floor, sqrt_eps)
    err = _check_result(p, S_hat, m, xp, floor, stalled, capped=not converged)
    return AMPResult(S_hat=to_host(S_hat[0] if L == 1 else xp.stack(S_hat)), mmse=None if err is None else _pack(err),
                     m=_pack(m), delta=_pack(delta), iterations=t, converged=converged, reason=reason,
                     trace=rec.rec, seconds=seconds,
                     options=dict(damping=p.damping, damp=damp, tol=tol, lookback=lookback,
                                  chunk_size=p.chunk_size, dtype=str(p.dtype), max_iter=max_iter,
                                  m_floor=m_floor, resolution=resolution))


def _iterate(p, rec, max_iter, tol, lookback, min_iter, m_floor, resolution):
    """The GAMP-RIE loop: channel step, prior step, damping, stopping rules (see :func:`gamp_rie`).

    Returns ``(S_hat, m, delta, iterations, reason, change)`` with ``reason`` one of
    ``'tol'``, ``'perfect'``, ``'stalled'`` (reported as ``'perfect'``) and ``'max_iter'``.
    """
    xp, L = p.xp, len(p.rho)
    S_hat = p.init or [math.sqrt(r) * xp.eye(p.d, dtype=p.dtype) for r in p.rho]
    m = np.ones(L)
    g_prev = xp.zeros((p.n, L, p.T, p.T), dtype=p.dtype)
    g_new = xp.empty_like(g_prev)
    history, m_history = deque(maxlen=lookback), deque(maxlen=lookback + 1)
    atol = float(np.finfo(p.dtype).eps) * (1.0 + max(p.rho))
    reason, delta, change = "max_iter", np.full(L, np.nan), math.inf
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(1, max_iter + 1):
            try:
                delta, R = channel_step(p, S_hat, m, g_prev, g_new, t)
                if np.all(delta < DELTA_MIN):   # the channel pins every S down: R is the estimate
                    S_hat, m, reason = R, np.zeros(L), "perfect"
                    e_R = _error(p, R, xp) if p.S else []
                    rec.add(m=m, m_new=m, delta=delta, change=0.0, error=e_R, error_new=e_R,
                            noise_ratio=[e / dl for e, dl in zip(e_R, delta)])
                    break
                S_new, m_new = prior_step(p, R, delta)
            except ConvergenceError as exc:
                raise ConvergenceError(f"GAMP-RIE diverged at iteration {t}: {exc} (m={_pack(m)}, "
                                       f"damping={p.damping}). Try a larger damping, check that y was "
                                       "produced by this channel, or use float64.") from None
            if p.S is not None:
                rec.add(noise_ratio=[e / dl for e, dl in zip(_error(p, R, xp), delta)],
                        error_new=_error(p, S_new, xp))
            S_hat = [(1.0 - p.damping) * a + p.damping * b for a, b in zip(S_new, S_hat)] if p.damp_S else S_new
            m = (1.0 - p.damping) * m_new + p.damping * m
            g_prev, g_new = g_new, g_prev
            change, still = _change(p, S_hat, m, history, m_floor, tol, atol, t, xp)
            m_history.append(m.copy())
            rec.add(m=m, m_new=m_new, delta=delta, change=change,
                    error=_error(p, S_hat, xp) if p.S else [])
            if t >= min_iter and still:
                reason = "tol"
                break
            if np.all(m < m_floor):
                reason = "perfect"
                break
            if _stalled(m_history, resolution):
                reason = "stalled"
                break
    return S_hat, m, delta, t, reason, change


def _stalled(m_history, resolution):
    """Every layer's ``m`` below ``resolution`` over the whole window of ``lookback + 1`` iterations,
    and fallen by less than ``STALL_FACTOR`` across it (a run still converging fast goes on)."""
    if len(m_history) < m_history.maxlen or resolution <= 0:
        return False
    first, last = m_history[0], m_history[-1]
    return all(bool(np.all(mm < resolution)) for mm in m_history) and bool(np.all(last * STALL_FACTOR >= first))


def _change(p, S_hat, m, history, m_floor, tol, atol, t, xp):
    """``(change, still)``: the squared distance per ``d`` to the closest of the last iterates in units
    of ``m`` (max over layers; the trace's ``change``), and whether some past iterate is within
    ``tol * m + atol`` of the current one in every layer (the stopping rule ``'tol'``)."""
    norm2 = max(float(xp.sum(S * S)) / p.d for S in S_hat)
    if not math.isfinite(norm2) or norm2 > 1e4 * (1.0 + max(p.rho)):
        raise ConvergenceError(f"GAMP-RIE diverged at iteration {t}: the estimate blew up "
                               f"(||S_hat||_F^2/d = {norm2:.3g}). Try a larger damping.")
    dist = [[float(xp.sum((S - o) ** 2)) / p.d for S, o in zip(S_hat, old)] for old in history]
    change = min((max(x / max(mm, m_floor, 1e-300) for x, mm in zip(row, m)) for row in dist), default=math.inf)
    still = any(all(x <= tol * mm + atol for x, mm in zip(row, m)) for row in dist)
    history.append([S.copy() for S in S_hat])
    return float(change), still
