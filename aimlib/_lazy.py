"""Modules loaded on first attribute access: ``special = LazyModule("scipy.special")``."""
from __future__ import annotations

import importlib

__all__ = ["LazyModule"]


class LazyModule:
    """Stands for the module ``name`` and imports it when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)
