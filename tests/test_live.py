"""Live mode (``make live``): the live server's security and, in headless Chromium, a panel made live.

The server tests need no build: they serve a small folder.  The browser tests
use the built book (``built_book``) and the policy of ``browser_support``.
The tests run as root in CI, so every server is started with ``allow_root=True``.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from browser_support import launch, recorded_problems, require, serve, watch
from conftest import ROOT, nobody
from test_app import _wait_new_image

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import live_server  # noqa: E402
from live_origin import PROOF_KEY_ENV, PROOF_PATH  # noqa: E402
from live_server import CONFIG_PATH, SESSION_HEADER, SESSION_PATH, live_book  # noqa: E402

CHAPTER = "book/random_matrices.html"   # its opening cell and its panel run in a few seconds
TIMEOUT_MS = 120_000
EVIL = "http://evil.example"
NO_KERNEL = "00000000-0000-0000-0000-000000000000"   # an id of the form the kernels API routes


def _request(url: str, headers: dict | None = None, data: bytes | None = None, method: str | None = None):
    """``(status, headers, body)`` of a request, HTTP errors included."""
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def _get(url: str, headers: dict | None = None):
    return _request(url, headers)


def _redeem(live, secret: str, origin: str | None = None):
    """POST ``secret`` to the live session as the book's page does (``origin``: its origin)."""
    return _request(live.origin + SESSION_PATH, {"Origin": origin or live.origin, "Content-Type": "text/plain"},
                    secret.encode(), "POST")


def _kernels(config: dict) -> list:
    return json.loads(_get(config["baseUrl"] + "api/kernels", {"Authorization": f"token {config['token']}"})[2])


