r"""The sweep spec: loading, validation and expansion into runs.

A spec is a small YAML file (or the same mapping in Python, or a
:class:`SweepSpec`)::

    name: softmax_amp_gd            # optional, shown in the progress bar
    method: [amp, gd_avg]           # se | amp | gd | gd_avg, one or a list
    channel: softmax                # softmax | linear | hardmax | deep-hardmax | untied-softmax |
                                    # heads-concatenated (default softmax)
    T: [2, 3]
    rho: 0.5
    alpha_bar: [0.2, 0.4, 0.6]      # or alpha: ...; alpha = alpha_bar / (T^2 + T - 2)
    d: 300
    seeds: [0, 1]                   # default [0]
    beta: 1.0                       # softmax inverse temperature (default 1; the softmax channels only)
    noise: 0.0                      # label-noise variance (default 0)
    c: 0.5                          # residual strength, deep-hardmax only (required there)
    tokens: gaussian                # token law(s), a name or {name: sparse, p: 0.3}
    teachers: wishart               # wishart (W W^T/sqrt(r d)) | centred (minus sqrt(rho) I); one value
    backend: null                   # numpy | cupy | null (AIMLIB_BACKEND / numpy)
    options:                        # per-method options (a list makes a grid axis)
      amp: {max_iter: 300, damping: 0.5}   # also tokens_storage: store | regenerate,
                                           # stop: window (default) | estimate | drift | prediction
      gd_avg: {restarts: 8, steps: 1000, lr: 0.1}
      # gd, gd_avg also take weight_decay (>= 0), student (factorised | direct),
      # rank (the factorised student's width; the direct student has none) and the
      # schedule of aimlib.gd.schedule: lr_decay_at (< steps), lr_decay, keep (last | lowest)

``untied-softmax`` (untied key and query: square teachers ``S = Q K^T/sqrt(r d)``, noiseless,
methods ``se`` and ``amp``, ``alpha_bar = (T^2 - T) alpha``) reports ``mmse = V_A + V_B``, the error
of the whole matrix; ``heads-concatenated`` runs two softmax heads side by side (methods ``se`` and
``amp``, ``rho`` one width or two); the averaged ``heads``, which has no Bayes side, is refused.

Every grid field takes a scalar or a list; ``alpha`` and ``alpha_bar`` also
take a range ``{start: 0.01, stop: 0.2, num: 20, spacing: linear|log}``
(both ends included).  Exactly one of ``alpha`` and ``alpha_bar`` is given;
``alpha_bar`` needs a noiseless softmax, linear or untied softmax channel.  ``rho`` is in
``aimlib._validate.RHO_RANGE`` (``inf``, the Gaussian prior, for ``se``).
``teachers`` (one value, default ``wishart``) is the family a width names
(:func:`aimlib.priors.make_priors`); it enters a run's key only when it is
``centred``; the ``se`` rows of ``deep-hardmax`` with Wishart teachers (whose layers share
the index of ``sqrt(rho) I``) are the separable state evolution of GAMP-RIE with one denoiser
per layer (its cross overlap left out).  For ``deep-hardmax`` (two hardmax layers, ``T = 2``,
methods ``se`` and ``amp``) a value of ``rho`` is one width for both layers or a
list ``[rho_1, rho_2]`` (so ``rho: [[0.25, 0.5], 0.5]`` is a grid of two), and
the result columns ``mmse_layers`` and ``mmse_pred_layers`` hold one error per
layer.  ``tokens`` (default ``gaussian``) is one token law or a list of them
(:func:`aimlib.tokens.token_law`; ``correlated`` takes ``c``, not ``cov``); it
is a grid axis of the finite-``d`` methods and enters a run's key only when it
is not ``gaussian``; a spec with the method ``se`` (which assumes Gaussian
tokens) takes no other law.  ``beta`` needs a softmax channel in the spec.  A
spec expands to at most :data:`MAX_RUNS` runs.  Errors name the field
(``spec field 'options.amp.max_iter': must be >= 1, got 0``); a spec file is
read by :func:`~aimlib.sweep.specfile.read_spec_file` (no anchors, aliases or
repeated keys).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from .. import _validate
from ..channels.registry import CHANNELS as _REGISTRY, PARAMETERS, t_limit
from ..priors import TEACHER_FAMILIES
from ..tokens import token_law
from .fields import SpecError, as_list, checked, choice, fail, grid_axis, shown, unique, unknown_keys
from .keys import Run, canon_float, make_run_channel
from .options import DEFAULTS, IMPLIED, METHODS, UNUSED, check_options, check_se_solver
from .specfile import read_spec_file

#: the channel names: those of the registry (:data:`aimlib.channels.registry.CHANNELS`)
CHANNELS = tuple(_REGISTRY)
#: channels that read several indices per sample, with their number of teachers (``heads-concatenated``:
#: its default two heads)
LAYERED = {name: L for name in CHANNELS if (L := make_run_channel(name).n_indices) > 1}
#: channels with gradient-descent students (their class's ``trainable``)
TRAINABLE = tuple(name for name in CHANNELS if _REGISTRY[name].trainable)
#: channels with an inverse temperature ``beta``
WITH_BETA = tuple(name for name in CHANNELS if "beta" in PARAMETERS[name])
#: channels with a residual strength ``c``
WITH_C = tuple(name for name in CHANNELS if "c" in PARAMETERS[name])

#: the largest number of runs a spec may expand to (and of points in a range)
MAX_RUNS = 1_000_000

_SPEC_FIELDS = ("name", "description", "method", "channel", "T", "rho", "alpha", "alpha_bar",
                "d", "seeds", "beta", "noise", "c", "tokens", "teachers", "backend", "options")


def _canon_axis(fieldname, value, check, *args, **kwargs) -> tuple:
    return unique(canon_float(x) for x in grid_axis(fieldname, value, check, *args, **kwargs))


def _rho_value(fieldname, value, allow_inf: bool):
    """One width ratio, or a list of widths (one per teacher of a layered channel)."""
    if isinstance(value, (list, tuple)):
        if len(value) < 2:
            fail(fieldname, f"a list of widths needs one per teacher (2 or more), got {list(value)}")
        return tuple(canon_float(checked(f"{fieldname}[{i}]", lambda f, r: _validate.rho(r), x))
                     for i, x in enumerate(value))
    return canon_float(checked(fieldname, lambda f, x: _validate.rho(x, allow_inf=allow_inf), value))


def _token_value(fieldname, value) -> tuple:
    """One token law as sorted ``(key, value)`` pairs, floats canonical; ``cov`` is refused."""
    if isinstance(value, Mapping) and "cov" in value:
        fail(f"{fieldname}.cov", "a sweep names a covariance by 'c' (C_ij = c^|i-j|), not 'cov'")
    if isinstance(value, Mapping) and "storage" in value:
        fail(f"{fieldname}.storage", "a sweep sets how tokens are held by options.amp.tokens_storage")
    law = checked(fieldname, lambda f, x: token_law(dict(x) if isinstance(x, Mapping) else x),
                  value)
    return (("name", law.name),) + tuple((k, canon_float(x)) for k, x in law.params)


def _alpha_values(fieldname, value) -> tuple:
    """A list, a scalar or a range ``{start, stop, num, spacing}`` of positive numbers."""
    if not isinstance(value, Mapping):
        return _canon_axis(fieldname, value, _validate.positive)
    unknown_keys(fieldname, value, ("start", "stop", "num", "spacing"))
    for k in ("start", "stop", "num"):
        if k not in value:
            fail(f"{fieldname}.{k}", "is required in a range")
    start = checked(f"{fieldname}.start", _validate.positive, value["start"])
    stop = checked(f"{fieldname}.stop", _validate.positive, value["stop"])
    num = checked(f"{fieldname}.num", _validate.integer, value["num"], 1, MAX_RUNS)
    spacing = choice(f"{fieldname}.spacing", value.get("spacing", "linear"), ("linear", "log"))
    if stop < start:
        fail(f"{fieldname}.stop", f"must be >= start ({start!r}), got {stop!r}")
    if num == 1:
        xs = [start]
    elif spacing == "linear":
        xs = [start + (stop - start) * i / (num - 1) for i in range(num)]
    else:
        ls, le = math.log(start), math.log(stop)
        xs = [math.exp(ls + (le - ls) * i / (num - 1)) for i in range(num)]
    return unique(canon_float(x) for x in xs)


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
    beta: Any = None
    noise: Any = 0.0
    c: Any = None
    tokens: Any = "gaussian"
    teachers: Any = "wishart"
    backend: Any = None
    options: Any = field(default_factory=dict)
    name: Any = None
    description: Any = None

    def __post_init__(self):
        put = partial(object.__setattr__, self)
        methods = grid_axis("method", self.method, choice, METHODS)
        put("method", methods)
        put("channel", grid_axis("channel", self.channel, choice, CHANNELS))
        put("T", grid_axis("T", self.T, _validate.integer, 2))
        only_se = methods == ("se",)
        put("rho", unique(_rho_value(f, x, only_se) for f, x in as_list("rho", self.rho)))
        if (self.alpha is None) == (self.alpha_bar is None):
            fail("alpha", "give exactly one of 'alpha' and 'alpha_bar'")
        if self.alpha is not None:
            put("alpha", _alpha_values("alpha", self.alpha))
        else:
            put("alpha_bar", _alpha_values("alpha_bar", self.alpha_bar))
        if self.d is not None:
            put("d", grid_axis("d", self.d, _validate.integer, 2))
        elif not only_se:
            fail("d", f"is required by method {[m for m in methods if m != 'se'][0]!r}")
        else:
            put("d", ())
        put("seeds", grid_axis("seeds", self.seeds, _validate.integer, 0))
        given_beta = self.beta is not None
        put("beta", _canon_axis("beta", self.beta if given_beta else 1.0, _validate.positive))
        put("noise", _canon_axis("noise", self.noise, _validate.nonnegative))
        if self.c is not None:
            put("c", _canon_axis("c", self.c, _validate.real))
        laws = [("tokens", self.tokens)] if isinstance(self.tokens, Mapping) else \
            as_list("tokens", self.tokens)
        put("tokens", unique(_token_value(f, x) for f, x in laws))
        choice("teachers", self.teachers, TEACHER_FAMILIES)
        self._check_unused(given_beta)
        if self.backend is not None:
            choice("backend", self.backend, ("numpy", "cupy"))
        for f in ("name", "description"):
            val = getattr(self, f)
            if val is not None and not isinstance(val, str):
                fail(f, f"must be a string, got {type(val).__name__} {shown(val)}")
        put("options", check_options(self.options, methods))
        self._check_combinations()
        self._check_size()

    def _check_combinations(self):
        """Refuse the combinations of fields that the library cannot run."""
        for m in self.method:
            if m in ("gd", "gd_avg"):
                if not set(self.channel) <= set(TRAINABLE):
                    fail("channel", f"method {m!r} trains softmax students; channel must be "
                                    f"one of {list(TRAINABLE)}, got {list(self.channel)}")
                if any(x != 0 for x in self.noise):
                    fail("noise", f"method {m!r} has no label noise; noise must be 0")
        for ch in self.channel:
            if not _REGISTRY[ch].bayes_side:
                fail("channel", f"{t_limit(ch, 2)}: channel {ch!r} runs no method of a sweep")
            if len(_REGISTRY[ch].sectors) > 1 and self.teachers != "wishart":
                fail("teachers", f"channel {ch!r} has square teachers S = Q K^T/sqrt(r d) of its own; "
                                 "'teachers' names the tied families: remove it")
        self._check_layers()
        for ch, t, noise in itertools.product(self.channel, self.T, self.noise):
            if limit := t_limit(ch, t, noise):
                fail("noise" if t_limit(ch, t) is None else "T", f"{limit}, got T = {t}, noise = {noise:g}")
        channels = {(c, n): make_run_channel(c, noise=n) for c, n in itertools.product(self.channel, self.noise)}
        if self.alpha_bar is not None and not all(ch.linear_k(t) is not None for ch in channels.values()
                                                  for t in self.T):
            fail("alpha_bar", "alpha_bar = k alpha needs a noiseless channel of exact linear measurements "
                              "(k: T^2+T-2 softmax, T(T+1) linear, T^2-T untied-softmax); give 'alpha' instead")
        if "se" in self.method:   # the closed form: one sector and F = k/V
            check_se_solver(self.options.get("se", {}),
                            {key: not ch.square and all(ch.linear_k(t) is not None for t in self.T)
                             for key, ch in channels.items()})

    def _check_unused(self, given_beta: bool):
        """Refuse ``beta`` without a softmax channel, and non-Gaussian tokens with ``se``."""
        if given_beta and not set(self.channel) & set(WITH_BETA):
            names = f"{', '.join(WITH_BETA[:-1])} and {WITH_BETA[-1]}"
            fail("beta", f"is the {names} channels' inverse temperature; channel "
                         f"{list(self.channel)} has none: remove 'beta'")
        if "se" in self.method and any(law != (("name", "gaussian"),) for law in self.tokens):
            fail("tokens", "method 'se' (the state evolution) assumes Gaussian tokens; put the "
                           "finite-d methods with other token laws in a spec of their own")

    def _check_layers(self):
        """``c`` and lists of widths belong to the layered channels, which run ``se`` and ``amp``."""
        layered = [ch for ch in self.channel if ch in LAYERED]
        with_c = [ch for ch in self.channel if ch in WITH_C]
        if self.c is None and with_c:
            fail("c", f"is required by channel {with_c[0]!r} (the residual strength)")
        if self.c is not None:
            if not with_c:
                fail("c", f"is used by the channels {list(WITH_C)} only")
            for i, c in enumerate(self.c):
                checked(f"c[{i}]" if len(self.c) > 1 else "c",
                        lambda f, x: make_run_channel(with_c[0], c=x), c)
        if layered and any(x != 0 for x in self.noise):
            fail("noise", f"channel {layered[0]!r} has no label noise; noise must be 0")
        if layered and set(self.method) - {"se", "amp"}:
            fail("method", f"channel {layered[0]!r} runs the methods 'se' and 'amp' only")
        for i, r in enumerate(self.rho):
            if isinstance(r, tuple) and any(LAYERED.get(ch) != len(r) for ch in self.channel):
                fail(f"rho[{i}]", f"a list of {len(r)} widths needs channels of {len(r)} teachers, "
                                  f"got {list(self.channel)}")

    def _axes(self, method: str) -> list[tuple[str, int]]:
        """``(field, number of values)`` of the grid axes of ``method``."""
        alpha = "alpha" if self.alpha is not None else "alpha_bar"
        axes = [("channel", len(self.channel)), ("T", len(self.T)), ("rho", len(self.rho)),
                (alpha, len(getattr(self, alpha))), ("beta", len(self.beta)),
                ("noise", len(self.noise)), ("c", len(self.c or (None,)))]
        if method != "se":
            axes += [("d", len(self.d)), ("seeds", len(self.seeds)), ("tokens", len(self.tokens))]
        return axes + [(f"options.{method}.{k}", len(v))
                       for k, v in self.options.get(method, {}).items()]

    def _check_size(self):
        """Refuse a grid of more than :data:`MAX_RUNS` runs, naming its largest axis."""
        total = sum(math.prod(n for _, n in self._axes(m)) for m in self.method)
        if total > MAX_RUNS:
            name, n = max((a for m in self.method for a in self._axes(m)), key=lambda a: a[1])
            fail(name, f"the spec expands to {total} runs, more than the limit of {MAX_RUNS} "
                       f"(this field has {n} values); split it into smaller specs")

    @classmethod
    def from_dict(cls, mapping: Mapping) -> "SweepSpec":
        """Validate a mapping (e.g. parsed YAML); unknown keys are errors."""
        if isinstance(mapping, SweepSpec):
            return mapping
        if not isinstance(mapping, Mapping):
            raise SpecError(f"spec must be a mapping of fields, got {type(mapping).__name__}")
        unknown_keys("", mapping, _SPEC_FIELDS)
        for req in ("method", "T", "rho"):
            if req not in mapping:
                fail(req, "is required")
        return cls(**dict(mapping))

    def to_dict(self) -> dict:
        """A plain mapping (lists) that :meth:`from_dict` turns back into this spec."""
        out = {}
        for f in dataclasses.fields(self):
            val = getattr(self, f.name)
            if f.name == "options":
                val = {m: {k: list(x) for k, x in o.items()} for m, o in val.items()}
            elif f.name == "tokens":
                val = [dict(law) for law in val]
            elif isinstance(val, tuple):
                val = list(val)
            out[f.name] = val
        if out["alpha"] is None:
            del out["alpha"]
        else:
            del out["alpha_bar"]
        if not out["d"]:
            del out["d"]
        if not set(self.channel) & set(WITH_BETA):
            del out["beta"]
        return {k: x for k, x in out.items() if x is not None}


def load_spec(spec) -> SweepSpec:
    """A :class:`SweepSpec` from a spec, a mapping, or a path to a YAML file."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return SweepSpec.from_dict(spec)
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"spec must be a SweepSpec, a mapping or a path, got {type(spec).__name__}")
    data = read_spec_file(Path(spec))
    return SweepSpec.from_dict(data)


