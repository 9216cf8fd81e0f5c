"""Why GAMP-RIE sat above the hardmax state evolution at alpha = 1 (T = 2, rho = 0.5).

Writes ``book/data/hardmax_alpha1.csv``, one row per measurement, the column
``part`` naming what it is:

* ``se_start``: the state evolution iterated from the initial error ``init_error``
  (1 is the uninformative start): its fixed point ``error`` (one fixed point: every
  start ends at 0.0789).
* ``fout_mc``: ``F_out`` at that fixed point by Monte Carlo over sampled
  ``(omega, h, y)`` of the channel (``value``, ``stderr``) against the quadrature
  (``reference``).
* ``trace``: GAMP-RIE with the library's defaults (damping 0.5) at ``d = 200``,
  seed 0, run past the former default stop (``stop='estimate'``, ``tol = 1e-4``, which it meets at
  iteration 29)
  to 150 iterations: per iteration the measured error, the prediction ``m``,
  ``Delta``, the noise ratio ``||R - S||^2/(d Delta)``, the library's ``change``
  and the state evolution iterated with the same damping from the same start (``se_m``).
* ``damping``: ``d = 100``, seed 0, damping 0, 0.2, 0.5, 0.8, run to a fixed point.
* ``converged``: damping 0.2 run to a fixed point (``iterations`` fixed, the last
  change printed in ``change``) at ``d = 100``, 200 and 300 (seeds 0-3) and 400
  (seed 0, fewer iterations), with the error where the former default
  stopping rule (``stop='estimate'``) would have stopped (``error_at_default_stop``, ``default_stop_iter``),
  an Aitken extrapolation of the last iterates (``error_limit``), and at the
  last iteration the variance of ``h - omega`` over ``m Sigma`` (``var_ratio_off``,
  ``var_ratio_diag``) and GAMP's empirical ``F`` over ``F_out(Q0 - m)`` (``F_ratio``).
* ``informed``: ``d = 200``, seed 0, started from the teacher plus symmetric
  Gaussian noise of error ``init_error`` (and ``m = init_error``).

Every GAMP run here is :func:`aimlib.amp.gamp_rie` itself (``damp='both'``), run for a fixed
number of iterations (``stop='prediction'`` at ``tol = 1e-300`` never stops); the diagnostics at the
last iteration's input come from its ``callback`` (:class:`aimlib.amp.loop.IterationState`), the rest
from its trace.  Data of seed ``s`` are
those of ``run_amp(..., seed=s)`` (and of ``sweeps/hardmax_amp_departure.csv``).
About 41 minutes on one core (``d = 300`` 19 of them, ``d = 400`` 8, ``d = 200`` 10);
``--part`` runs a part and ``--seeds`` some seeds of the parts "converged" (rows of
parts can be joined)::

    python scripts/hardmax_alpha1.py [--out book/data/hardmax_alpha1.csv]
        [--part se trace damping converged100 converged200 converged300 converged400 informed]
        [--seeds 0 1 ...]
"""
from __future__ import annotations

import math
import time

import numpy as np

from aimlib import _validate as v
from aimlib.amp import gamp_rie
from aimlib.channels import make_channel, sigma2
from aimlib.channels.hardmax import fisher, g_out
from aimlib.model import attention_indices, sample_dataset
from aimlib.priors import Wishart
from aimlib.state_evolution import fixed_point
from _rows import data_parser, write_rows

COMMAND = "python scripts/hardmax_alpha1.py"
ALPHA, RHO, T = 1.0, 0.5, 2
Q0 = 1.0 + RHO
#: the former default stopping rule (``stop='estimate'``): ||S_t - S_{t-k}||_F^2 / d <= TOL m_t for some k <= LOOKBACK
TOL, LOOKBACK = 1e-4, 10
#: d -> (seeds, iterations) of the part "converged" (damping 0.2)
CONVERGED = {100: (range(4), 300), 200: (range(4), 120), 300: (range(4), 120), 400: (range(1), 80)}
PARTS = ("se", "trace", "damping", "converged100", "informed", "converged200", "converged300", "converged400")
COLUMNS = ["part", "d", "seed", "damping", "init_error", "iterations", "error", "m", "delta", "noise_ratio",
           "change", "se_m", "error_at_default_stop", "default_stop_iter", "error_limit", "var_ratio_off",
           "var_ratio_diag", "F_ratio", "value", "stderr", "reference", "seconds"]


