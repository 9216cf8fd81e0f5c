r"""Large-``d`` validations for one GPU, stage by stage, each record written as each run ends.

Stages (``--stage``, in this order by default: the open questions first):

``hardmax``
    Hardmax ``T = 2``, ``rho = 0.5``, ``alpha = 1`` at ``d = 1000, 1400`` with the stopping
    rule ``stop='drift'``: at ``d <= 300`` GAMP-RIE ends about 12 standard errors above the
    state evolution (0.0786); does the excess shrink with ``d``?
``deep``
    Two hardmax attention layers (``c = 0.5``, ``rho_1 = rho_2 = 0.5``, ``alpha = 0.5``) at
    ``d = 500, 1000``, Wishart and centred teachers, each layer's error against the state
    evolution of its family (the sweeps ``deep_amp_*`` stop at ``d = 200``), and the residual
    cross-covariance ``e_12 = (1/d) Tr((S1_hat - S1)(S2_hat - S2))`` against the state
    evolution's first-order cross overlap ``se_q_12``
    (:func:`aimlib.state_evolution.cross_overlap`; ``scripts/deep_cross_overlap.py`` stops at
    ``d = 400``, and ``600`` at ``alpha = 0.3``).
``float32``
    Softmax ``T = 2``, ``rho = 0.5``, ``alpha = 0.1`` at ``d = 2000``: one float64 data set run
    in float64 and in float32; the float32 row carries the difference of the errors.
``regenerate``
    The same softmax problem at ``d = 5000`` with regenerated tokens (stored ones would take
    ``8 alpha T d^3`` bytes, 200 GB), a fixed number of iterations: seconds per iteration,
    memory, and the products' rate under the cost model
    ``flops per iteration = 4 n T d^2 + 11 d^3`` (:func:`aimlib.amp.flops_per_iteration`).

Each row holds ``d``, ``n``, dtype, backend, seed, iterations, seconds (GAMP loop; ``wall_s``
adds the sampling), the measured error ``(1/d) ||S_hat - S||_F^2`` (``mmse``), GAMP's own
prediction ``m``, the state-evolution value ``se_mmse``, ``converged``/``reason``, the stopping
rule, and the peak memory: ``device_pool_mb`` (CuPy's memory pool, emptied before the run, so its
size after the run is the run's high-water mark) and ``host_rss_mb`` (the process's peak).  A row
is written with ``status='running'`` before its run and replaced when it ends, so a stage killed by
its time cap (``benchmarks/gpu.sh``) keeps its finished rows and names the run it was in.

Host threads.  The library draws regenerated tokens on the host, the chunks of one read on
:func:`aimlib.tokens.draw_threads` threads (``--regen-chunk`` samples per read of GAMP-RIE), and
evaluates the hardmax output functions on the host, where one core would set the pace at these
sizes; this script splits ``g_out``, a function of each sample alone, over ``--host-threads``
threads (:func:`aimlib.channels.threaded.threaded_channel`): the numbers are the library's, only the wall time changes.

    python benchmarks/gpu_validate.py --stage hardmax deep       # on the GPU (CuPy)
    python benchmarks/gpu_validate.py --smoke                     # every stage, tiny d, NumPy
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import RESULTS, write_record

from aimlib import amp, model, state_evolution
from aimlib.backend import get_array_module, module_named, to_host
from aimlib.channels import make_channel
from aimlib.channels.threaded import MIN_SPLIT, threaded_channel
from aimlib.errors import ConvergenceError
from aimlib.priors import make_priors
from aimlib.tokens import TokenStream

STAGES = ("hardmax", "deep", "float32", "regenerate")


def sample(args, alpha, d, rho, channel, seed, *, stored=True, dtype=np.float64, teachers=None):
    """:func:`aimlib.model.sample_dataset` with regenerated Gaussian tokens (drawn on the host's threads).

    ``stored=True`` then holds those draws (:meth:`~aimlib.tokens.TokenStream.materialise`, one read
    of every chunk, drawn on :func:`aimlib.tokens.draw_threads` threads): a data set of stored tokens.
    """
    data = model.sample_dataset(alpha, d, 2, rho, channel, seed, backend=args.backend, dtype=dtype,
                                memory_mb=args.data_mb, teachers=teachers,
                                tokens={"name": "gaussian", "storage": "regenerate"})
    return replace(data, X=data.X.materialise()) if stored else data


def _memory(xp) -> dict:
    """Peak memory so far: CuPy's pool (MB, None on NumPy) and the process's resident set (MB)."""
    pool = getattr(xp, "get_default_memory_pool", None)
    return {"device_pool_mb": None if pool is None else pool().total_bytes() / 1e6,
            "host_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}


def _release(xp) -> None:
    """Empty CuPy's memory pool (nothing on NumPy) so the next run's high-water mark is its own."""
    if hasattr(xp, "get_default_memory_pool"):
        xp.get_default_memory_pool().free_all_blocks()


def _errors(value) -> float | list:
    """An error as a float, or one float per layer."""
    return [float(x) for x in value] if isinstance(value, (tuple, list, np.ndarray)) else float(value)


def gamp_row(data, channel, args, *, dtype=np.float64, se=None, host_g_out=False, check=True,
             **options) -> dict:
    """One GAMP-RIE run on ``data`` (a :class:`aimlib.model.Dataset`) as a record row.

    ``host_g_out`` (a channel whose ``g_out`` runs on the host: hardmax layers) splits it over
    the host threads (:func:`~aimlib.channels.threaded.threaded_channel`); a device ``g_out``
    (softmax) stays where it is.
    ``check=False`` (one teacher only) runs without the teacher, so without GAMP-RIE's final
    consistency check, and measures the error afterwards (a run stopped after a fixed number
    of iterations is timed, not judged).
    ``mmse`` is the measured ``(1/d) ||S_hat - S||_F^2`` (one per layer for two layers),
    ``m`` GAMP's prediction of it, ``se_mmse`` the state evolution; a run that ends in a
    :class:`~aimlib.errors.ConvergenceError` is a row with ``reason='error: ...'``.
    """
    xp = get_array_module(data.S)
    n, T, d = data.X.shape
    tokens = "regenerate" if isinstance(data.X, TokenStream) else "stored (regenerated draws, materialised)"
    row = dict(d=d, n=int(n), T=T, alpha=data.alpha, dtype=np.dtype(dtype).name, backend=args.backend,
               tokens=tokens, stop=options.get("stop", "estimate"), se_mmse=None if se is None else _errors(se))
    ch = threaded_channel(channel, args.pool, args.host_threads if host_g_out else 1, args.min_split)
    try:
        res = amp.gamp_rie(data.X, data.y, ch, data.priors, S=data.S if check else None, dtype=dtype,
                           memory_mb=args.chunk_mb, on_max_iter="return", **options)
    except ConvergenceError as err:
        return {**row, "converged": False, "reason": f"error: {err}", **_memory(xp)}
    mmse = res.mmse if check else model.estimation_error(res.S_hat, to_host(data.S))
    if len(data.priors) == 2:                       # two layers: their residuals' cross-covariance
        row["e_12"] = model.matrix_overlap(*(res.S_hat - to_host(data.S)))
    flops = amp.flops_per_iteration(int(n), T, d) * len(data.priors)
    return {**row, "iterations": res.iterations, "seconds": res.seconds, "converged": bool(res.converged),
            "reason": res.reason, "mmse": _errors(mmse), "checked": check, "m": _errors(res.m),
            "tflops_per_second": flops * res.iterations / res.seconds / 1e12, **_memory(xp)}


class Stage:
    """The record of one stage: rows appended as runs start and end, the file rewritten each time."""

    def __init__(self, name: str, args):
        self.name, self.args, self.rows, self.failed = name, args, [], False
        self.path = Path(args.out_dir) / f"gpu_{name}.json"

    def run(self, label: dict, make_row):
        """Write ``label`` as a running row, then replace it by ``{**label, **make_row()}``."""
        self.rows.append({**label, "status": "running"})
        self._write()
        _release(module_named(self.args.backend))
        t0 = time.perf_counter()
        try:
            row = {**label, **make_row(), "status": "done"}
        except Exception as err:    # recorded (an out-of-memory, a guard): the stage goes on
            row = {**label, "status": f"failed: {type(err).__name__}: {err}"}
            self.failed = True
        row["wall_s"] = time.perf_counter() - t0
        self.rows[-1] = row
        self._write()
        show = {k: row.get(k) for k in ("d", "dtype", "iterations", "seconds", "mmse", "se_mmse", "e_12",
                                        "se_q_12", "reason", "status") if k in row}
        print(self.name, " ".join(f"{k}={_short(val)}" for k, val in show.items()), flush=True)
        return row

    def _write(self):
        command = shlex.join(["python", "benchmarks/gpu_validate.py", *self.args.argv])
        write_record(f"gpu_{self.name}", dict(command=command, device=self.args.device, stage=self.name,
                                              host_threads=self.args.host_threads, rows=self.rows), self.path)


def _short(value) -> str:
    """A number in four digits, a list of them joined by '/'."""
    if isinstance(value, list):
        return "/".join(_short(x) for x in value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def stage_hardmax(args):
    """Hardmax ``T = 2``, ``rho = 0.5`` at ``alpha = args.hardmax_alpha``, ``stop='drift'``, per ``d`` and seed."""
    st, ch = Stage("hardmax", args), make_channel("hardmax")
    se = state_evolution.solve(args.hardmax_alpha, ch, T=2, rho=0.5).mmse
    for d in args.hardmax_d:
        for seed in args.seeds:
            def row(d=d, seed=seed):
                data = sample(args, args.hardmax_alpha, d, 0.5, ch, seed)
                return gamp_row(data, ch, args, se=se, host_g_out=True, stop="drift", max_iter=args.max_iter)
            st.run(dict(d=d, seed=seed, channel="hardmax", rho=0.5), row)
    return st


def stage_deep(args):
    """Two hardmax layers (``c = 0.5``, ``rho = (0.5, 0.5)``) per ``d``, teacher family and seed."""
    st, ch, rho = Stage("deep", args), make_channel("deep-hardmax", c=0.5), (0.5, 0.5)
    priors = {fam: make_priors(ch, rho, fam) for fam in ("wishart", "centred")}
    fps = {fam: state_evolution.solve(args.deep_alpha, ch, T=2, rho=p) for fam, p in priors.items()}
    cross = {fam: state_evolution.cross_overlap(args.deep_alpha, fp.q, fp.mmse, ch, priors[fam]).q_12
             for fam, fp in fps.items()}
    for d in args.deep_d:
        for fam in ("wishart", "centred"):
            for seed in args.seeds:
                def row(d=d, fam=fam, seed=seed):
                    data = sample(args, args.deep_alpha, d, rho, ch, seed, teachers=fam)
                    return {**gamp_row(data, ch, args, se=fps[fam].mmse, host_g_out=True, max_iter=args.max_iter),
                            "se_q_12": cross[fam]}
                st.run(dict(d=d, seed=seed, channel="deep-hardmax", c=0.5, rho=list(rho), teachers=fam), row)
    return st


def stage_float32(args):
    """Softmax ``T = 2``, ``rho = 0.5``, ``alpha = 0.1``: one float64 data set, run in float64 then float32."""
    st, ch = Stage("float32", args), make_channel("softmax")
    se = state_evolution.solve(0.1, ch, T=2, rho=0.5).mmse
    for d in args.float32_d:
        for seed in args.seeds:
            held, label = {}, dict(d=d, seed=seed, channel="softmax", rho=0.5)

            def reference(d=d, seed=seed, held=held):
                held["data"] = sample(args, 0.1, d, 0.5, ch, seed)
                return gamp_row(held["data"], ch, args, se=se)

            ref = st.run({**label, "dtype": "float64"}, reference)

            def single(held=held, ref=ref):
                if "data" not in held:
                    raise RuntimeError("the float64 run made no data set")
                row = gamp_row(held["data"], ch, args, dtype=np.float32, se=se)
                if "mmse" in row and "mmse" in ref:
                    row["mmse_minus_float64"] = row["mmse"] - ref["mmse"]
                    row["speedup_over_float64"] = ref["seconds"] / row["seconds"]
                return row
            st.run({**label, "dtype": "float32"}, single)
            held.clear()
    return st


def stage_regenerate(args):
    """Softmax at each ``--regen-d`` with regenerated tokens, ``--regen-iter`` iterations (no early stop)."""
    st, ch = Stage("regenerate", args), make_channel("softmax")
    se = state_evolution.solve(0.1, ch, T=2, rho=0.5).mmse
    dt = np.dtype(args.regen_dtype)
    for d in args.regen_d:
        def row(d=d):
            data = sample(args, 0.1, d, 0.5, ch, args.seeds[0], stored=False, dtype=dt)
            out = gamp_row(data, ch, args, dtype=dt, se=se, check=False, max_iter=args.regen_iter, tol=1e-300,
                           min_iter=1, chunk_size=args.regen_chunk)
            out["stored_tokens_gb"] = data.X.stored_bytes / 1e9
            if "seconds" in out:
                out["seconds_per_iteration"] = out["seconds"] / out["iterations"]
            return out
        st.run(dict(d=d, seed=args.seeds[0], channel="softmax", rho=0.5, tokens_storage="regenerate",
                    note="fixed iteration count: the error is not a converged one"), row)
    return st


RUNNERS = {"hardmax": stage_hardmax, "deep": stage_deep, "float32": stage_float32,
           "regenerate": stage_regenerate}
SMOKE = dict(hardmax_d=[30], deep_d=[24], float32_d=[40], regen_d=[40], regen_iter=2,
             regen_chunk=None, max_iter=60, host_threads=2, min_split=64)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stage", nargs="+", choices=STAGES, default=list(STAGES))
    p.add_argument("--backend", choices=["numpy", "cupy"], default=None, help="default cupy (numpy with --smoke)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--hardmax-d", type=int, nargs="+", default=[1000, 1400])
    p.add_argument("--hardmax-alpha", type=float, default=1.0)
    p.add_argument("--deep-d", type=int, nargs="+", default=[500, 1000])
    p.add_argument("--deep-alpha", type=float, default=0.5)
    p.add_argument("--float32-d", type=int, nargs="+", default=[2000])
    p.add_argument("--regen-d", type=int, nargs="+", default=[5000])
    p.add_argument("--regen-iter", type=int, default=3, help="iterations at each --regen-d (no early stop)")
    p.add_argument("--regen-dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--regen-chunk", type=int, default=4096, help="samples read per product (whole stream chunks)")
    p.add_argument("--max-iter", type=int, default=400)
    p.add_argument("--data-mb", type=float, default=120_000, help="memory guard of each data set, MiB")
    p.add_argument("--chunk-mb", type=float, default=16_384, help="GAMP-RIE's work budget per chunk, MiB")
    p.add_argument("--host-threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--min-split", type=int, default=MIN_SPLIT, help="fewest samples g_out splits over threads")
    p.add_argument("--out-dir", default=None, help="records gpu_<stage>.json (default: benchmarks/results)")
    p.add_argument("--smoke", action="store_true", help="every stage at tiny d on NumPy (seconds; a test)")
    args = p.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE, backend=args.backend or "numpy")
        args.out_dir = args.out_dir or str(Path(tempfile.gettempdir()) / "aimlib_gpu_smoke")
    args.backend = args.backend or "cupy"
    args.out_dir = args.out_dir or str(RESULTS)
    for name in ("regen_iter", "max_iter", "host_threads", "min_split", "regen_chunk"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be an integer >= 1, got {getattr(args, name)}")
    for name in ("seeds", "hardmax_d", "deep_d", "float32_d", "regen_d"):
        if min(getattr(args, name)) < (0 if name == "seeds" else 2):
            p.error(f"--{name.replace('_', '-')} must hold integers >= {0 if name == 'seeds' else 2}, "
                    f"got {getattr(args, name)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    xp = module_named(args.backend)
    args.device = (xp.cuda.runtime.getDeviceProperties(0)["name"].decode() if args.backend == "cupy"
                   else "host (NumPy)")
    with ThreadPoolExecutor(args.host_threads) as args.pool:
        failed = [RUNNERS[name](args).failed for name in args.stage]
    return int(any(failed))


if __name__ == "__main__":
    raise SystemExit(main())
