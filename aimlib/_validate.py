"""Input checks shared by every public function: clear errors that name the parameter."""
from __future__ import annotations

import contextvars
import math
import numbers
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import files
from .backend import get_array_module

# Width ratios for which every routine of aimlib is tested to full accuracy.
RHO_RANGE = (1e-4, 1e4)
#: the noise variances ``Delta`` that :mod:`aimlib.rmt` accepts (tested to full accuracy) and on which a
#: prior's MMSE is computed; beyond them its leading asymptotics take over (:func:`aimlib.priors.extend_mmse`)
DELTA_RANGE = (1e-12, 1e12)
#: Default memory budget (MiB) of the routines that allocate sizes the user chooses: 8 GiB.
MEMORY_MB = 8192.0
_MINIMUM = {"T": 2, "d": 2}
#: what a memory error advises besides lowering a size; ``None`` where the budget is no
#: parameter of the caller (the command line sets it so, see :func:`aimlib.cli.main`)
MEMORY_ADVICE: contextvars.ContextVar = contextvars.ContextVar("MEMORY_ADVICE", default="raise memory_mb")


def positive(name: str, value, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` if it is a real number > 0, else raise ``ValueError``."""
    v = real(name, value, allow_inf=allow_inf)
    if not v > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return v


def nonnegative(name: str, value, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` if it is a real number >= 0, else raise ``ValueError``."""
    v = real(name, value, allow_inf=allow_inf)
    if not v >= 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return v


def real(name: str, value, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` for a finite real number (or +-inf if allowed)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def rho(value, *, allow_inf: bool = False) -> float:
    """Return the width ratio ``rho = r/d`` as a float in ``RHO_RANGE`` (or ``inf`` if allowed).

    ``rho = inf`` stands for the Gaussian (GOE) prior, the limit of infinite width.
    """
    r = positive("rho", value, allow_inf=allow_inf)
    if math.isinf(r):
        return r
    return in_range("rho", r, *RHO_RANGE)


def in_range(name: str, value, low: float, high: float) -> float:
    """Return ``float(value)`` if ``low <= value <= high``, else raise ``ValueError``."""
    v = real(name, value)
    if not low <= v <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
    return v


def integer(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``int(value)`` for an integer within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def shortened(text: str, limit: int = 80) -> str:
    """``text`` itself if it has at most ``limit`` characters, else cut to ``limit`` ending in ``'...'``."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: more samples than this can never be held in memory
N_MAX = 10**15


def _rounded_samples(alpha: float, d: int) -> int:
    """``round(alpha d^2)`` (Python's ``round``: half to even), capped at ``1e30`` so that it never overflows."""
    return round(min(alpha * d * d, 1e30))


def sample_count(alpha: float, d: int, *, capped: bool = True) -> int:
    """The number of samples ``n = round(alpha d^2)``: the one sample-count rule of :mod:`aimlib`.

    An ``alpha`` that gives no sample (``alpha d^2 <= 1/2``) is refused, not raised to one
    sample, and so is one beyond :data:`N_MAX` samples; the ``ValueError`` names ``alpha``
    and its range at this ``d``.  ``capped=False`` leaves the upper end to the memory check
    that follows (:func:`check_memory`, which names the largest ``alpha`` its budget allows;
    ``n`` at most ``1e30``).
    """
    alpha, d = positive("alpha", alpha), integer("d", d, minimum=1)
    n = _rounded_samples(alpha, d)
    if n < 1:
        raise ValueError(f"alpha must give at least one sample, n = round(alpha d^2) >= 1: "
                         f"alpha > {0.5 / (d * d):.4g} at d = {d}, got {alpha!r}")
    if capped and n > N_MAX:
        raise ValueError(f"alpha must be in (0, {N_MAX / (d * d):.4g}] at d = {d} "
                         f"(n = alpha d^2 <= {N_MAX:.0e} samples), got {alpha!r}")
    return n


def requested_samples(alpha: float, d: int) -> int:
    """:func:`sample_count` as a size for a memory check, before its refusals: at least 1, at most ``1e30``."""
    return max(1, _rounded_samples(alpha, d))


def choice(name: str, value, allowed) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise ``ValueError``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {shortened(repr(value))}")
    return value


def finite_array(name: str, a, ndim: int | None = None):
    """Check that ``a`` is a real array with only finite entries (and ``ndim`` axes)."""
    xp = get_array_module(a)
    a = xp.asarray(a)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(a.shape)}")
    if not xp.issubdtype(a.dtype, xp.number) or xp.iscomplexobj(a):
        raise TypeError(f"{name} must be a real numeric array, got dtype {a.dtype}")
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
    return a


def symmetric_matrix(name: str, a, atol: float = 1e-8):
    """Check that ``a`` is a finite, square, symmetric matrix."""
    xp = get_array_module(a)
    a = finite_array(name, a, ndim=2)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(a.shape)}")
    scale = float(xp.max(xp.abs(a))) if a.size else 0.0
    if float(xp.max(xp.abs(a - a.T))) > atol * max(1.0, scale):
        raise ValueError(f"{name} must be symmetric")
    return a


