"""``make book``'s cached execution (``book/_ext/aim_cache.py``): when the cache is kept and when emptied."""
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import aim_cache  # noqa: E402  (book/_ext is not a package)


@pytest.fixture
def tree(tmp_path):
    """A small repository: a library module and data file, a chapter, the book's code and data."""
    root = tmp_path / "repo"
    files = {"aimlib/model.py": "X = 1\n", "aimlib/data/table.npz": "\x00\x01",
             "aimlib/channels/softmax.py": "Y = 2\n", "book/model.md": "# The model\n\nProse.\n",
             "book/_code/helper.py": "Z = 3\n", "book/data/run.csv": "a,b\n1,2\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _filled(tree, tmp_path):
    """A cache made for ``tree`` now, with one executed notebook in it."""
    cache = tmp_path / "cache"
    assert aim_cache.refresh(cache, tree)       # no cache yet: created
    (cache / "executed").mkdir()
    (cache / "executed" / "base.ipynb").write_text("{}")
    return cache


def test_prose_and_unchanged_inputs_keep_the_cache(tree, tmp_path):
    cache = _filled(tree, tmp_path)
    assert not aim_cache.refresh(cache, tree)
    (tree / "book" / "model.md").write_text("# The model\n\nOther prose.\n")
    (tree / "aimlib" / "__pycache__").mkdir()
    (tree / "aimlib" / "__pycache__" / "model.cpython-311.pyc").write_text("bytecode")
    assert not aim_cache.refresh(cache, tree)
    assert (cache / "executed" / "base.ipynb").is_file()


@pytest.mark.parametrize("edit", ["aimlib/channels/softmax.py", "aimlib/data/table.npz",
                                  "book/_code/helper.py", "book/data/run.csv", "aimlib/new.py"])
def test_a_library_or_data_change_empties_the_cache(tree, tmp_path, edit):
    cache = _filled(tree, tmp_path)
    path = tree / edit
    path.write_text((path.read_text() if path.exists() else "") + "# changed\n")
    assert aim_cache.refresh(cache, tree)
    assert not (cache / "executed").exists()
    assert (cache / aim_cache.KEY_FILE).read_text().strip() == aim_cache.inputs_hash(tree)
    assert not aim_cache.refresh(cache, tree)   # and is kept on the next build


def test_a_removed_or_renamed_library_file_empties_the_cache(tree, tmp_path):
    cache = _filled(tree, tmp_path)
    (tree / "aimlib" / "model.py").rename(tree / "aimlib" / "model2.py")
    assert aim_cache.refresh(cache, tree)
    cache = _filled(tree, tmp_path / "again")
    (tree / "book" / "data" / "run.csv").unlink()
    assert aim_cache.refresh(cache, tree)


def test_the_script_reports_its_decision(tree, tmp_path):
    script = ROOT / "book" / "_ext" / "aim_cache.py"
    run = [sys.executable, str(script), str(tmp_path / "cache"), "--root", str(tree)]
    first = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    second = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "every chapter runs" in first and "come from the cache" in second


def test_the_switch_sets_cache_mode_only_when_asked(monkeypatch, tmp_path):
    class Config:
        nb_execution_mode, nb_execution_cache_path = "force", ""

    monkeypatch.delenv(aim_cache.ENV, raising=False)
    config = Config()
    aim_cache.use_cache(None, config)
    assert (config.nb_execution_mode, config.nb_execution_cache_path) == ("force", "")
    monkeypatch.setenv(aim_cache.ENV, str(tmp_path / "c"))
    aim_cache.use_cache(None, config)
    assert (config.nb_execution_mode, config.nb_execution_cache_path) == ("cache", str(tmp_path / "c"))


def test_config_forces_execution_and_make_book_alone_uses_the_cache():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "force"
    assert "aim_cache" in config["sphinx"]["local_extensions"]
    assert ".jupyter_cache" in config["exclude_patterns"]
    makefile = (ROOT / "Makefile").read_text()
    book = makefile.split("\nbook:")[1].split("\n\n")[0]
    assert "aim_cache.py $(BOOK_CACHE)" in book and "AIM_BOOK_CACHE=$(BOOK_CACHE)" in book
    assert "BOOK_CACHE := .jupyter_cache" in makefile
    assert ".jupyter_cache/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "AIM_BOOK_CACHE" not in makefile.split("\ntest:")[1].split("\n\n")[0]
