"""Every page of the built book in headless Chromium, with the network cut.

See ``browser_support`` for what is needed and the skip/fail policy.
"""
from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest

from browser_support import launch, recorded_problems, require, serve, watch
from conftest import ROOT, toc_files

pytestmark = [pytest.mark.book, pytest.mark.browser]


@pytest.fixture(scope="module")
def site(built_book):
    """Serve the built HTML on 127.0.0.1; yield (base_url, html_dir)."""
    require()
    proc, html = built_book
    assert proc.returncode == 0, "the book build failed; see test_book.py"
    with serve(html) as base:
        yield base, html


@pytest.fixture(scope="module")
def chromium():
    require()
    with launch() as browser:
        yield browser


def _pages(html):
    """Every page of the book, the library reference's included, and the search and index pages."""
    pages = sorted(p.relative_to(html).as_posix() for p in (html / "book").rglob("*.html"))
    return pages + ["search.html", "genindex.html"]


#: a screen is the height of the window the tests read pages in (``visit``: 1280 x 900 px)
SCREEN_PX = 900
#: a chapter a student can finish: about 25 screens
MAX_SCREENS = 26
#: a page of the library reference, looked things up in and not read through: about 20 screens
MAX_REFERENCE_SCREENS = 22


def visit(chromium, base, path, width=1280):
    """Load a page with every off-site request aborted; return what happened."""
    ctx = chromium.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    seen = watch(page, base)
    page.goto(f"{base}/{path}", wait_until="load")
    page.wait_for_load_state("networkidle")
    page.evaluate("() => (window.MathJax && MathJax.startup) ? MathJax.startup.promise : null")
    return page, ctx, seen


def test_pages_exist(site):
    _, html = site
    assert len(_pages(html)) >= 5


def test_every_page_renders_cleanly(site, chromium):
    """Math typeset, images, links and tables whole, chapters within their length, and on a chapter no
    equation, code box or output box wider than its box at the window of :func:`visit` (1280 px):
    nothing a reader has to scroll sideways."""
    base, html = site
    failures = []
    for path in _pages(html):
        page, ctx, seen = visit(chromium, base, path)
        report = page.evaluate(
            """() => {
              // A Markdown table shown as text: a row "| ... |" followed by a rule "|---|---|"
              // (whose dashes Sphinx's smart quotes may have made into en or em dashes).
              const RAW_TABLE = /\\|[^|\\n]*\\|\\s*\\|(?:[ \\t]*:?[-\\u2013\\u2014]+:?[ \\t]*\\|)+/g;
              const math = [...document.querySelectorAll('div.math, span.math')];
              const imgs = [...document.querySelectorAll('article img')];
              const text = document.querySelector('article')?.innerText ?? '';
              const refs = [...document.querySelectorAll('article a.reference.internal[href^="#"]')];
              const mjDoc = window.MathJax?.startup?.document;
              const CODE_BOXES = 'article div.highlight pre, article div.cell_output pre, article div.output pre';
              const widest = (t) => t.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
              const texOf = (m) => {
                const id = m.closest('div.math')?.id;
                if (id) return '#' + id;
                const item = mjDoc?.getMathItemsWithin(m)?.[0];
                return (item ? item.math : m.textContent).trim().replace(/\\s+/g, ' ').slice(0, 60);
              };
              return {
                math: math.length,
                typeset: math.filter(m => m.querySelector('mjx-container')).length,
                merror: document.querySelectorAll('mjx-merror').length,
                brokenImages: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
                rawDollars: (text.match(/\\$\\$/g) || []).length,
                danglingRefs: refs.filter(a => !document.getElementById(
                    decodeURIComponent(a.getAttribute('href').slice(1)))).map(a => a.href),
                unresolved: [...document.querySelectorAll('.xref.std-ref, .problematic')]
                    .filter(e => !e.closest('a')).map(e => e.textContent),
                wideEquations: [...document.querySelectorAll('article mjx-container[display="true"]')]
                    .filter(m => m.scrollWidth > m.clientWidth + 2)
                    .map(m => `${texOf(m)} (${m.scrollWidth}/${m.clientWidth}px)`),
                rawTables: text.match(RAW_TABLE) || [],
                // a code or output box whose text is wider than the box: the reader scrolls sideways
                wideCode: [...document.querySelectorAll(CODE_BOXES)]
                    .filter(b => b.scrollWidth > b.clientWidth + 1)
                    .map(b => `${b.scrollWidth}/${b.clientWidth}px: ${widest(b.innerText)}`),
                height: document.documentElement.scrollHeight,
              };
            }"""
        )
        problems = recorded_problems(seen)
        if report["typeset"] != report["math"]:
            problems["math"] = f"{report['typeset']} of {report['math']} math nodes typeset"
        for key in ("merror", "rawDollars"):
            if report[key]:
                problems[key] = report[key]
        # the reference pages show docstring formulas and signatures written for the source's lines: they scroll
        reference = path.startswith("book/api/")
        for key in ("brokenImages", "danglingRefs", "unresolved", "wideEquations", "rawTables", "wideCode"):
            if report[key] and not (reference and key in ("wideEquations", "wideCode")):
                problems[key] = report[key][:5]
        chapter = path.startswith("book/") and not reference
        limit = MAX_REFERENCE_SCREENS if reference else MAX_SCREENS
        if (chapter or reference) and report["height"] > limit * SCREEN_PX:
            problems["length"] = f"{report['height'] / SCREEN_PX:.1f} screens of {SCREEN_PX} px (at most {limit})"
        if problems:
            failures.append(f"{path}: {problems}")
        ctx.close()
    assert not failures, "\n".join(failures)


