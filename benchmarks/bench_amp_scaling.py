"""Time per GAMP-RIE iteration against the dimension ``d``, on NumPy or CuPy.

Runs a fixed number of iterations (no early stop) of softmax ``T = 2``,
``rho = 0.5`` at ``alpha = 0.1`` for each ``d``, and reports the seconds per
iteration next to the cost model of the book's performance chapter,

    flops per iteration ~ 4 n T d^2 (forward X S X^T and backward X^T G X)
                        + 11 d^3    (eigendecomposition and reconstruction in the RIE),

with ``n = alpha d^2``, hence the achieved FLOP/s.  With ``--converge`` each
``d`` is also run to convergence and its error is reported against the state
evolution (for the largest-``d`` question on a GPU).

With ``--peak-memory`` it instead runs the command line, ``python -m aimlib amp
--channel softmax --T 2 --rho 0.5 --alpha 0.1 --d D --tokens-storage S``, once per
``--d`` and ``--tokens-storage``, under ``/usr/bin/time -v``, and records its peak
resident memory, error and wall time beside the state evolution, under the key
``peak_memory`` of the same record (each entry with its own date; the timing rows
are kept).

Run: ``python benchmarks/bench_amp_scaling.py [--backend cupy] [--d 100 200 400]``, or
``OMP_NUM_THREADS=1 python benchmarks/bench_amp_scaling.py --peak-memory --d 600 --tokens-storage regenerate``.
Writes ``benchmarks/results/amp_scaling_<backend>.json``.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import platform
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

from _common import RESULTS, machine, write_record
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


def peak_memory(d: int, storage: str, backend: str, alpha: float = 0.1) -> dict:
    """One ``python -m aimlib amp`` run under ``/usr/bin/time -v``: its peak resident memory, row and SE."""
    cmd = [sys.executable, "-m", "aimlib", "amp", "--channel", "softmax", "--T", "2", "--rho", "0.5",
           "--alpha", str(alpha), "--d", str(d), "--backend", backend, "--tokens-storage", storage,
           "--on-max-iter", "return"]
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} failed: {proc.stderr[-2000:]}")
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    row = next(csv.DictReader(io.StringIO(proc.stdout)))
    n = round(alpha * d * d)
    return dict(machine(), command=" ".join(["python", *cmd[1:]]), d=d, n=n, tokens_storage=storage,
                peak_rss_mb=kib * 1024 / 1e6, stored_tokens_mb=n * 2 * d * 8 / 1e6, mmse=float(row["mmse"]),
                iterations=int(row["iterations"]), converged=row["converged"] == "1",
                gamp_seconds=float(row["seconds"]),
                se_mmse=state_evolution.solve(alpha, Softmax(), T=2, rho=0.5).mmse)


def record_peak_memory(args) -> int:
    """Run :func:`peak_memory` for every ``--d`` and ``--tokens-storage``; merge into the record's ``peak_memory``."""
    out = Path(args.out) if args.out else RESULTS / f"amp_scaling_{args.backend}.json"
    record = json.loads(out.read_text()) if out.exists() else {"benchmark": "bench_amp_scaling"}
    entries = [e for e in record.get("peak_memory", [])
               if (e["d"], e["tokens_storage"]) not in {(d, s) for d in args.d for s in args.tokens_storage}]
    print(f"{'d':>6} {'storage':>10} {'peak MB':>8} {'tokens MB':>9} {'mmse':>7} {'SE':>7} {'s':>7}")
    for d in args.d:
        for storage in args.tokens_storage:
            e = peak_memory(d, storage, args.backend)
            entries.append(e)
            print(f"{d:>6} {storage:>10} {e['peak_rss_mb']:>8.0f} {e['stored_tokens_mb']:>9.0f} {e['mmse']:>7.4f} "
                  f"{e['se_mmse']:>7.4f} {e['gamp_seconds']:>7.0f}", flush=True)
    record["peak_memory"] = entries
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["numpy", "cupy"], default="numpy")
    p.add_argument("--d", type=int, nargs="+", default=[50, 100, 200, 300, 400])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--converge", action="store_true", help="also run each d to convergence")
    p.add_argument("--memory-mb", type=float, default=None,
                   help="memory guard of the data set and GAMP-RIE's chunk budget, MiB (a GPU can take more)")
    p.add_argument("--out", default=None, help="JSON file (default: results/amp_scaling_<backend>.json)")
    p.add_argument("--peak-memory", action="store_true",
                   help="run the command line under /usr/bin/time -v and record its peak memory (see above)")
    p.add_argument("--tokens-storage", nargs="+", choices=["store", "regenerate"], default=["regenerate"],
                   help="with --peak-memory: how the tokens are held (default: regenerate)")
    args = p.parse_args(argv)
    if args.peak_memory:
        return record_peak_memory(args)
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
