r"""Experiment sweeps: a grid of runs, executed in parallel, cached in a tidy CSV.

A *sweep* is a grid over the parameters of the attention-indexed model and a
list of methods:

``se``
    the state-evolution fixed point (:func:`aimlib.state_evolution.solve`),
    the Bayes-optimal error in the limit ``d -> inf``; ``d`` and ``seeds`` are
    ignored;
``amp``
    one GAMP-RIE run on sampled data (:func:`aimlib.amp.run_amp`);
``gd``
    gradient descent from ``restarts`` random initialisations
    (:func:`aimlib.gd.run_gd`); ``mmse`` is the mean error of the single
    students;
``gd_avg``
    the same call, but ``mmse`` is the error of the student *averaged* over
    the ``restarts`` initialisations (``restarts >= 2``, default 8).  Both GD
    methods record both numbers (``mmse_single`` and ``mmse_averaged``), so a
    figure with single and averaged GD needs only ``gd_avg``.

The spec is a small YAML file (or the same mapping in Python, or a
:class:`SweepSpec`)::

    name: softmax_amp_gd            # optional, shown in the progress bar
    method: [amp, gd_avg]           # se | amp | gd | gd_avg, one or a list
    channel: softmax                # softmax | linear | hardmax (default softmax)
    T: [2, 3]
    rho: 0.5
    alpha_bar: [0.2, 0.4, 0.6]      # or alpha: ...; alpha = alpha_bar / (T^2 + T - 2)
    d: 300
    seeds: [0, 1]                   # default [0]
    beta: 1.0                       # softmax inverse temperature (default 1)
    noise: 0.0                      # label-noise variance (default 0)
    backend: null                   # numpy | cupy | null (AIMLIB_BACKEND / numpy)
    options:                        # per-method options (a list makes a grid axis)
      amp: {max_iter: 300, damping: 0.5}
      gd_avg: {restarts: 8, steps: 1000, lr: 0.1}

Every grid field takes a scalar or a list; ``alpha`` and ``alpha_bar`` also
take a range ``{start: 0.01, stop: 0.2, num: 20, spacing: linear|log}``
(both ends included).  Exactly one of ``alpha`` and ``alpha_bar`` is given;
``alpha_bar`` needs a noiseless softmax or linear channel.  Errors name the
field (``spec field 'options.amp.max_iter': must be an integer >= 1, got 0``).

Expansion and keys
------------------
:func:`expand` turns a spec into a list of :class:`Run`, ordered method by
method and, inside a method, seed by seed (a partly finished sweep of many
seeds holds whole figures of the first seeds).  Each run has a stable *run
key*, the first 16 hex digits of the SHA-256 of its canonical parameters
(JSON with sorted keys; floats rounded to 12 significant digits; only the
parameters the method uses, with the sweep's defaults for ``restarts``,
``steps``, ``max_iter`` and ``dtype`` filled in).  The key does not depend on
the spec's layout, on the order of its lists, on ``backend`` or on where the
run executes; options left to the library's defaults are not part of it (the
``aimlib_version`` column records the code).  Runs with equal keys are
merged.

Results, caching and resume
---------------------------
:func:`run_sweep` writes one CSV row per run (:data:`COLUMNS`: the key, all
parameters, the metrics ``n, mmse, q, iterations, converged, mmse_pred,
mmse_single, mmse_single_std, mmse_averaged, seconds`` where they apply, and
``aimlib_version, backend, hostname, timestamp``).  Rows already in the file
are not recomputed, so rerunning a finished sweep computes nothing and
enlarging a spec computes only the new runs.  Only the parent process writes:
each finished row is appended as one line, flushed and ``fsync``-ed under an
exclusive lock (``fcntl.flock`` on the CSV, so two sweeps cannot write one
file; POSIX only, no lock on Windows), so a crash or a ``kill -9`` loses at
most the runs in flight (``SIGTERM``/Ctrl-C to the command line stop it
cleanly, with exit status 130).  On resume, an incomplete last line (bytes
after the last newline) is cut off and recomputed; rows are never
duplicated.  When every run of the spec is in the file, it is rewritten
(atomically, with ``os.replace``) in expansion order, which keeps committed
data diff-friendly; rows of other specs in the same file are kept after them.

A run that raises (e.g. :class:`aimlib.ConvergenceError`) writes no row; it
is reported in :attr:`SweepReport.failures` and retried by the next call.

Where runs execute
------------------
``scheduler=None`` (default)
    a local ``concurrent.futures.ProcessPoolExecutor`` with ``workers``
    processes (default: the number of CPUs; ``workers=1`` runs serially in
    this process);
``scheduler='local'``
    a ``dask.distributed.LocalCluster`` started for the sweep
    (``workers`` processes, one thread each);
``scheduler='tcp://host:8786'``
    an existing Dask cluster (its workers need ``aimlib`` installed);
a ``distributed.Client``
    used as is (left open).

Locally, every worker process runs BLAS with ``threads_per_worker`` threads
(default 1: ``OMP_NUM_THREADS`` & co. are set for the workers unless already
set), so ``workers`` = cores is the efficient setting.

On a SLURM cluster, start the workers with ``dask-jobqueue``
(``pip install dask-jobqueue``) and pass the client::

    from dask_jobqueue import SLURMCluster
    from distributed import Client
    from aimlib import sweep

    cluster = SLURMCluster(cores=8, processes=8, memory="32GB", walltime="04:00:00",
                           job_extra_directives=["--partition=cpu"],
                           job_script_prologue=["source /path/to/.venv/bin/activate",
                                                "export OMP_NUM_THREADS=1"])
    cluster.scale(jobs=4)              # 4 SLURM jobs x 8 workers
    sweep.run_sweep("sweeps/softmax_amp_gd_d300.yaml", "sweeps/softmax_amp_gd_d300.csv",
                    scheduler=Client(cluster))

(or run ``python -m aimlib sweep SPEC --scheduler tcp://...`` against the
scheduler of such a cluster).  The CSV is written only by the submitting
process, so it must live on a disk that process can write; the workers need
no shared file system.

Command line::

    python -m aimlib sweep sweeps/softmax_se.yaml --out sweeps/softmax_se.csv [--scheduler ADDRESS]
        [--workers N] [--no-progress] [--dry-run]

Requirements: ``pyyaml`` for YAML files, ``tqdm`` for the progress bar and
``dask[distributed]`` for the Dask schedulers (``pip install -e .[sweep]``);
none is needed to build a spec in Python and run it on the process pool.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import difflib
import hashlib
import io
import itertools
import json
import math
import numbers
import os
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

__all__ = [
    "SpecError",
    "SweepSpec",
    "Run",
    "SweepReport",
    "METHODS",
    "CHANNELS",
    "COLUMNS",
    "load_spec",
    "expand",
    "run_key",
    "execute",
    "run_sweep",
    "read_results",
]

METHODS = ("se", "amp", "gd", "gd_avg")
CHANNELS = ("softmax", "linear", "hardmax")

#: the CSV columns, in order
COLUMNS = [
    "key",
    # parameters
    "method", "channel", "T", "rho", "alpha", "alpha_bar", "beta", "noise", "d", "seed",
    "restarts", "steps", "max_iter", "dtype", "options",
    # metrics
    "n", "mmse", "q", "iterations", "converged", "mmse_pred", "mmse_single", "mmse_single_std",
    "mmse_averaged", "seconds",
    # provenance
    "aimlib_version", "backend", "hostname", "timestamp",
]

_INT_COLUMNS = {"T", "d", "seed", "restarts", "steps", "max_iter", "n", "iterations"}
_FLOAT_COLUMNS = {"rho", "alpha", "alpha_bar", "beta", "noise", "mmse", "q", "mmse_pred",
                  "mmse_single", "mmse_single_std", "mmse_averaged", "seconds"}
_BOOL_COLUMNS = {"converged"}


class SpecError(ValueError):
    """An invalid sweep spec; the message names the offending field."""


def _fail(fieldname: str, message: str):
    raise SpecError(f"spec field {fieldname!r}: {message}")


# ---------------------------------------------------------------------------
# scalar checks (every message names the field)
# ---------------------------------------------------------------------------

def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _int(fieldname, x, minimum=None):
    if not _is_int(x):
        _fail(fieldname, f"must be an integer, got {type(x).__name__} {x!r}")
    x = int(x)
    if minimum is not None and x < minimum:
        _fail(fieldname, f"must be an integer >= {minimum}, got {x}")
    return x


def _float(fieldname, x, *, low=None, low_open=False, high=None, high_open=False,
           allow_inf=False):
    if not _is_real(x):
        _fail(fieldname, f"must be a real number, got {type(x).__name__} {x!r}")
    x = float(x)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        _fail(fieldname, f"must be a finite number, got {x!r}")
    if low is not None and (x < low or (low_open and x == low)):
        _fail(fieldname, f"must be {'>' if low_open else '>='} {low:g}, got {x!r}")
    if high is not None and (x > high or (high_open and x == high)):
        _fail(fieldname, f"must be {'<' if high_open else '<='} {high:g}, got {x!r}")
    return x


def _choice(fieldname, x, allowed):
    if not isinstance(x, str) or x not in allowed:
        close = difflib.get_close_matches(str(x), list(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        _fail(fieldname, f"must be one of {', '.join(map(repr, allowed))}, got {x!r}{hint}")
    return x


def _unknown_keys(where: str, keys: Iterable, allowed: Iterable):
    allowed = list(allowed)
    for k in keys:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            name = f"{where}.{k}" if where else str(k)
            raise SpecError(f"spec field {name!r}: unknown key{hint}; allowed: {', '.join(allowed)}")


def _as_list(fieldname, value) -> list[tuple[str, Any]]:
    """``[(field[i], item), ...]`` for a scalar or a list; an empty list is an error."""
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            _fail(fieldname, "must not be an empty list")
        return [(f"{fieldname}[{i}]", x) for i, x in enumerate(value)]
    if isinstance(value, (Mapping, set)):
        _fail(fieldname, f"must be a value or a list of values, got {type(value).__name__}")
    return [(fieldname, value)]


def _unique(values: list) -> tuple:
    out = []
    for x in values:
        if x not in out:
            out.append(x)
    return tuple(out)


def _canon_float(x: float) -> float:
    """Round to 12 significant digits, so ``0.1 + 0.2`` and ``0.3`` name the same run."""
    return float(f"{x:.12g}") if math.isfinite(x) else x


def _alpha_values(fieldname, value) -> tuple:
    """A list, a scalar or a range ``{start, stop, num, spacing}`` of positive numbers."""
    if isinstance(value, Mapping):
        _unknown_keys(fieldname, value, ("start", "stop", "num", "spacing"))
        for k in ("start", "stop", "num"):
            if k not in value:
                _fail(f"{fieldname}.{k}", "is required in a range")
        start = _float(f"{fieldname}.start", value["start"], low=0, low_open=True)
        stop = _float(f"{fieldname}.stop", value["stop"], low=0, low_open=True)
        num = _int(f"{fieldname}.num", value["num"], minimum=1)
        spacing = _choice(f"{fieldname}.spacing", value.get("spacing", "linear"), ("linear", "log"))
        if stop < start:
            _fail(f"{fieldname}.stop", f"must be >= start ({start!r}), got {stop!r}")
        if num == 1:
            xs = [start]
        elif spacing == "linear":
            xs = [start + (stop - start) * i / (num - 1) for i in range(num)]
        else:
            ls, le = math.log(start), math.log(stop)
            xs = [math.exp(ls + (le - ls) * i / (num - 1)) for i in range(num)]
        return _unique([_canon_float(x) for x in xs])
    return _unique([_canon_float(_float(f, x, low=0, low_open=True))
                    for f, x in _as_list(fieldname, value)])


# ---------------------------------------------------------------------------
# per-method options
# ---------------------------------------------------------------------------

def _opt_int(minimum):
    return lambda f, x: _int(f, x, minimum)


def _opt_float(**kw):
    return lambda f, x: _float(f, x, **kw)


def _opt_choice(*allowed):
    return lambda f, x: _choice(f, x, allowed)


_GD_OPTIONS = {
    "restarts": _opt_int(1), "steps": _opt_int(1), "lr": _opt_float(low=0, low_open=True),
    "optimizer": _opt_choice("adam", "gd"), "tol": _opt_float(low=0),
    "batch_size": _opt_int(1), "init_scale": _opt_float(low=0, low_open=True),
    "rank": _opt_int(1), "n_test": _opt_int(1), "record_every": _opt_int(1),
    "dtype": _opt_choice("float32", "float64"),
}

#: method -> option name -> checker(field, value) -> value
OPTIONS: dict[str, dict] = {
    "se": {"solver": _opt_choice("auto", "closed", "iterate"),
           "tol": _opt_float(low=0, low_open=True), "max_iter": _opt_int(1),
           "damping": _opt_float(low=0, high=1, high_open=True)},
    "amp": {"max_iter": _opt_int(1), "damping": _opt_float(low=0, high=1, high_open=True),
            "tol": _opt_float(low=0, low_open=True), "lookback": _opt_int(1),
            "min_iter": _opt_int(1), "damp": _opt_choice("both", "state", "messages"),
            "memory_mb": _opt_float(low=0, low_open=True), "chunk_size": _opt_int(1),
            "dtype": _opt_choice("float32", "float64")},
    "gd": dict(_GD_OPTIONS),
    "gd_avg": dict(_GD_OPTIONS),
}

#: defaults that are part of the run key (so changing them here never reuses stale rows)
DEFAULTS: dict[str, dict] = {
    "se": {},
    "amp": {"max_iter": 300, "dtype": "float64"},
    "gd": {"restarts": 1, "steps": 1000, "dtype": "float32"},
    "gd_avg": {"restarts": 8, "steps": 1000, "dtype": "float32"},
}


# ---------------------------------------------------------------------------
# the spec
# ---------------------------------------------------------------------------

_SPEC_FIELDS = ("name", "description", "method", "channel", "T", "rho", "alpha", "alpha_bar",
                "d", "seeds", "beta", "noise", "backend", "options")


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep grid (see the module docstring for the fields).

    Construct it from keywords (``SweepSpec(method='se', T=[2, 3], rho=0.5,
    alpha=[0.05, 0.1])``), from a mapping (:meth:`from_dict`) or a YAML file
    (:func:`load_spec`).  Grid fields accept a scalar or a list and are
    stored as tuples; bad values raise :class:`SpecError` naming the field.
    """

    method: Any
    T: Any
    rho: Any
    alpha: Any = None
    alpha_bar: Any = None
    d: Any = None
    seeds: Any = (0,)
    channel: Any = "softmax"
    beta: Any = 1.0
    noise: Any = 0.0
    backend: Any = None
    options: Any = field(default_factory=dict)
    name: Any = None
    description: Any = None

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        methods = _unique([_choice(f, x, METHODS) for f, x in _as_list("method", self.method)])
        put("method", methods)
        channels = _unique([_choice(f, x, CHANNELS) for f, x in _as_list("channel", self.channel)])
        put("channel", channels)
        put("T", _unique([_int(f, x, 2) for f, x in _as_list("T", self.T)]))
        finite_rho = any(m != "se" for m in methods)
        put("rho", _unique([_canon_float(_float(f, x, low=0, low_open=True, allow_inf=not finite_rho))
                            for f, x in _as_list("rho", self.rho)]))
        if (self.alpha is None) == (self.alpha_bar is None):
            _fail("alpha", "give exactly one of 'alpha' and 'alpha_bar'")
        if self.alpha is not None:
            put("alpha", _alpha_values("alpha", self.alpha))
        else:
            put("alpha_bar", _alpha_values("alpha_bar", self.alpha_bar))
        needs_d = any(m != "se" for m in methods)
        if self.d is None:
            if needs_d:
                _fail("d", f"is required by method {[m for m in methods if m != 'se'][0]!r}")
            put("d", ())
        else:
            put("d", _unique([_int(f, x, 2) for f, x in _as_list("d", self.d)]))
        put("seeds", _unique([_int(f, x, 0) for f, x in _as_list("seeds", self.seeds)]))
        put("beta", _unique([_canon_float(_float(f, x, low=0, low_open=True))
                             for f, x in _as_list("beta", self.beta)]))
        put("noise", _unique([_canon_float(_float(f, x, low=0)) for f, x in _as_list("noise", self.noise)]))
        if self.backend is not None:
            _choice("backend", self.backend, ("numpy", "cupy"))
        for f in ("name", "description"):
            val = getattr(self, f)
            if val is not None and not isinstance(val, str):
                _fail(f, f"must be a string, got {type(val).__name__} {val!r}")
        # per-method options: method -> name -> tuple of values
        opts = self.options if self.options is not None else {}
        if not isinstance(opts, Mapping):
            _fail("options", f"must be a mapping method -> {{option: value}}, got {type(opts).__name__}")
        _unknown_keys("options", opts, METHODS)
        clean = {}
        for m, o in opts.items():
            if m not in methods:
                _fail(f"options.{m}", f"method {m!r} is not in 'method' ({', '.join(methods)})")
            if o is None:
                o = {}
            if not isinstance(o, Mapping):
                _fail(f"options.{m}", f"must be a mapping option -> value, got {type(o).__name__}")
            _unknown_keys(f"options.{m}", o, OPTIONS[m])
            clean[m] = {k: _unique([OPTIONS[m][k](f, x) for f, x in _as_list(f"options.{m}.{k}", val)])
                        for k, val in o.items()}
        for m in methods:
            r = clean.get(m, {}).get("restarts", (DEFAULTS[m].get("restarts"),))
            if m == "gd_avg" and min(r) < 2:
                _fail("options.gd_avg.restarts", f"must be >= 2 to average students, got {min(r)}")
        put("options", clean)
        # combinations the library cannot run
        for m in methods:
            if m in ("gd", "gd_avg"):
                if channels != ("softmax",):
                    _fail("channel", f"method {m!r} trains softmax students; channel must be "
                                     f"'softmax', got {list(channels)}")
                if any(x != 0 for x in self.noise):
                    _fail("noise", f"method {m!r} has no label noise; noise must be 0")
        if "hardmax" in channels and any(t != 2 for t in self.T):
            _fail("T", "the hardmax channel's Bayes side needs T = 2")
        if self.alpha_bar is not None:
            if any(c == "hardmax" for c in channels) or any(x != 0 for x in self.noise):
                _fail("alpha_bar", "alpha_bar = (T^2+T-2) alpha needs a noiseless softmax or "
                                   "linear channel; give 'alpha' instead")

    @classmethod
    def from_dict(cls, mapping: Mapping) -> "SweepSpec":
        """Validate a mapping (e.g. parsed YAML); unknown keys are errors."""
        if isinstance(mapping, SweepSpec):
            return mapping
        if not isinstance(mapping, Mapping):
            raise SpecError(f"spec must be a mapping of fields, got {type(mapping).__name__}")
        _unknown_keys("", mapping, _SPEC_FIELDS)
        for req in ("method", "T", "rho"):
            if req not in mapping:
                _fail(req, "is required")
        return cls(**dict(mapping))

    def to_dict(self) -> dict:
        """A plain mapping (lists) that :meth:`from_dict` turns back into this spec."""
        out = {}
        for f in dataclasses.fields(self):
            val = getattr(self, f.name)
            if f.name == "options":
                val = {m: {k: list(x) for k, x in o.items()} for m, o in val.items()}
            elif isinstance(val, tuple):
                val = list(val)
            out[f.name] = val
        if out["alpha"] is None:
            del out["alpha"]
        else:
            del out["alpha_bar"]
        if not out["d"]:
            del out["d"]
        return {k: x for k, x in out.items() if x is not None}


