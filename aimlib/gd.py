r"""Gradient descent on the square loss: a student that learns the key-query matrix.

The student has the teacher's architecture (book, chapter "Gradient descent"):

.. math::

    \hat S = \frac{W W^\top}{\sqrt{r d}}, \qquad W \in \mathbb{R}^{d \times r},
    \qquad
    \hat h^\mu_{ab} = \frac{x_a^{\mu\top} \hat S x_b^\mu}{\sqrt d}
                     - \delta_{ab} \frac{\operatorname{Tr} \hat S}{\sqrt d}
                   = \frac{P^\mu_a \cdot P^\mu_b - \delta_{ab} \|W\|_F^2}{\sqrt r\, d},

with ``P^mu = X^mu W`` of shape ``(T, r)``.  Its output is the row-wise softmax
``y_hat = softmax(beta h_hat)`` and the loss is the square loss

.. math::

    L(W) = \frac{1}{2n} \sum_{\mu=1}^n \bigl\| \mathrm{softmax}(\beta \hat h^\mu) - y^\mu \bigr\|_F^2 .

Gradient (derived in the book): with ``E = (y_hat - y)/n`` and the softmax
Jacobian applied row by row,

.. math::

    G_{ab} = \beta\, \hat y_{ab} \Bigl(E_{ab} - \sum_c E_{ac} \hat y_{ac}\Bigr) = \partial L / \partial \hat h_{ab},
    \qquad
    \nabla_W L = \frac{1}{\sqrt r\, d} \Bigl[\sum_\mu X^{\mu\top} (G^\mu + G^{\mu\top}) X^\mu W
                 - 2 \Bigl(\sum_\mu \operatorname{Tr} G^\mu\Bigr) W \Bigr],

computed as ``X^T [(G + G^T) P]`` so that one step costs ``O(n T d r)`` and no
``d x d`` matrix per sample is ever formed.

Restarts are batched: ``W`` has shape ``(k, d, r)`` and the ``k`` students,
started from independent initialisations, are trained on the same data in one
array computation.  Every array operation goes through the module returned by
:func:`aimlib.backend.get_array_module`, so the same code runs on NumPy and CuPy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import _validate as v
from .backend import float_dtype, get_array_module, module_named, to_common, to_device, to_host
from .channels import Softmax
from .errors import ConvergenceError
from .model import attention_indices, estimation_error, sample_dataset, sample_tokens

__all__ = [
    "GDResult",
    "initial_weights",
    "student_matrix",
    "student_indices",
    "student_output",
    "loss",
    "loss_and_grad",
    "train_gd",
    "run_gd",
]

OPTIMIZERS = ("adam", "gd")


# ---------------------------------------------------------------------------
# the student
# ---------------------------------------------------------------------------

def _as_batch(W, name: str = "W"):
    """Return ``(W3, squeeze)``: ``W`` as ``(k, d, r)`` and whether it came as ``(d, r)``."""
    if W.ndim == 2:
        return W[None], True
    if W.ndim == 3:
        return W, False
    raise ValueError(f"{name} must have shape (d, r) or (k, d, r), got {tuple(W.shape)}")


def initial_weights(d: int, r: int, restarts: int = 1, seed=None, *, scale: float = 1.0,
                    backend: str | None = None, dtype=np.float64):
    r"""Random initial weights of shape ``(restarts, d, r)``, i.i.d. ``N(0, scale^2)``.

    With ``scale = 1`` the initial ``S_hat = W W^T / sqrt(r d)`` is a draw from
    the teacher's prior.  With an integer ``seed``, restart ``i`` is drawn from
    ``numpy.random.default_rng([seed, i])``: restart ``i`` has the same
    initialisation whatever the number of restarts, so a batched run and
    ``k`` separate runs can be compared.  A ``Generator`` is used in sequence.
    """
    d = v.integer("d", d, minimum=1)
    r = v.integer("r", r, minimum=1)
    restarts = v.integer("restarts", restarts, minimum=1)
    scale = v.positive("scale", scale)
    if isinstance(seed, np.random.Generator) or seed is None:
        rng = v.generator(seed)
        W = rng.standard_normal((restarts, d, r))
    else:
        v.generator(seed)  # validates the type and sign
        W = np.stack([np.random.default_rng([int(seed), i]).standard_normal((d, r))
                      for i in range(restarts)])
    return to_device((scale * W).astype(dtype), module_named(backend))


def student_matrix(W):
    r"""``S_hat = W W^T / sqrt(r d)`` for ``W`` of shape ``(d, r)`` or ``(k, d, r)``."""
    W = v.finite_array("W", W)
    xp = get_array_module(W)
    W3, squeeze = _as_batch(W)
    d, r = W3.shape[1:]
    S = W3 @ xp.swapaxes(W3, 1, 2) / float(np.sqrt(r * d))
    return S[0] if squeeze else S


def _check_xy(X, y, W=None):
    X = v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if T < 2:
        raise ValueError(f"X must have T >= 2 tokens per sample, got shape {tuple(X.shape)}")
    if y is not None:
        y = v.finite_array("y", y, ndim=3)
        if y.shape != (n, T, T):
            raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)} to match X, got {tuple(y.shape)}")
    if W is not None:
        W = v.finite_array("W", W)
        if W.ndim not in (2, 3) or W.shape[-2] != d:
            raise ValueError(f"W must have shape ({d}, r) or (k, {d}, r) to match X, got {tuple(W.shape)}")
    return to_common(X, y, W)[1:]


def _common_dtype(X, y, W):
    """Cast ``X, y, W`` to one floating dtype (that of ``X`` and ``W`` together)."""
    xp = get_array_module(X, y, W)
    dt = xp.result_type(X.dtype, W.dtype, xp.float32)
    return X.astype(dt, copy=False), y.astype(dt, copy=False), W.astype(dt, copy=False)


def _indices(X2, W3, n, T):
    """Forward pass: ``P = X W`` of shape ``(k, n, T, r)`` and ``h_hat`` of shape ``(k, n, T, T)``."""
    xp = get_array_module(X2, W3)
    k, d, r = W3.shape
    c = 1.0 / (float(np.sqrt(r)) * d)
    P = (X2 @ W3).reshape(k, n, T, r)
    sq = (W3 * W3).sum(axis=(1, 2))
    h = P @ xp.swapaxes(P, 2, 3)
    h = h - sq[:, None, None, None] * xp.eye(T, dtype=h.dtype)
    return P, c * h


def _softmax(z, xp):
    z = z - z.max(axis=-1, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def student_indices(X, W):
    r"""The student's attention indices ``h_hat``: ``(n, T, T)`` for ``W (d, r)``, ``(k, n, T, T)`` for ``(k, d, r)``.

    Equal to :func:`aimlib.model.attention_indices` of ``X`` and
    ``S_hat = W W^T / sqrt(r d)``, computed through ``X W`` without forming
    ``S_hat``.
    """
    X, _, W = _check_xy(X, None, W)
    n, T, _ = X.shape
    W3, squeeze = _as_batch(W)
    _, h = _indices(X.reshape(n * T, -1), W3, n, T)
    return h[0] if squeeze else h


def student_output(X, W, beta: float = 1.0):
    """The student's prediction ``softmax(beta h_hat)`` (shape as :func:`student_indices`)."""
    beta = v.positive("beta", beta)
    h = student_indices(X, W)
    return _softmax(beta * h, get_array_module(h))


