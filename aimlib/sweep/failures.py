"""The runs of a sweep that failed: a small CSV beside the results, so that no run vanishes.

A run that raises writes no row to the results file (its numbers do not exist),
and :func:`~aimlib.sweep.driver.run_sweep` retries it next time.  So that a
committed results file still says which runs are missing and why, every sweep
records its failures in ``<results stem>.failures.csv`` (:func:`failures_path`):
one line per run that has no row, with the run's parameters and the error
message.  A run that succeeds later leaves the file; when no failure remains,
the file is removed.  As with the results file, a file of that name is only
written or removed when its first line is exactly the header
:data:`FAILURE_COLUMNS` (or it is empty); :func:`check_failures_file` refuses
anything else before a sweep computes a run.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from .. import files
from . import diskio
from .spec import expand

#: the columns of a failures file, one line per run that raised
FAILURE_COLUMNS = ("key", "method", "channel", "T", "rho", "alpha", "d", "seed", "tokens", "message")
_HEADER = ",".join(FAILURE_COLUMNS)


def failures_path(out) -> Path:
    """Where the failures of the results file ``out`` are recorded: ``<stem>.failures.csv`` beside it."""
    out = Path(out)
    return out.with_name(out.stem + ".failures.csv")


def _read(path: Path, *, output: bool = False) -> dict:
    """The recorded failures by key (none without a file); ``ValueError`` for a foreign file.

    The file is opened without waiting on a pipe or device
    (:func:`aimlib.files.open_input`); with ``output`` (it is to be rewritten)
    a path that :func:`aimlib.files.check_output` refuses -- a symbolic link,
    another user's file -- is refused too.
    """
    try:
        if output:
            files.check_output("--out", path)
        fd = files.open_input("--out", path)
    except FileNotFoundError:
        return {}
    except files.RefusedFile as exc:
        raise _foreign(path, f"it {exc.finding}") from None
    except OSError as exc:
        raise _foreign(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "rb") as fh:
            head = fh.readline(len(_HEADER) + 2)  # the header line, and no more of a foreign file
            if head and head.rstrip(b"\r\n") != _HEADER.encode():
                raise _foreign(path, "its header is not that of a sweep's failures")
            text = (head + fh.read()).decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise _foreign(path, getattr(exc, "strerror", None) or "it is not UTF-8 text") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if any(None in row or None in row.values() for row in rows):
        raise _foreign(path, "a line does not have the failure columns")
    return {row["key"]: row for row in rows}


def _foreign(path: Path, reason: str) -> ValueError:
    return ValueError(f"{path} is where the sweep lists its failed runs, but {reason}; it was "
                      "left untouched: move it away or choose another --out")


def check_failures_file(out) -> None:
    """Refuse (``ValueError``) a failures file of ``out`` that the sweep did not write.

    Called before a sweep computes anything, so that a foreign file of that
    name (notes, another CSV, a folder, a symbolic link, another user's file)
    is neither overwritten nor removed.
    """
    _read(failures_path(out), output=True)


def _line(run, message: str) -> dict:
    tokens = "" if run.tokens is None else json.dumps(dict(run.tokens), sort_keys=True)
    return {"key": run.key, "method": run.method, "channel": run.channel, "T": run.T,
            "rho": json.dumps(run.rho), "alpha": run.alpha, "d": "" if run.d is None else run.d,
            "seed": "" if run.seed is None else run.seed, "tokens": tokens, "message": message}


def record_failures(out, failures, retried, stored) -> None:
    """Update the failures file of ``out`` after a sweep.

    ``failures`` are this sweep's ``(run, message)`` pairs, ``retried`` the keys
    it attempted, ``stored`` the keys that now have a row.  Earlier lines of runs
    not retried (another spec's, say) are kept; the file is removed when empty.
    """
    path = failures_path(out)
    kept = {k: row for k, row in _read(path, output=True).items()
            if k not in retried and k not in stored}
    kept.update({run.key: _line(run, message) for run, message in failures})
    if not kept:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise diskio.storage_error(exc, path) from None
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FAILURE_COLUMNS)
    writer.writeheader()
    writer.writerows(kept.values())
    diskio.replace(path, buf.getvalue().encode())


def load_failures(spec, out=None) -> list[dict]:
    """The recorded failures of the runs of ``spec``, in its expansion order.

    Each is a dict of :data:`FAILURE_COLUMNS` with ``T``, ``alpha``, ``d``,
    ``seed`` as numbers and ``rho``, ``tokens`` decoded.  ``out`` is the results
    CSV (default: the spec's path with the suffix ``.csv``).
    """
    if out is None:
        if not isinstance(spec, (str, os.PathLike)):
            raise TypeError("out must be given when spec is not a path")
        out = Path(spec).with_suffix(".csv")
    found = _read(failures_path(out))
    rows = [found[run.key] for run in expand(spec) if run.key in found]
    for row in rows:
        row.update(T=int(row["T"]), alpha=float(row["alpha"]), rho=json.loads(row["rho"]),
                   d=int(row["d"]) if row["d"] else None, seed=int(row["seed"]) if row["seed"] else None,
                   tokens=json.loads(row["tokens"]) if row["tokens"] else None)
    return rows
