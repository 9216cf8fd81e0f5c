"""A strict CuPy stand-in for the tests: CuPy's host/device rules, computed on the CPU.

This is a **test double**, not a GPU run.  Installed as ``sys.modules['cupy']``
(fixture ``strict_cupy`` in ``tests/conftest.py``), it lets the CPU-only CI walk
the device code path of :mod:`aimlib` and fail wherever real CuPy (13/14) would
refuse to mix host and device data.  Every "device" array is a
:class:`ndarray` wrapping a private NumPy array; the arithmetic is NumPy's, so
results equal the NumPy backend's (bit for bit in practice).

What it enforces, as CuPy does
------------------------------
* No implicit device-to-host conversion: ``ndarray.__array__`` raises
  ``TypeError`` (so ``np.asarray(dev)``, ``np.array(dev)`` and SciPy
  routines that convert their input all fail on a device array);
  ``float``/``int``/``complex`` work on 0-d arrays only (CuPy >= 13), ``bool``
  on one-element arrays; ``.get()``, :func:`asnumpy` and ``.item()`` are the
  explicit ways back.
* No implicit host-to-device conversion: an operator, ufunc, module function,
  ``__setitem__`` value or ``fill`` that gets a ``numpy.ndarray`` next to a
  device array raises ``TypeError("Unsupported type <class 'numpy.ndarray'>")``.
  Python and NumPy scalars are fine.  A 0-d ``numpy.ndarray`` is refused in
  arithmetic (CuPy's kernels take scalars, not arrays) but accepted in
  comparisons (CuPy unwraps it with ``.item()``, numpy/numpy#12142).  The
  explicit ways in are :func:`asarray`/:func:`array`; NumPy arrays and lists
  are accepted as *indices*, as CuPy does.
* NumPy ufuncs on device arrays dispatch to the device (``np.exp(dev)`` is a
  device array) through ``__array_ufunc__``; NumPy functions dispatch through
  ``__array_function__`` to this module's function of the same name, and fail
  (``TypeError``) where this module has none.  Module functions return 0-d
  device arrays where NumPy returns scalars (CuPy has no scalars).

Where it is stricter or looser than CuPy
----------------------------------------
* Stricter: ufuncs that are not NumPy's own (``scipy.special.ndtr``,
  ``log_ndtr``, ``erf``, ...) raise ``TypeError`` naming the ufunc, although
  CuPy would forward some of them to ``cupyx.scipy.special``: code must move
  to the host explicitly or use its own formula.
* Looser: NumPy functions that CuPy lacks are still provided whenever NumPy
  has them; dtype promotion, the ``out=`` argument, strides and memory
  layout follow NumPy; floating-point warnings are silenced (CuPy never
  warns); there is one fake device and no streams, memory pool, kernels
  or asynchronous execution, and of ``cupyx`` only ``cupyx.scipy.linalg.solve_triangular``
  (:data:`CUPYX_MODULES`).  Timing and memory use say nothing
  about a GPU.
"""
from __future__ import annotations

import sys
import types

import numpy as np
import scipy.linalg

__version__ = "13.0.0+strict-stand-in"

_UNSUPPORTED = "Unsupported type <class 'numpy.ndarray'>"
_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
             "Please use `.get()` to construct a NumPy array explicitly.")
_COMPARISONS = frozenset({"less", "less_equal", "equal", "not_equal", "greater", "greater_equal"})


# ---------------------------------------------------------------------------
# moving values across the (fake) host/device boundary
# ---------------------------------------------------------------------------

