r"""Gradient descent on a two-layer softmax student (book, chapter "Deep attention: which layer is learned first").

The student has the teacher's architecture, :class:`~aimlib.channels.DeepAttention`
with softmax layers: ``S_hat_l = W_l W_l^T / sqrt(r_l d)`` (``l = 1, 2``), the
indices ``h_hat_l`` of the original tokens (:mod:`aimlib.gd.student`) and

.. math::

    \hat y = \mathrm{softmax}(\beta M \hat h_2 M^\top), \quad
    M = c I + \mathrm{softmax}(\beta \hat h_1), \quad
    L = \frac{1}{2n} \sum_\mu \|\hat y^\mu - y^\mu\|_F^2 .

The output is the channel's own forward map (``DeepAttention.clean``), so the
network is defined once.  Both matrices are trained jointly: the optimiser sees
one array ``W = [W_1 | W_2]`` of shape ``(k, d, r_1 + r_2)`` (Adam acts entry by
entry, so this is one Adam per layer), and the loop, stopping rule and
recording of :mod:`aimlib.gd.train` are reused, through the ``block_*`` helpers
of :mod:`aimlib.gd.blocks` (shared with the heads of :mod:`aimlib.gd.heads`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_host
from ..channels import DeepAttention, row_softmax
from ..model import estimation_error, widths
from .._validate import MEMORY_MB, check_memory
from .memory import check_memory_mb, memory_estimate
from .blocks import block_fit, block_setup, block_summary, block_widths
from .run import check_run, check_run_memory, known_means, sample_and_train
from .student import (as_batch, batch_indices, check_xy, common_dtype, identity_indices, index_grad,
                      shifted_gram, softmax_backward, square_loss)
from .schedule import Curves
from .train import GDResult


def deep_channel(c: float = 0.5, beta: float = 1.0) -> DeepAttention:
    """The two-softmax-layer network of residual strength ``c``: ``DeepAttention(c, 'softmax', beta)``."""
    return DeepAttention(c, "softmax", beta)


def _forward(channel: DeepAttention, X2, W3, r1: int, n: int, T: int, shifts=(0.0, 0.0)):
    """``(P_1, h_1), (P_2, h_2)`` of ``W3 = [W_1 | W_2]`` and the output ``y_hat`` ``(k, n, T, T)``;
    layer ``l``'s student is ``W_l W_l^T/sqrt(r_l d) - shifts[l] I`` (:func:`~aimlib.gd.student.identity_indices`)."""
    xp = get_array_module(X2, W3)
    layers = [batch_indices(X2, W, n, T) for W in (W3[..., :r1], W3[..., r1:])]
    if any(shifts):
        hI = identity_indices(X2, n, T)
        layers = [(P, h - m * hI) for (P, h), m in zip(layers, shifts)]
    h = xp.stack([layers[0][1], layers[1][1]], axis=2).reshape(-1, 2, T, T)
    return layers, channel.clean(h).reshape(W3.shape[0], n, T, T)