def test_chapters_have_math_and_figures(site, chromium):
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/model.html")
    assert page.locator("mjx-container").count() > 50
    assert page.locator("figure img").count() >= 3
    ctx.close()


PROOF_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{prf:proof\}", re.MULTILINE)


def _proofs_per_page() -> dict[str, int]:
    """The number of ``{prf:proof}`` directives in each chapter that has any, by built page."""
    counts = {p.relative_to(ROOT).with_suffix(".html").as_posix(): len(PROOF_DIRECTIVE.findall(p.read_text()))
              for p in toc_files()}
    return {page: n for page, n in counts.items() if n}


def test_every_proof_renders_as_a_sphinx_proof_block(site, chromium):
    """Each ``{prf:proof}`` is a rendered sphinx-proof block.

    sphinx-proof 0.4 writes ``<div class="proof admonition" id="proof"><p>Proof. ...``;
    its theorems and propositions are ``div.proof.admonition`` too, but open with a
    ``p.admonition-title``.
    """
    base, _ = site
    expected = _proofs_per_page()
    assert "book/model.html" in expected
    failures = []
    for path, n in expected.items():
        page, ctx, _ = visit(chromium, base, path)
        starts = page.evaluate(
            """() => [...document.querySelectorAll('article div.admonition.proof')]
                .filter(e => !e.querySelector(':scope > .admonition-title'))
                .map(e => e.textContent.trim().slice(0, 6))"""
        )
        if starts != ["Proof."] * n:
            failures.append(f"{path}: {n} proofs in the source, rendered blocks begin {starts}")
        ctx.close()
    assert not failures, "\n".join(failures)


def test_equation_reference_links_to_its_equation(site, chromium):
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/model.html")
    links = page.locator('article a.reference.internal[href="#equation-model-eq-teacher"]')
    assert links.count() >= 1
    links.first.click()
    assert page.evaluate("() => location.hash") == "#equation-model-eq-teacher"
    assert page.locator("#equation-model-eq-teacher mjx-container").count() == 1
    ctx.close()


def test_exercise_solution_is_a_dropdown(site, chromium):
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/model.html")
    sol = page.locator("details.solution, .solution.dropdown, details.dropdown").first
    assert sol.count() == 1
    ctx.close()