def _wrap(value):
    """NumPy results -> device arrays (scalars become 0-d arrays, as in CuPy); containers recursively."""
    if isinstance(value, (np.ndarray, np.generic)):
        out = object.__new__(ndarray)
        out._a = np.asarray(value)
        return out
    if isinstance(value, tuple):  # named tuples too: cupy.linalg.eigh returns a plain tuple
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _unwrap(value, *, comparison=False):
    """Device arrays -> their NumPy data; refuse NumPy arrays (CuPy has no implicit host-to-device copy)."""
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, np.ndarray):
        if comparison and value.ndim == 0:
            return value.item()
        raise TypeError(_UNSUPPORTED)
    if isinstance(value, (tuple, list)):
        items = [_unwrap(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _operand(value, comparison=False):
    """An operand of an operator or ufunc: a device array or a scalar (lists are refused, as by CuPy)."""
    if isinstance(value, (list, tuple)):
        raise TypeError(f"Unsupported type {type(value)}")
    return _unwrap(value, comparison=comparison)


def _call(func, args, kwargs):
    with np.errstate(all="ignore"):  # CuPy never warns about floating-point errors
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))


def _device_function(func, name):
    """``func`` (a NumPy function) lifted to the device: device in, device out, host arrays refused."""
    def wrapper(*args, **kwargs):
        return _call(func, args, kwargs)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = f"Device version of numpy {name} (strict CuPy stand-in)."
    return wrapper


def _ufunc_call(ufunc, method, inputs, kwargs):
    """Apply a NumPy ufunc method to device operands (CuPy's ``__array_ufunc__``)."""
    if getattr(np, ufunc.__name__, None) is not ufunc:
        raise TypeError(
            f"strict CuPy stand-in: {ufunc.__name__!r} is not a NumPy ufunc (e.g. scipy.special) and "
            "is not applied to device arrays; move the data to the host explicitly (.get()) or "
            "write the function with xp operations")
    comparison = ufunc.__name__ in _COMPARISONS
    args = tuple(_operand(x, comparison) for x in inputs)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (() if out is None else (out,))
    kwargs = _unwrap(kwargs)
    if outs:
        kwargs["out"] = tuple(_operand(o) for o in outs)
    with np.errstate(all="ignore"):
        result = getattr(ufunc, method)(*args, **kwargs)
    if outs:  # results were written into the device arrays given as out
        return outs[0] if len(outs) == 1 else outs
    return _wrap(result)


# ---------------------------------------------------------------------------
# the device array
# ---------------------------------------------------------------------------

def _binary(ufunc):
    def op(self, other):
        return _ufunc_call(ufunc, "__call__", (self, other), {})

    def rop(self, other):
        return _ufunc_call(ufunc, "__call__", (other, self), {})

    def iop(self, other):
        _ufunc_call(ufunc, "__call__", (self, other), {"out": (self,)})
        return self

    return op, rop, iop


def _unary(ufunc):
    def op(self):
        return _ufunc_call(ufunc, "__call__", (self,), {})

    return op


def _method(name):
    def method(self, *args, **kwargs):
        return _call(getattr(self._a, name), args, kwargs)

    method.__name__ = name
    return method


def _attribute(name):
    return property(lambda self: _wrap(getattr(self._a, name)))


class ndarray:
    """A "device" array: a private NumPy array behind CuPy's host/device rules."""

    __slots__ = ("_a",)
    __hash__ = None

    def __init__(self, shape, dtype=float):
        self._a = np.empty(shape, dtype=dtype)

    # -- metadata --------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    device = property(lambda self: cuda.Device(0))
    T = _attribute("T")
    mT = _attribute("mT")
    real = _attribute("real")
    imag = _attribute("imag")

    # -- explicit transfers ----------------------------------------------------
    def get(self, stream=None, order="C", out=None, blocking=True):
        """Copy to the host: a NumPy array."""
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        """Copy the NumPy array ``arr`` (same shape and dtype) into this array."""
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype or arr.shape != self.shape:
            raise ValueError(f"shape/dtype mismatch: {arr.shape} {arr.dtype} vs {self.shape} {self.dtype}")
        self._a[...] = arr

    def __array__(self, *args, **kwargs):
        raise TypeError(_IMPLICIT)

    # -- conversions that synchronise in CuPy -----------------------------------
    def _scalar(self, kind):
        if self._a.ndim != 0:
            raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
        return kind(self._a.item())

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        return self._scalar(int)

    def __complex__(self):
        return self._scalar(complex)

    def __bool__(self):
        if self._a.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return bool(self._a.reshape(()).item())

    def item(self, *args):
        return self._a.item(*args)

    def tolist(self):
        return self._a.tolist()

    def __repr__(self):
        return repr(self._a)

    def __str__(self):
        return str(self._a)

    def __format__(self, spec):
        return format(self._a, spec)

    # -- containers ------------------------------------------------------------
    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        self._a[_index(key)] = _operand(value)

    def fill(self, value):
        self._a.fill(_operand(value))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    # -- NumPy protocols: dispatch to the device --------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        namespace = _NAMESPACES.get(func.__module__)
        impl = getattr(namespace, func.__name__, None) if namespace is not None else None
        if impl is None:
            return NotImplemented  # NumPy then raises TypeError, as with CuPy
        return impl(*args, **kwargs)


