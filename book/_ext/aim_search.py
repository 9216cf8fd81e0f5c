"""One search box, and search results without TeX source.

pydata-sphinx-theme 0.17 adds a header bar with a search field unless the theme
option ``navbar_persistent`` is set; sphinx-book-theme 1.3 already has one in the
sidebar, so the option is set to no items here.  On the search page itself the
sidebar's field is hidden (``static/search-page.css``): the page has its own box.

Sphinx's search page shows section titles from the search index and cuts each
result's snippet from the text of the page, where math is its TeX source.  The
script ``static/search-plain-math.js``, loaded on the search page only, turns
both into plain text before they are shown (see the script for the rules).

Sphinx ranks a page by its best single query word and starts the snippet at the
first occurrence of a query word.  ``static/search-rank.js``, loaded before it,
ranks pages by every query word, weighting the page title above section
headings above the text and the whole query above its words, links each result
to its best-matching section and cuts the snippet where the query stands there.
"""
from pathlib import Path

STATIC = Path(__file__).with_name("static")


def _configure(app, config):
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))
    config.html_theme_options.setdefault("navbar_persistent", [])


def _on_search_page(app, pagename, templatename, context, doctree):
    if pagename == "search":
        app.add_js_file("search-rank.js")           # first: search-plain-math.js wraps its snippets
        app.add_js_file("search-plain-math.js")
        app.add_css_file("search-page.css")


def setup(app):
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _on_search_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
