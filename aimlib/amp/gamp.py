"""GAMP-RIE: the iteration loop, its stopping rules and its result (steps in :mod:`aimlib.amp.steps`)."""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..backend import to_host
from ..channels import Channel
from ..errors import ConvergenceError, check_on_max_iter, max_iter_reached
from .loop import CYCLE_SPAN, STOPS, StopRules, iterate, layer_errors, pack_layers
from .problem import Problem, make_problem
from .shards import sharded

__all__ = ["AMPResult", "Problem", "make_problem", "gamp_rie"]

#: default ``resolution`` of :func:`gamp_rie`, in units of ``1/d^2``: an error of ``2/d^2``
#: is that of one symmetric pair of entries of ``S`` wrong by their standard deviation ``1/sqrt(d)``
RESOLUTION_D2 = 2.0
#: relative allowance of the consistency check, ``CHECK_K / sqrt(d)`` (see :func:`_check_result`)
CHECK_K = 10.0


@dataclass
class AMPResult:
    """Outcome of :func:`gamp_rie` (per layer, as tuples, when the channel reads ``L > 1`` indices).

    Attributes
    ----------
    S_hat : numpy.ndarray of shape (d, d), or (L, d, d)
        Final estimate (host array): symmetric for a symmetric prior, a square matrix of two
        sectors for a square one (untied key and query, ``prior.symmetric`` is ``False``).
    mmse : float, tuple or None
        Estimation error ``(1/d) ||S_hat - S||_F^2`` if the teacher ``S`` was given.
    m : float or tuple
        The algorithm's own prediction of that error, ``mmse_S(Delta)`` (damped);
        it is what the state evolution tracks.
    V : float or tuple
        The same per sector of each layer's prior (a pair ``(V_A, V_B)`` for a square
        prior; equal to ``m`` for one-sector priors).
    delta : float or tuple
        Last effective noise variance ``Delta`` of the channel step (per sector for a square prior).
    iterations : int
    converged : bool
    reason : str
        ``'tol'``, ``'perfect'`` (``m`` fell below ``m_floor``, stalled below
        ``resolution``, or the channel pinned ``S`` down: ``Delta -> 0``), ``'max_iter'`` or
        ``'oscillating'`` (``stop='window'`` found a cycle; not converged).
    trace : dict of lists or None
        Per-iteration record (option ``trace`` of :func:`gamp_rie`).
    cycle : tuple or None
        ``(period, amplitude)`` of the cycle a run ending ``'oscillating'`` is on (the amplitude the
        largest distance between its iterates over a period, in units of ``sqrt(m)``), else None.
    seconds : float
        Wall time of the iteration loop.
    """

    S_hat: np.ndarray
    mmse: float | tuple | None
    m: float | tuple
    V: float | tuple
    delta: float | tuple
    iterations: int
    converged: bool
    reason: str
    trace: dict | None = None
    cycle: tuple | None = None
    seconds: float = 0.0
    options: dict = field(default_factory=dict)


class _Recorder:
    """The optional per-iteration trace (keys of :func:`gamp_rie`)."""

    def __init__(self, on: bool, with_teacher: bool):
        keys = ("m", "m_new", "delta", "change") + (("error", "error_new", "noise_ratio") if with_teacher else ())
        self.rec = {k: [] for k in keys} if on else None

    def add(self, **values):
        if self.rec is not None:
            for k, val in values.items():
                if k in self.rec:
                    self.rec[k].append(pack_layers(val) if isinstance(val, (list, np.ndarray)) else val)