def _start_kernel(config: dict, headers: dict | None = None):
    return _request(config["baseUrl"] + "api/kernels", {"Authorization": f"token {config['token']}",
                                                         "Content-Type": "application/json", **(headers or {})},
                    b'{"name": "python3"}', "POST")


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A live server of a small folder, its secret already exchanged; yields it and the session key."""
    html = tmp_path_factory.mktemp("site")
    (html / "index.html").write_text("<!doctype html><title>book</title>")
    (html / "_static").mkdir()
    (html / "_static" / "book.css").write_text("body {}")
    with live_book(html, log=open(html.parent / "server.log", "w"), allow_root=True) as live:
        status, headers, body = _redeem(live, live.secret)
        assert status == 200 and headers["Cache-Control"] == "no-store"
        yield live, json.loads(body)["session"]


def _session(key: str) -> dict:
    return {SESSION_HEADER: key}


def test_live_address_carries_a_one_time_secret_in_its_fragment(small_site):
    live, key = small_site
    assert live.url == f"{live.origin}/index.html#live={live.secret}" and len(live.secret) >= 32
    assert live.origin.startswith("http://127.0.0.1:") and len(key) >= 32 and key != live.secret
    status, headers, body = _redeem(live, live.secret)   # used by the fixture: refused now
    assert status == 403 and key.encode() not in body and "Set-Cookie" not in headers


def test_session_key_reads_the_config(small_site):
    live, key = small_site
    status, headers, body = _get(live.origin + CONFIG_PATH, _session(key))
    assert status == 200 and headers["Cache-Control"] == "no-store"
    config = json.loads(body)
    assert config == live.config and config["baseUrl"].startswith("http://127.0.0.1:")
    assert len(config["token"]) >= 32 and config["kernelName"] == "python3"


def test_without_the_session_no_route_gives_the_token(small_site):
    """Another local process (a plain client without the browser's secret) gets 403, never the token."""
    live, key = small_site
    port = live.origin.rsplit(":", 1)[1]
    attempts = [_get(live.origin + CONFIG_PATH),
                _get(live.origin + CONFIG_PATH + "?x", _session(key[:-1])),
                _get(live.origin + CONFIG_PATH, {"Cookie": f"session={key}"}),
                _get(live.origin + CONFIG_PATH, {**_session(key), "Host": f"evil.example:{port}"}),
                _get(live.origin + CONFIG_PATH, {**_session(key), "Host": f"localhost:{port}"}),
                _redeem(live, "a-guess"), _redeem(live, live.secret, EVIL)]
    assert [a[0] for a in attempts] == [403] * len(attempts)
    for path in ("/", "/index.html", "/_live/", "/_live", SESSION_PATH, "/_static/"):
        for method in ("GET", "HEAD"):
            status, headers, body = _request(live.origin + path, method=method)
            assert live.config["token"].encode() not in body and key.encode() not in body
            assert "Set-Cookie" not in headers


def test_book_server_lists_no_directories_and_forbids_framing(small_site):
    live, key = small_site
    answers = {path: _get(live.origin + path) for path in ("/index.html", "/_static/", "/_static", "/_static/book.css")}
    answers["config"] = _get(live.origin + CONFIG_PATH, _session(key))
    assert [a[0] for a in answers.values()] == [200, 404, 404, 200, 200]
    assert b"book.css" not in answers["/_static/"][2]
    for status, headers, _ in [*answers.values(), _get(live.origin + CONFIG_PATH)]:
        assert headers["X-Frame-Options"] == "SAMEORIGIN", status
        assert headers["Content-Security-Policy"] == "frame-ancestors 'self'", status


def test_kernel_server_needs_the_token(small_site):
    config = small_site[0].config
    api = config["baseUrl"] + "api/kernels"
    assert _get(api)[0] == 403
    assert _get(api, {"Authorization": "token wrong"})[0] == 403
    status, headers, _ = _get(api, {"Authorization": f"token {config['token']}"})
    assert status == 200 and headers["X-Frame-Options"] == "DENY"
    assert "Set-Cookie" not in headers   # the cookies of 127.0.0.1 reach every local server
    assert "frame-ancestors 'self'" in headers["Content-Security-Policy"]


def test_kernel_server_refuses_foreign_origins(small_site):
    """With the token: a foreign Origin gets 403 and starts no kernel, its preflight too; the book's works."""
    live, _ = small_site
    config, auth = live.config, {"Authorization": f"token {live.config['token']}"}
    before = _kernels(config)
    for asking in (EVIL, "null", live.origin.replace("127.0.0.1", "localhost")):
        assert _start_kernel(config, {"Origin": asking})[0] == 403
        assert _get(config["baseUrl"] + "api/status", {**auth, "Origin": asking})[0] == 403
        status, headers, _ = _request(config["baseUrl"] + "api/kernels/" + NO_KERNEL, {
            "Origin": asking, "Access-Control-Request-Method": "DELETE",
            "Access-Control-Request-Headers": "authorization"}, method="OPTIONS")
        assert status == 403 and "Access-Control-Allow-Origin" not in headers
    assert _kernels(config) == before
    status, headers, _ = _request(config["baseUrl"] + "api/kernels/" + NO_KERNEL, {
        "Origin": live.origin, "Access-Control-Request-Method": "DELETE",
        "Access-Control-Request-Headers": "authorization"}, method="OPTIONS")
    assert status in (200, 204) and headers["Access-Control-Allow-Origin"] == live.origin
    assert "DELETE" in headers["Access-Control-Allow-Methods"]
    status, headers, body = _start_kernel(config, {"Origin": live.origin})
    assert status == 201 and headers["Access-Control-Allow-Origin"] == live.origin
    kernel = json.loads(body)["id"]
    assert _request(f"{config['baseUrl']}api/kernels/{kernel}", {**auth, "Origin": live.origin},
                    method="DELETE")[0] == 204
    assert _kernels(config) == before


def test_kernel_websocket_needs_the_token_and_the_book_origin(small_site):
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    live, _ = small_site
    config, auth = live.config, {"Authorization": f"token {live.config['token']}"}
    status, _, body = _start_kernel(config)
    assert status == 201
    url = f"{config['wsUrl']}api/kernels/{json.loads(body)['id']}/channels"

    async def connect(headers):
        ws = await websocket_connect(HTTPRequest(url, headers=headers))
        ws.close()

    try:
        IOLoop.current().run_sync(lambda: connect({**auth, "Origin": live.origin}), timeout=60)
        for headers in ({**auth, "Origin": EVIL}, {"Origin": live.origin}, {"Origin": EVIL}):
            with pytest.raises(HTTPClientError, match="403"):
                IOLoop.current().run_sync(lambda: connect(headers), timeout=60)
    finally:
        _request(url.replace("ws://", "http://").rsplit("/", 1)[0], auth, method="DELETE")


@pytest.mark.slow
def test_idle_kernels_are_culled(tmp_path):
    (tmp_path / "index.html").write_text("book")
    with live_book(tmp_path, log=open(tmp_path / "server.log", "w"), allow_root=True,
                   cull_idle_timeout=1, cull_interval=1) as live:
        assert _start_kernel(live.config)[0] == 201
        deadline = time.time() + 60
        while _kernels(live.config) and time.time() < deadline:
            time.sleep(0.5)
        assert _kernels(live.config) == [], (tmp_path / "server.log").read_text()[-2000:]


def test_refuses_root_without_allow_root(tmp_path, monkeypatch, capsys):
    (tmp_path / "index.html").write_text("book")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(live_server.signal, "signal", lambda *args: None)   # main's SIGTERM handler
    with pytest.raises(PermissionError, match="refuses to run as root.*--allow-root"):
        with live_book(tmp_path):
            pass
    with pytest.raises(SystemExit, match=r"^live_server: .*--allow-root"):
        live_server.main(["--html", str(tmp_path), "--port", "0", "--kernel-port", "0"])
    command = live_server._kernel_server_command(1, "http://127.0.0.1:2", True, 600, 60)
    assert "--ServerApp.allow_root=True" in command
    assert not any("allow_root" in a for a in live_server._kernel_server_command(1, "o", False, 600, 60))


def test_missing_build_is_a_readable_error(tmp_path):
    with pytest.raises(ValueError, match="html: no built book"):
        with live_book(tmp_path / "missing"):
            pass


@pytest.mark.parametrize("ports, name", [((-1, 0), "port"), ((0, 70000), "kernel_port")])
def test_bad_port_is_a_readable_error(tmp_path, ports, name):
    (tmp_path / "index.html").write_text("book")
    with pytest.raises(ValueError, match=rf"^{name}: a TCP port in \[0, 65535\]"):
        with live_book(tmp_path, *ports):
            pass


# --------------------------------------------------------------------------- another user's port

#: another local user's server: answers 200 to everything and logs each request's path and headers
IMPOSTOR = """
import http.server, json, sys
log = open(sys.argv[1], "a")
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write(json.dumps({"path": self.path, "headers": dict(self.headers)}) + "\\n")
        log.flush()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def impostor(shared):
    """A server of the user nobody on a port of 127.0.0.1; yields its port and the log of what it was sent."""
    script, log = shared / "impostor.py", shared / "requests.log"
    script.write_text(IMPOSTOR)
    script.chmod(0o644)
    proc = subprocess.Popen(**nobody(sys.executable, str(script), str(log), cwd=shared, stdout=subprocess.PIPE,
                                     text=True))
    try:
        yield int(proc.stdout.readline()), log
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _sent(log) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_kernel_port_held_by_another_user_is_refused_before_anything_is_sent(impostor, tmp_path, monkeypatch):
    port, log = impostor
    (tmp_path / "index.html").write_text("book")
    with pytest.raises(ValueError, match=rf"^kernel_port: 127\.0\.0\.1:{port} is in use .*--kernel-port"):
        with live_book(tmp_path, kernel_port=port, allow_root=True):
            pass
    monkeypatch.setattr(live_server.signal, "signal", lambda *args: None)
    with pytest.raises(SystemExit, match=rf"^live_server: kernel_port: 127\.0\.0\.1:{port} is in use"):
        live_server.main(["--html", str(tmp_path), "--port", "0", "--kernel-port", str(port), "--allow-root"])
    assert _sent(log) == []


def test_a_server_that_cannot_prove_it_is_ours_is_sent_no_token(impostor):
    """The race: the port was free when checked and another user took it before jupyter_server did."""
    port, log = impostor
    key = "k" * 64
    waiting = subprocess.Popen(["sleep", "60"])          # stands for a jupyter_server still starting
    try:
        with pytest.raises(RuntimeError, match="another process answers .* cannot prove .* nothing was sent"):
            live_server._wait_for_kernel_server(waiting, f"http://127.0.0.1:{port}/", key, timeout=20)
    finally:
        waiting.kill()
        waiting.wait()
    (request,) = _sent(log)
    assert request["path"].startswith(PROOF_PATH + "?nonce=")
    assert not {"Authorization", "Cookie"} & set(request["headers"]), request
    assert key not in json.dumps(request)


def test_the_kernel_server_needs_the_key_of_the_live_server():
    env = {k: v for k, v in os.environ.items() if k != PROOF_KEY_ENV}
    run = subprocess.run([sys.executable, str(ROOT / "book" / "_ext" / "live_origin.py")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stderr.strip().startswith(f"live_origin: {PROOF_KEY_ENV} is unset"), run.stderr


def test_a_book_port_in_use_bad_ports_and_a_missing_build_are_one_line_errors(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("book")
    monkeypatch.setattr(live_server.signal, "signal", lambda *args: None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=rf"^live_server: port: 127\.0\.0\.1:{port} is in use .*--port"):
            live_server.main(["--html", str(tmp_path), "--port", str(port), "--kernel-port", "0", "--allow-root"])
    with pytest.raises(SystemExit, match=r"^live_server: port: a TCP port in \[0, 65535\]"):
        live_server.main(["--html", str(tmp_path), "--port", "99999", "--allow-root"])
    with pytest.raises(SystemExit, match=r"^live_server: html: no built book"):
        live_server.main(["--html", str(tmp_path / "missing"), "--allow-root"])


# --------------------------------------------------------------------------- in the browser


@pytest.fixture(scope="module")
def html(built_book):
    require()
    proc, html = built_book
    assert proc.returncode == 0, "the book build failed; see test_book.py"
    return html


@pytest.fixture(scope="module")
def chromium():
    require()
    with launch() as browser:
        yield browser


@pytest.mark.book
def test_live_script_is_on_pages_with_code_cells_only(built_book):
    _, html = built_book
    has = {p.relative_to(html).as_posix(): "_static/aim-live.js" in p.read_text()
           for p in [*html.glob("*.html"), *(html / "book").glob("*.html")]}
    assert has["book/random_matrices.html"] and has["book/playground.html"] and has["book/intro.html"]
    assert not has["book/references.html"] and not has["search.html"]


def _panel_img(page) -> str:
    return page.evaluate("() => document.querySelector('.aim-panel img')?.src ?? ''")


@pytest.mark.book
@pytest.mark.browser
def test_panel_goes_live_and_redraws(html, chromium, tmp_path):
    """At ``make live``'s address: Live, then a slider moved by keyboard redraws the figure.

    The page takes the secret out of the address bar; on the next page the session
    holds and the kernel of the page left is shut down; a browser without the
    secret is told how to go live.
    """
    log = open(tmp_path / "server.log", "w")
    with live_book(html, log=log, allow_root=True) as live:
        assert live.start == "book/intro.html"
        ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        seen = watch(page, live.origin, (live.config["baseUrl"],))
        try:
            page.goto(f"{live.origin}/{CHAPTER}#live={live.secret}", wait_until="load")
            page.wait_for_load_state("networkidle")
            assert page.url == f"{live.origin}/{CHAPTER}"
            static = _panel_img(page)
            assert static.startswith("data:image/png")
            t0 = time.time()
            page.locator(".aim-live-bar .aim-live-button").click()
            page.wait_for_function("() => document.documentElement.dataset.aimLive", timeout=TIMEOUT_MS)
            assert page.evaluate("() => document.documentElement.dataset.aimLive") == "ready", \
                page.locator(".aim-live-bar").inner_text()
            t_live = time.time() - t0
            assert page.locator(".aim-panel").count() == 1
            assert not page.locator(".aim-live-notice").first.is_visible()
            before = _panel_img(page)
            delta = page.locator(".aim-panel .widget-slider").first
            assert "Δ" in delta.inner_text()
            delta.locator(".noUi-handle").focus()
            page.keyboard.press("ArrowRight")
            _wait_new_image(page, 0, before)
            assert "0.112" in delta.locator(".widget-readout").inner_text()
            print(f"\n[live] ready {t_live:.1f} s after Live, redrawn {time.time() - t0 - t_live:.1f} s later")
            assert len(_kernels(live.config)) == 1
            assert ctx.cookies() == []   # no cookie: 127.0.0.1's cookies would reach every port
            key = page.evaluate("() => localStorage.getItem('aim-live-session')")
            assert _get(live.origin + CONFIG_PATH, _session(key))[0] == 200
            page.unroute("**/*")   # Playwright's interception drops the keepalive requests of a page left
            page.goto(f"{live.origin}/{live.start}", wait_until="load")
            assert page.evaluate("""() => fetch('/_live/config.json', {headers: {'X-AIM-Live-Session':
                localStorage.getItem('aim-live-session')}}).then(r => r.status)""") == 200
            deadline = time.time() + 30
            while _kernels(live.config) and time.time() < deadline:
                time.sleep(0.3)
            assert _kernels(live.config) == []
        finally:
            page.screenshot(path=str(tmp_path / "live.png"))
            ctx.close()
        _refused_without_the_secret(chromium, live)
    problems = recorded_problems(seen)
    assert not problems, f"{problems} (log: {tmp_path / 'server.log'}, screenshot: {tmp_path / 'live.png'})"


def _refused_without_the_secret(chromium, live) -> None:
    """A browser that did not open the live address (the secret is used) is refused, and told why."""
    ctx = chromium.new_context()
    try:
        page = ctx.new_page()
        page.goto(f"{live.origin}/{CHAPTER}#live={live.secret}", wait_until="load")
        page.locator(".aim-live-bar .aim-live-button").click()
        page.wait_for_function(
            "() => document.querySelector('.aim-live-bar').dataset.state === 'error'", timeout=30_000)
        assert "answers only the browser that opened" in page.locator(".aim-live-bar").inner_text()
    finally:
        ctx.close()


@pytest.mark.book
@pytest.mark.browser
def test_without_server_panels_say_they_are_snapshots(html, chromium):
    """A plain static server: each panel has a visible notice; page load logs no error."""
    with serve(html) as base:
        ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        seen = watch(page, base)
        try:
            page.goto(f"{base}/{CHAPTER}", wait_until="load")
            page.wait_for_load_state("networkidle")
            notices = page.locator(".aim-live-notice")
            assert notices.count() == page.locator(".cell_output .aim-panel").count() == 1
            notice = notices.first
            notice.scroll_into_view_if_needed()
            assert notice.is_visible()
            text = notice.inner_text()
            assert "Snapshot" in text and all(c in text for c in ("make live", "make lab", "make app"))
            assert page.locator(".aim-live-bar .aim-live-button").is_visible()
            problems = recorded_problems(seen)
            assert not problems, problems

            # pressed without a server: a plain message, the page stays as it was
            page.locator(".aim-live-bar .aim-live-button").click()
            page.wait_for_function(
                "() => document.querySelector('.aim-live-bar').dataset.state === 'error'", timeout=30_000)
            assert "No live server answered" in page.locator(".aim-live-bar").inner_text()
            assert page.locator(".aim-live-bar .aim-live-button").is_enabled()
            assert not seen["offsite"] and not seen["page"]
        finally:
            ctx.close()
