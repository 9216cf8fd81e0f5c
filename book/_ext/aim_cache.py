"""Cached chapter execution for ``make book``; strict execution everywhere else.

``_config.yml`` executes every chapter on every build (``execute_notebooks: force``):
the test build (``tests/conftest.py``) and a plain ``jupyter-book build`` run all
the code.  ``make book`` sets ``AIM_BOOK_CACHE`` to a folder outside ``_build``
(``.jupyter_cache``); this extension then switches myst-nb to its ``cache`` mode
with that folder, where jupyter-cache keeps each chapter's executed notebook
under a hash of its code cells.  A chapter whose code is unchanged is not run
again, so a prose edit rebuilds in the time Sphinx takes to write the pages.

jupyter-cache sees only the chapter's own code, not what it imports or reads.
Before the build, ``make book`` runs this file as a script: :func:`refresh`
hashes the library and the book's data and code (:data:`INPUTS`) and empties
the cache when that hash differs from the one stored with it.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
from pathlib import Path

ENV = "AIM_BOOK_CACHE"
KEY_FILE = "aim-inputs.sha256"
# What chapters import or read besides their own cells, relative to the repository root.
INPUTS = ("aimlib/**/*.py", "aimlib/data/*", "book/_code/**/*.py", "book/data/**/*")


def inputs_hash(root: Path) -> str:
    """SHA-256 over the path and the bytes of every file matching :data:`INPUTS` under ``root``.

    Files are taken in sorted order of their relative paths, each as
    ``path NUL size NUL bytes``, so a renamed, added, removed or edited file
    changes the hash; ``__pycache__`` folders are skipped.
    """
    root = Path(root)
    files = sorted({p for pattern in INPUTS for p in root.glob(pattern)
                    if p.is_file() and "__pycache__" not in p.parts})
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def refresh(cache: Path, root: Path) -> bool:
    """Empty ``cache`` unless it was filled with the inputs ``root`` holds now.

    Returns True when the cache was emptied (or created); the current
    :func:`inputs_hash` is then stored in it as ``aim-inputs.sha256``.
    """
    cache, key = Path(cache), inputs_hash(root)
    stored = cache / KEY_FILE
    if stored.is_file() and stored.read_text().strip() == key:
        return False
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    stored.write_text(key + "\n")
    return True


def use_cache(app, config):
    """On ``config-inited``: myst-nb's ``cache`` mode in the folder ``AIM_BOOK_CACHE`` names, if set."""
    folder = os.environ.get(ENV)
    if folder:
        config.nb_execution_mode = "cache"
        config.nb_execution_cache_path = str(Path(folder).resolve())


def setup(app):
    # myst-nb reads its configuration when the builder starts, after config-inited.
    app.connect("config-inited", use_cache)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None) -> None:
    """``python book/_ext/aim_cache.py CACHE [--root ROOT]``: :func:`refresh` and say what it did."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="the jupyter-cache folder")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                        help="repository root (default: this file's)")
    args = parser.parse_args(argv)
    if refresh(args.cache, args.root):
        print(f"{args.cache}: library or book data changed (or no cache yet); every chapter runs")
    else:
        print(f"{args.cache}: library and book data unchanged; chapters with unchanged code come from the cache")


if __name__ == "__main__":
    main()
