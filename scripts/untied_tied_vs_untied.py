"""Tied against untied key and query: the noiseless softmax's estimation error along alpha.

Writes ``book/data/untied_tied_vs_untied.csv`` (chapter "Untied key and query: algorithms and the exact error",
section "Untied key and query"): one row per ``(T, rho, alpha)``, the tied error
``E_tied`` of the exact state evolution (:func:`aimlib.state_evolution.curve`) and the
untied error ``E_untied`` of its isotropic closure ``V = mmse_rect(V / ((T^2 - T) alpha))``
(:func:`aimlib.untied.curve_untied`), ``alpha`` on 80 points of ``[0.005, 0.4]``.
A few seconds::

    python scripts/untied_tied_vs_untied.py [--out book/data/untied_tied_vs_untied.csv]
"""
from __future__ import annotations

import numpy as np

from aimlib.state_evolution import curve
from aimlib.untied import curve_untied
from _rows import data_parser, write_rows

COMMAND = "python scripts/untied_tied_vs_untied.py"
RHOS, TS = (0.2, 0.5), (2, 3)
ALPHAS = np.linspace(0.005, 0.4, 80)
COLUMNS = ["T", "rho", "alpha", "E_tied", "E_untied"]


def rows(rhos=RHOS, Ts=TS, alphas=ALPHAS):
    """One dict per ``(rho, T, alpha)``, numbers to 10 significant digits."""
    for rho in rhos:
        for T in Ts:
            tied, untied = curve(alphas, "softmax", T=T, rho=rho).mmse, curve_untied(alphas, T, rho)
            for values in zip(alphas, tied, untied):
                yield dict(zip(COLUMNS, [T, rho, *(f"{x:.10g}" for x in values)]))


def main(argv=None) -> int:
    parser = data_parser(__doc__, "untied_tied_vs_untied.csv")
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows())


if __name__ == "__main__":
    raise SystemExit(main())
