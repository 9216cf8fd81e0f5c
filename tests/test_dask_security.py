"""The Dask surfaces against another local user (issue 36): a private scratch space off the
import path, a remote scheduler only over TLS with the user's credentials, a bounded
``--shards``, one-line messages for every bad ``--scheduler``, quiet failures and shutdowns."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from aimlib import cli, cluster, model, sweep
from aimlib.amp import gamp_rie
from aimlib.channels import make_channel
from aimlib.sweep import run_sweep
from conftest import nobody

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
pytest.importorskip("cryptography")

ROOT = Path(__file__).resolve().parents[1]
AMP = ["amp", "--alpha", "0.1", "--d", "20", "--max-iter", "20", "--on-max-iter", "return"]
SPEC = "method: se\nT: 2\nrho: 0.5\nalpha: [0.05, 0.1]\n"
BASE = {"method": "se", "T": 2, "rho": 0.5, "alpha": [0.05, 0.1]}
#: what nobody plants in a shared scratch space: ``aimlib`` first on the workers' import path
PLANTED = "import os\nopen(os.path.join({folder!r}, 'ran-as-%d' % os.getuid()), 'w').close()\n"
#: nobody's scheduler: no TLS, a worker whose shards answer with a pickle that runs a command,
#: a plugin that records every client that connects; it lives at most a minute
HOSTILE = """\
import asyncio, os, sys
from distributed import Scheduler, Worker
from distributed.diagnostics.plugin import SchedulerPlugin
import aimlib.amp.shards

folder = sys.argv[1]
class Payload:
    def __reduce__(self):
        return os.system, (f"id > {folder}/ran-in-client",)
aimlib.amp.shards.Shard.channel_sums = lambda self, *args: Payload()

class Record(SchedulerPlugin):
    def add_client(self, scheduler, client):
        open(os.path.join(folder, "client-connected"), "w").close()

async def main():
    async with Scheduler(host="127.0.0.1", port=0, dashboard=False) as s:
        s.add_plugin(Record())
        async with Worker(s.address, nthreads=1):
            print(s.address, flush=True)
            await asyncio.sleep(60)
