"""The GAMP-RIE iteration: channel step, prior step, damping and the stopping rules of :func:`~aimlib.amp.gamp_rie`."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import ConvergenceError
from ..iteration import STOPS, Verdict, WindowRule
from ..model import estimation_error
from .square_step import square_channel_step
from .steps import DELTA_MIN, channel_step, initial_state, prior_step

__all__ = ["StopRules", "BlockDrift", "STOPS", "IterationState", "damped", "PastIterates", "CYCLE_SPAN", "SKETCH",
           "STILL_FALLING", "recovering", "iterate", "layer_errors", "pack_layers", "per_layer", "resume", "stalled",
           "STALL_FACTOR"]

#: ``stop='window'`` looks for cycles up to this many windows long (GAMP-RIE at finite ``d`` has cycles of
#: period 17 at ``lookback = 10``: softmax, ``T = 2``, ``alpha = 0.1``, ``d = 80``)
CYCLE_SPAN = 4
#: entries of each past estimate kept for the distances back to it (:class:`PastIterates`)
SKETCH = 4096
#: a run whose predicted error fell by more than this fraction over the span is still recovering, not
#: oscillating (:func:`recovering`)
STILL_FALLING = 0.25
#: a predicted error below ``resolution`` that fell by less than this factor over
#: ``lookback`` iterations has stalled (see :func:`stalled`)
STALL_FACTOR = 2.0


@dataclass(frozen=True)
class StopRules:
    """The stopping rules of :func:`~aimlib.amp.gamp_rie` (its parameters of the same names).

    ``stop='estimate'`` stops when the estimate stops moving (``tol`` in units of
    ``m``, within ``lookback`` iterations, after ``min_iter``); ``stop='drift'`` when
    the extrapolated distance of the estimate to its limit is that small
    (:class:`BlockDrift`, blocks of ``lookback`` iterations); ``stop='window'`` when the
    distance to the fixed point estimated over a window of ``lookback`` iterations is
    (:class:`~aimlib.iteration.WindowRule`; a cycle stops it as ``'oscillating'``); ``stop='prediction'``
    when the predicted error does: ``|m_t - m_{t-1}| < tol m_{t-1}`` in every layer,
    checked after the ``m_floor`` rule.
    """

    max_iter: int
    tol: float
    lookback: int
    min_iter: int
    m_floor: float
    resolution: float
    stop: str = "window"


@dataclass(frozen=True)
class IterationState:
    """What :func:`iterate` hands its ``callback`` after iteration ``t`` (the arrays are the loop's own: read,
    do not keep or change them).

    Attributes
    ----------
    t : int
    S_hat, V : list
        The damped estimate and the predicted errors (per layer; per sector a tuple) after iteration ``t``.
    g : array
        The messages ``g_out`` of iteration ``t`` (``(n, L, T, T)``; no rows when the samples are sharded).
    R, delta : list
        The effective observations and their noise variances of iteration ``t``'s channel step.
    noise_ratio : list or None
        ``||R_l - S_l||_F^2 / (d Delta_l)`` per layer, the trace's ``noise_ratio`` (None without a teacher).
    onsager : list
        The (damped) rows of the Onsager matrix that iteration ``t + 1``'s channel step uses with ``S_hat``,
        ``V`` and ``g`` (:func:`~aimlib.amp.steps.omega_map`; for a square channel, per-sector terms).
    """

    t: int
    S_hat: list
    V: list
    g: object
    R: list
    delta: list
    noise_ratio: list | None = None
    onsager: list | None = None


def pack_layers(values):
    """A float for one layer, a tuple for several; a layer's tuple of sector values stays a tuple."""
    values = [tuple(float(y) for y in x) if isinstance(x, tuple) else float(x) for x in values]
    return values[0] if len(values) == 1 else tuple(values)


def layer_errors(p, mats, xp):
    """``(1/d) ||M_l - S_l||_F^2`` per layer (:func:`aimlib.model.estimation_error`)."""
    return [estimation_error(M, S) for M, S in zip(mats, p.S)]


