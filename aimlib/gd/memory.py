r"""Memory guard: estimate the arrays of gradient descent before allocating them.

With ``k`` restarts of width ``r``, ``n`` training and ``n_test`` test samples
of ``T`` tokens in dimension ``d``, and ``m = max(n, n_test)``, the arrays
held at once number at most

.. math::

    \underbrace{nT(d + 2T) + n_{\rm test} T (d + T)}_{X,\ h,\ y,\ \text{test set}}
    + \underbrace{8\, k d r}_{W,\ \nabla W,\ \text{Adam}}
    + \underbrace{k m T (8 T + 3 r)}_{\hat h,\ \hat y,\ G,\ XW}
    + \underbrace{3\, k d^2}_{\hat S_i - S}

entries of the working precision, plus ``m T d + 2 k d r + 2 d^2 + d r``
float64 entries for the random draws (tokens, initial weights and teacher are
drawn in float64).  :func:`check_memory` compares this estimate with a budget
and names the parameter to lower.
"""
from __future__ import annotations

from .. import _validate as v

#: Default budget of :func:`aimlib.gd.train_gd` and :func:`aimlib.gd.run_gd` (MiB): 8 GiB.
MEMORY_MB = 8192.0

_MINIMUM = {"T": 2}


def memory_estimate(n: int, T: int, d: int, rank: int, restarts: int = 1, *, n_test: int = 0,
                    itemsize: int = 8) -> int:
    """Bytes of the arrays that sampling the data and training ``restarts`` students of width ``rank`` hold.

    An upper estimate (see the module docstring) for a working precision of
    ``itemsize`` bytes per entry.
    """
    n, d, k, r = (v.integer(name, x, minimum=1) for name, x in
                  (("n", n), ("d", d), ("restarts", restarts), ("rank", rank)))
    T = v.integer("T", T, minimum=2)
    n_test = v.integer("n_test", n_test, minimum=0)
    itemsize = v.integer("itemsize", itemsize, minimum=1)
    m = max(n, n_test)
    data = n * T * (d + 2 * T) + n_test * T * (d + T)
    work = 8 * k * d * r + k * m * T * (8 * T + 3 * r) + 3 * k * d * d
    draws = m * T * d + 2 * k * d * r + 2 * d * d + d * r
    return itemsize * (data + work) + 8 * draws


def check_memory_mb(memory_mb) -> float:
    """Return the budget ``memory_mb`` (MiB) as a float > 0."""
    return v.positive("memory_mb", memory_mb)


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


def check_memory(need, sizes: dict, memory_mb: float, *, via: dict | None = None) -> None:
    """Raise ``ValueError`` if ``need(**sizes)`` bytes exceed ``memory_mb`` MiB.

    ``need`` must increase with every size.  The error names the size that,
    lowered alone, must shrink by the largest factor to fit, and the range it
    may take; ``via`` maps a size set through another parameter to
    ``(parameter, value, scale)`` so that the range is stated for the
    parameter (``n = alpha d^2``: ``via={'n': ('alpha', alpha, d * d)}``).
    """
    budget = memory_mb * 2**20
    total = need(**sizes)
    if total <= budget:
        return
    limits = {}
    for name, value in sizes.items():
        limits[name] = _largest(lambda x, name=name: need(**{**sizes, name: x}) <= budget, value,
                                _MINIMUM.get(name, 1))
    via = via or {}

    def shown(name):  # "restarts = 8", or "alpha = 0.1 (n = 40)" for a size set through a parameter
        if name not in via:
            return f"{name} = {sizes[name]}"
        size = f" ({name} = {sizes[name]})" if sizes[name] < 10**12 else ""
        return f"{via[name][0]} = {via[name][1]!r}{size}"

    head = f"the arrays of gradient descent need about {total / 2**20:.3g} MiB, more than memory_mb = {memory_mb:g}"
    fixable = [name for name in sizes if limits[name] is not None]
    if not fixable:
        too_big = [shown(k) for k in sizes if sizes[k] > _MINIMUM.get(k, 1)]
        raise ValueError(f"{head}; lower {', '.join(too_big)} or raise memory_mb")
    name = max(fixable, key=lambda k: sizes[k] / limits[k])
    others = ", ".join(shown(k) for k in sizes if k != name)
    if name in via:
        param, _, scale = via[name]
        allowed = f"(0, {_round_down(limits[name] / scale):.4g}]"
    else:
        param, allowed = name, f"[{_MINIMUM.get(name, 1)}, {limits[name]}]"
    raise ValueError(f"{shown(name)}: {head}; at {others}, {param} must be in {allowed} (or raise memory_mb)")
