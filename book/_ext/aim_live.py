"""Live mode of the built book: a "Live" button that connects a page to a local kernel.

Every page with code cells loads ``static/aim-live.js`` (and its stylesheet).
The script adds a "Live" button above the page's first code cell and, at
each panel (a cell whose output is an ipywidgets view), a notice that the
panel is a snapshot and how to make it live (``make live``, ``make app``,
``make lab``); it also disables the snapshot panels' controls (they would move
without recomputing anything) by setting ``disabled`` in the saved widget
state before the widget manager draws it.  On a page opened at the live
address that ``make live`` prints (``book/_ext/live_server.py``), it
exchanges the address's one-time
secret for the live server's session cookie; otherwise it requests nothing
on page load.  A press of "Live" reads the live server's
``_live/config.json`` (answered to that cookie alone) and then loads Thebe
0.9 (vendored by the Makefile into ``_static/thebe``), which bundles the
ipywidgets 8 manager of JupyterLab.
"""
from pathlib import Path

from docutils import nodes

STATIC = Path(__file__).with_name("static")


def _configure(app, config):
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def _add_assets(app, pagename, templatename, context, doctree):
    """Add the script and its stylesheet to this page if it has a code cell (myst-nb's container)."""
    if doctree is None or not any(n.get("nb_element") == "cell_code" for n in doctree.findall(nodes.container)):
        return
    app.add_js_file("aim-live.js")
    app.add_css_file("aim-live.css")


def setup(app):
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _add_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
