"""The record every benchmark writes (``benchmarks/_common.py``), which ``book/performance.md`` reads."""
from __future__ import annotations

import datetime
import json

import pytest

from conftest import ROOT


@pytest.fixture
def common(monkeypatch, tmp_path):
    """``benchmarks/_common.py`` with its results folder moved to ``tmp_path`` and no BLAS variables set."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import _common

    monkeypatch.setattr(_common, "RESULTS", tmp_path / "results")
    for var in _common.BLAS_THREAD_VARIABLES:
        monkeypatch.setenv(var, "1")  # so that the test's own settings are undone afterwards
        monkeypatch.delenv(var)
    return _common


def test_record_is_name_machine_then_numbers(common, tmp_path):
    out = common.write_record("demo", {"rows": [{"d": 10, "seconds": 0.5}]})
    assert out == tmp_path / "results" / "demo.json"
    record = json.loads(out.read_text())
    assert list(record)[0] == "benchmark" and record["benchmark"] == "demo"
    assert list(record)[1:-1] == list(common.machine())
    assert record["rows"] == [{"d": 10, "seconds": 0.5}]
    # what book/performance.md prints with every table
    when = datetime.datetime.fromisoformat(record["date"])
    assert when.tzinfo is not None and abs(when - datetime.datetime.now(datetime.timezone.utc)).total_seconds() < 60
    assert record["platform"] and record["blas_threads"] == "default"


def test_record_goes_where_asked(common, tmp_path):
    out = common.write_record("demo", {"x": 1}, path=tmp_path / "elsewhere" / "gpu.json")
    assert out == tmp_path / "elsewhere" / "gpu.json" and json.loads(out.read_text())["x"] == 1
    assert not (tmp_path / "results").exists()


def test_numbers_cannot_overwrite_the_machine_part(common, tmp_path):
    with pytest.raises(ValueError, match="date"):
        common.write_record("demo", {"date": "yesterday", "x": 1})
    assert not (tmp_path / "results" / "demo.json").exists()


def test_blas_threads_are_set_for_subprocesses_and_recorded(common):
    import os

    common.set_blas_threads(3)
    assert all(os.environ[var] == "3" for var in common.BLAS_THREAD_VARIABLES)
    assert common.machine()["blas_threads"] == "3"


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_blas_threads_must_be_a_positive_integer(common, bad):
    with pytest.raises(ValueError, match="threads"):
        common.set_blas_threads(bad)
