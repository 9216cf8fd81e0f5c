"""The data scripts of ``scripts/`` for the tests: one imported by name, and the committed data they made."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"


def import_script(name: str):
    """The module ``scripts/<name>.py`` (the row reader ``_rows`` too), with ``scripts/`` on the path only while it
    loads (the scripts import ``_rows`` at the top)."""
    path = str(ROOT / "scripts")
    sys.path.insert(0, path)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(path)


def committed(name: str) -> tuple[str, list[dict]]:
    """The command on the made-by line of ``book/data/<name>`` and its rows (strings, as the CSV holds them)."""
    rows = import_script("_rows")
    return rows.made_by(DATA / name), rows.read_rows(DATA / name)


def made_by_commands(script_name: str, name: str):
    """``(commands, rows)`` of ``book/data/<name>``: each command of its made-by line (several are joined by
    ``"; "``, the later ones with ``--append``) read by ``scripts/<script_name>.py``'s own parser, checked to be
    the command the script rebuilds from those arguments and, where it names ``--out``, to write ``name``; and
    the file's rows."""
    import shlex
    script = import_script(script_name)
    made_by, rows = committed(name)
    commands = []
    for cmd in made_by.split("; "):
        words = shlex.split(cmd.removeprefix(script.COMMAND))
        args = script.parser().parse_args(words)
        assert script.command(args) == cmd
        if "--out" in words:
            assert words[words.index("--out") + 1] == f"book/data/{name}"
        commands.append(args)
    return commands, rows


def made_by_args(script_name: str, name: str):
    """``(args, rows)`` of ``book/data/<name>``, whose made-by line is one command (:func:`made_by_commands`)."""
    commands, rows = made_by_commands(script_name, name)
    assert len(commands) == 1
    return commands[0], rows


def assert_first_order_row(row: dict, ch, priors, tol: float = 2e-4, diagonal: bool = False) -> None:
    """A committed row of ``scripts/deep_cross_se.py`` (first-order prior side, ``L`` layers): it starts at the
    separable fixed point (``sep_mmse_l`` and its first-order ``sep_e_12``), and it is a fixed point of its own
    noises and mixing, each layer's error its prior's at ``delta_l`` (with ``diagonal``, layers 1 and 2's at
    ``delta_l / mix_ll^2``) and ``e_12`` the first order there (:func:`~aimlib.priors.correlated.cross_residual`),
    within ``tol``."""
    from aimlib import state_evolution as se
    from aimlib.priors.correlated import cross_residual

    x, layers = {k: float(val) for k, val in row.items()}, range(1, len(priors) + 1)
    fp = se.fixed_point(x["alpha"], ch, T=2, rho=priors, tol=1e-12)
    assert np.allclose([x[f"sep_mmse_{ell}"] for ell in layers], fp.mmse, atol=1e-9)
    assert x["sep_e_12"] == pytest.approx(se.cross_overlap(x["alpha"], fp.q, fp.mmse, ch, priors).q_12, abs=1e-12)
    deltas = [x[f"delta_{ell}"] for ell in layers]
    scale = [x[f"mix_{ell}{ell}"] if diagonal and ell < 3 else 1.0 for ell in layers]
    mmse = [p.mmse(dl / a**2) for p, dl, a in zip(priors, deltas, scale)]
    assert np.allclose([x[f"mmse_{ell}"] for ell in layers], mmse, atol=tol)
    assert x["e_12"] == pytest.approx(cross_residual(mmse[:2], deltas[:2], x["kappa"], (x["mix_12"], x["mix_21"])),
                                      abs=tol)


def rows_at(rows, d: int, t: int) -> dict:
    """Of a data file's ``rows``, those at ``d`` and iteration ``t``: per column, an array over the data sets (seeds
    in order)."""
    rows = sorted((r for r in rows if int(r["d"]) == d and int(r["t"]) == t), key=lambda r: r["seed"])
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def three_layer_traces() -> dict:
    """The rows of the three-layer traces at alpha = 1 (``deep_three_trace.csv``, ``_d300.csv`` and ``_d400.csv``) by
    ``(d, seed, t)``: the runs that the scripts following them rebuild."""
    traces = {}
    for name in ("deep_three_trace.csv", "deep_three_trace_d300.csv", "deep_three_trace_d400.csv"):
        for r in committed(name)[1]:
            if float(r["alpha"]) == 1.0:
                traces[int(r["d"]), int(r["seed"]), int(r["t"])] = r
    return traces


def by_run(rows) -> dict:
    """A data file's ``rows`` grouped by run: ``(d, seed)`` to that run's rows, in the file's order."""
    runs = {}
    for r in rows:
        runs.setdefault((int(r["d"]), int(r["seed"])), []).append(r)
    return runs
