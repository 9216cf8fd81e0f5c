"""Eigenvalues of the matrices learned by the runs of the two weight-decay sweeps (d = 100).

Reruns every run of ``sweeps/weight_decay_d100.yaml`` and
``sweeps/weight_decay_direct_d100.yaml`` that the output file lacks with
:func:`aimlib.gd.run_gd` (the call the sweep makes), checks that it reproduces
the committed row, and appends one CSV row per run: its parameters, errors and
the ``d`` ascending eigenvalues of the learned ``S_hat``; the row ``teacher``
holds the teacher's eigenvalues (the same teacher for every run: seed 0).
Usage, from the repository root::

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python book/data/weight_decay_spectra_d100.py \
        book/data/weight_decay_spectra_d100.csv
"""
import csv
import sys
from pathlib import Path

import numpy as np

from aimlib import gd, sweep

SPECS = ("sweeps/weight_decay_d100.yaml", "sweeps/weight_decay_direct_d100.yaml")
COMMAND = ("OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python book/data/weight_decay_spectra_d100.py"
           " book/data/weight_decay_spectra_d100.csv")
HEAD = ["key", "student", "width", "weight_decay", "alpha_bar", "mmse", "train_loss",
        "test_loss", "n_nonzero"] + [f"eig{i}" for i in range(100)]


def rows(done: set):
    """The rows of the runs whose keys are not in ``done`` (and the teacher's, if missing)."""
    for spec in SPECS:
        stored = {r["key"]: r for r in sweep.load_results(spec)}
        for run in sweep.expand(spec):
            if run.key in done and "teacher" in done:
                continue
            opts = dict(run.options)
            out = gd.run_gd(run.T, run.rho, run.alpha, run.d, run.seed,
                            restarts=opts.pop("restarts"), dtype=opts.pop("dtype"),
                            beta=run.beta, return_result=True, **opts)
            if not np.isclose(out["mmse_single"], stored[run.key]["mmse"], rtol=1e-4):
                raise SystemExit(f"run {run.key} gives mmse {out['mmse_single']}, "
                                 f"the committed row {stored[run.key]['mmse']}")
            if "teacher" not in done:
                done.add("teacher")
                teacher = gd.eigenvalues(out["data"].S)
                yield ["teacher", "teacher", run.d, 0.0, 0.0, 0.0, 0.0, 0.0,
                       gd.count_nonzero(teacher), *teacher]
            if run.key not in done:
                width = run.d if opts["student"] == "direct" else opts["rank"]
                yield [run.key, opts["student"], width, opts["weight_decay"], run.alpha_bar,
                       out["mmse_single"], out["train_loss"][0], out["test_loss"][0],
                       out["n_nonzero"][0], *out["result"].eigenvalues[0]]


def main(path: Path):
    done = set()
    if path.exists():
        with open(path) as f:
            done = {r["key"] for r in csv.DictReader(ln for ln in f if not ln.startswith("#"))}
    with open(path, "a") as f:
        w = csv.writer(f, lineterminator="\n")
        if not done:
            f.write("# " + COMMAND + "\n")
            w.writerow(HEAD)
        for r in rows(done):
            w.writerow([f"{x:.6g}" if isinstance(x, (float, np.floating)) else x for x in r])
            f.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
