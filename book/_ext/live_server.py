"""``make live``: serve the built book with a local Jupyter kernel server behind its "Live" buttons.

Two servers, both on 127.0.0.1 only:

* the book: the built HTML folder, plus ``/_live/config.json`` (the kernel
  server's URL, a fresh token and the kernel name), answered from memory
  so that no token is ever written into the build, and only to requests whose
  ``Host`` is this address (a page of another site cannot read it, not even
  through a DNS name pointed at 127.0.0.1);
* ``jupyter_server``: token required (passed in the environment, not on the
  command line), CORS and websocket origins limited to the book's origin,
  kernels started in ``book/`` with this repository first on ``PYTHONPATH``,
  as the build executes the chapters.

Run ``python book/_ext/live_server.py --html _build/html``; Ctrl-C stops both.
:func:`live_book` is the same as a context manager (used by the tests).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"
CONFIG_PATH = "/_live/config.json"
ROOT = Path(__file__).resolve().parents[2]
KERNEL_NAME = "python3"


class _BookHandler(SimpleHTTPRequestHandler):
    """Static files of the book, and the server's ``live_config`` (bytes) at :data:`CONFIG_PATH`."""

    def do_GET(self):
        if self.path.split("?", 1)[0] != CONFIG_PATH:
            return super().do_GET()
        port = self.server.server_address[1]
        if self.headers.get("Host") not in (f"{HOST}:{port}", f"localhost:{port}"):
            return self.send_error(403, "the live configuration is served to the book's own address only")
        body = self.server.live_config
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _wait_for_kernel_server(proc: subprocess.Popen, url: str, token: str, timeout: float) -> None:
    deadline = time.time() + timeout
    request = urllib.request.Request(f"{url}api/status", headers={"Authorization": f"token {token}"})
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter_server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(request, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.time() > deadline:
            raise RuntimeError(f"jupyter_server did not answer at {url} within {timeout:g} s")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    """Stop jupyter_server (it shuts its kernels down); kill its process group if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextlib.contextmanager
def live_book(html: Path, port: int = 0, kernel_port: int = 0, log=None, timeout: float = 60.0):
    """Serve ``html`` and a kernel server for it; yield ``(book_url, config)``.

    Parameters
    ----------
    html : Path
        The built HTML folder (``_build/html``).
    port, kernel_port : int
        Ports of the book and of ``jupyter_server`` on 127.0.0.1; 0 picks free ones.
    log : file, optional
        Where ``jupyter_server`` writes its log (default: this process's stderr).
    timeout : float
        Seconds to wait for ``jupyter_server`` to answer.
    """
    html = Path(html)
    if not (html / "index.html").is_file():
        raise ValueError(f"html: no built book at {html} (build it with `make book`)")
    for name, value in (("port", port), ("kernel_port", kernel_port)):
        if not 0 <= value <= 65535:
            raise ValueError(f"{name}: a TCP port in [0, 65535] (0: a free one), got {value}")
    book = ThreadingHTTPServer((HOST, port), functools.partial(_BookHandler, directory=str(html)))
    port = book.server_address[1]
    origin = f"http://{HOST}:{port}"
    if kernel_port == 0:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            kernel_port = probe.getsockname()[1]
    token = secrets.token_urlsafe(32)
    kernel_url = f"http://{HOST}:{kernel_port}/"
    config = {"baseUrl": kernel_url, "wsUrl": f"ws://{HOST}:{kernel_port}/", "token": token,
              "kernelName": KERNEL_NAME}
    book.live_config = json.dumps(config).encode()
    env = dict(os.environ, JUPYTER_TOKEN=token,
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    threading.Thread(target=book.serve_forever, daemon=True).start()
    proc = None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", f"--ServerApp.ip={HOST}",
             f"--ServerApp.port={kernel_port}", "--ServerApp.port_retries=0",
             f"--ServerApp.allow_origin={origin}", f"--ServerApp.root_dir={ROOT / 'book'}",
             "--ServerApp.allow_remote_access=False", "--ServerApp.terminals_enabled=False"]
            + (["--ServerApp.allow_root=True"] if os.geteuid() == 0 else []),
            env=env, stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True)
        _wait_for_kernel_server(proc, kernel_url, token, timeout)
        yield origin, config
    finally:
        book.shutdown()
        book.server_close()
        if proc is not None:
            _stop(proc)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--port", type=int, default=8000, help="port of the book (default 8000)")
    parser.add_argument("--kernel-port", type=int, default=8889, help="port of jupyter_server (default 8889)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop jupyter_server on `kill` too
    with live_book(args.html, args.port, args.kernel_port) as (origin, config):
        print(f"The live book is at {origin}/index.html (kernels: jupyter_server at "
              f"{config['baseUrl']}, 127.0.0.1 only). Ctrl-C stops both.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("Stopping.", flush=True)


if __name__ == "__main__":
    main()
