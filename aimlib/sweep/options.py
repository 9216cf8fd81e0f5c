"""Per-method options of a sweep spec (``options: {amp: {max_iter: 300}}``) and their defaults.

A list of values makes an option a grid axis.  The state-evolution options
must fit the solver that will run: the closed form (noiseless softmax or
linear channel, ``solver: auto`` or ``closed``) takes only ``tol``, the
iteration also ``max_iter`` and ``damping``; ``solver: closed`` needs a
channel that has the closed form, ``rho: inf`` needs the closed form.
``amp`` takes ``tokens_storage`` (``store``, the default, or ``regenerate``:
:mod:`aimlib.tokens`); ``regenerate`` enters a run's key (regenerated tokens are
other draws than the stored ones of the same seed), ``store`` does not (:data:`IMPLIED`).
``gd`` and ``gd_avg`` take the schedule of :mod:`aimlib.gd.schedule`: a step decay
``lr_decay_at`` (before every run's budget ``steps``) with its factor ``lr_decay``, and
``keep`` (``last``, the default, which stays out of the key, or ``lowest``).
"""
from __future__ import annotations

import itertools
from functools import partial
from typing import Mapping

from .. import _validate
from ..amp.loop import STOPS
from ..gd.schedule import KEEPS
from ..tokens import STORAGES
from .fields import choice, fail, grid_axis, unknown_keys

METHODS = ("se", "amp", "gd", "gd_avg")


def _opt_int(minimum):
    return partial(_validate.integer, minimum=minimum)


def _opt_float(**bounds):
    return partial(_validate.bounded, **bounds)


def _opt_choice(*allowed):
    return lambda f, x: choice(f, x, allowed)


_GD_OPTIONS = {
    "restarts": _opt_int(1), "steps": _opt_int(1), "lr": _opt_float(low=0, low_open=True),
    "optimizer": _opt_choice("adam", "gd"), "tol": _opt_float(low=0),
    "batch_size": _opt_int(1), "init_scale": _opt_float(low=0, low_open=True),
    "rank": _opt_int(1), "n_test": _opt_int(1), "record_every": _opt_int(1),
    "dtype": _opt_choice("float32", "float64"),
    "weight_decay": _opt_float(low=0), "student": _opt_choice("factorised", "direct"),
    "lr_decay_at": _opt_int(1), "lr_decay": _opt_float(low=0, high=1, low_open=True),
    "keep": _opt_choice(*KEEPS),
}

#: method -> option name -> check(field, value) -> value
OPTIONS: dict[str, dict] = {
    "se": {"solver": _opt_choice("auto", "closed", "iterate"),
           "tol": _opt_float(low=0, low_open=True), "max_iter": _opt_int(1),
           "damping": _opt_float(low=0, high=1, high_open=True)},
    "amp": {"max_iter": _opt_int(1), "damping": _opt_float(low=0, high=1, high_open=True),
            "tol": _opt_float(low=0, low_open=True), "lookback": _opt_int(1),
            "min_iter": _opt_int(1), "damp": _opt_choice("both", "state", "messages"),
            "memory_mb": _opt_float(low=0, low_open=True), "chunk_size": _opt_int(1),
            "dtype": _opt_choice("float32", "float64"), "tokens_storage": _opt_choice(*STORAGES),
            "stop": _opt_choice(*STOPS)},
    "gd": dict(_GD_OPTIONS),
    "gd_avg": dict(_GD_OPTIONS),
}

#: defaults that are part of the run key (so changing them here never reuses stale rows)
DEFAULTS: dict[str, dict] = {
    "se": {},
    "amp": {"max_iter": 300, "dtype": "float64", "stop": "window"},
    "gd": {"restarts": 1, "steps": 1000, "dtype": "float32"},
    "gd_avg": {"restarts": 8, "steps": 1000, "dtype": "float32"},
}

#: options that a run with the given option value does not use: they are left out of its key
UNUSED = {("student", "direct"): ("rank",)}

#: option values left out of a run's key: the behaviour without the option (``tokens_storage: store``,
#: ``keep: last``), or
#: what rows written before the option was part of the key were run with (``stop: estimate``, GAMP-RIE's
#: default until the window rule replaced it: such rows are read by a spec that names it)
IMPLIED = {("tokens_storage", "store"), ("stop", "estimate"), ("keep", "last")}

#: state-evolution options that only the iteration uses
_ITERATION_ONLY = ("max_iter", "damping")


def check_options(opts, methods: tuple) -> dict:
    """The validated ``options`` mapping: method -> option -> tuple of values."""
    opts = opts if opts is not None else {}
    if not isinstance(opts, Mapping):
        fail("options", f"must be a mapping method -> {{option: value}}, got {type(opts).__name__}")
    unknown_keys("options", opts, METHODS)
    clean = {}
    for m, o in opts.items():
        if m not in methods:
            fail(f"options.{m}", f"method {m!r} is not in 'method' ({', '.join(methods)})")
        o = o if o is not None else {}
        if not isinstance(o, Mapping):
            fail(f"options.{m}", f"must be a mapping option -> value, got {type(o).__name__}")
        unknown_keys(f"options.{m}", o, OPTIONS[m])
        clean[m] = {k: grid_axis(f"options.{m}.{k}", val, OPTIONS[m][k]) for k, val in o.items()}
    for m in ("gd", "gd_avg"):
        _check_schedule(m, clean.get(m, {}))
    if "gd_avg" in methods:
        restarts = clean.get("gd_avg", {}).get("restarts", (DEFAULTS["gd_avg"]["restarts"],))
        if min(restarts) < 2:
            fail("options.gd_avg.restarts", f"must be >= 2 to average students, got {min(restarts)}")
    return clean


def _check_schedule(method: str, opts: dict):
    """Refuse a learning-rate decay that some run's budget ``steps`` would not reach, and a factor without it."""
    if "lr_decay" in opts and "lr_decay_at" not in opts:
        fail(f"options.{method}.lr_decay", "is the factor of a step decay; give lr_decay_at (the step) too")
    steps = min(opts.get("steps", (DEFAULTS[method]["steps"],)))
    if "lr_decay_at" in opts and max(opts["lr_decay_at"]) >= steps:
        fail(f"options.{method}.lr_decay_at", f"must be < steps (the decay comes within the budget), "
                                              f"got {max(opts['lr_decay_at'])} with steps = {steps}; "
                                              "put shorter budgets in a spec of their own")


def check_se_solver(se_options: dict, closed: Mapping):
    """Refuse state-evolution options that the solver of some run would not use.

    ``closed`` maps ``(channel, noise)`` of the grid to whether that channel has the closed form.
    """
    for solver, ((ch, noise), has_closed) in itertools.product(
            se_options.get("solver", ("auto",)), closed.items()):
        where = f"channel {ch!r} with noise {noise:g}"
        if solver == "closed" and not has_closed:
            fail("options.se.solver", f"'closed' needs a noiseless softmax or linear channel; "
                                      f"{where} is solved by iteration (use 'auto' or 'iterate')")
        if solver != "iterate" and has_closed:
            for name in _ITERATION_ONLY:
                if name in se_options:
                    fail(f"options.se.{name}", f"is not used by the closed-form solver of {where} "
                                               f"(solver {solver!r}); remove it or set solver: "
                                               "iterate")
