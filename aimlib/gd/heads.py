r"""Gradient descent on a student of ``H`` averaged softmax heads (book, chapter "Several heads").

The student has the teacher's architecture, :class:`~aimlib.channels.heads.MultiHeadSoftmax`:
``S_hat_h = W_h W_h^T / sqrt(r_h d)`` (``h = 1..H``), the heads' indices
``h_hat_h`` of the tokens (:mod:`aimlib.gd.student`) and

.. math::

    \hat y = \frac1H \sum_h \mathrm{softmax}(\beta \hat h_h), \qquad
    L = \frac{1}{2n} \sum_\mu \|\hat y^\mu - y^\mu\|_F^2, \qquad
    \frac{\partial L}{\partial \hat h_h} = \frac1H\, \beta\, Y_h \odot
        \Bigl(E - \sum_c E_{ac} Y_{h,ac}\Bigr),

with ``Y_h = softmax(beta h_hat_h)`` and ``E = (y_hat - y)/n``; each head's
weight gradient is :func:`~aimlib.gd.student.index_grad`.  The optimiser sees one
array ``W = [W_1 | ... | W_H]``, and the loop of :mod:`aimlib.gd.train` is reused.

The heads are exchangeable, so a student can learn the teachers in any order:
the error of a restart is that of its heads matched to the teachers by the
permutation that minimises the summed error (:func:`matched_errors`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..channels import row_softmax
from ..channels.heads import MultiHeadSoftmax
from ..channels.softmax import check_beta
from ..model import estimation_error, widths
from .._validate import MEMORY_MB, check_memory
from .memory import check_memory_mb, memory_estimate
from .blocks import block_fit, block_setup, block_summary, block_widths
from .run import check_run, check_run_memory, sample_and_train
from .student import batch_indices, gram, index_grad, softmax_backward, square_loss
from .schedule import Curves
from .train import GDResult

MAX_HEADS = 6   # the matching tries all H! permutations


def heads_loss_grad(X2, y, W, blocks, beta: float, n: int, T: int, want_grad: bool = True):
    """Square loss ``(k,)`` and gradient ``(k, d, sum r_h)`` of ``k`` students ``W``, without checks.

    ``blocks`` are the column slices of the heads in ``W``; ``grad`` is ``None``
    if ``want_grad`` is false.
    """
    xp = get_array_module(X2, W)
    heads = [batch_indices(X2, W[..., b], n, T) for b in blocks]
    Ys = [row_softmax(beta * h) for _, h in heads]
    L, E = square_loss(sum(Ys) / len(blocks), y, n)
    if not want_grad:
        return L, None
    E = E / len(blocks)
    return L, xp.concatenate([index_grad(X2, W[..., b], P, softmax_backward(Y, E, beta))
                              for (P, _), Y, b in zip(heads, Ys, blocks)], axis=2)


def matched_errors(S_hats, S):
    r"""Each head's error ``(1/d)||S_hat_h - S_{pi(h)}||_F^2`` under the best relabelling ``pi`` of each restart.

    Parameters
    ----------
    S_hats : sequence of ``H`` arrays ``(k, d, d)``
        The heads of ``k`` students.
    S : array ``(H, d, d)``
        The teachers.

    Returns
    -------
    single : array ``(k, H)``
        Errors in the teachers' order, for the permutation minimising their sum.
    averaged : array ``(H,)``
        Errors of the restarts' average, each restart's heads put in the teachers' order first.
    perm : array ``(k, H)`` of int
        ``perm[i, h]`` is the student head matched to teacher ``h`` in restart ``i``.
    """
    H = len(S_hats)
    cost = np.stack([np.stack([estimation_error(S_hats[i], S[j]) for j in range(H)], axis=1)
                     for i in range(H)], axis=1)                          # (k, student i, teacher j)
    perms = np.array(list(itertools.permutations(range(H))))               # perms[p, j] = student of j
    totals = cost[:, perms, np.arange(H)].sum(axis=2)                       # (k, H!)
    perm = perms[np.argmin(totals, axis=1)]
    single = np.take_along_axis(cost, perm[:, None, :], axis=1)[:, 0]       # cost[i, perm[i, j], j]
    aligned = [sum(S_hats[p][i] for i, p in enumerate(perm[:, j])) / perm.shape[0] for j in range(H)]
    averaged = np.array([estimation_error(aligned[j], S[j]) for j in range(H)])
    return single, averaged, perm


class _HeadsObjective:
    """The square loss of the ``H``-head student, no weight decay (the interface of ``gd.objective.Objective``)."""

    student, weight_decay = "heads", 0.0

    def __init__(self, blocks):
        self.blocks = blocks

    def loss_grad(self, X2, y, W, beta, n, T, want_grad=True):
        """``(loss (k,), gradient (k, d, sum r_h))`` of :func:`heads_loss_grad`."""
        return heads_loss_grad(X2, y, W, self.blocks, beta, n, T, want_grad)

    def matrices(self, W):
        """The heads' ``S_hat_h``, each ``(k, d, d)``."""
        return [gram(W[..., b]) for b in self.blocks]


