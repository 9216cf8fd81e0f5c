"""Speed of the two-layer (deep-hardmax, T = 2) state evolution: the F_out table and a 64-point curve.

Target: a 64-point SE curve for two layers in under a minute on one CPU core,
the one-time table of ``(G_1, G_2)`` included (it is built here afresh; for the
residual strengths of ``deep_hardmax.STORED_RESIDUALS`` the package ships it).  Run from the repository root:
``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_deep_attention.py``.
Prints a table and writes ``benchmarks/results/deep_attention.json``.
"""
from __future__ import annotations

import time

from _common import set_blas_threads, write_record

set_blas_threads(1)

import numpy as np  # noqa: E402

from aimlib import state_evolution as se  # noqa: E402
from aimlib.channels import deep_hardmax as dh  # noqa: E402
from aimlib.priors import Centred  # noqa: E402


def main() -> dict:
    ch = dh.DeepAttention(c=0.5)
    rows = {}
    t = time.perf_counter()
    dh.fisher_scaled_direct(ch, 1.0, 1.0)
    rows["G_l by quasi-Monte Carlo, one evaluation (s)"] = time.perf_counter() - t
    t = time.perf_counter()
    dh.build_table(0.5)
    rows["2-d table of G_l, built once per c (s)"] = time.perf_counter() - t
    alphas = np.geomspace(0.02, 3.0, 64)
    t = time.perf_counter()
    c = se.curve(alphas, ch, T=2, rho=(Centred(0.5), Centred(0.5)), tol=1e-10)   # exact for centred teachers
    rows["SE curve, 64 points, centred rho = (0.5, 0.5), after the table (s)"] = time.perf_counter() - t
    rows["SE curve, total iterations"] = int(np.sum(c.iterations))
    rows["64-point curve with the table (s)"] = (rows["2-d table of G_l, built once per c (s)"]
                                                 + rows["SE curve, 64 points, centred rho = (0.5, 0.5), after the table (s)"])
    for key, value in rows.items():
        print(f"{key:62s} {value:10.3f}" if isinstance(value, float) else f"{key:62s} {value:10d}")
    write_record("deep_attention", {"target": "64-point two-layer SE curve < 60 s on one core", "results": rows})
    return rows


if __name__ == "__main__":
    main()
