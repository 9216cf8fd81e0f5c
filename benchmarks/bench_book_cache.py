"""Time ``make book``'s cached build: a first build, then a rebuild after a prose-only edit.

The book's sources are copied to a scratch folder (the working tree is not
touched).  The first build runs every chapter whose code is not in the cache
yet (all of them with a new, empty cache); then one line of prose is added to
a chapter of the copy and the book is built again, as ``make book`` does it:
``_build`` removed, ``book/_ext/aim_cache.py`` run, the build with
``AIM_BOOK_CACHE`` set.  The record gives both wall times and how many chapters
each build executed and took from the cache; the target is a rebuild under
two minutes.  Last, a library file of the copy is edited and the record says
whether the next build would empty the cache for it (it must; the cache is left as it is).

Run by hand (a first build takes as long as ``make test``'s book build):
``python benchmarks/bench_book_cache.py [--cache DIR] [--work DIR]``; an existing
``--cache`` filled with the same library skips most of the first build.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import write_record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import aim_cache  # noqa: E402  (book/_ext is not a package)

SKIP = shutil.ignore_patterns(".venv", "node_modules", "_build", ".git", ".jupyter_cache",
                              "__pycache__", ".pytest_cache", ".hypothesis", "*.ipynb")
PROSE = "\nThis sentence was added by benchmarks/bench_book_cache.py.\n"


def build(src: Path, cache: Path) -> dict:
    """One ``make book``-style build of ``src`` with ``cache``: seconds and chapters executed or cached."""
    shutil.rmtree(src / "_build", ignore_errors=True)
    start = time.perf_counter()
    emptied = aim_cache.refresh(cache, src)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(src),
           "--path-output", str(src), "-W", "-n", "--keep-going"]
    env = dict(os.environ, **{aim_cache.ENV: str(cache)})
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or "build succeeded" not in log:
        raise RuntimeError(f"the book build failed (exit {proc.returncode}):\n{log[-4000:]}")
    return {"seconds": round(seconds, 1), "cache_emptied": emptied,
            "executed": len(re.findall(r"Executed notebook in", log)),
            "from_cache": len(re.findall(r"Using cached notebook", log))}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="jupyter-cache folder (default: a new one in --work)")
    parser.add_argument("--work", type=Path, help="scratch folder for the copy (default: a temporary one)")
    parser.add_argument("--chapter", default="book/model.md", help="chapter that gets the prose edit")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="aim-book-cache-"))
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(ROOT, src, ignore=SKIP)
    cache = args.cache or work / "cache"
    first = build(src, cache)
    print(f"first build: {first['seconds']} s, {first['executed']} chapters executed, "
          f"{first['from_cache']} from the cache")
    with open(src / args.chapter, "a") as chapter:
        chapter.write(PROSE)
    prose = build(src, cache)
    print(f"after a prose edit of {args.chapter}: {prose['seconds']} s, {prose['executed']} executed, "
          f"{prose['from_cache']} from the cache")
    library = sorted((src / "aimlib").glob("*.py"))[0]
    library.write_text(library.read_text() + "\n")
    stored = (cache / aim_cache.KEY_FILE).read_text().strip()
    emptied = aim_cache.inputs_hash(src) != stored   # what refresh decides, without emptying it
    print(f"after an edit of {library.relative_to(src)}: the next build empties the cache = {emptied}")
    write_record("book_cache", {"first_build": first, "prose_edit_rebuild": prose,
                                "prose_edit_chapter": args.chapter,
                                "library_edit_empties_cache": emptied,
                                "target_seconds": 120, "target_met": prose["seconds"] < 120})


if __name__ == "__main__":
    main()
