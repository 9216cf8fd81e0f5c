r"""A channel whose ``g_out`` runs on host threads, one slice of the samples each.

The hardmax output functions (one layer, :mod:`~aimlib.channels.hardmax`, and several,
:mod:`~aimlib.channels.deep_hardmax`) are evaluated on the host whatever the array module:
on a GPU, one host core then sets the pace of GAMP-RIE's channel step at large ``d``.
``g_out(y, omega, V)`` maps each sample ``(y_mu, omega_mu)`` alone,

.. math::

    g_{\rm out}(y, \omega, V)_{[a, b)} = g_{\rm out}(y_{[a, b)}, \omega_{[a, b)}, V),

so the slices ``mu in [a_i, a_{i+1})`` evaluated on separate threads and concatenated give the
same array as one call, to the last bit (``tests/test_threaded_channel.py``): the numbers are
the channel's, only the wall time changes.  The bivariate normal sums inside release the GIL
(NumPy), which is what lets the threads run side by side.
"""
from __future__ import annotations

import copy

import numpy as np

from .. import _validate as v
from ..backend import get_array_module, to_device, to_host

__all__ = ["MIN_SPLIT", "threaded_channel"]

#: ``g_out`` calls on fewer samples than this run on the calling thread
MIN_SPLIT = 4096


def threaded_channel(channel, pool, threads: int, min_split: int = MIN_SPLIT):
    r"""``channel`` with ``g_out`` evaluated on the host in ``threads`` slices of the samples.

    Parameters
    ----------
    channel : Channel
        Any channel; its other methods are untouched.
    pool : concurrent.futures.Executor
        Runs the slices (a ``ThreadPoolExecutor`` of at least ``threads`` workers).
    threads : int
        Number of slices, ``>= 1``; ``1`` returns ``channel`` itself.
    min_split : int
        ``g_out`` calls on fewer samples run on the calling thread (``>= 1``).

    Returns
    -------
    Channel
        A shallow copy of ``channel`` of a subclass of its class whose ``g_out`` cuts the
        samples at ``a_i = floor(i n / threads)``, evaluates the slices in ``pool`` and returns
        their concatenation on the array module of ``omega``.
    """
    threads = v.integer("threads", threads, minimum=1)
    min_split = v.integer("min_split", min_split, minimum=1)
    if threads == 1:
        return channel
    base = type(channel)

    def g_out(self, y, omega, V):
        n = len(omega)
        if n < min_split:
            return base.g_out(self, y, omega, V)
        xp, y, omega = get_array_module(omega), to_host(y), to_host(omega)
        cuts = np.linspace(0, n, threads + 1).astype(int)
        parts = [pool.submit(base.g_out, self, y[a:b], omega[a:b], V) for a, b in zip(cuts[:-1], cuts[1:])]
        return to_device(np.concatenate([to_host(f.result()) for f in parts]), xp)

    out = copy.copy(channel)
    out.__class__ = type(base.__name__, (base,), {"g_out": g_out})
    return out
