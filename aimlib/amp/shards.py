r"""GAMP-RIE with its samples sharded over Dask workers.

The channel step is a sum over samples (:func:`~aimlib.amp.steps.channel_sums`):

.. math::

    B_l = \sum_{k}\sum_{\mu \in \text{shard } k} X_\mu^\top G^\mu_l X_\mu, \qquad
    W_{ll'} = \sum_k \sum_{\mu\in \text{shard } k} \sum_{a\le b}\Sigma_{ab}\,
              g^\mu_{l,ab}\, g^\mu_{l',ab}, \qquad
    \mathrm{tr}_l = \sum_k \sum_{\mu\in \text{shard } k} \sum_a g^\mu_{l,aa},

so each worker holds a contiguous run of samples (its tokens, or the key to
regenerate them, its outputs ``y`` and its channel messages ``g``), computes its
partial sums from the current estimates, and the driver adds the ``d x d``
matrices, forms ``R`` and runs the prior step (the RIE) once.  A shard is a Dask
actor (:class:`Shard`): its messages stay on its worker from one iteration to
the next, and per iteration only the estimates (``L d^2`` numbers) go out and the
sums (``L d^2 + L^2 + L``) come back.  The numbers are those of the single-process
run up to the order of the additions (round-off).

The cluster is the sweeps' (:func:`aimlib.cluster.dask_client`):
``'local'`` starts a ``LocalCluster`` on ``127.0.0.1`` with TLS and temporary
credentials (no other process can connect) and a private scratch space, a TLS
address ``'tls://host:port'`` connects to a running scheduler with the user's
credentials, a ``distributed.Client`` is used as is.  ``'local'`` starts one worker
per shard, at most as many as CPUs (:func:`check_shards`), and a run has at most as
many shards as chunks of samples.  Symmetric priors only (one or several layers);
the square prior of untied key and query runs in one process.
"""
from __future__ import annotations

import contextlib
import math
import os

import numpy as np

from .. import _validate as v
from ..backend import backend_name, module_named, to_device, to_host
from ..cluster import check_workers, dask_client
from ..tokens import TokenStream
from .problem import make_problem
from .steps import channel_sums

__all__ = ["Shard", "Shards", "check_shards", "sharded", "shard_bounds"]

#: the workers of a ``'local'`` cluster when ``shards`` is not given
DEFAULT_LOCAL_SHARDS = 2


def check_shards(name: str, shards, scheduler):
    """``shards`` (``None`` or an integer) if a run on ``scheduler`` can have that many, else a ``ValueError``.

    ``'local'`` starts one worker process (~100 MB) per shard, so at most as many as CPUs
    (:func:`aimlib.cluster.check_workers`); on another cluster the shards share its workers.
    Either way a run has at most as many shards as chunks of samples (:func:`shard_bounds`).
    """
    if shards is None:
        return None
    if _is_local(scheduler):
        return check_workers(name, shards)
    return v.integer(name, shards, minimum=1)


def shard_bounds(n: int, chunk: int, shards: int) -> list:
    """``[(start, stop), ...]``: ``n`` samples in at most ``shards`` contiguous runs of whole chunks.

    Each run holds ``ceil(n_chunks / shards)`` or one chunk fewer (the last may end with a
    partial chunk); fewer runs than ``shards`` when there are fewer chunks.
    """
    n_chunks = math.ceil(n / chunk)
    shards = min(shards, n_chunks)
    cuts = [round(k * n_chunks / shards) * chunk for k in range(shards + 1)]
    return [(a, min(b, n)) for a, b in zip(cuts[:-1], cuts[1:])]


