"""Where a downloaded chapter finds the book's files (aimlib.book_folder) and which it reads
(book/_ext/aim_notebooks.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from aimlib.book_folder import book_folder, enter_book
from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import aim_notebooks  # noqa: E402  (the build's extension, not a package)


def test_the_editable_install_points_at_a_book_folder():
    """The test environment installs aimlib editable (requirements.txt): its book folder holds the data."""
    assert (book_folder() / "data").is_dir() and (book_folder().parent / "sweeps").is_dir()


def test_a_folder_that_holds_the_files_is_kept(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert enter_book(["data"], book=tmp_path / "elsewhere") == tmp_path and Path.cwd() == tmp_path


def test_the_book_folder_is_entered_when_the_notebook_runs_elsewhere(tmp_path, monkeypatch, capsys):
    book = tmp_path / "repo" / "book"
    (book / "data").mkdir(parents=True)
    (tmp_path / "repo" / "sweeps").mkdir()
    monkeypatch.chdir(tmp_path)
    assert enter_book(["data", "../sweeps"], book=book) == book and Path.cwd() == book
    assert "from " + str(book) in capsys.readouterr().out


def test_missing_files_say_what_to_do(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"data, _code; _code not found.*pip install -e \."):
        enter_book(["data", "_code"], book=tmp_path / "nowhere")
    assert Path.cwd() == tmp_path


def test_the_names_a_chapter_reads_are_found_in_its_code():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell('prose naming "data/x.csv" is not code'),
        nbformat.v4.new_code_cell('a = np.genfromtxt("data/x.csv")\nb = Path("../sweeps")\n'
                                  'c = load_results(f"../benchmarks/results/{name}.json")\n'
                                  'sys.path.insert(0, "_code")\n'
                                  'd = "database"'),
    ])
    assert aim_notebooks.needed(nb) == ["data", "../sweeps", "../benchmarks", "_code"]
    opened = aim_notebooks._with_finder(nb)
    assert opened.cells[1].source.endswith("book_dir = enter_book(['data', '../sweeps', '../benchmarks', '_code'])")
    assert aim_notebooks.needed(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])) == []
