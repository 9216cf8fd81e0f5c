"""Input checks shared by the modules of :mod:`aimlib.rmt`."""
from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..backend import to_host


def check_delta(delta) -> float:
    """The noise variance ``Delta`` as a float in ``aimlib._validate.DELTA_RANGE``."""
    return v.in_range("delta", v.positive("delta", delta), *v.DELTA_RANGE)


def real_points(name, x) -> np.ndarray:
    """``x`` (numbers or a NumPy/CuPy array) as a host float array of finite real values."""
    x = to_host(x)
    if x.dtype == object or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"{name} must be real (numbers or an array of real numbers), got dtype {x.dtype}")
    x = x.astype(float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
    return x
