"""Speed of the random-matrix toolkit (``aimlib.rmt``).

Cases
-----
* ``mmse(delta, rho)``: mean time per evaluation over 200 values of ``delta``
  log-spaced in ``[1e-8, 1e8]`` (fresh values: the internal cache is cleared
  first), for several ``rho``.  Target: <= 1 ms per evaluation.
* ``rie(Y, delta, rho)`` at ``d = 500`` and ``d = 1000`` (eigendecomposition,
  eigenvalue map, reassembly), median of 3 runs, with the empirical error next
  to ``mmse``.

The table is printed and written to ``benchmarks/results/rmt.json``.

Run: ``python benchmarks/bench_rmt.py``.
"""
from __future__ import annotations

import time

import numpy as np

from _common import write_record
from aimlib import model, rmt


def bench_mmse(rho: float, n: int = 200) -> dict:
    deltas = np.geomspace(1e-8, 1e8, n)
    rmt.clear_caches()
    t0 = time.perf_counter()
    for d in deltas:
        rmt.mmse(float(d), rho)
    per = (time.perf_counter() - t0) / n
    return {"rho": rho, "n_evals": n, "ms_per_eval": 1e3 * per}


def bench_rie(d: int, rho: float = 0.5, delta: float = 0.5, repeats: int = 3) -> dict:
    S, Y = rmt.sample_denoising(d, delta, rho, seed=0)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        S_hat = rmt.rie(Y, delta, rho)
        times.append(time.perf_counter() - t0)
    return {"d": d, "rho": rho, "delta": delta, "seconds_median": float(np.median(times)),
            "error": model.estimation_error(S_hat, S), "mmse": rmt.mmse(delta, rho)}


def main() -> None:
    mm = [bench_mmse(rho) for rho in (0.001, 0.1, 0.5, 1.0, 2.0, 1000.0)]
    rie = [bench_rie(d) for d in (500, 1000)]
    print(f"{'rho':>8} {'ms / mmse eval':>16}")
    for r in mm:
        print(f"{r['rho']:>8g} {r['ms_per_eval']:>16.3f}")
    print(f"\n{'d':>6} {'rie seconds':>12} {'error':>10} {'mmse':>10}")
    for r in rie:
        print(f"{r['d']:>6} {r['seconds_median']:>12.3f} {r['error']:>10.4f} {r['mmse']:>10.4f}")
    write_record("rmt", {
        "target_ms_per_mmse": 1.0,
        "note": "wall-clock times on a shared machine; see load_average",
        "mmse": mm,
        "rie": rie,
    })


if __name__ == "__main__":
    main()
