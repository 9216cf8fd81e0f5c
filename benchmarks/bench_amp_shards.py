"""Sharded GAMP-RIE against one process: seconds per iteration and peak memory per process.

For each ``d`` (softmax ``T = 2``, ``rho = 0.5``, ``alpha = 0.1``, regenerated or stored
tokens) it runs a fixed number of GAMP-RIE iterations (no early stop) three ways, each in
a fresh process so that peak memories do not mix:

* ``one``: one process, ``--threads`` BLAS threads;
* ``sharded``: the driver and a ``LocalCluster`` of ``--workers`` workers of one BLAS
  thread each (:mod:`aimlib.amp.shards`), one shard per worker.

It records the seconds per iteration, the peak resident memory of the driver and of
each worker (``getrusage``), and the largest difference of the estimates between the
two ways (round-off: the sums are added in another order).

Run: ``python benchmarks/bench_amp_shards.py [--d 300 450 600] [--tokens-storage regenerate]``.
Writes ``benchmarks/results/amp_shards.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import BLAS_THREAD_VARIABLES, RESULTS, machine

T, RHO, ALPHA = 2, 0.5, 0.1


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def child(d: int, way: str, workers: int, iterations: int, storage: str, out: str) -> None:
    """One measurement, in this (fresh) process; writes its row and the estimate to ``out``."""
    import numpy as np

    from aimlib import amp, model
    from aimlib.channels import Softmax
    ch = Softmax()
    data = model.sample_dataset(ALPHA, d, T, RHO, ch, seed=0, tokens={"name": "gaussian", "storage": storage})
    fixed = dict(S=data.S, max_iter=iterations, tol=1e-300, min_iter=1, on_max_iter="return")
    worker_mb = []
    if way == "sharded":
        from aimlib.cluster import dask_client
        with dask_client("local", workers, 1) as client:
            t0 = time.perf_counter()
            res = amp.gamp_rie(data.X, data.y, ch, RHO, scheduler=client, **fixed)
            seconds = time.perf_counter() - t0
            worker_mb = sorted(client.run(_peak_mb).values())
    else:
        t0 = time.perf_counter()
        res = amp.gamp_rie(data.X, data.y, ch, RHO, **fixed)
        seconds = time.perf_counter() - t0
    np.save(out + ".npy", res.S_hat)
    row = dict(d=d, n=int(data.n), way=way, workers=workers if way == "sharded" else 0, tokens_storage=storage,
               iterations=res.iterations, seconds=seconds, seconds_per_iteration=seconds / res.iterations,
               driver_peak_mb=_peak_mb(), worker_peak_mb=worker_mb, mmse=float(res.mmse))
    Path(out).write_text(json.dumps(row))


def measure(d: int, way: str, args, tmp: Path) -> dict:
    """Run :func:`child` in a fresh interpreter and read its row."""
    out = str(tmp / f"{way}_{d}.json")
    threads = args.threads if way == "one" else 1
    cmd = [sys.executable, __file__, "--child", way, "--d", str(d), "--workers", str(args.workers),
           "--iterations", str(args.iterations), "--tokens-storage", args.tokens_storage, "--out", out]
    env = {**os.environ, **{k: str(threads) for k in BLAS_THREAD_VARIABLES}}
    subprocess.run(cmd, check=True, env=env, cwd=Path(__file__).parent)
    return json.loads(Path(out).read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[300, 450, 600])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="BLAS threads of the single process (default 2)")
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--tokens-storage", choices=["store", "regenerate"], default="regenerate")
    p.add_argument("--out", default=str(RESULTS / "amp_shards.json"))
    p.add_argument("--child", choices=["one", "sharded"], default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.d[0], args.child, args.workers, args.iterations, args.tokens_storage, args.out)
        return 0
    import numpy as np
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.mkdir(exist_ok=True)
    rows = []
    print(f"{'d':>5} {'n':>7} {'way':>8} {'s/iter':>7} {'driver MB':>9} {'worker MB':>14} {'max |diff|':>10}")
    for d in args.d:
        one, many = measure(d, "one", args, tmp), measure(d, "sharded", args, tmp)
        diff = float(np.max(np.abs(np.load(tmp / f"one_{d}.json.npy") - np.load(tmp / f"sharded_{d}.json.npy"))))
        many["max_abs_difference"] = one["max_abs_difference"] = diff
        rows += [one, many]
        for r in (one, many):
            print(f"{d:>5} {r['n']:>7} {r['way']:>8} {r['seconds_per_iteration']:>7.3f} {r['driver_peak_mb']:>9.0f} "
                  f"{' '.join(f'{x:.0f}' for x in r['worker_peak_mb']) or '-':>14} {diff:>10.2g}", flush=True)
        record = {"benchmark": "bench_amp_shards", **machine(), "single_process_threads": args.threads,
                  "command": "python benchmarks/bench_amp_shards.py " + " ".join(argv or sys.argv[1:]), "rows": rows}
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
