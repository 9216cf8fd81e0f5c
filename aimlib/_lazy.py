"""Modules imported when first needed: the one place of :mod:`aimlib` that imports by name.

A module that a command may never use is bound at the top of the module that needs it,
``special = LazyModule("scipy.special")``, and imported when one of its attributes is first
read; a package's ``__getattr__`` imports its submodules on first access through
:func:`import_on_demand`.  ``tests/test_structure.py`` refuses ``importlib`` anywhere else
(optional packages go through :func:`aimlib._optional.optional_import`).
"""
from __future__ import annotations

import importlib

__all__ = ["LazyModule", "import_on_demand"]


def import_on_demand(name: str, package: str | None = None):
    """The module ``name`` (relative to ``package`` when it starts with a dot), imported now."""
    return importlib.import_module(name, package)


class LazyModule:
    """Stands for the module ``name`` and imports it when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(import_on_demand(self._name), attr)