def _index(key):
    """Indices: device arrays, NumPy arrays and lists are all accepted (CuPy copies them over)."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    return key._a if isinstance(key, ndarray) else key


for _name, _dunder in (("add", "add"), ("subtract", "sub"), ("multiply", "mul"), ("true_divide", "truediv"),
                       ("floor_divide", "floordiv"), ("remainder", "mod"), ("power", "pow"),
                       ("matmul", "matmul"), ("bitwise_and", "and"), ("bitwise_or", "or"),
                       ("bitwise_xor", "xor"), ("left_shift", "lshift"), ("right_shift", "rshift")):
    _op, _rop, _iop = _binary(getattr(np, _name))
    setattr(ndarray, f"__{_dunder}__", _op)
    setattr(ndarray, f"__r{_dunder}__", _rop)
    setattr(ndarray, f"__i{_dunder}__", _iop)
for _name, _dunder in (("less", "lt"), ("less_equal", "le"), ("equal", "eq"), ("not_equal", "ne"),
                       ("greater", "gt"), ("greater_equal", "ge")):
    setattr(ndarray, f"__{_dunder}__", _binary(getattr(np, _name))[0])
for _name, _dunder in (("negative", "neg"), ("positive", "pos"), ("absolute", "abs"), ("invert", "invert")):
    setattr(ndarray, f"__{_dunder}__", _unary(getattr(np, _name)))
for _name in ("reshape", "astype", "sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin",
              "all", "any", "copy", "ravel", "flatten", "transpose", "swapaxes", "squeeze", "diagonal",
              "trace", "dot", "clip", "cumsum", "cumprod", "conj", "round", "nonzero", "sort", "argsort",
              "take", "repeat", "view"):
    setattr(ndarray, _name, _method(_name))
ndarray.__module__ = "cupy"  # what aimlib.backend checks: type(x).__module__ == 'cupy'
ndarray.__qualname__ = "ndarray"


# ---------------------------------------------------------------------------
# module functions
# ---------------------------------------------------------------------------

def asarray(a, dtype=None, order=None, *, blocking=False):
    """The explicit host-to-device copy (no copy for a device array of the right dtype)."""
    if isinstance(a, ndarray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    return array(a, dtype=dtype, order=order)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    """A new device array from host data, Python sequences (possibly of device arrays) or a device array."""
    data = obj._a if isinstance(obj, ndarray) else _host_data(obj)
    return _wrap(np.array(data, dtype=dtype, copy=True, order=order, ndmin=ndmin))


asanyarray = asarray


def _host_data(obj):
    if isinstance(obj, (list, tuple)):
        return [_host_data(v) for v in obj]
    return obj._a if isinstance(obj, ndarray) else obj


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    """The explicit device-to-host copy (NumPy input is returned as a NumPy array)."""
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return np.asarray(a, order=order)


def get_array_module(*args):
    """``cupy`` (this module) if any argument is a device array, else ``numpy``."""
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


def _lift(source, name):
    """A NumPy attribute as this namespace provides it: functions lifted to the device, the rest as is."""
    obj = getattr(source, name)
    if isinstance(obj, np.ufunc):
        def ufunc(*args, **kwargs):
            return _ufunc_call(obj, "__call__", args, kwargs)

        ufunc.__name__ = name
        return ufunc
    if callable(obj) and not isinstance(obj, type):
        return _device_function(obj, name)
    return obj  # dtypes and scalar types (cupy.float64 is numpy.float64), constants, newaxis


def __getattr__(name):  # module-level: cupy.<numpy name>
    if name.startswith("__") or not hasattr(np, name) or name in _NOT_IN_CUPY:
        raise AttributeError(f"module 'cupy' (strict stand-in) has no attribute {name!r}")
    value = _lift(np, name)
    globals()[name] = value
    return value


# NumPy names that must not leak through: host-only machinery and submodules
_NOT_IN_CUPY = frozenset({"errstate", "seterr", "geterr", "vectorize", "frompyfunc", "ctypeslib",
                          "polynomial", "ma", "lib", "char", "rec", "testing", "asarray_chkfinite",
                          "save", "load", "savez", "loadtxt", "genfromtxt"})


linalg = types.SimpleNamespace(
    __name__="cupy.linalg",
    **{n: _lift(np.linalg, n) for n in ("eigh", "eigvalsh", "norm", "solve", "cholesky", "qr", "inv", "svd",
                                        "det", "slogdet")})


class _Generator:
    """``cupy.random.Generator``-like: NumPy's generator, draws returned on the device."""

    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def __getattr__(self, name):
        return _device_function(getattr(self._rng, name), name)


