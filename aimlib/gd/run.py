"""One experiment: sample an AIM data set (softmax channel) and train gradient-descent students on it."""
from __future__ import annotations

import time

import numpy as np

from .. import _validate as v
from ..backend import float_dtype
from ..channels import Softmax
from ..tokens import token_law
from ..model import attention_indices, sample_dataset, sample_tokens, teacher_width
from .._validate import MEMORY_MB, check_memory
from .memory import check_memory_mb, memory_estimate
from .objective import count_nonzero
from ..channels.softmax import check_beta
from .train import train_gd

_NOT_OPTIONS = ("X", "y", "S", "init", "restarts", "X_test", "y_test")


def _test_size(n: int, n_test: int | None) -> int:
    """Size of the test set: ``n_test``, by default ``min(n, 2000)``."""
    return min(n, 2000) if n_test is None else n_test


def _check_seed(seed):
    """``seed`` must be a non-negative int or None (it is split into the seeds of data, test set and init)."""
    if seed is not None and not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return seed


def _check_run_memory(T, rho, alpha, d, restarts, n_test, rank, itemsize, memory_mb):
    """The memory guard of :func:`run_gd`, before anything is sampled (``n = alpha d^2`` named as ``alpha``)."""
    def need(restarts, n, d, T, n_test=None):
        r = teacher_width(d, rho) if rank is None else rank
        return memory_estimate(n, T, d, r, restarts, n_test=_test_size(n, n_test), itemsize=itemsize)

    n = max(1, round(min(alpha * d * d, 1e30)))  # n_samples(alpha, d), also where alpha d^2 overflows
    sizes = dict(restarts=restarts, n=n, d=d, T=T, **({} if n_test is None else {"n_test": n_test}))
    check_memory(need, sizes, memory_mb, via={"n": ("alpha", alpha, d * d)})


def _sample(T, rho, alpha, d, seed, beta, n_test, backend, dtype, tokens):
    """The training set (seed ``[seed, 0]``) and a test set (seed ``[seed, 1]``) of the teacher."""
    rng_data, rng_test = (np.random.default_rng(None if seed is None else [int(seed), i]) for i in (0, 1))
    data = sample_dataset(alpha, d, T, rho, Softmax(beta), rng_data, backend=backend, dtype=dtype,
                          tokens=tokens)
    X_test = sample_tokens(_test_size(data.n, n_test), T, d, rng_test, backend=backend, dtype=dtype,
                           tokens=tokens)
    return data, X_test, Softmax(beta)(attention_indices(X_test, data.S))


def _summary(res) -> dict:
    """The errors, losses and steps of a :class:`GDResult` as plain Python numbers."""
    k = res.W.shape[0]
    return {
        "mmse_single": float(np.mean(res.mmse_single)),
        "mmse_averaged": float(res.mmse_averaged),
        "rank": int(res.W.shape[2]),
        "mmse_single_all": [float(e) for e in res.mmse_single],
        "mmse_single_std": float(np.std(res.mmse_single, ddof=1)) if k > 1 else 0.0,
        "train_loss": [float(x) for x in res.train_loss[:, -1]],
        "test_loss": [float(x) for x in res.test_loss[:, -1]],
        "n_steps": [int(s) for s in res.n_steps],
        "n_nonzero": [int(c) for c in count_nonzero(res.eigenvalues)],
        "student": res.student,
        "weight_decay": res.weight_decay,
    }


def run_gd(T: int, rho: float, alpha: float, d: int, seed=None, *, restarts: int = 1,
           backend: str | None = None, dtype=None, beta: float = 1.0, n_test: int | None = None,
           return_result: bool = False, memory_mb: float = MEMORY_MB, tokens=None, **options) -> dict:
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
        Inverse temperature of teacher and student, in ``(0, BETA_MAX]``.
    n_test : int, optional
        Size of the test set (default ``min(n, 2000)``).
    return_result : bool
        Also return the full :class:`GDResult` under the key ``'result'`` and
        the training data (:class:`aimlib.model.Dataset`, with the teacher ``S``)
        under ``'data'``.
    memory_mb : float
        Budget in MiB for the arrays (data and training, :func:`memory_estimate`),
        checked before anything is sampled; the error names the parameter to
        lower (``alpha`` for the number of samples) and its allowed range.
    tokens : str, mapping or None
        Law of the tokens of training and test sets (:func:`aimlib.tokens.token_law`,
        default Gaussian).
    **options
        Passed to :func:`train_gd` (``rank``, ``student``, ``weight_decay``,
        ``optimizer``, ``lr``, ``steps``, ``tol``, ``batch_size``,
        ``init_scale``, ``record_every``, ...).

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``restarts``, ``mmse_single`` (the mean over
        the ``k`` restarts of the single-run error ``(1/d)||S_hat_i - S||_F^2``),
        ``mmse_averaged`` (error of the averaged ``S_hat``), ``seconds``, and also
        ``mmse_single_all`` (the ``k`` single-run errors), ``mmse_single_std``
        (their standard deviation), ``T``, ``rho``, ``n``, ``rank``,
        ``train_loss``, ``test_loss`` (final square losses, per restart),
        ``n_steps`` (steps taken, per restart), ``n_nonzero`` (eigenvalues of
        each ``S_hat`` above :data:`aimlib.gd.objective.EIG_TOL` in absolute
        value), ``student`` and ``weight_decay``.
    """
    T = v.integer("T", T, minimum=2)
    rho = v.positive("rho", rho)
    alpha = v.positive("alpha", alpha)
    d = v.integer("d", d, minimum=2)
    restarts = v.integer("restarts", restarts, minimum=1)
    seed = _check_seed(seed)
    beta = check_beta(beta)
    dt = float_dtype(dtype, np.float32).type
    n_test = None if n_test is None else v.integer("n_test", n_test, minimum=1)
    memory_mb = check_memory_mb(memory_mb)
    tokens = token_law(tokens)
    for bad in _NOT_OPTIONS:
        if bad in options:
            raise TypeError(f"run_gd got an unexpected option {bad!r}")
    rank = options.get("rank", d if options.get("student") == "direct" else None)
    _check_run_memory(T, rho, alpha, d, restarts, n_test,
                      None if rank is None else v.integer("rank", rank, minimum=1), np.dtype(dt).itemsize, memory_mb)
    options.setdefault("rho", rho)

    t0 = time.perf_counter()
    data, X_test, y_test = _sample(T, rho, alpha, d, seed, beta, n_test, backend, dt, tokens)
    res = train_gd(data.X, data.y, beta=beta, restarts=restarts, S=data.S, X_test=X_test, y_test=y_test,
                   seed=None if seed is None else int(seed) * 1000003 + 7, memory_mb=memory_mb, **options)
    summary = _summary(res)
    out = {"alpha": alpha, "d": d, "seed": seed, "restarts": restarts, "mmse_single": summary.pop("mmse_single"),
           "mmse_averaged": summary.pop("mmse_averaged"), "seconds": time.perf_counter() - t0,
           "T": T, "rho": rho, "n": data.n, **summary}
    if return_result:
        out.update(result=res, data=data)
    return out
