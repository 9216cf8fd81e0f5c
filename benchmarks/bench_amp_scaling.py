"""Time per GAMP-RIE iteration against the dimension ``d``, on NumPy or CuPy.

Runs a fixed number of iterations (no early stop) of softmax ``T = 2``,
``rho = 0.5`` at ``alpha = 0.1`` for each ``d``, and reports the seconds per
iteration next to the cost model of the book's performance chapter,

    flops per iteration ~ 4 n T d^2 (forward X S X^T and backward X^T G X)
                        + 11 d^3    (eigendecomposition and reconstruction in the RIE),

with ``n = alpha d^2``, hence the achieved FLOP/s.  With ``--converge`` each
``d`` is also run to convergence and its error is reported against the state
evolution (for the largest-``d`` question on a GPU).

Run: ``python benchmarks/bench_amp_scaling.py [--backend cupy] [--d 100 200 400]``
Writes ``benchmarks/results/amp_scaling_<backend>.json``.
"""
from __future__ import annotations

import argparse
import platform
import time
import warnings

from _common import write_record
from aimlib import amp, model, state_evolution
from aimlib.backend import backend_name, module_named
from aimlib.channels import Softmax


def time_one(d: int, backend: str, iterations: int, converge: bool, alpha: float = 0.1,
             memory_mb: float | None = None) -> dict:
    """Sample one data set at dimension ``d`` and time ``iterations`` AMP steps on it.

    ``memory_mb`` (MiB), when given, is both the data set's memory guard and
    GAMP-RIE's work budget per chunk (larger chunks, fewer kernel launches).
    """
    T, rho, ch = 2, 0.5, Softmax()
    budget = {} if memory_mb is None else {"memory_mb": memory_mb}
    data = model.sample_dataset(alpha, d, T, rho, ch, seed=0, backend=backend, **budget)
    run = dict(S=data.S, damping=0.5, **budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fixed_steps = dict(tol=1e-300, min_iter=1, on_max_iter="return", **run)
        amp.gamp_rie(data.X, data.y, ch, rho, max_iter=1, **fixed_steps)  # warm-up
        t0 = time.perf_counter()
        fixed = amp.gamp_rie(data.X, data.y, ch, rho, max_iter=iterations, **fixed_steps)
        seconds = time.perf_counter() - t0
        row = dict(d=d, n=int(data.n), T=T, alpha=alpha, backend=backend, iterations=fixed.iterations,
                   seconds_per_iteration=seconds / fixed.iterations,
                   gflops_per_second=amp.flops_per_iteration(data.n, T, d) / (seconds / fixed.iterations) / 1e9)
        if converge:
            t0 = time.perf_counter()
            res = amp.gamp_rie(data.X, data.y, ch, rho, max_iter=300, on_max_iter="return", **run)
            row.update(converged=bool(res.converged), converge_iterations=res.iterations,
                       converge_seconds=time.perf_counter() - t0, mmse=res.mmse,
                       se_mmse=state_evolution.solve(alpha, ch, T=T, rho=rho).mmse)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["numpy", "cupy"], default="numpy")
    p.add_argument("--d", type=int, nargs="+", default=[50, 100, 200, 300, 400])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--converge", action="store_true", help="also run each d to convergence")
    p.add_argument("--memory-mb", type=float, default=None,
                   help="memory guard of the data set and GAMP-RIE's chunk budget, MiB (a GPU can take more)")
    p.add_argument("--out", default=None, help="JSON file (default: results/amp_scaling_<backend>.json)")
    args = p.parse_args(argv)
    xp = module_named(args.backend)
    device = platform.processor() or platform.machine()
    if backend_name(xp) == "cupy":
        device = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = []
    print(f"{'d':>6} {'n':>9} {'s/iter':>9} {'GFLOP/s':>8} {'mmse':>7} {'SE':>7}")
    for d in args.d:
        r = time_one(d, args.backend, args.iterations, args.converge, memory_mb=args.memory_mb)
        rows.append(r)
        print(f"{r['d']:>6} {r['n']:>9} {r['seconds_per_iteration']:>9.4f} {r['gflops_per_second']:>8.1f} "
              f"{r.get('mmse', float('nan')):>7.4f} {r.get('se_mmse', float('nan')):>7.4f}", flush=True)
        write_record(f"amp_scaling_{args.backend}",   # after every d: a later failure keeps these rows
                     dict(device=device, cost_model="4 n T d^2 + 11 d^3 flops per iteration",
                          memory_mb=args.memory_mb, rows=rows), path=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
