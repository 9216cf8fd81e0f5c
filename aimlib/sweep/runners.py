"""What one run computes (in a worker), as one row of the results table.

``se``
    the state-evolution fixed point (:func:`aimlib.state_evolution.solve`),
    the Bayes-optimal error in the limit ``d -> inf``: ``mmse``, ``q`` (a square channel's, untied key and
    query: ``V_A + V_B`` and ``q_A + q_B``, its two sectors added);
``amp``
    one GAMP-RIE run on sampled data (:func:`aimlib.amp.run_amp`; option ``tokens_storage``:
    stored or regenerated tokens, :mod:`aimlib.tokens`): ``n``,
    ``mmse``, ``iterations``, ``converged``, ``reason`` (why it ended: ``'tol'``, ``'perfect'``,
    ``'oscillating'``, ``'max_iter'``) and the predicted error ``mmse_pred``
    (for a channel of several teachers ``mmse_layers`` and ``mmse_pred_layers``,
    one value per teacher, in place of ``mmse`` and ``mmse_pred``; likewise for ``se``);
``gd``, ``gd_avg``
    gradient descent from ``restarts`` random initialisations on the same
    data (:func:`aimlib.gd.run_gd`): ``mmse_single`` (mean error of the single
    students), ``mmse_single_std`` (their sample standard deviation) and
    ``mmse_averaged`` (error of their average); ``mmse`` is the first for
    ``gd`` and the last for ``gd_avg``; ``converged`` (every restart reached
    its tolerance before its ``steps``, which are a budget); ``train_loss``, ``test_loss`` (final
    square losses on the training set and on fresh samples) and ``n_nonzero``
    (eigenvalues of ``S_hat`` above :data:`aimlib.gd.EIG_TOL` in absolute
    value), each the mean over the restarts; with the option ``record_every``, ``curve``: the
    errors of the kept parameters at every recorded step (:func:`aimlib.gd.schedule.kept_curve`,
    a JSON object of lists), so that one run of ``steps`` gives every smaller budget.

A run with a token law other than ``gaussian`` samples its tokens from it and
records the law under ``tokens`` in the ``options`` column.
"""
from __future__ import annotations

import json
import math
import socket
import time
from typing import Any

from .. import __version__, amp, gd, state_evolution as se
from ..backend import backend_name, module_named
from ..priors import make_priors
from .keys import Run, make_run_channel
from .store import COLUMNS, timestamp


def _make_channel(run: Run):
    return make_run_channel(run.channel, beta=run.beta, noise=run.noise, c=run.c)


def _tokens(run: Run, storage: str = "store"):
    """The token law of a run as a mapping for :func:`aimlib.tokens.token_law` (None: Gaussian, stored)."""
    if storage == "store":
        return None if run.tokens is None else dict(run.tokens)
    return {**(dict(run.tokens) if run.tokens is not None else {"name": "gaussian"}), "storage": storage}


def _errors(mmse, pred=None) -> dict:
    """``mmse`` (and ``mmse_pred``) for one teacher; ``mmse_layers`` (``mmse_pred_layers``) for several."""
    if isinstance(mmse, (tuple, list)):
        return {"mmse_layers": tuple(mmse), "mmse_pred_layers": None if pred is None else tuple(pred)}
    return {"mmse": mmse, "mmse_pred": pred}


def _se(run: Run, opts: dict) -> dict:
    kw = {"method": opts.pop("solver")} if "solver" in opts else {}
    ch = _make_channel(run)
    res = se.solve(run.alpha, ch, T=run.T, rho=make_priors(ch, run.rho, run.teachers), **kw, **opts)
    if ch.square:          # one index matrix of two sectors: the error of the whole matrix
        return {**_errors(sum(res.mmse)), "q": sum(res.q), "iterations": res.iterations}
    q = None if isinstance(res.q, (tuple, list)) else res.q
    return {**_errors(res.mmse), "q": q, "iterations": res.iterations}


def _amp(run: Run, opts: dict) -> dict:
    dtype = opts.pop("dtype")
    tokens = _tokens(run, opts.pop("tokens_storage", "store"))
    # a run that stops at its cap is a row with converged = False, not a failed run
    out = amp.run_amp(_make_channel(run), run.T, run.rho, run.alpha, run.d, run.seed,
                      backend=run.backend, dtype=dtype, on_max_iter="return",
                      tokens=tokens, teachers=run.teachers, **opts)
    return {"n": out["n"], **_errors(out["mmse"], out["m"]), "iterations": out["iterations"],
            "converged": out["converged"], "reason": out["reason"]}


def _gd(run: Run, opts: dict) -> dict:
    dtype = opts.pop("dtype")
    restarts = opts.pop("restarts")
    out = gd.run_gd(run.T, run.rho, run.alpha, run.d, run.seed, restarts=restarts,
                    backend=run.backend, dtype=dtype, beta=run.beta, tokens=_tokens(run),
                    teachers=run.teachers or "wishart", **opts)
    # per-restart errors: 'mmse_single_all' (newer run_gd) or a list in 'mmse_single'
    single = out.get("mmse_single_all", out["mmse_single"])
    single = [float(x) for x in (single if isinstance(single, (list, tuple)) else [single])]
    mean = sum(single) / len(single)
    std = (math.sqrt(sum((x - mean) ** 2 for x in single) / (len(single) - 1))
           if len(single) > 1 else float(out.get("mmse_single_std", 0.0)))
    avg = float(out["mmse_averaged"])
    curve = out["curve"] if "record_every" in opts else None
    return {"n": out["n"], "mmse": avg if run.method == "gd_avg" else mean, "curve": curve,
            "iterations": max(int(s) for s in out["n_steps"]), "converged": all(out["converged"]),
            "mmse_single": mean,
            "mmse_single_std": std, "mmse_averaged": avg, **_restart_means(out)}


def _restart_means(out: dict) -> dict:
    """Means over the restarts of the final square losses and of the non-zero eigenvalue counts."""
    return {name: sum(out[name]) / len(out[name]) for name in ("train_loss", "test_loss", "n_nonzero")}


#: method -> (run, options) -> metric columns
_METHODS = {"se": _se, "amp": _amp, "gd": _gd, "gd_avg": _gd}


def execute(run: Run) -> dict:
    """Compute one run and return its CSV row (a dict over :data:`~aimlib.sweep.store.COLUMNS`).

    Runs in the worker; raises whatever the method raises.
    """
    t0 = time.perf_counter()
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(_METHODS[run.method](run, dict(run.options)))
    backend = "numpy" if run.method == "se" else backend_name(module_named(run.backend))
    row.update(_param_columns(run))
    row.update(seconds=time.perf_counter() - t0, aimlib_version=__version__,
               backend=backend, hostname=socket.gethostname(),
               timestamp=timestamp())
    return row


def _param_columns(run: Run) -> dict:
    opts = dict(run.options)
    if run.tokens is not None:
        opts["tokens"] = dict(run.tokens)
    if run.teachers is not None:
        opts["teachers"] = run.teachers
    return {"key": run.key, "method": run.method, "channel": run.channel, "T": run.T,
            "rho": run.rho, "alpha": run.alpha, "alpha_bar": run.alpha_bar, "beta": run.beta,
            "noise": run.noise, "c": run.c, "d": run.d, "seed": run.seed, "restarts": opts.get("restarts"),
            "steps": opts.get("steps"), "max_iter": opts.get("max_iter"),
            "dtype": opts.get("dtype"),
            "options": json.dumps(opts, sort_keys=True, separators=(",", ":"))}
