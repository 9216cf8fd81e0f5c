"""A property-based campaign over the command line (hypothesis).

For any arguments, the outcome is a valid result (exit 0, numbers in range),
a one-line error naming an option the user typed (exit 2), or a documented
solver failure (exit 1): never a traceback, a NaN, or an error outside
``[0, 1]`` reported as success.  The arguments come from five families:

* ``plain``: random options and values (the first campaign);
* ``repeat``: one option given twice, which is refused (issue 22, item 12);
* ``nested``: ``--tokens`` JSON nested 4 to 20000 levels deep (item 10; a law needs at most 3);
* ``extreme``: huge, tiny, infinite and NaN numbers for every numeric option (items 11-12);
* ``tiny m``: GAMP in its perfect-recovery regimes (large ``alpha`` at small ``d``),
  where a collapsed prediction ``m -> 0`` must not be reported as a success: a
  run that exits 0 has its measured error consistent with the predicted ``m``
  (the contract of :func:`aimlib.amp.gamp_rie`);
* ``deep``: the deep-hardmax channel (``--layers``, ``--c`` near and at its collisions, ``--teachers``,
  one width ratio per layer or not) in ``se``, ``threshold`` and ``amp`` (issue 36, items 7, 8, 11), with
  ``se``'s ``--cross``, ``--draws`` and ``--seed`` (issue 38, item 4);
* ``surfaces``: ``--tokens-storage``, ``--scheduler`` and ``--shards`` of ``amp``, and ``sweep`` on
  spec paths that are missing, a folder or a device (issue 36, items 1, 2, 8, 11).

``AIM_CAMPAIGN_COUNTS=FILE`` writes the outcomes per family and exit status as JSON to ``FILE``.

The run is bounded: a fixed number of derandomized examples, each cheap.
"""
from __future__ import annotations

import collections
import json
import math
import os
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimlib import cli

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
EXTREME = st.sampled_from(["nan", "inf", "-inf", "-nan", "1e999", "-1e999", "1e300", "-1e300", "1e-300",
                           "1e-320", "-1e5", "0", "-0", "1e9"])
NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-320", "1e308", "abc", ""]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e3, max_value=1e3).map(repr),
    st.floats(min_value=1e-8, max_value=2.0).map(repr),
)
SMALL_INTS = st.one_of(st.integers(-3, 24).map(str), st.sampled_from(["1.5", "x", "100000000"]))
FAMILIES = ["plain", "repeat", "nested", "extreme", "tiny m", "deep", "surfaces"]
#: --c of the deep family: stored, new (tabulated on demand, two layers), at and near the collisions, out of range
DEEP_C = st.sampled_from(["0.5", "2", "-0.5", "0.3", "-2.5", "1", "0", "-1", "0.995", "0.0001", "0.999999999999",
                          "nan", "1e9", "-100", "100", "x"])
OUTCOMES = collections.Counter()
VALID = {"--channel": "softmax", "--T": "2", "--rho": "0.5", "--beta": "1", "--noise": "0", "--restarts": "1",
         "--steps": "1", "--weight-decay": "0", "--d": "8", "--seed": "0", "--max-iter": "1", "--alpha": "0.1",
         "--damping": "0.5", "--tol": "0.001"}


def _options(command, numbers):
    """The options a campaign draws for ``command``, their values from ``numbers``."""
    options = {"--channel": st.sampled_from(["softmax", "hardmax", "linear", "relu"]),
               "--T": SMALL_INTS, "--rho": numbers, "--beta": numbers, "--noise": numbers}
    if command == "gd":
        options = {"--T": SMALL_INTS, "--rho": numbers, "--beta": numbers, "--restarts": SMALL_INTS,
                   "--steps": st.sampled_from(["1", "5", "0", "-2"]), "--weight-decay": numbers}
    if command in ("amp", "gd"):
        options |= {"--d": st.sampled_from(["0", "2", "8", "12", "-5", "x"]), "--seed": SMALL_INTS}
    if command == "amp":
        options |= {"--max-iter": st.sampled_from(["1", "20", "0"]), "--damping": numbers, "--tol": numbers}
    return options