def test_performance_tables_are_rendered(site, chromium):
    """The benchmark tables that cells display as Markdown are HTML tables."""
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/performance.html")
    assert page.locator("article .cell_output table").count() >= 4
    assert page.locator("article .cell_output table tbody tr").count() >= 8
    ctx.close()


def test_chapter_downloads_as_its_executed_notebook(site, chromium):
    import nbformat

    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/model.html")
    link = page.locator("a.btn-download-notebook-button")
    assert link.count() == 1
    response = page.request.get(urljoin(page.url, link.get_attribute("href")))
    assert response.ok
    notebook = nbformat.reads(response.text(), as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code) and any(c.outputs for c in code)
    ctx.close()


@pytest.mark.parametrize("width", [1280, 800])
@pytest.mark.parametrize("path", ["book/model.html", "search.html"])
def test_one_search_box(site, chromium, path, width):
    """One way to search is shown, on a wide screen (sidebar) and a narrow one (header button)."""
    base, _ = site
    page, ctx, _ = visit(chromium, base, path, width)
    shown = page.evaluate(
        """() => [...document.querySelectorAll('.search-button__button, form.bd-search')]
            .filter(e => e.checkVisibility()).map(e => e.className)"""
    )
    assert len(shown) == 1, shown
    ctx.close()


@pytest.mark.parametrize("query", ["threshold", "recovery"])
def test_search_results_are_plain_text(site, chromium, query):
    """Titles and snippets of search results show no TeX source (of math, or of plot labels in code)."""
    base, _ = site
    page, ctx, seen = visit(chromium, base, f"search.html?q={query}")
    page.wait_for_function(
        """() => {
          const items = [...document.querySelectorAll('#search-results ul.search li')];
          return items.length > 0 && items.every(li => li.querySelector('p.context'));
        }""",
        timeout=60_000,
    )
    results = page.evaluate("() => [...document.querySelectorAll('#search-results ul.search li')].map(li => li.innerText)")
    assert len(results) >= 3
    assert all(query in r.lower() for r in results), "snippets not at the query word"
    tex = [r for r in results if re.search(r"\\[A-Za-z]+|\\[()[\]]|\$", r)]
    assert not tex, "\n---\n".join(tex[:3])
    assert not recorded_problems(seen)
    ctx.close()


# ----------------------------------------------------------------------------- search ranking
SEARCH_RANK_JS = ROOT / "book" / "_ext" / "static" / "search-rank.js"
# A small search index in Sphinx's format: three pages that hold both words of "weak
# recovery", one in a section heading, one a word in a heading and one in the text alone,
# and a fourth page without "weak".
SMALL_INDEX = {
    "titles": ["Beyond the model", "Hardmax", "Introduction", "Softmax"],
    "docnames": ["beyond", "hardmax", "intro", "softmax"],
    "filenames": ["beyond.md", "hardmax.md", "intro.md", "softmax.md"],
    "alltitles": {"Beyond the model": [[0, None]], "Perfect recovery of the untied model": [[0, "perfect"]],
                  "Hardmax": [[1, None]], "The small-rank limit and weak-recovery": [[1, "limit"]],
                  "Introduction": [[2, None]], "Softmax": [[3, None]], "Recovery": [[3, "recovery"]]},
    "terms": {"weak": [0, 1, 2], "recoveri": [0, 1, 2, 3], "limit": 1},
    "titleterms": {"recoveri": [0, 1, 3], "weak": 1, "perfect": 0},
}


@pytest.fixture(scope="module")
def rank_page(chromium):
    """A blank page with ``static/search-rank.js`` loaded (no build needed)."""
    ctx = chromium.new_context()
    page = ctx.new_page()
    page.set_content("<!doctype html><title>rank</title>")
    page.add_script_tag(content=SEARCH_RANK_JS.read_text())
    yield page
    ctx.close()


