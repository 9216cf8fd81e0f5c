r"""When gradient descent has failed, and the inputs it refuses: the rule of :mod:`aimlib.errors` for GD.

Gradient descent runs a budget of ``steps`` updates and stops a restart early
once its training loss is ``<= tol``.  Every student (one layer, two layers,
heads) is judged by the same rules, restart by restart, when training ends.
``F`` is the objective that the steps minimise (the training square loss plus
the weight-decay penalty), ``F_0`` its value at the initialisation and ``F_1``
at the end.

Failures, always a :class:`~aimlib.errors.ConvergenceError` (exit status 1 on the command line):

* **diverged**: a loss or gradient became NaN or infinite (checked at every
  step); or ``F_1 > F_0`` (the steps made the objective worse than the random
  start); or, with the teacher ``S`` given, a final estimation error above
  :data:`DIVERGED_ERROR` times the error of the data-free estimate
  ``(Tr S / d) I`` (the prior mean ``sqrt(rho) I``, error ``1`` in the
  book's normalisation).  A random start (a prior sample) has error about
  ``2``; students that fit the data without finding the teacher stay within a
  few units (one layer: at most 4 in the book's runs; the two-layer students of
  the chapter "Deep attention: which layer is learned first": up to 6 at ``d = 30``, a mean of 8 over four
  restarts at ``d = 70``).  Errors of 50 and more come from steps too large
  for the scale of the indices: at ``rho = 100`` (``d = 20``, ``alpha = 0.3``)
  Adam at ``lr = 0.1`` doubles ``Tr S_hat^2 / d`` and ends at error 58 after
  50 steps (``rho = 10^4``: 17978), at ``lr = 0.01`` at 1.7 after 500 steps.
  Lower ``lr`` (the default, :func:`aimlib.gd.optim.default_lr`, is ``0.01`` there).
* **no progress**: a restart that did not reach ``tol`` and whose objective
  is not below its start, ``F_1 = F_0`` in the working precision: e.g. a
  softmax saturated at a huge ``beta`` has an exactly zero gradient, and no
  number of steps moves it.  Any decrease counts as progress, so that a
  request for one small step (``steps=1``, a small ``lr``) is honoured; a
  relative margin would refuse it.  Increase ``lr`` or ``steps``, or bring
  ``beta`` nearer 1.

One failed restart fails the run: the mean single-run error and the error of
the restarts' average both contain every restart, and dropping one would
silently change ``restarts``.  The message names the restart.

The iteration cap: a restart that has not reached ``tol`` after ``steps``
steps follows ``on_max_iter`` (:func:`aimlib.errors.max_iter_reached`),
``'return'`` by default because a GD run is a fixed budget of steps (the
paper: 1000 Adam steps), ``tol`` only an early stop; ``'raise'`` and
``'warn'`` make the cap a failure or a warning.  Either way
``GDResult.converged`` flags the restarts that reached ``tol``.

Not a failure: a run whose steps lowered the objective but whose estimate is worse than the
data-free one (:func:`data_free_errors`) is a result, an honest one; :func:`aimlib.gd.run_gd`
flags it (``worse_than_data_free``) and the command line warns.

The advice of the messages names the parameters as the caller spells them
(:data:`ADVICE_NAMES`): ``lr`` for the functions, ``--lr`` on the command line.

Refused inputs (``ValueError``, exit status 2), rather than values changed in silence:

* targets within ``tol`` of uniform: if the constant output ``1/T`` (every
  student at ``beta -> 0``) already has training loss ``<= tol``, the data
  cannot tell the students apart at this ``tol``, and training would stop at
  step 0 (at ``beta = 1e-30`` the softmax of the indices is exactly ``1/T``
  in floating point).  Raise ``beta`` or lower ``tol``;
* ``n = round(alpha d^2) >= 1`` samples and widths ``r = round(rho d) >= 1``
  (:func:`aimlib._validate.sample_count`, :func:`checked_width`), not clamped to 1.
"""
from __future__ import annotations

import contextvars
import re

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..errors import ConvergenceError, max_iter_reached

#: a final estimation error above this many times that of ``(Tr S/d) I`` is divergence
DIVERGED_ERROR = 20.0

#: how the advice of a message names a parameter: ``None``, as the keyword arguments of the
#: functions (``lr``); or a mapping to the options of a command (``{'lr': '--lr'}``, set by
#: :mod:`aimlib.cli` for ``gd``), where a parameter missing from it is left out of the advice
ADVICE_NAMES: contextvars.ContextVar = contextvars.ContextVar("ADVICE_NAMES", default=None)


def advice(*templates: str, sep: str = " or ") -> str:
    """The advice of a message: the templates (``'lower {lr}'``) whose parameters the caller can set,
    each parameter named as the caller spells it (:data:`ADVICE_NAMES`), joined by ``sep``."""
    names = ADVICE_NAMES.get()
    shown = []
    for template in templates:
        params = re.findall(r"\{(\w+)\}", template)
        if names is None or all(p in names for p in params):
            shown.append(template.format(**{p: p if names is None else names[p] for p in params}))
    return sep.join(shown)


