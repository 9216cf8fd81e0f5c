"""Write the shipped Chebyshev coefficients of the noisy softmax's ``1/F_out`` into ``aimlib/data``.

Run from the repository root: ``python scripts/make_softmax_noisy_tables.py``
(``softmax_noisy_tables.npz``, one :func:`aimlib.channels.softmax_noisy.tabulate` per
setting of :data:`SETTINGS`, a few seconds each).  See ``aimlib/data/softmax_noisy_tables.md``.
"""
import argparse

import numpy as np

from aimlib.channels import softmax_noisy as ns

#: ``(Q0, beta, noise)``: the first curve of the noise panel (``rho = 0.5``, ``beta = 1``,
#: ``noise = 0.01``, ``aimlib.widgets.noise_panel``'s defaults)
SETTINGS = ((1.5, 1.0, 0.01),)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    coef = np.array([ns.tabulate(*key) for key in SETTINGS])
    np.savez(ns.TABLES, keys=np.array(SETTINGS), coef=coef,
             settings=np.array([ns.SOBOL_LOG2, ns.CHEB_DEG, ns.K_ETA]))
    print("wrote", ns.TABLES)
