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


def _fake_gpu(monkeypatch, module):
    """Pretend that CuPy imports and sees a GPU (``module``) or does not (``None``)."""
    monkeypatch.setattr(backend, "_CUPY", module)
    monkeypatch.setattr(backend, "_CUPY_CHECKED", True)


@pytest.mark.parametrize("setting", [None, "auto", ""])
def test_default_uses_the_gpu_when_cupy_sees_one(monkeypatch, setting):
    import strict_cupy

    if setting is None:
        monkeypatch.delenv("AIMLIB_BACKEND", raising=False)
    else:
        monkeypatch.setenv("AIMLIB_BACKEND", setting)
    _fake_gpu(monkeypatch, strict_cupy)
    assert backend.default_module() is strict_cupy
    _fake_gpu(monkeypatch, None)
    assert backend.default_module() is np


def test_numpy_is_the_opt_out_even_with_a_gpu(monkeypatch):
    import strict_cupy

    _fake_gpu(monkeypatch, strict_cupy)
    monkeypatch.setenv("AIMLIB_BACKEND", "numpy")
    assert backend.default_module() is np


def test_asking_for_cupy_without_a_gpu_is_a_clear_error(monkeypatch):
    _fake_gpu(monkeypatch, None)
    monkeypatch.setenv("AIMLIB_BACKEND", "cupy")
    with pytest.raises(backend.BackendError, match="CuPy is not usable"):
        backend.default_module()
    with pytest.raises(ValueError, match="backend must be 'numpy' here"):
        backend.module_named("cupy")


def test_bad_backend_names(monkeypatch):
    with pytest.raises(ValueError, match="backend must be 'numpy' or 'cupy'"):
        backend.module_named("torch")
    monkeypatch.setenv("AIMLIB_BACKEND", "jax")
    with pytest.raises(ValueError, match="AIMLIB_BACKEND must be"):
        backend.default_module()
