"""The published research code, timed on this machine next to ``aimlib``.

The comparisons of ``book/performance.md`` with the code published with the
paper (public repository ``FabrizioBoncoraglio/BO_ExtensiveRankAttention``)
come from this script, which runs that code as published on the machine of
the record, from a checkout the reader provides (nothing of it is copied into
the project):

* ``SE_softmax.py``: its state-evolution solver
  (``solve_state_equations``, with the settings of its own script:
  ``q_init = 0.3``, ``max_iter = 5000``, ``damping = 0.5``) over its own grid
  of 256 values of ``alpha`` (``T = 2``, ``rho = 0.5``), against
  ``aimlib.state_evolution.curve`` on the same grid;
* ``SE_hardmax.py``: one Monte Carlo evaluation of its output side
  (``mc_hatq_hard``, 25 000 samples, the default of its solver, which runs at
  least 151 of them per point), against one hardmax point of ``aimlib``;
* ``AMP_softmax.py``: one run of its ``AMP_experiment`` (one sample, at most
  100 iterations, its defaults otherwise) at the setting of ``bench_amp.py``
  case (a), ``T = 3``, ``d = 150``, ``alpha = 0.05``, ``rho = 0.5``; the memory
  of its data set is computed from the shapes it allocates (``X``, ``X_test``
  and the symmetrised ``uX``, each ``(n, d, d, T, T)`` in float64), and the
  peak resident memory of the process is recorded.

Only the modules' imports, function definitions and the globals those need
(``rng``, ``L``) are executed (their script parts, which run whole curves at
import, are skipped); a missing ``pandas`` (used by those scripts only to save
files) is replaced by an empty module.  Writes
``benchmarks/results/published.json``.  The published code needs, besides NumPy and
SciPy, ``mpmath`` and ``tqdm`` (``pip install mpmath``; ``tqdm`` is in the
project's requirements).

Run: ``python benchmarks/published_timings.py --repo PATH`` with ``PATH`` a
checkout of the repository above.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import sys
import time
import types
from pathlib import Path

from _common import write_record

MC_SAMPLES, MIN_MC_STEPS = 25_000, 151
GLOBALS = ("rng", "L")


def load_functions(path: Path) -> dict:
    """Execute the imports, function definitions and the ``rng`` of a published script."""
    tree = ast.parse(path.read_text())
    keep = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef))
            or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in GLOBALS)]
    sys.modules.setdefault("pandas", types.ModuleType("pandas"))
    namespace: dict = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def timed(fn):
    """``(seconds, value)`` of one call of ``fn`` with its printing silenced."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        value = fn()
    return time.perf_counter() - start, value


def softmax_curve(repo: Path) -> dict:
    import numpy as np
    from aimlib import state_evolution as se

    published = load_functions(repo / "SE_softmax.py")
    rho, T = 0.5, 2
    alphas = np.linspace(2e-5 * rho, rho / (T**2 + T - 2) * 2, 256)   # the script's grid
    solve = published["solve_state_equations"]
    theirs, _ = timed(lambda: [solve(a, rho, T, q_init=0.3, max_iter=5000, damping=0.5)
                               for a in alphas])
    ours, _ = timed(lambda: se.curve(alphas, T=T, rho=rho))
    return {"published_seconds": theirs, "aimlib_seconds": ours, "points": len(alphas)}


def hardmax_step(repo: Path) -> dict:
    from aimlib import state_evolution as se

    published = load_functions(repo / "SE_hardmax.py")
    rho, alpha = 0.5, 0.01
    step, _ = timed(lambda: published["mc_hatq_hard"](alpha, rho, 1 + rho, MC_SAMPLES))
    ours, _ = timed(lambda: se.solve(alpha, "hardmax", T=2, rho=rho))
    return {"published_seconds_per_mc_step": step, "mc_samples": MC_SAMPLES,
            "published_min_steps_per_point": MIN_MC_STEPS,
            "published_min_seconds_per_point": step * MIN_MC_STEPS,
            "aimlib_seconds_per_point": ours}


def amp_case_a(repo: Path, d: int = 150, alpha: float = 0.05, rho: float = 0.5) -> dict:
    import resource

    published = load_functions(repo / "AMP_softmax.py")
    T, n = published["L"], int(alpha * d**2)
    seconds, (errors, _) = timed(lambda: published["AMP_experiment"](
        d, alpha, rho, samples=1, iterations=100))
    return {"n": n, "d": d, "T": T, "alpha": alpha, "seconds": seconds,
            "error": float(errors[0]), "data_arrays_gigabytes": 3 * n * d * d * T * T * 8 / 1e9,
            "maxrss_gigabytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True,
                        help="a checkout of FabrizioBoncoraglio/BO_ExtensiveRankAttention")
    args = parser.parse_args(argv)
    missing = [f for f in ("SE_softmax.py", "SE_hardmax.py", "AMP_softmax.py")
               if not (args.repo / f).is_file()]
    if missing:
        parser.error(f"--repo must hold the published scripts; missing {missing}")
    record = {"source": "FabrizioBoncoraglio/BO_ExtensiveRankAttention",
              "softmax_curve": softmax_curve(args.repo),
              "hardmax": hardmax_step(args.repo),
              "amp_case_a": amp_case_a(args.repo)}
    for key in ("softmax_curve", "hardmax", "amp_case_a"):
        print(key, record[key])
    write_record("published", record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
