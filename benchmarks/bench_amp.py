"""Speed and memory of GAMP-RIE (``aimlib.amp``).

Cases
-----
(a) softmax, ``T = 3``, ``d = 150``, ``alpha = 0.05`` (``n = 1125``): the
    setting at which ``published_timings.py`` runs the published research
    implementation, which builds ``(n, d, d, T, T)`` tensors (5.5 GB of data
    arrays).  Targets: < 10 s, < 300 MB.
(b) softmax, ``T = 2``, ``d = 500``, ``alpha = 0.1`` (``n = 25000``), run to
    convergence.  Target: < 5 min on 2 cores.  ``--skip-large`` leaves it out.

Each case runs in a fresh subprocess so that its peak resident memory
(``ru_maxrss``, which includes the interpreter and NumPy, about 60-100 MB) is
its own; the peak of the array allocations traced by ``tracemalloc`` (data set
included) is reported too.  The table is printed and written to
``benchmarks/results/amp.json``.

Run: ``python benchmarks/bench_amp.py [--skip-large]``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import set_blas_threads, write_record

CASES = {
    "a": dict(channel="softmax", T=3, d=150, alpha=0.05, rho=0.5, seed=0,
              options=dict(max_iter=300, on_max_iter="return")),
    "b": dict(channel="softmax", T=2, d=500, alpha=0.1, rho=0.5, seed=0,
              options=dict(max_iter=300, on_max_iter="return")),
}


def _child(name: str) -> None:
    """Run one case and print its numbers as one JSON line (runs in a subprocess)."""
    import resource
    import time
    import tracemalloc
    import warnings

    from aimlib import amp, channels, model, state_evolution

    c = CASES[name]
    ch = channels.make_channel(c["channel"])
    tracemalloc.start()
    t0 = time.perf_counter()
    data = model.sample_dataset(c["alpha"], c["d"], c["T"], c["rho"], ch, c["seed"])
    t_sample = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = amp.gamp_rie(data.X, data.y, ch, c["rho"], S=data.S, **c["options"])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    se = state_evolution.solve(c["alpha"], ch, T=c["T"], rho=c["rho"]).mmse
    out = dict(case=name, **{k: c[k] for k in ("channel", "T", "d", "alpha", "rho", "seed")},
               n=int(data.n), options=c["options"], sample_seconds=t_sample,
               amp_seconds=res.seconds, iterations=res.iterations, converged=res.converged,
               reason=res.reason, seconds_per_iteration=res.seconds / res.iterations,
               mmse=res.mmse, se_mmse=se, tracemalloc_peak_mb=peak / 2**20,
               maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               data_mb=(data.X.nbytes + data.y.nbytes + data.h.nbytes) / 2**20)
    print("RESULT " + json.dumps(out))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--skip-large", action="store_true", help="leave out case (b), d = 500")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="threads of the BLAS in each case (0: leave the environment alone); "
                        "default 1, which avoids oversubscription on a shared 2-core machine")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    names = ["a"] if args.skip_large else ["a", "b"]
    rows = []
    if args.blas_threads > 0:
        set_blas_threads(args.blas_threads)
    for name in names:
        proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                              text=True, cwd=Path(__file__).resolve().parents[1])
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            raise SystemExit(f"case {name} failed")
        rows.append(json.loads(line[0][len("RESULT "):]))
    head = f"{'case':>4} {'T':>2} {'d':>4} {'alpha':>6} {'n':>6} {'iter':>5} {'amp s':>7} " \
           f"{'s/iter':>7} {'rss MB':>7} {'trace MB':>8} {'mmse':>7} {'SE':>7}"
    print(head)
    for r in rows:
        print(f"{r['case']:>4} {r['T']:>2} {r['d']:>4} {r['alpha']:>6g} {r['n']:>6} {r['iterations']:>5} "
              f"{r['amp_seconds']:>7.2f} {r['seconds_per_iteration']:>7.3f} {r['maxrss_mb']:>7.0f} "
              f"{r['tracemalloc_peak_mb']:>8.1f} {r['mmse']:>7.4f} {r['se_mmse']:>7.4f}")
    write_record("amp", dict(
        what=("GAMP-RIE (aimlib.amp.gamp_rie, default options unless listed) on freshly sampled "
              "data, float64, NumPy backend; "
              "each case in its own subprocess; amp_seconds is the iteration loop only; "
              "maxrss_mb is the peak resident memory of that subprocess (interpreter included); "
              "tracemalloc_peak_mb the peak of traced allocations (data set included)."),
        reference=("published research implementation, case (a): "
                   "benchmarks/results/published.json (published_timings.py)"),
        cases=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
