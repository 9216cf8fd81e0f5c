"""aimlib: Bayes-optimal learning of attention-indexed models.

Modules
-------
backend
    NumPy/CuPy selection (one code path for CPU and GPU).
channels
    Output channels ``y = g(h)``: softmax, hardmax, linear, label noise.
model
    Sampling teachers, tokens, attention indices and data sets.
"""
from . import backend, channels, model
from .errors import ConvergenceError

__version__ = "0.1.0"
__all__ = ["backend", "channels", "model", "ConvergenceError", "__version__"]