def checked_width(d: int, rho: float, name: str = "rho") -> int:
    """The width ``r = round(rho d)``; refuse a ``rho`` that gives ``r = 0`` (it is not raised to one)."""
    r = int(round(v.rho(rho) * d))
    if r < 1:
        raise ValueError(f"{name} must give a width r = round({name} d) >= 1: "
                         f"{name} > {0.5 / d:.4g} at d = {d}, got {rho!r}")
    return r


def check_informative(y, tol: float, beta: float) -> None:
    """Refuse targets whose distance to the uniform output ``1/T`` is within ``tol`` (see the module)."""
    n, T = y.shape[0], y.shape[-1]
    uniform = float(((y - 1.0 / T) ** 2).sum()) / (2 * n)
    if uniform <= tol:
        raise ValueError(f"the targets carry no information at tol={tol:g}: the constant output 1/T already "
                         f"has training loss {uniform:.3g} <= tol, so every student would stop at step 0; "
                         f"beta={beta:g} is too small for the indices (or tol too large): "
                         f"{advice('raise {beta}', 'lower {tol}')}")


def check_finite(L, g, step: int, rule) -> None:
    """Raise :class:`ConvergenceError` if a loss (or the gradient ``g``, if given) is not finite."""
    xp = get_array_module(L)
    where = f"at step {step} (optimizer={rule.name!r}, lr={rule.lr:g}); {advice('lower {lr}')}"
    bad = ~xp.isfinite(L)
    if bool(bad.any()):
        i = int(to_host(xp.nonzero(bad)[0])[0])
        raise ConvergenceError(f"gradient descent diverged: the training loss of restart {i} is {float(L[i])} {where}")
    if g is not None and not bool(xp.all(xp.isfinite(g))):
        raise ConvergenceError(f"gradient descent diverged: non-finite gradient {where}")


def penalty(objective, W) -> np.ndarray:
    """The weight-decay penalty ``(k,)`` of ``W`` on the host (zeros without weight decay)."""
    if objective.weight_decay > 0:
        return np.asarray(to_host(objective.penalty(W)), dtype=float)
    return np.zeros(W.shape[0])


def data_free_errors(S) -> np.ndarray:
    """Error ``(1/d)||S_l - (Tr S_l/d) I||_F^2`` of the data-free estimate, per teacher ``(L,)``.

    About 1 (the prior mean ``sqrt(rho) I`` in the book's normalisation): ``1 + 1/d`` on average
    for a Wishart teacher."""
    S = np.asarray(to_host(S), dtype=float)
    S = S[None] if S.ndim == 2 else S
    d = S.shape[-1]
    tr = np.trace(S, axis1=-2, axis2=-1)
    return ((S * S).sum(axis=(-2, -1)) - tr * tr / d) / d


def check_outcome(curves, F0, F1, n_steps, converged, rule, sched, beta: float) -> None:
    """Apply the rules of the module to the end of training; raise or warn, else return.

    ``curves`` holds the recorded losses and errors, ``F0``/``F1`` the
    objectives ``(k,)`` at the start and at the end, ``n_steps`` and
    ``converged`` the steps and flags per restart.
    """
    k = len(converged)
    how = f"(optimizer={rule.name!r}, lr={rule.lr:g}, beta={beta:g})"
    for i in np.flatnonzero(~converged):
        what = (f"the training loss of restart {i} (of {k}) went from {F0[i]:.4g} to {F1[i]:.4g} "
                f"in {n_steps[i]} steps {how}")
        if F1[i] > F0[i]:
            raise ConvergenceError(f"gradient descent diverged: {what}; {advice('lower {lr}')}")
        if F1[i] >= F0[i]:
            raise ConvergenceError(f"gradient descent made no progress: {what}; "
                                   f"{advice('increase {lr} or {steps}', 'bring {beta} nearer 1', sep=', or ')} "
                                   f"(a saturated softmax has no gradient)")
    if curves.S is not None:
        errors = np.asarray(curves.errors[-1], dtype=float).reshape(k, -1)
        trivial = data_free_errors(curves.S)
        bad = np.argwhere(errors > DIVERGED_ERROR * trivial)
        if len(bad):
            i, l = bad[0]
            raise ConvergenceError(
                f"gradient descent diverged: the estimation error of restart {i} (of {k}) is "
                f"{errors[i, l]:.4g}, above {DIVERGED_ERROR:g} times that of the data-free estimate "
                f"(Tr S/d) I ({trivial[l]:.4g}) {how}; {advice('lower {lr}')}")
    if not converged.all():
        max_iter_reached(f"gradient descent: {int((~converged).sum())} of {k} restarts did not reach "
                         f"training loss tol={sched.tol:g} within steps={sched.steps}", sched.on_max_iter)
