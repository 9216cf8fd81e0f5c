"""Live mode (``make live``): the live server's security and, in headless Chromium, a panel made live.

The server tests need no build: they serve a one-page folder.  The browser tests
use the built book (``built_book``) and the policy of ``browser_support``.
"""
from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

import pytest

from browser_support import launch, recorded_problems, require, serve, watch
from conftest import ROOT
from test_app import _wait_new_image

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from live_server import CONFIG_PATH, live_book  # noqa: E402

CHAPTER = "book/random_matrices.html"   # its opening cell and its panel run in a few seconds
TIMEOUT_MS = 120_000


def _get(url: str, headers: dict | None = None):
    """``(status, headers, body)`` of a GET, HTTP errors included."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    html = tmp_path_factory.mktemp("site")
    (html / "index.html").write_text("<!doctype html><title>book</title>")
    with live_book(html, log=open(html.parent / "server.log", "w")) as (origin, config):
        yield origin, config


def test_config_names_a_local_kernel_server_with_a_token(small_site):
    origin, config = small_site
    status, headers, body = _get(origin + CONFIG_PATH)
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert json.loads(body) == config
    assert origin.startswith("http://127.0.0.1:") and config["baseUrl"].startswith("http://127.0.0.1:")
    assert len(config["token"]) >= 32 and config["kernelName"] == "python3"


def test_config_is_refused_to_another_host_name(small_site):
    """A page of another site whose name points at 127.0.0.1 cannot read the token."""
    origin, _ = small_site
    port = origin.rsplit(":", 1)[1]
    status, _, body = _get(origin + CONFIG_PATH, {"Host": f"evil.example:{port}"})
    assert status == 403 and b"token" not in body


def test_kernel_server_needs_the_token(small_site):
    _, config = small_site
    api = config["baseUrl"] + "api/kernels"
    assert _get(api)[0] == 403
    assert _get(api, {"Authorization": "token wrong"})[0] == 403
    assert _get(api, {"Authorization": f"token {config['token']}"})[0] == 200


def test_kernel_server_allows_the_book_origin_only(small_site):
    """CORS names the book's origin alone; a kernel's websocket needs the token.

    (jupyter_server skips its websocket origin check for token-authenticated
    requests: the token, which only the book's address is given, is the guard.)
    """
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    origin, config = small_site
    auth = {"Authorization": f"token {config['token']}"}
    for asking in (origin, "http://example.org"):
        _, headers, _ = _get(config["baseUrl"] + "api/status", {**auth, "Origin": asking})
        assert headers["Access-Control-Allow-Origin"] == origin
    start = urllib.request.Request(config["baseUrl"] + "api/kernels", data=b'{"name": "python3"}',
                                   headers={**auth, "Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(start, timeout=60) as r:
        kernel = json.loads(r.read())["id"]
    url = f"{config['wsUrl']}api/kernels/{kernel}/channels"

    async def connect(headers):
        ws = await websocket_connect(HTTPRequest(url, headers=headers))
        ws.close()

    IOLoop.current().run_sync(lambda: connect({**auth, "Origin": origin}), timeout=60)
    for asking in (origin, "http://example.org"):
        with pytest.raises(HTTPClientError, match="403"):
            IOLoop.current().run_sync(lambda: connect({"Origin": asking}), timeout=60)


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
    """With ``make live``'s servers: Live, then a slider moved by keyboard redraws the figure."""
    log = open(tmp_path / "server.log", "w")
    with live_book(html, log=log) as (origin, config):
        ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        seen = watch(page, origin, (config["baseUrl"],))
        try:
            page.goto(f"{origin}/{CHAPTER}", wait_until="load")
            page.wait_for_load_state("networkidle")
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
        finally:
            page.screenshot(path=str(tmp_path / "live.png"))
            ctx.close()
    problems = recorded_problems(seen)
    assert not problems, f"{problems} (log: {tmp_path / 'server.log'}, screenshot: {tmp_path / 'live.png'})"


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
