"""The library reference (book/api): every public module is on a page, every page in the table of
contents, the references that name an object where a user imports it resolve to where it is defined,
and a name in a chapter's code links to its entry (book/_ext/aim_codelinks.py)."""
import collections
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest
import yaml

import aimlib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import aim_api  # noqa: E402  (book/_ext is not a package)
import aim_codelinks  # noqa: E402

API = ROOT / "book" / "api"
DIRECTIVE = re.compile(r"^\.\. (automodule|autofunction|autoclass):: (\S+)", re.M)


def _public_modules():
    return sorted(m.name for m in pkgutil.walk_packages(aimlib.__path__, "aimlib.")
                  if not any(part.startswith("_") for part in m.name.split(".")))


def _documented():
    found = {}
    for page in API.glob("*.md"):
        for kind, name in DIRECTIVE.findall(page.read_text()):
            found.setdefault(kind, set()).add(name)
    return found


def test_every_public_module_has_its_entry():
    modules = set(_documented().get("automodule", ()))
    missing = sorted((set(_public_modules()) | {"aimlib"}) - modules)
    assert not missing, f"public modules missing from book/api/*.md: {missing}"
    assert modules <= set(_public_modules()) | {"aimlib"}, "book/api documents a module that does not exist"


def test_public_names_defined_in_private_modules_are_documented():
    """A package's ``__all__`` may export a function from a private module (``aimlib.rmt._arcs``):
    autodoc skips private modules, so the page documents such a name where the package exports it."""
    listed = _documented().get("autofunction", set()) | _documented().get("autoclass", set())
    exports = {}                  # object -> the public names it is exported under
    for name in _public_modules():
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            owner = getattr(obj, "__module__", None)
            private = isinstance(owner, str) and any(p.startswith("_") for p in owner.split("."))
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and private:
                exports.setdefault(obj, []).append(f"{name}.{attr}")
    missing = sorted(names[0] for names in exports.values() if not set(names) & listed)
    assert exports and not missing, f"document these in book/api with autofunction/autoclass: {missing}"


def _toc_files(node):
    if isinstance(node, dict):
        return ([node["file"]] if "file" in node else []) + [f for v in node.values() for f in _toc_files(v)]
    if isinstance(node, list):
        return [f for v in node for f in _toc_files(v)]
    return []


