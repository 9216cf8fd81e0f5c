"""The data scripts of ``scripts/`` for the tests: one imported by name, and the committed data they made."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"


def import_script(name: str):
    """The module ``scripts/<name>.py`` (the row reader ``_rows`` too), with ``scripts/`` on the path only while it
    loads (the scripts import ``_rows`` at the top)."""
    path = str(ROOT / "scripts")
    sys.path.insert(0, path)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(path)


def committed(name: str) -> tuple[str, list[dict]]:
    """The command on the made-by line of ``book/data/<name>`` and its rows (strings, as the CSV holds them)."""
    rows = import_script("_rows")
    return rows.made_by(DATA / name), rows.read_rows(DATA / name)
