"""Dask clusters for the sweeps and for sharded GAMP-RIE: a private local one, or one at an address.

``'local'``
    a ``distributed.LocalCluster`` started here, on ``127.0.0.1`` only, with TLS
    and temporary credentials held in memory (no other process, so no other
    user of the machine, can connect or submit code), no dashboard;
``'tcp://host:8786'``
    a running Dask scheduler (its workers need ``aimlib`` installed);
a ``distributed.Client``
    used as is (left open).

Local workers run BLAS with ``threads`` threads (``OMP_NUM_THREADS`` & co. are
set for them unless already set).
"""
from __future__ import annotations

import contextlib
import os

from ._optional import optional_import

__all__ = ["CONNECT_TIMEOUT", "THREAD_VARS", "worker_env", "local_cluster", "dask_client"]

#: how long to wait for the Dask scheduler at an address
CONNECT_TIMEOUT = "20s"

#: the environment variables that set the thread counts of BLAS and friends
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


class worker_env:
    """Set the BLAS thread counts for worker processes started inside the block."""

    def __init__(self, threads: int):
        self.threads = str(threads)
        self.saved: list[str] = []

    def __enter__(self):
        for var in THREAD_VARS:
            if var not in os.environ:
                self.saved.append(var)
                os.environ[var] = self.threads
        return self

    def __exit__(self, *exc):
        for var in self.saved:
            os.environ.pop(var, None)


def local_cluster(distributed, workers: int, threads: int):
    """``(cluster, security)``: a LocalCluster reachable from this process only.

    Scheduler and workers listen on ``127.0.0.1`` and speak TLS with temporary
    credentials (``distributed.security.Security.temporary()``) held in memory,
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
        cluster, security = local_cluster(distributed, workers, threads)
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
    with worker_env(threads):
        client, cluster = _connect(distributed, scheduler, workers, threads)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
