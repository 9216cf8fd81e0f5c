"""The error curves that the book quotes, held to the digits it prints.

The hardmax state evolution at ``rho = 0.5`` is quoted in the results page's ledger and in
the hardmax chapter: ``T = 2`` at ``alpha = 0.1, 0.4, 1`` (0.745, 0.278, 0.0789) and the
three-token table at ``alpha = 0.1, 0.3, 1`` (0.4757, 0.1415, 0.0189).  A change of the
output function, the prior's MMSE or the fixed-point iteration that moves one of them past
the last printed digit fails here, before a chapter silently quotes a stale number.

The tolerance is half a unit of the last printed digit: the fixed point is solved to
``1e-10`` in ``V`` and the ``T = 3`` table is deterministic (fixed Sobol points), so a
difference that large is a change of the curve, not round-off.
"""
from __future__ import annotations

import pytest

from aimlib.state_evolution import solve

QUOTED = [  # (T, alpha, E_S as printed)
    (2, 0.1, "0.745"), (2, 0.4, "0.278"), (2, 1.0, "0.0789"),
    (3, 0.1, "0.4757"), (3, 0.3, "0.1415"), (3, 1.0, "0.0189"),
]


@pytest.mark.parametrize("T, alpha, printed", QUOTED)
def test_hardmax_error_curve_to_its_printed_digits(T, alpha, printed):
    result = solve(alpha, "hardmax", T=T, rho=0.5)
    assert result.converged
    half_unit = 0.5 * 10.0 ** -(len(printed.split(".")[1]))
    assert abs(result.mmse - float(printed)) <= half_unit, (T, alpha, result.mmse)
