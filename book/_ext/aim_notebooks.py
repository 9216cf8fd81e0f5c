"""Each chapter downloadable as the notebook that the build executed.

The chapters are MyST Markdown paired with jupytext, so sphinx-book-theme's
download menu offers only the ``.md`` source.  myst-nb writes every executed
notebook, outputs included, to its output folder (``_build/jupyter_execute``).
This extension copies that notebook to ``_sources/<page>.ipynb`` in the HTML
output and sets the ``ipynb_source`` page context, for which the theme adds an
".ipynb" entry to the download menu.  (The theme does this itself only when a
launch button, which needs a public repository, is configured.)  Everything
stays in the built folder, so the download works offline.

A chapter reads files committed with the book, named relative to ``book/``
(:data:`NEEDED` finds them in its code).  Its downloaded notebook opens with two
cells that say so in words and enter the folder that holds them
(:func:`aimlib.book_folder.enter_book`), so that it runs where it was saved.
"""
import re
from pathlib import Path

import nbformat

#: the names a chapter's code reads relative to book/: ``"data/..."``, ``"../<folder>/..."``, ``"_code"``
NEEDED = re.compile(r'"(data(?=[/"])|\.\./[A-Za-z_]+(?=[/"])|_code(?="))')


def needed(notebook) -> list[str]:
    """The folders, relative to ``book/``, that the code cells of ``notebook`` read, in order of appearance."""
    names = [m for cell in notebook.cells if cell.cell_type == "code" for m in NEEDED.findall(cell.source)]
    return list(dict.fromkeys(names))


def _with_finder(notebook):
    """``notebook`` opened by a note and a call of ``enter_book`` for the folders it reads (if any)."""
    names = needed(notebook)
    if names:
        listed = ", ".join(f"`{name}`" for name in names)
        note = (f"This notebook is a chapter of the AIM book. It reads files committed with the book, "
                f"relative to the book's `book/` folder: {listed}. The next cell finds them: in the folder "
                f"the notebook runs in, else in the repository of an editable install of `aimlib` "
                f"(`pip install -e .` in a clone of the book); if neither holds them it says what to do.")
        notebook.cells[:0] = [nbformat.v4.new_markdown_cell(note),
                              nbformat.v4.new_code_cell("from aimlib.book_folder import enter_book\n\n"
                                                        f"book_dir = enter_book({names!r})")]
    return notebook


def _offer_notebook(app, pagename, templatename, context, doctree):
    config = getattr(app.env, "mystnb_config", None)
    if config is None or not config.output_folder:
        return
    executed = Path(config.output_folder) / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(_with_finder(nbformat.read(executed, as_version=4)), target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    # Before the theme's add_header_buttons (priority 501), which reads ``ipynb_source``.
    app.connect("html-page-context", _offer_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
