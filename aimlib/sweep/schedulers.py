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
    (``workers`` processes, one thread each);
``'tcp://host:8786'``
    an existing Dask cluster (its workers need ``aimlib`` installed);
a ``distributed.Client``
    used as is (left open).

Local workers run BLAS with ``threads`` threads (``OMP_NUM_THREADS`` & co.
are set for them unless already set).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterator

#: how often a pool worker checks that its parent is alive
PARENT_POLL_SECONDS = 0.25

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
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

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


def _dask_client(distributed, scheduler, workers: int, threads: int):
    """``(client, cluster or None)`` for ``'local'`` or an address."""
    if scheduler == "local":
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                           processes=True, dashboard_address=":0")
        return distributed.Client(cluster), cluster
    try:
        return distributed.Client(scheduler, timeout="20s"), None
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to {scheduler!r} ({exc})") from None


def dask(execute: Callable, todo: list, scheduler, workers: int, threads: int) -> Iterator:
    """Run ``todo`` on a Dask cluster: ``'local'``, an address or a ``distributed.Client``."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError("a Dask scheduler needs dask[distributed] "
                          "(pip install 'dask[distributed]')") from exc
    own = not isinstance(scheduler, distributed.Client)
    if own and not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be None, a string or a distributed.Client, "
                        f"got {type(scheduler).__name__}")
    client, cluster = scheduler, None
    if own:
        with _worker_env(threads):
            client, cluster = _dask_client(distributed, scheduler, workers, threads)
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
        if own:
            client.close()
            if cluster is not None:
                cluster.close()
