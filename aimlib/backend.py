"""One place that chooses the array library: CuPy when it sees a GPU, NumPy otherwise.

Every array routine in :mod:`aimlib` asks :func:`get_array_module` for the
module that owns its inputs and then calls only that module, so the NumPy and
the CuPy runs share a single code path.  CuPy never mixes host and device
arrays, so a routine that takes several arrays brings them to one module
first (:func:`to_common`).  Results leave the library as host (NumPy) arrays
through :func:`to_host`.

Environment
-----------
``AIMLIB_BACKEND``
    Unset (or ``auto``): arrays that :mod:`aimlib` creates from scratch live on
    the GPU when CuPy imports and sees one, on the host otherwise.
    ``numpy`` is the opt-out (NumPy even where a GPU is present); ``cupy``
    insists on CuPy and fails with :class:`BackendError` where it cannot run.

Arrays passed in by the caller are never moved: a routine follows its inputs.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import scipy.linalg

from ._optional import install_hint, optional_import

__all__ = [
    "cupy_available",
    "default_module",
    "get_array_module",
    "to_host",
    "to_device",
    "to_common",
    "backend_name",
    "float_dtype",
    "solve_triangular",
    "BackendError",
]


class BackendError(ValueError):
    """The array backend that was asked for cannot be used on this machine."""


_CUPY = None
_CUPY_CHECKED = False


def _load_cupy():
    """Import CuPy once; return the module, or ``None`` if it cannot run."""
    global _CUPY, _CUPY_CHECKED
    if _CUPY_CHECKED:
        return _CUPY
    _CUPY_CHECKED = True
    try:
        cupy = optional_import("cupy", "the GPU backend")
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        _CUPY = cupy
    except ImportError:
        _CUPY = None
    except Exception as exc:  # CuPy installed but unusable (no driver, no GPU)
        warnings.warn(f"CuPy is installed but unusable ({exc}); using NumPy", RuntimeWarning)
        _CUPY = None
    return _CUPY


def cupy_available() -> bool:
    """Return True if CuPy imports, sees a GPU and is not disabled."""
    return _load_cupy() is not None


def default_module():
    """The array module for arrays that :mod:`aimlib` creates from scratch.

    ``AIMLIB_BACKEND`` unset or ``auto``: CuPy if it sees a GPU, else NumPy;
    ``numpy``: NumPy; ``cupy``: CuPy, which must work.
    """
    choice = os.environ.get("AIMLIB_BACKEND", "auto").lower() or "auto"
    if choice not in ("auto", "numpy", "cupy"):
        raise ValueError(f"AIMLIB_BACKEND must be 'auto', 'numpy' or 'cupy', got {choice!r}")
    if choice == "numpy":
        return np
    cp = _load_cupy()
    if cp is None and choice == "cupy":
        raise BackendError("AIMLIB_BACKEND=cupy but CuPy is not usable on this machine "
                           f"(not installed: {install_hint('cupy')}; or no GPU); unset it to run on NumPy")
    return np if cp is None else cp


def module_named(name: str | None):
    """Return the array module called ``name`` (``'numpy'``, ``'cupy'`` or None for the default)."""
    if name is None:
        return default_module()
    if name == "numpy":
        return np
    if name == "cupy":
        cp = _load_cupy()
        if cp is None:
            raise BackendError("backend must be 'numpy' here: 'cupy' was asked for but CuPy is not "
                               f"usable on this machine (not installed: {install_hint('cupy')}; or no GPU)")
        return cp
    raise ValueError(f"backend must be 'numpy' or 'cupy', got {name!r}")


def get_array_module(*arrays):
    """Return ``cupy`` if any argument is a CuPy array, else ``numpy``.

    Non-array arguments (floats, None) are ignored.
    """
    for a in arrays:
        if _is_cupy_array(a):
            return optional_import("cupy", "a CuPy array")
    return np


def _is_cupy_array(x) -> bool:
    """True for a CuPy array (checked by type, so CuPy is never imported needlessly)."""
    return type(x).__module__.split(".")[0] == "cupy"


def backend_name(xp) -> str:
    """``'numpy'`` or ``'cupy'`` for an array module."""
    return "cupy" if xp is not np else "numpy"


def to_host(x):
    """Return ``x`` as a NumPy array (copying from the GPU if needed)."""
    if _is_cupy_array(x):
        return x.get()
    return np.asarray(x)


def to_device(x, xp):
    """Return ``x`` as an array of module ``xp`` (no copy if it already is)."""
    if xp is np:
        return to_host(x)
    return xp.asarray(x)


def to_common(*arrays):
    """Return ``(xp, *arrays)``: the module of :func:`get_array_module` and every argument moved to it.

    A NumPy array next to a CuPy one is copied to the device; ``None`` passes
    through, and with NumPy arguments only nothing is copied.
    """
    xp = get_array_module(*arrays)
    return (xp, *(None if a is None else to_device(a, xp) for a in arrays))


def solve_triangular(xp):
    """``scipy.linalg.solve_triangular`` for module ``xp``: SciPy's for NumPy, ``cupyx.scipy``'s for CuPy.

    Both take ``(a, b, trans=..., lower=...)`` and solve ``a x = b`` (``a^T x = b``
    with ``trans='T'``) for a triangular ``a`` of ``xp``.
    """
    if xp is np:
        return scipy.linalg.solve_triangular
    return optional_import("cupyx.scipy.linalg", "triangular solves on the GPU").solve_triangular


def float_dtype(dtype, default=np.float64):
    """Resolve a working precision: ``float32`` or ``float64`` as a ``numpy.dtype``.

    ``dtype=None`` gives ``default``; anything else must name one of the two.
    """
    if dtype is None:
        return np.dtype(default)
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    return dt
