"""The library's structure rules (CONTRIBUTING.md, "Library conventions"), read from its source.

* imports stand at the top of a module, never inside a function or class;
* an optional package (an extra of ``pyproject.toml``) is imported only through
  ``aimlib._optional.optional_import``;
* a module stays under about 400 lines (the test stops at 420);
* no module imports by name (``importlib``) but ``aimlib._lazy``, the one helper of lazy
  imports, and ``aimlib._optional``: a hidden import escapes the two rules above;
* a name with a leading underscore is used only in its own module: none is
  imported from another module, none read as an attribute of an imported module;
* a public class or function name means one thing: no two public modules define one of the
  same name (but one concept's function in each model, :data:`PER_MODEL_FUNCTIONS`).
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest

import aimlib

from aimlib._optional import EXTRAS
from conftest import ROOT

SOURCES = sorted((ROOT / "aimlib").rglob("*.py"))
#: the private modules whose names are the library's shared vocabulary
SHARED_PRIVATE_MODULES = {"_validate", "_optional"}
#: the modules that may import by name (``importlib``)
IMPORTS_BY_NAME = {"aimlib/_lazy.py", "aimlib/_optional.py"}


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(path) -> str:
    return str(path.relative_to(ROOT))


def _imports(tree):
    """``(node, inside a function or class)`` for every import statement."""
    def walk(node, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, nested
            yield from walk(child, nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                ast.ClassDef)))
    yield from walk(tree, False)


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_imports_are_at_the_top_and_optional_packages_go_through_one_module(path):
    for node, nested in _imports(_tree(path)):
        assert not nested, f"{_name(path)}:{node.lineno}: an import inside a function or class"
        if getattr(node, "level", 0) > 0:   # aimlib's own modules
            continue
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        for top in (module.partition(".")[0] for module in modules):
            if top in EXTRAS:
                pytest.fail(f"{_name(path)}:{node.lineno}: imports the optional package {top!r}; "
                            "use aimlib._optional.optional_import")


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_no_module_imports_by_name_outside_the_lazy_helper(path):
    if _name(path) in IMPORTS_BY_NAME:
        return
    tree = _tree(path)
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        hidden = [n for n in names if n.partition(".")[0] == "importlib"]
        hidden += ["__import__"] if isinstance(node, ast.Name) and node.id == "__import__" else []
        assert not hidden, (f"{_name(path)}:{node.lineno}: imports by name ({hidden[0]}); bind the module "
                            "at the top with aimlib._lazy.LazyModule or import_on_demand")
        lazy = (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                in ("LazyModule", "import_on_demand") and node.args and isinstance(node.args[0], ast.Constant))
        if lazy and str(node.args[0].value).partition(".")[0] in EXTRAS:
            pytest.fail(f"{_name(path)}:{node.lineno}: loads the optional package {node.args[0].value!r} lazily; "
                        "use aimlib._optional.optional_import")


def _module_aliases(tree) -> set:
    """The names a module binds to other aimlib modules (``from . import hardmax as hm``)."""
    names = set()
    for node, _ in _imports(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            names |= {a.asname or a.name for a in node.names}
    return names


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_no_private_name_crosses_a_module_boundary(path):
    tree = _tree(path)
    for node, _ in _imports(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                assert not private or alias.name in SHARED_PRIVATE_MODULES, (
                    f"{_name(path)}:{node.lineno}: imports the private name {alias.name!r}")
    modules = _module_aliases(tree) - {"v", *SHARED_PRIVATE_MODULES}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            pytest.fail(f"{_name(path)}:{node.lineno}: reads the private name {node.value.id}.{node.attr}")


#: the longest a module may grow (CONTRIBUTING.md: "modules under about 400 lines")
MAX_MODULE_LINES = 420


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_modules_stay_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, (f"{_name(path)} has {lines} lines (at most {MAX_MODULE_LINES}): "
                                       "split it by concept")


#: one concept in several models, a function per model: the functional forms of a channel's Bayes side (and
#: of its limits) per channel module, the counting bound per model (heads, untied), a module's caches
PER_MODEL_FUNCTIONS = {"fisher", "fisher_scaled", "fisher_scaled_direct", "g_out", "log_partition", "probabilities",
                       "limit_error", "limit_map", "weak_recovery_threshold", "measurements_per_sample",
                       "count_threshold", "clear_caches"}


@pytest.mark.slow   # imports every module (the widgets, the sweeps' Dask)
def test_each_public_class_or_function_name_is_defined_once():
    """``Problem`` of GAMP-RIE and of gradient descent, ``check_channel`` of the channel contract and of the
    command line: one name for two things is what this refuses (the names of ``__all__``, or of the
    module where it has none)."""
    where = {}
    for info in pkgutil.walk_packages(aimlib.__path__, "aimlib."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue   # a private module's names are read through it (``v.choice``)
        module = importlib.import_module(info.name)
        public = [n for n in vars(module) if not n.startswith("_")]
        for name in getattr(module, "__all__", public):
            obj = getattr(module, name, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == info.name:
                where.setdefault(name, []).append(info.name)
    clashes = {n: m for n, m in where.items() if len(m) > 1 and n not in PER_MODEL_FUNCTIONS}
    assert not clashes, f"public names defined in several modules: {clashes}"