def _dataset(d, seed):
    ch = make_channel("hardmax")
    return ch, sample_dataset(ALPHA, d, T, RHO, ch, v.run_streams(seed).data)


def _goe(rng, shape, var):
    """Symmetric ``(..., 2, 2)`` Gaussian matrices, variance ``2 var`` on the diagonal and ``var`` off it."""
    a = rng.standard_normal(shape + (3,)) * math.sqrt(var)
    out = np.empty(shape + (2, 2))
    out[..., 0, 0], out[..., 1, 1] = a[..., 0] * math.sqrt(2), a[..., 1] * math.sqrt(2)
    out[..., 0, 1] = out[..., 1, 0] = a[..., 2]
    return out


def se_rows():
    """Fixed points from several starts; ``F_out`` at the fixed point by Monte Carlo."""
    for start in (1.0, 0.5, 0.2, 0.05, 0.01, 1e-3):
        t0 = time.perf_counter()
        r = fixed_point(ALPHA, "hardmax", T=T, rho=RHO, init=start)
        yield {"part": "se_start", "init_error": start, "iterations": r.iterations, "error": r.mmse,
               "seconds": round(time.perf_counter() - t0, 2)}
    V = fixed_point(ALPHA, "hardmax", T=T, rho=RHO).mmse
    rng, t0, vals = np.random.default_rng(12345), time.perf_counter(), []
    for _ in range(8):
        omega = _goe(rng, (250_000,), Q0 - V)
        h = omega + _goe(rng, (250_000,), V)
        s = np.stack([np.sign(h[:, 0, 0] - h[:, 0, 1]), np.sign(h[:, 1, 1] - h[:, 0, 1])], axis=-1)
        g = g_out(s, omega, V)
        vals.append(np.mean(2 * (2 * g[:, 0, 0] ** 2 + 2 * g[:, 1, 1] ** 2 + g[:, 0, 1] ** 2)))
    yield {"part": "fout_mc", "error": V, "value": float(np.mean(vals)),
           "stderr": float(np.std(vals, ddof=1) / math.sqrt(len(vals))), "reference": fisher(Q0 - V, Q0),
           "seconds": round(time.perf_counter() - t0, 2)}


def trace_rows(d=200, seed=0, iters=150, damping=0.5):
    """The library's GAMP-RIE, default damping, past the former default stop; the SE iterated with the same damping."""
    ch, D = _dataset(d, seed)
    t0 = time.perf_counter()
    res = gamp_rie(D.X, D.y, ch, D.priors, S=D.S, damping=damping, max_iter=iters, stop="prediction",
                   tol=1e-300, trace=True, on_max_iter="return")
    sec = time.perf_counter() - t0
    prior, V = Wishart(RHO), 1.0
    tr = res.trace
    for t in range(len(tr["m"])):
        V = (1 - damping) * prior.mmse(1.0 / (ALPHA * fisher(Q0 - V, Q0))) + damping * V
        yield {"part": "trace", "d": d, "seed": seed, "damping": damping, "iterations": t + 1,
               "error": tr["error"][t], "m": tr["m"][t], "delta": tr["delta"][t],
               "noise_ratio": tr["noise_ratio"][t], "change": tr["change"][t], "se_m": V,
               "seconds": round(sec, 1) if t == len(tr["m"]) - 1 else ""}


def _aitken(e, k=10):
    """Limit of a geometric tail from ``e[-1-2k], e[-1-k], e[-1]`` (the last value if it is not geometric)."""
    if len(e) <= 2 * k:
        return e[-1]
    a, b, c = e[-1 - 2 * k], e[-1 - k], e[-1]
    den = (c - b) - (b - a)
    return c if den == 0 or (c - b) * (b - a) <= 0 else c - (c - b) ** 2 / den


