"""GAMP-RIE's stopping rules against runs taken to their fixed point.

For each case (channel, ``T``, ``alpha``, ``d``, seed; ``rho = 0.5``, Wishart teachers, the
library's default damping) it runs GAMP-RIE three ways on the same data:

* ``estimate``: the default rule (``stop='estimate'``, ``tol = 1e-4``);
* ``window``: the distance to the fixed point estimated over a window
  (``stop='window'``, :class:`aimlib.iteration.WindowRule`, ``tol = 1e-4``);
* ``fixed point``: the default rule at ``tol = 1e-9`` with a cap of 3000 iterations, the
  reference (a rule that stops on a cycle of period at most ``lookback`` as well: its
  ``reason`` is printed, and a case whose ``window`` run says ``oscillating`` has no fixed
  point to compare with).

It records each run's error, iterations, reason, and the relative error of the two rules
to the reference.  Run: ``python benchmarks/bench_stopping.py [--quick]`` (``--quick``: the
cases at ``d <= 80`` only).  Writes ``benchmarks/results/stopping.json``.
"""
from __future__ import annotations

import argparse
import time

from _common import write_record

from aimlib.amp import run_amp
from aimlib.errors import ConvergenceError

#: (channel, T, alpha, d, seed)
CASES = [("hardmax", 2, 0.4, 80, 0), ("hardmax", 2, 0.7, 80, 0), ("hardmax", 2, 1.0, 80, 0),
         ("hardmax", 2, 1.0, 80, 1), ("hardmax", 3, 0.3, 40, 0), ("softmax", 2, 0.1, 80, 0),
         ("softmax", 2, 0.3, 40, 0), ("softmax", 3, 0.1, 40, 0), ("softmax", 3, 0.3, 40, 0),
         ("hardmax", 2, 0.7, 200, 0), ("hardmax", 2, 1.0, 200, 0)]
WAYS = {"estimate": {}, "window": {"stop": "window"}, "fixed point": {"tol": 1e-9, "max_iter": 3000}}


def run_case(channel, T, alpha, d, seed) -> dict:
    """The three ways on one case, with the relative error of each rule to the reference."""
    row = {"channel": channel, "T": T, "alpha": alpha, "d": d, "seed": seed}
    for way, kw in WAYS.items():
        t0 = time.perf_counter()
        try:
            r = run_amp(channel, T, 0.5, alpha, d, seed, on_max_iter="return", **kw)
            row[way] = {"mmse": r["mmse"], "iterations": r["iterations"], "reason": r["reason"],
                        "converged": bool(r["converged"]), "seconds": round(time.perf_counter() - t0, 2)}
        except ConvergenceError as exc:
            row[way] = {"failed": str(exc)}
    ref = row["fixed point"].get("mmse")
    for way in ("estimate", "window"):
        if ref is not None and "mmse" in row[way]:
            row[way]["relative_to_fixed_point"] = row[way]["mmse"] / ref - 1.0
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the cases at d <= 80 only")
    args = parser.parse_args(argv)
    rows = []
    for case in CASES:
        if args.quick and case[3] > 80:
            continue
        rows.append(run_case(*case))
        print({k: rows[-1][k] for k in ("channel", "T", "alpha", "d", "seed")},
              {w: (rows[-1][w].get("mmse"), rows[-1][w].get("iterations"), rows[-1][w].get("reason"))
               for w in WAYS}, flush=True)
    write_record("stopping", {"command": "python benchmarks/bench_stopping.py" + (" --quick" if args.quick else ""),
                              "rho": 0.5, "rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
