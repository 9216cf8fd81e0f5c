"""What the students of several weight blocks share: setup, widths, training and the summary of a run.

The optimiser sees one array ``W = [W_1 | ... | W_L]`` of shape ``(k, d, sum r_l)``
(Adam acts entry by entry, so this is one Adam per block) and the loop,
stopping rule, failure rules and recording of :mod:`aimlib.gd.train` are
reused: the two-layer student of :mod:`aimlib.gd.deep` and the heads of
:mod:`aimlib.gd.heads`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..model import widths
from .checks import checked_width
from .optim import make_optimizer
from .schedule import make_schedule
from .train import TrainingProblem, initial_parameters, teacher_and_test, train_restarts, training_data


@dataclass
class BlockSetup:
    """The checked training options that the students of several weight blocks share."""

    rule: object
    sched: object
    init_scale: float
    restarts: int
    sizes: dict


def block_setup(X, y, S, X_test, y_test, layers: int, *, restarts, optimizer, lr, adam_betas, adam_eps,
                steps, tol, record_every, batch_size, init_scale, on_max_iter="return"):
    """Validate the data, the ``layers`` teachers, the test set and the options of a block student.

    Returns ``(X, y, S, test, BlockSetup)``; ``sizes`` are the array sizes for the memory guard.
    """
    X, y = training_data(X, y)
    n, T, d = X.shape
    rule = make_optimizer(optimizer, lr=lr, adam_betas=adam_betas, adam_eps=adam_eps)
    sched = make_schedule(steps, tol, record_every, batch_size, n, on_max_iter)
    init_scale = v.positive("init_scale", init_scale)
    S, test = teacher_and_test(S, X_test, y_test, X, layers=layers)
    k = v.integer("restarts", restarts, minimum=1)
    sizes = dict(restarts=k, n=n, T=T, d=d, **({"n_test": test[0].shape[0]} if test else {}))
    return X, y, S, test, BlockSetup(rule, sched, init_scale, k, sizes)


def block_fit(X, y, S, test, setup: BlockSetup, width: int, seed, beta: float, objective, curves_class,
              assemble):
    """Draw ``[W_1 | ... ]`` of total ``width``, train it on ``objective`` and ``assemble`` the result."""
    W = initial_parameters(None, setup.restarts, width, seed, setup.init_scale, X, "factorised")
    curves = curves_class(None if test is None else TrainingProblem(*test, beta, objective), S, objective)
    problem = TrainingProblem(X, y, beta, objective)
    W, n_steps, converged, seconds, _ = train_restarts(problem, W, setup.rule, setup.sched, curves,
                                                       seed)   # keep='last': no lowest-loss tracker
    return assemble(W, n_steps, converged, seconds, curves)


def block_widths(ranks, rho, d: int, channel, what: str = "be a pair (r_1, r_2)") -> tuple:
    """One width per index of ``channel``: ``ranks`` (it must ``what``), else ``round(rho_l d)``, else ``d // 2``."""
    L = channel.n_indices
    if ranks is not None:
        if np.ndim(ranks) != 1 or len(ranks) != L:
            raise ValueError(f"ranks must {what}, got {ranks!r}")
        return tuple(v.integer(f"ranks[{i}]", r, minimum=1) for i, r in enumerate(ranks))
    if rho is not None:
        names = [f"rho[{i}]" if L > 1 else "rho" for i in range(L)]
        return tuple(checked_width(d, r, name) for name, r in zip(names, widths(channel, rho)))
    return (max(1, d // 2),) * L


def block_summary(run, data, res, seconds: float, return_result: bool, **extra) -> dict:
    """The dict of a block student's run: the run's parameters, ``extra``, curves and final values per block."""
    out = {"alpha": run.alpha, "d": run.d, "seed": v.seed_label(run.seed), "restarts": run.restarts, "T": run.T,
           "rho": run.rho, "beta": run.beta, "n": data.n, **extra, "seconds": seconds, "steps": res.steps,
           "curve_single": res.mmse_curve, "curve_averaged": res.mmse_averaged_curve,
           "mmse_single": res.mmse_single.mean(axis=0).tolist(), "mmse_single_all": res.mmse_single.tolist(),
           "mmse_averaged": res.mmse_averaged.tolist(), "train_loss": res.train_loss[:, -1].tolist(),
           "test_loss": res.test_loss[:, -1].tolist(), "n_steps": res.n_steps.tolist(),
           "converged": res.converged.tolist()}
    if return_result:
        out.update(result=res, data=data)
    return out
