r"""Finite-``d`` experiments on denoising the untied ``S``: draws and the oracle curve.

Book, chapter "Untied key and query".  The theory (the singular-value
law, the rectangular RIE, ``mmse_rect``) is in :mod:`aimlib.rmt.rectangular`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..rmt.rectangular import oracle_error
from .model import sample_teacher_untied

__all__ = ["sample_denoising_untied", "oracle_curve"]


def sample_denoising_untied(d: int, rho: float, delta: float, seed=None):
    """Draw ``S`` (:func:`~aimlib.untied.sample_teacher_untied`) and ``Y = S + sqrt(Delta) Z``."""
    delta = v.nonnegative("delta", delta)
    rng = v.generator(seed)
    S = sample_teacher_untied(d, rho, rng)
    return S, S + math.sqrt(delta) * rng.standard_normal((d, d)) / math.sqrt(d)


def oracle_curve(rho: float, deltas, d: int, seeds: int, seed=0):
    """Mean :func:`oracle_error` over ``seeds`` fixed draws ``(S, Z)`` at each ``Delta``.

    Draw ``i`` comes from stream ``i`` of ``seed`` (int or Generator,
    :func:`aimlib._validate.streams`; for the int ``0``, draw ``0`` is that of
    ``default_rng(0)``).  The same draws serve every ``Delta``, so the curve is
    smooth in ``Delta``.
    """
    d = v.integer("d", d, minimum=2)
    seeds = v.integer("seeds", seeds, minimum=1)
    deltas = np.asarray(deltas, dtype=float)
    vals = np.zeros(deltas.size)
    for rng in v.streams(seed, seeds):
        S = sample_teacher_untied(d, rho, rng)
        Z = rng.standard_normal((d, d)) / math.sqrt(d)
        vals += [oracle_error(S, S + math.sqrt(dl) * Z) for dl in deltas]
    return vals / seeds

