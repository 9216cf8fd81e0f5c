"""The sweep driver: compute the runs a results file lacks, one row per finished run."""
from __future__ import annotations

import contextlib
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .. import _validate
from .._optional import optional_import
from ..cluster import check_scheduler, check_workers, dask_client
from . import runners, schedulers
from .failures import check_failures_file, failures_path, record_failures
from .spec import expand, load_spec
from .store import ResultsFile, read_results, stored_keys

#: the schedulers a sweep takes by name; besides them a TLS address or a ``distributed.Client``
SCHEDULER_NAMES = ("serial", "processes", "local")


@dataclass
class SweepReport:
    """What :func:`run_sweep` did.

    ``n_runs`` runs in the spec, ``n_cached`` found in the CSV, ``n_computed``
    computed now (submitted and finished with a row), ``failures`` the runs
    that raised (``(run, message)``; no row written, a line in the failures file
    of :mod:`aimlib.sweep.failures`, retried next time).
    """

    path: Path
    n_runs: int
    n_cached: int
    n_computed: int = 0
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    keys: list = field(default_factory=list, repr=False)

    @property
    def complete(self) -> bool:
        """True if every run of the spec has a row."""
        return self.n_cached + self.n_computed == self.n_runs

    def rows(self) -> list[dict]:
        """The spec's rows from the CSV, in expansion order."""
        return read_results(self.path, keys=self.keys)

    def summary(self) -> str:
        listed = f", listed in {failures_path(self.path).name}" if self.failures else ""
        return (f"{self.n_runs} runs: {self.n_cached} cached, {self.n_computed} computed, "
                f"{len(self.failures)} failed{listed} -> {self.path} ({self.seconds:.1f} s)")


class _NoProgress:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


def _progress(total, initial, desc, enabled):
    if enabled:
        try:
            tqdm = optional_import("tqdm.auto", "the progress bar").tqdm
        except ImportError as exc:  # pragma: no cover - tqdm is in the sweep extra
            warnings.warn(f"progress bar disabled: {exc}", RuntimeWarning)
        else:
            return tqdm(total=total, initial=initial, desc=desc, unit="run", smoothing=0.05,
                        dynamic_ncols=True)
    return _NoProgress()


def _is_dask(scheduler) -> bool:
    return scheduler not in (None, "processes", "serial")


def _connection(scheduler, todo: list, workers: int, threads: int):
    """A context giving the Dask client of ``scheduler`` (connected now), or ``None``."""
    if todo and _is_dask(scheduler):
        return dask_client(scheduler, min(workers, len(todo)), threads)
    return contextlib.nullcontext()


def _runner(todo: list, scheduler, client, workers: int, threads: int):
    """The scheduler's generator of ``(run, row or exception)`` for the runs ``todo``."""
    execute = runners.execute  # looked up when a sweep starts, so that it can be replaced
    workers = min(workers, len(todo))
    if _is_dask(scheduler):
        return schedulers.dask(execute, todo, client)
    if scheduler == "serial" or workers == 1:
        return schedulers.serial(execute, todo)
    return schedulers.process_pool(execute, todo, workers, threads)


def _compute(results: ResultsFile, report: SweepReport, bar, runner):
    """Append the row of every run of ``runner`` that finishes; record the failures."""
    try:
        for run, res in runner:
            if isinstance(res, BaseException):
                msg = " ".join(f"{type(res).__name__}: {res}".split())
                report.failures.append((run, msg))
                bar.set_postfix_str(f"{len(report.failures)} failed")
                continue
            results.add(res)
            report.n_computed += 1
            bar.update(1)
    finally:
        runner.close()
        bar.close()


def _check_arguments(out, scheduler, workers, threads_per_worker) -> tuple[Path, int]:
    path = _validate.output_file("out", out)
    workers = check_workers("workers", os.cpu_count() or 1 if workers is None else workers)
    _validate.integer("threads_per_worker", threads_per_worker, 1)
    if isinstance(scheduler, str):
        check_scheduler("scheduler", scheduler, SCHEDULER_NAMES, client=True)
    return path, workers


def run_sweep(spec, out, *, scheduler=None, workers: int | None = None,
              threads_per_worker: int = 1, progress: bool = True, sort: bool = True,
              dry_run: bool = False) -> SweepReport:
    """Compute the runs of ``spec`` that ``out`` (a CSV) lacks, appending one row per run.

    Parameters
    ----------
    spec : SweepSpec, mapping or path to a YAML file
    out : path
        The results CSV (created if missing; its finished rows are reused).  A
        file that is not a sweep results file is refused and left untouched.
    scheduler : None, 'serial', 'processes', 'local', a TLS address 'tls://host:port', or a distributed.Client
        Where to run (see :mod:`aimlib.sweep.schedulers`; :func:`aimlib.cluster.check_scheduler`).
        ``None``: a local process pool (serial if ``workers == 1``).
    workers : int, optional
        Worker processes for the process pool and ``'local'``, from 1 to the
        number of CPUs (:func:`aimlib.cluster.check_workers`; default: CPUs).
    threads_per_worker : int
        BLAS threads per local worker (default 1).
    progress : bool
        Show a tqdm progress bar on stderr.
    sort : bool
        When the spec is complete, rewrite the CSV in expansion order.
    dry_run : bool
        Only count: return the report without computing or writing anything.

    Returns
    -------
    SweepReport
    """
    t0 = time.perf_counter()
    spec = load_spec(spec)
    path, workers = _check_arguments(out, scheduler, workers, threads_per_worker)
    runs = expand(spec)
    keys = [r.key for r in runs]
    check_failures_file(path)
    have = stored_keys(path)  # refuses a foreign file before anything starts
    pending = [r for r in runs if r.key not in have]
    if dry_run:
        return SweepReport(path, len(runs), len(runs) - len(pending),
                           seconds=time.perf_counter() - t0, keys=keys)
    with _connection(scheduler, pending, workers, threads_per_worker) as client:
        results = ResultsFile(path)
        try:
            todo = [r for r in pending if r.key not in results.lines]
            report = SweepReport(path, len(runs), len(runs) - len(todo), keys=keys)
            if todo:
                runner = _runner(todo, scheduler, client, workers, threads_per_worker)
                bar = _progress(len(runs), report.n_cached, spec.name or path.stem, progress)
                _compute(results, report, bar, runner)
            if sort and all(k in results.lines for k in keys) and results.order[: len(keys)] != keys:
                results.rewrite(keys)
        finally:
            results.close()
    record_failures(path, report.failures, {r.key for r in todo}, results.lines)
    report.seconds = time.perf_counter() - t0
    for run, msg in report.failures:
        warnings.warn(f"run {run.key} ({run.method}, T={run.T}, alpha={run.alpha}, d={run.d}, "
                      f"seed={run.seed}) failed: {msg}", RuntimeWarning, stacklevel=2)
    return report


def load_results(spec, out=None) -> list[dict]:
    """The computed rows of a sweep, in the order of its spec (runs not computed yet are skipped).

    Parameters
    ----------
    spec : path, mapping or SweepSpec
        The sweep spec (as for :func:`run_sweep`).
    out : path, optional
        Its results CSV; by default the spec's path with the suffix ``.csv``.
    """
    if out is None:
        if not isinstance(spec, (str, os.PathLike)):
            raise TypeError("out must be given when spec is not a path")
        out = Path(spec).with_suffix(".csv")
    return read_results(out, keys=[run.key for run in expand(spec)])