def deep_loss_grad(X2, y, W3, r1: int, channel: DeepAttention, n: int, T: int, want_grad: bool = True,
                   shifts=(0.0, 0.0)):
    r"""Square loss and gradient of a batch of two-layer students, without checks.

    ``W3 = [W_1 | W_2]`` has shape ``(k, d, r_1 + r_2)``.  With ``G = dL/dH``
    (:func:`~aimlib.gd.student.softmax_backward` of ``E = (y_hat - y)/n``) at
    ``H = M h_2 M^T``, ``Y_1 = softmax(beta h_1)`` and ``M = c I + Y_1``,

    .. math::

        \frac{\partial L}{\partial h_2} = M^\top G M, \qquad
        \frac{\partial L}{\partial M} = G M h_2 + G^\top M h_2, \qquad
        \frac{\partial L}{\partial h_1} = \beta Y_1 \odot
            \Bigl(\frac{\partial L}{\partial M} - \sum_c \frac{\partial L}{\partial M_{ac}} Y_{1,ac}\Bigr),

    and each layer's gradient is :func:`~aimlib.gd.student.index_grad` of its
    ``dL/dh_l``: ``O(n T d r_l)`` per layer.  ``shifts``: the known means removed from the
    students (centred teachers, :func:`_forward`).  Returns ``(L (k,), grad (k, d, r_1 + r_2))``
    (``grad`` is ``None`` if ``want_grad`` is false).
    """
    xp = get_array_module(X2, W3)
    ((P1, h1), (P2, h2)), yh = _forward(channel, X2, W3, r1, n, T, shifts)
    L, E = square_loss(yh, y, n)
    if not want_grad:
        return L, None
    beta = channel.beta
    G = softmax_backward(yh, E, beta)
    Y1 = row_softmax(beta * h1)
    M = channel.c * xp.eye(T, dtype=Y1.dtype) + Y1
    G2 = xp.swapaxes(M, 2, 3) @ G @ M
    dM = (G + xp.swapaxes(G, 2, 3)) @ M @ h2
    G1 = softmax_backward(Y1, dM, beta)
    grads = (index_grad(X2, W3[..., :r1], P1, G1), index_grad(X2, W3[..., r1:], P2, G2))
    return L, xp.concatenate(grads, axis=2)


def _pair(X, W1, W2):
    """Validate the weights against ``X``; return ``(X, [W_1 | W_2] as (k, d, r_1 + r_2), r_1, squeeze)``."""
    X, _, W1 = check_xy(X, None, W1)
    X, _, W2 = check_xy(X, None, W2)
    (A, squeeze), (B, _) = as_batch(W1, "W1"), as_batch(W2, "W2")
    if W1.ndim != W2.ndim or A.shape[0] != B.shape[0]:
        raise ValueError(f"W1 and W2 must have the same number of restarts, got shapes "
                         f"{tuple(W1.shape)} and {tuple(W2.shape)}")
    xp = get_array_module(A, B)
    return X, xp.concatenate([A, B], axis=2), A.shape[2], squeeze


def deep_student_indices(X, W1, W2):
    """Both layers' indices of the original tokens: ``(n, 2, T, T)``, or ``(k, n, 2, T, T)`` for batched weights.

    Equal to :func:`aimlib.model.attention_indices` of ``X`` and the stacked
    ``S_hat_l = W_l W_l^T / sqrt(r_l d)``.
    """
    X, W3, r1, squeeze = _pair(X, W1, W2)
    xp = get_array_module(X, W3)
    n, T, _ = X.shape
    X2 = X.reshape(n * T, -1)
    h = xp.stack([batch_indices(X2, W, n, T)[1] for W in (W3[..., :r1], W3[..., r1:])], axis=2)
    return h[0] if squeeze else h


def deep_student_output(X, W1, W2, c: float = 0.5, beta: float = 1.0):
    """The student's prediction ``DeepAttention(c, 'softmax', beta).clean`` of :func:`deep_student_indices`."""
    channel = deep_channel(c, beta)
    h = deep_student_indices(X, W1, W2)
    return channel.clean(h.reshape(-1, *h.shape[-3:])).reshape(h.shape[:-3] + h.shape[-2:])


def _checked_loss_grad(X, y, W1, W2, c, beta, want_grad):
    """Validate, then :func:`deep_loss_grad`; split the gradient into the layers'."""
    channel = deep_channel(c, beta)
    X, y, _ = check_xy(X, y)
    X, W3, r1, squeeze = _pair(X, W1, W2)
    n, T, _ = X.shape
    X, y, W3 = common_dtype(X, y, W3)
    L, g = deep_loss_grad(X.reshape(n * T, -1), y, W3, r1, channel, n, T, want_grad)
    grads = (None, None) if g is None else (g[..., :r1], g[..., r1:])
    if squeeze:
        return float(L[0]), *(None if x is None else x[0] for x in grads)
    return L, *grads


