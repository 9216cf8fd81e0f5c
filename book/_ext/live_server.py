"""``make live``: serve the built book with a local Jupyter kernel server behind its "Live" buttons.

Two servers, both on 127.0.0.1 only:

* the book: the built HTML folder (no directory listings; every response
  forbids framing by other sites), plus the live session.  At start the server
  makes a one-time secret and prints the book's address with the secret in
  its fragment, ``http://127.0.0.1:PORT/book/intro.html#live=SECRET`` (a
  fragment is never sent to a server nor logged).  The page's script
  (``static/aim-live.js``) removes it from the address bar and exchanges it,
  once, at ``POST /_live/session`` (from the book's own origin) for a session
  key, which it keeps in the ``localStorage`` of the book's origin (scheme,
  host *and port*: no page served on another port can read it).
  ``GET /_live/config.json`` (the kernel server's URL, a fresh token and the
  kernel name, from memory: no token is written into the build) answers 403
  to any request without that key in its :data:`SESSION_HEADER` header or
  with another ``Host``.  A custom header makes a cross-origin request need a
  preflight, which this server never grants, and it is not sent by the browser
  on its own as a cookie would be (the cookies of 127.0.0.1 go to every port
  of it, that is to any local user's server).  So other users and processes
  of the machine, and pages of other sites or ports, cannot obtain the token;
  the browser that opened the address keeps the key across the book's pages.
* ``jupyter_server`` (``live_origin.py``): token required (passed in the
  environment, not on the command line), and sent to it only after the server
  has proved that it is the one this script started (an HMAC of a fresh nonce
  under a key passed in its environment, ``live_origin.PROOF_PATH``): another
  local user holding the kernel port is sent nothing; a port already in use
  is refused before anything starts, requests from any origin but the
  book's refused with 403 (REST, websockets, CORS preflights), kernels started
  in ``book/`` with this repository first on ``PYTHONPATH``, as the build
  executes the chapters, and shut down when idle for ``cull_idle_timeout``
  seconds without a connection (a page also shuts its kernel down as it goes
  away).

As root, the kernels would run the reader's code as root: the server refuses
to start unless ``--allow-root`` is given.

Run ``python book/_ext/live_server.py --html _build/html``; Ctrl-C stops both.
:func:`live_book` is the same as a context manager (used by the tests).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hmac
import json
import os
import re
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_origin import PROOF_KEY_ENV, PROOF_PATH, proof  # noqa: E402

HOST = "127.0.0.1"
CONFIG_PATH = "/_live/config.json"
SESSION_PATH = "/_live/session"
SESSION_HEADER = "X-AIM-Live-Session"
ROOT = Path(__file__).resolve().parents[2]
KERNEL_NAME = "python3"
FRAME_HEADERS = (("X-Frame-Options", "SAMEORIGIN"), ("Content-Security-Policy", "frame-ancestors 'self'"),
                 ("X-Content-Type-Options", "nosniff"))


class _LiveSession:
    """The one-time secret of the live address and the session key it is exchanged for.

    Parameters
    ----------
    config : dict
        What ``/_live/config.json`` answers to the session.
    """

    def __init__(self, config: dict):
        self.config = json.dumps(config).encode()
        self.secret = secrets.token_urlsafe(32)
        self._key = secrets.token_urlsafe(32)
        self._redeemed = False
        self._lock = threading.Lock()

    def redeem(self, offered: bytes) -> str | None:
        """The session key if ``offered`` is the secret and was not redeemed before, else None."""
        with self._lock:
            if self._redeemed or not hmac.compare_digest(offered, self.secret.encode()):
                return None
            self._redeemed = True
            return self._key

    def admits(self, key: str | None) -> bool:
        """Whether ``key`` (a request's :data:`SESSION_HEADER`, or None) is the session's."""
        with self._lock:
            return self._redeemed and key is not None and hmac.compare_digest(
                key.encode(), self._key.encode())


class _BookHandler(SimpleHTTPRequestHandler):
    """The book's files, :data:`SESSION_PATH` and :data:`CONFIG_PATH` (``self.server.live``: a :class:`_LiveSession`).

    No directory listings; every response forbids framing by other sites (:data:`FRAME_HEADERS`).
    """

    def end_headers(self):
        for name, value in FRAME_HEADERS:
            self.send_header(name, value)
        super().end_headers()

    def list_directory(self, path):
        self.send_error(404, "no directory listings")

    def do_GET(self):
        if self.path.split("?", 1)[0] != CONFIG_PATH:
            return super().do_GET()
        if not (self._at_the_book() and self.server.live.admits(self.headers.get(SESSION_HEADER))):
            return self.send_error(403, "the live configuration is for the browser that opened the live address")
        self._answer(200, self.server.live.config, ("Content-Type", "application/json"))

    def do_POST(self):
        if self.path != SESSION_PATH:
            return self.send_error(404)
        length = self.headers.get("Content-Length", "")
        if not (length.isdigit() and int(length) <= 256):
            return self.send_error(400, "the body is the secret of the live address")
        offered = self.rfile.read(int(length))
        origin = f"http://{HOST}:{self.server.server_address[1]}"
        key = (self.server.live.redeem(offered)
               if self._at_the_book() and self.headers.get("Origin") == origin else None)
        if key is None:
            return self.send_error(403, "not the secret of this live address, or already used")
        self._answer(200, json.dumps({"session": key}).encode(), ("Content-Type", "application/json"))

    def _at_the_book(self) -> bool:
        return self.headers.get("Host") == f"{HOST}:{self.server.server_address[1]}"

    def _answer(self, status: int, body: bytes, header: tuple[str, str]) -> None:
        """Send ``body`` with ``header``, never cached."""
        self.send_response(status)
        self.send_header(*header)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@dataclasses.dataclass(frozen=True)
class LiveBook:
    """What :func:`live_book` serves.

    Attributes
    ----------
    origin : str
        The book's origin, ``http://127.0.0.1:PORT``.
    start : str
        The page that the live address opens (the target of the book's ``index.html``).
    secret : str
        The one-time secret that the page exchanges for the session key.
    config : dict
        What ``/_live/config.json`` answers to that session: ``baseUrl``, ``wsUrl``,
        ``token`` and ``kernelName`` of the kernel server.
    """

    origin: str
    start: str
    secret: str
    config: dict

    @property
    def url(self) -> str:
        """The live address, to be opened once by the reader's browser."""
        return f"{self.origin}/{self.start}#live={self.secret}"


def _start_page(html: Path) -> str:
    """The page that ``html/index.html`` redirects to (Jupyter Book's root page), or ``index.html``."""
    refresh = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', (html / "index.html").read_text())
    return refresh.group(1) if refresh else "index.html"


def _wait_for_kernel_server(proc: subprocess.Popen, url: str, key: str, timeout: float) -> None:
    """Wait until the server at ``url`` proves that it is ``proc`` (``live_origin.py``, given ``key``).

    Each probe sends a fresh nonce and nothing else (no token) to ``PROOF_PATH`` and checks the
    answer against ``HMAC-SHA256(key, nonce)``.  A connection refused is a server not yet
    listening; any answer that is not the proof is another process on the port: refused at once.
    """
    deadline = time.time() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter_server exited with {proc.returncode}")
        nonce = secrets.token_hex(16)
        try:
            with urllib.request.urlopen(f"{url}{PROOF_PATH.lstrip('/')}?nonce={nonce}", timeout=2) as r:
                answer = r.read(200).decode("ascii", "replace")
        except urllib.error.HTTPError as err:
            answer = f"HTTP {err.code}"
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            answer = None
        if answer is not None:
            if hmac.compare_digest(answer, proof(key.encode(), nonce)):
                return
            raise RuntimeError(f"kernel_port: another process answers at {url} and cannot prove that it is the "
                               "jupyter_server this script started; nothing was sent to it. Choose another "
                               "--kernel-port (0: a free one)")
        if time.time() > deadline:
            raise RuntimeError(f"jupyter_server did not answer at {url} within {timeout:g} s")
        time.sleep(0.3)


def _check_free(name: str, port: int) -> None:
    """``ValueError`` naming ``name`` if some process listens on ``127.0.0.1:port`` (0: any free port)."""
    if port == 0:
        return
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the servers bind: TIME_WAIT is free
        try:
            probe.bind((HOST, port))
        except OSError as err:
            raise ValueError(f"{name}: {HOST}:{port} is in use ({err.strerror}); choose another "
                             f"--{name.replace('_', '-')} (0: a free one)") from None


def _stop(proc: subprocess.Popen) -> None:
    """Stop jupyter_server (it shuts its kernels down); kill its process group if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _kernel_server_command(port: int, origin: str, allow_root: bool, cull_idle_timeout: int,
                           cull_interval: int) -> list[str]:
    return ([sys.executable, str(Path(__file__).with_name("live_origin.py")), "--no-browser",
             f"--ServerApp.ip={HOST}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
             f"--ServerApp.allow_origin={origin}", f"--ServerApp.root_dir={ROOT / 'book'}",
             "--ServerApp.allow_remote_access=False", "--ServerApp.terminals_enabled=False",
             f"--MappingKernelManager.cull_idle_timeout={cull_idle_timeout}",
             f"--MappingKernelManager.cull_interval={cull_interval}",
             "--MappingKernelManager.cull_connected=False"]
            + (["--ServerApp.allow_root=True"] if allow_root else []))


@contextlib.contextmanager
def live_book(html: Path, port: int = 0, kernel_port: int = 0, log=None, timeout: float = 60.0, *,
              allow_root: bool = False, cull_idle_timeout: int = 600, cull_interval: int = 60):
    """Serve ``html`` and a kernel server for it; yield a :class:`LiveBook`.

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
    allow_root : bool
        Run even as root (the kernels then run the reader's code as root).
    cull_idle_timeout, cull_interval : int
        A kernel without connections is shut down once idle for ``cull_idle_timeout``
        seconds (0: never), checked every ``cull_interval`` seconds.

    Raises
    ------
    PermissionError
        As root without ``allow_root``.
    ValueError
        No built book at ``html``, a port outside ``[0, 65535]`` or already in use.
    RuntimeError
        The kernel server exits, does not answer within ``timeout``, or something else on its
        port answers without the proof (:func:`_wait_for_kernel_server`).
    """
    html = Path(html)
    if not (html / "index.html").is_file():
        raise ValueError(f"html: no built book at {html} (build it with `make book`)")
    for name, value in (("port", port), ("kernel_port", kernel_port)):
        if not 0 <= value <= 65535:
            raise ValueError(f"{name}: a TCP port in [0, 65535] (0: a free one), got {value}")
    if os.geteuid() == 0 and not allow_root:
        raise PermissionError("live mode refuses to run as root (its kernels would run code as root); "
                              "pass --allow-root (make live LIVE_ALLOW_ROOT=1) to run it anyway")
    _check_free("kernel_port", kernel_port)
    _check_free("port", port)
    book = ThreadingHTTPServer((HOST, port), functools.partial(_BookHandler, directory=str(html)))
    origin = f"http://{HOST}:{book.server_address[1]}"
    if kernel_port == 0:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            kernel_port = probe.getsockname()[1]
    token, key = secrets.token_urlsafe(32), secrets.token_hex(32)
    kernel_url = f"http://{HOST}:{kernel_port}/"
    config = {"baseUrl": kernel_url, "wsUrl": f"ws://{HOST}:{kernel_port}/", "token": token,
              "kernelName": KERNEL_NAME}
    book.live = _LiveSession(config)
    env = dict(os.environ, JUPYTER_TOKEN=token, **{PROOF_KEY_ENV: key},
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    threading.Thread(target=book.serve_forever, daemon=True).start()
    proc = None
    try:
        proc = subprocess.Popen(
            _kernel_server_command(kernel_port, origin, allow_root, cull_idle_timeout, cull_interval),
            env=env, stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True)
        _wait_for_kernel_server(proc, kernel_url, key, timeout)
        yield LiveBook(origin, _start_page(html), book.live.secret, config)
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
    parser.add_argument("--allow-root", action="store_true",
                        help="run even as root (the kernels then run the reader's code as root)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop jupyter_server on `kill` too
    try:
        with live_book(args.html, args.port, args.kernel_port, allow_root=args.allow_root) as live:
            print(f"Open the live book at\n\n    {live.url}\n\n(this address works once, in one browser, "
                  f"which keeps the session while this server runs; kernels: jupyter_server at "
                  f"{live.config['baseUrl']}, 127.0.0.1 only). Ctrl-C stops both.", flush=True)
            threading.Event().wait()
    except (PermissionError, ValueError, RuntimeError) as err:
        sys.exit(f"live_server: {err}")
    except KeyboardInterrupt:
        print("Stopped.", flush=True)


if __name__ == "__main__":
    main()
