"""Where a chapter downloaded from the built book finds the files committed with the book.

The chapters execute in ``book/`` and read files named from there: the data of
``book/data``, the sweeps' results in ``sweeps/`` (``../sweeps``), the benchmark
records (``../benchmarks``), the book's own code ``book/_code``.  A chapter
downloaded as a notebook (each page's download menu) runs wherever it was saved;
its first code cell, added by the build (``book/_ext/aim_notebooks.py``), calls
:func:`enter_book` with the names it reads, which finds the folder that holds them.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["enter_book", "book_folder"]


def book_folder() -> Path:
    """``book/`` of the repository that an editable install of ``aimlib`` (``pip install -e .``) runs from."""
    return Path(__file__).resolve().parent.parent / "book"


def enter_book(needed, *, book: Path | None = None) -> Path:
    """Make the working folder one where every name in ``needed`` exists (relative to it), and return it.

    The folder the notebook runs in is kept if it holds them all; else ``book``
    (default :func:`book_folder`) is entered if it does.  Otherwise
    ``FileNotFoundError`` names what is missing and how to get it: the book's
    repository, ``aimlib`` installed from it, and the notebook run from ``book/``.
    """
    needed = [str(name) for name in needed]
    here = Path.cwd()
    if all((here / name).exists() for name in needed):
        return here
    book = book_folder() if book is None else Path(book)
    if all((book / name).exists() for name in needed):
        os.chdir(book)
        print(f"reading the book's files ({', '.join(needed)}) from {book}")
        return book
    missing = [name for name in needed if not (here / name).exists()]
    raise FileNotFoundError(
        f"this chapter reads files committed with the AIM book, relative to its book/ folder: "
        f"{', '.join(needed)}; {', '.join(missing)} not found from {here} or from {book}. Clone the book's "
        f"repository, install aimlib from it (pip install -e . at its root, or make .venv/.installed), and "
        f"run the notebook from the repository's book/ folder")
