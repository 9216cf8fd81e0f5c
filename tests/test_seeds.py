"""One seed convention (``aimlib._validate.run_streams``): one seed, the same teacher and data everywhere."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from aimlib import _validate as v
from aimlib import cli, gd, sweep
from aimlib.amp import run_amp
from aimlib.backend import to_host
from aimlib.untied import oracle_curve

amp_run = importlib.import_module("aimlib.amp.run")
gd_run = importlib.import_module("aimlib.gd.run")

T, RHO, ALPHA, D = 2, 0.5, 0.1, 12
SPEC = {"method": ["amp", "gd"], "channel": "softmax", "T": T, "rho": RHO, "alpha": [ALPHA], "d": D,
        "options": {"gd": {"dtype": "float64"}}}   # one precision: the draws agree to the last bit


class _Recorded(Exception):
    """Raised where a method would start on its data: the data are recorded, nothing is run."""


@pytest.fixture
def seen(monkeypatch):
    """``(S, X)`` of every run that starts: GAMP-RIE's and gradient descent's entry points record them."""
    got = []

    def record(X, y, *args, S, **kw):
        got.append((to_host(S), to_host(X)))
        raise _Recorded

    monkeypatch.setattr(amp_run, "gamp_rie", record)
    monkeypatch.setattr(gd_run, "train_gd", record)
    return got


def _every_entry_point(seed):
    """The runs of ``seed`` through the functions, the command line and a sweep, for amp and gd."""
    args = ["--T", str(T), "--rho", str(RHO), "--alpha", str(ALPHA), "--d", str(D), "--seed", str(seed),
            "--dtype", "float64"]
    runs = [lambda: run_amp("softmax", T, RHO, ALPHA, D, seed),
            lambda: gd.run_gd(T, RHO, ALPHA, D, seed, dtype=np.float64),
            lambda: cli.main(["amp", "--channel", "softmax", *args]), lambda: cli.main(["gd", *args])]
    runs += [lambda r=r: sweep.execute(r) for r in sweep.expand(dict(SPEC, seeds=[seed]))]
    return runs


def _draws(seed, seen):
    """The ``(S, X)`` each entry point draws from ``seed``."""
    seen.clear()
    for run in _every_entry_point(seed):
        with pytest.raises(_Recorded):
            run()
    assert len(seen) == 6            # 2 functions, 2 commands, 2 sweep methods
    return list(seen)


def test_one_seed_draws_one_teacher_and_one_data_set_in_amp_gd_cli_and_sweeps(seen):
    for seed in (0, 3):
        draws = _draws(seed, seen)
        S0, X0 = draws[0]
        for S, X in draws[1:]:
            np.testing.assert_array_equal(S, S0)
            np.testing.assert_array_equal(X, X0)
    other = _draws(4, seen)[0]
    assert not np.array_equal(other[0], S0) and not np.array_equal(other[1], X0)


def test_the_data_stream_is_that_of_sample_dataset():
    """Stream 0 of an int seed draws what ``default_rng(seed)`` draws (the committed amp rows rely on it)."""
    for seed in (0, 1, 7, 2**40 + 5):
        a, b = v.run_streams(seed).data, np.random.default_rng(seed)
        np.testing.assert_array_equal(a.standard_normal(50), b.standard_normal(50))


def test_the_stream_layout():
    data, test, student = v.run_streams(5)
    assert student == 1000003 * 5 + 7
    for rng, i in ((data, 0), (test, 1)):
        np.testing.assert_array_equal(rng.random(8), np.random.default_rng([5, i]).random(8))
    first, = v.streams(5, 1, start=3)
    np.testing.assert_array_equal(first.random(8), v.streams(5, 4)[3].random(8))
    # a Generator: three children, equal for equal Generators, independent of each other
    a, b = v.run_streams(np.random.default_rng(9)), v.run_streams(np.random.default_rng(9))
    assert all(isinstance(g, np.random.Generator) for g in a)
    for g, h in zip(a, b):
        np.testing.assert_array_equal(g.random(8), h.random(8))
    assert len({float(g.random()) for g in v.run_streams(np.random.default_rng(9))}) == 3
    fresh = v.run_streams(None)
    assert fresh.student is None and not np.array_equal(fresh.data.random(4), v.run_streams(None).data.random(4))


@pytest.mark.parametrize("seed, error, words", [
    (-1, ValueError, "seed must be a non-negative integer"),
    (1.5, TypeError, "seed must be an int, None or numpy.random.Generator"),
    (True, TypeError, "seed must be an int"),
    ("0", TypeError, "seed must be an int"),
])
def test_bad_seeds_are_refused(seed, error, words):
    for split in (v.run_streams, lambda s: v.streams(s, 2), v.generator):
        with pytest.raises(error, match=words):
            split(seed)
    with pytest.raises(error, match=words):
        gd.run_gd(T, RHO, ALPHA, D, seed, steps=1)


def test_run_gd_takes_a_generator():
    kw = dict(restarts=2, steps=20, dtype=np.float64, batch_size=30, return_result=True)
    a, b = (gd.run_gd(T, RHO, 0.3, D, np.random.default_rng(11), **kw) for _ in range(2))
    assert a["mmse_single_all"] == b["mmse_single_all"] and a["test_loss"] == b["test_loss"]
    np.testing.assert_array_equal(a["result"].W, b["result"].W)
    assert a["seed"].startswith("Generator(")
    c = gd.run_gd(T, RHO, 0.3, D, np.random.default_rng(12), **kw)
    assert not np.array_equal(c["data"].S, a["data"].S)


def test_amp_and_gd_draw_the_same_data_from_equal_generators(seen):
    for run in (lambda: run_amp("softmax", T, RHO, ALPHA, D, np.random.default_rng(2)),
                lambda: gd.run_gd(T, RHO, ALPHA, D, np.random.default_rng(2), dtype=np.float64)):
        with pytest.raises(_Recorded):
            run()
    (S1, X1), (S2, X2) = seen
    np.testing.assert_array_equal(S1, S2)
    np.testing.assert_array_equal(X1, X2)


def test_restart_i_starts_the_same_whatever_the_number_of_restarts():
    for seed in (lambda: 5, lambda: np.random.default_rng(5)):
        np.testing.assert_array_equal(to_host(gd.initial_weights(8, 4, 3, seed())[:2]),
                                      to_host(gd.initial_weights(8, 4, 2, seed())))


def test_the_oracle_curve_takes_a_generator():
    deltas = [0.1, 0.5]
    a, b = (oracle_curve(0.5, deltas, 16, 2, seed=np.random.default_rng(3)) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, oracle_curve(0.5, deltas, 16, 2))
