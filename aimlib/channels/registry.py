"""Channels by name: the one factory that the CLI, sweeps, widgets and state evolution use."""
from __future__ import annotations

from .. import _validate as v
from .base import Channel
from .deep_hardmax import DeepAttention
from .hardmax import Hardmax
from .linear import Linear
from .softmax import Softmax
from .softmax_noisy import NoisySoftmax

__all__ = ["CHANNELS", "PARAMETERS", "T2_ONLY", "make_channel"]

#: the channel names and the parameters each one takes
PARAMETERS = {"softmax": ("beta", "noise"), "hardmax": ("noise",), "linear": ("noise",), "deep-hardmax": ("c", "layers")}
CHANNELS = {"softmax": Softmax, "hardmax": Hardmax, "linear": Linear, "deep-hardmax": DeepAttention}
#: the channels whose Bayes side exists for ``T = 2`` only, and why
T2_ONLY = {"hardmax": "its Bayes side is a bivariate orthant probability",
           "deep-hardmax": "its Bayes side is tabulated for hardmax layers at T = 2"}


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