def load_spec(spec) -> SweepSpec:
    """A :class:`SweepSpec` from a spec, a mapping, or a path to a YAML file."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return SweepSpec.from_dict(spec)
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError(f"cannot read spec file {str(path)!r}: {exc.strerror or exc}") from None
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - pyyaml is in requirements
            raise ImportError("reading a YAML sweep spec needs pyyaml (pip install pyyaml)") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "parse error"
            raise SpecError(f"spec file {str(path)!r} is not valid YAML{where}: {problem}") from None
        if data is None:
            raise SpecError(f"spec file {str(path)!r} is empty")
        return SweepSpec.from_dict(data)
    raise TypeError(f"spec must be a SweepSpec, a mapping or a path, got {type(spec).__name__}")


# ---------------------------------------------------------------------------
# runs and keys
# ---------------------------------------------------------------------------

def _k(channel: str, T: int):
    """``k`` in ``alpha_bar = k alpha`` (noiseless softmax and linear channels)."""
    return {"softmax": T * T + T - 2, "linear": T * (T + 1)}.get(channel)


def run_key(params: Mapping) -> str:
    """The run key: 16 hex digits of SHA-256 of the canonical JSON of ``params``."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Run:
    """One point of a sweep.  ``key`` is computed from :meth:`params` (never from ``backend``)."""

    method: str
    channel: str
    T: int
    rho: float
    alpha: float
    beta: float | None = None
    noise: float = 0.0
    d: int | None = None
    seed: int | None = None
    options: tuple = ()
    backend: str | None = None
    key: str = field(init=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "key", run_key(self.params()))

    @property
    def alpha_bar(self) -> float | None:
        k = _k(self.channel, self.T) if self.noise == 0 else None
        return None if k is None else _canon_float(k * self.alpha)

    def params(self) -> dict:
        """The canonical parameters that define the run (and its key)."""
        p = {"method": self.method, "channel": self.channel, "T": self.T, "rho": self.rho,
             "alpha": self.alpha, "noise": self.noise, "options": dict(self.options)}
        if self.channel == "softmax":
            p["beta"] = self.beta
        if self.method != "se":
            p["d"] = self.d
            p["seed"] = self.seed
        return p


