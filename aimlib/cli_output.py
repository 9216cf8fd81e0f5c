"""The command line's output: numbers as they print, CSV headers and rows (one column per layer), progress."""
from __future__ import annotations

import math
import sys
import time

import numpy as np

__all__ = ["fmt", "columns", "values", "print_row", "print_table", "tabulate_with_progress", "GD_COLUMNS",
           "print_gd_row"]


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


#: the CSV columns of ``gd``: ``lr`` is the step used, ``mmse_data_free`` the error of the data-free
#: estimate ``(Tr S/d) I`` (about 1), ``worse_than_data_free`` 1 where ``mmse_single`` is above it
GD_COLUMNS = ["alpha", "d", "seed", "restarts", "mmse_single", "mmse_averaged", "seconds", "lr", "mmse_data_free",
              "worse_than_data_free"]


def print_gd_row(args, row: dict) -> None:
    """The row of ``gd`` (:data:`GD_COLUMNS`), and a warning on standard error for a run worse than the
    data-free estimate: its training loss fell (a loss that rose is a failure, raised before), so it is a
    result, but no better than knowing no data."""
    print_row(GD_COLUMNS, dict(row, worse_than_data_free=int(row["worse_than_data_free"])))
    if not row["worse_than_data_free"]:
        return
    start, end = (float(np.mean(row[k])) for k in ("train_loss_start", "train_loss"))
    e_start = float(np.mean(row["mmse_single_start"]))
    loss = f"the training loss {'fell' if end < start else 'rose'} ({start:.4g} -> {end:.4g})"
    if end >= start:   # only with --weight-decay: the loss plus the penalty fell (else the run failed)
        why = (f"{loss} while the loss plus the weight decay fell: try a smaller --weight-decay "
               f"(this run: {args.weight_decay:g})")
    elif row["mmse_single"] > e_start:   # the steps fit the data and left the teacher: too large
        why = (f"{loss} but the error rose ({e_start:.4g} -> {row['mmse_single']:.4g}): the steps fit the data, "
               f"not the teacher; try a smaller --lr (this run: {row['lr']:g})")
    else:              # on the way down from the random start (error about 2), not there yet
        why = (f"{loss} and the error fell ({e_start:.4g} -> {row['mmse_single']:.4g}), not far enough: try more "
               f"--steps (this run: {args.steps}) or a larger --lr (this run: {row['lr']:g})")
    print(f"python -m aimlib gd: warning: run --alpha {args.alpha:g} --d {args.d} --rho {args.rho[0]:g} "
          f"--seed {args.seed}: mmse_single {row['mmse_single']:.4g} (mmse_averaged {row['mmse_averaged']:.4g}) "
          f"is worse than {row['mmse_data_free']:.4g}, the error of the data-free estimate (Tr S/d) I; {why}",
          file=sys.stderr)
