"""The validated inputs of one GAMP-RIE run (:class:`Problem`, :func:`make_problem`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..backend import float_dtype, get_array_module, to_device
from ..channels import Channel
from ..index_map import IndexMap
from ..channels.deep_hardmax import DeepAttention
from ..priors import make_priors
from ..priors.joint_pair import JointPair
from ..tokens import TokenStream, draw_threads
from .steps import chunk_size_for

__all__ = ["Problem", "make_problem"]


@dataclass
class Problem:
    """The validated inputs of one GAMP-RIE run, on one device.

    ``X`` is an array ``(n, T, d)`` or a :class:`~aimlib.tokens.TokenStream` (regenerated tokens,
    read ``X[s:s + chunk_size]`` in chunks aligned with the stream's); ``index`` is its index operator
    (:class:`~aimlib.index_map.IndexMap`, square for a square channel, ``channel.square``, in chunks of
    ``chunk_size``).  ``shards``, when set (:class:`~aimlib.amp.shards.Shards`), holds the samples' side
    of the channel step on Dask workers.  ``joint``, when set (:class:`~aimlib.priors.joint_pair.JointPair`,
    passed as ``rho``), denoises the two layers together in place of their priors' ``denoise``.
    """

    xp: object
    X: object
    y: object
    S: list | None
    init: list | None
    channel: Channel
    priors: tuple
    dtype: np.dtype
    n: int
    T: int
    d: int
    chunk_size: int
    damping: float
    damp_g: bool
    damp_S: bool
    index: IndexMap
    shards: object = None
    joint: object = None


def _teachers(name, S, priors, d, xp, dt):
    """``S`` (``(d, d)`` or ``(L, d, d)``) as a list of ``L`` device matrices (symmetric where the prior is),
    or None."""
    if S is None:
        return None
    S = v.finite_array(name, S)
    L = len(priors)
    want = (d, d) if L == 1 else (L, d, d)
    if tuple(S.shape) != want:
        raise ValueError(f"{name} must have shape {want} to match X, got {tuple(S.shape)}")
    mats = [S] if L == 1 else [S[i] for i in range(L)]
    return [to_device(v.symmetric_matrix(name, M) if prior.symmetric else M, xp).astype(dt)
            for M, prior in zip(mats, priors)]


def make_problem(X, y, channel, rho, S, init, dtype, chunk_size, memory_mb, damping, damp) -> Problem:
    """The validated :class:`Problem` that :func:`gamp_rie` iterates on (its arguments, checked and
    moved to one array module); :func:`~aimlib.amp.steps.channel_step` and
    :func:`~aimlib.amp.steps.prior_step` take it, for a loop of one's own."""
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be an aimlib.channels.Channel, got {type(channel).__name__}")
    streamed = isinstance(X, TokenStream)
    X = X if streamed else v.finite_array("X", X, ndim=3)
    n, T, d = X.shape
    if n < 1 or T < 2 or d < 2:
        raise ValueError(f"X must have shape (n, T, d) with n >= 1, T >= 2, d >= 2, got {tuple(X.shape)}")
    L = channel.n_indices
    y = v.finite_array("y", y)
    if tuple(y.shape[:1]) != (n,):
        raise ValueError(f"y must hold one output per sample of X (n={n}), got shape {tuple(y.shape)}")
    if L == 1 and tuple(y.shape) != (n, T, T):
        raise ValueError(f"y must have shape {(n, T, T)} to match X, got {tuple(y.shape)}")
    joint = _joint_pair(rho, channel, T)
    priors = make_priors(channel, rho if joint is None else joint.priors)
    damping = v.in_range("damping", damping, 0.0, 1.0)
    if damping >= 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    v.choice("damp", damp, {"state", "messages", "both"})
    dt = float_dtype(dtype, X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    if streamed:    # whole chunks of the stream, each drawn once per pass; by default one per draw thread
        chunk_size = X.chunk * draw_threads() if chunk_size is None else v.integer("chunk_size", chunk_size, minimum=1)
        chunk_size = max(X.chunk, chunk_size - chunk_size % X.chunk)
    elif chunk_size is None:
        chunk_size = chunk_size_for(T, d, dt.itemsize, v.positive("memory_mb", memory_mb))
    chunk_size = min(v.integer("chunk_size", chunk_size, minimum=1), n)
    xp = get_array_module(X.xp.zeros(0) if streamed else X, y, S, init)
    X = X.on(xp, dt) if streamed else to_device(X, xp).astype(dt, copy=False)
    return Problem(xp=xp, X=X, y=to_device(y, xp).astype(dt, copy=False),
                   S=_teachers("S", S, priors, d, xp, dt), init=_teachers("init", init, priors, d, xp, dt),
                   channel=channel, priors=priors, dtype=dt, n=n, T=T, d=d, chunk_size=chunk_size,
                   damping=damping, damp_g=damp in ("messages", "both"), damp_S=damp in ("state", "both"),
                   index=IndexMap(X, square=channel.square, chunk_size=chunk_size), joint=joint)


def _joint_pair(rho, channel, T: int):
    """``rho`` if it is a :class:`~aimlib.priors.joint_pair.JointPair` (then the channel must be two
    ``deep-hardmax`` layers at ``T = 2``, the law of its ``g_out`` with a cross term), else None."""
    if not isinstance(rho, JointPair):
        return None
    if not (isinstance(channel, DeepAttention) and channel.n_indices == 2 and T == 2):
        raise ValueError(f"rho={rho!r} (a joint denoiser of two layers) needs the two-layer deep-hardmax channel "
                         f"at T = 2, got {channel!r} at T = {T}")
    return rho
