r"""The training loop's options and records: budget, early stop, recording, learning-rate decay, kept parameters.

:func:`make_schedule` checks the options into a :class:`Schedule`; :class:`Curves` records the
losses and errors along training; :func:`stop_converged` is the early stop at ``tol``.  Two of them say what a run's
budget of ``steps`` does to its endpoint (book, chapter "Gradient descent", section on the
training budget):

* a **step decay** of the learning rate: ``lr`` is multiplied by ``lr_decay`` once, before
  the update of step ``lr_decay_at`` (:func:`decay_step`), so that from then on Adam (or
  gradient descent) moves ``1/lr_decay`` times less per step;
* **stopped at the lowest training loss** (``keep='lowest'``): each restart returns the
  parameters at which its full-batch training loss
  :math:`L(W_t)` was lowest over the steps :math:`t \le` ``steps`` (:class:`LowestLoss`),
  rather than the last ones, as if it had been stopped there.

The recorded curves then hold, at every recording step ``s``, the errors of the current
parameters and those of the parameters of lowest loss up to ``s``: one run gives the fixed
and the stopped estimator for every budget ``s`` at once; :func:`kept_curve` summarises the curve of
the parameters a run keeps over its restarts, and :func:`spread_and_centre` splits it into the spread of
a run about the centre of the runs and the error of that centre.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..model import estimation_error
from ..errors import check_on_max_iter

#: which parameters a restart returns: the last ones, or those of its lowest training loss
KEEPS = ("last", "lowest")


@dataclass(frozen=True)
class Schedule:
    """The checked loop options of :func:`make_schedule`.

    ``steps`` (the budget), ``tol`` (the early stop), ``record_every``, ``batch_size``
    (``None``: full batch), ``on_max_iter`` (the rule at the budget), ``lr_decay_at``
    (``None``: a fixed learning rate) with its factor ``lr_decay``, and ``keep``.
    """

    steps: int
    tol: float
    record_every: int
    batch_size: int | None  # None: full batch
    on_max_iter: str = "return"
    lr_decay_at: int | None = None
    lr_decay: float = 0.1
    keep: str = "last"


def make_schedule(steps, tol, record_every, batch_size, n: int, on_max_iter: str = "return",
                  lr_decay_at=None, lr_decay: float = 0.1, keep: str = "last") -> Schedule:
    """Validate the loop options (a mini-batch of all ``n`` samples is the full batch).

    ``lr_decay_at`` is a step in ``[1, steps)`` or ``None``, ``lr_decay`` a factor in ``(0, 1]``,
    ``keep`` one of :data:`KEEPS`.
    """
    if batch_size is not None:
        batch_size = v.integer("batch_size", batch_size, minimum=1, maximum=n)
    steps = v.integer("steps", steps, minimum=1)
    if lr_decay_at is not None:
        if steps < 2:
            raise ValueError("lr_decay_at needs steps >= 2 (the decay comes after at least one step)")
        lr_decay_at = v.integer("lr_decay_at", lr_decay_at, minimum=1, maximum=steps - 1)
    return Schedule(steps, v.nonnegative("tol", tol), v.integer("record_every", record_every, minimum=1),
                    None if batch_size == n else batch_size, check_on_max_iter(on_max_iter),
                    lr_decay_at, _decay_factor(lr_decay), v.choice("keep", keep, KEEPS))


def _decay_factor(lr_decay) -> float:
    """``lr_decay`` checked to lie in ``(0, 1]``."""
    factor = v.in_range("lr_decay", lr_decay, 0.0, 1.0)
    if factor == 0:
        raise ValueError("lr_decay must be in (0, 1] (a factor of 0 would stop the training), got 0")
    return factor


def decay_step(rule, step: int, sched: Schedule) -> None:
    """Multiply the step of the update ``rule`` by ``lr_decay`` before the update of step ``lr_decay_at``."""
    if sched.lr_decay_at is not None and step == sched.lr_decay_at:
        rule.lr *= sched.lr_decay


class LowestLoss:
    """For each restart, the parameters of the lowest training loss seen so far.

    :meth:`update` is called with the parameters ``W`` (``(k, ...)``) and their full-batch
    training losses ``L`` (``(k,)``); a restart whose loss is strictly below its best so far
    takes a copy of its parameters (the first call takes all of them).  With mini-batches the
    full loss is known, hence compared, only at the recording steps and at the end.
    """

    def __init__(self):
        self.W = self.loss = None
        self.step = None   # (k,) the step of each restart's lowest loss (host ints)

    def update(self, W, L, step: int) -> None:
        """Keep, per restart, ``W`` where ``L`` is below the best so far."""
        xp = get_array_module(W)
        if self.W is None:
            self.W, self.loss = W.copy(), L.copy()
            self.step = [step] * W.shape[0]
            return
        better = L < self.loss
        if not bool(better.any()):
            return
        mask = better.reshape((-1,) + (1,) * (W.ndim - 1))
        self.W = xp.where(mask, W, self.W)
        self.loss = xp.where(better, L, self.loss)
        for i in to_host(xp.nonzero(better)[0]):
            self.step[int(i)] = step


class Curves:
    """The curves recorded along training: losses and, with a teacher ``S``, estimation errors."""

    def __init__(self, test, S, objective):
        """``test``: the test set's :class:`~aimlib.gd.train.TrainingProblem` or ``None``; ``objective``: the
        students'."""
        self.test, self.S, self.objective = test, S, objective
        self.steps, self.train, self.test_loss, self.errors, self.averaged = [], [], [], [], []
        self.lowest, self.lowest_averaged = [], []

    def record(self, step: int, W, train_loss, lowest: LowestLoss | None = None):
        """Append the state after ``step`` updates: ``train_loss`` (given), test loss and errors of ``W``;
        with ``lowest``, also the errors of the parameters of lowest training loss so far."""
        self.steps.append(step)
        if lowest is not None and self.S is not None:
            errors, averaged = self.estimation_errors(lowest.W)
            self.lowest.append(errors)
            self.lowest_averaged.append(averaged)
        self.train.append(to_host(train_loss).copy())
        if self.test is not None:
            self.test_loss.append(to_host(self.test.loss(W)))
        if self.S is not None:
            errors, averaged = self.estimation_errors(W)
            self.errors.append(errors)
            self.averaged.append(averaged)

    def estimation_errors(self, W):
        """``(1/d)||S_hat_i - S||_F^2`` per restart ``(k,)`` and that of the average of the ``S_hat_i``."""
        S_hat = self.objective.matrix(W)
        return estimation_error(S_hat, self.S), estimation_error(S_hat.mean(axis=0), self.S)


