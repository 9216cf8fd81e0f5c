"""The data scripts' rows (scripts/_rows.py): a run resumed with ``append`` keeps what was written, and the
made-by line reads back as the command."""
from __future__ import annotations

import pytest

from script_support import import_script


@pytest.fixture
def rows():
    return import_script("_rows")


def test_appended_rows_follow_the_kept_ones_under_one_header(rows, tmp_path):
    out = tmp_path / "r.csv"
    rows.write_rows(out, "make r", ["a", "b"], [{"a": 1, "b": 2}])
    rows.write_rows(out, "make r --resume", ["a", "b"], [{"a": 3, "b": 4}], append=True)
    assert out.read_text().splitlines()[:2] == ["# made by: make r", "a,b"]
    assert rows.made_by(out) == "make r"
    assert rows.read_rows(out) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]
    rows.write_rows(out, "make r", ["a", "b"], [{"a": 5, "b": 6}])       # no append: a fresh file
    assert rows.read_rows(out) == [{"a": "5", "b": "6"}]


def test_appending_under_other_columns_is_refused(rows, tmp_path, capsys):
    out = tmp_path / "r.csv"
    rows.write_rows(out, "make r", ["a", "b"], [{"a": 1, "b": 2}])
    with pytest.raises(SystemExit) as info:
        rows.write_rows(out, "make r", ["a", "c"], [{"a": 3, "c": 4}], append=True)
    assert info.value.code == 2 and "columns" in capsys.readouterr().err
    assert rows.read_rows(out) == [{"a": "1", "b": "2"}]
    assert rows.read_rows(tmp_path / "missing.csv") == []


def test_a_file_without_its_made_by_line_is_refused(rows, tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="made by"):
        rows.made_by(out)