def iterate(p, rec, rules: StopRules, init_m=None, callback=None):
    """The GAMP-RIE loop: channel step, prior step, damping, stopping rules (see :func:`gamp_rie`).

    ``init_m`` (one value per layer, for one-sector priors) starts the predicted errors there instead
    of at the prior's error without data; ``callback(state)`` is called after every iteration with an
    :class:`IterationState` (diagnostics that the trace does not hold, without a copy of this loop).

    The channel step is the channel's (its declared ``sectors``, ``channel.square``, which the
    priors match, :func:`aimlib.priors.make_priors`): :func:`~aimlib.amp.steps.channel_step` for
    symmetric index matrices, :func:`~aimlib.amp.square_step.square_channel_step` for square ones.  Returns
    ``(S_hat, V, delta, iterations, reason, change, verdict)`` with ``V`` the per-sector
    predicted errors of each layer, ``reason`` one of ``'tol'``, ``'perfect'``, ``'stalled'``
    (reported as ``'perfect'``), ``'oscillating'`` (``stop='window'``) and ``'max_iter'``, and
    ``verdict`` the last :class:`~aimlib.iteration.Verdict` of ``stop='window'`` (else None).
    """
    xp, L = p.xp, len(p.priors)
    step = square_channel_step if p.channel.square else channel_step
    max_iter, tol, m_floor = rules.max_iter, rules.tol, rules.m_floor
    S_hat, V, V_ons, g_prev, g_new = initial_state(p, init_m)
    m = _total(V)
    history, m_history = deque(maxlen=rules.lookback), deque(maxlen=rules.lookback + 1)
    drift = BlockDrift(rules.lookback) if rules.stop == "drift" else None
    window, verdict = None, None
    if rules.stop == "window":
        lookback = max(rules.lookback, 2)
        window, past = WindowRule(lookback, span=CYCLE_SPAN * lookback), PastIterates(p.d, CYCLE_SPAN * lookback, xp)
        m_span = deque(maxlen=CYCLE_SPAN * lookback + 1)      # m over the span of the window rule
    atol = float(np.finfo(p.dtype).eps) * max(pr.second_moment() for pr in p.priors)
    reason, delta, change = "max_iter", [(math.nan,)] * L, math.inf
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(1, max_iter + 1):
            try:
                delta, R, noise, cov = step(p, S_hat, V, V_ons, g_prev, g_new, t)
                if max(x for dl in delta for x in dl) < DELTA_MIN:   # the channel pins every S down: R is it
                    S_hat, reason = R, "perfect"
                    V, m = [(0.0,) * len(dl) for dl in delta], np.zeros(L)
                    e_R = layer_errors(p, R, xp) if p.S else []
                    rec.add(m=m, m_new=m, delta=per_layer(delta), change=0.0, error=e_R, error_new=e_R,
                            noise_ratio=_noise_ratio(e_R, delta))
                    break
                S_new, V_new, ons_new = prior_step(p, R, delta, noise, cov)
            except ConvergenceError as exc:
                raise ConvergenceError(f"GAMP-RIE diverged at iteration {t}: {exc} (m={pack_layers(m)}, "
                                       f"damping={p.damping}). Try a larger damping, check that y was "
                                       "produced by this channel, or use float64.") from None
            ratio = None
            if p.S is not None:
                ratio = _noise_ratio(layer_errors(p, R, xp), delta)
                rec.add(noise_ratio=ratio, error_new=layer_errors(p, S_new, xp))
            S_hat, V, V_ons = damped(p, (S_new, V_new, ons_new), (S_hat, V, V_ons))
            m_old = m
            m, m_new = _total(V), _total(V_new)
            g_prev, g_new = g_new, g_prev
            _check_finite(p, S_hat, t, xp)
            if window is not None:
                m_span.append(m.copy())
                verdict = recovering(_window_verdict(p, S_hat, m, past, window, rules, atol, xp), m_span)
                change, still = verdict.distance ** 2, verdict.converged
            elif drift is None:
                change, still = _change(p, S_hat, m, history, m_floor, tol, atol, xp)
            else:
                change, still = drift.update(S_hat, m, p.d, rules, atol, xp)
            m_history.append(m.copy())
            rec.add(m=m, m_new=m_new, delta=per_layer(delta), change=change,
                    error=layer_errors(p, S_hat, xp) if p.S else [])
            if callback is not None:
                callback(IterationState(t, S_hat, V, g_prev, R, delta, ratio, V_ons))
            reason = "oscillating" if verdict is not None and verdict.state == "oscillating" else \
                _stop_reason(rules, t, still, m, m_old, m_history)
            if reason != "max_iter":
                break
    return S_hat, V, per_layer(delta), t, reason, change, verdict