class _HeadsCurves(Curves):
    """The recorded curves with matched per-head errors: ``(k, H)`` per restart, ``(H,)`` averaged."""

    perm = None   # the matching of the last recorded step (the final weights: training ends with a record)

    def estimation_errors(self, W):
        single, averaged, self.perm = matched_errors(self.objective.matrices(W), self.S)
        return single, averaged


@dataclass
class HeadsGDResult(GDResult):
    """The outcome of :func:`train_heads_gd`: a :class:`~aimlib.gd.GDResult` with one error per head.

    ``k`` restarts, ``H`` heads, ``m`` recorded steps; the fields that differ from one head:

    Attributes
    ----------
    W : array (k, d, sum r_h)
        Final weights ``[W_1 | ... | W_H]``; ``ranks`` are the heads' widths.
    S_hat : array (k, H, d, d)
        Final ``S_hat_h`` in the teachers' order (``perm``) when a teacher was given.
    mmse_curve : array (k, H, m) or None
        Matched error of each head (:func:`matched_errors`) along training.
    mmse_averaged_curve : array (H, m) or None
    mmse_single, mmse_averaged : arrays (k, H) and (H,), or None
    perm : array (k, H) or None
        Student head matched to each teacher, at the end.
    """

    ranks: tuple = ()
    perm: np.ndarray | None = None


def _heads_result(W, n_steps, converged, seconds: float, curves: _HeadsCurves) -> HeadsGDResult:
    """Assemble the :class:`HeadsGDResult` from the final weights and the curves."""
    blocks, has_S = curves.objective.blocks, curves.S is not None
    S_hat = np.stack([to_host(M) for M in curves.objective.matrices(W)], axis=1)   # (k, H, d, d)
    perm = curves.perm
    if perm is not None:
        S_hat = np.take_along_axis(S_hat, perm[:, :, None, None], axis=1)
    errors = np.moveaxis(np.array(curves.errors), 0, -1) if has_S else None
    averaged = np.array(curves.averaged).T if has_S else None
    return HeadsGDResult(
        W=to_host(W), ranks=tuple(int(b.stop - b.start) for b in blocks), perm=perm, S_hat=S_hat,
        S_mean=S_hat.mean(axis=0), steps=np.asarray(curves.steps), train_loss=np.array(curves.train).T,
        test_loss=np.array(curves.test_loss).T if curves.test is not None else None,
        mmse_curve=errors, mmse_averaged_curve=averaged,
        mmse_single=None if errors is None else errors[..., -1],
        mmse_averaged=None if averaged is None else averaged[:, -1],
        n_steps=n_steps, converged=converged, seconds=seconds, student="heads")


def heads_memory_estimate(n: int, T: int, d: int, ranks, restarts: int = 1, *, n_test: int = 0,
                          itemsize: int = 8) -> int:
    """Bytes of training ``restarts`` students of ``H = len(ranks)`` heads.

    :func:`~aimlib.gd.memory.memory_estimate` at width ``sum r_h``, plus per
    head the indices and softmax of every sample and restart (``2 k T^2`` each),
    ``S_hat_h`` per restart (``k d^2``) and a float64 teacher (``2 d^2``).
    """
    H = len(ranks)
    base = memory_estimate(n, T, d, sum(ranks), restarts, n_test=n_test, itemsize=itemsize)
    return base + H * (itemsize * (2 * restarts * max(n, n_test) * T * T + restarts * d * d) + 16 * d * d)


