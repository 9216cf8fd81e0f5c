"""GAMP-RIE at large ``d`` on this machine: wall time, peak memory, error, and the products' share of the matmul rate.

One run of softmax ``T = 2``, ``rho = 0.5`` at ``alpha = 0.1`` (default ``d = 1000``,
``n = 100 000`` samples) with regenerated tokens (:class:`aimlib.tokens.TokenStream`:
the stored tokens would take ``8 n T d`` bytes, 1.6 GB at ``d = 1000``), to
convergence with the default stopping rule, timed as a whole (sampling the data set
included) and beside the state evolution.  It also measures, in the same process:

* the machine's own ``numpy.matmul`` rate on the shapes GAMP-RIE multiplies,
  ``(c T, d) @ (d, d)`` with ``c`` the stream's chunk, before and after the run;
* the cost of regenerating the tokens once (one pass over the stream);
* the products' rate, ``4 n T d^2`` flops per iteration over the iteration time
  (token draws, ``g_out`` and the RIE included, so a lower bound), and that rate
  as a fraction of the matmul rate.

Peak memory is the process's maximum resident set (``getrusage``).

Run: ``python benchmarks/bench_amp_large.py [--d 1000] [--dtype float64]``.
Writes ``benchmarks/results/amp_large.json`` (one entry per ``d`` and dtype).
"""
from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
from _common import RESULTS, machine

from aimlib import amp, model, state_evolution
from aimlib.channels import Softmax
from aimlib.tokens import TOKEN_CHUNK

T, RHO, ALPHA = 2, 0.5, 0.1


def matmul_rate(d: int, dtype, repeats: int = 20) -> float:
    """GFLOP/s of ``(TOKEN_CHUNK T, d) @ (d, d)`` in ``dtype``, best of three blocks of ``repeats``."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((TOKEN_CHUNK * T, d)).astype(dtype)
    b = rng.standard_normal((d, d)).astype(dtype)
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = min(best, time.perf_counter() - t0)
    return repeats * 2.0 * a.shape[0] * d * d / best / 1e9


def one_pass(X) -> float:
    """Seconds to regenerate every chunk of the stream ``X`` once."""
    t0 = time.perf_counter()
    for s in range(0, X.shape[0], X.chunk):
        X[s:s + X.chunk]
    return time.perf_counter() - t0


def run(d: int, dtype: str, seed: int) -> dict:
    """The record of one run at dimension ``d`` (module docstring)."""
    ch, dt = Softmax(), np.dtype(dtype)
    rate_before = matmul_rate(d, dt)
    t0 = time.perf_counter()
    data = model.sample_dataset(ALPHA, d, T, RHO, ch, seed=seed, dtype=dt,
                                tokens={"name": "gaussian", "storage": "regenerate"})
    sample_s = time.perf_counter() - t0
    regen_s = one_pass(data.X)
    res = amp.gamp_rie(data.X, data.y, ch, RHO, S=data.S, dtype=dt, on_max_iter="return")
    wall = time.perf_counter() - t0
    rate_after = matmul_rate(d, dt)
    per_iter = res.seconds / res.iterations
    products = 4.0 * data.n * T * d * d / per_iter / 1e9
    rate = (rate_before + rate_after) / 2
    return dict(d=d, n=int(data.n), T=T, rho=RHO, alpha=ALPHA, dtype=dtype, seed=seed, tokens_storage="regenerate",
                wall_seconds=wall, sample_seconds=sample_s, gamp_seconds=res.seconds, iterations=res.iterations,
                seconds_per_iteration=per_iter, regenerate_pass_seconds=regen_s,
                converged=bool(res.converged), reason=res.reason, mmse=float(res.mmse), m=float(res.m),
                se_mmse=state_evolution.solve(ALPHA, ch, T=T, rho=RHO).mmse,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
                stored_tokens_mb=data.n * T * d * dt.itemsize / 1e6,
                matmul_gflops=[rate_before, rate_after], products_gflops=products,
                products_fraction_of_matmul=products / rate)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[1000])
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "amp_large.json"))
    args = p.parse_args(argv)
    out = args.out
    try:
        record = json.loads(open(out).read())
    except FileNotFoundError:
        record = {"benchmark": "bench_amp_large", "runs": []}
    for d in args.d:
        e = {**machine(), "command": f"python benchmarks/bench_amp_large.py --d {d} --dtype {args.dtype} "
             f"--seed {args.seed}", **run(d, args.dtype, args.seed)}
        record["runs"] = [r for r in record["runs"] if (r["d"], r["dtype"]) != (d, args.dtype)] + [e]
        with open(out, "w") as f:
            f.write(json.dumps(record, indent=2) + "\n")
        print(f"d={d} n={e['n']} {args.dtype}: {e['wall_seconds']:.0f} s in all ({e['iterations']} iterations, "
              f"{e['seconds_per_iteration']:.1f} s each), peak {e['peak_rss_mb']:.0f} MB, error {e['mmse']:.4f} "
              f"(SE {e['se_mmse']:.4f}), products {e['products_gflops']:.1f} GFLOP/s = "
              f"{100 * e['products_fraction_of_matmul']:.0f} % of matmul", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