def deep_loss_and_grad(X, y, W1, W2, c: float = 0.5, beta: float = 1.0):
    r"""Square loss ``(1/2n) sum_mu ||y_hat^mu - y^mu||_F^2`` of the two-layer student and its gradients.

    Parameters
    ----------
    X, y : arrays (n, T, d) and (n, T, T)
        Tokens and targets.
    W1, W2 : arrays (d, r_1) and (d, r_2), or (k, d, r_l) for ``k`` students at once
        The layers' weights.
    c, beta : float
        Residual strength and inverse temperature of both softmax layers.

    Returns
    -------
    loss : float or array (k,)
    grad1, grad2 : arrays of the shapes of ``W1`` and ``W2``
    """
    return _checked_loss_grad(X, y, W1, W2, c, beta, True)


def deep_loss(X, y, W1, W2, c: float = 0.5, beta: float = 1.0):
    """The square loss alone (see :func:`deep_loss_and_grad`)."""
    return _checked_loss_grad(X, y, W1, W2, c, beta, False)[0]


def deep_memory_estimate(n: int, T: int, d: int, ranks, restarts: int = 1, *, n_test: int = 0,
                         itemsize: int = 8) -> int:
    """Bytes of the arrays of training ``restarts`` two-layer students of widths ``ranks = (r_1, r_2)``.

    :func:`~aimlib.gd.memory.memory_estimate` at width ``r_1 + r_2`` (weights,
    ``X W``, data, draws), plus the second layer's indices of the data
    (``n T^2``), ``16 T^2`` more entries per restart and sample (the mixing
    ``A``, ``H`` and their gradients), the second ``S_hat`` per restart
    (``3 k d^2``) and the second float64 teacher (``2 d^2``).
    """
    r1, r2 = (v.integer(f"ranks[{i}]", r, minimum=1) for i, r in enumerate(ranks))
    base = memory_estimate(n, T, d, r1 + r2, restarts, n_test=n_test, itemsize=itemsize)
    m = max(n, n_test)
    return base + itemsize * (n * T * T + 16 * restarts * m * T * T + 3 * restarts * d * d) + 16 * d * d


# -- training -----------------------------------------------------------------------


class _DeepObjective:
    """The square loss of the two-layer student ``W = [W_1 | W_2]`` (no weight decay).

    The interface of :class:`~aimlib.gd.objective.Objective`; the inverse temperature is the channel's.
    """

    student, weight_decay = "deep", 0.0

    def __init__(self, channel: DeepAttention, r1: int, shifts=(0.0, 0.0)):
        self.channel, self.r1, self.shifts = channel, r1, shifts

    def loss_grad(self, X2, y, W, beta, n, T, want_grad=True):
        """``(loss (k,), gradient (k, d, r_1 + r_2))`` of :func:`deep_loss_grad` (``beta`` is ``channel.beta``)."""
        return deep_loss_grad(X2, y, W, self.r1, self.channel, n, T, want_grad, self.shifts)

    def matrices(self, W):
        """``(S_hat_1, S_hat_2)``: ``W_l W_l^T/sqrt(r_l d) - shifts[l] I``, each ``(k, d, d)``."""
        blocks = (W[..., :self.r1], W[..., self.r1:])
        return tuple(shifted_gram(block, m) for block, m in zip(blocks, self.shifts))


class _DeepCurves(Curves):
    """The recorded curves, with one estimation error per layer: ``(k, 2)`` per restart, ``(2,)`` averaged."""

    def __init__(self, test, S, objective: _DeepObjective):
        super().__init__(test, S, objective)
        self.r1 = objective.r1

    def estimation_errors(self, W):
        S_hats = self.objective.matrices(W)
        single = np.stack([estimation_error(S_hat, S) for S_hat, S in zip(S_hats, self.S)], axis=1)
        return single, np.array([estimation_error(S_hat.mean(axis=0), S) for S_hat, S in zip(S_hats, self.S)])