class Shard:
    """One worker's samples and their channel messages (a Dask actor).

    Parameters
    ----------
    X : array (n_k, T, d) or TokenStream
        The shard's tokens (host array), or the window of the stream that regenerates them.
    y, channel, priors, dtype, chunk_size, damping, damp :
        As in :func:`aimlib.amp.problem.make_problem`, for the shard's samples.
    backend : {'numpy', 'cupy'}
        The worker's array module (the driver's).
    """

    def __init__(self, X, y, channel, priors, dtype, chunk_size, damping, damp, backend):
        xp = module_named(backend)
        X = X.on(xp, dtype) if isinstance(X, TokenStream) else to_device(X, xp)
        self.p = make_problem(X, to_device(y, xp), channel, priors, None, None, dtype, chunk_size, 64.0,
                              damping, damp)
        L = len(self.p.priors)
        self.g_prev = xp.zeros((self.p.n, L, self.p.T, self.p.T), dtype=self.p.dtype)
        self.g_new = xp.empty_like(self.g_prev)

    def channel_sums(self, S_hat, m, ons, t):
        """:func:`~aimlib.amp.steps.channel_sums` over this shard (host arrays); keeps the new messages."""
        S_hat = [to_device(S, self.p.xp).astype(self.p.dtype, copy=False) for S in S_hat]
        B, W, tr = channel_sums(self.p, S_hat, m, ons, self.g_prev, self.g_new, t)
        self.g_prev, self.g_new = self.g_new, self.g_prev
        return [to_host(b) for b in B], W, tr


class Shards:
    """The shards of one run, as actors on the workers of ``client`` (round robin), and their sum.

    :meth:`close` releases the actors; it runs before the client closes, so no worker is
    shut down while it still holds one.
    """

    def __init__(self, client, p, shards: int | None):
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise ValueError("scheduler: the Dask cluster has no workers")
        self.client = client
        self.bounds = shard_bounds(p.n, p.chunk_size, shards or len(workers))
        self.xp, self.dtype = p.xp, p.dtype
        y = to_host(p.y)
        futures = []
        for k, (a, b) in enumerate(self.bounds):
            where = [workers[k % len(workers)]]
            Xk = p.X.window(a, b) if isinstance(p.X, TokenStream) else client.scatter(to_host(p.X[a:b]),
                                                                                       workers=where)
            futures.append(client.submit(Shard, Xk, client.scatter(y[a:b], workers=where), p.channel, p.priors,
                                         p.dtype, p.chunk_size, p.damping, _damp_name(p), backend_name(p.xp),
                                         actor=True, workers=where, allow_other_workers=False))
        self.futures = futures
        self.actors = [f.result() for f in futures]

    def close(self):
        """Release the actors (their workers drop the shards' samples and messages)."""
        self.actors = []
        self.client.cancel(self.futures)
        self.futures = []

    def channel_sums(self, S_hat, m, ons, t):
        """The sums of every shard, added (``B`` on the driver's array module)."""
        host = [to_host(S) for S in S_hat]
        calls = [actor.channel_sums(host, m, ons, t) for actor in self.actors]
        B, W, tr = calls[0].result()
        for call in calls[1:]:
            Bk, Wk, trk = call.result()
            B, W, tr = [a + b for a, b in zip(B, Bk)], W + Wk, tr + trk
        return [to_device(b, self.xp).astype(self.dtype, copy=False) for b in B], W, np.asarray(tr)


def _is_local(scheduler) -> bool:
    return isinstance(scheduler, str) and scheduler == "local"


def _damp_name(p) -> str:
    """The ``damp`` option of :func:`~aimlib.amp.gamp_rie` that gave ``p.damp_g`` and ``p.damp_S``."""
    return "both" if p.damp_g and p.damp_S else ("messages" if p.damp_g else "state")


@contextlib.contextmanager
def sharded(p, scheduler, shards: int | None, threads: int = 1):
    """Give ``p`` its :class:`Shards` on the cluster of ``scheduler`` for the duration of the block.

    ``shards`` (:func:`check_shards`) defaults to the number of workers; ``'local'``
    starts ``shards`` workers of ``threads`` BLAS threads (default
    :data:`DEFAULT_LOCAL_SHARDS`, at most the CPUs), never more than there are chunks
    of samples.  On exit the actors are released, then the client and a local cluster close.
    """
    if p.channel.square:
        raise ValueError("scheduler: sharded GAMP-RIE runs symmetric index matrices (one or several layers); "
                         "the square prior of untied key and query runs in one process (scheduler=None)")
    shards = check_shards("shards", shards, scheduler)
    local = min(shards or DEFAULT_LOCAL_SHARDS, os.cpu_count() or 1, math.ceil(p.n / p.chunk_size))
    with dask_client(scheduler, local, threads) as client:
        p.shards = Shards(client, p, local if _is_local(scheduler) else shards)
        try:
            yield p
        finally:
            p.shards.close()
            p.shards = None
