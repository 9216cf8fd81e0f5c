r"""Interactive panels (ipywidgets) over the theory of the book.

Every panel is built by a function and is itself a widget that can be
displayed directly; what it exposes to a test or a reader (``controls``,
``last_data``, ``last_png``, ``error``, ``redraw()``, ...) is described in
:mod:`aimlib.widgets.base`.

Panels
------
:func:`se_panel`
    State-evolution error ``E_S(alpha)`` for the softmax or hardmax channel,
    with the perfect-recovery threshold ``alpha_PR`` (softmax) and the
    ``rho -> 0`` weak-recovery threshold ``alpha ~ rho * alpha_bar_WR`` (hardmax).
:func:`phase_panel`
    Phase diagram: ``E_S`` over the ``(rho, alpha)`` plane with the thresholds.
:func:`noise_panel`
    Softmax (``T = 2``) with label noise against the clean channel: the
    transition at ``alpha_PR`` turns into a crossover and a ``1/alpha`` tail.
:func:`spectrum_panel`
    Spectral density of ``Y = S + sqrt(Delta) Z`` with a sampled finite-``d``
    spectrum, and the RIE eigenvalue map against the oracle shrinkage.
:func:`amp_panel`
    A small GAMP-RIE run (button-triggered) against its state-evolution prediction.
:func:`deep_panel`
    Two hardmax attention layers: each layer's error against ``alpha`` (book, "Deep attention").
:func:`untied_panel`
    Tied against untied key and query (softmax): both errors against ``alpha`` with
    their thresholds (book, "Untied key and query: algorithms and the exact error").
:func:`training_panel`
    Gradient descent with weight decay, from the stored runs: the learned
    spectrum against the teacher's and the train/test errors (book, "What training learns").
:func:`playground`
    All of the above (but the training and untied panels) in one column.

Plots are rendered with the object-oriented Matplotlib API (no ``pyplot``
state) to PNG bytes and written with ``out.outputs = ()`` followed by
``out.append_display_data(Image(...))``: this works in a kernel, outside one
(tests), and in the static HTML of the book (the saved widget state holds
the last image).
"""
from __future__ import annotations

from .._lazy import import_on_demand
from .deep import deep_panel
from .base import (ALPHA_BOUNDS, BETA_BOUNDS, CHANNELS, DELTA_BOUNDS, NOISE_BOUNDS, RHO_BOUNDS, RHO_NOISE,
                   SEED_BOUNDS, T_BOUNDS, BadInput, Panel, W, parse_range, render_png, round_sig)
from .curves import (clear_caches, noisy_curve_cached, phase_grid_cached, se_curve_cached,
                     spectrum_sample_cached, thresholds_cached)
from .spectrum import spectrum_panel
from .theory import noise_panel, phase_panel, se_panel

#: panels whose modules import more than the others (GAMP-RIE; the untied solvers, which load
#: ``scipy.optimize``; the stored runs of gradient descent): their module is imported on first use
_ON_FIRST_USE = {"amp_panel": "amp_run", "untied_panel": "untied", "training_panel": "training"}

__all__ = ["Panel", "se_panel", "phase_panel", "noise_panel", "spectrum_panel", "amp_panel", "deep_panel",
           "untied_panel",
           "training_panel", "playground", "render_png", "clear_caches"]


def __getattr__(name: str):
    """``amp_panel``, ``untied_panel`` and ``training_panel``, their module imported on first use."""
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_on_demand(f".{_ON_FIRST_USE[name]}", __name__), name)


def playground(run_amp: bool = False) -> W.VBox:
    """Every panel in one column; ``box.panels`` maps names to the panels."""
    panels = {"se": se_panel(), "phase": phase_panel(), "noise": noise_panel(),
              "spectrum": spectrum_panel(), "amp": __getattr__("amp_panel")(run=run_amp),
              "deep": deep_panel()}
    box = W.VBox(list(panels.values()))
    box.panels = panels
    return box