def _stop_reason(rules, t, still, m, m_old, m_history) -> str:
    """``'tol'``, ``'perfect'``, ``'stalled'``, or ``'max_iter'`` (go on): the rules of :class:`StopRules`."""
    if rules.stop == "prediction":
        if np.all(m < rules.m_floor):
            return "perfect"
        return "tol" if np.all(np.abs(m - m_old) < rules.tol * m_old) else "max_iter"
    if t >= rules.min_iter and still:
        return "tol"
    if np.all(m < rules.m_floor):
        return "perfect"
    return "stalled" if stalled(m_history, rules.resolution) else "max_iter"


def damped(p, new, old):
    """The state after an iteration's damping: ``(S_hat, V, V_ons)`` from the prior step's ``new`` and the last
    ``old`` (each such a triple); the estimates are mixed when ``p.damp_S``, the errors and Onsager rows always."""
    (S_new, V_new, ons_new), (S_hat, V, V_ons) = new, old
    S_hat = [(1.0 - p.damping) * a + p.damping * b for a, b in zip(S_new, S_hat)] if p.damp_S else S_new
    return S_hat, _mix(V_new, V, p.damping), _mix(ons_new, V_ons, p.damping)


def resume(p, state: IterationState, iterations: int) -> list:
    """The estimates after ``iterations`` more iterations of the loop on ``p`` from ``state``, without stopping
    rules or records.

    ``state`` holds what an :class:`IterationState` holds after iteration ``state.t`` (estimates, errors, Onsager
    rows, outputs ``g`` with one row per sample of ``p``; arrays on the host or the device); the iterations are the
    loop's own (channel step, prior step, :func:`damped`), numbered on from ``state.t + 1``.  A leave-one-out run
    (:func:`aimlib.amp.leave_one_out.left_out_indices`) continues a run this way on its data less one sample.
    """
    if p.channel.square:
        raise ValueError("resume takes a symmetric channel's state (channel.square is true)")
    xp = p.xp
    S_hat, V, V_ons = [xp.asarray(S, dtype=p.dtype) for S in state.S_hat], list(state.V), list(state.onsager)
    g_prev = xp.asarray(state.g, dtype=p.dtype)
    g_new = xp.empty_like(g_prev)
    for t in range(state.t + 1, state.t + iterations + 1):
        delta, R, noise, cov = channel_step(p, S_hat, V, V_ons, g_prev, g_new, t)
        S_hat, V, V_ons = damped(p, prior_step(p, R, delta, noise, cov), (S_hat, V, V_ons))
        g_prev, g_new = g_new, g_prev
    return S_hat


def _mix(new, old, damping):
    """``(1 - damping) new + damping old`` for lists (layers) of tuples (sectors)."""
    return [tuple((1.0 - damping) * a + damping * b for a, b in zip(n, o)) for n, o in zip(new, old)]


def _total(V) -> np.ndarray:
    """``m_l = sum_s V_ls``: each layer's predicted error ``(1/d)||S_hat_l - S_l||_F^2``."""
    return np.array([sum(Vl) for Vl in V])


def per_layer(delta) -> list:
    """One ``Delta`` per layer: a float for a one-sector prior, the tuple of sector noises otherwise."""
    return [dl[0] if len(dl) == 1 else tuple(dl) for dl in delta]


def _noise_ratio(errors, delta) -> list:
    """``||R - S||_F^2 / (d Delta)`` per layer (``Delta`` averaged over the sectors of a square prior)."""
    return [e / (sum(dl) / len(dl)) for e, dl in zip(errors, delta)]


def stalled(m_history, resolution):
    """Every layer's ``m`` below ``resolution`` over the whole window of ``lookback + 1`` iterations,
    and fallen by less than ``STALL_FACTOR`` across it (a run still converging fast goes on).

    Why.  Above perfect recovery a noiseless channel often lets ``m`` decay only like
    ``t^-2`` while the measured error is a hundred times smaller (softmax, d = 40,
    alpha = 0.3: ``m = 4e-4``, error ``2e-6`` after 300 iterations, still falling);
    this rule ends such runs, after 160 to 260 iterations at d = 40..60, while a run
    still converging fast goes on to ``m_floor``.  The slow decay, ``m ~ 4e-4
    (300/t)^2``, hardly depends on ``d``, so at larger ``d`` such a run needs about
    ``4 d`` iterations (d = 80: 330) and otherwise ends at ``max_iter``.  The default
    ``resolution`` ``2/d^2`` is the error of one symmetric pair of entries of ``S``
    wrong by their standard deviation ``1/sqrt(d)``.
    """
    if len(m_history) < m_history.maxlen or resolution <= 0:
        return False
    first, last = m_history[0], m_history[-1]
    return all(bool(np.all(mm < resolution)) for mm in m_history) and bool(np.all(last * STALL_FACTOR >= first))