def _rank(page, terms, typed, index=SMALL_INDEX, texts=None):
    return page.evaluate(
        """([index, terms, typed, texts]) => AimSearchRank.rank(index, terms, typed,
             (w) => w.replace(/y$/, 'i'), texts ?? {})""", [index, terms, typed, texts])


def test_ranking_weighs_headings_and_the_whole_query(rank_page):
    ranked = _rank(rank_page, ["weak", "recoveri"], ["weak", "recovery"])
    assert [r["file"] for r in ranked] == [1, 0, 2]            # softmax lacks "weak"
    # heading with both words (10 + 10) and the whole query, 2 of its 7 words (20 * 2/7); one word in a
    # heading (10 + 5); text
    assert [r["score"] for r in ranked] == [26, 15, 10]
    assert ranked[0]["heading"] == {"title": "The small-rank limit and weak-recovery", "anchor": "limit"}
    assert ranked[1]["heading"] is None and ranked[2]["heading"] is None
    # a word in the page title counts more than one in a heading, the query in it most
    titled = dict(SMALL_INDEX, titles=["Beyond the model", "Hardmax", "Weak recovery", "Softmax"])
    one = _rank(rank_page, ["recoveri"], ["recovery"], titled)
    assert [(r["file"], r["score"]) for r in one[:2]] == [(2, 15), (0, 10)]
    both = _rank(rank_page, ["weak", "recoveri"], ["weak", "recovery"], titled)
    assert [(r["file"], r["score"]) for r in both] == [(2, 60), (1, 26), (0, 15)]


# A page about hardmax with two sections that never say it in their headings, the text of each
# (AimSearchPages: [anchor, parent block, own text]), a page that says it in a heading only, and an
# entry of the reference named after it.
HARDMAX_INDEX = {
    "titles": ["Hardmax attention", "Results", "Channels"],
    "docnames": ["hardmax", "results", "api/channels"],
    "filenames": ["hardmax.md", "results.md", "api/channels.md"],
    "alltitles": {"Hardmax attention": [[0, None]], "Two tokens": [[0, "two"]], "Three tokens": [[0, "three"]],
                  "Results": [[1, None]], "The hardmax curves": [[1, "curves"]], "Channels": [[2, None]]},
    "terms": {"hardmax": [0, 1, 2]}, "titleterms": {"hardmax": [0, 1]},
    "objects": {"aimlib.channels": [[2, 0, 1, "-", "hardmax_polytope"], [2, 1, 1, "", "softmax_k"]]},
    "objnames": {"0": ["py", "module", "Python module"], "1": ["py", "function", "Python function"]},
}
HARDMAX_TEXTS = {"hardmax": [["top", -1, "Hardmax attention, hardmax."], ["two", 0, "hardmax " * 2],
                             ["three", 0, "the hardmax at three tokens " * 6]]}


def test_a_page_about_the_query_brings_its_section_and_entries_named_by_it(rank_page):
    """The section that says the query most follows its page; an entry named by it ranks as a heading."""
    ranked = _rank(rank_page, ["hardmax"], ["hardmax"], HARDMAX_INDEX, HARDMAX_TEXTS)
    shown = [(r["file"], r["score"], (r.get("heading") or {}).get("anchor"), (r.get("object") or {}).get("name"))
             for r in ranked]
    assert shown == [(0, 15, None, None), (0, 14, "three", None),                 # the page, then its section
                     (2, 10, None, "aimlib.channels.hardmax_polytope"),          # entry before a heading of
                     (1, 10, "curves", None), (2, 5, None, None)]                # the same score
    entry = ranked[2]["object"]
    assert entry["anchor"] == "module-aimlib.channels.hardmax_polytope"
    # a section says the query MIN_SAID times at least to stand as a result
    few = {"hardmax": [row if row[0] != "three" else ["three", 0, "hardmax"] for row in HARDMAX_TEXTS["hardmax"]]}
    headings = [r.get("heading") for r in _rank(rank_page, ["hardmax"], ["hardmax"], HARDMAX_INDEX, few)]
    assert headings[:2] == [None, None]