def _check_result(p, S_hat, m, xp, floor, stalled=False, capped=False):
    r"""Measured errors, or a :class:`ConvergenceError` if they are not a self-consistent state.

    With ``e`` the measured error ``(1/d) ||S_hat - S||_F^2`` of a layer, ``m`` its
    prediction and ``hi, lo = max(e, m), min(e, m)``, the state is rejected when

    * ``e > e_0 + 0.1``, with ``e_0`` the error of the prior mean (``sqrt(rho) I`` for Wishart), or
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
    err = layer_errors(p, S_hat, xp)
    trivial = layer_errors(p, [pr.mean(p.d, xp, p.dtype) for pr in p.priors], xp)
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
             resolution: float | None = None, stop: str = "window", scheduler=None,
             shards: int | None = None, init_m=None, callback=None) -> AMPResult:
    r"""Run GAMP-RIE on a data set ``(X, y)`` of the attention-indexed model.

    Parameters
    ----------
    X : array (n, T, d) or aimlib.tokens.TokenStream
        Token sequences (NumPy or CuPy; the backend follows ``X``), or tokens regenerated
        chunk by chunk in every pass (memory ``O(chunk T d + d^2)`` whatever ``n``).
    y : array
        Outputs of ``channel``, ``(n, T, T)`` for one index per sample.
    channel : aimlib.channels.Channel
        Provides ``g_out`` (one RIE denoiser runs per index matrix it reads).
    rho : float, Prior, a sequence of ``L`` of them, or a JointPair
        The teachers' priors (:mod:`aimlib.priors`; a width ratio is the Wishart prior,
        ``inf`` the Gaussian one); each layer's prior step is its ``denoise``.  A
        :class:`~aimlib.priors.joint_pair.JointPair` (two Wishart ``deep-hardmax`` layers,
        ``T = 2``) denoises the two layers together, by sampling.
    S : array (d, d) or (L, d, d), optional
        Teacher, used only to report errors and to check the final state.
    damping, damp : float in [0, 1), {'both', 'state', 'messages'}
        ``x <- (1 - damping) new + damping old`` for ``(S_hat, m)`` (``'state'``),
        ``(g, m)`` (``'messages'``) or all three (``'both'``, stable at small ``d``).
    max_iter, tol, lookback, min_iter, stop
        ``stop='window'`` (the default): stop (``reason='tol'``) when the distance to the fixed point,
        estimated from the contraction over a window of ``lookback`` iterations, has been within
        ``sqrt(tol m_t)`` for a whole window, the window settled on one mode
        (:class:`~aimlib.iteration.WindowRule`; not fooled by heavy damping or by a slow mode under a
        fast one); a return to where the run was ``p <= CYCLE_SPAN lookback`` iterations before is a
        cycle, reported as ``reason='oscillating'`` with ``cycle``, handled as the cap is (``on_max_iter``).
        ``stop='estimate'`` (the former default): when ``||S_hat_t - S_hat_{t-k}||_F^2 / d
        <= tol m_t + atol`` for some ``k <= lookback``, after ``min_iter`` iterations; ``atol = eps max
        Q0`` is the rounding level of ``||S_hat||_F^2/d`` (a small step: it stops on slow modes).
        ``stop='drift'``: when the distance of the estimate to its limit, extrapolated from the
        drift of its means over blocks of ``lookback`` iterations, is within ``tol m_t + atol``
        (:class:`~aimlib.amp.loop.BlockDrift`).  ``stop='prediction'``: when ``|m_t - m_{t-1}| < tol
        m_{t-1}`` (:class:`~aimlib.amp.loop.StopRules`).
    chunk_size, memory_mb
        Samples per chunk (default: from the ``memory_mb`` work budget; for regenerated tokens,
        one stream chunk per thread of :func:`aimlib.tokens.draw_threads`, a whole number of chunks).
    trace : bool
        Record ``m``, ``m_new``, ``delta``, ``change`` and, with ``S``, ``error``, ``error_new``
        and ``noise_ratio = ||R - S||_F^2/(d Delta)`` per iteration.
    init : array (d, d) or (L, d, d), optional
        Starting estimate (default: the prior mean, ``sqrt(rho) I`` for Wishart, with ``m = mmse(inf)``).
    init_m : float or tuple, optional
        The starting predicted error ``m`` of each layer (one-sector priors; with ``init``, the
        error of that start), default the prior's error without data.
    callback : callable, optional
        ``callback(state)`` after every iteration, ``state`` an :class:`~aimlib.amp.loop.IterationState`
        (estimate, errors, messages, effective observations): diagnostics without copying the loop.
    m_floor : float, optional
        Stop (``reason='perfect'``) when every ``m`` drops below it (default ``sqrt(eps)``).
    resolution : float, optional
        Also stop as ``'perfect'`` when every ``m`` has stayed below ``resolution``
        for the last ``lookback + 1`` iterations and fell by less than a factor 2
        (default ``2/d^2``; 0 turns this off; why: :func:`aimlib.amp.loop.stalled`).
        Such a stop claims a measured error below ``resolution``, which the final
        check holds it to; ``resolution`` is also the check's absolute allowance.
    on_max_iter : {'raise', 'warn', 'return'}
        The rule of :mod:`aimlib.errors` at the iteration cap.
    dtype : float32 or float64, optional
        Working precision (default: that of ``X`` if floating, else float64).
    scheduler, shards : optional
        Shard the samples over a Dask cluster (:mod:`aimlib.amp.shards`): ``'local'`` (a
        cluster of ``shards`` workers, default 2, on this machine, TLS with temporary
        credentials, at most as many workers as CPUs), a TLS address ``'tls://host:port'``
        (the credentials in Dask's configuration, :mod:`aimlib.cluster`) or a
        ``distributed.Client``; ``shards`` runs of samples (default: one per worker).  The same numbers as one
        process up to round-off; symmetric priors only.

    Raises
    ------
    aimlib.ConvergenceError
        On divergence, at the cap with ``on_max_iter='raise'``, or when the final state
        contradicts the teacher ``S`` (:func:`_check_result`: error and ``m`` must agree within
        ``1 + 10/sqrt(d)`` plus a floor; a collapsed ``m`` is a failure, never perfect recovery).
    """
    p = make_problem(X, y, channel, rho, S, init, dtype, chunk_size, memory_mb, damping, damp)
    check_on_max_iter(on_max_iter)
    rules = _stop_rules(p, max_iter, tol, lookback, min_iter, m_floor, resolution, stop)
    rec = _Recorder(trace, p.S is not None)
    if scheduler is None and shards is not None:
        raise ValueError("shards needs a scheduler ('local', an address or a distributed.Client)")
    if scheduler is not None and p.joint is not None:
        raise ValueError(f"rho={p.joint!r}: the joint denoiser runs in one process (scheduler must be None)")
    with contextlib.nullcontext() if scheduler is None else sharded(p, scheduler, shards):
        t0 = time.perf_counter()
        S_hat, V, delta, t, reason, change, verdict = iterate(p, rec, rules, _init_m(p, init_m), callback)
        seconds = time.perf_counter() - t0
    m = np.array([sum(Vl) for Vl in V])
    converged, xp, L = reason not in ("max_iter", "oscillating"), p.xp, len(p.priors)
    stalled = reason == "stalled"
    if reason == "oscillating":
        max_iter_reached(_oscillation(verdict, rules, t, m, p.damping), on_max_iter)
    elif not converged:
        max_iter_reached(f"GAMP-RIE did not converge in max_iter={rules.max_iter} iterations (last change "
                         f"{change:.3g} > tol={rules.tol:g} in units of m={pack_layers(m)}); increase max_iter or "
                         "damping, or loosen tol", on_max_iter)
    floor = max(rules.resolution, rules.m_floor, float(np.sqrt(np.finfo(p.dtype).eps)))
    err = _check_result(p, S_hat, m, xp, floor, stalled, capped=not converged)
    return AMPResult(S_hat=to_host(S_hat[0] if L == 1 else xp.stack(S_hat)),
                     mmse=None if err is None else pack_layers(err),
                     m=pack_layers(m), V=pack_layers([Vl[0] if len(Vl) == 1 else Vl for Vl in V]),
                     delta=pack_layers(delta), iterations=t, converged=converged,
                     reason="perfect" if stalled else reason, trace=rec.rec, seconds=seconds,
                     cycle=(verdict.period, verdict.amplitude) if reason == "oscillating" else None,
                     options=dict(damping=p.damping, damp=damp, chunk_size=p.chunk_size, dtype=str(p.dtype),
                                  **{k: getattr(rules, k) for k in ("tol", "lookback", "max_iter", "m_floor",
                                                                    "resolution", "stop")}))


def _oscillation(verdict, rules, t, m, damping) -> str:
    """What a run that ended ``'oscillating'`` (:class:`~aimlib.iteration.Verdict`) says, and what to try."""
    how = (f"it returns within a tenth of its steps to where it was {verdict.period} iterations before"
           if verdict.period else
           f"it wanders without a period, its steps not shrinking over {CYCLE_SPAN * rules.lookback} iterations")
    return (f"GAMP-RIE is oscillating at iteration {t}: {how}, the iterates {verdict.amplitude:.3g} sqrt(m) apart, "
            f"more than sqrt(tol) = {math.sqrt(rules.tol):.3g} (m={pack_layers(m)}); it has not converged. At small "
            f"d GAMP-RIE's iterates need not have a fixed point (a larger d narrows the spread; so may a larger "
            f"damping, now {damping:g}); "
            + (f"to accept that spread, tol >= {verdict.amplitude ** 2:.2g} (its square)"
               if verdict.amplitude < 1 else "no tolerance accepts a spread beyond sqrt(m)"))


def _init_m(p, init_m):
    """``init_m`` as one positive value per layer of one-sector priors, or None."""
    if init_m is None:
        return None
    values = np.broadcast_to(np.asarray(init_m, dtype=float), (len(p.priors),))
    if any(len(pr.sectors) != 1 for pr in p.priors):
        raise ValueError("init_m is for one-sector (symmetric) priors; the square prior starts at its own errors")
    return [v.positive(f"init_m[{i}]", x) for i, x in enumerate(values)]


def _stop_rules(p, max_iter, tol, lookback, min_iter, m_floor, resolution, stop) -> StopRules:
    """The validated stopping rules of :func:`gamp_rie` (defaults ``m_floor = sqrt(eps)``, ``resolution = 2/d^2``)."""
    v.choice("stop", stop, set(STOPS))
    sqrt_eps = float(np.sqrt(np.finfo(p.dtype).eps))
    return StopRules(max_iter=v.integer("max_iter", max_iter, minimum=1), tol=v.positive("tol", tol),
                     lookback=v.integer("lookback", lookback, minimum=1),
                     min_iter=v.integer("min_iter", min_iter, minimum=1),
                     m_floor=v.nonnegative("m_floor", sqrt_eps if m_floor is None else m_floor),
                     resolution=v.nonnegative("resolution", RESOLUTION_D2 / p.d**2 if resolution is None
                                              else resolution), stop=stop)
