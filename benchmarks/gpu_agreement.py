"""NumPy against CuPy on the same draws: every array path of aimlib, both backends.

The data are drawn on the host and copied to the device, so a run with
``backend='cupy'`` sees the very numbers its NumPy twin sees; what may differ
is only floating-point rounding (other BLAS, other reduction orders).  Each
case prints the quantity it compares, its value on both backends, the
difference and the seconds each backend took, and the record lands in
``benchmarks/results/gpu_agreement.json``.

    python benchmarks/gpu_agreement.py            # needs a GPU and CuPy

A case *agrees* when the difference is under its tolerance: ``1e-8`` for
deterministic, well-conditioned maps (indices, RIE), and for iterative
algorithms the tolerance of the statistical claim they support (``1e-3`` on
an error, since rounding can shift a stopping iteration by one; ``3e-3`` for
the Monte Carlo chain, whose Metropolis decisions rounding can flip, about six
of its own standard errors).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import RESULTS, write_record

from aimlib import amp, gd, model, rmt, untied
from aimlib.backend import cupy_available, module_named, to_device, to_host
from aimlib.channels import Softmax, make_channel
from aimlib.gd.deep import run_deep_gd


def _indices(backend):
    X = model.sample_tokens(500, 3, 120, seed=1, backend=backend)
    S = model.sample_teacher(120, 0.5, seed=2, backend=backend)
    y = Softmax()(model.attention_indices(X, S))
    return to_host(y)


def _rie(backend):
    Y = model.sample_teacher(300, 0.5, seed=4, backend="numpy") + 0.3 * rmt.sample_goe(300, seed=5)
    return to_host(rmt.rie(to_device(Y, module_named(backend)), 0.3, 0.5))


def _amp(channel, rho, alpha, d, **kw):
    return lambda backend: amp.run_amp(channel, 2, rho, alpha, d, seed=3, backend=backend,
                                           on_max_iter="return", **kw)["mmse"]


def _gd(**kw):
    return lambda backend: gd.run_gd(2, 0.5, 0.5, 60, 0, backend=backend, dtype=np.float64,
                                     steps=400, **kw)["mmse_averaged"]


def _deep_gd(backend):
    return run_deep_gd(2, (0.5, 0.5), 1.0, 30, seed=0, backend=backend, dtype=np.float64,
                       steps=300)["mmse_averaged"]


def _untied(rho, denoiser="equalised"):
    return lambda backend: untied.run_untied_gamp(0.3, 2, 100, rho, seed=2, backend=backend,
                                                  denoiser=denoiser).errors


def _two_noise(backend):
    return untied.sample_two_noise(100, 0.5, (0.16, 0.72), seed=0, backend=backend).errors


CASES = {
    "softmax outputs y = softmax(h), n=500 T=3 d=120": (_indices, 1e-10),
    "RIE denoiser, d=300": (_rie, 1e-8),
    "GAMP-RIE softmax, alpha=0.12 d=150": (_amp("softmax", 0.5, 0.12, 150), 1e-3),
    "GAMP-RIE hardmax, alpha=0.12 d=150": (_amp("hardmax", 0.5, 0.12, 150), 1e-3),
    "GAMP-RIE linear (noise 0.1), alpha=0.12 d=150": (_amp(make_channel("linear", noise=0.1), 0.5, 0.12, 150), 1e-3),
    "GAMP-RIE softmax, Rademacher tokens, d=150": (_amp("softmax", 0.5, 0.12, 150, tokens="rademacher"), 1e-3),
    "GAMP-RIE two-layer hardmax, alpha=1 d=60": (_amp("deep-hardmax", [0.5, 0.5], 1.0, 60), 1e-3),
    "untied GAMP, Gaussian prior, alpha=0.3 d=100": (_untied(np.inf), 1e-3),
    "untied GAMP, equalised RIE rho=0.5, alpha=0.3 d=100": (_untied(0.5), 1e-3),
    "untied GAMP, tuned RIE rho=0.5, alpha=0.3 d=100": (_untied(0.5, "tuned"), 1e-3),
    "two-noise posterior sampling (HMC), d=100": (_two_noise, 3e-3),
    "GD factorised k=2, d=60": (_gd(restarts=2), 1e-3),
    "GD direct + weight decay 1e-4, d=60": (_gd(student="direct", weight_decay=1e-4), 1e-3),
    "GD two-layer softmax, d=30": (_deep_gd, 1e-3),
}


def compare(name, fn, tol) -> dict:
    """Run ``fn`` on both backends; return the values, the largest difference and the times."""
    values, seconds = {}, {}
    for backend in ("numpy", "cupy"):
        t0 = time.perf_counter()
        try:
            values[backend] = np.asarray(fn(backend), dtype=float)
        except Exception as exc:  # report the failure and go on with the other cases
            values[backend] = None
            seconds[backend] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        seconds[backend] = time.perf_counter() - t0
    if values["numpy"] is None or values["cupy"] is None:
        return {"case": name, "agrees": False, "error": seconds}
    diff = float(np.max(np.abs(values["numpy"] - values["cupy"])))
    summary = lambda v: v.tolist() if v.size <= 4 else f"array{v.shape}"  # noqa: E731
    return {"case": name, "numpy": summary(values["numpy"]), "cupy": summary(values["cupy"]),
            "max_abs_difference": diff, "tolerance": tol, "agrees": bool(diff <= tol),
            "numpy_seconds": seconds["numpy"], "cupy_seconds": seconds["cupy"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(RESULTS / "gpu_agreement.json"))
    args = p.parse_args(argv)
    if not cupy_available():
        print("CuPy sees no GPU: nothing to compare", file=sys.stderr)
        return 2
    rows = []
    for name, (fn, tol) in CASES.items():
        row = compare(name, fn, tol)
        rows.append(row)
        print(f"{'ok ' if row['agrees'] else 'BAD'} {name}: "
              + (f"diff {row['max_abs_difference']:.2e} (tol {tol:g}); numpy {row['numpy']} "
                 f"{row['numpy_seconds']:.2f} s, cupy {row['cupy']} {row['cupy_seconds']:.2f} s"
                 if "error" not in row else f"error {row['error']}"), flush=True)
    write_record("gpu_agreement", {"rows": rows}, args.out)
    return 0 if all(r["agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