def _loss_grad(X2, y, W3, beta, n, T, want_grad=True):
    """Core of :func:`loss_and_grad` without validation (``y`` of shape ``(n, T, T)``)."""
    xp = get_array_module(X2, W3)
    k, d, r = W3.shape
    P, h = _indices(X2, W3, n, T)
    yh = _softmax(beta * h, xp)
    R = yh - y
    L = 0.5 * (R * R).sum(axis=(1, 2, 3)) / n
    if not want_grad:
        return L, None
    E = R / n
    G = beta * yh * (E - (E * yh).sum(axis=-1, keepdims=True))           # dL/dh_hat
    c = 1.0 / (float(np.sqrt(r)) * d)
    dP = (G + xp.swapaxes(G, 2, 3)) @ P                                     # (k, n, T, r)
    grad = X2.T @ dP.reshape(k, n * T, r)
    trG = xp.trace(G, axis1=2, axis2=3).sum(axis=1)                         # (k,)
    grad = c * (grad - 2.0 * trG[:, None, None] * W3)
    return L, grad


def loss_and_grad(X, y, W, beta: float = 1.0):
    r"""Square loss ``L = (1/2n) sum_mu ||softmax(beta h_hat^mu) - y^mu||_F^2`` and ``dL/dW``.

    Parameters
    ----------
    X : array (n, T, d)
        Tokens.
    y : array (n, T, T)
        Targets (softmax outputs of the teacher).
    W : array (d, r) or (k, d, r)
        Student weights; with a leading restart axis, ``k`` losses and gradients
        are returned at once.
    beta : float
        Inverse temperature of the student's softmax.

    Returns
    -------
    loss : float or array (k,)
    grad : array of the shape of ``W``
    """
    beta = v.positive("beta", beta)
    X, y, W = _check_xy(X, y, W)
    n, T, _ = X.shape
    W3, squeeze = _as_batch(W)
    X, y, W3 = _common_dtype(X, y, W3)
    L, g = _loss_grad(X.reshape(n * T, -1), y, W3, beta, n, T)
    if squeeze:
        return float(L[0]), g[0]
    return L, g


