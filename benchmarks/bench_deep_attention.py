"""Speed of the two-layer (deep-hardmax, T = 2) state evolution: the output tables and 64-point curves.

Targets: a 64-point SE curve for two layers in under a minute on one CPU core, for either
family of teachers (centred: the exact SE; Wishart: GAMP-RIE's separable SE), and a 32-point
curve for three layers (GAMP-RIE's separable SE) in under five minutes, with the tables the
package ships (``deep_patterns.STORED_RESIDUALS``, ``deep_histories.STORED_RESIDUALS3``);
building the two-layer tables for another ``c`` is a one-time cost, measured here too.  Run from the repository root:
``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_deep_attention.py``.
Prints a table and writes ``benchmarks/results/deep_attention.json``.
"""
from __future__ import annotations

import time

from _common import set_blas_threads, write_record

set_blas_threads(1)

import numpy as np  # noqa: E402

from aimlib import state_evolution as se  # noqa: E402
from aimlib.channels import DeepAttention, deep_histories as dh3, deep_patterns as dp  # noqa: E402
from aimlib.priors import Centred  # noqa: E402


def _timed(rows, key, fn):
    t = time.perf_counter()
    out = fn()
    rows[key] = time.perf_counter() - t
    return out


def main() -> dict:
    ch = DeepAttention(c=0.5)
    rows = {}
    _timed(rows, "G (2 x 2) by quasi-Monte Carlo, one evaluation (s)",
           lambda: dp.fisher_matrix_direct(0.5, 1.0, 1.0, 0.5))
    _timed(rows, "oracle G by quasi-Monte Carlo, one evaluation (s)", lambda: dp.oracle_fisher_scaled(0.5, 1, 1.0, 0.5))
    _timed(rows, "centred table for a new c, built once (s)", lambda: dp.build_centred(0.7))
    _timed(rows, "shared (Wishart) table for a new c, built once (s)", lambda: dp.build_shared(0.7))
    alphas = np.geomspace(0.02, 3.0, 64)
    for name, rho in (("centred", (Centred(0.5), Centred(0.5))), ("Wishart", (0.5, 0.5))):
        c = _timed(rows, f"SE curve, 64 points, {name} rho = (0.5, 0.5) (s)",
                   lambda: se.curve(alphas, ch, T=2, rho=rho, tol=1e-10))
        rows[f"SE curve, {name}, total iterations"] = int(np.sum(c.iterations))
    three = _timed(rows, "SE curve, three layers, 32 points, centred rho = 0.5 (s)",
                   lambda: se.curve(np.geomspace(0.05, 3.0, 32), DeepAttention(c=0.5, layers=3), T=2,
                                    rho=(Centred(0.5),) * 3, tol=1e-10))
    rows["SE curve, three layers, total iterations"] = int(np.sum(three.iterations))
    _timed(rows, "G (3 x 3) of three layers by quasi-Monte Carlo, one evaluation (s)",
           lambda: dh3.fisher_matrix3_direct(0.5, 1.0, 1.0, 1.0))
    _timed(rows, "oracle SE, both layers, 8 points (s)",
           lambda: [se.oracle_fixed_point(a, ch, l, T=2, rho=(0.5, 0.5), tol=1e-8)
                    for a in alphas[::8] for l in (1, 2)])
    for key, value in rows.items():
        print(f"{key:62s} {value:10.3f}" if isinstance(value, float) else f"{key:62s} {value:10d}")
    write_record("deep_attention", {"target": "64-point two-layer SE curve < 60 s on one core, either family; "
                                              "32-point three-layer curve < 300 s",
                                    "results": rows})
    return rows


if __name__ == "__main__":
    main()
