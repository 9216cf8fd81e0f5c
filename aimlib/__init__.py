"""aimlib: Bayes-optimal learning of attention-indexed models.

Subpackages and modules
-----------------------
backend
    NumPy/CuPy selection (one code path for CPU and GPU).
channels
    Output channels ``y = f(h)`` and their Bayes side, one module per channel
    (``channels.softmax``, ``channels.softmax_noisy``, ``channels.hardmax``, ``channels.linear``,
    ``channels.deep_hardmax`` for two attention layers).
priors
    Priors on the index matrix (Gaussian, Wishart, centred, ...): law and Bayes side, beside the channels.
model
    Sampling teachers, tokens, attention indices (one or several per sample) and data sets.
tokens
    Token laws beyond the standard Gaussian (Rademacher, uniform, sparse, Student-t, correlated).
rmt
    Random-matrix toolkit: spectra, free convolution, the RIE and the prior MMSE.
state_evolution
    Replica-symmetric fixed points, thresholds, free entropy, generalization error.
amp
    GAMP-RIE, the message-passing algorithm that tracks the state evolution.
gd
    Gradient descent on attention students, with averaging over restarts.
untied
    Untied key and query ``S = Q K^T / sqrt(r d)``: counting, rectangular RIE, state evolution.
convex
    The convex route: minimum-trace recovery, its statistical dimension and threshold.
sweep
    Parameter sweeps with a resumable result store (needs the ``sweep`` extra).
widgets
    Interactive ipywidgets panels (needs the ``widgets`` extra).
plotting
    The book's figure style (needs matplotlib).
tables
    Text tables and packed lines that fit the book's output box (``OUTPUT_WIDTH`` characters).
cli
    The command line, ``python -m aimlib``.

Every subpackage is imported on first access (``aimlib.sweep``, ``from aimlib import amp``), so
``import aimlib`` costs milliseconds and a command imports only what it uses.
"""
from ._lazy import import_on_demand
from .errors import ConvergenceError

__version__ = "0.1.0"
_ON_DEMAND = ("amp", "backend", "channels", "convex", "gd", "model", "priors", "rmt", "state_evolution", "tables",
              "tokens", "untied", "sweep", "widgets", "plotting", "cli")
__all__ = [*_ON_DEMAND, "ConvergenceError", "__version__"]


def __getattr__(name):
    """Import a submodule of :data:`__all__` on first access (``aimlib.amp``)."""
    if name in _ON_DEMAND:
        return import_on_demand(f".{name}", __name__)
    raise AttributeError(f"module 'aimlib' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_ON_DEMAND})
