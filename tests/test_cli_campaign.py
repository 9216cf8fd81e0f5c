"""A property-based campaign over the command line (hypothesis).

For any arguments, the outcome is a valid result (exit 0, numbers in range),
a one-line error naming a parameter (exit 2), or a documented solver failure
(exit 1): never a traceback, a NaN, or an error outside ``[0, 1]`` reported
as success.
"""
from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimlib import cli

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])
NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-320", "1e308", "abc", ""]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e3, max_value=1e3).map(repr),
    st.floats(min_value=1e-8, max_value=2.0).map(repr),
)
SMALL_INTS = st.one_of(st.integers(-3, 24).map(str), st.sampled_from(["1.5", "x", "100000000"]))


@st.composite
def argv(draw):
    """Arguments of ``python -m aimlib``: a command with random values, kept cheap to run."""
    command = draw(st.sampled_from(["se", "threshold", "amp", "gd"]))
    args = [command]
    options = {"--channel": st.sampled_from(["softmax", "hardmax", "linear", "relu"]),
               "--T": SMALL_INTS, "--rho": NUMBERS, "--beta": NUMBERS, "--noise": NUMBERS}
    if command == "gd":
        options = {"--T": SMALL_INTS, "--rho": NUMBERS, "--beta": NUMBERS,
                   "--restarts": SMALL_INTS, "--steps": st.sampled_from(["1", "5", "0", "-2"])}
    if command in ("amp", "gd"):
        options |= {"--d": st.sampled_from(["0", "2", "8", "12", "-5", "x"]), "--seed": SMALL_INTS}
    if command == "amp":
        options["--max-iter"] = st.sampled_from(["1", "20", "0"])
    for name in draw(st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4)):
        args += [name, draw(options[name])]
    if command in ("se", "amp", "gd"):
        args += ["--alpha"] + [draw(NUMBERS) for _ in range(draw(st.integers(1, 2) if command == "se" else st.just(1)))]
    return args


def _numbers(out: str):
    lines = out.strip().splitlines()
    if len(lines) == 1:
        return [float(lines[0])]
    header, *rows = [line.split(",") for line in lines]
    return [dict(zip(header, map(float, row))) for row in rows]


@SETTINGS
@given(args=argv())
def test_any_arguments_give_a_result_a_named_error_or_a_solver_failure(capsys, args):
    try:
        status = cli.main(args)
    except SystemExit as exc:   # argparse
        status = exc.code
    out, err = capsys.readouterr()
    assert status in (0, 1, 2), (args, status)
    assert "Traceback" not in err and "Traceback" not in out
    if status != 0:
        assert out == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert "error:" in err
        return
    for row in _numbers(out):
        values = row.values() if isinstance(row, dict) else [row]
        assert all(not math.isnan(x) for x in values), (args, out)
        if isinstance(row, dict):
            assert all(x >= 0 for k, x in row.items() if k.startswith("mmse")), (args, out)
        if args[0] == "se":      # the Bayes-optimal error: between perfect recovery and the prior's
            assert 0 <= row["mmse"] <= 1 + 1e-12, (args, out)
        if args[0] == "amp":     # never worse than the prior mean (1 up to finite-d fluctuations)
            assert row["mmse"] <= 1.2, (args, out)
