"""No public signature of :mod:`aimlib` carries a default that names the machine it was imported on.

The library reference (book/api, Sphinx autodoc) prints every signature with the ``repr`` of its
defaults: a default that is a module (``xp=<module 'numpy' from '/.../site-packages/...'>``), a
path (``path=PosixPath('/.../aimlib/data/...')``) or an absolute path string shows the build
machine's folders on the published page.  Such defaults are ``None``, resolved inside the function
and named in its docstring ("default: numpy", "default: the shipped table").
"""
from __future__ import annotations

import functools
import importlib
import inspect
import pathlib
import pkgutil
import sys
import types

import numpy as np

import aimlib

ROOT = str(pathlib.Path(aimlib.__file__).resolve().parents[1])


def _public_modules() -> list:
    return ["aimlib"] + sorted(m.name for m in pkgutil.walk_packages(aimlib.__path__, "aimlib.")
                               if not any(part.startswith("_") for part in m.name.split(".")))


def _own(obj) -> bool:
    owner = getattr(obj, "__module__", None)
    return isinstance(owner, str) and owner.split(".")[0] == "aimlib"


def _callables():
    """``{defining name: callable}``: every public function, class and public method (with ``__init__``
    and ``__call__``) of aimlib reachable from a public module, wrapped ones (``lru_cache``) included."""
    found, seen = {}, set()
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or inspect.ismodule(obj) or not callable(obj) or not _own(obj):
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            name = f"{obj.__module__}.{getattr(obj, '__qualname__', attr)}"
            found[name] = obj
            if inspect.isclass(obj):
                for member_name, member in vars(obj).items():
                    if member_name.startswith("_") and member_name not in ("__init__", "__call__"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if callable(member) and not inspect.isclass(member):
                        found[f"{name}.{member_name}"] = member
    return found


def _machine_specific(default) -> bool:
    """A module, a path, an absolute path string, or anything whose ``repr`` holds this checkout's
    or this interpreter's folders."""
    if isinstance(default, (types.ModuleType, pathlib.PurePath)):
        return True
    if isinstance(default, str) and default.startswith("/"):
        return True
    text = repr(default)
    return ROOT in text or sys.prefix in text or "<module " in text


def _leaks(obj) -> list:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [f"{p.name}={p.default!r}" for p in sig.parameters.values()
            if p.default is not p.empty and _machine_specific(p.default)]


def test_the_check_sees_each_kind_of_default():
    @functools.lru_cache(maxsize=1)
    def cached(root=ROOT):
        return root

    def module_default(x, xp=np):
        return x

    def path_default(path=pathlib.Path(ROOT) / "aimlib"):
        return path

    def fine(x, xp=None, dtype=np.float64, name="numpy", scale=1.0):
        return x

    for bad in (cached, module_default, path_default):
        assert _leaks(bad), bad.__name__
    assert _leaks(fine) == []


def test_the_walk_reaches_the_public_api():
    names = _callables()
    assert len(names) > 300
    for expected in ("aimlib.priors.base.Prior.sample", "aimlib.priors.wishart.Centred.mean",
                     "aimlib.rmt.spectrum.sample_wishart", "aimlib.channels.base.sigma2",
                     "aimlib.tokens.token_stream", "aimlib.tokens.TokenStream",
                     "aimlib.widgets.training.stored_runs", "aimlib.channels.deep_histories.write_tables3"):
        assert expected in names, expected


def test_no_public_default_names_the_build_machine():
    leaks = {name: found for name, obj in _callables().items() if (found := _leaks(obj))}
    assert not leaks, ("defaults that show this machine's modules or paths in the library reference "
                       f"(make them None and resolve them inside): {leaks}")


def test_defaults_resolve_to_numpy_and_the_shipped_files():
    """Behaviour is that of the old defaults: numpy arrays, the shipped table, this repository."""
    from aimlib.channels import sigma2
    from aimlib.priors import Centred, Gaussian, Wishart
    from aimlib.priors.rectangular import FactorProduct
    from aimlib.rmt import sample_wishart
    from aimlib.tokens import TokenStream, token_stream

    np.testing.assert_array_equal(sigma2(3), np.ones((3, 3)) + np.eye(3))
    np.testing.assert_array_equal(sigma2(3, np), sigma2(3, xp=None))
    np.testing.assert_array_equal(sample_wishart(6, 0.5, 1), sample_wishart(6, 0.5, 1, xp=np))
    for prior in (Wishart(0.5), Centred(0.5), Gaussian(), Gaussian(symmetric=False), FactorProduct(0.5)):
        S = prior.sample(5, 3)
        assert type(S) is np.ndarray and S.dtype == np.float64
        np.testing.assert_array_equal(S, prior.sample(5, 3, xp=np))
        np.testing.assert_array_equal(prior.mean(5), prior.mean(5, np))
    stream = token_stream(10, 2, 3, 0)
    assert stream.xp is np and stream == token_stream(10, 2, 3, 0, xp=np)
    assert TokenStream(law=stream.law, n=10, T=2, d=3, key=stream.key).xp is np
    assert type(stream[0:4]) is np.ndarray


def test_write_tables3_defaults_to_the_shipped_table(monkeypatch, tmp_path):
    from aimlib.channels import deep_histories as dh

    written = []
    monkeypatch.setattr(dh, "build_tables3", lambda c: np.zeros(1))
    monkeypatch.setattr(dh, "save_tables", lambda path, *args, **kw: written.append(path) or path)
    assert dh.write_tables3() == dh.TABLES3
    assert dh.write_tables3(tmp_path / "t.npz") == tmp_path / "t.npz"
    assert written == [dh.TABLES3, tmp_path / "t.npz"]
