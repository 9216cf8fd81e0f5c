"""aimlib: Bayes-optimal learning of attention-indexed models.

Modules
-------
backend
    NumPy/CuPy selection (one code path for CPU and GPU).
channels
    Output channels ``y = g(h)`` and their Bayes side (``log Z_out``, ``g_out``, ``F_out``).
model
    Sampling teachers, tokens, attention indices and data sets.
rmt
    Random-matrix toolkit: spectra, free convolution, the RIE and the prior MMSE.
hardmax
    The hardmax channel for ``T = 2``: orthant probabilities, ``g_out``, ``F_out``.
state_evolution
    Replica-symmetric fixed points, thresholds, free entropy, generalization error.
amp
    GAMP-RIE, the message-passing algorithm that tracks the state evolution.
gd
    Gradient descent on attention students, with averaging over restarts.
widgets
    Interactive ipywidgets panels (imported on demand: needs ipywidgets and matplotlib).
"""
from . import amp, backend, channels, gd, hardmax, model, rmt, state_evolution
from .errors import ConvergenceError

__version__ = "0.1.0"
__all__ = ["amp", "backend", "channels", "gd", "hardmax", "model", "rmt", "state_evolution",
           "ConvergenceError", "__version__"]
