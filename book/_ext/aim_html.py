"""Small HTML fixes for the built book.

sphinx-thebe registers the same inline script (``const THEBE_JS_URL = ...``)
twice under Sphinx 7.4, which throws ``Identifier 'THEBE_JS_URL' has already
been declared`` in the browser console.  This extension drops repeated
scripts (same file or inline body, whatever their priority) from each
page's script list.

Every page also gets the print stylesheet ``static/aim-print.css`` (code and
outputs wrapped at the paper's width; the Live bar, snapshot notices and
on-screen buttons left out) and ``static/aim-screen.css`` (a code cell's 88-character
lines fit its box without scrolling sideways; long names wrapped in the contents column;
the look of names in code that link to the reference).
"""
from pathlib import Path

STATIC = Path(__file__).with_name("static")


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", script) or "", tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def _configure(app, config):
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", _configure)
    app.add_css_file("aim-print.css")
    app.add_css_file("aim-screen.css")
    app.connect("html-page-context", _drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
