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
drawn in float64).  ``aimlib._validate.check_memory`` compares this estimate with a budget
and names the parameter to lower.
"""
from __future__ import annotations

from .. import _validate as v


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
