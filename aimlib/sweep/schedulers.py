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
    TLS and temporary credentials (no other process can connect), no dashboard;
``'tcp://host:8786'``
    an existing Dask cluster (its workers need ``aimlib`` installed);
a ``distributed.Client``
    used as is (left open).

A Dask scheduler is connected by :func:`dask_client` before the sweep
touches its results file, so an unreachable address changes no file.

Local workers run BLAS with ``threads`` threads (``OMP_NUM_THREADS`` & co.
are set for them unless already set).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterator

from .._optional import optional_import

#: how often a pool worker checks that its parent is alive
PARENT_POLL_SECONDS = 0.25
#: how long to wait for the Dask scheduler at an address
CONNECT_TIMEOUT = "20s"

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


class _worker_env:
    """Set the BLAS thread counts for worker processes started inside the block."""

    def __init__(self, threads: int):
        self.threads = str(threads)
        self.saved: list[str] = []

    def __enter__(self):
        for var in _THREAD_VARS:
            if var not in os.environ:
                self.saved.append(var)
                os.environ[var] = self.threads
        return self

    def __exit__(self, *exc):
        for var in self.saved:
            os.environ.pop(var, None)


def serial(execute: Callable, todo: list) -> Iterator:
    """Run ``execute`` on each run of ``todo`` in this process."""
    for run in todo:
        try:
            yield run, execute(run)
        except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
            yield run, exc


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
    with _worker_env(threads):
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


def _local_cluster(distributed, workers: int, threads: int):
    """``(cluster, security)``: a LocalCluster reachable from this process only.

    Scheduler and workers listen on ``127.0.0.1`` and speak TLS with temporary
    credentials (:meth:`distributed.security.Security.temporary`) held in memory,
    so another user of the machine can neither connect nor submit code; there
    is no dashboard, and the HTTP servers (on free ports of ``127.0.0.1``)
    answer only health checks.
    """
    dask = optional_import("dask", "the 'local' scheduler")
    optional_import("cryptography", "the TLS credentials of the 'local' scheduler")
    security = optional_import("distributed.security", "the 'local' scheduler").Security.temporary()
    with dask.config.set({"distributed.scheduler.http.routes": ["distributed.http.health"],
                          "distributed.worker.http.routes": ["distributed.http.health"]}):
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=threads, processes=True, host="127.0.0.1",
            security=security, dashboard_address=None,
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    return cluster, security


def _connect(distributed, scheduler: str, workers: int, threads: int):
    """``(client, cluster or None)`` for ``'local'`` or an address, connected now."""
    if scheduler == "local":
        cluster, security = _local_cluster(distributed, workers, threads)
        return distributed.Client(cluster, security=security), cluster
    try:
        return distributed.Client(scheduler, timeout=CONNECT_TIMEOUT), None
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to {scheduler!r} within {CONNECT_TIMEOUT} "
                         f"({exc}); check the address and that the scheduler is running") from None


@contextlib.contextmanager
def dask_client(scheduler, workers: int, threads: int):
    """The ``distributed.Client`` of ``scheduler``, connected on entry and closed on exit.

    ``scheduler`` is ``'local'`` (a cluster started here, closed on exit), an
    address (``'tcp://host:8786'``) or a ``distributed.Client`` (used as is, left open).
    """
    distributed = optional_import("distributed", "a Dask scheduler")
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be None, a string or a distributed.Client, "
                        f"got {type(scheduler).__name__}")
    with _worker_env(threads):
        client, cluster = _connect(distributed, scheduler, workers, threads)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def dask(execute: Callable, todo: list, client) -> Iterator:
    """Run ``todo`` through the ``distributed.Client`` ``client`` (see :func:`dask_client`)."""
    distributed = optional_import("distributed", "a Dask scheduler")
    futures = {}
    try:
        n = len(todo)
        for i, run in enumerate(todo):
            fut = client.submit(execute, run, key=f"aimlib-sweep-{run.key}", pure=False,
                                priority=n - i)
            futures[fut] = run
        yield from _collect(futures, distributed.as_completed)
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        futures.clear()