asyncio.run(main())
"""


def cli_run(*args, env=None, timeout=180):
    """The command line in a subprocess (``env``: changes to the environment)."""
    return subprocess.run([sys.executable, "-m", "aimlib", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


# ---------------------------------------------------------------------------
# finding 1: the scratch space of 'local'
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    [*AMP, "--scheduler", "local", "--shards", "2"],
    ["sweep", "{spec}", "--scheduler", "local", "--workers", "2", "--no-progress"],
], ids=["amp-sharded", "sweep"])
def test_a_scratch_space_planted_by_another_user_is_never_used(shared, tmp_path, command):
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's notes\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    scratch = shared / "dask-scratch-space"
    subprocess.run(**nobody("sh", "-c", f"umask 0; mkdir -p {scratch}/aimlib && "
                            f"ln -s {victim} {scratch}/global.lock && cat > {scratch}/aimlib/__init__.py",
                            input=PLANTED.format(folder=str(shared)), text=True, check=True, timeout=30))
    run = cli_run(*[a.format(spec=spec) for a in command], env={"TMPDIR": str(shared)})
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    assert victim.read_text() == "the victim's notes\n"
    assert not list(shared.glob("ran-as-*")), "the planted module ran"
    assert sorted(p.name for p in shared.iterdir()) == ["dask-scratch-space"]   # ours removed


def test_the_scratch_space_is_private_and_leaves_no_import_path_behind():
    with cluster.dask_client("local", 1, 1) as client:
        (worker,) = client.scheduler_info()["workers"].values()
        scratch = Path(worker["local_directory"]).parents[1]
        assert scratch.parent == Path(tempfile.gettempdir())
        info = scratch.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
        paths = client.run(lambda: list(sys.path))
        for entries in [*paths.values(), sys.path]:   # whatever lies in the temporary folder is ours alone
            inside = [e for e in entries if e.startswith(tempfile.gettempdir())   # (a clone may live there too)
                      and not Path(e).resolve().is_relative_to(ROOT)]
            assert all(Path(e).is_relative_to(scratch) for e in inside), inside
    assert not scratch.exists()
    assert not [e for e in sys.path if e.startswith(str(scratch))]


def test_the_local_workers_stop_their_heartbeats_before_the_cluster_closes():
    """``dask_client``'s exit stops each local worker's heartbeats first (``cluster._stop_heartbeat``): a heartbeat
    caught by the shutdown would log a traceback to the standard error of a clean run (seen under load)."""
    with cluster.dask_client("local", 1, 1) as client:
        def beating(dask_worker):
            return dask_worker.periodic_callbacks["heartbeat"].is_running()
        assert list(client.run(beating).values()) == [True]
        client.run(cluster._stop_heartbeat)
        assert list(client.run(beating).values()) == [False]
        assert list(client.run(lambda dask_worker: dask_worker.rpc.active).values()) == [0]


# ---------------------------------------------------------------------------
# finding 2: a scheduler at an address
# ---------------------------------------------------------------------------

def test_a_plain_tcp_scheduler_of_another_user_is_refused_before_connecting(shared):
    script = shared / "hostile.py"
    script.write_text(HOSTILE)
    script.chmod(0o644)
    proc = subprocess.Popen(**nobody(sys.executable, str(script), str(shared), cwd=shared, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env={**os.environ, "TMPDIR": str(shared)}))
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), address
        for command in ([*AMP, "--scheduler", address], ["sweep", "{spec}", "--scheduler", address]):
            spec = shared / "s.yaml"
            spec.write_text(SPEC)
            run = cli_run(*[a.format(spec=spec) for a in command], timeout=60)
            assert not (shared / "ran-in-client").exists(), "the hostile pickle ran"
            assert not (shared / "client-connected").exists(), "the client connected"
            assert run.returncode == 2 and run.stdout == "", run.stdout
            assert len(run.stderr.splitlines()) == 1, run.stderr
            assert "--scheduler" in run.stderr and "tls://host:port" in run.stderr, run.stderr
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _credentials(folder: Path, security, name: str) -> dict:
    """The client credentials of ``security`` in files of mode 0600, as Dask configuration."""
    paths = {}
    for key, text in (("ca-file", security.tls_ca_file), ("client.cert", security.tls_client_cert),
                      ("client.key", security.tls_client_key)):
        path = folder / f"{name}-{key}.pem"
        path.touch(0o600)
        path.write_text(text)
        paths[f"distributed.comm.tls.{key}"] = str(path)
    return paths


def test_a_tls_scheduler_runs_with_the_users_credentials_only(tmp_path, monkeypatch):
    ours, theirs = distributed.Security.temporary(), distributed.Security.temporary()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://",
                                  host="127.0.0.1", security=ours, dashboard_address=None,
                                  local_directory=str(tmp_path)) as lc:
        address = lc.scheduler_address
        with dask.config.set(_credentials(tmp_path, ours, "ours")):
            rep = run_sweep(BASE, tmp_path / "r.csv", scheduler=address, progress=False)
            assert rep.complete and rep.n_computed == 2
            ch = make_channel("softmax")
            data = model.sample_dataset(0.3, 20, 2, 0.5, ch, 1)
            kw = dict(S=data.S, max_iter=5, on_max_iter="return")
            one = gamp_rie(data.X, data.y, ch, 0.5, **kw)
            many = gamp_rie(data.X, data.y, ch, 0.5, scheduler=address, **kw)
            assert abs(one.mmse - many.mmse) < 1e-10
            monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "1s")   # nobody listens: no file changes
            with pytest.raises(ValueError, match="scheduler: cannot connect to 'tls://127.0.0.1:9'"):
                run_sweep(BASE, tmp_path / "other.csv", scheduler="tls://127.0.0.1:9", progress=False)
        with dask.config.set(_credentials(tmp_path, theirs, "theirs")), \
                dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
            with pytest.raises(ValueError, match="scheduler: cannot connect to 'tls://127.0.0.1:"):
                run_sweep(BASE, tmp_path / "other.csv", scheduler=address, progress=False)
        with dask.config.set({"distributed.comm.tls.ca-file": None}):
            with pytest.raises(ValueError, match="distributed.comm.tls.ca-file"):
                run_sweep(BASE, tmp_path / "other.csv", scheduler=address, progress=False)
    assert not (tmp_path / "other.csv").exists()


# ---------------------------------------------------------------------------
# findings 8a and 11a: --shards and --scheduler in one line
# ---------------------------------------------------------------------------

CPUS = os.cpu_count() or 1


@pytest.mark.parametrize("command, words", [
    ([*AMP, "--scheduler", "inproc://x"], ["--scheduler", "'local' or tls://host:port", "inproc://x"]),
    ([*AMP, "--scheduler", "serial"], ["--scheduler", "amp", "'local' or tls://host:port", "'serial'"]),
    ([*AMP, "--scheduler", "tcp://127.0.0.1:8786"],
     ["--scheduler", "only a TLS scheduler verified by your CA", "tls://host:port"]),
    ([*AMP, "--scheduler", "tls://x"], ["--scheduler", "tls://host:port", "port from 1 to 65535"]),
    ([*AMP, "--scheduler", "tls://x:99999"], ["--scheduler", "port from 1 to 65535"]),
    (["sweep", "{spec}", "--scheduler", "tls://x:0"], ["--scheduler", "port from 1 to 65535"]),
    ([*AMP, "--scheduler", "local", "--shards", str(CPUS + 1)],
     ["--shards must be between 1 and", f"got {CPUS + 1}"]),
    ([*AMP, "--scheduler", "local", "--shards", "1000000"], ["--shards must be between 1 and", "got 1000000"]),
    (["sweep", "{spec}", "--scheduler", "inproc://x"],
     ["--scheduler", "'serial', 'processes', 'local' or tls://host:port", "inproc://x"]),
    (["sweep", "{spec}", "--scheduler", "bogus"], ["--scheduler", "'serial', 'processes', 'local'"]),
    (["sweep", "{spec}", "--scheduler", "tcp://h:1"], ["--scheduler", "only a TLS scheduler verified by your CA"]),
])
def test_bad_scheduler_and_shards_are_refused_in_one_line(tmp_path, capsys, command, words):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    assert cli.main([a.format(spec=spec) for a in command]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_the_library_bounds_shards_like_the_command_line():
    ch = make_channel("softmax")
    data = model.sample_dataset(0.1, 10, 2, 0.5, ch, 0)
    with pytest.raises(ValueError, match=f"shards must be between 1 and {CPUS} .*got 1000000"):
        gamp_rie(data.X, data.y, ch, 0.5, scheduler="local", shards=1_000_000)
    with pytest.raises(ValueError, match="scheduler must be 'local', tls://host:port or a distributed.Client"):
        gamp_rie(data.X, data.y, ch, 0.5, scheduler="serial")


# ---------------------------------------------------------------------------
# findings 10b and 10c: nothing printed but the sweep's own report
# ---------------------------------------------------------------------------

def test_failed_runs_on_dask_print_only_the_sweeps_report(tmp_path):
    spec = tmp_path / "f.yaml"
    spec.write_text(SPEC + "options: {se: {solver: iterate, max_iter: 1}}\n")
    run = cli_run("sweep", str(spec), "--scheduler", "local", "--workers", "1", "--no-progress")
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 2 and all("failed: ConvergenceError: SE did not converge" in x for x in lines), lines


def test_a_worker_that_dies_is_still_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.runners, "execute", lambda run: os._exit(3))
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            pytest.warns(RuntimeWarning, match="KilledWorker"):
        rep = run_sweep({**BASE, "alpha": [0.05]}, tmp_path / "r.csv", scheduler="local", workers=1,
                        progress=False)
    (failure,) = rep.failures
    assert "KilledWorker" in failure[1]


def test_a_sharded_run_shuts_down_quietly():
    run = cli_run(*AMP, "--scheduler", "local", "--shards", "2")
    assert run.returncode == 0 and run.stderr == "", run.stderr