_global_rng = [_Generator()]


def _seed(seed=None):
    _global_rng[0] = _Generator(seed)


def _global_draw(name):
    return lambda *args, **kwargs: getattr(_global_rng[0], name)(*args, **kwargs)


random = types.SimpleNamespace(
    __name__="cupy.random", default_rng=_Generator, Generator=_Generator, seed=_seed,
    **{n: _global_draw(n) for n in ("standard_normal", "normal", "random", "uniform", "integers", "permutation")})


class _Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise ValueError(f"the strict CuPy stand-in has one device, id 0, got {device!r}")

    def synchronize(self):
        pass

    def use(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"<CUDA Device {self.id} (strict CuPy stand-in)>"


_PROPERTIES = {"name": b"strict CuPy stand-in (CPU, not a GPU)", "totalGlobalMem": 0,
               "multiProcessorCount": 0, "major": 0, "minor": 0, "warpSize": 32}


def _device_properties(device):
    _Device(device)  # checks the id
    return dict(_PROPERTIES)


cuda = types.SimpleNamespace(
    __name__="cupy.cuda",
    Device=_Device,
    runtime=types.SimpleNamespace(
        __name__="cupy.cuda.runtime",
        getDeviceCount=lambda: 1,
        getDevice=lambda: 0,
        getDeviceProperties=_device_properties,
        deviceSynchronize=lambda: None,
    ),
)


# cupyx, as far as aimlib uses it: the modules to install in sys.modules under their names
_cupyx_linalg = types.ModuleType("cupyx.scipy.linalg")
_cupyx_linalg.solve_triangular = _device_function(scipy.linalg.solve_triangular, "solve_triangular")
_cupyx_scipy = types.ModuleType("cupyx.scipy")
_cupyx_scipy.linalg = _cupyx_linalg
_cupyx = types.ModuleType("cupyx")
_cupyx.scipy = _cupyx_scipy
CUPYX_MODULES = {"cupyx": _cupyx, "cupyx.scipy": _cupyx_scipy, "cupyx.scipy.linalg": _cupyx_linalg}


# where ndarray.__array_function__ looks for the implementation of numpy.<module>.<name>
_NAMESPACES = {"numpy": sys.modules[__name__], "numpy.linalg": linalg}
