"""The optional dependencies: imported on demand, a missing one named with its install hint.

The core of :mod:`aimlib` needs NumPy and SciPy only.  Every other package
belongs to an extra of ``pyproject.toml`` and is imported through
:func:`optional_import`, at the moment a feature needs it, so that the rest of
the library imports without it; when it is missing, the ``ImportError`` names
the package, what needed it and the command that installs it.

======================  ====================================================
extra                   packages (import names)
======================  ====================================================
``gpu``                 ``cupy``, ``cupyx`` (:mod:`aimlib.backend`; their absence means NumPy)
``widgets``             ``ipywidgets``, ``IPython``, ``matplotlib``
                        (:mod:`aimlib.widgets`, :mod:`aimlib.plotting`)
``sweep``               ``yaml``, ``tqdm``, ``dask``, ``distributed``,
                        ``cryptography`` (:mod:`aimlib.sweep`)
``convex``              ``cvxpy``, ``scs`` (:func:`aimlib.convex.min_trace_solve`)
======================  ====================================================
"""
from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingDependency", "install_hint", "optional_import"]

#: import name of each optional package -> (its distribution on PyPI, the extra of aimlib that installs it)
EXTRAS = {
    "cupy": ("cupy-cuda13x", "gpu"),
    "cupyx": ("cupy-cuda13x", "gpu"),
    "ipywidgets": ("ipywidgets", "widgets"),
    "IPython": ("ipython", "widgets"),
    "matplotlib": ("matplotlib", "widgets"),
    "yaml": ("pyyaml", "sweep"),
    "tqdm": ("tqdm", "sweep"),
    "dask": ("dask[distributed]", "sweep"),
    "distributed": ("dask[distributed]", "sweep"),
    "cryptography": ("cryptography", "sweep"),
    "cvxpy": ("cvxpy", "convex"),
    "scs": ("scs", "convex"),
}


class MissingDependency(ImportError):
    """An optional package that a feature needs does not import; the message says what to install."""


def _package(name: str) -> str:
    """The top-level package of the module ``name``, checked to be one of :data:`EXTRAS`."""
    top = name.partition(".")[0]
    if top not in EXTRAS:
        raise ValueError(f"{top!r} is not an optional dependency of aimlib (one of {sorted(EXTRAS)})")
    return top


def install_hint(name: str) -> str:
    """The command that installs the optional package of the module ``name``.

    Parameters
    ----------
    name : str
        An import name of :data:`EXTRAS`, or a module inside one (``'distributed.security'``).

    Returns
    -------
    str
        ``"pip install 'aimlib[EXTRA]'"``.
    """
    return f"pip install 'aimlib[{EXTRAS[_package(name)][1]}]'"


def optional_import(name: str, needed_by: str):
    """Import the module ``name`` of an optional package, or say what to install.

    Parameters
    ----------
    name : str
        The module, ``'yaml'`` or a submodule such as ``'matplotlib.figure'``; its
        top-level package must be one of :data:`EXTRAS`.
    needed_by : str
        What needs it, for the message (``'aimlib.widgets'``, ``"the 'local' scheduler"``).

    Returns
    -------
    module
        The imported module (already imported ones come from ``sys.modules``).

    Raises
    ------
    MissingDependency
        An ``ImportError``, when the module does not import: the message names
        ``needed_by``, the distribution and :func:`install_hint`; the original error is chained.
    """
    top = _package(name)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependency(f"{needed_by} needs {EXTRAS[top][0]}, which does not import here ({exc}); "
                          f"install it with {install_hint(top)}", name=top) from exc
