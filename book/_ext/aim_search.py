r"""One search box, and search results without TeX source, with excerpts offline.

pydata-sphinx-theme 0.17 adds a header bar with a search field unless the theme
option ``navbar_persistent`` is set; sphinx-book-theme 1.3 already has one in the
sidebar, so the option is set to no items here.  On the search page itself the
sidebar's field is hidden (``static/search-page.css``): the page has its own box.

Sphinx's search page fetches each result's page to cut its excerpt, which a page
opened from the file system (``file://``) may not do.  This extension writes the
text of every page at build time into ``_static/search-pages.js``: per page, its
blocks (the sections, the theorems and other admonitions that carry an id, and
the reference's entries)
in document order, each with its anchor, the index of the block it sits in and
its own text (code cell sources, scripts, figures and displayed equations left
out; inline math as its TeX source ``\(...\)``).  ``static/search-offline.js``
answers the search page's requests for pages from it, so excerpts need no
request at all, and ``static/search-rank.js`` reads it to rank sections.

Sphinx's search page shows section titles from the search index and cuts each
result's snippet from the text of the page, where math is its TeX source.  The
script ``static/search-plain-math.js`` turns both into plain text before they
are shown (see the script for the rules).

Sphinx ranks a page by its best single query word and starts the snippet at the
first occurrence of a query word.  ``static/search-rank.js`` ranks pages by
every query word, weighting the page title above section headings above the
text and the whole query above its words, links each result to its
best-matching section and cuts the snippet where the query stands there.
"""
import json
from pathlib import Path

STATIC = Path(__file__).with_name("static")
PAGES_JS = "search-pages.js"
#: what a page's text leaves out: code cell sources, scripts, figures, widgets, permalinks
LEFT_OUT = ".cell_input, script, style, img, svg, .headerlink, .jupyter-widgets, form"
#: elements whose text stands apart from the text around them
SEPARATE = {"p", "div", "section", "li", "dt", "dd", "tr", "td", "th", "pre", "table", "figure", "figcaption",
            "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "dl"}


def _anchor(el) -> str | None:
    """The anchor of a block: a section with an id and a heading, an admonition (a theorem, an exercise)
    with an id, or a documented object of the reference (its ``dt``'s id); else None."""
    if el.name == "section" and el.find(["h1", "h2", "h3", "h4", "h5", "h6"], recursive=False) is not None:
        return el.get("id")
    if el.name == "div" and "admonition" in el.get("class", []):
        return el.get("id")
    if el.name == "dl" and "py" in el.get("class", []):
        dt = el.find("dt", recursive=False)
        return dt.get("id") if dt is not None else None
    return None


def page_blocks(body: str) -> list:
    """The blocks of a page's body HTML in document order: ``[anchor, parent, text]``, ``parent`` the
    index of the enclosing block (-1 for none) and ``text`` the block's own text, blocks within it left out."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(body, "html.parser")
    for el in soup.select(LEFT_OUT):
        el.decompose()
    for el in soup.select("div.math"):
        el.replace_with(" … ")
    blocks = []

    def visit(node, parent):
        own = []
        for child in node.children:
            if child.name is None:
                own.append(str(child))
            elif (anchor := _anchor(child)) is not None:
                blocks.append(None)
                index = len(blocks) - 1
                blocks[index] = [anchor, parent, visit(child, index)]
            else:
                text = visit(child, parent)
                own.append(f" {text} " if child.name in SEPARATE else text)
        return " ".join("".join(own).split())

    visit(soup, -1)
    return blocks


def _configure(app, config):
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))
    config.html_theme_options.setdefault("navbar_persistent", [])


def _on_page(app, pagename, templatename, context, doctree):
    if doctree is not None and "body" in context:
        app.aim_search_pages[pagename] = page_blocks(context["body"])
    if pagename == "search":
        app.add_js_file(PAGES_JS)                   # the pages' texts, then the loader that serves them
        app.add_js_file("search-offline.js")
        app.add_js_file("search-rank.js")           # before search-plain-math.js, which wraps its snippets
        app.add_js_file("search-plain-math.js")
        app.add_css_file("search-page.css")


def _write_pages(app, exception):
    if exception is None and app.builder.format == "html":
        text = json.dumps(app.aim_search_pages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        (Path(app.outdir) / "_static" / PAGES_JS).write_text(f"window.AimSearchPages = {text};\n", encoding="utf-8")


def setup(app):
    app.aim_search_pages = {}
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _on_page)
    app.connect("build-finished", _write_pages)
    # the pages' texts are gathered while they are written: one process writes them all
    return {"parallel_read_safe": True, "parallel_write_safe": False}
