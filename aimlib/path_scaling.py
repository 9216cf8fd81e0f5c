r"""How an iteration's path at one size maps onto its path at another: delayed, or slowed.

Run an iteration from the same start at two sizes ``d < d'``. If it leaves a fixed point at both,
two mechanisms can be told apart by how the larger size passes the same states.

* **Delayed.** The fixed point is unstable in the limiting (``d -> infinity``) iteration, along a mode
  of multiplier ``1 + epsilon``. The finite-size fluctuations, of size ``d^{-1/2}``, seed that mode;
  the deviation grows as ``d^{-1/2} e^{epsilon t}`` and, once large, follows the limiting map, the
  same at both sizes. So the larger size passes every state later by one time,

  .. math::  y_{d'}(t) = y_d(t - s), \qquad s = \frac{\ln(d'/d)}{2\epsilon}.

* **Slowed.** The limiting iteration is stable, or neutral, along the path, and a force of finite
  size, of order ``d^{-\gamma}``, drives a drift along it. The drift's speed at each state falls with
  ``d``, so the larger size passes the same states with its clock slowed,

  .. math::  y_{d'}(t) = y_d(t / c), \qquad c = (d'/d)^{\gamma}.

:func:`fit_path` fits either map by least squares over a grid of its parameter, on the same
iterations for both, so their misfits compare. :func:`first_crossing` reads when a path first
exceeds a level: a delay keeps the differences of two sizes' crossing times equal across levels,
a slowed clock keeps their ratios.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import choice, finite_array, real
from .errors import ConvergenceError

__all__ = ["KINDS", "PathFit", "first_crossing", "fit_path"]

#: the two maps of one path onto another: ``y'(t) = y(t - s)`` and ``y'(t) = y(t / c)``
KINDS = ("delay", "clock")


@dataclass(frozen=True)
class PathFit:
    """A path mapped onto a reference path.

    Attributes
    ----------
    kind : str
        ``'delay'`` (``y'(t) = y(t - value)``) or ``'clock'`` (``y'(t) = y(t / value)``).
    value : float
        The fitted delay ``s`` or clock factor ``c``.
    rms : float
        The root mean square of ``y'(t) - y(t - s)`` (or ``y(t/c)``) over the fitted iterations, the
        reference interpolated linearly between its iterations.
    points : int
        How many iterations were fitted.
    """

    kind: str
    value: float
    rms: float
    points: int


def _path(name: str, t, y):
    """``(t, y)`` as float arrays: one axis each, equal lengths, ``t`` increasing."""
    t, y = (np.asarray(finite_array(n, a, ndim=1), dtype=float) for n, a in ((f"{name} t", t), (name, y)))
    if len(t) != len(y) or len(t) < 2:
        raise ValueError(f"{name} and its t must have one equal length of at least 2, got {len(y)} and {len(t)}")
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"{name} t must increase")
    return t, y


def _mapped(kind: str, t, value: float):
    """The reference's times the path's times ``t`` stand for: ``t - s`` or ``t / c``."""
    return t - value if kind == "delay" else t / value


def fit_path(t_ref, reference, t, path, kind: str, values, *, start: float, end: float | None = None,
             reference_start: float | None = None) -> PathFit:
    """Fit ``path(t) = reference(t - s)`` (``kind='delay'``) or ``reference(t / c)`` (``'clock'``).

    Parameters
    ----------
    t_ref, reference : array_like
        The reference path at its iterations ``t_ref`` (increasing).
    t, path : array_like
        The path to map, at its iterations ``t`` (increasing).
    kind : {'delay', 'clock'}
        The map.
    values : array_like
        The grid of delays ``s`` or clock factors ``c > 0`` to try.
    start, end : float
        Fit the iterations ``start <= t <= end`` (``end`` defaults to ``t[-1]``); every grid value is
        judged on these same iterations.
    reference_start : float, optional
        The first reference iteration a fitted time may stand for (default ``t_ref[0]``): a value whose
        times ``t - s`` or ``t / c`` leave ``[reference_start, t_ref[-1]]`` is not admitted.

    Returns
    -------
    PathFit
        The least root-mean-square misfit over the admitted values.

    Raises
    ------
    ValueError
        For paths that are not finite one-axis arrays of equal lengths with increasing ``t``, fewer than
        three iterations from ``start`` to ``end``, a clock factor ``<= 0``, or no admitted value.
    ConvergenceError
        If the least misfit lies at the first or last admitted value: the minimum may lie beyond the
        grid or the window, so the value is not a fit.
    """
    kind = choice("kind", kind, KINDS)
    t_ref, reference = _path("reference", t_ref, reference)
    t, path = _path("path", t, path)
    values = np.asarray(finite_array("values", values, ndim=1), dtype=float)
    if kind == "clock" and np.any(values <= 0):
        raise ValueError("values must be clock factors > 0 for kind='clock'")
    last = t[-1] if end is None else real("end", end)
    keep = (t >= real("start", start)) & (t <= last)
    if keep.sum() < 3:
        raise ValueError(f"start and end must leave at least 3 iterations of the path, got {start} and {last}")
    low = t_ref[0] if reference_start is None else real("reference_start", reference_start)
    fits = []
    for value in np.sort(values):
        times = _mapped(kind, t[keep], value)
        if times.min() >= low and times.max() <= t_ref[-1]:
            misfit = np.interp(times, t_ref, reference) - path[keep]
            fits.append((float(np.sqrt(np.mean(misfit ** 2))), float(value)))
    if not fits:
        raise ValueError(f"no {kind} in values maps iterations {t[keep][0]:g}..{t[keep][-1]:g} into the reference's "
                         f"{low:g}..{t_ref[-1]:g}")
    best = min(range(len(fits)), key=lambda i: fits[i][0])
    if best in (0, len(fits) - 1):
        raise ConvergenceError(f"the least misfit of the {kind} lies at the edge of the admitted values "
                               f"({fits[best][1]:g}): widen values or move start")
    return PathFit(kind, fits[best][1], fits[best][0], int(keep.sum()))


def first_crossing(t, path, level: float, *, start: float | None = None) -> float | None:
    """The first iteration ``t >= start`` at which ``path`` exceeds ``level``; ``None`` if it never does.

    Parameters
    ----------
    t, path : array_like
        The path at its iterations (increasing).
    level : float
        The level to exceed (strictly).
    start : float, optional
        The first iteration to look at (default ``t[0]``): a path that exceeds the level on its way down
        to a fixed point is read from where it starts to leave.
    """
    t, path = _path("path", t, path)
    level = real("level", level)
    at = np.flatnonzero((path > level) & (t >= (t[0] if start is None else real("start", start))))
    return float(t[at[0]]) if len(at) else None
