"""The prepared GPU run (``benchmarks/gpu_validate.py``): its data sets are the library's, and
every stage runs at a tiny size on NumPy and on the strict CuPy stand-in (its ``--smoke`` mode)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aimlib import model
from aimlib.channels import make_channel
from aimlib.tokens import TokenStream

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_validate

    return gpu_validate


def test_sample_draws_the_librarys_regenerated_data_set(script):
    ch = make_channel("softmax")
    regen = {"name": "gaussian", "storage": "regenerate"}
    ref = model.sample_dataset(0.5, 20, 2, 0.5, ch, 4, tokens=regen, backend="numpy")
    args = SimpleNamespace(backend="numpy", data_mb=64.0)
    streamed = script.sample(args, 0.5, 20, 0.5, ch, 4, stored=False)
    stored = script.sample(args, 0.5, 20, 0.5, ch, 4)
    assert isinstance(streamed.X, TokenStream) and isinstance(stored.X, np.ndarray)
    for data in (streamed, stored):
        np.testing.assert_array_equal(data.y, ref.y)
        np.testing.assert_array_equal(data.S, ref.S)
    np.testing.assert_array_equal(stored.X, ref.X.materialise())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "cupy"])
def test_smoke_run_writes_every_stage(script, backend, request, tmp_path, monkeypatch):
    """``--smoke`` (tiny d) on NumPy, and with ``--backend cupy`` on the strict CuPy stand-in."""
    if backend == "cupy":
        request.getfixturevalue("strict_cupy")
    monkeypatch.setattr(sys, "argv", ["gpu_validate.py"])
    assert script.main(["--smoke", "--backend", backend, "--out-dir", str(tmp_path)]) == 0
    for stage in script.STAGES:
        record = json.loads((tmp_path / f"gpu_{stage}.json").read_text())
        assert record["command"].startswith("python benchmarks/gpu_validate.py --smoke")
        assert record["rows"] and all(r["status"] == "done" and r["backend"] == backend for r in record["rows"])
        assert all(np.all(np.isfinite(r["mmse"])) and r["se_mmse"] is not None for r in record["rows"])
    rows = json.loads((tmp_path / "gpu_float32.json").read_text())["rows"]
    assert [r["dtype"] for r in rows] == ["float64", "float32"] and abs(rows[1]["mmse_minus_float64"]) < 0.05
    deep = json.loads((tmp_path / "gpu_deep.json").read_text())["rows"]
    assert {r["teachers"] for r in deep} == {"wishart", "centred"} and all(len(r["mmse"]) == 2 for r in deep)
    # the residual cross-covariance is recorded beside the state evolution's: zero for centred teachers,
    # negative for Wishart ones (book, chapter "Correlated layers"), and bounded by Cauchy-Schwarz
    assert all(abs(r["e_12"]) <= np.sqrt(np.prod(r["mmse"])) for r in deep)
    assert {r["teachers"]: r["se_q_12"] for r in deep}["centred"] == 0.0
    assert {r["teachers"]: r["se_q_12"] for r in deep}["wishart"] < 0
