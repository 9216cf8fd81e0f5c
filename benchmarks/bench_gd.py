"""Speed of gradient descent (aimlib.gd): d = 200, T = 2, alpha = 0.1, 1000 Adam steps.

Target: under 30 s per run (one student) on a CPU.  Prints a table and writes
benchmarks/results/gd.json (the machine record of ``_common.py`` and the numbers).

    python benchmarks/bench_gd.py            # the target case, float32 and float64, k = 1 and 4
    python benchmarks/bench_gd.py --quick    # smaller d, for a smoke test

The thread count of the BLAS matters a lot on a shared machine: with more
BLAS threads than free cores, OpenBLAS can be many times slower (set
OPENBLAS_NUM_THREADS=1 on an oversubscribed machine).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _common import RESULTS, write_record

from aimlib import gd


def one(d, T, alpha, restarts, dtype, steps, backend=None):
    t0 = time.perf_counter()
    out = gd.run_gd(T, 0.5, alpha, d, 0, restarts=restarts, dtype=dtype, steps=steps,
                    backend=backend, record_every=10, tol=0.0, return_result=True)
    total = time.perf_counter() - t0
    res = out.pop("result")
    return {"d": d, "T": T, "alpha": alpha, "n": out["n"], "rank": out["rank"], "restarts": restarts,
            "dtype": np.dtype(dtype).name, "steps": steps, "backend": backend or "default",
            "train_seconds": res.seconds, "total_seconds": total,
            "seconds_per_restart": total / restarts,
            "ms_per_step": 1e3 * res.seconds / steps,
            "mmse_single_mean": float(np.mean(out["mmse_single"])),
            "mmse_averaged": out["mmse_averaged"],
            "final_train_loss": float(np.max(out["train_loss"]))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="d = 60 instead of 200")
    p.add_argument("--backend", default=None, choices=["numpy", "cupy"])
    p.add_argument("--out", default=str(RESULTS / "gd.json"))
    a = p.parse_args(argv)
    d = 60 if a.quick else 200
    cases = [(1, np.float32), (1, np.float64), (4, np.float32)]
    rows = []
    print(f"{'d':>4} {'T':>2} {'alpha':>6} {'n':>6} {'k':>3} {'dtype':>8} {'ms/step':>8} "
          f"{'total s':>8} {'s/run':>7} {'E single':>9} {'E avg':>7}")
    for k, dt in cases:
        r = one(d, 2, 0.1, k, dt, 1000, a.backend)
        rows.append(r)
        print(f"{r['d']:>4} {r['T']:>2} {r['alpha']:>6.3f} {r['n']:>6} {k:>3} {r['dtype']:>8} "
              f"{r['ms_per_step']:>8.1f} {r['total_seconds']:>8.1f} {r['seconds_per_restart']:>7.1f} "
              f"{r['mmse_single_mean']:>9.4f} {r['mmse_averaged']:>7.4f}", flush=True)
    path = write_record("gd", {"target": "d=200, T=2, alpha=0.1, 1000 Adam steps: < 30 s per run on CPU",
                               "results": rows}, path=a.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
