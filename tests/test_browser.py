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
    pages = sorted(p.relative_to(html).as_posix() for p in (html / "book").glob("*.html"))
    return pages + ["search.html", "genindex.html"]


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
              };
            }"""
        )
        problems = recorded_problems(seen)
        if report["typeset"] != report["math"]:
            problems["math"] = f"{report['typeset']} of {report['math']} math nodes typeset"
        for key in ("merror", "rawDollars"):
            if report[key]:
                problems[key] = report[key]
        for key in ("brokenImages", "danglingRefs", "unresolved", "wideEquations", "rawTables"):
            if report[key]:
                problems[key] = report[key][:5]
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
