"""Sweeps under bad input and hostile surroundings (issue 22): a private local Dask cluster,
foreign failures files, a full disk, hostile YAML, special --out paths, capped workers."""
from __future__ import annotations

import csv
import errno
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from aimlib import cli, cluster as cluster_module, sweep
from aimlib.sweep import SpecError, load_spec, read_results, run_sweep
from aimlib.sweep.store import COLUMNS

BASE = {"method": "se", "T": 2, "rho": 0.5, "alpha": [0.05, 0.1]}
SPEC = "method: se\nT: 2\nrho: 0.5\nalpha: [0.05, 0.1]\n"


def forbid_runs(monkeypatch):
    def forbidden(run):
        raise AssertionError("a run was computed")

    monkeypatch.setattr(sweep.runners, "execute", forbidden)


# ---------------------------------------------------------------------------
# 'local': a cluster that only this process can reach
# ---------------------------------------------------------------------------

def test_the_local_cluster_is_private_and_a_sweep_runs_on_it(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    pytest.importorskip("cryptography")
    seen = {}
    start = cluster_module.local_cluster

    def probed(*args):
        cluster, security = start(*args)
        seen["addresses"] = [cluster.scheduler_address, *cluster.scheduler_info["workers"]]
        http = cluster.scheduler.http_server
        seen["http"] = http.address
        for page, code in (("health", 200), ("status", 404), ("info/main/workers.html", 404)):
            try:
                seen[page] = urllib.request.urlopen(f"http://127.0.0.1:{http.port}/{page}",
                                                    timeout=5).status
            except urllib.error.HTTPError as exc:
                seen[page] = exc.code
        for address in (cluster.scheduler_address, cluster.scheduler_address.replace("tls", "tcp")):
            # another process without the credentials (as another local user would be)
            t0 = time.perf_counter()
            probe = subprocess.run([sys.executable, "-c", "import sys, distributed; "
                                    "distributed.Client(sys.argv[1], timeout='3s')", address],
                                   capture_output=True, text=True, timeout=60)
            assert probe.returncode != 0, probe.stdout
            seen.setdefault("errors", []).append(probe.stderr.strip().splitlines()[-1])
            seen.setdefault("refused", []).append(time.perf_counter() - t0)
        return cluster, security

    monkeypatch.setattr(cluster_module, "local_cluster", probed)
    rep = run_sweep(BASE, tmp_path / "r.csv", scheduler="local", workers=1, progress=False)
    assert rep.complete and rep.n_computed == 2 and not rep.failures
    assert seen["addresses"] and all(a.startswith("tls://127.0.0.1:") for a in seen["addresses"])
    assert seen["http"] == "127.0.0.1" and max(seen["refused"]) < 30   # refused, not left hanging
    tls_refused, tcp_refused = seen["errors"]   # no credentials for TLS; plain TCP is cut off
    assert "TLS" in tls_refused and ("Comm" in tcp_refused or "Timeout" in tcp_refused), seen["errors"]
    assert (seen["health"], seen["status"], seen["info/main/workers.html"]) == (200, 404, 404)


def test_a_plain_tcp_scheduler_is_refused_and_changes_no_file(tmp_path):
    # an unencrypted, unauthenticated address is refused before any connection
    # (the unreachable TLS address: tests/test_dask_security.py)
    pytest.importorskip("distributed")
    out = tmp_path / "r.csv"
    with pytest.raises(ValueError, match="scheduler refuses 'tcp://127.0.0.1:9'"):
        run_sweep(BASE, out, scheduler="tcp://127.0.0.1:9", progress=False)
    assert not out.exists()


# ---------------------------------------------------------------------------
# the failures file beside --out: the sweep's own or refused, before any run
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("content", [
    "notes",
    "my notes\nline two\n",
    "key,value\nabc,1\n",
    "key,method,channel,T,rho,alpha,d,seed,tokens,message\r\nabc,se\r\n",  # torn: not ours
    None,  # a folder
])
def test_a_foreign_failures_file_is_refused_before_any_run(tmp_path, monkeypatch, content):
    out, failures = tmp_path / "r.csv", tmp_path / "r.failures.csv"
    if content is None:
        failures.mkdir()
    else:
        failures.write_bytes(content.encode())
    forbid_runs(monkeypatch)
    for dry_run in (False, True):
        with pytest.raises(ValueError, match="r.failures.csv is where the sweep lists its failed "
                                             "runs.*left untouched"):
            run_sweep(BASE, out, workers=1, progress=False, dry_run=dry_run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.failures.csv"]
    assert failures.is_dir() if content is None else failures.read_bytes() == content.encode()


def test_the_cli_refuses_a_foreign_failures_file_with_one_line(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    (tmp_path / "s.failures.csv").write_text("notes")
    assert cli.main(["sweep", str(spec), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "s.failures.csv" in err
    assert (tmp_path / "s.failures.csv").read_text() == "notes"


# ---------------------------------------------------------------------------
# a full disk: a clear error, no torn row
# ---------------------------------------------------------------------------

def test_a_full_disk_leaves_no_torn_row_and_names_the_file(tmp_path, monkeypatch):
    out = tmp_path / "r.csv"
    out.touch()  # an empty file is a new results file; its inode picks the writes to fail
    inode, real_write, calls = out.stat().st_ino, os.write, []

    def full_disk(fd, data):
        if os.fstat(fd).st_ino != inode:
            return real_write(fd, data)
        calls.append(data)
        if len(calls) < 3:  # the header and the first row
            return real_write(fd, data)
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match=f"cannot write {out}: no space left on its device "
                                      r"\(.* MiB free\).*run the same command again") as info:
        run_sweep(BASE, out, scheduler="serial", progress=False)
    assert isinstance(info.value, sweep.StorageError) and info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    with open(out, newline="") as fh:
        lines = list(csv.reader(fh))
    assert lines[0] == COLUMNS and len(lines) == 2 and len(lines[1]) == len(COLUMNS)
    assert out.read_text().endswith("\n")
    rep = run_sweep(BASE, out, scheduler="serial", progress=False)  # resumes
    assert rep.complete and rep.n_computed == 1 and len(read_results(out)) == 2


def test_a_special_out_file_is_refused(monkeypatch):
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc")
    forbid_runs(monkeypatch)
    with pytest.raises(ValueError, match="not a sweep results file"):
        run_sweep(BASE, "/proc/self/status", workers=1, progress=False)


# ---------------------------------------------------------------------------
# hostile YAML: aliases, repeated keys, deep nesting, huge values
# ---------------------------------------------------------------------------

def laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nmethod: *a{levels - 1}\nT: 2\nrho: 0.5\nalpha: 0.1\n"


@pytest.mark.parametrize("text, words", [
    (laughs(), "line 1: YAML anchors and aliases"),
    (SPEC + "extra: &x 1\n", "line 5: YAML anchors and aliases"),
    (SPEC + "T: 3\n", "line 5: the key 'T' is repeated"),
    ("method: se\nT: 2\nrho: 0.5\nalpha: " + "[" * 20000 + "]" * 20000 + "\n",
     "line 4: lists and mappings nest deeper than 16 levels"),
    ("method: " + "x" * 200_000 + "\nT: 2\nrho: 0.5\nalpha: 0.1\n", "spec field 'method'"),
    ("method: se\nT: 2\nrho: 0.5\nalpha: 0.1\n#" + "x" * (1 << 20) + "\n", "larger than"),
])
def test_hostile_yaml_is_refused_quickly_with_one_short_line(tmp_path, text, words):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert time.perf_counter() - t0 < 5
    assert words in str(info.value) and len(str(info.value)) < 600


def test_a_huge_value_is_shortened_in_the_message():
    with pytest.raises(SpecError) as info:
        load_spec(dict(BASE, name=list(range(10**6))))
    assert str(info.value) == "spec field 'name': must be a string, got list [0, 1, 2, 3, 4, 5, ...]"


# ---------------------------------------------------------------------------
# fields the runs would not use, and --workers
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("changes, field, words", [
    ({"channel": "hardmax", "beta": 2.0}, "beta", "heads-concatenated channels' inverse temperature"),
    ({"channel": ["linear", "hardmax"], "beta": 1.0}, "beta", "remove 'beta'"),
    ({"tokens": "rademacher"}, "tokens", "assumes Gaussian tokens"),
    ({"method": ["se", "amp"], "d": 20, "tokens": {"name": "sparse", "p": 0.3}}, "tokens",
     "assumes Gaussian tokens"),
])
def test_fields_that_the_runs_would_not_use_are_refused(changes, field, words):
    with pytest.raises(SpecError, match=f"spec field '{field}': .*{words}"):
        load_spec(dict(BASE, **changes))


def test_beta_is_kept_for_softmax_and_hardmax_specs_round_trip():
    mixed = load_spec(dict(BASE, channel=["softmax", "hardmax"], beta=[1.0, 2.0]))
    assert mixed.beta == (1.0, 2.0) and load_spec(mixed.to_dict()) == mixed
    hard = load_spec(dict(BASE, channel="hardmax"))
    assert "beta" not in hard.to_dict() and load_spec(hard.to_dict()) == hard


def test_workers_are_capped_at_the_cpus(tmp_path, monkeypatch):
    forbid_runs(monkeypatch)
    cpus = os.cpu_count() or 1
    with pytest.raises(ValueError, match=f"workers must be between 1 and {cpus} .*got 100000"):
        run_sweep(BASE, tmp_path / "r.csv", workers=100_000, progress=False)
    with pytest.raises(ValueError, match=f"--workers must be between 1 and {cpus}.*--workers"):
        sweep.check_workers("--workers", 0)
    assert sweep.check_workers("--workers", cpus) == cpus
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("content, args, words", [
    (laughs(), [], "YAML anchors and aliases"),
    (SPEC + "T: 3\n", [], "the key 'T' is repeated"),
    ("alpha: " + "[" * 5000 + "]" * 5000 + "\n", [], "nest deeper than 16 levels"),
    (SPEC, ["--workers", "100000"], "workers must be between 1 and"),
    (SPEC, ["--out", "/proc/self/status"], "/proc/self/status is not a sweep results file"),
])
def test_the_cli_refuses_hostile_input_with_one_line(tmp_path, monkeypatch, capsys, content, args,
                                                     words):
    forbid_runs(monkeypatch)
    spec = tmp_path / "s.yaml"
    spec.write_text(content)
    assert cli.main(["sweep", str(spec), "--no-progress", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_the_cli_reports_a_full_disk_in_one_line_exit_1(tmp_path, monkeypatch, capsys):
    spec, out = tmp_path / "s.yaml", tmp_path / "s.csv"
    spec.write_text(SPEC)
    out.touch()
    inode, real_write = out.stat().st_ino, os.write

    def full_disk(fd, data):
        if os.fstat(fd).st_ino == inode and not data.startswith(b"key,"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    assert cli.main(["sweep", str(spec), "--scheduler", "serial", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"cannot write {out}: no space left" in err
    assert out.read_text().count("\n") == 1  # the header alone
