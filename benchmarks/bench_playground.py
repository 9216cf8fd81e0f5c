"""Benchmark: how long the playground's cells take before its panels answer (one core).

Runs the code cells of ``book/playground.md`` in a fresh process, as a kernel of
live mode (``make live``) or of the app (``make app``) runs them, and times each:
``from aimlib import widgets``, then every panel's first draw in the order of the
page.  The sum is the kernel's share of the time to an interactive page; the
kernel's start and the browser's work come on top (``tests/test_app.py`` prints
the app's whole time from request to drawn panels).

With ``--before DIR`` (a folder holding the package ``aimlib`` as it was, e.g.
``git archive <commit> aimlib | tar -x -C DIR``) the old library is timed too,
alternating with the new one, so both see the same load.  Each column is the
median over ``--repeat`` fresh processes.  Prints a table and writes
``benchmarks/results/playground.json``.

Run: ``.venv/bin/python benchmarks/bench_playground.py [--repeat 3] [--before DIR]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import set_blas_threads, write_record

set_blas_threads(1)  # before NumPy is imported, in the timed processes

ROOT = Path(__file__).resolve().parents[1]
#: the code cells of book/playground.md, in its order (name, statement)
CELLS = (("import", "from aimlib import widgets"),
         ("se panel", "widgets.se_panel()"),
         ("phase panel", "widgets.phase_panel()"),
         ("noise panel", "widgets.noise_panel()"),
         ("spectrum panel", "widgets.spectrum_panel()"),
         ("amp panel (one run)", "widgets.amp_panel(d=80, max_iter=25, run=True)"),
         ("deep panel", "widgets.deep_panel()"))
#: the child process: time each cell, print the seconds as JSON
CHILD = """
import json, time
seconds = {}
for name, code in %r:
    t = time.perf_counter()
    exec(code)
    seconds[name] = time.perf_counter() - t
print(json.dumps(seconds))
""" % (CELLS,)


def run_cells(root: Path) -> dict:
    """Seconds of each cell in one fresh process that imports ``aimlib`` from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=root, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians(runs: list[dict]) -> dict:
    """The median of each cell over ``runs``, and of their sum (``total``)."""
    rows = {name: statistics.median(r[name] for r in runs) for name, _ in CELLS}
    rows["total"] = statistics.median(sum(r.values()) for r in runs)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a folder holding aimlib as it was")
    args = parser.parse_args()
    now, before = [], []
    for _ in range(args.repeat):
        now.append(run_cells(ROOT))
        if args.before:
            before.append(run_cells(args.before.resolve()))
    record = {"now": medians(now), "before": medians(before) if before else None}
    print(f"{'cell':>20} {'now (s)':>8} {'before (s)':>11}")
    for name in record["now"]:
        old = f"{record['before'][name]:11.2f}" if before else f"{'-':>11}"
        print(f"{name:>20} {record['now'][name]:8.2f} {old}")
    path = write_record("playground", {"note": "medians of fresh processes, one BLAS thread",
                                       "repeat": args.repeat, **record})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
