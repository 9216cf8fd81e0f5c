"""Output channels of the attention-indexed model: forward map ``y = f(h)`` and Bayes side.

One module per channel, each holding both (book chapter in brackets):

* :mod:`~aimlib.channels.base` -- the contract (``log_partition``, ``g_out``,
  ``fisher``, the index covariance shape ``sigma2``, ``L`` indices per sample);
* :mod:`~aimlib.channels.linear` -- the identity ``y = h`` (replica computation);
* :mod:`~aimlib.channels.softmax` -- row-wise softmax (the softmax channel);
* :mod:`~aimlib.channels.softmax_noisy` -- softmax plus label noise, ``T = 2`` (label noise);
* :mod:`~aimlib.channels.hardmax` -- row-wise argmax, ``T = 2`` (the hardmax channel);
* :mod:`~aimlib.channels.deep_hardmax` -- attention layers as one AIM with one index
  matrix per layer; exact Bayes side for two or three hardmax layers, ``T = 2``;
* :mod:`~aimlib.channels.deep_patterns` -- that Bayes side for two layers: the sum over
  the latent layer-1 patterns and its tabulated output functions;
* :mod:`~aimlib.channels.deep_histories` -- the sum over the pattern histories of ``L``
  layers, and the tabulated output functions of three;
* :mod:`~aimlib.channels.deep_moments` -- two layers' moments under the law that GAMP-RIE's
  correlated estimates meet: ``F``, the responses ``Gamma``, ``Lambda`` and the mixing they make;
* :mod:`~aimlib.channels.heads` -- ``H`` softmax heads, ``H`` indices per sample: averaged
  (forward map and counting bound, no Bayes side) or side by side (the softmax Bayes
  side per head) (beyond the solvable model);
* :mod:`~aimlib.channels.untied_softmax` -- row-wise softmax of untied indices (square ``S``, two
  sectors: the symmetric and antisymmetric parts) (beyond the solvable model);
* :mod:`~aimlib.channels.registry` -- channels by name (:func:`make_channel`);
* :mod:`~aimlib.channels.threaded` -- any channel with its host-side ``g_out`` split over threads
  (the same numbers; :func:`~aimlib.channels.threaded.threaded_channel`);
* :mod:`~aimlib.channels.check` -- the contract check any new channel runs (:func:`check_channel`).
"""
from . import (base, check, deep_hardmax, deep_histories, deep_moments, deep_patterns, hardmax, heads, linear,
               registry, softmax, softmax_noisy, threaded, untied_softmax)
from .base import Channel, fisher_mc, sample_indices, sample_se_measure, sigma2
from .check import check_channel
from .deep_hardmax import DeepAttention
from .hardmax import Hardmax
from .heads import ConcatenatedSoftmax, MultiHeadSoftmax
from .linear import Linear
from .registry import CHANNELS, make_channel
from .softmax import Softmax, row_softmax, softmax_k
from .softmax_noisy import NoisySoftmax
from .untied_softmax import UntiedSoftmax

__all__ = ["Channel", "Softmax", "NoisySoftmax", "Hardmax", "Linear", "DeepAttention", "MultiHeadSoftmax",
           "ConcatenatedSoftmax", "UntiedSoftmax",
           "make_channel", "CHANNELS", "check_channel",
           "row_softmax", "softmax_k", "sigma2", "sample_indices", "sample_se_measure", "fisher_mc",
           "base", "linear", "softmax", "softmax_noisy", "hardmax", "deep_hardmax", "deep_histories", "deep_moments",
           "deep_patterns", "heads",
           "registry", "threaded", "untied_softmax", "check"]
