"""Input checks shared by every public function: clear errors that name the parameter."""
from __future__ import annotations

import contextvars
import math
import numbers
import os
import stat
from pathlib import Path

import numpy as np

from .backend import get_array_module

# Width ratios for which every routine of aimlib is tested to full accuracy.
RHO_RANGE = (1e-4, 1e4)
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


def requested_samples(alpha: float, d: int) -> int:
    """``n = round(alpha d^2)`` as a size for a memory check: at least 1, capped at ``1e30`` (an int)."""
    return max(1, round(min(alpha * d * d, 1e30)))


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


def generator(seed) -> np.random.Generator:
    """Turn ``seed`` (int, None or Generator) into a ``numpy.random.Generator``.

    Random draws in :mod:`aimlib` are always made on the host with NumPy's
    generator, so a seed gives the same numbers on every backend.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, (numbers.Integral, np.integer)) and not isinstance(seed, bool)):
        if seed is not None and int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be an int, None or numpy.random.Generator, got {type(seed).__name__}")


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

    Refused (``ValueError`` naming ``name``): an empty path, a directory, an
    existing file that is not a regular file (a device such as ``/dev/null``, a
    pipe, a socket) and a path that cannot be inspected (e.g. below a file).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not text:
        raise ValueError(f"{name} must be a file path, got an empty path")
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        return Path(text)
    except OSError as exc:
        raise ValueError(f"{name}: cannot use {str(text)!r} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise ValueError(f"{name} must be a file, but {str(text)!r} is a directory")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{name} must be a regular file, but {str(text)!r} is a device, a pipe "
                         "or a socket")
    return Path(text)