def loss(X, y, W, beta: float = 1.0):
    """The square loss alone (see :func:`loss_and_grad`)."""
    beta = v.positive("beta", beta)
    X, y, W = _check_xy(X, y, W)
    n, T, _ = X.shape
    W3, squeeze = _as_batch(W)
    X, y, W3 = _common_dtype(X, y, W3)
    L, _ = _loss_grad(X.reshape(n * T, -1), y, W3, beta, n, T, want_grad=False)
    return float(L[0]) if squeeze else L


def _errors(W3, S):
    """Per-restart ``(1/d)||S_hat_i - S||_F^2`` and the error of the average, without a loop."""
    xp = get_array_module(W3, S)
    k, d, r = W3.shape
    Sh = W3 @ xp.swapaxes(W3, 1, 2) / float(np.sqrt(r * d))
    diff = Sh - S
    single = (diff * diff).sum(axis=(1, 2)) / d
    m = Sh.mean(axis=0) - S
    return single, float((m * m).sum()) / d, Sh


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------

@dataclass
class GDResult:
    """The outcome of :func:`train_gd` (host arrays; ``k`` = number of restarts).

    Attributes
    ----------
    W : array (k, d, r)
        Final weights.
    S_hat : array (k, d, d)
        Final student matrices ``W W^T / sqrt(r d)``.
    S_mean : array (d, d)
        Their average (the estimator that approaches the posterior mean).
    steps : array (m,)
        Step numbers at which the curves were recorded (0 = initialisation).
    train_loss, test_loss : arrays (k, m)
        Training loss (the full-batch loss ``L`` above) and, if a test set was
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
        Whether each restart met the early-stopping tolerance.
    seconds : float
        Wall-clock time of the training loop.
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


def train_gd(X, y, *, rank: int | None = None, rho: float | None = None, beta: float = 1.0,
             restarts: int = 1, seed=None, init=None, init_scale: float = 1.0,
             optimizer: str = "adam", lr: float = 0.1, steps: int = 1000,
             adam_betas=(0.9, 0.999), adam_eps: float = 1e-8, batch_size: int | None = None,
             tol: float = 1e-10, S=None, X_test=None, y_test=None, record_every: int = 10) -> GDResult:
    r"""Train ``restarts`` students ``S_hat = W W^T / sqrt(r d)`` on ``(X, y)`` at once.

    Parameters
    ----------
    X, y : arrays (n, T, d) and (n, T, T)
        Training data (NumPy or CuPy; the computation runs on the GPU if
        either is a CuPy array, in the dtype of ``X``).
    rank : int, optional
        Student width ``r``.  Default: ``round(rho d)`` if ``rho`` is given,
        else ``d // 2``.  Widths above the teacher's (over-parameterised
        students) are allowed.
    rho : float, optional
        Width ratio used when ``rank`` is not given.
    beta : float
        Inverse temperature of the student's softmax (the teacher's, normally).
    restarts : int
        Number ``k`` of independently initialised students, trained together.
    seed : int, Generator or None
        Initialisation and mini-batch randomness (see :func:`initial_weights`).
    init : array (k, d, r) or (d, r), optional
        Explicit initial weights (then ``restarts``, ``seed`` and
        ``init_scale`` are not used for the initialisation).
    init_scale : float
        Standard deviation of the initial entries of ``W`` (1: a prior sample).
    optimizer : {'adam', 'gd'}
        Adam (``adam_betas``, ``adam_eps``, bias-corrected) or plain gradient descent.
    lr : float
        Learning rate (the paper: Adam, 0.1).
    steps : int
        Maximum number of steps (the paper: 1000).
    batch_size : int, optional
        Mini-batch size (``None``: full batch).  Mini-batches come from a random
        permutation per epoch, shared by all restarts.
    tol : float
        Early stopping: a restart stops (its weights are frozen) as soon as its
        training loss is ``<= tol`` (with mini-batches, checked on the full
        training loss at the recording steps); ``0`` disables it.  The loop ends when
        every restart has stopped.
    S : array (d, d), optional
        The teacher, to record the estimation error.
    X_test, y_test : arrays, optional
        A test set, to record the test loss.
    record_every : int
        Record the curves every this many steps (and at the last step).

    Returns
    -------
    GDResult

    Raises
    ------
    ConvergenceError
        If a loss or gradient becomes NaN or infinite (lower ``lr``).
    """
    X, y, _ = _check_xy(X, y)
    n, T, d = X.shape
    xp = get_array_module(X)
    dtype = X.dtype
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"X must have a floating dtype, got {dtype}")
    y = y.astype(dtype, copy=False)
    beta = v.positive("beta", beta)
    optimizer = v.choice("optimizer", optimizer, OPTIMIZERS)
    lr = v.positive("lr", lr)
    steps = v.integer("steps", steps, minimum=1)
    tol = v.nonnegative("tol", tol)
    record_every = v.integer("record_every", record_every, minimum=1)
    b1, b2 = (v.in_range("adam_betas[0]", adam_betas[0], 0.0, 1.0 - 1e-12),
              v.in_range("adam_betas[1]", adam_betas[1], 0.0, 1.0 - 1e-12))
    adam_eps = v.positive("adam_eps", adam_eps)
    init_scale = v.positive("init_scale", init_scale)
    if batch_size is not None:
        batch_size = v.integer("batch_size", batch_size, minimum=1, maximum=n)
        if batch_size == n:
            batch_size = None

    if init is not None:
        W = v.finite_array("init", init)
        W, _ = _as_batch(W, "init")
        if W.shape[1] != d:
            raise ValueError(f"init must have shape (k, {d}, r) to match X, got {tuple(W.shape)}")
        W = to_device(W, xp).astype(dtype, copy=True)
        r = W.shape[2]
        if rank is not None and v.integer("rank", rank, minimum=1) != r:
            raise ValueError(f"rank={rank} does not match init of width {r}")
    else:
        if rank is None:
            r = max(1, int(round(v.positive("rho", rho) * d))) if rho is not None else max(1, d // 2)
        else:
            r = v.integer("rank", rank, minimum=1)
        restarts = v.integer("restarts", restarts, minimum=1)
        W = initial_weights(d, r, restarts, seed, scale=init_scale, dtype=dtype,
                            backend="cupy" if xp is not np else "numpy")
    k = W.shape[0]

    if S is not None:
        S = v.finite_array("S", S, ndim=2)
        if S.shape != (d, d):
            raise ValueError(f"S must have shape ({d}, {d}), got {tuple(S.shape)}")
        S = to_device(S, xp).astype(dtype)
    if (X_test is None) != (y_test is None):
        raise ValueError("X_test and y_test must be given together")
    if X_test is not None:
        X_test, y_test, _ = _check_xy(X_test, y_test)
        if X_test.shape[1:] != (T, d):
            raise ValueError(f"X_test must have shape (n_test, {T}, {d}), got {tuple(X_test.shape)}")
        X_test = to_device(X_test, xp).astype(dtype, copy=False)
        y_test = to_device(y_test, xp).astype(dtype, copy=False)
        n_test = X_test.shape[0]
        Xt2 = X_test.reshape(n_test * T, d)

    X2 = X.reshape(n * T, d)
    batch_rng = v.generator(seed if isinstance(seed, np.random.Generator) else
                            (None if seed is None else np.random.default_rng([int(seed), 2**31 - 1])))
    perm, pos = None, n

    rec_steps, rec_train, rec_test, rec_err, rec_avg = [], [], [], [], []
    active = xp.ones(k, dtype=bool)
    n_steps = np.zeros(k, dtype=int)
    converged = np.zeros(k, dtype=bool)
    m1 = xp.zeros_like(W)
    m2 = xp.zeros_like(W)

    def record(step, train_L):
        rec_steps.append(step)
        rec_train.append(to_host(train_L).copy())
        if X_test is not None:
            Lt, _ = _loss_grad(Xt2, y_test, W, beta, n_test, T, want_grad=False)
            rec_test.append(to_host(Lt))
        if S is not None:
            single, avg, _ = _errors(W, S)
            rec_err.append(to_host(single))
            rec_avg.append(avg)

    def check(L, step):
        bad = ~xp.isfinite(L)
        if bool(bad.any()):
            i = int(to_host(xp.nonzero(bad)[0])[0])
            raise ConvergenceError(
                f"gradient descent diverged: the training loss of restart {i} is {float(L[i])} at step "
                f"{step} (optimizer={optimizer!r}, lr={lr:g}); lower lr")

    t0 = time.perf_counter()
    t_adam = 0
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported by check()
        for step in range(steps):
            if batch_size is None:
                L, g = _loss_grad(X2, y, W, beta, n, T)
                L_full = L
            else:
                if pos + batch_size > n:
                    perm, pos = batch_rng.permutation(n), 0
                idx = to_device(perm[pos:pos + batch_size], xp)
                pos += batch_size
                L, g = _loss_grad(X[idx].reshape(batch_size * T, d), y[idx], W, beta, batch_size, T)
                L_full = None
            check(L, step)
            if not bool(xp.all(xp.isfinite(g))):
                raise ConvergenceError(f"gradient descent diverged: non-finite gradient at step {step} "
                                       f"(optimizer={optimizer!r}, lr={lr:g}); lower lr")
            if L_full is None and step % record_every == 0:
                L_full, _ = _loss_grad(X2, y, W, beta, n, T, want_grad=False)
                check(L_full, step)
            if step % record_every == 0:
                record(step, L_full)
            if tol > 0 and L_full is not None:
                done = active & (L_full <= tol)
                if bool(done.any()):
                    idx_done = to_host(xp.nonzero(done)[0])
                    converged[idx_done] = True
                    active = active & ~done
                    if not bool(active.any()):
                        break
            a = active.astype(dtype)[:, None, None]
            if optimizer == "adam":
                t_adam += 1
                m1 = b1 * m1 + (1 - b1) * g
                m2 = b2 * m2 + (1 - b2) * (g * g)
                mh = m1 / (1 - b1 ** t_adam)
                vh = m2 / (1 - b2 ** t_adam)
                W = W - (lr * a) * mh / (xp.sqrt(vh) + adam_eps)
            else:
                W = W - (lr * a) * g
            n_steps += to_host(active).astype(int)
    # final record (after the last update, or at the step where all restarts stopped)
    with np.errstate(over="ignore", invalid="ignore"):
        L_final, _ = _loss_grad(X2, y, W, beta, n, T, want_grad=False)
        check(L_final, steps)
    final_step = int(n_steps.max())
    if not rec_steps or rec_steps[-1] != final_step:
        record(final_step, L_final)
    seconds = time.perf_counter() - t0

    Sh = W @ xp.swapaxes(W, 1, 2) / float(np.sqrt(r * d))
    S_mean = Sh.mean(axis=0)
    if S is not None:
        single, avg, _ = _errors(W, S)
        single = to_host(single).astype(float)
    else:
        single, avg = None, None
    return GDResult(
        W=to_host(W), S_hat=to_host(Sh), S_mean=to_host(S_mean),
        steps=np.asarray(rec_steps), train_loss=np.array(rec_train).T,
        test_loss=np.array(rec_test).T if X_test is not None else None,
        mmse_curve=np.array(rec_err).T if S is not None else None,
        mmse_averaged_curve=np.array(rec_avg) if S is not None else None,
        mmse_single=single, mmse_averaged=avg, n_steps=n_steps, converged=converged,
        seconds=seconds)


def run_gd(T: int, rho: float, alpha: float, d: int, seed=None, *, restarts: int = 1,
           backend: str | None = None, dtype=None, beta: float = 1.0, n_test: int | None = None,
           return_result: bool = False, **options) -> dict:
    r"""Sample an AIM data set (softmax channel) and train ``restarts`` GD students on it.

    Parameters
    ----------
    T, rho, alpha, d : int, float, float, int
        Tokens, teacher width ratio, sample complexity ``n = round(alpha d^2)``
        and dimension.
    seed : int or None
        Drives the data (teacher, tokens), the test set and the initialisations.
    restarts : int
        Number ``k`` of students from independent initialisations (batched).
    backend : {'numpy', 'cupy'} or None
        Array module (default :func:`aimlib.backend.default_module`).
    dtype : float32 or float64, optional
        Working precision (default ``float32``: about twice as fast on CPU, and
        the error is unaffected at the resolution of the figures).
    beta : float
        Inverse temperature of teacher and student.
    n_test : int, optional
        Size of the test set (default ``min(n, 2000)``).
    return_result : bool
        Also return the full :class:`GDResult` under the key ``'result'`` and
        the training data (:class:`aimlib.model.Dataset`, with the teacher ``S``)
        under ``'data'``.
    **options
        Passed to :func:`train_gd` (``rank``, ``optimizer``, ``lr``, ``steps``,
        ``tol``, ``batch_size``, ``init_scale``, ``record_every``, ...).

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``restarts``, ``mmse_single`` (the mean over
        the ``k`` restarts of the single-run error ``(1/d)||S_hat_i - S||_F^2``),
        ``mmse_averaged`` (error of the averaged ``S_hat``), ``seconds``, and also
        ``mmse_single_all`` (the ``k`` single-run errors), ``mmse_single_std``
        (their standard deviation), ``T``, ``rho``, ``n``, ``rank``,
        ``train_loss``, ``test_loss`` (final, per restart), ``n_steps`` (steps taken, per restart).
    """
    T = v.integer("T", T, minimum=2)
    rho = v.positive("rho", rho)
    alpha = v.positive("alpha", alpha)
    d = v.integer("d", d, minimum=2)
    restarts = v.integer("restarts", restarts, minimum=1)
    if seed is not None and not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    dt = float_dtype(dtype, np.float32).type
    for bad in ("X", "y", "S", "init", "restarts", "X_test", "y_test"):
        if bad in options:
            raise TypeError(f"run_gd got an unexpected option {bad!r}")
    options.setdefault("rho", rho)
    seed_data = None if seed is None else [int(seed), 0]
    seed_test = None if seed is None else [int(seed), 1]
    seed_init = None if seed is None else int(seed) * 1000003 + 7
    t0 = time.perf_counter()
    data = sample_dataset(alpha, d, T, rho, Softmax(beta), np.random.default_rng(seed_data),
                          backend=backend, dtype=dt)
    n = data.n
    n_test = min(n, 2000) if n_test is None else v.integer("n_test", n_test, minimum=1)
    X_test = sample_tokens(n_test, T, d, np.random.default_rng(seed_test), backend=backend, dtype=dt)
    y_test = Softmax(beta)(attention_indices(X_test, data.S))
    res = train_gd(data.X, data.y, beta=beta, restarts=restarts, seed=seed_init, S=data.S,
                   X_test=X_test, y_test=y_test, **options)
    out = {
        "alpha": alpha, "d": d, "seed": seed, "restarts": restarts,
        "mmse_single": float(np.mean(res.mmse_single)),
        "mmse_averaged": float(res.mmse_averaged),
        "seconds": time.perf_counter() - t0,
        "T": T, "rho": rho, "n": n, "rank": int(res.W.shape[2]),
        "mmse_single_all": [float(e) for e in res.mmse_single],
        "mmse_single_std": float(np.std(res.mmse_single, ddof=1)) if restarts > 1 else 0.0,
        "train_loss": [float(x) for x in res.train_loss[:, -1]],
        "test_loss": [float(x) for x in res.test_loss[:, -1]],
        "n_steps": [int(s) for s in res.n_steps],
    }
    if return_result:
        out["result"] = res
        out["data"] = data
    return out