def test_pages_of_equal_score_come_in_the_order_of_how_often_they_say_the_query(rank_page):
    index = dict(SMALL_INDEX, titles=["Beyond the model", "Hardmax", "Introduction", "Softmax"])
    quiet = _rank(rank_page, ["recoveri"], ["recovery"], index)
    texts = {"softmax": [["top", -1, "recovery " * 9]], "beyond": [["top", -1, "recovery"]]}
    loud = _rank(rank_page, ["recoveri"], ["recovery"], index, texts)
    assert [r["score"] for r in quiet] == [r["score"] for r in loud]
    tied = lambda ranked: [r["file"] for r in ranked if r["score"] == 10]  # noqa: E731
    assert tied(quiet) == [0, 1, 3] and tied(loud) == [3, 0, 1]     # by title, then Softmax says it most


SEARCH_PLAIN_MATH_JS = ROOT / "book" / "_ext" / "static" / "search-plain-math.js"


@pytest.mark.parametrize("tex, plain", [
    (r"\(\bar\tau = \sqrt{1-\tau^2}\)", "\u03c4\u0304 = \u221a(1-\u03c4^2)"),     # τ̄, not τ
    (r"\(\hat S = \mathbb E S\)", "S\u0302 = E S"),
    (r"\(\hat{q} = \alpha F\)", "q\u0302 = \u03b1 F"),
    (r"\(\tilde\alpha\)", "\u03b1\u0303"),
    (r"\(\mathring{x}\)", "x\u030a"),
    (r"\(\overline{ab}\)", "a\u0305b\u0305"),
])
def test_accents_become_combining_characters(chromium, tex, plain):
    """An accent dropped would read as another quantity: it stays, over each letter it covers."""
    ctx = chromium.new_context()
    page = ctx.new_page()
    page.set_content("<!doctype html><title>plain</title>")
    page.add_script_tag(content=SEARCH_PLAIN_MATH_JS.read_text())
    assert page.evaluate("(tex) => AimPlainMath.plain(tex)", tex) == plain
    ctx.close()


def test_snippet_starts_at_the_whole_query_else_where_the_words_meet(rank_page):
    filler = "x " * 100
    text = f"perfect recovery here. {filler}and then the weak-recovery threshold. {filler}"
    start = rank_page.evaluate("""([t]) => AimSearchRank.snippetStart(t, ['weak', 'recovery'],
        ['weak', 'recover'])""", [text])
    assert 0 < start < text.index("weak-recovery") < start + 120
    apart = f"recovery first. {filler}weak alone. {filler}weak, then soon recovered. {filler}"
    start = rank_page.evaluate("""([t]) => AimSearchRank.snippetStart(t, ['weak', 'recovery'],
        ['weak', 'recover'])""", [apart])
    assert start <= apart.index("weak, then") < start + 120
    assert rank_page.evaluate("() => AimSearchRank.snippetStart('weak recovery at once', ['weak', 'recovery'], [])") == 0


def test_search_for_weak_recovery_leads_to_its_section(site, chromium):
    """The chapter with a section on weak recovery comes first, linked to it, its snippet at the words."""
    base, _ = site
    page, ctx, seen = visit(chromium, base, "search.html?q=weak+recovery")
    page.wait_for_function(
        """() => {
          const items = [...document.querySelectorAll('#search-results ul.search li')];
          return items.length > 1 && items.every(li => li.querySelector('p.context'));
        }""",
        timeout=60_000,
    )
    items = page.evaluate(
        """() => [...document.querySelectorAll('#search-results ul.search li')].map(li => ({
              title: li.querySelector('a').innerText, href: li.querySelector('a').getAttribute('href'),
              score: Number(li.querySelector('a').dataset.score), snippet: li.querySelector('p.context').innerText}))""")
    first = items[0]
    assert first["title"].startswith("Hardmax") and "weak recovery" in first["title"], first
    assert "#" in first["href"] and "weak recovery" in first["snippet"].lower(), first
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    assert not recorded_problems(seen)
    ctx.close()


