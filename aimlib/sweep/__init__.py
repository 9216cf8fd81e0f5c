r"""Experiment sweeps: a grid of runs, executed in parallel, cached in a tidy CSV.

A *sweep* is a grid over the parameters of the attention-indexed model and a
list of methods:

``se``
    the state-evolution fixed point, the Bayes-optimal error in the limit
    ``d -> inf``; ``d`` and ``seeds`` are ignored;
``amp``
    one GAMP-RIE run on sampled data;
``gd``
    gradient descent from ``restarts`` random initialisations; ``mmse`` is the
    mean error of the single students;
``gd_avg``
    the same call, but ``mmse`` is the error of the student *averaged* over
    the ``restarts`` initialisations (``restarts >= 2``, default 8).  Both GD
    methods record both numbers (``mmse_single`` and ``mmse_averaged``), so a
    figure with single and averaged GD needs only ``gd_avg``.

Modules
-------
:mod:`~aimlib.sweep.spec`
    the spec format (a small YAML file), its validation (:class:`SweepSpec`,
    :func:`load_spec`) and :func:`expand`, which turns a spec into a list of
    :class:`Run`, ordered method by method and, inside a method, seed by seed
    (a partly finished sweep of many seeds holds whole figures of the first
    seeds); :mod:`~aimlib.sweep.options` holds the per-method options and
    :mod:`~aimlib.sweep.specfile` reads a spec file (no YAML anchors, aliases,
    repeated keys or deep nesting);
:mod:`~aimlib.sweep.keys`
    :class:`Run` and its stable *run key* (:func:`run_key`): runs with equal
    keys are merged, and a key does not depend on the spec's layout, on
    ``backend`` or on where the run executes;
:mod:`~aimlib.sweep.runners`
    what one run computes (:func:`execute`), as one CSV row;
:mod:`~aimlib.sweep.store`
    the results file (:data:`COLUMNS`, :func:`read_results`): appended to one
    ``fsync``-ed line at a time under a lock, resumable after a crash, and
    never written unless its header is the sweep's own, nor through a symbolic
    link or into another user's file (:mod:`aimlib.files`);
:mod:`~aimlib.sweep.diskio`
    whole-line appends and atomic replacements; a write that fails (a full
    disk) leaves no partial row and raises :class:`StorageError`;
:mod:`~aimlib.sweep.schedulers`
    a local process pool (default), serial, or a Dask cluster (``'local'``:
    on ``127.0.0.1`` only, TLS with temporary credentials, no dashboard);
:mod:`~aimlib.sweep.driver`
    :func:`run_sweep`, which computes the runs a results file lacks;
:mod:`~aimlib.sweep.failures`
    the runs that failed, with their messages, beside the results file (a
    foreign file of that name is refused before any run, like a foreign
    results file).

Rows already in the file are not recomputed, so rerunning a finished sweep
computes nothing and enlarging a spec computes only the new runs.  When every
run of the spec is in the file, it is rewritten (atomically) in expansion
order, which keeps committed data diff-friendly; rows of other specs in the
same file are kept after them.  A run that raises (e.g.
:class:`aimlib.ConvergenceError`) writes no row; it is reported in
``SweepReport.failures``, recorded with its message in the failures file
beside the results (:mod:`~aimlib.sweep.failures`, :func:`load_failures`) and
retried by the next call.

On a SLURM cluster, start the workers with ``dask-jobqueue`` and pass the client::

    from dask_jobqueue import SLURMCluster
    from distributed import Client
    from aimlib import sweep

    cluster = SLURMCluster(cores=8, processes=8, memory="32GB", walltime="04:00:00",
                           job_extra_directives=["--partition=cpu"],
                           job_script_prologue=["source /path/to/.venv/bin/activate",
                                                "export OMP_NUM_THREADS=1"])
    cluster.scale(jobs=4)              # 4 SLURM jobs x 8 workers
    sweep.run_sweep("sweeps/softmax_amp_gd_d300.yaml", "sweeps/softmax_amp_gd_d300.csv",
                    scheduler=Client(cluster))

(or run ``python -m aimlib sweep SPEC --scheduler tls://host:port`` against the
scheduler of such a cluster, with your CA, certificate and key in Dask's
configuration, :data:`aimlib.cluster.CREDENTIALS`; a ``tcp://`` address is
refused, as whoever listens there could run code in the sweep's process, so give
the cluster TLS credentials with its ``security=`` option).  A client passed in is
used as is.  The CSV is written only by the submitting
process, so it must live on a disk that process can write; the workers need
no shared file system.

Command line::

    python -m aimlib sweep sweeps/softmax_se.yaml --out sweeps/softmax_se.csv [--scheduler ADDRESS]
        [--workers N] [--no-progress] [--dry-run]

``--workers`` is at most the number of CPUs (:func:`check_workers`).

Requirements: ``pyyaml`` for YAML files, ``tqdm`` for the progress bar,
``dask[distributed]`` for the Dask schedulers and ``cryptography`` for the
credentials of ``'local'`` (``pip install -e .[sweep]``); none is needed to
build a spec in Python and run it on the process pool.
"""
from .diskio import StorageError
from .driver import SweepReport, check_workers, load_results, run_sweep
from .failures import check_failures_file, failures_path, load_failures
from .fields import SpecError
from .keys import Run, run_key
from .options import DEFAULTS, METHODS, OPTIONS
from .runners import execute
from .spec import CHANNELS, MAX_RUNS, SweepSpec, expand, load_spec
from .store import COLUMNS, read_results

__all__ = [
    "load_results",
    "load_failures",
    "failures_path",
    "check_failures_file",
    "check_workers",
    "StorageError",
    "SpecError",
    "SweepSpec",
    "Run",
    "SweepReport",
    "METHODS",
    "CHANNELS",
    "COLUMNS",
    "MAX_RUNS",
    "load_spec",
    "expand",
    "run_key",
    "execute",
    "run_sweep",
    "read_results",
]