def stop_converged(active, converged: np.ndarray, train_loss, tol: float):
    """Stopping rule: freeze the active restarts whose training loss is ``<= tol``; return the new mask."""
    xp = get_array_module(active)
    done = active & (train_loss <= tol)
    if bool(done.any()):
        converged[to_host(xp.nonzero(done)[0])] = True
        active = active & ~done
    return active


def spread_and_centre(single, averaged, k: int):
    r"""The spread ``D/2`` of one run about the centre of the runs, and the error ``E_inf`` of that centre.

    For ``k`` runs on one data set with mean single-run error ``E_1`` (``single``) and error ``E_k``
    of their average (``averaged``), :math:`E_1 = E_\infty + D/2` and :math:`E_k = E_\infty + D/(2k)`
    (book, chapter "Gradient descent", the exercise on the spread), so

    .. math::

        D/2 = \frac{k}{k-1}\,(E_1 - E_k), \qquad E_\infty = \frac{k E_k - E_1}{k-1}.

    Elementwise on arrays; ``k >= 2``.
    """
    k = v.integer("k", k, minimum=2)
    single, averaged = np.asarray(single, dtype=float), np.asarray(averaged, dtype=float)
    return k / (k - 1) * (single - averaged), (k * averaged - single) / (k - 1)


def kept_curve(res) -> dict | None:
    """The recorded curve of the parameters a run keeps, as plain lists over the recorded steps.

    ``res`` is a :class:`~aimlib.gd.train.GDResult` with a teacher.  For ``keep='last'`` the errors
    are those of the current parameters at each recorded step ``s``; for ``keep='lowest'`` those of
    each restart's parameters of lowest training loss up to ``s`` (the run stopped there).  Keys:
    ``step``, ``single`` and ``single_std`` (mean and standard deviation, ``ddof=1``, over the ``k``
    restarts of ``(1/d)||S_hat_i - S||_F^2``), ``averaged`` (the error of their average) and
    ``train_loss`` (the mean training loss of the current parameters).  ``None`` without a teacher.
    """
    lowest = res.keep == "lowest"
    single = res.mmse_lowest_curve if lowest else res.mmse_curve
    averaged = res.mmse_lowest_averaged_curve if lowest else res.mmse_averaged_curve
    if single is None:
        return None
    std = single.std(axis=0, ddof=1) if single.shape[0] > 1 else np.zeros(single.shape[1])
    return {"step": [int(s) for s in res.steps], "single": single.mean(axis=0).tolist(),
            "single_std": std.tolist(), "averaged": np.asarray(averaged, dtype=float).tolist(),
            "train_loss": res.train_loss.mean(axis=0).tolist()}