def expand(spec) -> list[Run]:
    """The runs of a spec, in a stable order, without duplicates (equal keys are merged).

    Order: method, then seed (so the first seeds complete whole figures first),
    channel, ``T``, ``rho``, ``beta``, ``noise``, ``d``, options, ``alpha``.
    """
    spec = load_spec(spec)
    runs: dict[str, Run] = {}
    for m in spec.method:
        seeds = (None,) if m == "se" else spec.seeds
        ds = (None,) if m == "se" else spec.d
        opts = {**{k: (v,) for k, v in DEFAULTS[m].items()}, **spec.options.get(m, {})}
        names = sorted(opts)
        combos = [tuple(zip(names, vals)) for vals in itertools.product(*(opts[n] for n in names))]
        for seed, ch, T, rho in itertools.product(seeds, spec.channel, spec.T, spec.rho):
            betas = spec.beta if ch == "softmax" else (None,)
            for beta, noise, d, opt in itertools.product(betas, spec.noise, ds, combos):
                if spec.alpha is not None:
                    alphas = spec.alpha
                else:
                    alphas = _unique([_canon_float(ab / _k(ch, T)) for ab in spec.alpha_bar])
                for a in alphas:
                    r = Run(method=m, channel=ch, T=T, rho=rho, alpha=a, beta=beta, noise=noise,
                            d=d, seed=seed, options=opt, backend=spec.backend)
                    runs.setdefault(r.key, r)
    return list(runs.values())


