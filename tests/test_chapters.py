"""Every chapter in _toc.yml is a valid jupytext MyST notebook that round-trips."""
import re
from pathlib import Path

import jupytext
import pytest

from conftest import ROOT, toc_files

CHAPTERS = toc_files()


def test_toc_lists_existing_chapters():
    assert len(CHAPTERS) >= 3
    for path in CHAPTERS:
        assert path.exists(), f"{path} is listed in _toc.yml but missing"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_is_myst_notebook_with_kernelspec(path: Path):
    nb = jupytext.read(path)
    meta = nb.metadata
    assert meta["jupytext"]["text_representation"]["format_name"] == "myst"
    assert meta["kernelspec"]["name"] == "python3"
    assert meta["kernelspec"]["language"] == "python"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.lstrip().startswith(("#", "("))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_round_trips_through_ipynb(path: Path):
    nb = jupytext.read(path)
    ipynb = jupytext.writes(nb, fmt="ipynb")
    again = jupytext.reads(jupytext.writes(jupytext.reads(ipynb, fmt="ipynb"), fmt="md:myst"), fmt="md:myst")
    assert _cells(again) == _cells(nb)
    assert again.metadata["kernelspec"] == nb.metadata["kernelspec"]


def _cells(nb):
    """Cell content without the random cell ids."""
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_jupytext_pairs_the_chapter_with_a_notebook_beside_it(path: Path):
    """jupytext's own lookup finds the repository's jupytext.toml and pairs the MyST chapter with an .ipynb."""
    from jupytext.config import find_jupytext_configuration_file, load_jupytext_config, notebook_formats
    from jupytext.paired_paths import paired_paths

    assert Path(find_jupytext_configuration_file(path.parent)) == ROOT / "jupytext.toml"
    formats = notebook_formats(jupytext.read(path), load_jupytext_config(str(path)), str(path),
                               fallback_on_current_fmt=False)
    assert formats is not None and {"extension": ".md", "format_name": "myst"} in formats
    paired = sorted(Path(p) for p, _ in paired_paths(str(path), "md:myst", formats))
    assert paired == sorted([path, path.with_suffix(".ipynb")])


# a string naming a file or folder relative to book/ ("data", "data/...", "../..."), not a ["data"] key
RELATIVE_PATH = re.compile(r'(?<![\[\w])"(data|(?:\.\./|data/)[^"{}]+)"')


def test_chapters_find_committed_files_relative_to_book():
    """Chapters execute in book/ (jupyter-book's default): the files they name from there exist, and none
    is found through a module's __file__, which points into the repository only for an editable install."""
    named = []
    for path in CHAPTERS:
        code = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "code")
        assert "__file__" not in code, f"{path.name} locates files through a module's __file__"
        named += [(path.name, name) for name in RELATIVE_PATH.findall(code)]
    assert len(named) >= 5, named
    missing = [(chapter, name) for chapter, name in named if not (ROOT / "book" / name).exists()]
    assert not missing, f"named relative to book/ but missing: {missing}"


def test_chapters_do_not_install_packages():
    for path in CHAPTERS:
        assert "pip install" not in "".join(
            c.source for c in jupytext.read(path).cells if c.cell_type == "code"
        ), f"{path.name} installs packages in a cell"


def test_sync_pairs_a_chapter_both_ways(tmp_path):
    """`jupytext --sync` (what `make lab` runs) creates the .ipynb and carries edits back."""
    import shutil
    import subprocess
    import sys

    jt = [sys.executable, "-m", "jupytext"]
    shutil.copy(ROOT / "jupytext.toml", tmp_path)
    md = tmp_path / "model.md"
    shutil.copy(ROOT / "book" / "model.md", md)
    subprocess.run(jt + ["--sync", str(md)], check=True, capture_output=True, cwd=tmp_path)
    ipynb = md.with_suffix(".ipynb")
    assert [c[:2] for c in _cells(jupytext.read(ipynb))] == [c[:2] for c in _cells(jupytext.read(md))]
    nb = jupytext.read(ipynb)
    nb.cells[-1].source += "\n\nAn edit made in Jupyter."
    jupytext.write(nb, ipynb)
    subprocess.run(jt + ["--sync", str(ipynb)], check=True, capture_output=True, cwd=tmp_path)
    assert "An edit made in Jupyter." in md.read_text()


#: Characters of a code line that fit the code box of the built book (sphinx-book-theme, default font).
CODE_BOX_CHARS = 88


