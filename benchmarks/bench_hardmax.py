"""Speed of the hardmax state evolution: F_out and a 128-point SE curve at rho = 0.5 (T = 2);
the shipped F_out table and a 64-point SE curve at rho = 0.5 (T = 3), on one core.

Run from the repository root: ``python benchmarks/bench_hardmax.py``.
Prints a table and writes ``benchmarks/results/hardmax.json``.
"""
from __future__ import annotations

import time

import numpy as np

from _common import write_record
from aimlib.channels import hardmax as hm, hardmax_polytope as hp
from aimlib import state_evolution as se


def _best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _t3(rows: dict) -> dict:
    """The T = 3 rows: table load, F_out per call, a 64-point SE curve; returns some of its errors."""
    hp.load_table.cache_clear()
    t = time.perf_counter()
    hp.load_table()
    rows["T=3 F_out table load (s)"] = time.perf_counter() - t
    lam = np.logspace(-3, 2.9, 1000)
    per_call = _best(lambda: [hp.fisher(l / (1 + l), 1.0, 3) for l in lam]) / lam.size
    rows["T=3 F_out table, per call (us)"] = per_call * 1e6
    alphas = np.logspace(np.log10(0.02), np.log10(3.0), 64)
    t = time.perf_counter()
    c = se.curve(alphas, "hardmax", rho=0.5, T=3, tol=1e-10)
    rows["T=3 SE curve, 64 points, rho=0.5 (s)"] = time.perf_counter() - t
    rows["T=3 SE curve, total iterations"] = int(np.sum(c.iterations))
    return {f"{a:.4g}": float(m) for a, m in zip(alphas[::8], c.mmse[::8])}


def main() -> dict:
    rows = {}
    t = time.perf_counter()
    hm.cheb_coefficients.cache_clear()
    hm.cheb_coefficients()
    rows["F_out table build (s)"] = time.perf_counter() - t
    lam = np.logspace(-3, 4, 1000)
    per_call = _best(lambda: [hm.fisher(l / (1 + l), 1.0) for l in lam]) / lam.size
    rows["F_out interpolant, per call (us)"] = per_call * 1e6
    rows["F_out direct quadrature, per call (ms)"] = _best(lambda: [hm.fisher(0.5, 1.5, exact=True)
                                                                   for _ in range(5)]) / 5 * 1e3
    alphas = np.logspace(np.log10(0.02), 1.0, 128)
    t = time.perf_counter()
    c = se.curve(alphas, "hardmax", rho=0.5, tol=1e-10)
    rows["SE curve, 128 points, rho=0.5 (s)"] = time.perf_counter() - t
    rows["SE curve, total iterations"] = int(np.sum(c.iterations))
    result = {
        "results": rows,
        "E_S(alpha) at rho=0.5": {f"{a:.4g}": float(m) for a, m in zip(alphas[::16], c.mmse[::16])},
        "T=3 E_S(alpha) at rho=0.5": _t3(rows),
    }
    width = max(len(k) for k in rows)
    print(f"{'quantity':<{width}}  value")
    for k, val in rows.items():
        print(f"{k:<{width}}  {val:.4g}" if isinstance(val, float) else f"{k:<{width}}  {val}")
    write_record("hardmax", result)
    return result


if __name__ == "__main__":
    main()