def _used(options: tuple) -> tuple:
    """``options`` without those that another option's value makes unused (:data:`UNUSED`) and
    those whose value is the behaviour without them (:data:`~aimlib.sweep.options.IMPLIED`)."""
    unused = {name for item in options for name in UNUSED.get(item, ())}
    return tuple((k, x) for k, x in options if k not in unused and (k, x) not in IMPLIED)


def expand(spec) -> list[Run]:
    """The runs of a spec, in a stable order, without duplicates (equal keys are merged).

    Order: method, then seed (so the first seeds complete whole figures first),
    channel, ``T``, ``rho``, ``beta``, ``c``, ``noise``, ``d``, token law, options,
    ``alpha``.  A Gaussian token law is ``tokens=None`` in a run; ``se`` runs
    have none.
    With ``alpha_bar``, ``alpha = alpha_bar / k``, ``k`` the channel's
    :meth:`~aimlib.channels.base.Channel.linear_k`.
    Options that a run does not use are dropped (``rank`` of the direct
    student, :data:`~aimlib.sweep.options.UNUSED`), so a grid over ``student``
    and ``rank`` gives one direct run per point.
    """
    spec = load_spec(spec)
    runs: dict[str, Run] = {}
    for m in spec.method:
        seeds = (None,) if m == "se" else spec.seeds
        ds = (None,) if m == "se" else spec.d
        laws = unique(None if m == "se" or law == (("name", "gaussian"),) else law
                      for law in spec.tokens)
        opts = {**{k: (v,) for k, v in DEFAULTS[m].items()}, **spec.options.get(m, {})}
        names = sorted(opts)
        combos = unique(_used(tuple(zip(names, vals)))
                        for vals in itertools.product(*(opts[n] for n in names)))
        for seed, ch, T, rho in itertools.product(seeds, spec.channel, spec.T, spec.rho):
            betas = spec.beta if ch in WITH_BETA else (None,)
            cs = spec.c if ch in WITH_C else (None,)
            if ch in LAYERED and not isinstance(rho, tuple):
                rho = (rho,) * LAYERED[ch]
            for beta, c, noise, d, law, opt in itertools.product(betas, cs, spec.noise, ds, laws,
                                                                  combos):
                if spec.alpha is not None:
                    alphas = spec.alpha
                else:
                    k = make_run_channel(ch, noise=noise).linear_k(T)
                    alphas = unique(canon_float(ab / k) for ab in spec.alpha_bar)
                for a in alphas:
                    r = Run(method=m, channel=ch, T=T, rho=rho, alpha=a, beta=beta, noise=noise,
                            c=c, d=d, seed=seed, tokens=law, options=opt, backend=spec.backend,
                            teachers=None if spec.teachers == "wishart" else spec.teachers)
                    runs.setdefault(r.key, r)
    return list(runs.values())
