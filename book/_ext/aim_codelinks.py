"""Links from the names in a chapter's code cells to their entries in the library reference.

A chapter's code imports from ``aimlib`` (``from aimlib import state_evolution as se``,
``from aimlib.priors import Wishart``) and calls what it imported (``se.fixed_point(...)``).
On each chapter page this extension reads the imports of its code cells, follows every
name bound by them, with the attributes read from it (``se.fixed_point``), to the object
it names, as Python would (an attribute of a package before a submodule of the same
name), and links the name in the highlighted code to the object's entry in
``book/api`` (where it is defined: :func:`aim_api.defining_names`).  A name that the
chapter assigns anew, or that leads to nothing documented, is left as it is; nothing
here warns, so the strict build is untouched.
"""
from __future__ import annotations

import ast
import html
import importlib
import re

from aim_api import PACKAGE, defining_names

#: a highlighted code cell of a chapter (Pygments' HTML for the ipython3 lexer)
CELL = re.compile(r'(<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>)(.*?)(</pre>)', re.S)
_NAME = r'<span class="(?:n|nc|nf|nn)">[\w.]+</span>'
#: a name and the attributes read from it: ``se.fixed_point``
CHAIN = re.compile(rf'{_NAME}(?:<span class="o">\.</span>{_NAME})*')
PIECE = re.compile(r'(?:<span class="o">\.</span>)?<span class="\w+">([\w.]+)</span>')


def bindings(sources) -> dict:
    """``{name: dotted target}`` of the ``aimlib`` imports in code cells ``sources``, less the names
    that the code assigns anew (``import aimlib.amp as amp`` binds ``amp`` to ``aimlib.amp``)."""
    bound, assigned = {}, set()
    for source in sources:
        try:
            tree = ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == PACKAGE:
                        bound[a.asname or PACKAGE] = a.name if a.asname else PACKAGE
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE and not node.level:
                bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                assigned.add(node.name)
    return {name: target for name, target in bound.items() if name not in assigned}


def follow(dotted: str):
    """The object ``dotted`` names, read as Python does after an import: each part an attribute,
    or a submodule where no attribute has its name; None if a step fails."""
    parts = dotted.split(".")
    try:
        obj = importlib.import_module(parts[0])
        for i, part in enumerate(parts[1:], start=1):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif getattr(obj, "__name__", None) == ".".join(parts[:i]):
                obj = importlib.import_module(".".join(parts[:i + 1]))
            else:
                return None
    except ImportError:
        return None
    return obj


def entry(objects: dict, dotted: str):
    """``(full name, (docname, anchor))`` of the reference entry of what ``dotted`` names, or None."""
    obj = follow(dotted)
    if obj is None:
        return None
    for full in defining_names(obj, dotted):
        if full in objects:
            return full, (objects[full].docname, objects[full].node_id)
    return None


def link_chain(chain: str, bound: dict, find) -> str:
    """``chain`` (highlighted ``a.b.c``) with its longest prefix that names a documented object linked.

    ``find(dotted)`` gives ``(full name, href)`` or None."""
    pieces = list(PIECE.finditer(chain))
    names = [m.group(1) for m in pieces]
    head = names[0] if names[0] in bound else None
    root = bound[head] if head else (names[0] if names[0].split(".")[0] == PACKAGE else None)
    if root is None:
        return chain
    for k in range(len(names), 0, -1):
        found = find(".".join([root, *names[1:k]]))
        if found:
            full, href = found
            cut = pieces[k - 1].end()
            return (f'<a class="reference internal aim-code-link" href="{html.escape(href)}" '
                    f'title="{html.escape(full)}">{chain[:cut]}</a>{chain[cut:]}')
    return chain


def link_code(body: str, bound: dict, find) -> str:
    """``body`` with the names of its highlighted code cells linked (:func:`link_chain`)."""
    def cell(m):
        return m.group(1) + CHAIN.sub(lambda c: link_chain(c.group(0), bound, find), m.group(2)) + m.group(3)
    return CELL.sub(cell, body)


def _on_page(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:
        return
    from docutils import nodes

    sources = [n.astext() for n in doctree.findall(nodes.literal_block) if n.get("language") == "ipython3"]
    bound = bindings(sources)
    if not bound:
        return
    objects, cache = app.env.get_domain("py").objects, {}

    def find(dotted):
        if dotted not in cache:
            found = entry(objects, dotted)
            cache[dotted] = found and (found[0], f"{app.builder.get_relative_uri(pagename, found[1][0])}#{found[1][1]}")
        return cache[dotted]

    context["body"] = link_code(context["body"], bound, find)


def setup(app):
    app.setup_extension("aim_api")
    app.connect("html-page-context", _on_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
