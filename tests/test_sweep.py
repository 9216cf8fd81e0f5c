"""Experiment sweeps (aimlib.sweep): spec validation, run keys, schedulers, caching, resume, CLI."""
from __future__ import annotations

import hashlib
import io
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimlib import cli, sweep
from aimlib import state_evolution as se
from aimlib.channels import CHANNELS, DeepAttention, make_channel
from aimlib.priors import Centred
from aimlib.sweep import Run, SpecError, SweepSpec, expand, load_spec, read_results, run_sweep

ROOT = Path(__file__).resolve().parents[1]

BASE = {"method": "se", "T": 2, "rho": 0.5, "alpha": [0.05, 0.1]}

#: a small sweep with every method: SE, tiny AMP (d = 20), tiny GD (d = 15)
SMALL = {
    "name": "small",
    "method": ["se", "amp", "gd", "gd_avg"],
    "T": [2, 3],
    "rho": 0.5,
    "alpha_bar": [0.45, 0.6],   # at T = 3, alpha_bar = 0.3 (n = 12 samples) GAMP's prediction collapses
    "d": 20,
    "seeds": [0],
    "options": {"amp": {"max_iter": 60},
                "gd": {"steps": 40},
                "gd_avg": {"steps": 40, "restarts": 3}},
}


def spec_with(**changes):
    s = dict(BASE)
    for k, val in changes.items():
        if val is KeyError:
            s.pop(k, None)
        else:
            s[k] = val
    return s


def cli_run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "aimlib", "sweep", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, **kw)


# ---------------------------------------------------------------------------
# spec validation: every error names the field
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("changes, field, words", [
    ({"alpah": 0.1}, "alpah", "did you mean 'alpha'"),
    ({"method": "mcmc"}, "method", "'se'"),
    ({"method": ["se", "gdd"]}, "method[1]", "did you mean 'gd'"),
    ({"T": 1}, "T", ">= 2"),
    ({"T": "two"}, "T", "integer"),
    ({"T": [2, 2.5]}, "T[1]", "integer"),
    ({"rho": -0.5}, "rho", "> 0"),
    ({"rho": 1e-6}, "rho", "must be in [0.0001, 10000.0], got 1e-06"),
    ({"rho": [0.5, 1e5]}, "rho[1]", "[0.0001, 10000.0]"),
    ({"method": "amp", "d": 20, "rho": math.inf}, "rho", "finite"),
    ({"alpha": [0.1, -1]}, "alpha[1]", "> 0"),
    ({"alpha": [0.1, True]}, "alpha[1]", "real number"),
    ({"alpha": []}, "alpha", "empty"),
    ({"alpha": {"start": 0.01, "stop": 0.1}}, "alpha.num", "required"),
    ({"alpha": {"start": 0.1, "stop": 0.01, "num": 3}}, "alpha.stop", ">= start"),
    ({"alpha": {"start": 0.01, "stop": 0.1, "num": 3, "spacing": "geom"}}, "alpha.spacing", "'log'"),
    ({"alpha_bar": 0.3}, "alpha", "exactly one"),
    ({"alpha": KeyError}, "alpha", "exactly one"),
    ({"T": KeyError}, "T", "required"),
    ({"channel": "sigmoid"}, "channel", "'softmax'"),
    ({"seeds": [-1]}, "seeds[0]", ">= 0"),
    ({"beta": 0}, "beta", "> 0"),
    ({"noise": -1.0}, "noise", ">= 0"),
    ({"backend": "torch"}, "backend", "'numpy'"),
    ({"name": 3}, "name", "string"),
    ({"method": "amp"}, "d", "required"),
    ({"method": "amp", "d": 1}, "d", ">= 2"),
    ({"method": "amp", "d": 20, "options": {"amp": {"max_iter": 0}}}, "options.amp.max_iter", ">= 1"),
    ({"method": "amp", "d": 20, "options": {"amp": {"max_itr": 10}}}, "options.amp.max_itr",
     "did you mean 'max_iter'"),
    ({"method": "amp", "d": 20, "options": {"amp": {"damping": 1.0}}}, "options.amp.damping", "< 1"),
    ({"method": "gd", "d": 20, "options": {"gd": {"lr": "fast"}}}, "options.gd.lr", "real number"),
    ({"method": "gd", "d": 20, "options": {"gd": {"steps": [10, 0]}}}, "options.gd.steps[1]", ">= 1"),
    ({"method": "gd_avg", "d": 20, "options": {"gd_avg": {"restarts": 1}}}, "options.gd_avg.restarts",
     ">= 2"),
    ({"options": {"gd": {"steps": 10}}}, "options.gd", "not in 'method'"),
    ({"options": {"mcmc": {}}}, "options.mcmc", "unknown key"),
    ({"options": [1, 2]}, "options", "mapping"),
    ({"method": "gd", "d": 20, "channel": "hardmax"}, "channel", "softmax"),
    ({"method": "gd", "d": 20, "noise": 0.1}, "noise", "must be 0"),
    ({"channel": "hardmax", "T": 4}, "T", "T <= 3 only"),
    ({"channel": "hardmax", "T": [2, 3, 4]}, "T", "got T = 4"),
    # state-evolution options that the solver of some run would not use, or a solver it lacks
    ({"options": {"se": {"max_iter": 100}}}, "options.se.max_iter", "closed-form solver"),
    ({"channel": "linear", "options": {"se": {"damping": 0.5}}}, "options.se.damping",
     "closed-form solver"),
    ({"channel": ["hardmax", "softmax"], "options": {"se": {"max_iter": 100}}},
     "options.se.max_iter", "channel 'softmax'"),
    ({"options": {"se": {"solver": ["iterate", "closed"], "max_iter": 100}}}, "options.se.max_iter",
     "solver 'closed'"),
    ({"channel": "hardmax", "options": {"se": {"solver": "closed"}}}, "options.se.solver",
     "noiseless softmax or linear"),
    ({"noise": 0.1, "options": {"se": {"solver": "closed"}}}, "options.se.solver",
     "noiseless softmax or linear"),
])
def test_spec_errors_name_the_field(changes, field, words):
    with pytest.raises(SpecError) as info:
        SweepSpec.from_dict(spec_with(**changes))
    msg = str(info.value)
    assert f"spec field {field!r}" in msg
    assert words in msg
    assert "\n" not in msg


