"""Cross-references of the library reference (``book/api``) that name an object where the reader meets it.

The reference documents each object once, in the module that defines it
(``aimlib.amp.gamp.gamp_rie``), while docstrings and chapters name it where a user
imports it (``aimlib.amp.gamp_rie``) or by its short name inside a sibling module
(``memory_estimate`` in ``aimlib.gd.run``).  On a reference Sphinx cannot resolve,
this extension imports the named object, follows it to the module that defines it
(``__module__`` and ``__qualname__``; for a constant, the module of the same name
that documents it) and resolves the reference there.  A name that imports to nothing
documented stays unresolved, so the strict build still fails on it.
"""
from __future__ import annotations

import importlib
import inspect
import sys

PACKAGE = "aimlib"


def import_target(target: str, module: str | None, cls: str | None = None):
    """The object ``target`` names (dotted, or short inside ``cls`` of ``module``, ``module`` and its
    parents) and that name, or ``(None, None)``."""
    candidates = [target]
    if module:
        parts = module.split(".")
        candidates += [f"{module}.{cls}.{target}"] if cls else []
        candidates += [".".join(parts[:i] + [target]) for i in range(len(parts), 0, -1)]
    for name in candidates:
        if not name.startswith(PACKAGE + "."):
            continue
        obj = _import_dotted(name)
        if obj is not None:
            return obj, name
    return None, None


def _import_dotted(name: str):
    """Import the longest module prefix of ``name`` and follow attributes; None if any step fails."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
        return obj
    return None


def defining_names(obj, name: str) -> list[str]:
    """Full names under which ``obj`` may be documented: where it is defined, then ``name`` itself."""
    if inspect.ismodule(obj):
        return [obj.__name__]
    owner, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if callable(obj) and isinstance(owner, str) and isinstance(qualname, str):
        return [f"{owner}.{qualname}", name]
    parent, short = name.rsplit(".", 1)
    cls = _import_dotted(parent)
    if inspect.isclass(cls):                 # a property or attribute of a class
        return [f"{cls.__module__}.{cls.__qualname__}.{short}", name]
    holders = [m for m, module in list(sys.modules.items())   # a constant: the modules holding it
               if m.startswith(PACKAGE) and module is not None and getattr(module, short, None) is obj]
    return [f"{m}.{short}" for m in holders] + [name]


def resolve(app, env, node, contnode):
    """``missing-reference`` handler: resolve a ``py`` reference to the object's documented name."""
    if node.get("refdomain") != "py":
        return None
    obj, name = import_target(node["reftarget"], node.get("py:module"), node.get("py:class"))
    if obj is None:
        return None
    domain = env.get_domain("py")
    for full in defining_names(obj, name):
        if full in domain.objects:
            return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", full, node, contnode)
    return None


def setup(app):
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
