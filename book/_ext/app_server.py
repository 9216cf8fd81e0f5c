"""``make app``: the playground as a live Voila app that only the reader can use.

jupytext converts ``book/playground.md`` to ``_build/app/playground.ipynb`` and
Voila 0.5 serves it as a child process, as the book's other tools run: template
``aim`` from ``book/_ext`` (no CDN links), jupytext's JupyterLab extension
denied, this repository first on ``PYTHONPATH``.  What the launcher guarantees:

* Voila listens on 127.0.0.1 only, on the port asked for, or does not start
  (a port outside [0, 65535] or already in use is refused; Voila is not left
  to move to another port).
* Every page and kernel API needs a fresh token (``secrets.token_urlsafe(32)``):
  without it, ``/`` and any other path is redirected to Voila's login page and
  the kernel APIs answer 403, so no page is served and no kernel is started.
  The token reaches Voila in its *environment* (``JUPYTER_TOKEN``, read by
  jupyter_server's ``IdentityProvider`` once ``--Voila.auto_token=True`` stops
  Voila from forcing an empty token), never on a command line: any local user
  can read ``/proc/PID/cmdline``, only the owner ``/proc/PID/environ``.  Voila's
  own log shows ``?token=...``; the launcher prints the full address,
  ``http://127.0.0.1:PORT/?token=TOKEN``, to the reader alone.
* Before printing it, the launcher checks that Voila refuses a request without
  the token and accepts one with it; otherwise (a configuration file that
  turns the token off, say) it stops Voila and fails.
* As root it refuses to start unless ``--allow-root`` is given (the kernels
  would run the reader's code as root).
* Ctrl-C or SIGTERM stops Voila, which shuts its kernels down; if it hangs,
  its process group and its kernels' are killed.

Run ``python book/_ext/app_server.py --port 8866``.  :func:`voila_app` is the
same as a context manager (used by the tests).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]
PLAYGROUND = ROOT / "book" / "playground.md"
NO_KERNEL = "00000000-0000-0000-0000-000000000000"   # an id of the form the kernel API routes


@dataclasses.dataclass(frozen=True)
class App:
    """What :func:`voila_app` serves.

    Attributes
    ----------
    origin : str
        ``http://127.0.0.1:PORT``.
    token : str
        The token that every request needs (in the query, a header, or the login cookie it sets).
    process : subprocess.Popen
        The Voila process (the leader of its own process group).
    """

    origin: str
    token: str
    process: subprocess.Popen = dataclasses.field(repr=False, compare=False)

    @property
    def url(self) -> str:
        """The address to open: the app with the token."""
        return f"{self.origin}/?token={self.token}"


def free_port(port: int | str) -> int:
    """``port`` if it is a TCP port free on 127.0.0.1 (0: a free one, picked now), else ValueError naming --port."""
    try:
        port = int(port)
    except ValueError:
        raise ValueError(f"--port: a TCP port in [0, 65535] (0: a free one), got {port!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--port: a TCP port in [0, 65535] (0: a free one), got {port}")
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as Voila (tornado) binds
        try:
            probe.bind((HOST, port))
        except OSError as err:
            raise ValueError(f"--port: {HOST}:{port} is not free ({err.strerror}); "
                             f"choose another with --port (make app APP_PORT=...)") from None
        return probe.getsockname()[1]


def write_notebook(out_dir: Path) -> Path:
    """Convert ``book/playground.md`` with jupytext to ``out_dir/playground.ipynb``; return its path."""
    import jupytext

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    notebook = out_dir / "playground.ipynb"
    jupytext.write(jupytext.read(PLAYGROUND), notebook)
    return notebook


def voila_command(notebook: Path, port: int) -> list[str]:
    """Voila's command line: no secret on it (the token travels in the environment).

    Progressive rendering sends the page at once and each cell's output as it is computed,
    so the first panels answer while the later ones are still being drawn.
    """
    return [sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}",
            f"--Voila.ip={HOST}", "--Voila.port_retries=0", "--Voila.auto_token=True", "--template=aim",
            "--VoilaConfiguration.extension_denylist=jupyterlab-jupytext",
            "--VoilaConfiguration.progressive_rendering=True"]


def voila_environment(token: str) -> dict:
    """This process's environment with the token, the ``aim`` template's folder and this repository first."""
    return dict(os.environ, JUPYTER_TOKEN=token, JUPYTER_PATH=str(ROOT / "book" / "_ext"),
                PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))


def _status(url: str, token: str | None = None) -> int | None:
    """The HTTP status of ``GET url`` (with ``token`` in the Authorization header), None if nothing answers."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _wait_until_guarded(proc: subprocess.Popen, origin: str, token: str, timeout: float) -> None:
    """Wait for Voila to answer; RuntimeError unless its kernel API refuses a request without the token.

    ``GET /api/kernels/NO_KERNEL`` starts nothing: 403 without the token, 404 (no such kernel) with it.
    """
    url = f"{origin}/api/kernels/{NO_KERNEL}"
    deadline = time.time() + timeout
    while (without := _status(url)) is None:
        if proc.poll() is not None:
            raise RuntimeError(f"Voila exited with {proc.returncode}")
        if time.time() > deadline:
            raise RuntimeError(f"Voila did not answer at {origin} within {timeout:g} s")
        time.sleep(0.3)
    with_token = _status(url, token)
    if (without, with_token) != (403, 404):
        raise RuntimeError(f"Voila does not require the token (a request without it got {without}, "
                           f"with it {with_token}); check the Voila configuration files: not serving the app")