def test_every_reference_page_is_in_the_table_of_contents():
    toc = set(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    pages = {f"book/api/{p.stem}" for p in API.glob("*.md")}
    assert pages and pages <= toc, f"not in _toc.yml: {sorted(pages - toc)}"


@pytest.mark.parametrize("target, module, cls, expected", [
    ("aimlib.amp.gamp_rie", None, None, "aimlib.amp.gamp.gamp_rie"),          # a package re-export
    ("memory_estimate", "aimlib.gd.run", None, "aimlib.gd.memory.memory_estimate"),   # a sibling's name
    ("aimlib.priors.Rectangular.zero_slope", None, None,                     # an inherited method
     "aimlib.priors.rectangular.FactorProduct.zero_slope"),
    ("aimlib.priors.Wishart", None, None, "aimlib.priors.wishart.Wishart"),
    ("aimlib.amp", None, None, "aimlib.amp"),
])
def test_a_reference_resolves_to_the_defining_module(target, module, cls, expected):
    obj, name = aim_api.import_target(target, module, cls)
    assert obj is not None
    assert aim_api.defining_names(obj, name)[0] == expected


def test_a_constant_resolves_to_the_modules_holding_it():
    obj, name = aim_api.import_target("aimlib.channels.CHANNELS", None)
    assert "aimlib.channels.registry.CHANNELS" in aim_api.defining_names(obj, name)


@pytest.mark.parametrize("target, module", [("no_such_function", "aimlib.amp.gamp"),
                                            ("aimlib.amp.no_such_function", None),
                                            ("numpy.ndarray", None)])
def test_a_name_that_imports_to_nothing_stays_unresolved(target, module):
    """The strict build must still fail on a reference to nothing (or outside the library)."""
    assert aim_api.import_target(target, module) == (None, None)


def _pages_imported(text: str) -> set:
    """The reference pages of the ``aimlib`` code a chapter's cells import (``core`` for top-level modules)."""
    pages = {p.stem for p in API.glob("*.md")} - {"index"}
    used = {m.split(".")[1] for m in re.findall(r"^\s*(?:from|import) (aimlib\.[\w.]+)", text, re.M)}
    for names in re.findall(r"^\s*from aimlib import ([\w, ]+)", text, re.M):
        used |= {n.split(" as ")[0].strip() for n in names.split(",")}
    return {u if u in pages else "core" for u in used if not u.startswith("_")}


def test_every_chapter_links_the_reference_of_the_code_it_calls():
    """One hop from a chapter to the code: each reference page of what a chapter imports is linked."""
    chapters = [f for f in _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
                if not f.startswith("book/api/")]
    missing = {}
    for rel in chapters:
        text = (ROOT / f"{rel}.md").read_text()
        linked = set(re.findall(r"<api-([\w-]+)>", text))
        need = {p.replace("_", "-") for p in _pages_imported(text)}
        if need - linked:
            missing[rel] = sorted(need - linked)
    assert not missing, f"chapters missing links to their reference pages: {missing}"


# ----------------------------------------------------------------------------- names in chapter code
CELLS = ["from aimlib import state_evolution as se\nfrom aimlib.priors import Wishart, Centred\n"
         "import aimlib.amp as amp\nimport numpy as np\n%matplotlib inline",
         "fp = se.fixed_point(0.5, 'softmax', rho=Wishart(0.5))\nCentred = None\nr = amp.gamp_rie"]


def test_the_names_a_chapter_imports_from_aimlib_are_bound():
    """Imports from aimlib bind names (magics skipped); a name the code assigns anew is not one."""
    assert aim_codelinks.bindings(CELLS) == {"se": "aimlib.state_evolution", "Wishart": "aimlib.priors.Wishart",
                                             "amp": "aimlib.amp"}


def test_a_name_is_followed_as_python_reads_it():
    """``se.fixed_point`` is the function the package exports, not the submodule of the same name."""
    from aimlib.state_evolution import fixed_point

    assert aim_codelinks.follow("aimlib.state_evolution.fixed_point") is fixed_point
    assert aim_codelinks.follow("aimlib.state_evolution.closed").__name__ == "aimlib.state_evolution.closed"
    assert aim_codelinks.follow("aimlib.state_evolution.no_such_name") is None


def test_a_call_in_highlighted_code_links_to_its_entry():
    """The longest documented prefix of ``se.fixed_point(...).q`` is linked, where it is defined."""
    Entry = collections.namedtuple("Entry", "docname node_id")
    objects = {"aimlib.state_evolution.fixed_point.fixed_point":
               Entry("book/api/state_evolution", "aimlib.state_evolution.fixed_point.fixed_point")}

    def find(dotted):
        found = aim_codelinks.entry(objects, dotted)
        return found and (found[0], f"{found[1][0]}.html#{found[1][1]}")

    span = '<span class="{}">{}</span>'
    code = (span.format("n", "fp") + span.format("o", "=") + span.format("n", "se") + span.format("o", ".")
            + span.format("n", "fixed_point") + span.format("p", "(") + span.format("n", "np") + span.format("o", ".")
            + span.format("n", "pi") + span.format("p", ")"))
    body = f'<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>{code}</pre></div></div>'
    out = aim_codelinks.link_code(body, aim_codelinks.bindings(CELLS), find)
    link = ('<a class="reference internal aim-code-link" href="book/api/state_evolution.html#'
            'aimlib.state_evolution.fixed_point.fixed_point" title="aimlib.state_evolution.fixed_point.fixed_point">'
            + span.format("n", "se") + span.format("o", ".") + span.format("n", "fixed_point") + "</a>")
    assert link in out and out.count("<a ") == 1            # fp and np.pi are not aimlib's
    assert aim_codelinks.link_code(body.replace("highlight-ipython3", "highlight-python"),
                                   aim_codelinks.bindings(CELLS), find).count("<a ") == 0   # not a chapter's cell
