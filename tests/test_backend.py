"""The backend module: one code path, host arrays at the boundary."""
import numpy as np
import pytest

from aimlib import backend


def test_numpy_arrays_map_to_numpy():
    assert backend.get_array_module(np.zeros(3), 1.0, None) is np


def test_to_host_returns_numpy(xp):
    a = xp.arange(4.0)
    h = backend.to_host(a)
    assert isinstance(h, np.ndarray) and h.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_to_device_round_trip(xp):
    a = backend.to_device(np.arange(3.0), xp)
    assert backend.get_array_module(a) is xp
    assert backend.backend_name(xp) in ("numpy", "cupy")


def test_to_common_brings_host_arrays_next_to_device_ones(xp):
    host = np.arange(2.0)
    mod, a, b, none = backend.to_common(host, xp.ones(2), None)
    assert mod is xp and none is None
    assert backend.get_array_module(a) is xp and backend.to_host(a).tolist() == [0.0, 1.0]
    assert backend.get_array_module(b) is xp
    assert backend.to_common(host)[1] is host  # NumPy only: nothing is copied


def test_forcing_numpy(monkeypatch):
    monkeypatch.setenv("AIMLIB_BACKEND", "numpy")
    assert backend.default_module() is np


def test_bad_backend_names(monkeypatch):
    with pytest.raises(ValueError, match="backend must be 'numpy' or 'cupy'"):
        backend.module_named("torch")
    monkeypatch.setenv("AIMLIB_BACKEND", "jax")
    with pytest.raises(ValueError, match="AIMLIB_BACKEND must be"):
        backend.default_module()