def _children(pid: int) -> list[int]:
    """The ids of the processes whose parent is ``pid`` (Voila's kernels), from /proc; [] without it."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def stop(proc: subprocess.Popen) -> None:
    """Stop Voila (it shuts its kernels down); kill its process group and its kernels' if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        for group in [proc.pid, *_children(proc.pid)]:   # each kernel leads a session of its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        proc.wait(timeout=5)


@contextlib.contextmanager
def voila_app(port: int = 8866, out_dir: Path | None = None, log=None, timeout: float = 60.0, *,
              allow_root: bool = False):
    """Serve the playground with Voila, a token required; yield an :class:`App`.

    Parameters
    ----------
    port : int
        Port on 127.0.0.1 (0: a free one).
    out_dir : Path, optional
        Where the notebook is written (default ``_build/app``); Voila serves this folder.
    log : file, optional
        Where Voila writes its log (default: this process's stderr).
    timeout : float
        Seconds to wait for Voila to answer.
    allow_root : bool
        Run even as root (the kernels then run the reader's code as root).

    Raises
    ------
    PermissionError
        As root without ``allow_root``.
    ValueError
        A port outside [0, 65535] or not free.
    RuntimeError
        Voila exits, does not answer, or answers without the token.
    """
    if os.geteuid() == 0 and not allow_root:
        raise PermissionError("the app refuses to run as root (its kernels would run the reader's code as "
                              "root); pass --allow-root (make app APP_ALLOW_ROOT=1) to run it anyway")
    port = free_port(port)
    notebook = write_notebook(ROOT / "_build" / "app" if out_dir is None else out_dir)
    token = secrets.token_urlsafe(32)
    proc = subprocess.Popen(voila_command(notebook, port), cwd=notebook.parent, env=voila_environment(token),
                            stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True)
    try:
        origin = f"http://{HOST}:{port}"
        _wait_until_guarded(proc, origin, token, timeout)
        yield App(origin, token, proc)
    finally:
        stop(proc)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", default="8866", help="port on 127.0.0.1 (default 8866; 0: a free one)")
    parser.add_argument("--allow-root", action="store_true",
                        help="run even as root (the kernels then run the reader's code as root)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # stop Voila on `kill` too
    try:
        with voila_app(args.port, allow_root=args.allow_root) as app:
            print(f"Open the playground app at\n\n    {app.url}\n\n(Voila on {HOST} only; the token in this "
                  f"address is required, keep it to yourself). Ctrl-C stops it.", flush=True)
            app.process.wait()
            sys.exit(f"app_server: Voila exited with {app.process.returncode}")
    except (PermissionError, ValueError) as err:
        print(f"app_server: {err}", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as err:
        sys.exit(f"app_server: {err}")
    except KeyboardInterrupt:
        print("Stopped.", flush=True)


if __name__ == "__main__":
    main()
