"""The strict book build: every chapter executes, no Sphinx warning, no CDN; what a reader downloads."""
import re

import pytest

from conftest import ROOT, toc_files

pytestmark = pytest.mark.book


def test_strict_build_succeeds(built_book):
    proc, _ = built_book
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "build succeeded" in proc.stdout
    warnings = [ln for ln in proc.stdout.splitlines() if re.search(r"\bWARNING\b", ln) and "IPKernelApp" not in ln]
    assert not warnings, "\n".join(warnings)


def test_every_chapter_was_executed_and_rendered(built_book):
    proc, html = built_book
    for path in toc_files():
        rel = path.relative_to(ROOT).with_suffix("")
        page = html / f"{rel}.html"
        assert page.exists(), f"{page} was not built"
        if "{code-cell}" in path.read_text():
            assert f"{rel}.md: Executed notebook" in proc.stdout, f"{rel} was not executed"
            assert 'class="cell_output' in page.read_text(), f"{rel} has no cell output"


def test_no_remote_assets_in_html(built_book):
    _, html = built_book
    pattern = re.compile(r'<(?:script|link|img)[^>]+(?:src|href)="(?:https?:)?//', re.I)
    for page in html.rglob("*.html"):
        hits = pattern.findall(page.read_text())
        assert not hits, f"{page.relative_to(html)} loads remote assets: {hits[:3]}"


def test_mathjax_is_vendored(built_book):
    _, html = built_book
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert "_static/mathjax/tex-chtml.js" in (html / "book" / "model.html").read_text()


def test_every_chapter_offers_its_executed_notebook(built_book):
    """The download menu of each chapter links the notebook that the build executed."""
    import nbformat

    _, site = built_book
    for path in toc_files():
        rel = path.relative_to(ROOT).with_suffix("")
        page = (site / f"{rel}.html").read_text()
        href = f"../_sources/{rel}.ipynb"
        assert re.search(rf'<a href="{re.escape(href)}"[^>]*btn-download-notebook-button', page), f"{rel}: no .ipynb download"
        notebook = nbformat.read(site / "_sources" / f"{rel}.ipynb", as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        if "{code-cell}" in path.read_text():
            assert code and all(c.execution_count for c in code), f"{rel}: cells not executed"
            assert any(c.outputs for c in code), f"{rel}: no outputs"
