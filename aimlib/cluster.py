"""Dask clusters for the sweeps and for sharded GAMP-RIE: a private local one, or one over TLS.

``'local'``
    a ``distributed.LocalCluster`` started here (:func:`local_cluster`), on ``127.0.0.1``
    only, with TLS and temporary credentials held in memory (no other process, so no
    other user of the machine, can connect or submit code), no dashboard, and its scratch
    space in a fresh folder of mode 0700 (:func:`private_scratch`), removed at close;
``'tls://host:port'``
    a running Dask scheduler, reached over TLS with this user's credentials from Dask's
    configuration (:data:`CREDENTIALS`, :func:`remote_security`): the CA file verifies the
    scheduler's certificate, the client certificate and key prove who connects (its
    workers need ``aimlib`` installed);
a ``distributed.Client``
    used as is (left open).

Any other address is refused (:func:`check_scheduler`).  A Dask client unpickles what
the scheduler and its workers send back, so a scheduler that does not prove whose it is
(``tcp://``, ``ws://``, ``ucx://``: whoever listens there, another user of the machine
too) would run code as this user.

Local workers run BLAS with ``threads`` threads (``OMP_NUM_THREADS`` & co. are
set for them unless already set); there are at most as many as CPUs (:func:`check_workers`).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
import sys
import tempfile
import urllib.parse

from . import _validate
from ._optional import optional_import

__all__ = ["CONNECT_TIMEOUT", "CREDENTIALS", "TLS_HELP", "THREAD_VARS", "check_scheduler", "check_workers",
           "worker_env", "private_scratch", "local_cluster", "remote_security", "dask_client"]

#: how long to wait for the Dask scheduler at an address
CONNECT_TIMEOUT = "20s"

#: the client's TLS credentials in Dask's configuration -> the environment variable that sets each;
#: the CA file and the certificate are required, the key may be in the certificate's file
CREDENTIALS = {"distributed.comm.tls.ca-file": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
               "distributed.comm.tls.client.cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
               "distributed.comm.tls.client.key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"}
#: what the command line's help says a TLS scheduler needs
TLS_HELP = f"your CA, certificate and key in Dask's configuration: {', '.join(CREDENTIALS.values())}"

#: the environment variables that set the thread counts of BLAS and friends
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def check_scheduler(name: str, scheduler, names=("local",), client: bool = False) -> str:
    """``scheduler`` if it is one of ``names`` or a TLS address ``tls://host:port``, else an error naming ``name``.

    ``client`` says whether the caller also takes a ``distributed.Client`` (named in the
    message).  An address of another protocol is refused with the reason: only TLS with
    the user's CA proves whose scheduler answers (see the module's docstring).
    """
    allowed = [*(repr(s) for s in names), "tls://host:port", *(["a distributed.Client"] if client else [])]
    allowed = ", ".join(allowed[:-1]) + " or " + allowed[-1]
    if not isinstance(scheduler, str):
        raise TypeError(f"{name} must be {allowed}, got {type(scheduler).__name__}")
    if scheduler in names:
        return scheduler
    scheme, sep, _ = scheduler.partition("://")
    if not sep:
        raise ValueError(f"{name} must be {allowed}, got {scheduler!r}")
    if scheme != "tls":
        raise ValueError(f"{name} refuses {scheduler!r}: only a TLS scheduler verified by your CA proves "
                         f"whose it is, and a Dask client unpickles what the scheduler sends, so whoever "
                         f"listens there (another user of this machine too) would run code as you; use "
                         f"{allowed}, with the credentials in Dask's configuration ({', '.join(CREDENTIALS.values())})")
    try:
        parts = urllib.parse.urlsplit(scheduler)
        port = parts.port
    except ValueError:
        port = None
    if not port or not parts.hostname or parts.username or parts.path or parts.query or parts.fragment:
        raise ValueError(f"{name} must be tls://host:port with a port from 1 to 65535, got {scheduler!r}")
    return scheduler


def check_workers(name: str, workers) -> int:
    """``workers`` if it is an integer from 1 to the CPUs, else a ``ValueError`` naming ``name``.

    Each local worker is a Python process of about 100 MB, so more of them than
    CPUs only costs memory.
    """
    cpus = os.cpu_count() or 1
    workers = _validate.integer(name, workers)
    if not 1 <= workers <= cpus:
        raise ValueError(f"{name} must be between 1 and {cpus} (the CPUs of this machine; each "
                         f"worker is a process of ~100 MB), got {workers}; pass {name} {cpus} "
                         "or fewer")
    return workers


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


@contextlib.contextmanager
def private_scratch():
    """A new folder for a local cluster's scratch space, private to this user; removed on exit.

    ``tempfile.mkdtemp`` creates it with mode 0700 under a fresh random name, so no other
    user can have planted a link or a module in it.  Dask puts the scratch folders of its
    scheduler, nannies and workers first on their import path (``sys.path``); on exit every
    entry inside the folder leaves this process's path too, so no other user can recreate
    the removed folder with modules that this process would import.
    """
    path = tempfile.mkdtemp(prefix="aimlib-dask-")
    try:
        yield path
    finally:
        sys.path[:] = [e for e in sys.path if not (e == path or e.startswith(path + os.sep))]
        shutil.rmtree(path, ignore_errors=True)


def local_cluster(distributed, workers: int, threads: int, scratch: str):
    """``(cluster, security)``: a LocalCluster reachable from this process only.

    Scheduler and workers listen on ``127.0.0.1`` and speak TLS with temporary
    credentials (``distributed.security.Security.temporary()``) held in memory,
    so another user of the machine can neither connect nor submit code; there
    is no dashboard, and the HTTP servers (on free ports of ``127.0.0.1``)
    answer only health checks.  Their scratch space is in ``scratch``
    (:func:`private_scratch`), Dask's ``temporary-directory`` while they start.
    """
    dask = optional_import("dask", "the 'local' scheduler")
    optional_import("cryptography", "the TLS credentials of the 'local' scheduler")
    security = optional_import("distributed.security", "the 'local' scheduler").Security.temporary()
    with dask.config.set({"temporary-directory": scratch,
                          "distributed.scheduler.http.routes": ["distributed.http.health"],
                          "distributed.worker.http.routes": ["distributed.http.health"]}):
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=threads, processes=True, host="127.0.0.1",
            security=security, dashboard_address=None, local_directory=scratch,
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    return cluster, security


def remote_security():
    """The ``distributed.security.Security`` of a TLS scheduler: this user's credentials, loaded now.

    They come from Dask's configuration (:data:`CREDENTIALS`: a YAML file or the environment
    variables); the CA file and the client certificate must be set, and the files must load,
    else a ``ValueError`` says which.
    """
    dask = optional_import("dask", "a Dask scheduler")
    missing = [key for key in list(CREDENTIALS)[:2] if not dask.config.get(key, None)]
    if missing:
        raise ValueError(f"scheduler: a TLS scheduler needs your credentials in Dask's configuration, and "
                         f"{' and '.join(missing)} are not set (environment "
                         f"{' and '.join(CREDENTIALS[k] for k in missing)}); the CA file verifies the "
                         "scheduler, the certificate and key prove that you connect")
    security = optional_import("distributed.security", "a Dask scheduler").Security()
    try:
        security.get_connection_args("client")   # builds the TLS context: reads and checks the files
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ValueError(f"scheduler: cannot load the TLS credentials of Dask's configuration "
                         f"({', '.join(CREDENTIALS)}): {exc}") from None
    return security


def _connect(distributed, target, security, scheduler: str):
    """The ``distributed.Client`` of ``target`` (a cluster or an address), connected now."""
    try:
        return distributed.Client(target, security=security, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to {scheduler!r} within {CONNECT_TIMEOUT} "
                         f"({' '.join(str(exc).split())}); check the address, that the scheduler is "
                         "running and that your CA signed its certificate") from None


async def _stop_heartbeat(dask_worker, wait: float = 10.0) -> None:
    """Stop a local worker's heartbeats to the scheduler and wait (at most ``wait`` seconds) for one in flight.

    Why: the cluster's shutdown closes the scheduler's connections while its workers are still alive;
    a heartbeat caught in between fails, and the worker logs the failure with a traceback to the
    standard error of an otherwise clean run.  Stopped first, no heartbeat is left to fail.
    """
    dask_worker.periodic_callbacks["heartbeat"].stop()
    for _ in range(int(wait / 0.01)):
        if not dask_worker.rpc.active:      # the heartbeat's pooled connection to the scheduler is back
            return
        await asyncio.sleep(0.01)


@contextlib.contextmanager
def dask_client(scheduler, workers: int, threads: int):
    """The ``distributed.Client`` of ``scheduler``, connected on entry and closed on exit.

    ``scheduler`` is ``'local'`` (a cluster of ``workers`` processes started here), a TLS
    address ``'tls://host:port'`` (:func:`check_scheduler`) or a ``distributed.Client``
    (used as is, left open).  On exit the local workers stop their heartbeats (:func:`_stop_heartbeat`),
    the client closes, then the local cluster, then its scratch space is removed.
    """
    distributed = optional_import("distributed", "a Dask scheduler")
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    scheduler = check_scheduler("scheduler", scheduler, client=True)
    with contextlib.ExitStack() as stack:
        if scheduler == "local":
            scratch = stack.enter_context(private_scratch())
            with worker_env(threads):
                target, security = local_cluster(distributed, workers, threads, scratch)
            stack.callback(target.close)
        else:
            target, security = scheduler, remote_security()
        client = _connect(distributed, target, security, scheduler)
        stack.callback(client.close)
        if scheduler == "local":
            stack.callback(client.run, _stop_heartbeat)
        yield client
