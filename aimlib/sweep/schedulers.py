"""Where the runs execute: serially, on a local process pool, or on a Dask cluster.

Each scheduler is a generator of ``(run, row or exception)`` in the order the
runs finish; closing it cancels the runs not yet started.

``'serial'`` (or one worker)
    in this process;
``None`` / ``'processes'`` (default)
    a local ``concurrent.futures.ProcessPoolExecutor`` (``spawn``); a worker
    whose parent dies (even by ``kill -9``) exits within
    :data:`PARENT_POLL_SECONDS`, so no orphan keeps computing;
``'local'``
    a ``dask.distributed.LocalCluster`` started for the sweep
    (``workers`` processes, one thread each), on ``127.0.0.1`` only, with
    TLS and temporary credentials (no other process can connect), no dashboard,
    a private scratch space;
``'tls://host:port'``
    an existing Dask cluster, reached over TLS with the user's credentials from
    Dask's configuration (its workers need ``aimlib`` installed); an address of
    another protocol (``tcp://``) is refused, see :mod:`aimlib.cluster`;
a ``distributed.Client``
    used as is (left open).

A Dask scheduler is connected by :func:`aimlib.cluster.dask_client` before the
sweep touches its results file, so an unreachable address changes no file.  On
Dask a run that raises is returned as a value (:func:`run_caught`), so the sweep
reports it once, as on the other schedulers; a worker that dies is still Dask's
error, logged by Dask and reported as the run's failure.

Local workers run BLAS with ``threads`` threads (``OMP_NUM_THREADS`` & co.
are set for them unless already set).
"""
from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterator

from .._optional import optional_import
from ..cluster import worker_env

#: how often a pool worker checks that its parent is alive
PARENT_POLL_SECONDS = 0.25


def serial(execute: Callable, todo: list) -> Iterator:
    """Run ``execute`` on each run of ``todo`` in this process."""
    for run in todo:
        row, exc = run_caught(execute, run)
        yield run, row if exc is None else exc


def run_caught(execute: Callable, run):
    """``(row, None)``, or ``(None, exception)`` when ``execute(run)`` raises: a failed run as a value.

    Every scheduler reports a failed run once, in the sweep's report and failures file;
    on Dask a task that raised would also be logged by its worker ("Compute Failed",
    with the traceback).
    """
    try:
        return execute(run), None
    except Exception as exc:  # noqa: BLE001 - reported by the sweep, which goes on
        return None, exc


def exit_with_parent(parent: int, interval: float = PARENT_POLL_SECONDS):
    """Pool initializer: end this process as soon as ``parent`` is no longer its parent.

    A daemon thread polls ``os.getppid()``; an orphan is re-parented (to
    ``init`` or a subreaper), so a changed parent id means the sweep died.
    """
    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="aimlib-sweep-parent-watch", daemon=True).start()


def process_pool(execute: Callable, todo: list, workers: int, threads: int) -> Iterator:
    """Run ``todo`` on a local pool of ``workers`` spawned processes that die with this one."""
    with worker_env(threads):
        ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=exit_with_parent, initargs=(os.getpid(),))
        try:
            futures = {ex.submit(execute, run): run for run in todo}
            yield from _collect(futures, as_completed)
        finally:
            ex.shutdown(wait=False, cancel_futures=True)


def _collect(futures: dict, as_completed) -> Iterator:
    """Yield ``(run, row or exception)`` as the futures (``future -> run``) complete."""
    for fut in as_completed(list(futures)):
        run = futures[fut]
        try:
            yield run, fut.result()
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, not fatal
            yield run, exc


def _unwrap(results: Iterator) -> Iterator:
    """``(run, row or exception)`` from ``(run, (row, exception))`` (:func:`run_caught`) or ``(run, Dask's error)``."""
    for run, res in results:
        if isinstance(res, BaseException):   # the task itself failed: a worker died, a pickling error
            yield run, res
        else:
            row, exc = res
            yield run, row if exc is None else exc


def dask(execute: Callable, todo: list, client) -> Iterator:
    """Run ``todo`` through the ``distributed.Client`` ``client`` (see :func:`aimlib.cluster.dask_client`)."""
    distributed = optional_import("distributed", "a Dask scheduler")
    futures = {}
    try:
        n = len(todo)
        for i, run in enumerate(todo):
            fut = client.submit(run_caught, execute, run, key=f"aimlib-sweep-{run.key}", pure=False,
                                priority=n - i)
            futures[fut] = run
        yield from _unwrap(_collect(futures, distributed.as_completed))
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        futures.clear()
