"""Small HTML fixes for the built book.

sphinx-thebe registers the same inline script (``const THEBE_JS_URL = ...``)
twice under Sphinx 7.4, which throws ``Identifier 'THEBE_JS_URL' has already
been declared`` in the browser console.  This extension drops repeated
scripts (same file or inline body, whatever their priority) from each
page's script list.
"""


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


def setup(app):
    app.connect("html-page-context", _drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
