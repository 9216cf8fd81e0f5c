"""Benchmark: the command line from process start to the last row (one core).

Times, as fresh processes, the interpreter alone, ``import numpy`` and ``import
scipy.special`` (the floor under any command that needs them), ``import aimlib``,
one state-evolution point (``python -m aimlib se --channel softmax --T 2 --rho 0.5
--alpha 0.1``) and a 256-point softmax curve (the same command with ``--alpha`` at
256 points of ``[1e-4, 0.2]``): wall time (process start included) and the
processor time of the process, which a busy machine inflates less.  Beside them
stand the figures measured on this machine before ``import aimlib`` stopped loading
every subpackage (and with them ``scipy.stats``) and before the points of a
closed-form curve shared their prior-MMSE evaluations: 1.4 s for the point (1.05 s
of it ``import aimlib``) and 2.0 s for the curve; and the rows of the record this
run replaces (``previous``: the date, load and timings of every earlier record, newest
first, carried from record to record).
With ``--before DIR`` (a folder holding the package ``aimlib`` as it was, e.g.
``git archive <commit> aimlib | tar -x -C DIR``) the old commands are also timed,
alternating with the new ones, so both see the same load, and their rows must
agree with the new ones.
Prints a table and writes ``benchmarks/results/cli.json``.

Run: ``.venv/bin/python benchmarks/bench_cli.py [--repeat 7] [--before DIR]``
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import RESULTS, set_blas_threads, write_record

set_blas_threads(1)  # before NumPy is imported, here and in the timed processes

ROOT = Path(__file__).resolve().parents[1]
SE = ["-m", "aimlib", "se", "--channel", "softmax", "--T", "2", "--rho", "0.5"]
CURVE = [f"{a:.6g}" for a in (1e-4 + (0.2 - 1e-4) * i / 255 for i in range(256))]
CASES = {"python (no import)": ["-c", "pass"], "import numpy": ["-c", "import numpy"],
         "import scipy.special": ["-c", "import scipy.special"], "import aimlib": ["-c", "import aimlib"],
         "se, one point": [*SE, "--alpha", "0.1"], "se, 256 points": [*SE, "--alpha", *CURVE]}
#: seconds measured on this machine before the change (wall, process start included)
QUOTED = {"import aimlib": 1.05, "se, one point": 1.4, "se, 256 points": 2.0}
#: what the command line aims at (wall, process start included)
TARGET = {"se, one point": 0.4, "se, 256 points": 0.6}


def run_once(args, cwd) -> tuple[float, float, str]:
    """Wall and processor seconds of one fresh ``python args`` in ``cwd`` (whose ``aimlib`` it imports), and
    its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def same_rows(old: str, new: str, rel: float = 1e-9) -> bool:
    """Whether two CSV outputs hold the same rows, numbers equal within ``rel`` (both solve to 1e-12 in log Delta)."""
    a, b = [[row.split(",") for row in out.splitlines()] for out in (old, new)]
    if len(a) != len(b) or a[:1] != b[:1]:
        return False
    pairs = [(float(x), float(y)) for ra, rb in zip(a[1:], b[1:]) for x, y in zip(ra, rb)]
    return all(abs(x - y) <= rel * max(abs(x), abs(y), 1e-3) for x, y in pairs)


def summary(samples) -> dict:
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return {"best_s": min(walls), "median_s": statistics.median(walls), "cpu_best_s": min(cpus),
            "cpu_median_s": statistics.median(cpus)}


def previous_records() -> list:
    """The date, load and timings of the record this run replaces, then of those it kept, newest first."""
    path = RESULTS / "cli.json"
    if not path.exists():
        return []
    old = json.loads(path.read_text())
    keep = ("case", "best_s", "median_s", "cpu_best_s", "cpu_median_s")
    return [{"date": old["date"], "load_average": old["load_average"],
             "results": [{k: r[k] for k in keep} for r in old["results"]]}, *old.get("previous", [])]


def print_table(rows, repeat, before, previous) -> None:
    """The timings: best and median of the new tree, the old one (``--before``), the last record (``previous``)."""
    print(f"fresh processes, one thread, {repeat} each; wall (processor) seconds, best and median")
    old = {r["case"]: r for r in previous["results"]} if previous else {}
    head = [f"{'best':>14s}", f"{'median':>14s}"] + [f"{'before ' + k:>14s}" for k in ("best", "median") if before]
    print(f"{'case':20s} " + " ".join(head) + f" {'previous':>14s} {'quoted':>7s} {'target':>7s}")
    for r in rows:
        runs = [r] + ([r["before"]] if before else [])
        cells = [f"{x[k]:6.3f} ({x['cpu_' + k]:5.3f})" for x in runs for k in ("best_s", "median_s")]
        p = old.get(r["case"])
        cells.append(f"{p['best_s']:6.3f} ({p['cpu_best_s']:5.3f})" if p else "")
        tail = ["" if r[k] is None else f"{r[k]:.2f}" for k in ("quoted_before_s", "target_s")]
        print(f"{r['case']:20s} " + " ".join(f"{c:>14s}" for c in cells) + " " + " ".join(f"{c:>7s}" for c in tail))
    if previous:
        print(f"previous: the record of {previous['date']} (load {previous['load_average'][0]:.1f})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=7, help="processes per command (default: 7)")
    p.add_argument("--before", default=None, help="a folder holding the package aimlib before the change")
    p.add_argument("--before-label", default=None, help="what that folder holds, for the record (e.g. a commit)")
    args = p.parse_args(argv)
    trees = {"now": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    history = previous_records()
    previous = history[0] if history else None
    rows = []
    for case, argv_ in CASES.items():
        samples = {name: [] for name in trees}
        for _ in range(args.repeat):                 # alternate: both trees see the same load
            for name, cwd in trees.items():
                samples[name].append(run_once(argv_, cwd))
        outs = {name: s[-1][2] for name, s in samples.items()}
        if "before" in outs and not same_rows(outs["before"], outs["now"]):
            raise RuntimeError(f"{case}: the old and new commands print different rows")
        row = {"case": case, **summary(samples["now"]), "quoted_before_s": QUOTED.get(case),
               "target_s": TARGET.get(case), "rows": max(len(outs["now"].splitlines()) - 1, 0)}
        if "before" in samples:
            row["before"] = summary(samples["before"])
        rows.append(row)
    print_table(rows, args.repeat, args.before, previous)
    write_record("cli", {"repeat": args.repeat, "before": args.before_label or args.before, "results": rows,
                         "previous": history})


if __name__ == "__main__":
    main()
