"""The command line's output: numbers as they print, CSV headers and rows (one column per layer)."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["fmt", "columns", "values", "print_row", "print_table"]


def fmt(x: float) -> str:
    """``repr`` of a float (every digit of float64), ``inf``/``nan`` as words."""
    return repr(float(x)) if math.isfinite(x) else str(float(x))


def columns(name: str, L: int) -> list[str]:
    """``name`` for one layer, ``name_1, ..., name_L`` for several."""
    return [name] if L == 1 else [f"{name}_{ell + 1}" for ell in range(L)]


def values(x) -> list:
    """``x`` as a list: one value, or the values of a per-layer tuple, list or array."""
    return [x] if not isinstance(x, (tuple, list, np.ndarray)) else list(x)


def print_row(names: list[str], row: dict) -> None:
    """The header and one CSV row; a per-layer value (a tuple) fills the columns ``name_1 ... name_L``."""
    header, cells = [], []
    for c in names:
        vals = values(row[c])
        header += columns(c, len(vals))
        cells += [str(x) if not isinstance(x, float) else fmt(x) for x in vals]
    print(",".join(header))
    print(",".join(cells))


def print_table(header: list[str], rows) -> None:
    """A CSV header and rows of numbers (floats through :func:`fmt`)."""
    print("\n".join([",".join(header)] + [",".join(str(x) if isinstance(x, (int, np.integer)) else fmt(x)
                                                      for x in row) for row in rows]))
