"""One experiment: sample an AIM data set (softmax channel) and train gradient-descent students on it."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import _validate as v
from ..backend import float_dtype
from ..channels import Softmax
from ..priors import TEACHER_FAMILIES
from ..tokens import token_law
from ..model import attention_indices, sample_dataset, sample_tokens, teacher_width
from .._validate import MEMORY_MB, check_memory
from .memory import check_memory_mb, memory_estimate
from .objective import count_nonzero
from ..channels.softmax import check_beta
from .checks import checked_width, data_free_errors
from .schedule import kept_curve
from .train import train_gd

_NOT_OPTIONS = ("X", "y", "S", "init", "restarts", "X_test", "y_test", "shift", "shifts")


def _test_size(n: int, n_test: int | None) -> int:
    """Size of the test set: ``n_test``, by default ``min(n, 2000)``."""
    return min(n, 2000) if n_test is None else n_test


@dataclass(frozen=True)
class RunArgs:
    """The validated arguments of a run (:func:`check_run`).

    Shared by :func:`run_gd`, :func:`~aimlib.gd.deep.run_deep_gd` and :func:`~aimlib.gd.heads.run_heads_gd`.
    """

    T: int
    rho: object
    alpha: float
    d: int
    restarts: int
    seed: int | np.random.Generator | None
    beta: float
    dtype: type
    n_test: int | None
    memory_mb: float


def check_run(T, rho, alpha, d, restarts, seed, beta, dtype, n_test, memory_mb, options, *,
              check_rho, caller: str) -> RunArgs:
    """Validate the arguments of a run (``check_rho`` validates ``rho``); refuse options the run sets itself."""
    run = RunArgs(v.integer("T", T, minimum=2), check_rho(rho), v.positive("alpha", alpha),
                  v.integer("d", d, minimum=2), v.integer("restarts", restarts, minimum=1), v.check_seed(seed),
                  check_beta(beta), float_dtype(dtype, np.float32).type,
                  None if n_test is None else v.integer("n_test", n_test, minimum=1), check_memory_mb(memory_mb))
    for bad in _NOT_OPTIONS:
        if bad in options:
            raise TypeError(f"{caller} got an unexpected option {bad!r}")
    v.sample_count(run.alpha, run.d, capped=False)  # n >= 1 and teacher widths >= 1: refused, not raised to 1
    rhos = run.rho if isinstance(run.rho, tuple) else (run.rho,)
    for i, r in enumerate(rhos):
        checked_width(run.d, r, f"rho[{i}]" if len(rhos) > 1 else "rho")
    return run


def check_run_memory(run: RunArgs, estimate):
    """The memory guard of a run, before anything is sampled (``n = alpha d^2`` named as ``alpha``).

    ``estimate(n, T, d, restarts, n_test)`` is the number of bytes.
    """
    def need(restarts, n, d, T, n_test=None):
        return estimate(n, T, d, restarts, _test_size(n, n_test))

    alpha, d = run.alpha, run.d
    n = v.sample_count(alpha, d, capped=False)   # the memory check below names the largest alpha
    sizes = dict(restarts=run.restarts, n=n, d=d, T=run.T, **({} if run.n_test is None else {"n_test": run.n_test}))
    check_memory(need, sizes, run.memory_mb, via={"n": ("alpha", alpha, d * d)})


def _sample(T, rho, alpha, d, rng_data, rng_test, channel, n_test, backend, dtype, tokens=None, teachers=None):
    """The training set (from ``rng_data``) and a test set (``rng_test``) of the teacher(s) through ``channel``."""
    data = sample_dataset(alpha, d, T, rho, channel, rng_data, backend=backend, dtype=dtype, tokens=tokens,
                          teachers=teachers)
    X_test = sample_tokens(_test_size(data.n, n_test), T, d, rng_test, backend=backend, dtype=dtype,
                           tokens=tokens)
    return data, X_test, channel(attention_indices(X_test, data.S))


def sample_and_train(run: RunArgs, channel, train, backend, options, tokens=None, teachers=None):
    """Sample the data through ``channel`` (tokens of the law ``tokens``, teachers of the family
    ``teachers``) and ``train`` on it.

    ``train`` is ``train_gd``, ``train_deep_gd`` or ``train_heads_gd``.  The seed is
    split by :func:`aimlib._validate.run_streams`: training data from stream 0, the test
    set from stream 1, initialisations and mini-batches from stream 2.  Returns
    ``(data, result, seconds)``.
    """
    t0 = time.perf_counter()
    rng_data, rng_test, student = v.run_streams(run.seed)
    data, X_test, y_test = _sample(run.T, run.rho, run.alpha, run.d, rng_data, rng_test, channel, run.n_test,
                                   backend, run.dtype, tokens, teachers)
    res = train(data.X, data.y, restarts=run.restarts, S=data.S, X_test=X_test, y_test=y_test,
                seed=student, memory_mb=run.memory_mb, **options)
    return data, res, time.perf_counter() - t0


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
        "converged": [bool(c) for c in res.converged],
        "n_nonzero": [int(c) for c in count_nonzero(res.eigenvalues)],
        "student": res.student,
        "weight_decay": res.weight_decay,
        "lr": res.lr,
        "keep": res.keep,
        "train_loss_start": [float(x) for x in res.train_loss[:, 0]],
        "mmse_single_start": [float(e) for e in res.mmse_curve[:, 0]],
        "curve": kept_curve(res),
    }


def data_free_flags(out: dict, S) -> dict:
    """``mmse_data_free`` (the error of the data-free estimate ``(Tr S/d) I`` of the teacher ``S``,
    :func:`aimlib.gd.checks.data_free_errors`, about 1) and ``worse_than_data_free``: the mean
    single-run error ``mmse_single`` above it.  Such a run is a result (its loss fell, else it
    raised :class:`~aimlib.errors.ConvergenceError`), but no better than knowing no data."""
    data_free = float(data_free_errors(S)[0])
    return {"mmse_data_free": data_free, "worse_than_data_free": bool(out["mmse_single"] > data_free)}


def known_means(teachers: str, rhos) -> tuple:
    """The known means ``m_l`` the students carry for teachers of the family ``teachers``
    (:data:`aimlib.priors.TEACHER_FAMILIES`): ``sqrt(rho_l)`` for centred teachers
    (``S_l = W W^T/sqrt(r d) - sqrt(rho_l) I``), ``0`` for Wishart ones; one per width ratio."""
    centred = v.choice("teachers", teachers, TEACHER_FAMILIES) == "centred"
    return tuple(math.sqrt(r) if centred else 0.0 for r in rhos)


def run_gd(T: int, rho: float, alpha: float, d: int, seed=None, *, restarts: int = 1,
           backend: str | None = None, dtype=None, beta: float = 1.0, n_test: int | None = None,
           return_result: bool = False, memory_mb: float = MEMORY_MB, tokens=None, teachers: str = "wishart",
           **options) -> dict:
    r"""Sample an AIM data set (softmax channel) and train ``restarts`` GD students on it.

    Parameters
    ----------
    T, rho, alpha, d : int, float, float, int
        Tokens, teacher width ratio, sample complexity ``n = round(alpha d^2)``
        and dimension; ``n >= 1`` and the width ``round(rho d) >= 1`` are
        required (a smaller ``alpha`` or ``rho`` raises ``ValueError`` naming the
        allowed range, rather than being raised to one sample or one column).
    seed : int, Generator or None
        Split by :func:`aimlib._validate.run_streams` into the data (teacher,
        tokens: the same as :func:`aimlib.amp.run_amp` draws from this seed), the
        test set and the initialisations; two equal Generators give equal runs.
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
    teachers : {'wishart', 'centred'}
        The teacher's family (:func:`aimlib.priors.make_priors`); for ``centred`` the
        factorised students are ``W W^T / sqrt(r d) - sqrt(rho) I`` (``shift``, the known mean).
    **options
        Passed to :func:`train_gd` (``rank``, ``student``, ``weight_decay``,
        ``optimizer``, ``lr`` (default: 0.1, smaller for Adam on students wider than ``d``,
        :func:`aimlib.gd.optim.default_lr`), ``steps``, ``tol``, ``batch_size``,
        ``init_scale``, ``record_every``, ``on_max_iter``, the schedule ``lr_decay_at``, ``lr_decay``
        and ``keep``, ...).

    Raises
    ------
    aimlib.ConvergenceError
        If a restart diverges or makes no progress (:mod:`aimlib.gd.checks`: a
        non-finite loss, a loss at or above its start, an error above 20 times the
        data-free estimate's); one failed restart fails the run.
    ValueError
        Bad input, e.g. a ``beta`` so small that the targets are within ``tol`` of uniform.

    Returns
    -------
    dict
        ``alpha``, ``d``, ``seed``, ``restarts``, ``mmse_single`` (the mean over
        the ``k`` restarts of the single-run error ``(1/d)||S_hat_i - S||_F^2``),
        ``mmse_averaged`` (error of the averaged ``S_hat``), ``seconds``, ``mmse_single_all``
        (the ``k`` single-run errors), ``mmse_single_std``, ``T``, ``rho``, ``n``, ``rank``,
        ``train_loss``, ``test_loss`` (final square losses), ``train_loss_start`` and
        ``mmse_single_start`` (the training loss and error of each restart at its start),
        ``curve`` (the errors of the kept parameters at every recorded step,
        :func:`aimlib.gd.schedule.kept_curve`), ``n_steps``, ``converged`` (the
        training loss reached ``tol``), ``n_nonzero`` (eigenvalues of each ``S_hat`` above
        :data:`aimlib.gd.objective.EIG_TOL`), ``student`` and ``weight_decay`` (per restart where it applies),
        ``lr`` (the step used: given, or :func:`aimlib.gd.optim.default_lr`; before any decay), ``keep``
        (``'lowest'``: the errors are those of each restart stopped at its lowest training loss),
        ``mmse_data_free`` (the
        error of the data-free estimate ``(Tr S/d) I``, about 1) and ``worse_than_data_free``
        (``mmse_single`` above it: a result whose training loss fell, but no better than no data).
    """
    run = check_run(T, rho, alpha, d, restarts, seed, beta, dtype, n_test, memory_mb, options,
                    check_rho=partial(v.positive, "rho"), caller="run_gd")
    rank = options.get("rank", run.d if options.get("student") == "direct" else None)
    rank = None if rank is None else v.integer("rank", rank, minimum=1)
    itemsize = np.dtype(run.dtype).itemsize
    check_run_memory(run, lambda n, T, d, restarts, n_test: memory_estimate(
        n, T, d, teacher_width(d, run.rho) if rank is None else rank, restarts, n_test=n_test, itemsize=itemsize))
    options.setdefault("rho", run.rho)
    (shift,) = known_means(teachers, [run.rho])
    if shift and options.get("student", "factorised") == "factorised":
        options["shift"] = shift
    data, res, seconds = sample_and_train(run, Softmax(run.beta), partial(train_gd, beta=run.beta), backend,
                                          options, token_law(tokens), teachers)
    summary = _summary(res)
    out = {"alpha": run.alpha, "d": run.d, "seed": v.seed_label(run.seed), "restarts": run.restarts,
           "mmse_single": summary.pop("mmse_single"), "mmse_averaged": summary.pop("mmse_averaged"),
           "seconds": seconds, "T": run.T, "rho": run.rho, "n": data.n, **summary}
    out.update(data_free_flags(out, data.S))
    if return_result:
        out.update(result=res, data=data)
    return out