# ----------------------------------------------------------------------------- search answers, online and offline
@pytest.fixture(params=["http", "file"])
def origin(request, site):
    """The built book over HTTP, and opened from the file system as the README suggests for offline reading."""
    base, html = site
    return base if request.param == "http" else html.resolve().as_uri()


#: query -> (what the first result's title starts with or None, results expected among the first `top`, top)
SEARCHES = {
    "state evolution": (None, ["The replica computation > ", "The softmax channel, solved exactly"], 5),
    "hardmax": ("Hardmax attention with two and three tokens",
                ["Hardmax attention with two and three tokens > Three tokens", "aimlib.channels.hardmax_polytope"], 8),
    "weak recovery": ("Hardmax attention with two and three tokens > The ρ→0 limit and weak recovery", [], 1),
}


def _search(chromium, origin, query):
    """The results of ``query`` once all are shown, each with its excerpt: [{title, href, snippet}]."""
    page, ctx, seen = visit(chromium, origin, f"search.html?q={query.replace(' ', '+')}")
    page.wait_for_function(
        """() => /finished/i.test(document.querySelector('#search-results .search-summary')?.innerText ?? '')
              && [...document.querySelectorAll('#search-results ul.search li')]
                  .every(li => li.querySelector('p.context'))""",
        timeout=60_000)
    items = page.evaluate(
        """() => [...document.querySelectorAll('#search-results ul.search li')].map(li => ({
              title: li.querySelector('a').innerText, href: li.querySelector('a').getAttribute('href'),
              snippet: li.querySelector('p.context').innerText}))""")
    ctx.close()
    return items, seen


@pytest.mark.parametrize("query", SEARCHES)
def test_search_answers_with_excerpts_online_and_offline(chromium, origin, query):
    """The expected first hits and top results, every result with an excerpt, from a server and from files."""
    first, expected, top = SEARCHES[query]
    items, seen = _search(chromium, origin, query)
    titles = [i["title"] for i in items]
    assert items and all(i["snippet"].strip() for i in items), items[:3]
    if first:
        assert titles[0].startswith(first), titles[:top]
    for title in expected:
        assert any(t.startswith(title) for t in titles[:top]), (title, titles[:top])
    assert not recorded_problems(seen), seen


def test_excerpts_keep_accents(chromium, origin):
    """A hat or a bar is part of the symbol: "Let τ̄ = √(1-τ^2)" (hardmax), not "Let τ = ...", offline too."""
    page, ctx, seen = visit(chromium, origin, "search.html?q=gradient")
    snippet = page.evaluate(
        """async () => {
              const html = await (await fetch(new URL('book/hardmax.html', document.baseURI))).text();
              return Search.makeSearchSummary(html, new Set(['gradient']), '#hardmax-prop-gout').textContent;
            }""")
    assert "Let \u03c4\u0304 = \u221a(1-\u03c4^2). The gradient" in snippet, snippet
    assert not recorded_problems(seen), seen
    ctx.close()


# ----------------------------------------------------------------------------- the library reference
def test_names_in_chapter_code_link_to_their_entries(site, chromium):
    """A function a chapter calls links to its entry (``se.fixed_point`` in deep_cross), and every such
    link of the chapters that call the library lands on an entry that is there."""
    base, _ = site
    targets, calls = {}, {}
    for chapter in ("deep_cross", "softmax", "hardmax", "amp", "deep_attention", "replica"):
        page, ctx, _ = visit(chromium, base, f"book/{chapter}.html")
        links = page.evaluate("""() => [...document.querySelectorAll('article .cell_input a.aim-code-link')]
            .map(a => [a.innerText, a.href])""")
        calls[chapter] = sorted({text for text, _ in links if not text.startswith("aimlib")})
        for _, href in links:
            targets.setdefault(href.split("#")[0], set()).add(href.split("#")[1])
        ctx.close()
    assert all(calls.values()), calls
    assert "se.fixed_point" in calls["deep_cross"], calls["deep_cross"]
    assert f"{base}/book/api/state_evolution.html" in targets
    assert "aimlib.state_evolution.fixed_point.fixed_point" in targets[f"{base}/book/api/state_evolution.html"]
    page, ctx, _ = visit(chromium, base, "book/api/index.html")
    missing = {url: [i for i in ids if f'id="{i}"' not in page.request.get(url).text()] for url, ids in targets.items()}
    assert not any(missing.values()), missing
    ctx.close()