@dataclass
class DeepGDResult(GDResult):
    """The outcome of :func:`train_deep_gd`: a :class:`~aimlib.gd.GDResult` with one error per layer.

    ``k`` restarts, ``m`` recorded steps; the fields that differ from one layer:

    Attributes
    ----------
    W : array (k, d, r_1 + r_2)
        Final weights ``[W_1 | W_2]``; ``W1``, ``W2`` are its two blocks and ``r1`` the width of the first.
    S_hat : array (k, 2, d, d)
        Final ``S_hat_l = W_l W_l^T / sqrt(r_l d)``; ``S_mean`` (2, d, d) their average over restarts.
    mmse_curve : array (k, 2, m) or None
        ``(1/d)||S_hat_{i,l} - S_l||_F^2`` per restart ``i`` and layer ``l`` (with teachers ``S``).
    mmse_averaged_curve : array (2, m) or None
        ``(1/d)||mean_i S_hat_{i,l} - S_l||_F^2`` per layer.
    mmse_single, mmse_averaged : arrays (k, 2) and (2,), or None
        The final values of the two curves.
    """

    r1: int = 0

    @property
    def W1(self) -> np.ndarray:
        return self.W[..., :self.r1]

    @property
    def W2(self) -> np.ndarray:
        return self.W[..., self.r1:]


def _deep_result(W, n_steps, converged, seconds: float, curves: _DeepCurves) -> DeepGDResult:
    """Assemble the :class:`DeepGDResult` from the final ``W = [W_1 | W_2]`` and the curves."""
    r1, has_S = curves.r1, curves.S is not None
    S_hat = np.stack([to_host(S) for S in curves.objective.matrices(W)], axis=1)
    errors = np.moveaxis(np.array(curves.errors), 0, -1) if has_S else None
    averaged = np.array(curves.averaged).T if has_S else None
    return DeepGDResult(
        W=to_host(W), r1=r1, S_hat=S_hat, S_mean=S_hat.mean(axis=0),
        steps=np.asarray(curves.steps), train_loss=np.array(curves.train).T,
        test_loss=np.array(curves.test_loss).T if curves.test is not None else None,
        mmse_curve=errors, mmse_averaged_curve=averaged,
        mmse_single=None if errors is None else errors[..., -1],
        mmse_averaged=None if averaged is None else averaged[:, -1],
        n_steps=n_steps, converged=converged, seconds=seconds)


def train_deep_gd(X, y, *, c: float = 0.5, beta: float = 1.0, ranks=None, rho=None, restarts: int = 1,
                  seed=None, init_scale: float = 1.0, optimizer: str = "adam", lr: float = 0.1,
                  steps: int = 1000, adam_betas=(0.9, 0.999), adam_eps: float = 1e-8,
                  batch_size: int | None = None, tol: float = 1e-10, S=None, X_test=None, y_test=None,
                  record_every: int = 10, memory_mb: float = MEMORY_MB, shifts=(0.0, 0.0),
                  on_max_iter: str = "return") -> DeepGDResult:
    r"""Train ``restarts`` two-layer softmax students on ``(X, y)`` at once, both layers jointly.

    The options are those of :func:`~aimlib.gd.train_gd` (same meaning, same
    defaults), except:

    Parameters
    ----------
    c, beta : float
        Residual strength and inverse temperature of the student's two softmax layers.
    ranks : pair of int, optional
        Widths ``(r_1, r_2)``; by default ``round(rho_l d)`` for ``rho = (rho_1, rho_2)``,
        or ``d // 2`` each without ``rho``.
    seed : int, Generator or None
        Initial weights: ``[W_1 | W_2]`` of restart ``i`` is
        :func:`~aimlib.gd.initial_weights` of width ``r_1 + r_2``.
    S : array (2, d, d), optional
        The two teachers, to record each layer's estimation error.
    shifts : pair of float
        ``m_l >= 0``: the students are ``W_l W_l^T/sqrt(r_l d) - m_l I``, the known means of
        the teachers removed (centred teachers: ``m_l = sqrt(rho_l)``).

    Returns
    -------
    DeepGDResult
        Raises :class:`aimlib.ConvergenceError` on divergence or no progress, and
        applies ``on_max_iter`` at the cap (:mod:`aimlib.gd.checks`, as :func:`~aimlib.gd.train_gd`).
    """
    channel = deep_channel(c, beta)
    X, y, S, test, setup = block_setup(X, y, S, X_test, y_test, 2, restarts=restarts, optimizer=optimizer,
                                       lr=lr, adam_betas=adam_betas, adam_eps=adam_eps, steps=steps, tol=tol,
                                       record_every=record_every, batch_size=batch_size, init_scale=init_scale,
                                       on_max_iter=on_max_iter)
    r1, r2 = block_widths(ranks, rho, X.shape[2], channel)
    check_memory(lambda **s: deep_memory_estimate(**s, ranks=(r1, r2), itemsize=X.dtype.itemsize),
                 setup.sizes, check_memory_mb(memory_mb))
    shifts = tuple(v.nonnegative(f"shifts[{i}]", m) for i, m in enumerate(shifts))
    return block_fit(X, y, S, test, setup, r1 + r2, seed, channel.beta, _DeepObjective(channel, r1, shifts),
                     _DeepCurves, _deep_result)


