"""The optional dependencies (``aimlib/_optional.py``): imported on demand, a missing one named with its extra."""
from __future__ import annotations

import sys

import pytest

from aimlib import backend, cli, sweep
from aimlib._optional import EXTRAS, MissingDependency, install_hint, optional_import
from conftest import ROOT


def test_a_present_package_is_the_module_itself():
    yaml = pytest.importorskip("yaml")
    assert optional_import("yaml", "a test") is yaml


def test_a_missing_package_names_itself_what_needs_it_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)   # `import yaml` now raises ImportError
    with pytest.raises(MissingDependency) as info:
        optional_import("yaml", "reading a YAML sweep spec")
    message = str(info.value)
    assert isinstance(info.value, ImportError) and info.value.name == "yaml"
    for part in ("reading a YAML sweep spec", "pyyaml", "pip install 'aimlib[sweep]'"):
        assert part in message, message


def test_every_extra_of_pyproject_is_named_and_only_optional_packages_are():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {extra for _, extra in EXTRAS.values()} == set(extras)
    assert install_hint("distributed.security") == "pip install 'aimlib[sweep]'"
    with pytest.raises(ValueError, match="not an optional dependency"):
        optional_import("numpy", "a test")


def test_a_spec_file_without_pyyaml_is_a_one_line_error_of_the_command_line(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("method: se\nT: 2\nrho: 0.5\nalpha: [0.1]\n")
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(MissingDependency, match="pyyaml"):
        sweep.load_spec(spec)
    assert cli.main(["sweep", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install 'aimlib[sweep]'" in err


def test_without_cupy_the_backend_is_numpy_and_asking_for_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(backend, "_CUPY", None)
    monkeypatch.setattr(backend, "_CUPY_CHECKED", False)
    monkeypatch.delenv("AIMLIB_BACKEND", raising=False)
    assert backend.default_module().__name__ == "numpy"
    monkeypatch.setenv("AIMLIB_BACKEND", "cupy")
    with pytest.raises(backend.BackendError, match=r"pip install 'aimlib\[gpu\]'"):
        backend.default_module()
