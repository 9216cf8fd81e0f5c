"""The ``sweep`` command of ``python -m aimlib`` (:mod:`aimlib.cli`): a grid of runs from a YAML spec.

The runs are computed in parallel and appended to a CSV (:mod:`aimlib.sweep`); rows already there
are reused, so an interrupted sweep (Ctrl-C, or SIGTERM from ``kill``, ``scancel`` or a walltime)
stops cleanly and resumes where it stopped when the same command runs again.
"""
from __future__ import annotations

import signal
import sys
import threading
import warnings
from pathlib import Path

import aimlib  # aimlib.sweep loads on first use (aimlib.__getattr__)

from . import _validate
from .cli_checks import RANGES
from .cluster import TLS_HELP, check_scheduler

__all__ = ["sweep_arguments", "sweep_run"]


def sweep_arguments(p):
    """The options of ``sweep``."""
    p.add_argument("spec", metavar="SPEC", help="sweep spec (YAML), see aimlib.sweep")
    p.add_argument("--out", default=None,
                   help="results CSV (default: SPEC with the suffix .csv); finished rows are reused")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help=f"'local' (a Dask LocalCluster), a Dask scheduler at tls://host:port ({TLS_HELP}), "
                        "or 'serial' (default: a local process pool)")
    p.add_argument("--workers", type=RANGES["positive_int"], default=None,
                   help="local worker processes (default: the number of CPUs)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="only print how many runs the spec has and how many are cached")


def sweep_run(args) -> int:
    """Run the sweep of ``args.spec`` into ``args.out``; the exit status (1 if a run failed, 130 if stopped)."""
    sweep = aimlib.sweep   # imported here, on first use
    spec = sweep.load_spec(args.spec)
    out = args.out if args.out is not None else str(Path(args.spec).with_suffix(".csv"))
    _validate.output_file("--out", out)
    if args.workers is not None:
        sweep.check_workers("--workers", args.workers)
    if args.scheduler is not None:
        check_scheduler("--scheduler", args.scheduler, sweep.driver.SCHEDULER_NAMES)
    prog = "python -m aimlib sweep"

    def _terminate(signum, frame):  # SIGTERM (kill, scancel, SLURM walltime): stop cleanly
        raise KeyboardInterrupt(f"signal {signum}")

    in_main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            report = sweep.run_sweep(spec, out, scheduler=args.scheduler, workers=args.workers,
                                     progress=not args.no_progress, dry_run=args.dry_run)
        except sweep.StorageError as exc:
            print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"{prog}: interrupted; the finished rows are in {out}, run the same command "
                  "again to resume", file=sys.stderr)
            return 130
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, old_term)
            for w in caught:
                if not str(w.message).startswith("run "):  # failures are listed below
                    print(f"{prog}: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
    name = spec.name or Path(args.spec).stem
    if args.dry_run:
        print(f"{name}: {report.n_runs} runs, {report.n_cached} cached, "
              f"{report.n_runs - report.n_cached} to compute -> {report.path}")
        return 0
    print(f"{name}: {report.summary()}")
    for run, msg in report.failures:
        print(f"{prog}: run {run.key} ({run.method}, T={run.T}, alpha={run.alpha}, d={run.d}, "
              f"seed={run.seed}) failed: {msg}", file=sys.stderr)
    return 1 if report.failures else 0