def test_the_contents_column_shows_whole_names(site, chromium):
    """The long module names of a reference page wrap in the contents column, none is cut at its edge."""
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/api/channels_hardmax.html")
    report = page.evaluate("""() => {
          const column = document.querySelector('.bd-sidebar-secondary');
          const edge = column.getBoundingClientRect().right;
          const links = [...column.querySelectorAll('a.nav-link')];
          return {links: links.length, cut: links.filter(a => a.getBoundingClientRect().right > edge + 1)
              .map(a => a.innerText)};
        }""")
    assert report["links"] >= 3 and report["cut"] == [], report
    ctx.close()


# ----------------------------------------------------------------------------- static panels, print
def test_static_panels_have_disabled_controls(site, chromium):
    """Without a kernel nothing recomputes, so every control of a saved panel is disabled."""
    base, _ = site
    for path in ("book/random_matrices.html", "book/softmax.html"):
        page, ctx, seen = visit(chromium, base, path)
        page.wait_for_selector(".cell_output .widget-slider", timeout=30_000)
        state = page.evaluate(
            """() => {
              const controls = [...document.querySelectorAll(
                  '.cell_output .jupyter-widgets input, .cell_output .jupyter-widgets select,' +
                  '.cell_output .jupyter-widgets button')];
              const sliders = [...document.querySelectorAll('.cell_output .widget-slider .slider')];
              return {controls: controls.length, enabled: controls.filter(c => !c.disabled).length,
                      sliders: sliders.length, slidersEnabled: sliders.filter(s => !s.hasAttribute('disabled')).length};
            }""")
        assert state["controls"] >= 1 and state["sliders"] >= 1, (path, state)
        assert state["enabled"] == 0 and state["slidersEnabled"] == 0, (path, state)
        slider = page.locator(".cell_output .widget-slider").first
        readout = slider.locator(".widget-readout").inner_text()
        handle = slider.locator(".noUi-handle")
        handle.scroll_into_view_if_needed()
        box = handle.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + 80, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        assert slider.locator(".widget-readout").inner_text() == readout, path
        assert "controls are disabled" in page.locator(".aim-live-notice").first.inner_text()
        assert not recorded_problems(seen), (path, seen)
        ctx.close()


def test_axis_toggles_say_which_axis_they_set(site, chromium):
    """The state-evolution panel's log/linear buttons sit beside a label naming their axis."""
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/softmax.html")
    page.wait_for_selector(".cell_output .widget-toggle-buttons", timeout=30_000)
    rows = page.evaluate(
        """() => [...document.querySelectorAll('.cell_output .widget-toggle-buttons')].slice(0, 2).map(t => {
              const label = t.querySelector('.widget-label').getBoundingClientRect();
              const button = t.querySelector('button').getBoundingClientRect();
              return {label: t.querySelector('.widget-label').innerText,
                      beside: label.right <= button.left + 1 && label.bottom > button.top};
            })""")
    assert [r["label"] for r in rows] == ["x axis (α)", "y axis (E_S)"], rows
    assert all(r["beside"] for r in rows), rows
    ctx.close()