def train_heads_gd(X, y, *, heads: int = 2, beta: float = 1.0, ranks=None, rho=None, restarts: int = 1,
                   seed=None, init_scale: float = 1.0, optimizer: str = "adam", lr: float = 0.1,
                   steps: int = 1000, adam_betas=(0.9, 0.999), adam_eps: float = 1e-8,
                   batch_size: int | None = None, tol: float = 1e-10, S=None, X_test=None, y_test=None,
                   record_every: int = 10, memory_mb: float = MEMORY_MB,
                   on_max_iter: str = "return") -> HeadsGDResult:
    r"""Train ``restarts`` students of ``heads`` averaged softmax heads on ``(X, y)`` at once.

    The options are those of :func:`~aimlib.gd.train_gd` (same meaning, same
    defaults), except:

    Parameters
    ----------
    heads : int
        Number ``H`` of heads, ``1 <= H <= MAX_HEADS``.
    ranks : sequence of ``H`` ints, optional
        The heads' widths; by default ``round(rho_h d)`` for ``rho`` (one ratio
        per head), or ``d // 2`` each.
    seed : int, Generator or None
        Initial weights: ``[W_1 | ... | W_H]`` of restart ``i`` is
        :func:`~aimlib.gd.initial_weights` of width ``sum r_h``.
    S : array (H, d, d), optional
        The teachers, to record the matched error of each head.

    Returns
    -------
    HeadsGDResult
        Raises :class:`aimlib.ConvergenceError` on divergence or no progress, and
        applies ``on_max_iter`` at the cap (:mod:`aimlib.gd.checks`, as :func:`~aimlib.gd.train_gd`).
    """
    H = v.integer("heads", heads, minimum=1)
    if H > MAX_HEADS:
        raise ValueError(f"heads must be in [1, {MAX_HEADS}] (the matching tries all H! orders), got {heads!r}")
    X, y, S, test, setup = block_setup(X, y, S, X_test, y_test, H, restarts=restarts, optimizer=optimizer,
                                       lr=lr, adam_betas=adam_betas, adam_eps=adam_eps, steps=steps, tol=tol,
                                       record_every=record_every, batch_size=batch_size, init_scale=init_scale,
                                       on_max_iter=on_max_iter)
    S = S[None] if S is not None and H == 1 else S
    r = block_widths(ranks, rho, X.shape[2], MultiHeadSoftmax(H), f"hold {H} widths (one per head)")
    check_memory(lambda **s: heads_memory_estimate(**s, ranks=r, itemsize=X.dtype.itemsize),
                 setup.sizes, check_memory_mb(memory_mb))
    edges = np.cumsum((0,) + r)
    objective = _HeadsObjective([slice(a, b) for a, b in zip(edges[:-1], edges[1:])])
    return block_fit(X, y, S, test, setup, sum(r), seed, check_beta(beta), objective, _HeadsCurves,
                     _heads_result)


def run_heads_gd(T: int, rho, alpha: float, d: int, heads: int = 2, seed=None, *, restarts: int = 1,
                 backend: str | None = None, dtype=None, beta: float = 1.0, n_test: int | None = None,
                 return_result: bool = False, memory_mb: float = MEMORY_MB, **options) -> dict:
    r"""Sample an ``H``-head data set (:class:`~aimlib.channels.heads.MultiHeadSoftmax`) and train ``H``-head students.

    Seeds, test set, ``dtype``, ``backend`` and the memory guard as in
    :func:`~aimlib.gd.run_gd`; ``rho`` holds one width ratio per head (a single
    number is used for every head); ``options`` go to :func:`train_heads_gd`.

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``restarts``, ``T``, ``rho``, ``heads``, ``beta``,
        ``n``, ``ranks``, ``seconds``, ``steps``; ``curve_single`` ``(k, H, m)`` and
        ``curve_averaged`` ``(H, m)`` (matched errors); the final ``mmse_single``
        (per head, mean over restarts), ``mmse_single_all``, ``mmse_averaged``,
        ``train_loss``, ``test_loss``, ``n_steps``, ``converged``.  With ``return_result``, also
        ``result`` (:class:`HeadsGDResult`) and ``data``.
    """
    H = v.integer("heads", heads, minimum=1)
    channel = MultiHeadSoftmax(H, beta)
    if np.ndim(rho) == 0 and H > 1:
        rho = (rho,) * H
    run = check_run(T, rho, alpha, d, restarts, seed, beta, dtype, n_test, memory_mb, options,
                    check_rho=lambda r: widths(channel, r) if H > 1 else widths(channel, r)[0],
                    caller="run_heads_gd")
    ranks = block_widths(options.get("ranks"), run.rho, d, channel, f"hold {H} widths (one per head)")
    itemsize = np.dtype(run.dtype).itemsize
    check_run_memory(run, lambda n, T, d, restarts, n_test: heads_memory_estimate(
        n, T, d, ranks, restarts, n_test=n_test, itemsize=itemsize))
    options.setdefault("rho", run.rho)
    data, res, seconds = sample_and_train(run, channel, partial(train_heads_gd, heads=H, beta=run.beta),
                                          backend, options)
    return block_summary(run, data, res, seconds, return_result, heads=H, ranks=res.ranks)