def test_hardmax_specs_reach_three_tokens():
    # the one list of each channel's largest T (aimlib.channels.registry.MAX_T)
    spec = SweepSpec.from_dict(spec_with(channel="hardmax", T=[2, 3], method=["se", "amp"], d=20))
    assert spec.T == (2, 3)


def test_rho_inf_is_the_gaussian_prior_of_se():
    assert SweepSpec(method="se", T=2, rho=[0.5, math.inf], alpha=0.1).rho == (0.5, math.inf)


def test_se_options_that_the_solver_uses_are_accepted():
    iterate = {"se": {"solver": "iterate", "max_iter": 10000, "damping": 0.1, "tol": 1e-10}}
    for changes in ({"options": iterate},
                    {"channel": "hardmax", "options": {"se": {"max_iter": 500, "damping": 0.2}}},
                    {"noise": 0.01, "options": {"se": {"max_iter": 500}}},
                    {"options": {"se": {"solver": ["auto", "closed"], "tol": 1e-10}}},
                    {"rho": math.inf, "options": {"se": {"solver": "closed"}}}):
        assert expand(spec_with(**changes))
    run = expand(spec_with(alpha=0.1, options=iterate))[0]
    assert sweep.execute(run)["mmse"] == pytest.approx(0.3922, abs=2e-4)  # the iterated SE