@st.composite
def argv(draw):
    """``(family, arguments of python -m aimlib)``, kept cheap to run."""
    family = draw(st.sampled_from(FAMILIES))
    if family == "tiny m":   # perfect-recovery regimes of GAMP: many samples per parameter, small d
        channel = draw(st.sampled_from(["softmax", "linear", "hardmax"]))
        T = "2" if channel == "hardmax" else draw(st.sampled_from(["2", "3"]))
        return family, ["amp", "--channel", channel, "--T", T,
                        "--alpha", draw(st.sampled_from(["1", "3", "10", "30", "100"])),
                        "--d", draw(st.sampled_from(["4", "6", "8", "12"])),
                        "--rho", draw(st.sampled_from(["0.0001", "0.1", "0.5", "2"])),
                        "--seed", draw(st.sampled_from(["0", "1", "2"]))]
    if family == "nested":   # --tokens first, so that its error is the first one
        depth = draw(st.sampled_from([4, 50, 5000, 20000]))
        key, open_, close = draw(st.sampled_from([("p", "[", "]"), ("cov", "[", "]"), ("c", '{"a": ', "}")]))
        law = '{"name": "correlated", "%s": %s1%s}' % (key, open_ * depth, close * depth)
        return family, [draw(st.sampled_from(["amp", "gd"])), "--tokens", law, "--alpha", "0.1", "--d", "8"]
    if family in ("deep", "surfaces"):
        return family, draw(_deep() if family == "deep" else _surfaces())
    command = draw(st.sampled_from(["se", "threshold", "amp", "gd"]))
    options = _options(command, EXTREME if family == "extreme" else NUMBERS)
    if family == "repeat":   # valid values only, so that the repeat is the one thing wrong
        names = sorted(options) + (["--alpha"] if command != "threshold" else [])
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        twice = draw(st.sampled_from(chosen))
        return family, [command] + [x for n in chosen + [twice] for x in (n, VALID[n])]
    args = [command]
    for name in draw(st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4)):
        args += [name, draw(options[name])]
    if command in ("se", "amp", "gd"):
        values = EXTREME if family == "extreme" else NUMBERS
        args += ["--alpha"] + [draw(values) for _ in range(draw(st.integers(1, 2) if command == "se" else st.just(1)))]
    return family, args


@st.composite
def _deep(draw):
    """``se``, ``threshold`` or ``amp`` of the deep-hardmax channel with some of its options."""
    command = draw(st.sampled_from(["se", "threshold", "amp"]))
    layers = draw(st.sampled_from(["2", "3", "2", "3", "4", "x", None]))
    c = draw(st.one_of(st.sampled_from(["0.5", "2", "-0.5"]), DEEP_C))
    if layers == "3" and c in ("0.3", "-2.5"):       # a new c of three layers takes 30 s to tabulate
        c = "0.5"
    args = [command, "--channel", "deep-hardmax"] + (["--layers", layers] if layers else []) + ["--c", c]
    if draw(st.booleans()):
        args += ["--teachers", draw(st.sampled_from(["centred", "centred", "wishart", "nope"]))]
    if command != "threshold" or draw(st.integers(0, 3)) == 0:     # one width ratio per layer, mostly valid
        count = draw(st.sampled_from([int(layers) if layers in ("2", "3") else 2] * 3 + [1, 3]))
        args += ["--rho"] + [draw(st.sampled_from(["0.5", "0.5", "1", "0", "2e3"])) for _ in range(count)]
    if command != "threshold":
        args += ["--alpha", draw(st.sampled_from(["0.1", "1", "1", "0", "1e300"]))]
    if command == "se":       # the cross overlap: first order, or iterated on few draws (the default 1e5 take ~10 s)
        args += draw(st.sampled_from([["--cross", "first-order"], ["--draws", "1000"], ["--cross", "nope"], [],
                                      ["--draws", "2000", "--seed", "1"], ["--cross", "iterated", "--draws", "10"]]))
    if command == "amp":
        args += ["--d", draw(st.sampled_from(["8", "12"])), "--max-iter", "30", "--on-max-iter", "return"]
    return args


@st.composite
def _surfaces(draw):
    """``amp`` with ``--tokens-storage``, ``--scheduler`` and ``--shards``, or ``sweep`` on a bad spec path."""
    if draw(st.booleans()):
        return ["sweep", draw(st.sampled_from(["/nonexistent/spec.yaml", "/tmp", "/dev/null", "/dev/zero", ""])),
                "--no-progress"] + (["--scheduler", "serial"] if draw(st.booleans()) else [])
    args = ["amp", "--alpha", "0.1", "--d", "8", "--max-iter", "20", "--on-max-iter", "return"]
    if draw(st.booleans()):
        args += ["--tokens-storage", draw(st.sampled_from(["store", "regenerate", "disk"]))]
    if draw(st.booleans()):     # 'local' starts a cluster (tests/test_dask_security.py covers it)
        args += ["--scheduler", draw(st.sampled_from(["serial", "inproc://x", "tcp://127.0.0.1:8786", "tls://",
                                                      "tls://host", "ws://h:1", "local:", ""]))]
    if draw(st.booleans()):
        args += ["--shards", draw(st.sampled_from(["0", "-1", "2", "1000000", "x", "1.5"]))]
    return args


def _names_an_option(line: str, args) -> bool:
    """The error line names an option the user typed (``--rho``, or ``rho`` as the library writes it)."""
    typed = {a for a in args if a.startswith("--")} | {"--alpha", "--d", "--spec"}   # required (SPEC: "spec")
    for opt in typed:
        for name in (opt, opt[2:], opt[2:].replace("-", "_")):
            if re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w])", line):
                return True
    return False


