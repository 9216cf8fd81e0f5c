"""The files of the sweeps and of the command line (issue 36): no link followed, no other
user's file written, no row that lacks only its newline dropped, no wait on a pipe."""
from __future__ import annotations

import importlib
import os
import pwd
import socket
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from aimlib import cli, files, sweep
from aimlib.sweep import diskio, read_results, run_sweep
from aimlib.sweep.store import COLUMNS, stored_keys

ROOT = Path(__file__).resolve().parents[1]
BASE = {"method": "se", "T": 2, "rho": 0.5, "alpha": [0.05, 0.1, 0.15]}
SPEC = "method: se\nT: 2\nrho: 0.5\nalpha: [0.05, 0.1]\n"
#: what another user's link may point at: a file of the victim's, empty, a prefix of our
#: header (a torn results file, which a sweep completes), or any other content
TARGETS = {"empty": b"", "header prefix": b"key,meth", "notes": b"my notes\n"}


def forbid_runs(monkeypatch):
    def forbidden(run):
        raise AssertionError("a run was computed")

    monkeypatch.setattr(sweep.runners, "execute", forbidden)


def cli_run(*args, timeout=60):
    """The command line in a subprocess: a regression that blocks fails at ``timeout``."""
    return subprocess.run([sys.executable, "-m", "aimlib", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


# ---------------------------------------------------------------------------
# another local user's links and files in a shared folder (finding 5)
# ---------------------------------------------------------------------------

def as_nobody(*command):
    """Run ``command`` as the user nobody (the other local user of these tests)."""
    user = pwd.getpwnam("nobody")
    subprocess.run(command, user=user.pw_uid, group=user.pw_gid, extra_groups=[], check=True,
                   timeout=30)


def planted_link(shared: Path, tmp_path: Path, content: bytes, name="out.csv"):
    """A file of the victim (``tmp_path``) and nobody's link to it at ``shared/name``."""
    target = tmp_path / "victim.txt"
    target.write_bytes(content)
    link = shared / name
    as_nobody("ln", "-s", str(target), str(link))
    assert link.is_symlink() and link.lstat().st_uid == pwd.getpwnam("nobody").pw_uid
    return target, link


@pytest.mark.parametrize("content", TARGETS.values(), ids=TARGETS.keys())
def test_an_out_link_planted_by_another_user_is_refused_in_one_line(shared, tmp_path, capsys,
                                                                    monkeypatch, content):
    target, link = planted_link(shared, tmp_path, content)
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    forbid_runs(monkeypatch)
    for extra in ([], ["--dry-run"]):
        args = ["sweep", str(spec), "--out", str(link), "--scheduler", "serial", "--no-progress"]
        assert cli.main(args + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "error: --out" in err[0] and "symbolic link" in err[0], err
    with pytest.raises(ValueError, match="out must be the file itself, not a symbolic link"):
        run_sweep(BASE, link, scheduler="serial", progress=False)
    assert target.read_bytes() == content and link.is_symlink()
    assert sorted(p.name for p in shared.iterdir()) == ["out.csv"]


def test_a_dangling_out_link_creates_no_file(shared, tmp_path, monkeypatch):
    target, link = planted_link(shared, tmp_path, b"")
    target.unlink()
    forbid_runs(monkeypatch)
    with pytest.raises(ValueError, match="symbolic link"):
        run_sweep(BASE, link, scheduler="serial", progress=False)
    assert not target.exists()


def test_a_failures_file_link_is_refused_before_any_run(shared, tmp_path, monkeypatch):
    target, link = planted_link(shared, tmp_path, b"notes\n", name="out.failures.csv")
    forbid_runs(monkeypatch)
    with pytest.raises(ValueError, match="out.failures.csv is where the sweep lists its failed "
                                         "runs, but it is a symbolic link"):
        run_sweep(BASE, shared / "out.csv", scheduler="serial", progress=False)
    assert target.read_bytes() == b"notes\n" and not (shared / "out.csv").exists()


@pytest.mark.parametrize("content", [b"", b"key,meth"])
def test_a_file_of_another_user_is_not_written(shared, tmp_path, monkeypatch, content):
    out = shared / "out.csv"
    as_nobody("sh", "-c", f"printf '{content.decode()}' > {out}; chmod 666 {out}")
    forbid_runs(monkeypatch)
    uid = pwd.getpwnam("nobody").pw_uid
    with pytest.raises(ValueError, match=r"out must be a file of your own \(user id 0\), but "
                                         rf".*out.csv' belongs to user id {uid}"):
        run_sweep(BASE, out, scheduler="serial", progress=False)
    assert out.read_bytes() == content


def test_a_hard_link_to_another_file_is_not_written(shared, tmp_path, monkeypatch):
    target = tmp_path / "victim.txt"
    target.write_bytes(b"")
    os.link(target, shared / "out.csv")  # where fs.protected_hardlinks lets another user do it
    forbid_runs(monkeypatch)
    with pytest.raises(ValueError, match="has 2 hard links"):
        run_sweep(BASE, shared / "out.csv", scheduler="serial", progress=False)
    assert target.read_bytes() == b""


def test_a_link_planted_after_the_check_is_not_followed(shared, tmp_path, monkeypatch):
    """The open itself refuses (O_NOFOLLOW, fstat), whatever was checked before it."""
    target, link = planted_link(shared, tmp_path, b"key,meth")
    monkeypatch.setattr(files, "check_output", lambda name, path: None)  # the check raced past
    with pytest.raises(OSError):
        files.open_output("--out", link, append=True)
    with pytest.raises(ValueError, match="cannot open the results file"):
        sweep.store.ResultsFile(link)
    other = shared / "theirs.csv"
    as_nobody("touch", str(other))
    with pytest.raises(files.RefusedFile, match="belongs to user id"):
        files.open_output("--out", other)
    assert target.read_bytes() == b"key,meth"


def test_the_temporary_file_of_a_replacement_never_follows_a_planted_link(shared, tmp_path,
                                                                         monkeypatch):
    out = shared / "out.csv"
    out.write_bytes(b"old\n")
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(diskio.secrets, "token_hex", lambda n: next(names))
    target, _ = planted_link(shared, tmp_path, b"notes\n",
                             name=f".out.csv.{os.getpid()}.planted.tmp")
    diskio.replace(out, b"new\n")
    assert out.read_bytes() == b"new\n" and target.read_bytes() == b"notes\n"
    assert not stat.S_IMODE(out.stat().st_mode) & 0o022  # never group- or world-writable


def test_a_replacement_refuses_a_link_in_place_of_its_file(shared, tmp_path):
    target, link = planted_link(shared, tmp_path, b"notes\n")
    with pytest.raises(files.RefusedFile, match="symbolic link"):
        diskio.replace(link, b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"notes\n"
    assert sorted(p.name for p in shared.iterdir()) == ["out.csv"]  # no temporary file left


def test_the_scripts_and_benchmarks_refuse_a_planted_link(shared, tmp_path, monkeypatch, capsys):
    target, link = planted_link(shared, tmp_path, b"notes\n")
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    rows, common = importlib.import_module("_rows"), importlib.import_module("_common")
    with pytest.raises(SystemExit) as info:
        rows.data_parser("doc", "x.csv").parse_args(["--out", str(link)])
    assert info.value.code == 2 and "symbolic link" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        rows.write_rows(link, "test", ["a"], [{"a": 1}])
    assert info.value.code == 2 and "symbolic link" in capsys.readouterr().err
    with pytest.raises(files.RefusedFile, match="symbolic link"):
        common.write_record("test", {}, link)
    assert target.read_bytes() == b"notes\n"


# ---------------------------------------------------------------------------
# the last line of a results file (finding 6)
# ---------------------------------------------------------------------------

def finished(tmp_path) -> tuple[Path, bytes]:
    out = tmp_path / "r.csv"
    assert run_sweep(BASE, out, scheduler="serial", progress=False).complete
    return out, out.read_bytes()


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path, monkeypatch):
    out, whole = finished(tmp_path)
    out.write_bytes(whole[:-1])
    assert len(read_results(out)) == 3 and len(stored_keys(out)) == 3
    forbid_runs(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped, so nothing to warn about
        rep = run_sweep(BASE, out, scheduler="serial", progress=False)
    assert rep.n_cached == 3 and rep.n_computed == 0 and out.read_bytes() == whole
    monkeypatch.undo()
    out.write_bytes(whole[:-1])  # and the next row goes on a line of its own
    more = dict(BASE, alpha=[0.05, 0.1, 0.15, 0.2])
    rep = run_sweep(more, out, scheduler="serial", progress=False, sort=False)
    assert rep.n_cached == 3 and rep.n_computed == 1
    assert out.read_bytes().startswith(whole) and len(read_results(out)) == 4


@pytest.mark.parametrize("cut, finding", [
    (lambda row: row[:-3], r"its timestamp '.*' is cut off"),  # every field, a short timestamp
    (lambda row: row[: row.rindex(b",") + 1], "its timestamp '' is cut off"),
    (lambda row: row[: row.index(b",se,") + 4], f"3 of the {len(COLUMNS)} fields"),
    (lambda row: row[:30] + b"\xe2\x82", "not a line of CSV text"),  # inside a character
], ids=["in the timestamp", "before the timestamp", "after the method", "in a character"])
def test_a_cut_last_row_is_dropped_with_what_was_found_and_recomputed(tmp_path, cut, finding):
    out, whole = finished(tmp_path)
    lines = whole.splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:-1]) + cut(lines[-1].rstrip(b"\n")))
    assert len(read_results(out)) == 2
    with pytest.warns(RuntimeWarning, match=f"r.csv: dropping an incomplete last line .*"
                                            f"({finding}).*its run is computed again"):
        rep = run_sweep(BASE, out, scheduler="serial", progress=False)
    assert rep.n_cached == 2 and rep.n_computed == 1
    again = out.read_bytes().splitlines(keepends=True)
    assert again[:-1] == lines[:-1] and len(again) == len(lines) and again[-1].endswith(b"\n")


def test_a_last_row_with_an_invalid_value_is_dropped(tmp_path):
    out, whole = finished(tmp_path)
    lines = whole.decode().splitlines(keepends=True)
    fields = lines[-1].rstrip("\n").split(",")
    fields[3] = "two"  # T
    out.write_bytes("".join(lines[:-1]).encode() + ",".join(fields).encode())
    with pytest.warns(RuntimeWarning, match="its T 'two' is cut off or invalid"):
        assert run_sweep(BASE, out, scheduler="serial", progress=False).n_computed == 1


# ---------------------------------------------------------------------------
# inputs that are no regular files: refused at once, never waited on (finding 8b)
# ---------------------------------------------------------------------------

def special(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    else:
        return Path(os.devnull)
    return path


@pytest.mark.parametrize("kind, finding", [("fifo", "is a pipe (FIFO)"),
                                           ("folder", "is a directory"),
                                           ("socket", "is a socket"), ("device", "is a device")])
def test_a_spec_that_is_no_regular_file_is_refused_at_once(tmp_path, kind, finding):
    spec = special(tmp_path, kind)
    p = cli_run("sweep", str(spec), "--out", str(tmp_path / "r.csv"), "--no-progress")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "error: spec file must be a" in lines[0] and str(spec) in lines[0]
    assert finding in lines[0] and not (tmp_path / "r.csv").exists()


def test_a_failures_file_that_is_a_pipe_is_refused_at_once(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    os.mkfifo(tmp_path / "s.failures.csv")
    p = cli_run("sweep", str(spec), "--no-progress")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "s.failures.csv is where the sweep lists its failed runs, but it is a pipe" in p.stderr


def test_reading_results_from_a_pipe_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "r.csv")
    code = ("import sys; from aimlib.sweep import read_results\n"
            "try:\n    read_results(sys.argv[1])\nexcept ValueError as exc:\n    print(exc)\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.csv")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "the results file must be a regular file" in p.stdout, p.stderr
    assert "is a pipe (FIFO)" in p.stdout
