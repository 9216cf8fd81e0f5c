"""Channels by name: the one factory that the CLI, sweeps, widgets and state evolution use."""
from __future__ import annotations

from .. import _validate as v
from .base import Channel
from .deep_hardmax import DeepAttention
from .hardmax import Hardmax
from .heads import ConcatenatedSoftmax, MultiHeadSoftmax
from .linear import Linear
from .softmax import Softmax
from .softmax_noisy import NoisySoftmax
from .untied_softmax import UntiedSoftmax

__all__ = ["CHANNELS", "PARAMETERS", "MAX_T", "capabilities", "max_t", "t_limit", "threshold_limit",
           "make_channel"]

#: the channel class each name makes (:func:`make_channel`); what each can do is declared on its class
#: (:class:`~aimlib.channels.base.Channel`: ``parameters``, ``layer_counts``, ``max_T``, ``noise_max_T``,
#: ``threshold``, ``trainable``, ...), and the interfaces ask :func:`capabilities` instead of testing names
CHANNELS = {"softmax": Softmax, "hardmax": Hardmax, "linear": Linear, "deep-hardmax": DeepAttention,
            "untied-softmax": UntiedSoftmax, "heads": MultiHeadSoftmax, "heads-concatenated": ConcatenatedSoftmax}
#: the channel names and the parameters each one takes
PARAMETERS = {name: cls.parameters for name, cls in CHANNELS.items()}
#: the channels whose Bayes side exists up to some ``T`` only: the largest ``T``, and why.  The one
#: list that the command line, the sweep specs and the panels read (:func:`t_limit`).
MAX_T = {name: (cls.max_T, cls.max_T_why) for name, cls in CHANNELS.items() if cls.max_T is not None}


def capabilities(channel: str) -> type[Channel]:
    """The class of the channel named ``channel``, whose attributes declare what it can do."""
    return CHANNELS[v.choice("channel", channel, CHANNELS)]


def max_t(channel: str) -> int | None:
    """The largest ``T`` of ``channel``'s Bayes side (:data:`aimlib.channels.registry.MAX_T`), or ``None`` where it
    has no limit."""
    return MAX_T[channel][0] if channel in MAX_T else None


def _range(T: int) -> str:
    return "T = 2" if T == 2 else f"T <= {T}"


def t_limit(channel: str, T: int, noise: float = 0.0) -> str | None:
    """Why ``channel`` has no Bayes side (state evolution, GAMP-RIE) at ``T`` tokens, or ``None``.

    With ``noise > 0`` the limit is the class's ``noise_max_T`` (``0``: no Bayes side with label
    noise at all).  The reason names the allowed range, e.g. "the hardmax channel is available
    for T <= 3 only (...)"; the callers add the name of their parameter and the value they got.
    """
    cls = capabilities(channel)
    if not cls.bayes_side:
        return f"the {channel} channel has no Bayes side ({cls.bayes_side_why})"
    if noise and cls.noise_max_T == 0:
        return f"the {channel} channel has no Bayes side with label noise; give noise 0"
    if noise and cls.noise_max_T is not None and T > cls.noise_max_T:
        return (f"the {channel} channel with label noise is available for {_range(cls.noise_max_T)} "
                f"only (without label noise every T >= 2 is solvable)")
    top = max_t(channel)
    if top is None or T <= top:
        return None
    return f"the {channel} channel is available for {_range(top)} only ({MAX_T[channel][1]})"


def threshold_limit(channel: str, T: int) -> str | None:
    """Why ``channel``'s threshold (its ``threshold`` kind) is not offered at ``T``, or ``None``."""
    cls = capabilities(channel)
    if cls.threshold is None or not cls.bayes_side:
        return f"the {channel} channel offers no recovery threshold"
    if cls.threshold_max_T is None or T <= cls.threshold_max_T:
        return None
    return (f"the {channel} {cls.threshold}-recovery threshold is available for "
            f"{_range(cls.threshold_max_T)} only ({cls.threshold_max_T_why})")


def make_channel(channel="softmax", **params) -> Channel:
    """Return a :class:`~aimlib.channels.base.Channel` from its name, or pass an instance through.

    Parameters
    ----------
    channel : {'softmax', 'hardmax', 'linear', 'deep-hardmax', 'untied-softmax', 'heads', 'heads-concatenated'}
        or Channel
        The channel.  An instance is returned as it is (no ``params`` allowed).
    **params
        ``beta`` (the softmax channels), ``noise`` (label-noise variance; softmax, hardmax, linear,
        heads), ``c`` and ``layers`` (the residual strength and the number of layers, 2 or 3, of
        deep-hardmax, hardmax attention layers), ``heads`` (the number of softmax heads: averaged,
        ``heads``, or side by side, ``heads-concatenated``).  ``untied-softmax`` is the softmax of
        untied key and query (square indices, two sectors).
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
    if CHANNELS[channel] is Softmax and params.get("noise", 0) != 0:
        return NoisySoftmax(**params)
    if CHANNELS[channel] is Softmax:
        params.pop("noise", None)
    return CHANNELS[channel](**params)