def _change(p, S_hat, m, history, m_floor, tol, atol, xp):
    """``(change, still)``: the squared distance per ``d`` to the closest of the last iterates in units
    of ``m`` (max over layers; the trace's ``change``), and whether some past iterate is within
    ``tol * m + atol`` of the current one in every layer (the stopping rule ``'tol'``)."""
    dist = [[float(xp.sum((S - o) ** 2)) / p.d for S, o in zip(S_hat, old)] for old in history]
    change = min((max(x / max(mm, m_floor, 1e-300) for x, mm in zip(row, m)) for row in dist), default=math.inf)
    still = any(all(x <= tol * mm + atol for x, mm in zip(row, m)) for row in dist)
    history.append([S.copy() for S in S_hat])
    return float(change), still


class PastIterates:
    r"""What ``stop='window'`` keeps of the past estimates: the last one in full (the step
    ``||S_t - S_{t-1}||_F^2/d``, exact) and a sketch of each of the ``span`` before it (the distances back,
    from which a cycle is recognised, :class:`~aimlib.iteration.WindowRule`).

    The sketch of ``S`` is ``K = min(d^2, SKETCH)`` of its entries, the same for every iterate (drawn once
    from ``default_rng(0)``: a fixed measurement, not part of the model's randomness); ``(d^2/K) sum_K
    (S - S')_ij^2`` is an unbiased estimate of ``||S - S'||_F^2``, exact when ``d^2 <= SKETCH``, within a
    few per cent for the delocalised differences of GAMP-RIE's iterates.  Memory: one ``d x d`` copy per
    layer and ``span`` sketches, whatever ``d`` (the distances to whole past iterates would need ``span``
    copies: 2.9 GB at ``d = 3000``).
    """

    def __init__(self, d: int, span: int, xp):
        self.d, n = d, d * d
        k = min(n, SKETCH)
        self.idx = None if k == n else xp.asarray(np.sort(np.random.default_rng(0).choice(n, k, replace=False)))
        self.scale = n / k
        self.prev, self.sketches = None, deque(maxlen=span)

    def _sketch(self, S):
        flat = S.reshape(-1)
        return (flat if self.idx is None else flat[self.idx]).copy()

    def distances(self, S_hat, xp) -> list:
        """``[[||S_l - S_l^(t-k)||_F^2 / d for each layer l] for k = 1, 2, ...]`` (``k >= 2`` from the
        sketches), then keep ``S_hat``."""
        sk = [self._sketch(S) for S in S_hat]
        rows = [] if self.prev is None else [[float(xp.sum((S - o) ** 2)) / self.d for S, o in zip(S_hat, self.prev)]]
        rows += [[self.scale * float(xp.sum((a - b) ** 2)) / self.d for a, b in zip(sk, old)]
                 for old in list(self.sketches)[-2::-1]]
        self.prev = [S.copy() for S in S_hat]
        self.sketches.append(sk)
        return rows


def _window_verdict(p, S_hat, m, past: PastIterates, rule, rules, atol, xp):
    """The :class:`~aimlib.iteration.WindowRule` verdict on ``S_hat``, in units of ``sqrt(m)``: the distances
    ``max_l sqrt(||S_l - S_l^(t-k)||_F^2 / (d m_l))`` to the past iterates (:class:`PastIterates`; a step
    whose squared size is at the rounding level ``atol`` in every layer counts as 0), the bound ``sqrt(tol)``."""
    rows = past.distances(S_hat, xp)
    if not rows:
        return Verdict("running", math.inf, math.nan)
    back = [max(math.sqrt(x / max(mm, rules.m_floor, 1e-300)) for x, mm in zip(row, m)) for row in rows]
    step = 0.0 if all(x <= atol for x in rows[0]) else back[0]
    return rule.update(step, math.sqrt(rules.tol), back)