# ---------------------------------------------------------------------------
# executing one run (in a worker)
# ---------------------------------------------------------------------------

def _make_channel(run: Run):
    from .state_evolution import make_se_channel

    return make_se_channel(run.channel, beta=run.beta if run.beta is not None else 1.0,
                           noise=run.noise)


def execute(run: Run) -> dict:
    """Compute one run and return its CSV row (a dict over :data:`COLUMNS`).

    Runs in the worker; raises whatever the method raises.
    """
    import aimlib

    t0 = time.perf_counter()
    opts = dict(run.options)
    row: dict[str, Any] = {c: None for c in COLUMNS}
    backend = "numpy"
    if run.method == "se":
        from . import state_evolution as se

        kw = {}
        if "solver" in opts:
            kw["method"] = opts.pop("solver")
        res = se.solve(run.alpha, _make_channel(run), T=run.T, rho=run.rho, **kw, **opts)
        row.update(mmse=res.mmse, q=res.q, iterations=res.iterations)
    elif run.method == "amp":
        from . import amp
        from .backend import backend_name, module_named

        backend = backend_name(module_named(run.backend))
        dtype = opts.pop("dtype")
        out = amp.run_amp(_make_channel(run), run.T, run.rho, run.alpha, run.d, run.seed,
                          backend=run.backend, dtype=dtype, **opts)
        row.update(n=out["n"], mmse=out["mmse"], iterations=out["iterations"],
                   converged=out["converged"], mmse_pred=out["m"])
    else:  # gd, gd_avg
        from . import gd
        from .backend import backend_name, module_named

        backend = backend_name(module_named(run.backend))
        dtype = opts.pop("dtype")
        restarts = opts.pop("restarts")
        out = gd.run_gd(run.T, run.rho, run.alpha, run.d, run.seed, restarts=restarts,
                        backend=run.backend, dtype=dtype, beta=run.beta, **opts)
        # per-restart errors: 'mmse_single_all' (newer run_gd) or a list in 'mmse_single'
        single = out.get("mmse_single_all", out["mmse_single"])
        single = [float(x) for x in (single if isinstance(single, (list, tuple)) else [single])]
        mean = sum(single) / len(single)
        std = (math.sqrt(sum((x - mean) ** 2 for x in single) / (len(single) - 1))
               if len(single) > 1 else float(out.get("mmse_single_std", 0.0)))
        avg = float(out["mmse_averaged"])
        row.update(n=out["n"], mmse=avg if run.method == "gd_avg" else mean,
                   iterations=max(int(s) for s in out["n_steps"]), mmse_single=mean,
                   mmse_single_std=std, mmse_averaged=avg)
    row.update(_param_columns(run))
    row.update(seconds=time.perf_counter() - t0, aimlib_version=aimlib.__version__,
               backend=backend, hostname=socket.gethostname(),
               timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    return row


def _param_columns(run: Run) -> dict:
    opts = dict(run.options)
    return {"key": run.key, "method": run.method, "channel": run.channel, "T": run.T,
            "rho": run.rho, "alpha": run.alpha, "alpha_bar": run.alpha_bar, "beta": run.beta,
            "noise": run.noise, "d": run.d, "seed": run.seed, "restarts": opts.get("restarts"),
            "steps": opts.get("steps"), "max_iter": opts.get("max_iter"),
            "dtype": opts.get("dtype"),
            "options": json.dumps(opts, sort_keys=True, separators=(",", ":"))}


# ---------------------------------------------------------------------------
# the CSV: atomic appends, resume, typed reading
# ---------------------------------------------------------------------------

def _format(x) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)
    return str(x)