def test_print_wraps_code_and_leaves_out_live_notices(site, chromium):
    """Printed (at a paper's width) code and outputs wrap; the Live bar, notices and sidebar are left out."""
    base, _ = site
    page, ctx, _ = visit(chromium, base, "book/performance.html", width=700)
    report = """() => ({
          live: [...document.querySelectorAll('.aim-live-bar, .aim-live-notice')].filter(e => e.checkVisibility()).length,
          sidebar: [...document.querySelectorAll('.bd-sidebar-primary')].filter(e => e.checkVisibility()).length,
          cut: [...document.querySelectorAll('article pre')]
              .filter(e => e.checkVisibility() && e.scrollWidth > e.clientWidth + 1).length})"""
    screen = page.evaluate(report)
    assert screen["live"] >= 1 and screen["cut"] >= 1, screen   # on screen: notices, code that scrolls
    page.emulate_media(media="print")
    printed = page.evaluate(report)
    assert printed == {"live": 0, "sidebar": 0, "cut": 0}, printed
    ctx.close()


def test_print_book_joins_every_page_in_reading_order(site):
    """``make pdf``'s single page: every page's article in ``_toc.yml`` order, all saved panels in one state."""
    import json
    import sys

    from bs4 import BeautifulSoup

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import book_pdf

    _, html = site
    pages = book_pdf.toc_pages()
    soup = BeautifulSoup(book_pdf.print_page(html, pages), "html.parser")
    chapters = [c.get_text()[:300] for c in soup.select("section.aim-print-chapter")]
    articles = [BeautifulSoup((html / f"{p}.html").read_text(), "html.parser").find("article").get_text()[:300]
                for p in pages]
    assert chapters == articles and len(set(articles)) == len(pages)
    states = soup.find_all("script", type=book_pdf.WIDGET_STATE)
    saved = {k for p in pages for s in BeautifulSoup((html / f"{p}.html").read_text(), "html.parser")
             .find_all("script", type=book_pdf.WIDGET_STATE) for k in json.loads(s.string)["state"]}
    assert len(states) == 1 and set(json.loads(states[0].string)["state"]) == saved and saved
    assert soup.find("script", src=re.compile(r"embed-amd\.js")) is not None
    assert soup.find("link", href=re.compile(r"aim-print\.css")) is not None
    # a title page, then contents that link every page's section in order, the library reference included
    assert soup.select_one(".aim-print-title").get_text() == "Bayes-optimal learning of attention-indexed models"
    links = [a["href"] for a in soup.select(".aim-print-contents a")]
    assert links == [f"#{c['id']}" for c in soup.select("section.aim-print-chapter")]
    assert len(links) == len(pages) and "book/api/priors" in pages and "book/deep_cross" in pages


def _outline(pdf: bytes) -> list[str]:
    """The titles of a PDF's outline entries, as Chromium writes them: ``(text)`` or ``<FEFF...>`` (UTF-16)."""
    titles = []
    for literal, utf16 in re.findall(rb"/Title (?:\(((?:[^()\\]|\\.)*)\)|<FEFF([0-9A-F]*)>)", pdf):
        titles.append(literal.decode("latin-1") if not utf16 else bytes.fromhex(utf16.decode()).decode("utf-16-be"))
    return titles


def test_the_printed_book_has_titles_and_an_outline(site, chromium, tmp_path):
    """``make pdf`` on three pages: every chapter's title prints (the theme hides a page's first heading in
    print), and the PDF carries an outline with the title page, the contents and each chapter."""
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import book_pdf

    base, html = site
    page, ctx, _ = visit(chromium, base, "book/deep_cross.html")
    page.emulate_media(media="print")
    assert page.evaluate("() => document.querySelector('article h1').checkVisibility()")
    ctx.close()
    out = tmp_path / "three.pdf"
    book_pdf.main(["--html", str(html), "--out", str(out), "--pages", "book/intro", "book/deep_cross",
                   "book/api/priors"])
    # Chromium drops the space where a heading wraps: compare without spaces
    titles = {"".join(t.split()) for t in _outline(out.read_bytes())}
    for expected in ("Bayes-optimal learning of attention-indexed models", "Contents", "Priors",
                     "Correlated layers: the cross overlap of two-layer GAMP-RIE"):
        assert "".join(expected.split()) in titles, (expected, sorted(titles)[:12])
