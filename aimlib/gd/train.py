r"""Training: ``k`` students from independent initialisations, batched in one array computation.

:func:`train_gd` minimises the square loss of a factorised or direct student
plus weight decay (:mod:`aimlib.gd.objective`) with
Adam or plain gradient descent (:mod:`aimlib.gd.optim`), full batch or in
mini-batches, records the training and test losses and the estimation errors
``(1/d)||S_hat_i - S||_F^2`` and ``(1/d)||mean_i S_hat_i - S||_F^2`` along the
way, and stops a restart once its training loss is below ``tol``; the end of
training is judged by the failure rules of :mod:`aimlib.gd.checks`.

The students of several weight blocks (:mod:`aimlib.gd.blocks`) reuse its pieces:
the data set and objective (:class:`TrainingProblem`; GAMP-RIE's inputs are
:class:`aimlib.amp.problem.Problem`), the recorded curves and the loop options
(:mod:`aimlib.gd.schedule`), the checked inputs (:func:`training_data`,
:func:`teacher_and_test`), the starting point (:func:`initial_parameters`) and the
loop with its verdict (:func:`train_restarts`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host
from ..model import estimation_error
from .._validate import MEMORY_MB, check_memory
from .memory import check_memory_mb, memory_estimate
from .optim import Batches, default_lr, make_optimizer
from ..channels.softmax import check_beta
from .checks import check_finite, check_informative, check_outcome, checked_width, penalty
from .direct import check_matrices, initial_matrices
from .objective import Objective, eigenvalues
from .schedule import Curves, LowestLoss, Schedule, decay_step, make_schedule, stop_converged
from .student import as_batch, check_xy, initial_weights


@dataclass
class GDResult:
    """The outcome of :func:`train_gd` (host arrays; ``k`` = number of restarts).

    Attributes
    ----------
    W : array (k, d, r)
        Final parameters: the weights (factorised student), or ``S_hat``
        itself (direct student, ``r = d``).
    S_hat : array (k, d, d)
        Final student matrices (``W W^T / sqrt(r d)`` for the factorised student).
    S_mean : array (d, d)
        Their average (the estimator that approaches the posterior mean).
    steps : array (m,)
        Step numbers at which the curves were recorded (0 = initialisation).
    train_loss, test_loss : arrays (k, m)
        Training loss (the full-batch square loss) and, if a test set was
        given, the same loss on it (``test_loss`` is ``None`` otherwise).
    mmse_curve : array (k, m) or None
        ``(1/d)||S_hat_i - S||_F^2`` along training (if the teacher ``S`` was given).
    mmse_averaged_curve : array (m,) or None
        ``(1/d)||mean_i S_hat_i - S||_F^2`` along training.
    mmse_single : array (k,) or None
        Final single-run errors.
    mmse_averaged : float or None
        Final error of the averaged estimator.
    n_steps : array (k,)
        Optimisation steps each restart took (fewer than ``steps`` if it met ``tol``).
    converged : array (k,) of bool
        Whether each restart met the early-stopping tolerance (``False``: it
        stopped at the cap of ``steps``, see ``on_max_iter``).
    seconds : float
        Wall-clock time of the training loop.
    eigenvalues : array (k, d)
        Ascending eigenvalues of each final ``S_hat``.
    student : str
        ``'factorised'`` or ``'direct'``.
    weight_decay : float
        The ``lambda`` of the penalty.
    lr : float
        The step of the optimiser (given, or :func:`aimlib.gd.optim.default_lr`), before any decay.
    keep : str
        ``'last'``, or ``'lowest'``: ``W``, ``S_hat``, ``mmse_single`` and ``mmse_averaged`` are
        those of each restart's parameters at its lowest training loss
        (:mod:`aimlib.gd.schedule`).
    mmse_lowest_curve : array (k, m) or None
        With ``keep='lowest'`` and a teacher: at each recorded step ``s``, the error of each
        restart's parameters of lowest training loss up to ``s`` (the run stopped there).
    mmse_lowest_averaged_curve : array (m,) or None
        The error of their average.
    step_lowest : array (k,) or None
        With ``keep='lowest'``: the step of each restart's lowest training loss.
    """

    W: np.ndarray = field(repr=False)
    S_hat: np.ndarray = field(repr=False)
    S_mean: np.ndarray = field(repr=False)
    steps: np.ndarray = field(repr=False)
    train_loss: np.ndarray = field(repr=False)
    test_loss: np.ndarray | None = field(repr=False)
    mmse_curve: np.ndarray | None = field(repr=False)
    mmse_averaged_curve: np.ndarray | None = field(repr=False)
    mmse_single: np.ndarray | None
    mmse_averaged: float | None
    n_steps: np.ndarray
    converged: np.ndarray
    seconds: float
    eigenvalues: np.ndarray = field(default=None, repr=False)
    student: str = "factorised"
    weight_decay: float = 0.0
    lr: float | None = None
    keep: str = "last"
    mmse_lowest_curve: np.ndarray | None = field(default=None, repr=False)
    mmse_lowest_averaged_curve: np.ndarray | None = field(default=None, repr=False)
    step_lowest: np.ndarray | None = None


class TrainingProblem:
    """A data set on one array module and the objective of a batch of students on it."""

    def __init__(self, X, y, beta: float, objective: Objective):
        self.X, self.y, self.beta, self.objective = X, y, beta, objective
        self.n, self.T, self.d = X.shape
        self.X2 = X.reshape(self.n * self.T, self.d)

    def _loss_grad(self, X2, y, W, n: int, want_grad: bool = True):
        """Data loss and gradient of the objective of ``W`` on ``n`` samples (tokens ``X2`` as ``(n T, d)``)."""
        return self.objective.loss_grad(X2, y, W, self.beta, n, self.T, want_grad)

    def loss_grad(self, W, idx=None):
        """Data loss and gradient of the objective on all samples, or on the samples ``idx``."""
        if idx is None:
            return self._loss_grad(self.X2, self.y, W, self.n)
        m = idx.shape[0]
        return self._loss_grad(self.X[idx].reshape(m * self.T, self.d), self.y[idx], W, m)

    def loss(self, W):
        """The ``(k,)`` data losses on all samples."""
        return self._loss_grad(self.X2, self.y, W, self.n, want_grad=False)[0]


def _width_and_restarts(init, rank, rho, restarts, d: int, student: str):
    """``(init as (k, d, r) or None, k, r)`` from ``init``, or from ``rank``/``rho`` and ``restarts``.

    The direct student has ``r = d`` and takes no ``rank``.
    """
    if student == "direct":
        if rank is not None:
            raise ValueError("rank is the width of the factorised student; the direct student "
                             "(student='direct') takes none")
        rank = d
        if init is not None:
            init = check_matrices(init, d)[0]
    if init is None:
        if rank is not None:
            r = v.integer("rank", rank, minimum=1)
        else:
            r = checked_width(d, rho) if rho is not None else max(1, d // 2)
        return None, v.integer("restarts", restarts, minimum=1), r
    W, _ = as_batch(v.finite_array("init", init), "init")
    if W.shape[1] != d:
        raise ValueError(f"init must have shape (k, {d}, r) to match X, got {tuple(W.shape)}")
    if rank is not None and v.integer("rank", rank, minimum=1) != W.shape[2]:
        raise ValueError(f"rank={rank} does not match init of width {W.shape[2]}")
    return W, W.shape[0], W.shape[2]


def initial_parameters(init, k: int, r: int, seed, init_scale: float, X, student: str):
    """The ``(k, d, r)`` starting parameters in the module and dtype of ``X``: ``init``, or drawn from ``seed``."""
    xp = get_array_module(X)
    if init is not None:
        return to_device(init, xp).astype(X.dtype, copy=True)
    backend = "cupy" if xp is not np else "numpy"
    if student == "direct":
        return initial_matrices(X.shape[2], k, seed, scale=init_scale, dtype=X.dtype, backend=backend)
    return initial_weights(X.shape[2], r, k, seed, scale=init_scale, dtype=X.dtype, backend=backend)


def teacher_and_test(S, X_test, y_test, X, layers: int = 1):
    """The teacher and the test set ``(X_test, y_test)`` (or ``None``), on the module of ``X``.

    ``S`` has shape ``(d, d)``, or ``(layers, d, d)`` for ``layers > 1`` teachers.
    """
    _, T, d = X.shape
    xp = get_array_module(X)
    if S is not None:
        shape = (d, d) if layers == 1 else (layers, d, d)
        S = v.finite_array("S", S, ndim=len(shape))
        if S.shape != shape:
            raise ValueError(f"S must have shape {shape}, got {tuple(S.shape)}")
        S = to_device(S, xp).astype(X.dtype)
    if (X_test is None) != (y_test is None):
        raise ValueError("X_test and y_test must be given together")
    if X_test is None:
        return S, None
    X_test, y_test, _ = check_xy(X_test, y_test)
    if X_test.shape[1:] != (T, d):
        raise ValueError(f"X_test must have shape (n_test, {T}, {d}), got {tuple(X_test.shape)}")
    X_test = to_device(X_test, xp).astype(X.dtype, copy=False)
    return S, (X_test, to_device(y_test, xp).astype(X.dtype, copy=False))


def _optimise(problem: TrainingProblem, W, rule, sched: Schedule, curves: Curves, batches, lowest: LowestLoss | None):
    """The training loop; returns the final ``W``, the steps per restart and the converged flags.

    ``lowest`` (``keep='lowest'``) is updated with every full-batch training loss.
    """
    xp = get_array_module(W)
    k = W.shape[0]
    active = xp.ones(k, dtype=bool)
    n_steps = np.zeros(k, dtype=int)
    converged = np.zeros(k, dtype=bool)
    for step in range(sched.steps):
        idx = None if batches is None else batches.next()
        L, g = problem.loss_grad(W, idx)
        check_finite(L, g, step, rule)
        L_full = L if idx is None else None
        recording = step % sched.record_every == 0
        if recording and L_full is None:
            L_full = problem.loss(W)
            check_finite(L_full, None, step, rule)
        if lowest is not None and L_full is not None:
            lowest.update(W, L_full, step)
        if recording:
            curves.record(step, W, L_full, lowest)
        if sched.tol > 0 and L_full is not None:
            active = stop_converged(active, converged, L_full, sched.tol)
            if not bool(active.any()):
                break
        decay_step(rule, step, sched)
        W = rule.step(W, g, active)
        n_steps += to_host(active).astype(int)
    L_final = problem.loss(W)
    check_finite(L_final, None, sched.steps, rule)
    final_step = int(n_steps.max())  # after the last update, or where every restart stopped
    if lowest is not None:
        lowest.update(W, L_final, final_step)
    if not curves.steps or curves.steps[-1] != final_step:
        curves.record(final_step, W, L_final, lowest)
    return W, n_steps, converged


def training_data(X, y):
    """Validate the training set; ``X`` must be floating, ``y`` is cast to its dtype."""
    X, y, _ = check_xy(X, y)
    if not np.issubdtype(X.dtype, np.floating):
        raise TypeError(f"X must have a floating dtype, got {X.dtype}")
    return X, y.astype(X.dtype, copy=False)


def train_restarts(problem: TrainingProblem, W, rule, sched: Schedule, curves: Curves, seed):
    """Run :func:`_optimise` and judge the outcome (:mod:`aimlib.gd.checks`).

    Mini-batches are drawn from ``seed``.  Returns ``(W, n_steps, converged, seconds, lowest)``:
    ``W`` are the last parameters, or with ``sched.keep == 'lowest'`` those of each restart's
    lowest training loss, whose :class:`~aimlib.gd.schedule.LowestLoss` is ``lowest`` (else ``None``).
    """
    check_informative(problem.y, sched.tol, problem.beta)
    batches = None if sched.batch_size is None else Batches(problem.n, sched.batch_size, seed,
                                                            get_array_module(W))
    lowest = LowestLoss() if sched.keep == "lowest" else None
    lr, F0, t0 = rule.lr, penalty(curves.objective, W), time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check_finite
        W, n_steps, converged = _optimise(problem, W, rule, sched, curves, batches, lowest)
    seconds = time.perf_counter() - t0
    F0, F1 = F0 + curves.train[0], penalty(curves.objective, W) + curves.train[-1]
    check_outcome(curves, F0, F1, n_steps, converged, rule, sched, problem.beta)
    rule.lr = lr   # the step before any decay, as given
    return (W if lowest is None else lowest.W), n_steps, converged, seconds, lowest


def _result(W, n_steps, converged, seconds: float, lowest: LowestLoss | None, curves: Curves,
            lr: float | None = None) -> GDResult:
    """Assemble the :class:`GDResult` (host arrays) from the final weights and the curves."""
    objective = curves.objective
    S_hat = objective.matrix(W)
    S_mean = S_hat.mean(axis=0)
    S, has_test = curves.S, curves.test is not None
    with_lowest = lowest is not None and S is not None
    return GDResult(
        W=to_host(W), S_hat=to_host(S_hat), S_mean=to_host(S_mean),
        steps=np.asarray(curves.steps), train_loss=np.array(curves.train).T,
        test_loss=np.array(curves.test_loss).T if has_test else None,
        mmse_curve=np.array(curves.errors).T if S is not None else None,
        mmse_averaged_curve=np.array(curves.averaged) if S is not None else None,
        mmse_single=estimation_error(S_hat, S).astype(float) if S is not None else None,
        mmse_averaged=estimation_error(S_mean, S) if S is not None else None,
        n_steps=n_steps, converged=converged, seconds=seconds, eigenvalues=eigenvalues(S_hat),
        student=objective.student, weight_decay=objective.weight_decay, lr=lr,
        keep="last" if lowest is None else "lowest",
        mmse_lowest_curve=np.array(curves.lowest).T if with_lowest else None,
        mmse_lowest_averaged_curve=np.array(curves.lowest_averaged) if with_lowest else None,
        step_lowest=None if lowest is None else np.array(lowest.step))


def train_gd(X, y, *, rank: int | None = None, rho: float | None = None, beta: float = 1.0,
             restarts: int = 1, seed=None, init=None, init_scale: float = 1.0,
             optimizer: str = "adam", lr: float | None = None, steps: int = 1000,
             adam_betas=(0.9, 0.999), adam_eps: float = 1e-8, batch_size: int | None = None,
             tol: float = 1e-10, S=None, X_test=None, y_test=None, record_every: int = 10,
             memory_mb: float = MEMORY_MB, student: str = "factorised",
             weight_decay: float = 0.0, shift: float = 0.0, on_max_iter: str = "return",
             lr_decay_at: int | None = None, lr_decay: float = 0.1, keep: str = "last") -> GDResult:
    r"""Train ``restarts`` students ``S_hat = W W^T / sqrt(r d)`` (or direct ones) on ``(X, y)`` at once.

    Parameters
    ----------
    X, y : arrays (n, T, d) and (n, T, T)
        Training data (NumPy or CuPy; the computation runs on the GPU if
        either is a CuPy array, in the dtype of ``X``); ``n >= 1``, ``T >= 2``.
    rank, rho : int, float, optional
        Student width ``r`` (default ``round(rho d)``, or ``d // 2`` without
        ``rho``); widths above the teacher's (over-parameterised students) are allowed.
    beta : float
        Inverse temperature of the student's softmax (normally the teacher's), in ``(0, BETA_MAX]``.
    restarts : int
        Number ``k`` of independently initialised students, trained together.
    seed : int, Generator or None
        Initialisation and mini-batch randomness (see :func:`initial_weights`).
    init : array (k, d, r) or (d, r), optional
        Explicit initial weights (then ``restarts``, ``seed`` and ``init_scale`` do not initialise).
    init_scale : float
        Standard deviation of the initial entries of ``W`` (1: a prior sample).
    optimizer : {'adam', 'gd'}
        Adam (``adam_betas``, ``adam_eps``, bias-corrected) or plain gradient descent.
    lr : float, optional
        Learning rate (the paper: Adam, 0.1); by default :func:`aimlib.gd.optim.default_lr`:
        0.1, divided by ``sqrt(r / d)`` for Adam on a factorised student of width ``r > d``
        (Adam's step in ``S_hat`` grows as ``sqrt(r / d)``; at ``rho = 25``, ``d = 20``,
        ``alpha = 0.3``, ``lr = 0.1`` ends at an error of 4.4 where the data-free estimate has 1).
    steps : int
        Maximum number of steps (the paper: 1000).
    batch_size : int, optional
        Mini-batch size (``None``: full batch).  Mini-batches come from a random
        permutation per epoch, shared by all restarts.
    tol : float
        Early stopping: a restart stops (its weights are frozen) as soon as its
        training loss is ``<= tol`` (with mini-batches, checked on the full
        training loss at the recording steps); ``0`` disables it.  The loop ends when
        every restart has stopped.  A ``tol`` that the constant output ``1/T``
        already meets (targets uniform to ``tol``, e.g. a tiny ``beta``) is refused.
    S : array (d, d), optional
        The teacher, to record the estimation error.
    X_test, y_test : arrays, optional
        A test set, to record the test loss.
    record_every : int
        Record the curves every this many steps (and at the last step): the errors at the budgets
        ``0, record_every, 2 record_every, ...`` of one run (``record_every=250``: 250, 500, 1000, ...).
    lr_decay_at, lr_decay : int or None, float
        A step decay: ``lr`` is multiplied by ``lr_decay`` in ``(0, 1]`` before the update of step
        ``lr_decay_at`` in ``[1, steps)`` (``None``: a fixed step; :mod:`aimlib.gd.schedule`).
    keep : {'last', 'lowest'}
        Return each restart's last parameters, or those of its lowest full-batch training loss
        (stopped there; with mini-batches compared at the recording steps); ``'lowest'`` also
        records ``mmse_lowest_curve``, the errors of the run stopped at its lowest loss up to
        each recorded step.
    memory_mb : float
        Budget in MiB for the arrays of the run (:func:`memory_estimate`);
        a larger estimate raises ``ValueError`` naming the parameter to lower.
    student, weight_decay : {'factorised', 'direct'}, float
        The student and ``lambda >= 0`` (:mod:`aimlib.gd.objective`; a direct student has
        no ``rank``, ``init (k, d, d)``); losses and ``tol`` are about the square loss alone.
    shift : float
        ``m >= 0``: the factorised student is ``W W^T / sqrt(r d) - m I``, the known mean of
        the teacher removed (centred teachers: ``m = sqrt(rho)``); 0 for the direct student.
    on_max_iter : {'return', 'warn', 'raise'}
        What a restart that has not reached ``tol`` after ``steps`` steps does
        (:mod:`aimlib.errors`; default: returned, flagged in ``converged``).

    Returns
    -------
    GDResult
        Raises :class:`aimlib.ConvergenceError` if a restart diverges (a NaN or
        infinite loss, a loss above its start, an error far above the data-free
        estimate's) or makes no progress: the rules of :mod:`aimlib.gd.checks`.
    """
    X, y = training_data(X, y)
    n, T, d = X.shape
    objective = Objective(student, weight_decay, shift)
    problem = TrainingProblem(X, y, check_beta(beta), objective)
    sched = make_schedule(steps, tol, record_every, batch_size, n, on_max_iter, lr_decay_at, lr_decay, keep)
    init_scale = v.positive("init_scale", init_scale)
    S, test = teacher_and_test(S, X_test, y_test, X)
    init, k, r = _width_and_restarts(init, rank, rho, restarts, d, objective.student)
    lr = default_lr(optimizer, objective.student, r, d) if lr is None else lr
    rule = make_optimizer(optimizer, lr=lr, adam_betas=adam_betas, adam_eps=adam_eps)
    sizes = dict(restarts=k, n=n, T=T, d=d, rank=r, **({"n_test": test[0].shape[0]} if test else {}))
    check_memory(lambda **s: memory_estimate(**s, itemsize=X.dtype.itemsize), sizes, check_memory_mb(memory_mb))
    W = initial_parameters(init, k, r, seed, init_scale, X, objective.student)
    curves = Curves(None if test is None else TrainingProblem(*test, problem.beta, objective), S, objective)
    return _result(*train_restarts(problem, W, rule, sched, curves, seed), curves, lr)