def _code_lines(path: Path):
    """(line number in the .md file, text) of every code line of the chapter's code cells.

    A cell's options (a ``---`` YAML block or ``:key:`` lines at its top) are not code.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    state, fence, out = "prose", "", []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if state == "prose":
            if stripped.startswith("```") and stripped.lstrip("`").startswith("{code-cell}"):
                state, fence = "top", stripped[: len(stripped) - len(stripped.lstrip("`"))]
        elif stripped == fence:
            state = "prose"
        elif state == "yaml":
            state = "top" if stripped == "---" else "yaml"
        elif state == "top" and stripped == "---":
            state = "yaml"
        elif state == "top" and stripped.startswith(":"):
            continue
        else:
            state = "code"
            out.append((number, line))
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_cells_fit_the_code_box(path: Path):
    """No line of a code cell is wider than the code box, where it would need a scroll bar."""
    wide = [f"{path.name}:{n} ({len(line)} chars)" for n, line in _code_lines(path)
            if len(line) > CODE_BOX_CHARS]
    assert not wide, f"code lines wider than {CODE_BOX_CHARS} characters: {wide}"


def test_code_line_reader_sees_every_code_cell():
    """The line reader of the test above finds the code of each cell (and no prose or metadata)."""
    for path in CHAPTERS:
        code = {line for _, line in _code_lines(path)}
        for cell in jupytext.read(path).cells:
            if cell.cell_type == "code":
                assert set(cell.source.splitlines()) <= code | {""}, path.name


FIGSIZE = re.compile(r"figsize=\(\s*([0-9.]+)\s*,")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figures_use_the_book_style_and_fit_the_page(path: Path):
    """A chapter that draws sets the book's figure style first, and no figure is wider than the page."""
    from aimlib.plotting import MAX_WIDTH

    cells = [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]
    drawing = [i for i, src in enumerate(cells) if "plt." in src or "figsize" in src]
    if not drawing:
        return
    styled = [i for i, src in enumerate(cells) if "use_book_style()" in src]
    assert styled and styled[0] <= drawing[0], f"{path.name} draws before calling use_book_style()"
    widths = [float(w) for src in cells for w in FIGSIZE.findall(src)]
    assert all(w <= MAX_WIDTH for w in widths), f"{path.name}: figure widths {widths} > {MAX_WIDTH} in"


# --------------------------------------------------------------------------- references ahead
#: a label a chapter defines: ``(name)=``, ``:label: name`` (equations, propositions), ``name: name`` (figures)
LABEL = re.compile(r"^\((?P<target>[\w-]+)\)=\s*$|^\s*:label:\s*(?P<eq>[\w-]+)|^\s*name:\s*(?P<fig>[\w-]+)",
                   re.M)
#: a cross-reference: {ref}, {prf:ref}, {eq} or {numref}, with or without a text of its own
REFERENCE = re.compile(r"\{(?:ref|prf:ref|eq|numref)\}`(?:[^`<]*<)?([\w-]+)>?`")
#: words that tell the reader a reference points ahead
AHEAD = re.compile(r"\b(later|ahead|next( two)? (chapters?|part))\b", re.I)
#: the pages that map the whole book, each of whose links may point ahead: the introduction's
#: reading guide and "Results at a glance", a table of what later chapters derive
MAPS = ("intro", "results")
#: the parts after the chapters: the library reference and the bibliography, referred to from anywhere
BACK_PARTS = ("Library reference", "Back matter")


def _body_chapters() -> list[Path]:
    """The chapters in reading order, without the parts of :data:`BACK_PARTS`."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] if part["caption"] not in BACK_PARTS
                             for c in part["chapters"]]
    return [ROOT / f"{f}.md" for f in files]


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around ``text[start:end]``: from the end of the sentence, paragraph or list
    item before it to the end of its own."""
    stops = re.compile(r"\.\s|\n\s*\n|\n\s*[*|] ")
    before = [m.end() for m in stops.finditer(text, 0, start)]
    after = stops.search(text, end)
    return text[before[-1] if before else 0:after.start() if after else len(text)]


def references_ahead(chapters: list[Path]) -> list[tuple[str, str, str]]:
    """``(chapter, label, sentence)`` for every reference to a label of a later chapter of ``chapters``."""
    defined = {}
    for i, path in enumerate(chapters):
        defined.update({next(g for g in m.groups() if g): i for m in LABEL.finditer(path.read_text())})
    ahead = []
    for i, path in enumerate(chapters):
        text = path.read_text()
        ahead += [(path.stem, m.group(1), _sentence(text, m.start(), m.end()))
                  for m in REFERENCE.finditer(text) if defined.get(m.group(1), -1) > i]
    return ahead


def test_a_reference_to_a_later_chapter_says_so():
    """A chapter that points to a later one says so in the same sentence ("later", "ahead", "next chapter"), so a reader
    knows it is not yet read; the pages of :data:`MAPS` point ahead throughout."""
    ahead = [r for r in references_ahead(_body_chapters()) if r[0] not in MAPS]
    assert len(ahead) >= 10, ahead          # the reader sees them: the test reads the sources right
    unmarked = [f"{chapter}: {label}: {' '.join(sentence.split())}" for chapter, label, sentence in ahead
                if not AHEAD.search(sentence)]
    assert not unmarked, "references to a later chapter not marked as such:\n" + "\n".join(unmarked)


def test_the_reference_reader_sees_what_points_back_and_ahead(tmp_path):
    """On two made-up chapters: a reference back is not reported, one ahead is, with its sentence."""
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("(a-top)=\n# A\n\nSee {prf:ref}`b-prop`. Then {ref}`text <a-top>`.\n")
    second.write_text("(b-top)=\n# B\n\n:label: b-prop\n\nBack to {ref}`a-top`.\n")
    assert [(c, label, " ".join(s.split())) for c, label, s in references_ahead([first, second])] == [
        ("a", "b-prop", "See {prf:ref}`b-prop`")]