#: the columns of an amp row that are words, not numbers (``--on-max-iter return/warn``)
WORD_COLUMNS = {"reason": ("tol", "perfect", "oscillating", "max_iter")}


def _numbers(out: str):
    """The printed result: one number, or one dict per CSV row, its numeric columns as floats (the word
    columns of :data:`WORD_COLUMNS` left out, after checking that they hold one of their words)."""
    lines = out.strip().splitlines()
    if len(lines) == 1:
        return [float(lines[0])]
    header, *rows = [line.split(",") for line in lines]
    parsed = []
    for row in rows:
        cells = dict(zip(header, row))
        for name, words in WORD_COLUMNS.items():
            assert cells.pop(name, words[0]) in words, (name, row)
        parsed.append({k: float(x) for k, x in cells.items()})
    return parsed


def _consistent(res, d: int) -> bool:
    """The documented contract of a converged GAMP run (:func:`aimlib.amp.gamp_rie`, Raises): measured
    error ``e`` and prediction ``m`` agree within a factor ``1 + CHECK_K/sqrt(d)`` plus the floor
    ``max(resolution, m_floor, sqrt(eps))``, and ``e`` is within 0.1 of the prior mean's error."""
    from aimlib.amp import gamp

    opts = res.options or {}
    eps = float(np.sqrt(np.finfo(np.dtype(opts.get("dtype", "float64"))).eps))
    floor = max(opts.get("resolution") or 0.0, opts.get("m_floor") or 0.0, eps)
    slack = 1.0 + getattr(gamp, "CHECK_K", 10.0) / math.sqrt(d)
    for e, m in zip(np.atleast_1d(res.mmse), np.atleast_1d(res.m)):
        if max(e, m) > slack * min(e, m) + floor:
            return False
    return True


@SETTINGS
@given(case=argv())
def test_any_arguments_give_a_result_a_named_error_or_a_solver_failure(capsys, monkeypatch, case):
    _check_outcome(capsys, monkeypatch, case)


@settings(SETTINGS, max_examples=60)
@given(case=st.sampled_from(["deep", "surfaces"]).flatmap(
    lambda family: (_deep() if family == "deep" else _surfaces()).map(lambda args: (family, args))))
def test_the_deep_channel_and_the_sharding_surfaces_likewise(capsys, monkeypatch, case):
    _check_outcome(capsys, monkeypatch, case)


def _check_outcome(capsys, monkeypatch, case):
    """Run ``python -m aimlib`` on ``case = (family, args)`` and hold its outcome to the campaign's rules."""
    from aimlib.amp import run as amp_run

    family, args = case
    runs = []
    gamp_rie = amp_run.gamp_rie

    def recorded(*a, **k):   # the GAMP result behind an amp row, for the consistency check
        runs.append(gamp_rie(*a, **k))
        return runs[-1]

    monkeypatch.setattr(amp_run, "gamp_rie", recorded)
    try:
        status = cli.main(args)
    except SystemExit as exc:   # argparse
        status = exc.code
    out, err = capsys.readouterr()
    err = "".join(line for line in err.splitlines(True) if not line.startswith("deep-hardmax: tabulat"))  # progress
    OUTCOMES[f"{family}: exit {status}"] += 1
    assert status in (0, 1, 2), (args, status)
    assert "Traceback" not in err and "Traceback" not in out
    if family == "repeat":
        assert status == 2 and "given twice" in err, (args, err)
    if family == "nested":
        assert status == 2 and "--tokens" in err, (args[:2], args[2][:80], err)
    if status != 0:
        assert out == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert "error:" in err
        if status == 2:
            assert _names_an_option(err, args), (args, err)
        return
    for row in _numbers(out):
        values = row.values() if isinstance(row, dict) else [row]
        assert all(not math.isnan(x) for x in values), (args, out)
        if isinstance(row, dict):
            assert all(x >= 0 for k, x in row.items() if k.startswith("mmse")), (args, out)
        errors = [x for k, x in row.items() if k.startswith("mmse")] if isinstance(row, dict) else []
        if args[0] == "se":      # the Bayes-optimal error (or GAMP-RIE's): between perfect recovery and the prior's
            assert errors and all(0 <= e <= 1 + 1e-12 for e in errors), (args, out)
        if args[0] == "amp":     # never worse than the prior mean (1 up to finite-d fluctuations)
            assert errors and all(e <= 1.2 for e in errors), (args, out)
    if args[0] == "amp" and runs and runs[-1].converged:
        d = int(_numbers(out)[0]["d"])
        assert _consistent(runs[-1], d), (args, out, runs[-1].m, runs[-1].mmse)


def teardown_module(module):
    """With ``AIM_CAMPAIGN_COUNTS`` set, write the outcomes per family and exit status there."""
    if os.environ.get("AIM_CAMPAIGN_COUNTS"):
        with open(os.environ["AIM_CAMPAIGN_COUNTS"], "w") as f:
            json.dump(dict(sorted(OUTCOMES.items())), f, indent=1)
