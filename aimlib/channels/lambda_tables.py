"""Chebyshev tables in ``lambda = q/V``: nodes, fits, storage and the tables built on demand.

The output moments ``F~`` of the deep-hardmax channel (:mod:`aimlib.channels.deep_patterns`,
:mod:`aimlib.channels.deep_histories`) are smooth in ``x = 1/sqrt(1 + lambda)`` on
``[x_min, 1]``, ``lambda <= LAMBDA_MAX``: they are read from Chebyshev interpolants in ``x``,
stored in ``aimlib/data`` for a few residual strengths ``c`` and built once per session for any
other, then checked against quadrature off the nodes (:func:`verify_interpolant`) before use.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["LAMBDA_MAX", "chebyshev_nodes", "lambda_of", "lambda_nodes", "lambda_coordinate", "chebyshev_fit",
           "save_tables", "load_tables", "cached_table", "table_ready", "verify_interpolant"]

LAMBDA_MAX = 1e3      # largest q_l / V_l tabulated (errors down to about 1e-3)
_X_MIN = 1.0 / np.sqrt(1.0 + LAMBDA_MAX)


def chebyshev_nodes(deg: int) -> np.ndarray:
    """The ``deg + 1`` Chebyshev nodes of the first kind in ``[-1, 1]``."""
    return np.cos(np.pi * (np.arange(deg + 1) + 0.5) / (deg + 1))


def lambda_of(u):
    """The ``lambda`` of the Chebyshev variable ``u`` in ``[-1, 1]`` (``x = 1/sqrt(1 + lambda)`` in ``[x_min, 1]``)."""
    return 1.0 / (_X_MIN + (1.0 - _X_MIN) * (np.asarray(u) + 1) / 2) ** 2 - 1.0


def lambda_nodes(deg: int) -> np.ndarray:
    """The ``lambda >= 0`` at the ``deg + 1`` Chebyshev nodes of the variable ``x = 1/sqrt(1 + lambda)``."""
    return np.maximum(lambda_of(chebyshev_nodes(deg)), 0.0)


def lambda_coordinate(lam) -> np.ndarray:
    """The Chebyshev variable ``u`` in ``[-1, 1]`` of ``lambda`` (the inverse of the map of :func:`lambda_nodes`)."""
    return 2.0 * (1.0 / np.sqrt(1.0 + np.asarray(lam, dtype=float)) - _X_MIN) / (1.0 - _X_MIN) - 1.0


def chebyshev_fit(vals: np.ndarray, degrees) -> np.ndarray:
    """Chebyshev coefficients of the tensor-grid values ``vals`` (``C = V^-1 F V^-T`` per axis)."""
    C = vals
    for axis, deg in enumerate(degrees):
        Vinv = np.linalg.inv(np.polynomial.chebyshev.chebvander(chebyshev_nodes(deg), deg))
        C = np.moveaxis(np.tensordot(Vinv, C, axes=(1, axis)), 0, axis)
    return C


def save_tables(path, residuals, settings: np.ndarray, **arrays) -> Path:
    """Store Chebyshev tables: ``c`` (the residual strengths), the ``arrays`` (one entry per ``c``
    each) and the ``settings`` they were made with."""
    np.savez(path, c=np.array(residuals, dtype=float), settings=settings, **arrays)
    return Path(path)


def load_tables(path, settings: np.ndarray, fields) -> dict:
    """The tables stored at ``path`` by ``c``, a tuple of the ``fields`` each, if they were made
    with ``settings`` (else none)."""
    if not Path(path).is_file():
        return {}
    with np.load(path) as f:
        if not np.array_equal(f["settings"], settings):
            return {}
        return {float(c): tuple(f[k][i] for k in fields) for i, c in enumerate(f["c"])}


#: the tables built in this session, by ``(kind, c)``
_BUILT: dict = {}


def cached_table(kind: str, c: float, stored: dict, build, progress=None, check=None):
    """The table ``kind`` of ``c``: ``stored[c]`` if the package ships it, else ``build(c, progress)``,
    built once per session and kept only if ``check(c)`` (if given) passes."""
    key = (kind, float(c))
    if key not in _BUILT:
        _BUILT[key] = stored[float(c)] if float(c) in stored else build(float(c), progress)
        if float(c) not in stored and check is not None:
            try:
                check(float(c))
            except ValueError:
                del _BUILT[key]
                raise
    return _BUILT[key]


def table_ready(kind: str, c: float, stored: dict) -> bool:
    """Whether :func:`cached_table` of ``kind`` and ``c`` would return at once (stored, or built already)."""
    return float(c) in stored or (kind, float(c)) in _BUILT


def verify_interpolant(c: float, read, direct, points, rel: float) -> None:
    """``ValueError`` unless the diagonal of ``read(c, *p)`` (an interpolant) is within ``rel`` of that of
    ``direct(c, *p)`` (quadrature) at every point ``p`` of ``points``, off the Chebyshev nodes."""
    for p in points:
        a, b = np.diag(np.atleast_2d(read(c, *p))), np.diag(np.atleast_2d(direct(c, *p)))
        worst = float(np.max(np.abs(a / b - 1.0)))
        if not worst <= rel:
            raise ValueError(f"c = {c!r}: the tabulated output functions miss direct quadrature by {worst:.3g} "
                             f"(relative) at {p}, more than the {rel:g} allowed: G varies too fast in lambda this "
                             "close to a collision; move c farther from -1, 0 and 1")
