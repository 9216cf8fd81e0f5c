"""The strict book build: every chapter executes, no Sphinx warning, no CDN; what a reader downloads and cites."""
import html
import re
from html.parser import HTMLParser

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


# Entries of book/references.bib for which no DOI or arXiv id could be verified.
UNLINKED_REFERENCES = {"nishimori2001statistical"}


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def test_every_reference_links_to_its_source(built_book):
    """Each bibliography entry carries a DOI or an arXiv id, rendered as a link."""
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "book" / "references.bib").entries
    unlinked = {key for key, e in entries.items() if not {"doi", "eprint", "url"} & set(map(str.lower, e.fields))}
    assert unlinked == UNLINKED_REFERENCES
    for key, entry in entries.items():
        if "eprint" in entry.fields:
            assert entry.fields.get("archivePrefix") == "arXiv", key
    _, site = built_book
    citations = re.findall(r'<div class="citation"[^>]*>(.*?)</div>', (site / "book" / "references.html").read_text(), re.S)
    linked = [c for c in citations if re.search(r'class="reference external" href="https://(?:doi|arxiv)\.org/', c)]
    assert len(citations) == len(entries)
    assert len(linked) == len(entries) - len(UNLINKED_REFERENCES)


def test_bibliography_labels_match_the_citations(built_book):
    """A citation in the text reads as its entry's label: "[Vaswani et al., 2017]" or "Vaswani et al. [2017]"."""
    _, site = built_book
    refs = (site / "book" / "references.html").read_text()
    labels = {i: _text(label).strip("[]") for i, label in re.findall(
        r'<div class="citation" id="([^"]+)"[^>]*>\s*<span class="label">(.*?)</span>\s*</span>', refs, re.S)}
    assert labels and all(re.search(r", \d{4}[a-z]?$", label) for label in labels.values()), labels
    assert len(set(labels.values())) == len(labels)
    seen = 0
    for page in sorted((site / "book").glob("*.html")):
        for span in re.findall(r'<span class="bibtex-citation"[^>]*>(.*?)</span>', page.read_text(), re.S):
            links = re.findall(r'<a class="reference internal" href="references\.html#([^"]+)"[^>]*>(.*?)</a>', span, re.S)
            assert links, f"{page.name}: unresolved citation {_text(span)!r}"
            for target, text in links:
                label, text = labels[target], _text(text)
                who, _, year = label.rpartition(", ")
                assert text == label or (text == year and _text(span) == f"{who} [{year}]"), (page.name, _text(span), label)
                seen += 1
    assert seen >= len(labels)


def test_citation_file_names_this_release():
    """CITATION.cff and the README's BibTeX cite the book at the version of pyproject.toml."""
    import tomllib

    import yaml

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == cff["preferred-citation"]["version"] == version
    assert cff["license"] == cff["preferred-citation"]["license"] == "MIT"
    assert cff["preferred-citation"]["type"] == "book"
    assert cff["authors"] == cff["preferred-citation"]["authors"] == [{"name": "The AIM book developers"}]
    bibtex = re.search(r"```bibtex\n(@book\{.*?\n\})\n```", (ROOT / "README.md").read_text(), re.S)
    assert bibtex, "README.md has no BibTeX entry of the book"
    assert re.search(r"version\s*=\s*\{" + re.escape(version) + r"\}", bibtex.group(1))