def test_spec_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: se\nT: [2, 3\nrho: 0.5\n")
    with pytest.raises(SpecError, match=r"not valid YAML at line \d+"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- se\n- amp\n")
    with pytest.raises(SpecError, match="mapping"):
        load_spec(tmp_path / "list.yaml")


def test_spec_constructors_agree(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("method: se\nT: [2, 3]\nrho: 0.5\nalpha: [0.05, 0.1]\n")
    a = load_spec(path)
    b = SweepSpec(method="se", T=[2, 3], rho=0.5, alpha=[0.05, 0.1])
    c = SweepSpec.from_dict(b.to_dict())
    assert a == b == c
    assert a.T == (2, 3) and a.method == ("se",) and a.seeds == (0,)


# ---------------------------------------------------------------------------
# expansion and run keys
# ---------------------------------------------------------------------------

def test_expansion_counts():
    spec = {"method": ["se", "amp"], "T": [2, 3], "rho": 0.5, "alpha": [0.05, 0.1, 0.15],
            "d": [20, 30], "seeds": [0, 1, 2]}
    runs = expand(spec)
    # SE ignores d and seeds: 2 T x 3 alpha; AMP: 2 T x 3 alpha x 2 d x 3 seeds
    assert sum(r.method == "se" for r in runs) == 6
    assert sum(r.method == "amp" for r in runs) == 36
    assert len({r.key for r in runs}) == len(runs) == 42
    # an option given as a list is a grid axis
    spec["options"] = {"amp": {"damping": [0.3, 0.5]}}
    assert len(expand(spec)) == 6 + 72
    # duplicates are merged (0.1 + 0.2 and 0.3 are one alpha after rounding)
    assert len(expand(spec_with(alpha=[0.3, 0.1 + 0.2, 0.3]))) == 1


def test_removing_repeats_is_linear():
    calls = []

    class Counted(float):
        __hash__ = float.__hash__

        def __eq__(self, other):
            calls.append(1)
            return float.__eq__(self, other)

    n = 2000
    values = [Counted(i) for i in range(n)] + [Counted(i) for i in range(n)]
    out = sweep.fields.unique(values)
    assert len(calls) <= 2 * n  # one comparison per repeat, not one per pair (~n^2)
    assert out == tuple(range(n))


def test_a_million_point_range_expands_in_linear_time():
    t0 = time.perf_counter()
    spec = SweepSpec(method="se", T=2, rho=0.5, alpha={"start": 1e-3, "stop": 1.0, "num": 10**6})
    assert len(spec.alpha) == 10**6 and spec.alpha[0] == 1e-3 and spec.alpha[-1] == 1.0
    assert time.perf_counter() - t0 < 30  # about a second; quadratic was hours


@pytest.mark.parametrize("changes, field, words", [
    ({"alpha": {"start": 0.01, "stop": 1, "num": 10**9}}, "alpha.num", "<= 1000000, got 1000000000"),
    ({"alpha_bar": {"start": 0.01, "stop": 1, "num": 10**6 + 1}, "alpha": KeyError}, "alpha_bar.num",
     "<= 1000000"),
    ({"T": list(range(2, 12)), "alpha": {"start": 0.01, "stop": 1, "num": 200_000}}, "alpha",
     "expands to 2000000 runs, more than the limit of 1000000"),
    ({"method": ["se", "amp"], "d": [10, 20], "seeds": list(range(2000)),
      "alpha": {"start": 0.01, "stop": 1, "num": 1000}}, "seeds", "expands to 4001000 runs"),
    ({"method": "amp", "d": 20, "alpha": {"start": 0.01, "stop": 1, "num": 100},
      "options": {"amp": {"max_iter": list(range(1, 20001))}}}, "options.amp.max_iter",
     "limit of 1000000 (this field has 20000 values)"),
])
def test_absurd_grids_are_refused(changes, field, words):
    with pytest.raises(SpecError) as info:
        SweepSpec.from_dict(spec_with(**changes))
    assert f"spec field {field!r}" in str(info.value) and words in str(info.value)
    assert sweep.MAX_RUNS == 10**6


def test_ranges_and_alpha_bar():
    lin = expand(spec_with(alpha={"start": 0.01, "stop": 0.2, "num": 20}))
    assert [r.alpha for r in lin][:3] == [0.01, 0.02, 0.03] and lin[-1].alpha == 0.2
    log = expand(spec_with(alpha={"start": 0.001, "stop": 0.1, "num": 3, "spacing": "log"}))
    assert [r.alpha for r in log] == pytest.approx([0.001, 0.01, 0.1], rel=1e-12)
    runs = expand(spec_with(alpha=KeyError, alpha_bar=[0.4], T=[2, 3]))
    assert [(r.T, r.alpha, r.alpha_bar) for r in runs] == [(2, 0.1, 0.4), (3, 0.04, 0.4)]


def test_keys_are_stable():
    # golden keys: a change here invalidates every committed cache (sweeps/*.csv)
    se_run = Run(method="se", channel="softmax", T=2, rho=0.5, alpha=0.1, beta=1.0)
    assert se_run.key == "ccc969909271dbb6"
    amp_run = Run(method="amp", channel="softmax", T=2, rho=0.5, alpha=0.1, beta=1.0, d=300, seed=0,
                  options=(("dtype", "float64"), ("max_iter", 300)))
    assert amp_run.key == "67689497f6333f0f"
    keys = {r.key for r in expand(SMALL)}
    # the order of lists, the backend and the spec's name do not matter
    shuffled = dict(SMALL, T=[3, 2], alpha_bar=[0.6, 0.45], method=["gd_avg", "gd", "amp", "se"],
                    backend="numpy", name="other")
    assert {r.key for r in expand(shuffled)} == keys
    # defaults written out explicitly give the same runs
    explicit = dict(SMALL, options={**SMALL["options"], "amp": {"max_iter": 60, "dtype": "float64"}})
    assert {r.key for r in expand(explicit)} == keys
    # any parameter of the run changes its key; SE keys ignore d and seeds
    assert {r.key for r in expand(dict(SMALL, seeds=[1]))} & keys == {
        r.key for r in expand(SMALL) if r.method == "se"}
    assert Run(method="se", channel="softmax", T=2, rho=0.5, alpha=0.1, beta=2.0).key != se_run.key


# ---------------------------------------------------------------------------
# running: local pool vs a real dask LocalCluster, caching, failures
# ---------------------------------------------------------------------------

def small_specs():
    """The small sweep: SE + AMP at d = 20 and GD at d = 15."""
    amp = dict(SMALL, method=["se", "amp"], options={"amp": SMALL["options"]["amp"]})
    gd = dict(SMALL, method=["gd", "gd_avg"], d=15,
              options={"gd": SMALL["options"]["gd"], "gd_avg": SMALL["options"]["gd_avg"]})
    return [amp, gd]


def metrics(rows):
    cols = ("mmse", "q", "iterations", "mmse_single", "mmse_averaged", "n")
    return {r["key"]: tuple(r[c] for c in cols) for r in rows}


def assert_same_table(a, b):
    ma, mb = metrics(a), metrics(b)
    assert set(ma) == set(mb)
    for key in ma:
        for x, y in zip(ma[key], mb[key]):
            if isinstance(x, float):
                assert y == pytest.approx(x, rel=1e-6, abs=1e-9), key
            else:
                assert x == y, key


@pytest.fixture(scope="module")
def local_table(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "small.csv"
    reports = [run_sweep(s, out, workers=2, progress=False) for s in small_specs()]
    assert all(r.complete and not r.failures for r in reports)
    return out, reports


def test_local_run_table(local_table):
    out, reports = local_table
    rows = read_results(out)
    assert len(rows) == sum(r.n_runs for r in reports) == 4 + 4 + 8
    for r in rows:
        assert r["aimlib_version"] and r["hostname"] and r["timestamp"] and r["backend"]
        assert r["seconds"] > 0 and 0 <= r["mmse"] < 2
        if r["method"] == "se":
            assert r["d"] is None and r["seed"] is None
            assert r["q"] == pytest.approx(1.5 - r["mmse"])
        elif r["method"] == "amp":
            assert r["n"] == round(r["alpha"] * 400) and r["iterations"] >= 1
        else:
            assert r["d"] == 15 and r["steps"] == 40
            want = r["mmse_averaged"] if r["method"] == "gd_avg" else r["mmse_single"]
            assert r["mmse"] == want
    # the published SE value at alpha_bar = 0.6 (T = 2, rho = 0.5, alpha = 0.15)
    se = {(r["T"], r["alpha_bar"]): r["mmse"] for r in rows if r["method"] == "se"}
    assert se[(2, 0.6)] == pytest.approx(0.1283, abs=2e-4) and se[(3, 0.6)] == pytest.approx(se[(2, 0.6)])
    # the spec is complete, so the file is in expansion order of the last spec, then the rest
    last = [r.key for r in expand(small_specs()[1])]
    assert [r["key"] for r in rows][: len(last)] == last


def test_dask_local_cluster_gives_the_same_table(local_table, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "dask.csv"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        reports = [run_sweep(s, out, scheduler=client, progress=False) for s in small_specs()]
        assert client.status == "running"  # a client we pass in is left open
    assert all(r.complete and r.n_computed == r.n_runs and not r.failures for r in reports)
    assert_same_table(read_results(local_table[0]), read_results(out))


def test_rerun_of_a_complete_sweep_computes_nothing(local_table, monkeypatch):
    out, _ = local_table
    before = out.read_bytes()

    def forbidden(run):
        raise AssertionError("a cached run was computed again")

    monkeypatch.setattr(sweep.runners, "execute", forbidden)
    for s in small_specs():
        for workers in (1, 2):
            rep = run_sweep(s, out, workers=workers, progress=False)
            assert rep.n_computed == 0 and rep.n_cached == rep.n_runs and not rep.failures
    assert out.read_bytes() == before


def test_failed_runs_are_listed_beside_the_results_until_they_succeed(tmp_path, monkeypatch):
    from aimlib.sweep import failures_path, load_failures

    out, broken, real = tmp_path / "r.csv", [True], sweep.execute

    def flaky(run):
        if run.alpha == 0.1 and broken:
            raise RuntimeError("inconsistent   state")
        return real(run)

    monkeypatch.setattr(sweep.runners, "execute", flaky)
    spec = spec_with(alpha=[0.05, 0.1])
    with pytest.warns(RuntimeWarning, match="inconsistent state"):
        rep = run_sweep(spec, out, workers=1, progress=False)
    assert "1 failed, listed in r.failures.csv" in rep.summary()
    (failed,) = load_failures(spec, out)
    assert failed["message"] == "RuntimeError: inconsistent state" and failed["alpha"] == 0.1
    assert failed["key"] == rep.failures[0][0].key and failed["T"] == 2 and failed["d"] is None   # an SE run
    assert len(read_results(out)) == 1                                # the other run has its row
    with pytest.warns(RuntimeWarning):                                # fails again: listed once
        run_sweep(spec, out, workers=1, progress=False)
    assert len(load_failures(spec, out)) == 1
    broken.clear()
    rep = run_sweep(spec, out, workers=1, progress=False)
    assert rep.complete and not failures_path(out).exists() and load_failures(spec, out) == []


def test_only_missing_runs_are_computed_and_failures_are_retried(tmp_path, monkeypatch):
    out = tmp_path / "r.csv"
    calls, broken = [], [True]
    real = sweep.execute

    def counting(run):
        calls.append(run.key)
        if run.alpha == 0.1 and broken:
            raise RuntimeError("boom")
        return real(run)

    monkeypatch.setattr(sweep.runners, "execute", counting)
    with pytest.warns(RuntimeWarning, match="RuntimeError: boom"):
        rep = run_sweep(spec_with(alpha=[0.05, 0.1]), out, workers=1, progress=False)
    assert rep.n_computed == 1 and len(rep.failures) == 1 and "RuntimeError: boom" in rep.failures[0][1]
    assert not rep.complete and len(read_results(out)) == 1  # no row for the failed run
    calls.clear()
    broken.clear()
    rep = run_sweep(spec_with(alpha=[0.05, 0.1, 0.15]), out, workers=1, progress=False)
    assert rep.n_cached == 1 and rep.n_computed == 2 and rep.complete
    assert sorted(calls) == sorted(r.key for r in expand(spec_with(alpha=[0.1, 0.15])))
    rows = read_results(out)
    assert [r["alpha"] for r in rows] == [0.05, 0.1, 0.15]  # rewritten in expansion order


def test_truncated_last_line_is_recomputed_without_duplicates(tmp_path):
    out = tmp_path / "t.csv"
    spec = spec_with(alpha=[0.05, 0.1, 0.15])
    run_sweep(spec, out, workers=1, progress=False)
    lines = out.read_text().splitlines(keepends=True)
    # as if killed while writing the last row: header, one row, half a row
    out.write_text("".join(lines[:2]) + lines[2][:25])
    with pytest.warns(RuntimeWarning, match="incomplete last line"):
        rep = run_sweep(spec, out, workers=1, progress=False)
    assert rep.n_cached == 1 and rep.n_computed == 2
    again = out.read_text().splitlines(keepends=True)
    assert again[:2] == lines[:2] and len(again) == len(lines)
    assert [r["key"] for r in read_results(out)] == [r.key for r in expand(spec)]
    # a half-written header counts as an empty file
    out.write_text(lines[0][:10])
    with pytest.warns(RuntimeWarning):
        rep = run_sweep(spec, out, workers=1, progress=False)
    assert rep.n_computed == 3 and len(read_results(out)) == 3


def test_foreign_or_locked_files_are_refused(tmp_path):
    out = tmp_path / "other.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="header differs"):
        run_sweep(BASE, out, workers=1, progress=False)
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "locked.csv"
    with open(out, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(ValueError, match="locked"):
            run_sweep(BASE, out, workers=1, progress=False)
    assert run_sweep(BASE, out, workers=1, progress=False).complete


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


HEADER = ",".join(sweep.COLUMNS) + "\n"

#: files that are not ours: a results file must refuse them and leave them byte-for-byte intact
FOREIGN = {
    "spec without a final newline": b"method: se\nT: 2\nrho: 0.5\nalpha: [0.1]",
    "spec": b"method: se\nT: 2\nrho: 0.5\nalpha: [0.1]\n",
    "other csv": b"a,b\n1,2\n",
    "other csv, torn last line": b"a,b\n1,2\n3,",
    "one line": b"hello world",
    "one line with newline": b"hello world\n",
    "binary": bytes(range(256)) * 4,
    "our header with an extra column": (HEADER[:-1] + ",extra\n").encode(),
    "our header without a column": (HEADER.rsplit(",", 1)[0] + "\n").encode(),
    "our header after a blank line": ("\n" + HEADER).encode(),
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_foreign_files_are_refused_and_left_intact(tmp_path, name):
    out = tmp_path / "out.csv"
    out.write_bytes(FOREIGN[name])
    before = sha256(out)
    for dry_run in (False, True):
        with pytest.raises(ValueError, match="header differs") as info:
            run_sweep(BASE, out, workers=1, progress=False, dry_run=dry_run)
        assert "\n" not in str(info.value)
        assert sha256(out) == before


def test_cli_refuses_to_write_into_its_own_spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_bytes(FOREIGN["spec without a final newline"])
    before = sha256(spec)
    for extra in ([], ["--dry-run"]):
        p = cli_run(str(spec), "--out", str(spec), "--no-progress", *extra)
        assert p.returncode == 2 and p.stdout == ""
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "header differs" in lines[0], p.stderr
        assert sha256(spec) == before


def test_duplicate_rows_are_removed_on_resume(tmp_path):
    out = tmp_path / "dup.csv"
    run_sweep(spec_with(alpha=[0.05, 0.1]), out, workers=1, progress=False)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines + [lines[1], lines[2], lines[1]]))  # each row twice or more
    with pytest.warns(RuntimeWarning, match="duplicate"):
        rep = run_sweep(spec_with(alpha=[0.05, 0.1, 0.15]), out, workers=1, progress=False,
                        sort=False)
    assert rep.n_cached == 2 and rep.n_computed == 1
    # the duplicates are gone from the file itself, and the new row was appended to it
    after = out.read_text().splitlines(keepends=True)
    assert after[:3] == lines and len(after) == 4
    keys = [r["key"] for r in read_results(out)]
    assert sorted(keys) == sorted(r.key for r in expand(spec_with(alpha=[0.05, 0.1, 0.15])))
    assert [p.name for p in tmp_path.iterdir()] == ["dup.csv"]  # no temporary file left


def test_bad_run_sweep_arguments(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        run_sweep(BASE, tmp_path / "x.csv", workers=0)
    with pytest.raises(ValueError, match="scheduler"):
        run_sweep(BASE, tmp_path / "x.csv", scheduler="slurm")
    assert not (tmp_path / "x.csv").exists()


# ---------------------------------------------------------------------------
# kill -9 in the middle, then resume (CLI in a subprocess)
# ---------------------------------------------------------------------------

def start_and_signal(tmp_path, sig, rows=3, *extra):
    """Start the CLI on a slow-ish spec, send ``sig`` once ``rows`` rows are written."""
    # hardmax SE points cost ~0.1-0.5 s each (quadrature), slow enough to stop midway
    spec = tmp_path / "hardmax.yaml"
    spec.write_text("method: se\nchannel: hardmax\nT: 2\nrho: 0.5\n"
                    "alpha: {start: 0.05, stop: 2.0, num: 24, spacing: log}\n")
    out = tmp_path / "hardmax.csv"
    proc = subprocess.Popen([sys.executable, "-m", "aimlib", "sweep", str(spec), "--out", str(out),
                             "--workers", "2", "--no-progress", *extra], cwd=ROOT,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if out.exists() and out.read_text().count("\n") >= 1 + rows:
                break
            time.sleep(0.02)
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker processes
        else:
            proc.send_signal(sig)  # the sweep alone: it must stop its workers itself
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return spec, out, proc.returncode, err


def test_sigterm_stops_cleanly(tmp_path):
    pytest.importorskip("distributed")   # the 'local' scheduler is dask's
    spec, out, rc, err = start_and_signal(tmp_path, signal.SIGTERM, 3, "--scheduler", "local")
    assert rc == 130 and "interrupted" in err and "resume" in err
    n = len(read_results(out))
    assert 3 <= n < len(expand(spec)) and out.read_text().endswith("\n")


@pytest.mark.slow
def test_killed_sweep_resumes_without_losing_or_duplicating_rows(tmp_path):
    spec, out, rc, _ = start_and_signal(tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    total = len(expand(spec))
    before = out.read_text()
    done = before[: before.rfind("\n") + 1].splitlines(keepends=True)[1:]
    assert 3 <= len(done) < total, "the sweep finished before it could be killed"
    p = cli_run(str(spec), "--out", str(out), "--workers", "2", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert f"{total} runs: {len(done)} cached, {total - len(done)} computed, 0 failed" in p.stdout
    after = out.read_text().splitlines(keepends=True)
    assert len(after) == 1 + total
    keys = [line.split(",", 1)[0] for line in after[1:]]
    assert len(set(keys)) == total and set(keys) == {r.key for r in expand(spec)}
    for line in done:  # earlier rows untouched
        assert line in after
    assert all(math.isfinite(r["mmse"]) for r in read_results(out))


def process_table() -> dict:
    """``pid -> (state, parent pid)`` of every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # the process ended meanwhile
                continue
            state, ppid = stat[stat.rfind(")") + 2:].split()[:2]
            table[int(entry.name)] = (state, int(ppid))
    return table


def descendants(pid: int) -> set:
    table = process_table()
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, (_, ppid) in table.items() if ppid == parent and p not in found]
        found.update(children)
        todo += children
    return found


def alive(pids) -> set:
    table = process_table()
    return {p for p in pids if p in table and table[p][0] != "Z"}  # zombies have exited


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table in /proc")
def test_pool_workers_exit_when_the_sweep_is_killed(tmp_path):
    spec = tmp_path / "hardmax.yaml"  # ~0.1-0.5 s per point: busy workers when the sweep dies
    spec.write_text("method: se\nchannel: hardmax\nT: 2\nrho: 0.5\n"
                    "alpha: {start: 0.05, stop: 2.0, num: 48, spacing: log}\n")
    out = tmp_path / "hardmax.csv"
    proc = subprocess.Popen([sys.executable, "-m", "aimlib", "sweep", str(spec), "--out", str(out),
                             "--workers", "2", "--no-progress"], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not (out.exists() and out.read_text().count("\n") >= 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        children = descendants(proc.pid)  # the pool's workers and multiprocessing's helpers
        assert len(alive(children)) >= 2 and proc.poll() is None
        proc.kill()  # SIGKILL to the sweep alone: it cannot stop its workers
        proc.wait()
        deadline = time.monotonic() + 10
        while alive(children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(children), "pool processes outlived the killed sweep"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

def test_cli_runs_caches_and_dry_runs(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: tiny\nmethod: se\nT: [2, 3]\nrho: 0.5\nalpha: [0.05, 0.1]\n")
    out = tmp_path / "s.csv"
    p = cli_run(str(spec), "--dry-run")
    assert p.returncode == 0 and p.stdout.strip() == f"tiny: 4 runs, 0 cached, 4 to compute -> {out}"
    assert not out.exists()
    p = cli_run(str(spec), "--workers", "1")  # default --out: SPEC with .csv; progress on stderr
    assert p.returncode == 0, p.stderr
    assert "4 runs: 0 cached, 4 computed, 0 failed" in p.stdout and "4/4" in p.stderr
    p = cli_run(str(spec), "--out", str(out), "--no-progress")
    assert p.returncode == 0 and "4 runs: 4 cached, 0 computed" in p.stdout and p.stderr == ""


@pytest.mark.parametrize("content, args, words", [
    ("method: se\nT: 2\nrho: 0.5\nalpah: 0.1\n", [], "'alpah'"),
    ("method: amp\nT: 2\nrho: 0.5\nalpha: 0.1\n", [], "'d'"),
    ("method: se\nT: [2\n", [], "not valid YAML"),
    ("method: se\nT: 2\nrho: 0.5\nalpha: 0.1\n", ["--workers", "0"], "--workers"),
    ("method: se\nT: 2\nrho: 0.5\nalpha: 0.1\n", ["--scheduler", "slurm"], "scheduler"),
    (None, [], "cannot read spec file"),
    (b"\xff\xfe\x00binary", [], "cannot read spec file"),
    ("method: se\nT: 2\nrho: 0.5\nalpha: {start: 0.01, stop: 1, num: 1000000000}\n", ["--dry-run"],
     "'alpha.num': must be <= 1000000"),
])
def test_cli_bad_spec_exits_2_with_one_line(tmp_path, content, args, words):
    spec = tmp_path / "bad.yaml"
    if isinstance(content, bytes):
        spec.write_bytes(content)
    elif content is not None:
        spec.write_text(content)
    p = cli_run(str(spec), "--out", str(tmp_path / "bad.csv"), "--no-progress", *args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("python -m aimlib sweep: error:") and words in lines[0]
    assert p.stdout == ""


@pytest.mark.parametrize("out, words", [
    ("{tmp}", "is a directory"),
    ("/dev/null", "is a device"),
    ("", "empty path"),
    ("{tmp}/s.yaml/x.csv", "Not a directory"),
])
def test_cli_bad_out_exits_2_with_one_line(tmp_path, out, words):
    spec = tmp_path / "s.yaml"
    spec.write_text("method: se\nT: 2\nrho: 0.5\nalpha: 0.1\n")
    before = sha256(spec)
    for extra in ([], ["--dry-run"]):
        p = cli_run(str(spec), "--out", out.format(tmp=tmp_path), "--no-progress", *extra)
        assert p.returncode == 2 and p.stdout == ""
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, p.stderr
        assert lines[0].startswith("python -m aimlib sweep: error: --out") and words in lines[0]
    assert sha256(spec) == before and sorted(tmp_path.iterdir()) == [spec]


def test_bad_out_paths_are_refused(tmp_path):
    for out, words in ((tmp_path, "out must be a file"), ("", "out must be a file path"),
                       (os.devnull, "out must be a regular file"), (3, "out must be a path")):
        with pytest.raises((ValueError, TypeError), match=words):
            run_sweep(BASE, out, workers=1, progress=False)


def test_cli_failed_runs_exit_1(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("method: se\nT: 2\nrho: 0.5\nalpha: [0.05, 0.1]\n")

    def failing(run):
        raise RuntimeError("no luck")

    monkeypatch.setattr(sweep.runners, "execute", failing)
    assert cli.main(["sweep", str(spec), "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("failed: RuntimeError: no luck" in line for line in err)
    assert "sweep" in cli.COMMANDS


def test_load_results_gives_the_rows_in_spec_order():
    spec = ROOT / "sweeps" / "amp_finite_size.yaml"
    rows = sweep.load_results(spec)
    keys = [run.key for run in sweep.expand(spec)]
    assert [r["key"] for r in rows] == [k for k in keys if k in {r["key"] for r in rows}]
    assert rows == sweep.read_results(spec.with_suffix(".csv"), keys=keys) and len(rows) == 40
    with pytest.raises(TypeError, match="out must be given"):
        sweep.load_results({"method": "se", "T": 2, "rho": 0.5, "alpha": [0.1]})


def test_files_of_earlier_headers_are_read_and_rewritten_with_reason(tmp_path):
    """A file without the columns ``reason`` and ``curve`` (as every committed file written before it, such as
    sweeps/amp_finite_size.csv) is read with that field empty; a sweep that writes to it rewrites it with the
    current header, its rows kept, and new amp rows say why they ended."""
    from aimlib.sweep.store import COLUMNS, OLD_COLUMNS
    committed = ROOT / "sweeps" / "amp_finite_size.csv"
    assert committed.read_text().splitlines()[0] in [",".join(cols) for cols in OLD_COLUMNS]
    out = tmp_path / "legacy.csv"
    spec = dict(SMALL, method="amp", alpha_bar=[0.45], T=2, options={"amp": {"max_iter": 60}})
    first = run_sweep(spec, out, workers=1, progress=False)
    lines = out.read_text().splitlines()
    legacy = [",".join(OLD_COLUMNS[1])] + [_drop_columns(line, ("curve", "reason")) for line in lines[1:]]
    out.write_text("\n".join(legacy) + "\n")
    old_rows = sweep.read_results(out)
    assert [r["reason"] for r in old_rows] == [None] * len(old_rows) and len(old_rows) == first.n_runs
    run_sweep(dict(spec, seeds=[0, 1]), out, workers=1, progress=False)
    rows = sweep.read_results(out)
    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert [r["mmse"] for r in rows[:len(old_rows)]] == [r["mmse"] for r in old_rows]
    assert all(r["reason"] in ("tol", "oscillating", "max_iter", "perfect") for r in rows[len(old_rows):])


def _drop_columns(line: str, names) -> str:
    import csv
    from aimlib.sweep.store import COLUMNS
    fields = next(csv.reader([line]))
    for i in sorted((COLUMNS.index(name) for name in names), reverse=True):
        del fields[i]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


# -- two-layer attention (deep-hardmax): c, one width per layer, one error per layer ------------

DEEP = {"method": ["se", "amp"], "channel": "deep-hardmax", "c": 0.5, "T": 2, "teachers": "centred",
        "rho": [0.5, [0.25, 0.5]], "alpha": 1.0, "d": 16, "options": {"amp": {"max_iter": 60}}}


@pytest.mark.parametrize("changes, field, words", [
    ({"c": None}, "c", "required by channel 'deep-hardmax'"),
    ({"c": 1.0}, "c", "coincide or vanish"),
    ({"channel": "softmax"}, "c", "the channels ['deep-hardmax'] only"),
    ({"T": 3}, "T", "T = 2"),
    ({"noise": 0.1}, "noise", "no label noise"),
    ({"method": "gd", "options": None}, "channel", "softmax"),
    ({"rho": [[0.5, 0.5, 0.5]]}, "rho[0]", "3 widths"),
    ({"rho": [[0.5]]}, "rho[0]", "one per teacher"),
    ({"rho": [[0.5, 1e-9]]}, "rho[0][1]", "[0.0001, 10000.0]"),
])
def test_deep_spec_errors_name_the_field(changes, field, words):
    spec = {k: v for k, v in {**DEEP, **changes}.items() if v is not None}
    with pytest.raises(SpecError, match=re.escape(f"spec field '{field}'")) as err:
        SweepSpec.from_dict(spec)
    assert words in str(err.value)


def test_deep_runs_carry_both_widths_and_c_in_their_keys():
    runs = expand(DEEP)
    assert sorted(r.rho for r in runs if r.method == "se") == [(0.25, 0.5), (0.5, 0.5)]
    assert all(r.c == 0.5 and r.params()["c"] == 0.5 for r in runs)
    other_c = expand({**DEEP, "c": 2.0})
    assert not {r.key for r in runs} & {r.key for r in other_c}
    # the one-layer keys are those of before: no c among their parameters
    assert "c" not in expand(BASE)[0].params()


def test_deep_sweep_rows_hold_one_error_per_layer(tmp_path):
    out = tmp_path / "deep.csv"
    spec = {**DEEP, "rho": 0.5}
    assert run_sweep(spec, out, workers=1, progress=False).complete
    rows = read_results(out, keys=[r.key for r in expand(spec)])
    se_row, amp_row = rows
    expected = se.solve(1.0, DeepAttention(c=0.5), T=2, rho=(Centred(0.5), Centred(0.5))).mmse
    assert se_row["rho"] == (0.5, 0.5) and se_row["mmse"] is None
    assert se_row["mmse_layers"] == pytest.approx(expected, abs=1e-8)
    assert len(amp_row["mmse_layers"]) == 2 and len(amp_row["mmse_pred_layers"]) == 2
    assert amp_row["c"] == 0.5 and amp_row["n"] == 256


# ---------------------------------------------------------------------------
# token laws: the field ``tokens``
# ---------------------------------------------------------------------------

AMP_TINY = {"method": "amp", "T": 2, "rho": 0.5, "alpha": 0.3, "d": 12,
            "options": {"amp": {"max_iter": 5}}}


@pytest.mark.parametrize("tokens, field, words", [
    ("cauchy", "tokens", "must be one of"),
    (["gaussian", {"name": "sparse", "p": 0}], "tokens[1]", "must be > 0"),
    ({"name": "student-t", "nu": 2}, "tokens", "must be > 2"),
    ({"name": "correlated", "cov": [[1.0]]}, "tokens.cov", "not 'cov'"),
    ({"name": "uniform", "p": 0.5}, "tokens", "not a parameter of law 'uniform'"),
    ([], "tokens", "must not be an empty list"),
])
def test_token_law_errors_name_the_field(tokens, field, words):
    with pytest.raises(SpecError) as info:
        SweepSpec.from_dict(dict(AMP_TINY, tokens=tokens))
    assert f"spec field {field!r}" in str(info.value) and words in str(info.value)


def test_gaussian_tokens_keep_the_keys_and_other_laws_change_them():
    plain = expand(AMP_TINY)
    assert [r.key for r in expand(dict(AMP_TINY, tokens="gaussian"))] == [r.key for r in plain]
    laws = ["gaussian", "rademacher", {"name": "sparse", "p": 0.3}, {"name": "sparse", "p": 0.1},
            {"name": "correlated", "c": 0.5}]
    runs = expand(dict(AMP_TINY, tokens=laws))
    assert len({r.key for r in runs}) == 5 and runs[0].key == plain[0].key
    assert runs[2].tokens == (("name", "sparse"), ("p", 0.3))
    # defaults written out give the same run; the state evolution has no token law
    assert expand(dict(AMP_TINY, tokens={"name": "sparse"}))[0].key == runs[3].key
    se_runs = expand(dict(AMP_TINY, method=["se", "amp"], tokens="gaussian"))
    assert [r.tokens for r in se_runs] == [None, None]
    with pytest.raises(SpecError, match="spec field 'tokens': method 'se'.*Gaussian"):
        expand(dict(AMP_TINY, method=["se", "amp"], tokens=laws))
    spec = SweepSpec.from_dict(dict(AMP_TINY, tokens=laws))
    assert SweepSpec.from_dict(spec.to_dict()) == spec


def test_a_sweep_row_with_rademacher_tokens(tmp_path):
    import json

    out = tmp_path / "r.csv"
    spec = dict(AMP_TINY, method=["amp", "gd"], tokens=["gaussian", "rademacher"],
                options={"amp": {"max_iter": 5}, "gd": {"steps": 5}})
    rep = run_sweep(spec, out, workers=1, scheduler="serial", progress=False)
    assert rep.complete
    rows = read_results(out, keys=[r.key for r in expand(spec)])
    opts = [json.loads(r["options"]) for r in rows]
    assert [r["method"] for r in rows] == ["amp", "amp", "gd", "gd"]
    assert "tokens" not in opts[0] and opts[1]["tokens"] == {"name": "rademacher"}
    assert opts[3]["tokens"] == {"name": "rademacher"} and rows[2]["mmse"] != rows[3]["mmse"]
    direct = __import__("aimlib").amp.run_amp("softmax", 2, 0.5, 0.3, 12, 0, max_iter=5,
                                              on_max_iter="return", tokens="rademacher")
    assert rows[1]["mmse"] == pytest.approx(direct["mmse"], rel=1e-12)
    assert rows[0]["mmse"] != rows[1]["mmse"]


def test_spec_channels_are_the_registry():
    """A spec's ``channel`` takes the registry's names; the layered ones hold one teacher per index; a channel
    without a Bayes side (the averaged heads) is refused, naming the field."""
    assert sweep.CHANNELS == tuple(CHANNELS)
    assert sweep.spec.LAYERED == {c: make_channel(c).n_indices for c in CHANNELS if make_channel(c).n_indices > 1}
    for c in CHANNELS:
        extra = {"rho": [[0.5, 0.5]]} if c in sweep.spec.LAYERED else {}
        extra |= {"c": 0.5} if c in sweep.spec.WITH_C else {}
        if not CHANNELS[c].bayes_side:
            with pytest.raises(SpecError, match="spec field 'channel'.*no Bayes side"):
                SweepSpec(**{**BASE, "channel": c, **extra})
            continue
        assert SweepSpec(**{**BASE, "channel": c, **extra}).channel == (c,)
    with pytest.raises(SpecError, match="channel"):
        SweepSpec(**{**BASE, "channel": "softmx"})
    # alpha_bar = k alpha with k the channel's linear_k
    run = expand(SweepSpec(**{**BASE, "alpha": None, "alpha_bar": [0.4], "T": 3}))[0]
    assert run.alpha == pytest.approx(0.4 / make_channel("softmax").linear_k(3)) and run.alpha_bar == 0.4


def test_teachers_field_enters_the_key_only_when_centred_for_every_method():
    base = {"method": "se", "T": 2, "rho": 0.5, "alpha": 0.2}
    wishart, centred = expand(base)[0], expand({**base, "teachers": "centred"})[0]
    assert wishart.key == expand({**base, "teachers": "wishart"})[0].key != centred.key
    assert centred.teachers == "centred" and "teachers" not in wishart.params()
    with pytest.raises(SpecError, match="teachers"):
        load_spec({**base, "teachers": "uniform"})
    gd_run = expand({**base, "method": "gd", "d": 10, "teachers": "centred"})[0]
    assert gd_run.teachers == "centred" and gd_run.key != expand({**base, "method": "gd", "d": 10})[0].key