def _csv_line(values: Iterable) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


_HEADER = _csv_line(COLUMNS)


def _parse(name: str, text: str):
    if text == "":
        return None
    if name in _INT_COLUMNS:
        return int(text)
    if name in _FLOAT_COLUMNS:
        return float(text)
    if name in _BOOL_COLUMNS:
        return text == "true"
    return text


def read_results(path, *, keys: Iterable[str] | None = None) -> list[dict]:
    """The rows of a sweep CSV as dicts with typed values (an incomplete last line is skipped).

    ``keys`` (e.g. ``[r.key for r in expand(spec)]``) selects and orders rows.
    """
    text = Path(path).read_text()
    complete = text[: text.rfind("\n") + 1]
    rows = [{k: _parse(k, x) for k, x in r.items()} for r in csv.DictReader(io.StringIO(complete))]
    if keys is None:
        return rows
    by_key = {r["key"]: r for r in rows}
    return [by_key[k] for k in keys if k in by_key]


class _ResultsFile:
    """The CSV, held open with an exclusive lock; rows are appended atomically and fsync-ed."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                _flock(fd, path)
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not replaced by another sweep's final rewrite meanwhile
                break
            os.close(fd)
        self.fd = fd
        self.lines: dict[str, str] = {}  # key -> complete CSV line
        self.order: list[str] = []
        self._load()

    def _load(self):
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, size, 0) if size else b""
        end = data.rfind(b"\n") + 1
        if end < len(data):  # an interrupted write: drop the incomplete line
            warnings.warn(f"{self.path}: dropping an incomplete last line "
                          f"({len(data) - end} bytes) left by an interrupted sweep", RuntimeWarning,
                          stacklevel=3)
            os.ftruncate(self.fd, end)
            data = data[:end]
        text = data.decode()
        if not text:
            self._append(_HEADER)
            return
        header, _, body = text.partition("\n")
        if header + "\n" != _HEADER:
            raise ValueError(f"{self.path} exists but is not a sweep CSV of this aimlib version "
                             f"(its header differs); choose another --out")
        for i, line in enumerate(body.splitlines(keepends=True), start=2):
            fields = next(csv.reader([line]))
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{self.path}: line {i} has {len(fields)} fields, expected "
                                 f"{len(COLUMNS)}; the file is corrupt")
            key = fields[0]
            if key in self.lines:
                warnings.warn(f"{self.path}: duplicate row for key {key} on line {i} ignored",
                              RuntimeWarning, stacklevel=3)
                continue
            self.lines[key] = line
            self.order.append(key)

    def _append(self, line: str):
        data = line.encode()
        with self.lock:
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
            os.fsync(self.fd)

    def add(self, row: dict):
        key = row["key"]
        if key in self.lines:  # never duplicate (a run finished twice, e.g. after a retry)
            return
        line = _csv_line(_format(row[c]) for c in COLUMNS)
        self._append(line)
        self.lines[key] = line
        self.order.append(key)

    def rewrite(self, first: list[str]):
        """Rewrite the file with the rows of ``first`` (in that order), then the others."""
        head = [k for k in first if k in self.lines]
        seen = set(head)
        keys = head + [k for k in self.order if k not in seen]
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", newline="") as fh:
            fh.write(_HEADER)
            fh.writelines(self.lines[k] for k in keys)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self.order = keys

    def close(self):
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _flock(fd: int, path: Path):
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no locking
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ValueError(f"{path} is being written by another sweep (it is locked)") from None


def _fsync_dir(path: Path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - not supported everywhere
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# schedulers
# ---------------------------------------------------------------------------

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


class _worker_env:
    """Set the BLAS thread counts for worker processes started inside the block."""

    def __init__(self, threads: int):
        self.threads = str(threads)
        self.saved: dict[str, str | None] = {}

    def __enter__(self):
        for var in _THREAD_VARS:
            if var not in os.environ:
                self.saved[var] = None
                os.environ[var] = self.threads
        return self

    def __exit__(self, *exc):
        for var in self.saved:
            os.environ.pop(var, None)


def _serial(todo: list[Run]) -> Iterator:
    for run in todo:
        try:
            yield run, execute(run)
        except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
            yield run, exc


def _process_pool(todo: list[Run], workers: int, threads: int) -> Iterator:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with _worker_env(threads):
        ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        try:
            futures = {ex.submit(execute, run): run for run in todo}
            yield from _collect(futures, as_completed)
        finally:
            ex.shutdown(wait=False, cancel_futures=True)


def _collect(futures: dict, as_completed) -> Iterator:
    """Yield ``(run, row or exception)`` as the futures (``future -> run``) complete."""
    for fut in as_completed(list(futures)):
        run = futures[fut]
        try:
            yield run, fut.result()
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, not fatal
            yield run, exc


def _dask(todo: list[Run], scheduler, workers: int, threads: int) -> Iterator:
    try:
        import distributed
    except ImportError as exc:
        raise ImportError("a Dask scheduler needs dask[distributed] "
                          "(pip install 'dask[distributed]')") from exc
    cluster = None
    own = not isinstance(scheduler, distributed.Client)
    if own and not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be None, a string or a distributed.Client, "
                        f"got {type(scheduler).__name__}")
    with _worker_env(threads):
        if not own:
            client = scheduler
        elif scheduler == "local":
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                               processes=True, dashboard_address=":0")
            client = distributed.Client(cluster)
        else:
            try:
                client = distributed.Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ValueError(f"scheduler: cannot connect to {scheduler!r} ({exc})") from None
    futures = {}
    try:
        n = len(todo)
        for i, run in enumerate(todo):
            fut = client.submit(execute, run, key=f"aimlib-sweep-{run.key}", pure=False,
                                priority=n - i)
            futures[fut] = run
        yield from _collect(futures, distributed.as_completed)
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        futures.clear()
        if own:
            client.close()
            if cluster is not None:
                cluster.close()


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------

@dataclass
class SweepReport:
    """What :func:`run_sweep` did.

    ``n_runs`` runs in the spec, ``n_cached`` found in the CSV, ``n_computed``
    computed now (submitted and finished with a row), ``failures`` the runs
    that raised (``(run, message)``; no row written, retried next time).
    """

    path: Path
    n_runs: int
    n_cached: int
    n_computed: int = 0
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    keys: list = field(default_factory=list, repr=False)

    @property
    def complete(self) -> bool:
        """True if every run of the spec has a row."""
        return self.n_cached + self.n_computed == self.n_runs

    def rows(self) -> list[dict]:
        """The spec's rows from the CSV, in expansion order."""
        return read_results(self.path, keys=self.keys)

    def summary(self) -> str:
        return (f"{self.n_runs} runs: {self.n_cached} cached, {self.n_computed} computed, "
                f"{len(self.failures)} failed -> {self.path} ({self.seconds:.1f} s)")


