"""Speed and memory of the matrix-free minimum-trace solver (``aimlib.convex.min_trace_admm``).

Cases: ``rho = 0.25``, ``T = 2``, ``alpha = 0.22`` (1.5 times ``alpha_cvx = 0.147``,
in the recovery phase), solved to ``tol = 1e-5``, at ``d = 25, 50, 100, 200``:

* ``softmax``: the softmax data's index differences, the exact Gram solve
  allowed its default 1 GiB (conjugate gradients above it: ``d = 200``), and at
  ``d = 200`` also ``softmax, gram 7000`` (the exact solve allowed 7000 MiB);
* ``gaussian``: i.i.d. Gaussian ``A_k`` regenerated from a seed, 1 GiB of them
  kept (to ``d = 100``: at ``d = 200`` they hold ``m d^2 = 7e8`` numbers, all
  drawn again at every pass beyond the cache);
* ``gaussian, null space``: the same law of the problem through the null space
  of the measurements (:class:`aimlib.convex.GaussianNullSpace`), to ``d = 200``.

Each case runs in a fresh subprocess so that its peak resident memory
(``ru_maxrss``, interpreter and NumPy included) is its own.
``--backend cupy`` fills the CuPy column (a GPU).  The table is printed and
written to ``benchmarks/results/min_trace.json`` (``min_trace_cupy.json``).

Run: ``python benchmarks/bench_min_trace.py [--backend numpy|cupy] [--skip-large] [--out FILE]``
(on a GPU: stage "minimum trace against d" of ``benchmarks/gpu.sh``, ``GPU_EXTRA=1``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import set_blas_threads, write_record

#: (case, sizes): a case is an ensemble and how its map is posed (module docstring)
CASES = {"softmax": (25, 50, 100, 200), "softmax, gram 7000": (200,), "gaussian": (25, 50, 100),
         "gaussian, null space": (25, 50, 100, 200)}
SETTING = dict(rho=0.25, T=2, alpha=0.22, seed=0, tol=1e-5)


def _measurement_map(case: str, d: int, backend: str):
    """``(S, op, b)`` of one case: the teacher, the measurement map on ``backend`` and its data."""
    from aimlib.backend import module_named, to_device
    from aimlib.channels import make_channel
    from aimlib.convex import GaussianMeasurements, GaussianNullSpace, SoftmaxDifferences, softmax_targets
    from aimlib.model import n_samples, sample_dataset, sample_teacher

    s, xp = SETTING, module_named(backend)
    if case.startswith("softmax"):
        data = sample_dataset(s["alpha"], d, s["T"], s["rho"], make_channel("softmax"), s["seed"], backend="numpy")
        gram_mb = 7000.0 if case.endswith("gram 7000") else 1024.0
        return (data.S, SoftmaxDifferences(to_device(data.X, xp), gram_mb=gram_mb),
                softmax_targets(data.n, s["T"], y=data.y, beta=1.0))
    S = sample_teacher(d, s["rho"], s["seed"], backend="numpy")
    maker = GaussianNullSpace if case.endswith("null space") else GaussianMeasurements
    op = maker(d, 2 * n_samples(s["alpha"], d), s["seed"] + 1, backend=backend)
    return S, op, op.forward(S)


def _child(case: str, d: int, backend: str) -> None:
    """Run one case and print its numbers as one JSON line (runs in a subprocess)."""
    import resource
    import time

    import numpy as np

    from aimlib.backend import module_named, to_device, to_host
    from aimlib.convex import min_trace_admm

    xp = module_named(backend)
    t0 = time.perf_counter()
    S, op, b = _measurement_map(case, d, backend)
    res = min_trace_admm(op, to_device(b, xp), tol=SETTING["tol"], on_max_iter="return")
    if backend == "cupy":
        xp.cuda.Device().synchronize()
    seconds = time.perf_counter() - t0
    err = float(np.linalg.norm(to_host(res.S) - S) / np.linalg.norm(S))
    print("RESULT " + json.dumps(dict(
        ensemble=case, d=d, m=getattr(op, "rank", op.m), backend=backend, seconds=seconds,
        iterations=res.iterations, converged=res.converged, residual=res.residual, gap=res.gap,
        rel_error=err, maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    p.add_argument("--skip-large", action="store_true", help="leave out d = 200")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="BLAS threads of each case (0: leave the environment alone); default 1")
    p.add_argument("--out", default=None, help="the record to write (default: benchmarks/results/"
                   "min_trace.json, or min_trace_cupy.json with --backend cupy)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    if args.blas_threads > 0:
        set_blas_threads(args.blas_threads)
    rows = []
    for case, sizes in CASES.items():
        for d in sizes:
            if args.skip_large and d > 100:
                continue
            proc = subprocess.run([sys.executable, __file__, "--child", case, str(d), args.backend],
                                  capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                print(proc.stdout, proc.stderr, file=sys.stderr)
                raise SystemExit(f"case {case} d = {d} failed")
            rows.append(json.loads(line[0][len("RESULT "):]))
            r = rows[-1]
            print(f"{r['ensemble']:>20} d={r['d']:>4} m={r['m']:>6} iter={r['iterations']:>5} "
                  f"{r['seconds']:>8.2f} s rss={r['maxrss_mb']:>6.0f} MB residual={r['residual']:.1e} "
                  f"gap={r['gap']:.1e} error={r['rel_error']:.1e} converged={r['converged']}", flush=True)
    write_record("min_trace" + ("_cupy" if args.backend == "cupy" else ""), dict(
        what=("minimum-trace recovery by matrix-free ADMM (aimlib.convex.min_trace_admm), float64, "
              f"{args.backend} backend, setting {SETTING}; seconds covers the data, the measurement map (its "
              "Gram factor or null space) and the solver; maxrss_mb the peak "
              "resident memory of the case's subprocess (interpreter and data included)."),
        cases=rows), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
