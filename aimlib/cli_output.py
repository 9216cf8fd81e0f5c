"""The command line's output: numbers as they print, CSV headers and rows (one column per layer), progress."""
from __future__ import annotations

import math
import sys
import time

import numpy as np

__all__ = ["fmt", "columns", "values", "print_row", "print_table", "tabulate_with_progress"]


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


def tabulate_with_progress(ch, shared: bool) -> None:
    """Build the deep-hardmax interpolants for ``ch.c`` that are neither stored nor built yet
    (:meth:`aimlib.channels.DeepAttention.tabulate`), showing the progress on standard error:
    a line at the start and at the end, and a running count where standard error is a terminal."""
    if ch.tables_ready(shared):
        return
    tty = sys.stderr.isatty()
    print(f"deep-hardmax: tabulating the output functions of {ch.n_indices} layers at c = {ch.c!r} "
          "(once per session; the stored c are instant)", file=sys.stderr, flush=True)
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\r  {done}/{total} nodes, {time.perf_counter() - start:.0f} s", end="", file=sys.stderr,
                  flush=True)

    ch.tabulate(shared, progress)
    print(("\n" if tty else "") + f"deep-hardmax: tabulated in {time.perf_counter() - start:.1f} s",
          file=sys.stderr, flush=True)