def check_seed(seed):
    """Return ``seed`` if it is an int ``>= 0`` (as ``int``), None or a ``numpy.random.Generator``, else raise."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)):
        raise TypeError(f"seed must be an int, None or numpy.random.Generator, got {type(seed).__name__}")
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return int(seed)


def generator(seed) -> np.random.Generator:
    """Turn ``seed`` (int, None or Generator) into a ``numpy.random.Generator``.

    Random draws in :mod:`aimlib` are always made on the host with NumPy's
    generator, so a seed gives the same numbers on every backend.  A run that
    draws several independent things splits its seed by :func:`run_streams`.
    """
    seed = check_seed(seed)
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def streams(seed, count: int, *, start: int = 0) -> list:
    """``count`` independent generators from one ``seed`` (int, None or Generator).

    An int ``s`` gives ``default_rng([s, start + i])`` for ``i < count``: stream
    ``i`` of ``s`` is the same whatever ``count``.  A Generator gives its next
    ``count`` children (:meth:`numpy.random.Generator.spawn`; ``start`` is not
    used): they depend on the Generator's seed and on how many children it has
    given before, not on how far it has been drawn, and two equal fresh
    Generators give equal children.  None gives ``count`` generators of fresh entropy.
    """
    seed, count = check_seed(seed), integer("count", count, minimum=0)
    start = integer("start", start, minimum=0)
    if isinstance(seed, np.random.Generator):
        try:
            return seed.spawn(count)
        except TypeError as exc:   # a bit generator without a SeedSequence
            raise TypeError(f"seed: this Generator cannot be split into streams ({exc}); pass an int or "
                            "numpy.random.default_rng(...)") from None
    return [np.random.default_rng(None if seed is None else [seed, start + i]) for i in range(count)]


def stream_seeds(seed: int, count: int) -> list:
    """``count`` independent int seeds from the int ``seed``: ``SeedSequence(seed).spawn(count)``, each
    child's first 32-bit word.

    For what takes an int seed and is cached on it (the scrambles of the fixed quasi-random
    point sets of :func:`aimlib.channels.polytope.sobol_points`), where :func:`streams`'
    Generators cannot serve; never ``seed + k``.
    """
    seed, count = integer("seed", seed, minimum=0), integer("count", count, minimum=0)
    return [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(count)]


class RunStreams(NamedTuple):
    """The independent random streams of one run (:func:`run_streams`)."""

    data: np.random.Generator       #: stream 0: teacher(s), training tokens, label noise
    test: np.random.Generator       #: stream 1: the tokens of a test set
    student: object                 #: stream 2: initialisations, mini-batches, denoisers' draws (int seed: an int)


#: the student stream of an int seed ``s`` is the seed ``STUDENT_SEED[0] * s + STUDENT_SEED[1]``
STUDENT_SEED = (1000003, 7)


def run_streams(seed) -> RunStreams:
    """Split the ``seed`` of one run into its independent streams: the one seed convention of :mod:`aimlib`.

    :func:`aimlib.amp.run_amp`, :func:`aimlib.gd.run_gd` (and the other ``run_*`` of
    :mod:`aimlib.gd`), the sweeps and the command line draw by it, so one seed gives
    every method the same teacher and the same training data:

    ``data`` (stream 0)
        the teacher(s) in layer order, then the training tokens, then the label noise
        (:func:`aimlib.model.sample_dataset`);
    ``test`` (stream 1)
        the tokens of a test set;
    ``student`` (stream 2)
        the students' initialisations and the algorithm's own randomness (mini-batches,
        the draws of GAMP-RIE's denoisers: :meth:`aimlib.priors.base.Prior.seeded`).

    An int ``s`` gives ``data = default_rng([s, 0])`` and ``test = default_rng([s, 1])``
    (:func:`streams`).  ``default_rng([s, 0])`` draws what ``default_rng(s)`` draws
    (NumPy's ``SeedSequence`` pads its entropy with zeros; ``s < 2**96``), so the data
    of seed ``s`` are also those of ``sample_dataset(..., seed=s)``.  Its ``student``
    stream is the int seed ``1000003 s + 7`` (:data:`STUDENT_SEED`; the committed
    gradient-descent results were drawn so): restart ``i`` starts from stream ``i`` of
    it, whatever the number of restarts (:func:`aimlib.gd.initial_weights`), and the
    mini-batches come from its stream ``2**31 - 1`` (:class:`aimlib.gd.optim.Batches`).
    A Generator gives its next three children (:func:`streams`), None fresh entropy.
    """
    seed = check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return RunStreams(*streams(seed, 3))
    student = None if seed is None else STUDENT_SEED[0] * seed + STUDENT_SEED[1]
    return RunStreams(*streams(seed, 2), student)


def seed_label(seed):
    """``seed`` as a row of results records it: an int or None as it is, a Generator by its ``repr``."""
    return repr(seed) if isinstance(seed, np.random.Generator) else seed


def real_or_text(name: str, value, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` for a real number or a text holding one (a form field), as :func:`real`."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{name}: '{text}' is not a number") from None
    return real(name, value, allow_inf=allow_inf)


# --------------------------------------------------------------------------- memory
def _largest(fits, value: int, minimum: int) -> int | None:
    """The largest integer in ``[minimum, value)`` for which ``fits`` holds (``None`` if none does)."""
    if not fits(minimum):
        return None
    lo, hi = minimum, value  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _round_down(x: float) -> float:
    """``x`` rounded down to 4 significant digits (a limit that is safe to quote)."""
    shown = float(f"{x:.4g}")
    return shown if shown <= x else float(f"{x * (1 - 1e-3):.4g}")


def check_memory(need, sizes: dict, memory_mb: float, *, what: str = "the arrays of gradient descent",
                 via: dict | None = None) -> None:
    """Raise ``ValueError`` if ``need(**sizes)`` bytes exceed ``memory_mb`` MiB.

    ``need`` must increase with every size.  The error names the size that,
    lowered alone, must shrink by the largest factor to fit, and the range it
    may take; ``via`` maps a size set through another parameter to
    ``(parameter, value, scale)`` so that the range is stated for the
    parameter (``n = alpha d^2``: ``via={'n': ('alpha', alpha, d * d)}``); with
    such an ``n``, lowering ``d`` lowers ``n = alpha d^2`` with it.  The advice
    to raise ``memory_mb`` follows :data:`MEMORY_ADVICE`.
    """
    budget = memory_mb * 2**20
    total = need(**sizes)
    if total <= budget:
        return
    via = via or {}

    def trial(name, x):  # the sizes with ``name = x``; n = alpha d^2 follows a lowered d
        t = {**sizes, name: x}
        if name == "d" and "n" in via and "n" in sizes:
            t["n"] = requested_samples(via["n"][1], x)
        return t

    limits = {}
    for name, value in sizes.items():
        limits[name] = _largest(lambda x, name=name: need(**trial(name, x)) <= budget, value,
                                _MINIMUM.get(name, 1))

    def shown(name):  # "restarts = 8", or "alpha = 0.1 (n = 40)" for a size set through a parameter
        if name not in via:
            return f"{name} = {sizes[name]}"
        size = f" ({name} = {sizes[name]})" if sizes[name] < 10**12 else ""
        return f"{via[name][0]} = {via[name][1]!r}{size}"

    advice = MEMORY_ADVICE.get()
    budget_name = f"memory_mb = {memory_mb:g}" if advice else f"the {memory_mb:g} MiB allowed"
    head = f"{what} need about {total / 2**20:.3g} MiB, more than {budget_name}"
    fixable = [name for name in sizes if limits[name] is not None]
    if not fixable:
        too_big = [shown(k) for k in sizes if sizes[k] > _MINIMUM.get(k, 1)]
        raise ValueError(f"{head}; lower {', '.join(too_big)}{f' or {advice}' if advice else ''}")
    name = max(fixable, key=lambda k: sizes[k] / limits[k])
    others = ", ".join(shown(k) for k in sizes if k != name)
    if name in via:
        param, _, scale = via[name]
        allowed = f"(0, {_round_down(limits[name] / scale):.4g}]"
    else:
        param, allowed = name, f"[{_MINIMUM.get(name, 1)}, {limits[name]}]"
    raise ValueError(f"{shown(name)}: {head}; at {others}, {param} must be in {allowed}"
                     + (f" (or {advice})" if advice else ""))


def bounded(name: str, value, low: float | None = None, high: float | None = None, *,
            low_open: bool = False, high_open: bool = False, allow_inf: bool = False) -> float:
    """Return ``float(value)`` for a real number in the interval from ``low`` to ``high``.

    Each bound is closed (``>=``, ``<=``) or open (``>``, ``<``, with ``low_open`` /
    ``high_open``); ``None`` leaves that side unbounded.  The message names the
    bound that ``value`` breaks (``damping must be < 1, got 1.0``).
    """
    v = real(name, value, allow_inf=allow_inf)
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value!r}")
    return v


def output_file(name: str, path) -> Path:
    """Return ``pathlib.Path(path)`` for a file to create or append to.

    Refused (``ValueError`` naming ``name``): an empty path, a path that cannot
    be inspected (e.g. below a file) and an existing path that
    :func:`aimlib.files.open_output` would refuse: a symbolic link, a
    directory, a device such as ``/dev/null``, a pipe, a socket, a file of
    another user or a file with hard links.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not text:
        raise ValueError(f"{name} must be a file path, got an empty path")
    try:
        files.check_output(name, text)
    except OSError as exc:
        raise ValueError(f"{name}: cannot use {str(text)!r} ({exc.strerror or exc})") from None
    return Path(text)