def run_deep_gd(T: int, rho, alpha: float, d: int, c: float = 0.5, seed=None, *, restarts: int = 1,
                backend: str | None = None, dtype=None, beta: float = 1.0, n_test: int | None = None,
                return_result: bool = False, memory_mb: float = MEMORY_MB, teachers: str = "wishart",
                **options) -> dict:
    r"""Sample a two-softmax-layer data set and train ``restarts`` two-layer students on it.

    The teachers and data come from :func:`aimlib.model.sample_dataset` with
    :func:`deep_channel` ``(c, beta)``; seeds, test set, ``dtype``, ``backend`` and
    the memory guard (:func:`deep_memory_estimate`) as in :func:`~aimlib.gd.run_gd`.

    Parameters
    ----------
    T, alpha, d : int, float, int
        Tokens, sample complexity ``n = round(alpha d^2)`` and dimension.
    rho : pair of float
        Width ratios ``(rho_1, rho_2)`` of the two teachers (and students).
    c, beta : float
        Residual strength and inverse temperature of both layers.
    teachers : {'wishart', 'centred'}
        The teachers' family; for ``centred`` the students carry the known means (``shifts``).
    **options
        Passed to :func:`train_deep_gd` (``ranks``, ``optimizer``, ``lr``, ``steps``, ...).

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``restarts``, ``T``, ``rho``, ``c``, ``beta``, ``n``,
        ``ranks``, ``seconds``; ``steps`` (the recorded steps), ``curve_single``
        (array ``(k, 2, m)``: each restart's per-layer error
        ``(1/d)||S_hat_l - S_l||_F^2``), ``curve_averaged`` (array ``(2, m)``: the
        error of the restarts' average ``S_hat_l``); the final values
        ``mmse_single`` (per layer, mean over restarts), ``mmse_single_all``
        (``k`` pairs), ``mmse_averaged`` (per layer); ``train_loss``,
        ``test_loss``, ``n_steps``, ``converged`` (per restart).  With ``return_result``, also
        ``result`` (:class:`DeepGDResult`) and ``data``.
    """
    channel = deep_channel(c, beta)
    run = check_run(T, rho, alpha, d, restarts, seed, beta, dtype, n_test, memory_mb, options,
                    check_rho=lambda rho: widths(channel, rho), caller="run_deep_gd")
    ranks = options.get("ranks")
    ranks = None if ranks is None else block_widths(ranks, None, d, channel)
    itemsize = np.dtype(run.dtype).itemsize
    check_run_memory(run, lambda n, T, d, restarts, n_test: deep_memory_estimate(
        n, T, d, ranks or block_widths(None, run.rho, d, channel), restarts, n_test=n_test, itemsize=itemsize))
    options.setdefault("rho", run.rho)
    shifts = known_means(teachers, run.rho)
    if any(shifts):
        options["shifts"] = shifts
    data, res, seconds = sample_and_train(run, channel, partial(train_deep_gd, c=channel.c, beta=run.beta),
                                          backend, options, teachers=teachers)
    return block_summary(run, data, res, seconds, return_result, c=channel.c,
                         ranks=(res.W1.shape[2], res.W2.shape[2]))
