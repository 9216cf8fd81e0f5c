r"""Stopping an iteration where it has converged: the distance to the fixed point, estimated over a window.

An iteration ``x_{t+1} = F(x_t)`` near an attracting fixed point ``x*`` moves by steps
``s_t = ||x_t - x_{t-1}||`` that shrink like ``r^t``, ``r`` the contraction of its slowest mode.
The last step is then a fraction ``(1 - r)/r`` of the distance left,

.. math::  \|x_t - x^*\| \le \sum_{k > t} s_k \approx s_t \, \frac{r}{1 - r},

so a rule "stop when the step is small" stops on a slow mode (``r`` near 1, heavy damping among
them) far from ``x*``.  :class:`WindowRule` stops when the *estimated distance* ``s_t r/(1 - r)``
has been within the bound for a whole window of ``w`` steps, with ``r`` estimated over the window
as the largest of the one-step ratios ``s_k/s_{k-1}`` and of the mean rate ``(s_t/s_{t-w})^{1/w}``.
The window must also have *settled* on one mode: its one-step ratios may spread by at most
``SETTLED (1 - r)``.  While a fast mode (contraction ``a``) hands over to a slow one (``b``), the
ratios climb from ``a`` towards ``b`` and the extrapolation from them would miss the slow mode's
distance; once they have settled the estimate is the slow mode's.  Before a whole window nothing
is called converged, whatever the step.

The estimate is exact for a geometric approach.  For a power-law one, ``x_t - x* ~ t^-g``, it is
``g/(1 + g)`` of the distance left (a half at ``g = 1``): such an approach is not the linear
convergence to an attracting fixed point that the rule certifies.

An iteration whose steps do not shrink over ``p`` steps and that comes back near where it was
``p`` steps ago, closer than a tenth of each of its last ``p`` steps, is on a cycle (periods up to
``span``, which may exceed the window: GAMP-RIE at finite ``d`` has cycles of period 17):
:class:`Verdict` says ``'oscillating'`` with the period ``p`` and the amplitude (the largest
distance between the iterates of the window), never ``'converged'``; so is one that wanders without
a period (``p = 0``): over ``span`` steps its steps have not shrunk and its distances back do not
grow with the lag, as a drift's do (GAMP-RIE's iterates at finite ``d`` wander so, within a few per
cent of ``sqrt(m)``, at a floor set by ``d``) - unless that amplitude is itself within the bound:
then the iterates wander at a floor (the rounding of a numerical integral, say) closer to each
other than the tolerance, which is converged as far as the bound can tell.  Steps at the rounding
level ``atol`` are converged: nothing finer can be seen.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from . import _validate as v
from .errors import ConvergenceError

__all__ = ["STOPS", "Verdict", "StepRule", "WindowRule", "Iterated", "iterate_map", "taken_further", "CYCLE_RATIO",
           "CYCLE_RATE", "WANDER_GROWTH", "SETTLED"]

#: the stopping rules of :func:`~aimlib.amp.gamp_rie` (:class:`~aimlib.amp.loop.StopRules`); ``'window'`` is
#: :class:`WindowRule`
STOPS = ("estimate", "drift", "prediction", "window")
#: a return within this fraction of each step of the period, the steps not shrinking over the window
#: (mean rate at least ``CYCLE_RATE``), is a cycle
CYCLE_RATIO, CYCLE_RATE = 0.1, 0.999
#: iterates whose distances back to the older half of a span exceed those to its recent half by at most
#: this factor, their steps not shrinking, wander in a ball (an aperiodic oscillation, period 0)
WANDER_GROWTH = 1.25
#: the one-step ratios of the window have settled on one mode when they spread by at most this
#: fraction of ``1 - r`` (then ``r/(1 - r)`` is known to about that fraction)
SETTLED = 0.5


@dataclass(frozen=True)
class Verdict:
    """What a stopping rule (:meth:`WindowRule.update`, :meth:`StepRule.update`) concludes after one step.

    Attributes
    ----------
    state : str
        ``'converged'``, ``'oscillating'`` or ``'running'`` (go on: not yet a whole window, or still too far);
        :func:`iterate_map` also ends a run as ``'diverged'`` (an iterate was not finite).
    distance : float
        The estimated distance to the fixed point, ``s_t r/(1 - r)`` (``inf`` when ``r >= 1``).
    rate : float
        The estimated contraction per step ``r`` (``nan`` before a whole window).
    period : int
        The period ``p`` of a cycle (``'oscillating'``; 0 for a wander without a period), else 0.
    amplitude : float
        The largest distance between two iterates of the window on a cycle, else 0.
    """

    state: str
    distance: float
    rate: float
    period: int = 0
    amplitude: float = 0.0

    @property
    def converged(self) -> bool:
        """Whether ``state`` is ``'converged'``."""
        return self.state == "converged"


class StepRule:
    """Stop when a step is below the bound: ``s_t < bound`` (the state evolution's rule of old; it takes
    a slow mode's small steps for convergence, see the module docstring).

    Parameters
    ----------
    window, span : int
        Unused: the same signature as :class:`WindowRule`.
    atol : float
        The rounding level of the distance.
    """

    def __init__(self, window: int = 10, atol: float = 0.0, span: int | None = None):
        self.atol = v.nonnegative("atol", atol)

    def update(self, step: float, bound: float, back=None) -> Verdict:
        """``'converged'`` when ``step < bound + atol``, else ``'running'`` (``distance`` is the step)."""
        step = float(step)
        if not step >= 0.0:
            raise ValueError(f"step must be a distance >= 0, got {step!r}")
        return Verdict("converged" if step < bound + self.atol else "running", step, math.nan)


class WindowRule:
    """The stopping rule of the module docstring, fed one step at a time.

    Parameters
    ----------
    window : int
        Steps ``w >= 2`` over which the contraction is estimated; also the longest period seen.
    atol : float
        The rounding level of the distance: a step at or below it is converged.
    span : int, optional
        The longest period looked for (default ``window``; at least ``window``): a cycle longer than
        the window has steps that shrink over part of it, so it needs the steps and the distances
        ``back`` of a whole period.
    """

    def __init__(self, window: int = 10, atol: float = 0.0, span: int | None = None):
        self.window = v.integer("window", window, minimum=2)
        self.atol = v.nonnegative("atol", atol)
        self.span = self.window if span is None else v.integer("span", span, minimum=self.window)
        self._steps = deque(maxlen=self.span + 1)
        self._within = 0        # consecutive steps whose estimated distance met the bound

    def update(self, step: float, bound: float, back=None) -> Verdict:
        """Take the step ``s_t = ||x_t - x_{t-1}||`` and the bound the distance to the fixed point must meet.

        ``back``, if given, holds ``||x_t - x_{t-k}||`` for ``k = 1, 2, ...`` (at most ``span``):
        the distances to the earlier iterates, from which a cycle is recognised.
        """
        step = float(step)
        if not step >= 0.0:
            raise ValueError(f"step must be a distance >= 0, got {step!r}")
        self._steps.append(step)
        if step <= self.atol:
            return Verdict("converged", step, math.nan)
        if len(self._steps) <= self.window:      # the steps of the window are the last window + 1
            return Verdict("running", math.inf, math.nan)
        rate = self._rate()
        settled = rate < 1.0 and self._spread() <= SETTLED * (1.0 - rate)
        # steps that sometimes grow (rate >= 1) while their envelope shrinks: a spiral, jitter; steps that
        # shrink at a rate still changing (a fast mode handing over to a slow one): wait
        distance = step * rate / (1.0 - rate) if settled else self._distance_envelope() if rate >= 1.0 else math.inf
        if math.isfinite(distance):
            self._within = self._within + 1 if distance <= bound + self.atol else 0
            return Verdict("converged" if self._within >= self.window else "running", distance, rate)
        self._within = 0
        if rate < 1.0:                                  # not settled on one mode yet
            return Verdict("running", step * rate / (1.0 - rate), rate)
        cycle = self._cycle(back, rate)
        if cycle is not None and cycle.amplitude <= bound + self.atol:    # a floor, not an oscillation
            return Verdict("converged", cycle.amplitude, rate, cycle.period, cycle.amplitude)
        return cycle or Verdict("running", math.inf, rate)

    def _distance_envelope(self) -> float:
        r"""The distance left from the envelope of the steps, for steps too jittery for their one-step ratios.

        The ``span`` is cut into four blocks of ``q = span/4`` steps with largest steps ``M_1, ..., M_4``
        (``M_4`` the latest); ``r = max_j (M_{j+1}/M_j)^{1/q}``, the slowest contraction seen, and the distance
        ``M_4 r/(1 - r)`` (``inf`` when ``r >= 1`` or before a whole span).  Both are upper estimates of a
        geometric approach's (``M_4 >= s_t``), so the rule stays on the safe side; it is what certifies an
        iteration whose slow mode spirals in (GAMP-RIE at ``d = 60``: steps that change by a factor 2 from one
        iteration to the next while their envelope contracts by 0.98 per iteration).
        """
        q = self.span // 4
        s = list(self._steps)[1:]
        if q < 2 or len(s) < 4 * q:
            return math.inf
        peaks = [max(s[-(4 - j) * q:len(s) - (3 - j) * q]) for j in range(4)]
        if min(peaks) <= 0.0:
            return math.inf
        rate = max((b / a) ** (1.0 / q) for a, b in zip(peaks[:-1], peaks[1:]))
        return peaks[-1] * rate / (1.0 - rate) if rate < 1.0 else math.inf

    def _rate(self) -> float:
        """``max(max_k s_k/s_{k-1}, (s_t/s_{t-w})^{1/w})`` over the window (``inf`` after a zero step)."""
        s = self._window_steps()
        if min(s[:-1]) <= 0.0:
            return math.inf
        one_step = max(b / a for a, b in zip(s[:-1], s[1:]))
        return max(one_step, (s[-1] / s[0]) ** (1.0 / self.window))

    def _spread(self) -> float:
        """``max_k s_k/s_{k-1} - min_k s_k/s_{k-1}`` over the window."""
        s = self._window_steps()
        ratios = [b / a for a, b in zip(s[:-1], s[1:])]
        return max(ratios) - min(ratios)

    def _window_steps(self) -> list:
        """The last ``window + 1`` steps."""
        return list(self._steps)[-(self.window + 1):]

    def _cycle(self, back, rate: float):
        """An ``'oscillating'`` verdict if, for some period ``p >= 2`` (at most ``span``), the steps have not
        shrunk over the last period (``(s_t/s_{t-p})^{1/p} >= CYCLE_RATE``) and ``||x_t - x_{t-p}||`` is below
        ``CYCLE_RATIO`` times each of the last ``p`` steps; else None (the shortest such period)."""
        s = list(self._steps)
        if back is None or min(s) <= 0.0:
            return None
        back = [float(b) for b in back[:self.span]]
        for period in range(2, min(len(back), len(s) - 1) + 1):
            if (s[-1] / s[-1 - period]) ** (1.0 / period) < CYCLE_RATE:
                continue
            if back[period - 1] <= CYCLE_RATIO * min(s[-period:]):
                return Verdict("oscillating", math.inf, rate, period, max(back[:period]))
        return self._wander(s, back, rate)

    def _wander(self, s, back, rate: float):
        """An ``'oscillating'`` verdict of period 0 (no period) if, over the whole ``span``, the steps have not
        shrunk (the median of the later half at least ``CYCLE_RATE^(span/2)`` times the earlier half's) and the
        iterates stay within a ball: the distances back to the older half of the span exceed those to the
        recent half by at most ``WANDER_GROWTH`` (a drift moves them apart in proportion to the lag)."""
        half = self.span // 2
        if self.span < 4 or len(back) < self.span or len(s) <= self.span:
            return None
        early, late = np.median(s[1:half + 1]), np.median(s[half + 1:])
        if late < early * CYCLE_RATE ** half or max(back[half:self.span]) > WANDER_GROWTH * max(back[:half]):
            return None
        return Verdict("oscillating", math.inf, rate, 0, max(back[:self.span]))


#: the rules of :func:`iterate_map`, by name
MAP_RULES = {"step": StepRule, "window": WindowRule}


@dataclass(frozen=True)
class Iterated:
    """What :func:`iterate_map` returns.

    Attributes
    ----------
    x : ndarray
        The last iterate (the last finite one when ``verdict.state == 'diverged'``).
    iterations : int
    verdict : Verdict
        The rule's last verdict; ``'diverged'`` when an iterate was not finite, ``'running'`` at the cap.
    trace : ndarray
        ``x_0, x_1, ...`` stacked.
    """

    x: np.ndarray
    iterations: int
    verdict: Verdict
    trace: np.ndarray


def iterate_map(F, x0, bound: float, *, rule: str = "step", damping: float = 0.0, max_iter: int = 10_000,
                window: int = 10, span: int | None = None, callback=None) -> Iterated:
    r"""Iterate ``x <- (1 - damping) F(x) + damping x`` until the stopping rule ends it, or ``max_iter``.

    The distance is the largest change of a component, ``||x_t - x_{t-k}||_inf``; ``rule`` is
    ``'step'`` (:class:`StepRule`) or ``'window'`` (:class:`WindowRule`, which also recognises
    cycles from the distances to the last ``span`` iterates, default ``window``).  ``callback(t, x)`` is called after
    every iteration.  An iterate that is not finite ends the run as ``'diverged'``.
    """
    damping = v.in_range("damping", damping, 0.0, 0.999)
    max_iter = v.integer("max_iter", max_iter, minimum=1)
    judge = MAP_RULES[v.choice("rule", rule, set(MAP_RULES))](window, span=span)
    x = np.asarray(x0, dtype=float)
    trace, past = [x], deque(maxlen=window if span is None else span)
    verdict = Verdict("running", math.inf, math.nan)
    for t in range(1, max_iter + 1):
        x_new = (1 - damping) * np.asarray(F(x), dtype=float) + damping * x
        if not np.all(np.isfinite(x_new)):
            return Iterated(x, t, Verdict("diverged", math.inf, math.nan), np.asarray(trace))
        past.appendleft(x)
        back = [float(np.max(np.abs(x_new - old))) for old in past]
        x = x_new
        trace.append(x)
        verdict = judge.update(back[0], bound, back)
        if callback is not None:
            callback(t, x)
        if verdict.state in ("converged", "oscillating"):
            break
    return Iterated(x, t, verdict, np.asarray(trace))


def taken_further(step, x, further: int, tol: float, what: str, *, callback=None, start: int = 0) -> list:
    r"""Take a converged iterate ``further`` iterations on, as the check of its convergence.

    ``x_0 = x``, ``x_{k+1} = step(x_k)`` (``step`` the whole update, damping included); every
    ``x_k`` must stay within ``tol`` of ``x``, ``max_k ||x_k - x||_inf <= tol``, else the iteration
    had stopped on a slow mode short of its fixed point.  ``callback(start + k, x_k)`` is called after
    every iteration.

    Returns
    -------
    list of ndarray
        ``x_0, ..., x_further``.

    Raises
    ------
    ConvergenceError
        An iterate more than ``tol`` from ``x``; the message starts with ``what``.
    """
    further = v.integer("further", further, minimum=1)
    kept = [np.asarray(x, dtype=float)]
    for k in range(1, further + 1):
        kept.append(np.asarray(step(kept[-1]), dtype=float))
        if callback is not None:
            callback(start + k, kept[-1])
    drift = max(float(np.max(np.abs(k - kept[0]))) for k in kept)
    if drift > tol:
        raise ConvergenceError(f"{what} moved {drift:.3g} > tol={tol:g} within {further} iterations after it had "
                               "converged")
    return kept
