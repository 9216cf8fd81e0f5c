"""The runs of a sweep that failed: a small CSV beside the results, so that no run vanishes.

A run that raises writes no row to the results file (its numbers do not exist),
and :func:`~aimlib.sweep.driver.run_sweep` retries it next time.  So that a
committed results file still says which runs are missing and why, every sweep
records its failures in ``<results stem>.failures.csv`` (:func:`failures_path`):
one line per run that has no row, with the run's parameters and the error
message.  A run that succeeds later leaves the file; when no failure remains,
the file is removed.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from .spec import expand

FAILURE_COLUMNS = ("key", "method", "channel", "T", "rho", "alpha", "d", "seed", "tokens", "message")


def failures_path(out) -> Path:
    """Where the failures of the results file ``out`` are recorded: ``<stem>.failures.csv`` beside it."""
    out = Path(out)
    return out.with_name(out.stem + ".failures.csv")


def _read(path: Path) -> dict:
    """The recorded failures by key (empty if there is no file)."""
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {row["key"]: row for row in csv.DictReader(fh)}


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
    kept = {k: row for k, row in _read(path).items() if k not in retried and k not in stored}
    kept.update({run.key: _line(run, message) for run, message in failures})
    if not kept:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FAILURE_COLUMNS)
        writer.writeheader()
        writer.writerows(kept.values())
    tmp.replace(path)


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