def gamp(d, seed, iters, damping=0.2, init_error=None, init_seed=99):
    """GAMP-RIE (:func:`aimlib.amp.gamp_rie`, ``iters`` iterations, no stop) with diagnostics; from the prior
    mean, or the teacher plus noise of error ``init_error`` (and ``m = init_error``)."""
    ch, D = _dataset(d, seed)
    init = None
    if init_error is not None:
        rng = np.random.default_rng(init_seed)
        A = rng.standard_normal((d, d))
        G = (A + A.T) / math.sqrt(2 * d)
        init = D.S + G * math.sqrt(init_error / (np.sum(G * G) / d))
    inputs = {}

    def last_input(state):   # omega of the last iteration's channel step against the true indices
        if state.t == iters - 1:
            V = state.V[0][0]
            res = D.h - (attention_indices(D.X, state.S_hat[0]) - V * sigma2(T, np, np.float64) * state.g[:, 0])
            inputs.update(var_ratio_off=float(np.mean(res[:, 0, 1] ** 2)) / V, m_in=V,
                          var_ratio_diag=float(np.mean(res[:, 0, 0] ** 2 + res[:, 1, 1] ** 2)) / (4 * V))

    t0 = time.perf_counter()
    res = gamp_rie(D.X, D.y, ch, D.priors, S=D.S, init=init, init_m=init_error, damping=damping, max_iter=iters,
                   stop="prediction", tol=1e-300, trace=True, on_max_iter="return", callback=last_input)
    tr = res.trace
    stop_at = next(((t + 1, e) for t, (e, c) in enumerate(zip(tr["error"], tr["change"])) if t >= 2 and c <= TOL),
                   None)
    return {"d": d, "seed": seed, "damping": damping, "init_error": init_error, "iterations": res.iterations,
            "error": tr["error"][-1], "m": tr["m"][-1], "delta": tr["delta"][-1], "noise_ratio": tr["noise_ratio"][-1],
            "change": tr["change"][-1], "error_at_default_stop": "" if stop_at is None else stop_at[1],
            "default_stop_iter": "" if stop_at is None else stop_at[0], "error_limit": _aitken(tr["error"]),
            "var_ratio_off": inputs["var_ratio_off"], "var_ratio_diag": inputs["var_ratio_diag"],
            "F_ratio": (1.0 / (ALPHA * tr["delta"][-1])) / fisher(Q0 - inputs["m_in"], Q0),
            "seconds": round(time.perf_counter() - t0, 1)}


def rows(parts=PARTS, only_seeds=None):
    """One dict per measurement of the parts ``parts`` (``only_seeds``: those seeds of the parts "converged")."""
    for part in parts:
        if part == "se":
            yield from se_rows()
        elif part == "trace":
            yield from trace_rows()
        elif part == "damping":
            for damping in (0.0, 0.2, 0.5, 0.8):
                yield {"part": "damping", **gamp(100, 0, 600 if damping == 0.8 else 400, damping=damping)}
        elif part == "informed":
            for e0 in (0.05, 0.12):
                yield {"part": "informed", **gamp(200, 0, 100, init_error=e0)}
        elif part.startswith("converged"):
            d = int(part[len("converged"):])
            seeds, iters = CONVERGED[d]
            for seed in seeds:
                if only_seeds is not None and seed not in only_seeds:
                    continue
                yield {"part": "converged", **gamp(d, seed, iters)}
        else:
            raise ValueError(f"unknown part {part!r}; choose from {PARTS}")


def main(argv=None) -> int:
    parser = data_parser(__doc__, "hardmax_alpha1.csv")
    parser.add_argument("--part", nargs="+", default=list(PARTS), choices=PARTS, help="a part of the runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help='seeds of the parts "converged"')
    args = parser.parse_args(argv)
    return write_rows(args.out, COMMAND, COLUMNS, rows(args.part, args.seeds))


if __name__ == "__main__":
    raise SystemExit(main())
