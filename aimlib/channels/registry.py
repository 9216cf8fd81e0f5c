"""Channels by name: the one factory that the CLI, sweeps, widgets and state evolution use."""
from __future__ import annotations

from .. import _validate as v
from .base import Channel
from .deep_hardmax import DeepAttention
from .hardmax import Hardmax
from .hardmax_polytope import MAX_T as MAX_HARDMAX_T
from .linear import Linear
from .softmax import Softmax
from .softmax_noisy import NoisySoftmax

__all__ = ["CHANNELS", "PARAMETERS", "MAX_T", "max_t", "t_limit", "make_channel"]

#: the channel names and the parameters each one takes
PARAMETERS = {"softmax": ("beta", "noise"), "hardmax": ("noise",), "linear": ("noise",),
              "deep-hardmax": ("c", "layers")}
#: the channel class each name makes (:func:`make_channel`)
CHANNELS = {"softmax": Softmax, "hardmax": Hardmax, "linear": Linear, "deep-hardmax": DeepAttention}
#: the channels whose Bayes side exists up to some ``T`` only: the largest ``T``, and why.  The one
#: list that the command line, the sweep specs and the panels read (:func:`t_limit`).
MAX_T = {"hardmax": (MAX_HARDMAX_T, "its Bayes side is a Gaussian cone of T(T-1) inequalities, tabulated "
                                    f"and tested up to T = {MAX_HARDMAX_T}"),
         "deep-hardmax": (2, "its Bayes side is tabulated for hardmax layers at T = 2")}


def max_t(channel: str) -> int | None:
    """The largest ``T`` of ``channel``'s Bayes side (:data:`aimlib.channels.registry.MAX_T`), or ``None`` where it
    has no limit."""
    return MAX_T[channel][0] if channel in MAX_T else None


def t_limit(channel: str, T: int) -> str | None:
    """Why ``channel`` has no Bayes side (state evolution, GAMP-RIE) at ``T`` tokens, or ``None``.

    The reason names the allowed range, e.g. "the hardmax channel is available for T <= 3 only
    (...)"; the callers add the name of their parameter and the value they got.
    """
    top = max_t(channel)
    if top is None or T <= top:
        return None
    why = MAX_T[channel][1]
    limit = "T = 2" if top == 2 else f"T <= {top}"
    return f"the {channel} channel is available for {limit} only ({why})"


def make_channel(channel="softmax", **params) -> Channel:
    """Return a :class:`~aimlib.channels.base.Channel` from its name, or pass an instance through.

    Parameters
    ----------
    channel : {'softmax', 'hardmax', 'linear', 'deep-hardmax'} or Channel
        The channel.  An instance is returned as it is (no ``params`` allowed).
    **params
        ``beta`` (softmax only), ``noise`` (label-noise variance; not for deep-hardmax)
        ``c`` and ``layers`` (the residual strength and the number of layers, 2 or 3, of
        deep-hardmax, hardmax attention layers).
        A parameter the channel does not take is refused; ``None`` means "not given".  ``softmax`` with
        ``noise > 0`` gives a :class:`~aimlib.channels.softmax_noisy.NoisySoftmax`.
    """
    params = {key: value for key, value in params.items() if value is not None}
    if isinstance(channel, Channel):
        if params:
            raise TypeError(f"channel is already an instance ({channel!r}); pass its parameters "
                            f"to the class, not {sorted(params)}")
        return channel
    if not isinstance(channel, str):
        raise TypeError(f"channel must be a channel name or an aimlib.channels.Channel, "
                        f"got {type(channel).__name__}")
    v.choice("channel", channel, CHANNELS)
    unused = sorted(set(params) - set(PARAMETERS[channel]))
    if unused:
        raise ValueError(f"{unused[0]} is not a parameter of the {channel} channel "
                         f"(it takes {', '.join(PARAMETERS[channel])})")
    if channel == "softmax" and params.get("noise", 0) != 0:
        return NoisySoftmax(**params)
    if channel == "softmax":
        params.pop("noise", None)
    return CHANNELS[channel](**params)
