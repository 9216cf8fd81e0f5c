"""``import cupy`` under ``AIMLIB_TEST_BACKEND=strict-cupy``: the strict CPU stand-in.

``tests/conftest.py`` puts ``tests/stand_in`` and ``tests`` first on the module
path of the test process and of the processes it starts (the CLI, sweep
workers), so every ``import cupy`` there yields ``tests/strict_cupy.py``.
"""
import sys

import strict_cupy

sys.modules[__name__] = strict_cupy
