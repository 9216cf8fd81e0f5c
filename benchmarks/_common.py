"""What every benchmark record shares: the machine it ran on, and where it is written.

A record is one JSON object: ``benchmark`` (its name), the fields of
:func:`machine` (when and on what it ran), then the benchmark's own numbers,
all at the top level.  ``book/performance.md`` reads ``date``, ``platform``
and ``blas_threads`` from it.  This module imports nothing heavy (of aimlib only
:mod:`aimlib.files`, which opens the record without following a link), so a
script can call :func:`set_blas_threads` before it imports NumPy.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
from importlib import metadata
from pathlib import Path

from aimlib import files

RESULTS = Path(__file__).resolve().parent / "results"
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_blas_threads(threads: int) -> None:
    """Give the BLAS ``threads`` threads, in this process and in the subprocesses it starts.

    Parameters
    ----------
    threads : int
        Positive thread count, written to every variable of
        :data:`BLAS_THREAD_VARIABLES`.  It acts on this process only if NumPy
        has not been imported yet.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    for var in BLAS_THREAD_VARIABLES:
        os.environ[var] = str(threads)


def machine() -> dict:
    """The machine part of a record: date (UTC), platform, processor, cores, Python, NumPy, BLAS, load.

    ``blas_threads`` is the first of :data:`BLAS_THREAD_VARIABLES` that is set,
    or ``"default"`` (the library's own choice, usually one thread per core);
    ``load_average`` is the 1, 5 and 15 minute load of the machine (None
    where the system does not report it).
    """
    blas = next((os.environ[v] for v in BLAS_THREAD_VARIABLES if v in os.environ), "default")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": metadata.version("numpy"),
        "blas_threads": blas,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def write_record(name: str, numbers: dict, path: str | Path | None = None) -> Path:
    """Write the record ``{"benchmark": name, **machine(), **numbers}`` as JSON.

    Parameters
    ----------
    name : str
        Name of the record, and of its default file.
    numbers : dict
        The benchmark's results (JSON-serialisable); none of its keys may be a
        key of :func:`machine` (ValueError otherwise).
    path : str or Path, optional
        Where to write; by default ``benchmarks/results/<name>.json``.  A
        symbolic link, another user's file or a file with hard links is
        refused (:func:`aimlib.files.open_output`, a ``ValueError``).

    Returns
    -------
    Path
        The file written.
    """
    record = {"benchmark": name, **machine()}
    clash = sorted(record.keys() & numbers.keys())
    if clash:
        raise ValueError(f"numbers must not use the keys of the machine record, got {clash}")
    record.update(numbers)
    out = Path(path) if path is not None else RESULTS / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(files.open_output("path", out), "w") as fh:
        fh.write(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")
    return out
