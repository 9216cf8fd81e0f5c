r"""The Wishart prior of tied key and query, and its centred variant (rotation invariant).

Book, chapters "Random matrices" and "Matrix denoising".  ``S = W W^T / sqrt(r d)``
with ``W`` of shape ``(d, r)`` i.i.d. ``N(0, 1)`` and ``rho = r / d``:
``E S = sqrt(rho) I``, ``Q0 = lim Tr(S^2)/d = 1 + rho``.  Its denoiser is the RIE
(:func:`aimlib.rmt.rie`) and its MMSE :func:`aimlib.rmt.mmse`.  The centred prior
is the law of ``S - sqrt(rho) I`` (``E S = 0``, ``Q0 = 1``): a shift by a known
matrix, so the same MMSE and the RIE of ``R + sqrt(rho) I`` shifted back.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import _validate as v
from .. import rmt
from ..backend import get_array_module
from ..rmt.spectrum import sample_wishart, teacher_width
from .base import Prior, aitken_slope

__all__ = ["Wishart", "Centred", "teacher_width", "clear_caches"]


@lru_cache(maxsize=64)
def _slope(rho: float) -> float:
    return aitken_slope(Wishart(rho).mmse)


def clear_caches() -> None:
    """Empty the memo of :meth:`Wishart.zero_slope` (cold timings in the benchmarks)."""
    _slope.cache_clear()


class Wishart(Prior):
    r"""``S = W W^T / sqrt(r d)``, width ratio ``rho = r/d`` in ``RHO_RANGE``.

    ``mmse(Delta) = Delta - (4 pi^2/3) Delta^2 int mu_Delta^3`` (:func:`aimlib.rmt.mmse`),
    zero-noise slope ``2 rho - rho^2`` for ``rho < 1`` and ``1`` beyond (computed from
    the MMSE, :func:`~aimlib.priors.base.aitken_slope`, not typed in).
    """

    name = "wishart"

    def __init__(self, rho: float = 0.5):
        self.rho = v.rho(rho)

    def _params(self) -> str:
        return f"rho={self.rho:g}"

    def second_moment(self) -> float:
        return 1.0 + self.rho

    def mean_square(self) -> float:
        return self.rho

    def mean(self, d: int, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        return math.sqrt(self.rho) * xp.eye(d, dtype=dtype)

    def draw_numbers(self, d: int) -> int:
        """``d r``: the factor ``W``."""
        return d * teacher_width(d, self.rho)

    def sample(self, d: int, seed=None, *, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        return sample_wishart(d, self.rho, seed, xp=xp, dtype=dtype)

    def _mmse(self, delta: float) -> float:
        return float(rmt.mmse(delta, self.rho))

    def zero_slope(self) -> float:
        return _slope(self.rho)

    def denoise(self, R, deltas, noise=None):
        """The RIE of ``R`` (``V = V_ons = mmse(Delta)``; ``noise`` is not used)."""
        (delta,) = deltas
        m = self.mmse(delta)
        return rmt.rie(R, delta, self.rho), (m,), (m,)

    def onsager(self, R, delta: float) -> float:
        """The RIE's own Onsager coefficient at ``R`` (:func:`aimlib.rmt.rie_divergence`); :meth:`denoise` hands
        GAMP-RIE its limit on the law ``R = S + sqrt(Delta) Z``, ``mmse(Delta)``."""
        return rmt.rie_divergence(R, delta, self.rho)


class Centred(Wishart):
    r"""``S = W W^T / sqrt(r d) - sqrt(rho) I``: the Wishart prior with its mean removed.

    ``E S = 0``, ``Q0 = 1``; ``mmse`` is the Wishart one (a known shift changes no
    error) and the denoiser is ``RIE(R + sqrt(rho) I) - sqrt(rho) I``.
    """

    name = "centred"

    def second_moment(self) -> float:
        return 1.0

    def mean_square(self) -> float:
        return 0.0

    def mean(self, d: int, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        return xp.zeros((d, d), dtype=dtype)

    def sample(self, d: int, seed=None, *, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        S = super().sample(d, seed, xp=xp, dtype=dtype)
        return S - super().mean(d, xp, S.dtype)

    def denoise(self, R, deltas, noise=None):
        shift = super().mean(R.shape[0], get_array_module(R), R.dtype)
        S_hat, V, V_ons = super().denoise(R + shift, deltas)
        return S_hat - shift, V, V_ons

    def onsager(self, R, delta: float) -> float:
        """The RIE's own Onsager coefficient at ``R``: the Wishart one at ``R + sqrt(rho) I``, as :meth:`denoise`."""
        return super().onsager(R + super().mean(R.shape[0], get_array_module(R), R.dtype), delta)
