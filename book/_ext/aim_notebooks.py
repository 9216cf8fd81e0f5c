"""Each chapter downloadable as the notebook that the build executed.

The chapters are MyST Markdown paired with jupytext, so sphinx-book-theme's
download menu offers only the ``.md`` source.  myst-nb writes every executed
notebook, outputs included, to its output folder (``_build/jupyter_execute``).
This extension copies that notebook to ``_sources/<page>.ipynb`` in the HTML
output and sets the ``ipynb_source`` page context, for which the theme adds an
".ipynb" entry to the download menu.  (The theme does this itself only when a
launch button, which needs a public repository, is configured.)  Everything
stays in the built folder, so the download works offline.
"""
import shutil
from pathlib import Path


def _offer_notebook(app, pagename, templatename, context, doctree):
    config = getattr(app.env, "mystnb_config", None)
    if config is None or not config.output_folder:
        return
    executed = Path(config.output_folder) / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    # Before the theme's add_header_buttons (priority 501), which reads ``ipynb_source``.
    app.connect("html-page-context", _offer_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