def _progress(total, initial, desc, enabled):
    if enabled:
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is in requirements
            warnings.warn("progress bar disabled: tqdm is not installed", RuntimeWarning)
        else:
            return tqdm(total=total, initial=initial, desc=desc, unit="run", smoothing=0.05,
                        dynamic_ncols=True)

    class _Null:
        def update(self, n=1):
            pass

        def set_postfix_str(self, s):
            pass

        def close(self):
            pass

    return _Null()


def run_sweep(spec, out, *, scheduler=None, workers: int | None = None,
              threads_per_worker: int = 1, progress: bool = True, sort: bool = True,
              dry_run: bool = False) -> SweepReport:
    """Compute the runs of ``spec`` that ``out`` (a CSV) lacks, appending one row per run.

    Parameters
    ----------
    spec : SweepSpec, mapping or path to a YAML file
    out : path
        The results CSV (created if missing; its finished rows are reused).
    scheduler : None, 'serial', 'local', an address 'tcp://...', or a distributed.Client
        Where to run (see the module docstring).  ``None``: a local process
        pool (serial if ``workers == 1``).
    workers : int, optional
        Worker processes for the process pool and ``'local'`` (default: CPUs).
    threads_per_worker : int
        BLAS threads per local worker (default 1).
    progress : bool
        Show a tqdm progress bar on stderr.
    sort : bool
        When the spec is complete, rewrite the CSV in expansion order.
    dry_run : bool
        Only count: return the report without computing anything.

    Returns
    -------
    SweepReport
    """
    t0 = time.perf_counter()
    spec = load_spec(spec)
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if (isinstance(threads_per_worker, bool) or not isinstance(threads_per_worker, numbers.Integral)
            or threads_per_worker < 1):
        raise ValueError(f"threads_per_worker must be an integer >= 1, got {threads_per_worker!r}")
    if scheduler is not None and isinstance(scheduler, str) and not (
            scheduler in ("serial", "local", "processes") or "://" in scheduler):
        raise ValueError(f"scheduler must be 'serial', 'local', 'processes' or an address like "
                         f"'tcp://host:8786', got {scheduler!r}")
    runs = expand(spec)
    keys = [r.key for r in runs]
    path = Path(out)
    if dry_run:
        have = set()
        if path.exists():
            have = {r["key"] for r in read_results(path)}
        n_cached = sum(k in have for k in keys)
        return SweepReport(path, len(runs), n_cached, seconds=time.perf_counter() - t0, keys=keys)
    results = _ResultsFile(path)
    try:
        todo = [r for r in runs if r.key not in results.lines]
        report = SweepReport(path, len(runs), len(runs) - len(todo), keys=keys)
        if todo:
            if scheduler in (None, "processes", "serial"):
                if scheduler == "serial" or workers == 1 or len(todo) == 1:
                    it = _serial(todo)
                else:
                    it = _process_pool(todo, min(workers, len(todo)), threads_per_worker)
            else:
                it = _dask(todo, scheduler, min(workers, len(todo)), threads_per_worker)
            bar = _progress(len(runs), report.n_cached, spec.name or path.stem, progress)
            try:
                for run, res in it:
                    if isinstance(res, BaseException):
                        msg = " ".join(f"{type(res).__name__}: {res}".split())
                        report.failures.append((run, msg))
                        bar.set_postfix_str(f"{len(report.failures)} failed")
                        continue
                    results.add(res)
                    report.n_computed += 1
                    bar.update(1)
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
                bar.close()
        if sort and all(k in results.lines for k in keys) and results.order[: len(keys)] != keys:
            results.rewrite(keys)
    finally:
        results.close()
    report.seconds = time.perf_counter() - t0
    for run, msg in report.failures:
        warnings.warn(f"run {run.key} ({run.method}, T={run.T}, alpha={run.alpha}, d={run.d}, "
                      f"seed={run.seed}) failed: {msg}", RuntimeWarning, stacklevel=2)
    return report
