r"""The Gaussian prior: ``S`` with i.i.d. Gaussian entries (the ``rho -> inf`` limit of the others).

Symmetric (tied key and query): ``S`` a GOE matrix of unit variance, ``Q0 = 1``,
``mmse(Delta) = Delta/(1 + Delta)``, denoiser ``R/(1 + Delta)``.  Square (untied):
``S`` with i.i.d. ``N(0, 1/d)`` entries, two sectors (symmetric part ``A``,
antisymmetric part ``B``, each with ``Q0_s = 1/2``) seen with their own noises;
the posterior mean shrinks each part, ``A_R/(1 + Delta_A) + B_R/(1 + Delta_B)``,
with errors ``Delta_s/(2 (1 + Delta_s))`` (at finite ``d`` the parts have
``d(d +- 1)/2`` directions, hence the factors ``1 +- 1/d`` of :meth:`Gaussian.denoise`).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..backend import to_device
from ..rmt.spectrum import sample_goe
from .base import Prior

__all__ = ["Gaussian", "matrix_parts", "part_dimensions"]


def matrix_parts(M):
    """``(A, B) = ((M + M^T)/2, (M - M^T)/2)``: the symmetric and antisymmetric parts of a square matrix."""
    return (M + M.T) / 2, (M - M.T) / 2


def part_dimensions(d: int) -> tuple:
    """Dimensions ``d(d+1)/2`` and ``d(d-1)/2`` of the symmetric and antisymmetric ``d x d`` matrices."""
    return d * (d + 1) / 2, d * (d - 1) / 2


class Gaussian(Prior):
    """I.i.d. Gaussian ``S``: GOE of unit variance (``symmetric=True``) or Ginibre ``N(0, 1/d)`` (``False``)."""

    name = "gaussian"
    rho = math.inf

    def __init__(self, symmetric: bool = True):
        if not isinstance(symmetric, bool):
            raise TypeError(f"symmetric must be True or False, got {symmetric!r}")
        self.symmetric = symmetric
        self.sectors = ("S",) if symmetric else ("A", "B")

    def _params(self) -> str:
        return "" if self.symmetric else "symmetric=False"

    def second_moment(self) -> float:
        return 1.0

    def sector_moments(self) -> tuple:
        return (1.0,) if self.symmetric else (0.5, 0.5)

    def mean(self, d: int, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        return xp.zeros((d, d), dtype=dtype)

    def sample(self, d: int, seed=None, *, xp=None, dtype=np.float64):
        xp = np if xp is None else xp
        if self.symmetric:
            return to_device(sample_goe(d, seed, dtype=dtype), xp)
        return to_device((v.generator(seed).standard_normal((d, d)) / math.sqrt(d)).astype(dtype), xp)

    def _mmse(self, delta: float) -> float:
        return delta / (1.0 + delta)

    def zero_slope(self) -> float:
        return 1.0

    def sector_mmse(self, deltas) -> tuple:
        if self.symmetric:
            return super().sector_mmse(deltas)
        return tuple(0.5 * self.mmse(dl) for dl in deltas)

    def denoise(self, R, deltas, noise=None):
        """The posterior mean (``noise`` is not used); ``V = V_ons`` at finite ``d`` (module docstring)."""
        if self.symmetric:
            (delta,) = deltas
            m = self.mmse(delta)
            return R / (1.0 + delta), (m,), (m,)
        d = R.shape[0]
        A, B = matrix_parts(R)
        V = tuple(dl * n_s / (d * d * (1 + dl)) for dl, n_s in zip(deltas, part_dimensions(d)))
        return A / (1 + deltas[0]) + B / (1 + deltas[1]), V, V