def recovering(verdict: Verdict, m_span) -> Verdict:
    """``verdict``, unless it says ``'oscillating'`` while some layer's predicted error ``m`` fell by more than
    ``STILL_FALLING`` over the span: then ``'running'``.

    Why.  Above perfect recovery ``m`` decays like ``t^-2`` and the estimate with it; in units of
    ``sqrt(m)`` its steps need not shrink, and the window rule alone would call the recovery a wander
    (softmax, ``d = 40``, ``alpha = 0.3``, seed 7: iterates ``0.17 sqrt(m)`` apart at iteration 148, ``m``
    falling by half over the span).  A cycle or a wander at a floor leaves ``m`` within a few per cent.
    """
    if verdict.state != "oscillating" or len(m_span) < m_span.maxlen:
        return verdict
    if np.any(m_span[-1] < (1.0 - STILL_FALLING) * m_span[0]):
        return Verdict("running", verdict.distance, verdict.rate)
    return verdict


def _check_finite(p, S_hat, t, xp):
    """Raise :class:`~aimlib.ConvergenceError` when the estimate blew up (``||S_hat||_F^2/d > 10^4 Q0``)."""
    norm2 = max(float(xp.sum(S * S)) / p.d for S in S_hat)
    if not math.isfinite(norm2) or norm2 > 1e4 * max(pr.second_moment() for pr in p.priors):
        raise ConvergenceError(f"GAMP-RIE diverged at iteration {t}: the estimate blew up "
                               f"(||S_hat||_F^2/d = {norm2:.3g}). Try a larger damping.")


class BlockDrift:
    r"""The rule ``stop='drift'``: the distance of the estimate to its limit, extrapolated.

    The iterates are averaged over blocks of ``k`` iterations (``B_j``, which removes
    a small oscillation of period up to ``k``), and the drift between consecutive
    blocks, ``D_j = ||B_j - B_{j-1}||_F^2 / d``, is taken as geometric: with
    ``q = sqrt(D_j / D_{j-1})`` (the contraction over ``k`` iterations) the block
    mean is at distance

    .. math::  \hat R_j^2 = D_j\,\Big(\frac{q}{1-q}\Big)^2

    from the limit, and the run stops when ``R_j^2 <= tol m + atol`` in every layer
    (``q >= 1``, a drift that does not shrink, never stops it).  The distance ``R``
    bounds how far the block mean's error ``e`` is from the limit's:
    ``|e - e_inf| <= 2 sqrt(R^2 e_inf) + R^2``, a relative ``2 sqrt(tol)`` at ``m = e``.
    Why: the rule ``'estimate'`` measures the step between iterates, which is a
    fraction ``(1 - r) / r`` of the distance left when the contraction ``r`` per
    iteration is close to 1 (hardmax, ``T = 2``, ``rho = 0.5``, ``alpha = 1``,
    ``d = 100``: it stops at an error 11 % above the limit).
    ``change`` reports ``R^2 / m``.  Memory: three ``d x d`` matrices per layer.
    """

    def __init__(self, k: int):
        self.k, self.count, self.sums, self.last, self.dists = k, 0, None, None, deque(maxlen=2)
        self.change = math.inf

    def update(self, S_hat, m, d, rules, atol, xp):
        """Add iterate ``S_hat`` (a list of layers); return ``(change, still)`` (``still`` at block ends only)."""
        self.sums = [S.copy() for S in S_hat] if self.sums is None else [a + S for a, S in zip(self.sums, S_hat)]
        self.count += 1
        if self.count < self.k:
            return self.change, False
        means, self.sums, self.count = [a / self.k for a in self.sums], None, 0
        if self.last is not None:
            self.dists.append([float(xp.sum((a - b) ** 2)) / d for a, b in zip(means, self.last)])
        self.last = means
        if len(self.dists) < 2:
            return self.change, False
        rest = [_extrapolated(new, old) for new, old in zip(self.dists[-1], self.dists[-2])]
        self.change = max(r / max(mm, rules.m_floor, 1e-300) for r, mm in zip(rest, m))
        return self.change, all(r <= rules.tol * mm + atol for r, mm in zip(rest, m))


def _extrapolated(new: float, old: float) -> float:
    """``D (q / (1 - q))^2`` with ``q = sqrt(new / old)``: the squared distance left after a geometric drift."""
    if new == 0.0:
        return 0.0
    q = math.sqrt(new / old) if old > 0 else math.inf
    return new * (q / (1.0 - q)) ** 2 if q < 1.0 else math.inf
