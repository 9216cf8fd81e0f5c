"""Shared fixtures: the array module under test, the strict CuPy stand-in, the built book and a
folder shared with another local user.

``AIMLIB_TEST_BACKEND=cupy`` runs the array tests on the GPU; NumPy otherwise.
``AIMLIB_TEST_BACKEND=strict-cupy`` runs them, with every array :mod:`aimlib`
creates from scratch, on the strict CPU stand-in for CuPy (no GPU needed): a
test that mixes host and device arrays fails there as it would on a GPU.
``strict_cupy`` runs a test against a CPU stand-in for CuPy that enforces its
host/device rules (``tests/test_device_path.py``), with or without a GPU.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
# The suite's default backend is explicit: arrays created from scratch follow
# AIMLIB_TEST_BACKEND, not whatever GPU the machine happens to have.
TEST_BACKEND = os.environ.get("AIMLIB_TEST_BACKEND", "numpy")
if TEST_BACKEND not in ("numpy", "cupy", "strict-cupy"):
    raise ValueError(f"AIMLIB_TEST_BACKEND must be 'numpy', 'cupy' or 'strict-cupy', got {TEST_BACKEND!r}")
if TEST_BACKEND == "strict-cupy":   # `import cupy` gives the stand-in, in child processes too
    _paths = [str(Path(__file__).parent / "stand_in"), str(Path(__file__).parent)]
    sys.path[:0] = _paths
    os.environ["PYTHONPATH"] = os.pathsep.join(_paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
os.environ.setdefault("AIMLIB_BACKEND", "numpy" if TEST_BACKEND == "numpy" else "cupy")
# On a device backend only the library's tests run: the book, browser and notebook tests
# hold no arrays (and need the book's tool chain, which a GPU machine may lack).
BOOK_FILES = ["test_app.py", "test_book.py", "test_browser.py", "test_chapters.py", "test_live.py"]
collect_ignore = BOOK_FILES if TEST_BACKEND != "numpy" else []


def pytest_collection_modifyitems(config, items):
    """On a device backend, leave out the tests marked ``book`` or ``browser``."""
    if TEST_BACKEND == "numpy":
        return
    keep = [i for i in items if not ({"book", "browser"} & {m.name for m in i.iter_markers()})]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


@pytest.fixture(scope="session")
def backend() -> str:
    """Name of the backend the array tests run on."""
    if TEST_BACKEND == "numpy":
        return "numpy"
    from aimlib.backend import cupy_available

    if not cupy_available():
        pytest.fail(f"AIMLIB_TEST_BACKEND={TEST_BACKEND} but CuPy is not usable")
    return "cupy"


@pytest.fixture(scope="session")
def xp(backend):
    """The array module matching :func:`backend`."""
    from aimlib.backend import module_named

    return module_named(backend)


@pytest.fixture
def strict_cupy(monkeypatch):
    """The strict CuPy stand-in (``tests/strict_cupy.py``) installed as ``cupy`` for one test.

    A CPU test double that enforces CuPy's host/device rules, not a GPU run.
    Arrays created from scratch stay on the host unless the test passes
    ``backend='cupy'``.  ``aimlib.backend``'s CuPy cache is reset for the test; the real ``cupy``
    (``AIMLIB_TEST_BACKEND=cupy``) and the cache come back afterwards.
    """
    import strict_cupy as stand_in

    from aimlib import backend as backend_module

    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    for name, module in stand_in.CUPYX_MODULES.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("AIMLIB_BACKEND", "numpy")   # new arrays on the host unless a test asks for 'cupy'

    monkeypatch.setattr(backend_module, "_CUPY", None)
    monkeypatch.setattr(backend_module, "_CUPY_CHECKED", False)
    return stand_in


@pytest.fixture(scope="session")
def built_book():
    """Build the book strictly, once per session, from a clean ``_build``.

    Every chapter executes (``_config.yml``'s ``force``): the build runs without
    ``AIM_BOOK_CACHE``, the switch of ``make book`` to cached execution
    (``book/_ext/aim_cache.py``).  Returns the completed process (stdout+stderr
    in ``.stdout``) and the HTML folder.
    """
    shutil.rmtree(BUILD, ignore_errors=True)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT),
           "--path-output", str(ROOT), "-W", "-n", "--keep-going"]
    env = {k: v for k, v in os.environ.items() if k != "AIM_BOOK_CACHE"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    proc.stdout = proc.stdout + proc.stderr
    return proc, BUILD / "html"


@pytest.fixture
def shared():
    """A folder like /tmp (mode 1777, reachable by every user), where another local user
    (``nobody``) plants names; the tests that act as that user need root (skipped otherwise)."""
    if os.geteuid() != 0:
        pytest.skip("acting as another local user (nobody) needs root")
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="aim-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path)


def nobody(*command, **kw):
    """``subprocess`` keyword arguments to run ``command`` as the user nobody (through ``setpriv``)."""
    if shutil.which("setpriv") is None:
        pytest.skip("acting as another local user needs setpriv (util-linux)")
    user = pwd.getpwnam("nobody")
    return dict(args=["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *command],
                **kw)


def toc_files() -> list[Path]:
    """Every chapter listed in ``_toc.yml``, as paths to their ``.md`` sources."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part["chapters"]]
    return [ROOT / f"{f}.md" for f in files]


def assert_layer_gradients(channel, y, omega, V, entries, atol, eps=1e-6):
    """``g_out`` of a channel with several indices equals central differences of ``log_partition``.

    ``entries`` are the ``(a, b)`` positions checked in every layer (axis 1 of ``omega``).
    """
    import numpy as np

    g = channel.g_out(y, omega, V)
    for ell in range(omega.shape[1]):
        for a, b in entries:
            E = np.zeros_like(omega)
            E[:, ell, a, b] = E[:, ell, b, a] = eps
            up, down = channel.log_partition(y, omega + E, V), channel.log_partition(y, omega - E, V)
            assert np.allclose(g[:, ell, a, b], (up - down) / (2 * eps), atol=atol), (ell, a, b)
