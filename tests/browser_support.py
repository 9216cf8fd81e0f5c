"""Shared pieces of the browser tests: headless Chromium, a local server, request watching.

Chromium is Debian's (``apt-get install chromium``), driven by the Python
package ``playwright`` (no browser download).  In CI (``CI=true``) a missing
piece is a failure; elsewhere the tests skip and say how to enable them.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def require(extra_problem: str | None = None) -> None:
    """Skip (or, in CI, fail) unless Chromium and playwright are there and ``extra_problem`` is None."""
    problem = None
    if not os.path.exists(CHROMIUM):
        problem = "Chromium not found (install it with `apt-get install chromium`)"
    elif importlib.util.find_spec("playwright") is None:
        problem = "the Python package playwright is missing (`pip install -r requirements.txt`)"
    else:
        problem = extra_problem
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests are required in CI: {problem}")
        pytest.skip(f"browser test skipped: {problem}")


@contextlib.contextmanager
def launch():
    """A headless Chromium for the duration of the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory):
    """Serve ``directory`` on a free port of 127.0.0.1; yield the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def recorded_problems(seen: dict) -> dict:
    """The kinds of problem that :func:`watch` recorded (its non-empty lists)."""
    return {k: v for k, v in seen.items() if v}


def watch(page, base: str, also: tuple[str, ...] = ()) -> dict:
    """Abort every off-site request of ``page`` and record problems as they happen.

    Requests to ``base``'s host and to the hosts of the URLs in ``also`` (a local
    kernel server) go through.
    Returns a dict of lists, filled while the page lives: console errors, page
    errors, HTTP responses >= 400 and off-site URLs.
    """
    seen = {"console": [], "page": [], "http": [], "offsite": []}
    hosts = {urlparse(u).netloc for u in (base, *also)} | {""}

    def route(r):
        if urlparse(r.request.url).netloc in hosts:
            r.continue_()
        else:
            seen["offsite"].append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and seen["console"].append(m.text))
    page.on("pageerror", lambda e: seen["page"].append(str(e)))
    page.on("response", lambda r: r.status >= 400 and seen["http"].append(f"{r.status} {r.url}"))
    return seen
