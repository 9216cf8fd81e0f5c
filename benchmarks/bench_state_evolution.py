"""Benchmark: state-evolution curves (one core).

Times 256-point softmax curves (T = 2, rho = 0.5 and 0.1; an exact root find per
point, warm-started) and a 128-point hardmax curve (T = 2, rho = 0.5, iterated
through ``Hardmax.fisher``).
Prints a table and writes ``benchmarks/results/state_evolution.json``.

Run: ``.venv/bin/python benchmarks/bench_state_evolution.py``
"""
from __future__ import annotations

import time

from _common import set_blas_threads, write_record

set_blas_threads(1)  # before NumPy is imported

import numpy as np  # noqa: E402

from aimlib import rmt  # noqa: E402
from aimlib import state_evolution as se  # noqa: E402
from aimlib.priors import wishart  # noqa: E402


def clear_caches():
    """Cold timings: empty the memo caches of the prior MMSE (aimlib.rmt) and of the Wishart prior's slope."""
    rmt.clear_caches()
    wishart.clear_caches()


def timed(fn, repeat):
    """Best and median wall time over ``repeat`` cold runs (caches cleared before each)."""
    times = []
    for _ in range(repeat):
        clear_caches()
        t = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t)
    return res, min(times), float(np.median(times))


def main():
    rows = []
    alphas = np.linspace(1e-4, 0.2, 256)
    se.curve(alphas[:3], T=2, rho=0.5)  # imports
    res, best, med = timed(lambda: se.curve(alphas, T=2, rho=0.5), 5)
    rows.append({"case": "softmax T=2 rho=0.5, 256 points, exact root finds", "points": 256,
                 "best_s": best, "median_s": med, "mmse_evaluations": res.evaluations})
    res3, best, med = timed(lambda: se.curve(alphas, T=2, rho=0.1), 3)
    rows.append({"case": "softmax T=2 rho=0.1, 256 points, exact root finds", "points": 256,
                 "best_s": best, "median_s": med, "mmse_evaluations": res3.evaluations})
    ha = np.geomspace(1e-3, 2.0, 128)
    res4, best, med = timed(lambda: se.curve(ha, "hardmax", T=2, rho=0.5), 1)
    rows.append({"case": "hardmax T=2 rho=0.5, 128 points, iterated (warm starts)", "points": 128,
                 "best_s": best, "median_s": med, "se_iterations": int(res4.iterations.sum())})
    print("cold runs (memo caches cleared), one thread")
    print(f"{'case':58s} {'best [s]':>9s} {'median [s]':>10s}  work")
    for r in rows:
        work = r.get("mmse_evaluations", r.get("se_iterations"))
        print(f"{r['case']:58s} {r['best_s']:9.4f} {r['median_s']:10.4f}  {work}")
    write_record("state_evolution", {"results": rows})


if __name__ == "__main__":
    main()
