"""``import cupyx`` under ``AIMLIB_TEST_BACKEND=strict-cupy``: the stand-in's few ``cupyx`` routines.

Beside ``tests/stand_in/cupy``: the modules of ``strict_cupy.CUPYX_MODULES``
take the place of ``cupyx`` and its submodules.
"""
import sys

import strict_cupy

sys.modules.update(strict_cupy.CUPYX_MODULES)