def test_every_chapter_offers_its_executed_notebook(built_book):
    """The download menu of each chapter links the notebook that the build executed."""
    import nbformat

    _, site = built_book
    for path in toc_files():
        rel = path.relative_to(ROOT).with_suffix("")
        page = (site / f"{rel}.html").read_text()
        href = "../" * (len(rel.parts) - 1) + f"_sources/{rel.as_posix()}.ipynb"   # relative to the page
        assert re.search(rf'<a href="{re.escape(href)}"[^>]*btn-download-notebook-button', page), f"{rel}: no .ipynb download"
        notebook = nbformat.read(site / "_sources" / f"{rel}.ipynb", as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code" and not c.source.startswith(FINDER)]
        if "{code-cell}" in path.read_text():
            assert code and all(c.execution_count for c in code), f"{rel}: cells not executed"
            assert any(c.outputs for c in code), f"{rel}: no outputs"


FINDER = "from aimlib.book_folder import enter_book"


def test_a_downloaded_notebook_finds_the_books_files_where_it_was_saved(built_book, tmp_path):
    """A chapter that reads files committed with the book (``data/``, ``../sweeps``, ...) opens, downloaded,
    with a note and a call of ``enter_book`` naming them; run from a folder outside the repository, that cell
    enters the one that holds them, and the chapter's own relative reads then find every one."""
    import sys

    import jupytext
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import aim_notebooks

    _, site = built_book
    checked = set()
    for path in toc_files():
        names = aim_notebooks.needed(jupytext.read(path))
        rel = path.relative_to(ROOT).with_suffix("")
        cells = nbformat.read(site / "_sources" / f"{rel}.ipynb", as_version=4).cells
        if not names:
            assert not any(c.source.startswith(FINDER) for c in cells), f"{rel}: a finder with nothing to find"
            continue
        assert cells[0].cell_type == "markdown" and all(f"`{n}`" in cells[0].source for n in names), rel
        assert cells[1].cell_type == "code" and cells[1].source.startswith(FINDER), rel
        if tuple(names) in checked:
            continue
        checked.add(tuple(names))
        probe = nbformat.v4.new_code_cell(f"from pathlib import Path\nassert all(Path(n).exists() for n in {names!r})")
        folder = tmp_path / rel.name
        folder.mkdir()
        notebook = nbformat.v4.new_notebook(cells=[cells[1], probe], metadata={"kernelspec": {
            "name": "python3", "display_name": "Python 3", "language": "python"}})
        NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(folder)}}).execute()
        assert "reading the book's files" in notebook.cells[0].outputs[0]["text"], rel
    assert len(checked) >= 5, checked


class ProseText(HTMLParser):
    """The prose of a page: its text outside code, cell outputs, MathJax and scripts."""

    SKIP_TAGS = {"script", "style", "pre", "code", "svg", "textarea", "head", "nav"}
    SKIP_CLASSES = ("math", "cell_output", "highlight", "bd-sidebar", "toctree-wrapper")
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.depth, self.chunks = 0, []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = dict(attrs).get("class") or ""
        if self.depth or tag in self.SKIP_TAGS or any(c in classes.split() for c in self.SKIP_CLASSES):
            self.depth += 1

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.chunks.append(data)


def test_no_raw_tex_in_prose(built_book):
    """No TeX command or dollar sign left in a page's prose: what a broken inline formula looks like."""
    _, html_dir = built_book
    raw = re.compile(r"\\[A-Za-z]+|\$")
    for path in toc_files():
        page = html_dir / path.relative_to(ROOT).with_suffix(".html")
        parser = ProseText()
        parser.feed(page.read_text())
        text = " ".join(parser.chunks)
        hits = [text[max(m.start() - 40, 0):m.end() + 40] for m in raw.finditer(text)]
        assert not hits, f"{page.name}: raw TeX in prose: {hits[:5]}"


class OutputText(HTMLParser):
    """The text blocks of a page's cell outputs: each ``pre`` inside a ``cell_output`` (no images or widgets)."""

    VOID = ProseText.VOID

    def __init__(self):
        super().__init__()
        self.depth, self.pre, self.chunks, self.blocks = 0, 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        if self.depth or "cell_output" in (dict(attrs).get("class") or "").split():
            self.depth += 1
            self.pre += tag == "pre"

    def handle_endtag(self, tag):
        if tag in self.VOID or not self.depth:
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
            if not self.pre:
                self.blocks.append("".join(self.chunks))
                self.chunks = []
        self.depth -= 1

    def handle_data(self, data):
        if self.pre:
            self.chunks.append(data)


def test_cell_outputs_fit_the_output_box(built_book):
    """Every line a cell prints fits the theme's output box (``aimlib.tables.OUTPUT_WIDTH`` characters)."""
    from aimlib.tables import OUTPUT_WIDTH

    _, html_dir = built_book
    too_wide = []
    for path in toc_files():
        page = html_dir / path.relative_to(ROOT).with_suffix(".html")
        parser = OutputText()
        parser.feed(page.read_text())
        too_wide += [f"{page.name}: [{len(line)}] {line}" for block in parser.blocks
                     for line in block.splitlines() if len(line) > OUTPUT_WIDTH]
    assert not too_wide, (f"{len(too_wide)} output lines wider than {OUTPUT_WIDTH} characters:\n"
                          + "\n".join(too_wide[:30]))
