"""GAMP-RIE's stopping rules against runs taken to their fixed point.

For each case (a channel, ``T``, ``alpha``, ``d``, seed, widths; the library's default damping)
it runs GAMP-RIE three ways on the same data:

* ``estimate``: the former default, a small step (``stop='estimate'``, ``tol = 1e-4``);
* ``window``: the default, the distance to the fixed point estimated over a window
  (``stop='window'``, :class:`aimlib.iteration.WindowRule`, ``tol = 1e-4``);
* ``fixed point``: the window rule at ``tol = 1e-6`` (the tolerance divided by 100) with a cap of
  ``REFERENCE_CAP`` iterations, the reference;
* ``long run``, where the reference does not converge (a cycle, a wander, the cap): the iteration
  run to the cap without stopping (``stop='prediction'`` at ``tol = 1e-300``), its error averaged over
  the last quarter of the run (``tail_mean``, with ``tail_range``); this mean is then the reference.

It records each run's error, iterations and reason, the relative error of the two rules to the
reference and, for a run that ends on a cycle or a wander (``oscillating``), its period (0 for a
wander) and amplitude in units of ``sqrt(m)``.  The untied channel has its own rule (``stop =
'prediction'``, :func:`aimlib.untied.untied_gamp`): its rows compare that rule with itself at
``tol / 100``.

Run: ``python benchmarks/bench_stopping.py [--quick]`` (``--quick``: the cases at ``d <= 80``).
Writes ``benchmarks/results/stopping.json``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _common import write_record

from aimlib.amp import run_amp
from aimlib.channels import DeepAttention, NoisySoftmax
from aimlib.channels.heads import ConcatenatedSoftmax
from aimlib.errors import ConvergenceError
from aimlib.untied import run_untied_gamp

#: the reference's iteration cap, by d
REFERENCE_CAP = {80: 1500, 200: 600}


def _case(name, channel, T, alpha, d, seed=0, rho=0.5, **kw):
    return {"name": name, "channel": channel, "T": T, "alpha": alpha, "d": d, "seed": seed, "rho": rho, "kw": kw}


CASES = ([_case("hardmax", "hardmax", 2, a, d, s) for d in (80, 200) for a in (0.4, 0.7, 1.0)
          for s in ((0, 1) if (a, d) == (1.0, 80) else (0,))]
         + [_case("hardmax", "hardmax", 3, 0.3, 80),
            _case("softmax", "softmax", 2, 0.1, 80), _case("softmax", "softmax", 2, 0.15, 80),
            _case("softmax", "softmax", 3, 0.03, 80), _case("softmax", "softmax", 3, 0.06, 80)]
         + [_case(f"deep {t}", lambda: DeepAttention(c=0.5), 2, a, 80, rho=(0.5, 0.5), teachers=t)
            for t in ("centred", "wishart") for a in (0.5, 1.0)]
         + [_case("heads", lambda: ConcatenatedSoftmax(2), 2, a, 80, rho=(0.5, 0.3)) for a in (0.1, 0.3)]
         + [_case("label noise", lambda: NoisySoftmax(noise=1e-2), 2, a, 80) for a in (0.1, 0.4)]
         + [_case("untied", "untied", 2, a, 80) for a in (0.1, 0.2)])


def _errors(r) -> float:
    """The total measured error of a run (summed over the layers of a deep or heads channel)."""
    return float(np.sum(r["mmse"]))


def _one_run(case, **kw) -> dict:
    """One GAMP-RIE run of ``case`` with the stopping options ``kw``: error, iterations, reason, cycle."""
    t0 = time.perf_counter()
    if case["channel"] == "untied":
        kw = {k: x for k, x in kw.items() if k != "stop"}
        r = run_untied_gamp(case["alpha"], case["T"], case["d"], case["rho"], seed=case["seed"],
                            on_max_iter="return", **kw)
        return {"mmse": float(r.mmse), "iterations": int(r.iterations), "reason": r.reason,
                "converged": bool(r.converged), "seconds": round(time.perf_counter() - t0, 2)}
    channel = case["channel"]() if callable(case["channel"]) else case["channel"]
    r = run_amp(channel, case["T"], case["rho"], case["alpha"], case["d"], case["seed"], on_max_iter="return",
                trace=True, **case["kw"], **kw)
    out = {"mmse": _errors(r), "iterations": r["iterations"], "reason": r["reason"],
           "converged": bool(r["converged"]), "seconds": round(time.perf_counter() - t0, 2)}
    if r["cycle"] is not None:
        out.update(period=r["cycle"][0], amplitude=r["cycle"][1])
    tail = [float(np.sum(e)) for e in r["trace"]["error"][-(r["iterations"] // 4):]]
    out.update(tail_mean=float(np.mean(tail)), tail_range=(min(tail), max(tail)))
    return out


def run_case(case) -> dict:
    """The three ways on one case, with the relative error of each rule to the reference."""
    row = {k: case[k] for k in ("name", "T", "alpha", "d", "seed", "rho")} | {"options": case["kw"]}
    untied = case["channel"] == "untied"
    ways = {"estimate": {"stop": "estimate"}, "window": {},
            "fixed point": {"tol": (1e-9 if untied else 1e-6), "max_iter": REFERENCE_CAP[case["d"]]}}
    for way, kw in ways.items():
        if untied and way == "estimate":
            continue
        try:
            row[way] = _one_run(case, **kw)
        except ConvergenceError as exc:
            row[way] = {"failed": str(exc)}
    if not untied and row["fixed point"].get("reason") in ("oscillating", "max_iter"):
        row["long run"] = _one_run(case, stop="prediction", tol=1e-300, max_iter=REFERENCE_CAP[case["d"]])
    ref = row["long run"]["tail_mean"] if "long run" in row else row["fixed point"].get("mmse")
    for way in ("estimate", "window"):
        if ref is not None and "mmse" in row.get(way, {}):
            row[way]["relative_to_fixed_point"] = row[way]["mmse"] / ref - 1.0
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the cases at d <= 80 only")
    args = parser.parse_args(argv)
    rows = []
    for case in CASES:
        if args.quick and case["d"] > 80:
            continue
        rows.append(run_case(case))
        print({k: rows[-1][k] for k in ("name", "T", "alpha", "d", "seed")},
              {w: (rows[-1][w].get("mmse"), rows[-1][w].get("iterations"), rows[-1][w].get("reason"))
               for w in ("estimate", "window", "fixed point", "long run") if w in rows[-1]}, flush=True)
    write_record("stopping", {"command": "python benchmarks/bench_stopping.py" + (" --quick" if args.quick else ""),
                              "reference_cap": REFERENCE_CAP, "rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
