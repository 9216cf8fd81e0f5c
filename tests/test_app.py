"""The playground as a live Voila app (``make app``): its token, and the app driven in headless Chromium.

The app is started through the launcher of ``make app``
(``book/_ext/app_server.py``): ``book/playground.md`` converted to a notebook
(jupytext), served by Voila on a free port of 127.0.0.1 with a fresh token
(template ``aim`` from ``book/_ext`` without the CDN links, jupytext's
JupyterLab extension denied).  The security tests check that a request
without the token, ours or another local user's (``nobody``, as root only),
is sent to the login page or refused and starts no kernel, that the token is
on no command line, and the launcher's refusals (root, a bad or taken port).
The browser test opens the address with the token, moves a slider with the
keyboard, changes a dropdown and types into a text field, and checks that the
plot image is redrawn by the kernel, that a bad input shows a message, and
that there are no console errors, page errors, HTTP errors or off-site
requests.

Needs Debian's ``chromium``, the Python packages ``playwright`` and
``voila``.  In CI (``CI=true``) a missing piece is a failure; elsewhere the
test skips and says what is missing.  The tests run as root in CI, so the app
is started with ``allow_root=True``.
"""
from __future__ import annotations

import http.client
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from browser_support import launch, recorded_problems, require, serve, watch
from conftest import nobody

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import app_server  # noqa: E402
from app_server import NO_KERNEL, voila_app  # noqa: E402

TIMEOUT_MS = 90_000
#: paths that would serve the app (any path renders the notebook) or reach the kernel API
GUARDED = ("/", "/voila/render/playground.ipynb", "/api/kernels", "/playground.ipynb")


def _require_voila():
    """Skip (or, in CI, fail) without Voila."""
    if importlib.util.find_spec("voila") is None:
        problem = "Voila is missing (`pip install -r requirements.txt`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the app tests are required in CI: {problem}")
        pytest.skip(problem)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """Start the app as ``make app`` does; yield the :class:`app_server.App` and its folder; stop it at the end."""
    _require_voila()
    work = tmp_path_factory.mktemp("app")
    log = open(work / "voila.log", "w")
    try:
        with voila_app(0, out_dir=work, log=log, allow_root=True) as served:
            yield served, work
    except RuntimeError as err:
        pytest.fail(f"{err}; Voila's log:\n{(work / 'voila.log').read_text()}")
    finally:
        log.close()


def _raw(origin: str, path: str, method: str = "GET", headers: dict | None = None):
    """``(status, Location, body)`` of one request, redirects not followed."""
    parts = urlparse(origin)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, path, body=b"{}" if method == "POST" else None, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Location") or "", r.read()
    finally:
        conn.close()


def _kernels(served) -> set[int]:
    """The processes Voila started (its kernels)."""
    return set(app_server._children(served.process.pid))


def _assert_to_login(status: int, location: str, body: bytes, path: str) -> None:
    assert status == 302 and urlparse(location).path == "/login", (path, status, location)
    assert b"aim-panel" not in body and b"widgets.se_panel" not in body, path


# --------------------------------------------------------------------------- the token
def test_requests_without_the_token_are_refused_and_start_no_kernel(app):
    served, _ = app
    before = _kernels(served)
    for path in GUARDED:
        _assert_to_login(*_raw(served.origin, path), path)
        _assert_to_login(*_raw(served.origin, path + "?token=" + "x" * 43), path)   # a wrong token
        _assert_to_login(*_raw(served.origin, path, headers={"Authorization": "token wrong"}), path)
    for method, path in (("GET", f"/api/kernels/{NO_KERNEL}"), ("POST", "/api/kernels"),
                         ("DELETE", f"/api/kernels/{NO_KERNEL}"), ("POST", f"/voila/api/shutdown/{NO_KERNEL}")):
        status, _, _ = _raw(served.origin, path, method)
        assert status in (401, 403, 405), (method, path, status)
    # the token is what makes the difference: with it the kernel API answers (no such kernel)
    auth = {"Authorization": f"token {served.token}"}
    assert _raw(served.origin, f"/api/kernels/{NO_KERNEL}", headers=auth)[0] == 404
    time.sleep(1)
    assert _kernels(served) <= before


def test_the_token_is_on_no_command_line_nor_in_the_log(app):
    served, work = app
    assert served.url == f"{served.origin}/?token={served.token}" and len(served.token) >= 43
    for pid in (served.process.pid, *_kernels(served)):
        assert served.token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert served.token not in (work / "voila.log").read_text()
    assert not any(served.token in a for a in app_server.voila_command(work / "playground.ipynb", 1))
    assert app_server.voila_environment(served.token)["JUPYTER_TOKEN"] == served.token


def test_another_local_user_is_refused_and_cannot_read_the_token(app):
    if os.geteuid() != 0:
        pytest.skip("acting as another local user (nobody) needs root")
    if shutil.which("curl") is None:
        pytest.skip("acting as another local user needs curl")
    served, _ = app
    before = _kernels(served)
    for path in ("/", "/api/kernels"):
        run = subprocess.run(**nobody("curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                                      served.origin + path, capture_output=True, text=True, timeout=60))
        status, location = run.stdout.split(" ", 1)
        assert status == "302" and urlparse(location).path == "/login", (path, run.stdout, run.stderr)
    pid = served.process.pid
    cmdline = subprocess.run(**nobody("cat", f"/proc/{pid}/cmdline", capture_output=True, timeout=30))
    assert cmdline.returncode == 0 and b"voila" in cmdline.stdout and served.token.encode() not in cmdline.stdout
    environ = subprocess.run(**nobody("cat", f"/proc/{pid}/environ", capture_output=True, timeout=30))
    assert environ.returncode != 0 and served.token.encode() not in environ.stdout
    time.sleep(1)
    assert _kernels(served) <= before


# --------------------------------------------------------------------------- the launcher's refusals
@pytest.fixture
def quiet_main(monkeypatch, tmp_path):
    """``app_server.main`` without its SIGTERM handler, the notebook written to ``tmp_path``."""
    monkeypatch.setattr(app_server.signal, "signal", lambda *args: None)
    monkeypatch.setattr(app_server, "ROOT", tmp_path)
    return app_server.main


def _one_line_refusal(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("app_server: ") and err.count("\n") == 1, err
    return err


def test_refuses_root_without_allow_root(quiet_main, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(PermissionError, match="refuses to run as root.*--allow-root"):
        with voila_app(0, out_dir=tmp_path):
            pass
    assert "--allow-root" in _one_line_refusal(quiet_main, ["--port", "0"], capsys)
    assert not any(tmp_path.iterdir())   # nothing written, nothing started


@pytest.mark.parametrize("port", ["70000", "-1", "eighty"])
def test_a_bad_port_is_one_line_naming_port(quiet_main, tmp_path, capsys, port):
    err = _one_line_refusal(quiet_main, ["--port", port, "--allow-root"], capsys)
    assert "--port" in err and "[0, 65535]" in err
    assert not any(tmp_path.iterdir())


def test_a_taken_port_is_one_line_naming_port(quiet_main, tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _one_line_refusal(quiet_main, ["--port", str(port), "--allow-root"], capsys)
    assert "--port" in err and f"127.0.0.1:{port}" in err
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def chromium_app():
    require()
    with launch() as browser:
        yield browser


def _img_src(panel) -> str:
    return panel.locator("img").first.get_attribute("src") or ""


def _wait_new_image(page, panel_index: int, old: str):
    page.wait_for_function(
        """([i, old]) => { const p = document.querySelectorAll('.aim-panel')[i];
                           const img = p && p.querySelector('img');
                           return img && img.src && img.src !== old && img.naturalWidth > 0; }""",
        arg=[panel_index, old], timeout=TIMEOUT_MS)


def _wait_message(page, panel_index: int, present: bool):
    page.wait_for_function(
        """([i, present]) => { const p = document.querySelectorAll('.aim-panel')[i];
                               return !!(p && p.querySelector('.aim-panel-error')) === present; }""",
        arg=[panel_index, present], timeout=TIMEOUT_MS)


# --------------------------------------------------------------------------- the app in a browser
@pytest.mark.browser
def test_playground_app_is_live_and_offline(app, chromium_app):
    served, work = app
    ctx = chromium_app.new_context(viewport={"width": 1280, "height": 1000})
    page = ctx.new_page()
    seen = watch(page, served.origin)
    try:
        t0 = time.time()
        page.goto(served.url, wait_until="load", timeout=TIMEOUT_MS)
        drawn = "() => [...document.querySelectorAll('.aim-panel img')].filter(i => i.naturalWidth > 0).length"
        page.wait_for_function(f"{drawn} >= 1", timeout=TIMEOUT_MS)   # cells arrive one by one
        print(f"\n[app] the first panel drawn {time.time() - t0:.1f} s after the request")
        page.wait_for_function(f"{drawn} >= 4", timeout=TIMEOUT_MS)
        print(f"[app] four panels drawn {time.time() - t0:.1f} s after the request")
        # Voila shows outputs only: no code cell source on the page
        assert "widgets.se_panel()" not in page.inner_text("body")
        se = page.locator(".aim-panel").nth(0)
        assert se.locator(".aim-panel-error").count() == 0

        # 1. the T slider, moved by keyboard: the kernel redraws the plot
        old = _img_src(se)
        t_slider = se.locator(".widget-slider").nth(1)
        assert "T" in t_slider.inner_text()
        t_slider.locator(".noUi-handle").focus()
        page.keyboard.press("ArrowRight")
        _wait_new_image(page, 0, old)
        assert "3" in t_slider.locator(".widget-readout").inner_text()

        # 2. the channel dropdown: the hardmax at T = 3 is drawn (its Bayes side is tabulated to T = 3)
        old = _img_src(se)
        se.locator("select").first.select_option("hardmax")
        _wait_new_image(page, 0, old)
        assert se.locator(".aim-panel-error").count() == 0

        # 3. past T = 3 by keyboard: the slider stops at the channel's limit (no T = 4 to refuse)
        old = _img_src(se)
        t_slider.locator(".noUi-handle").focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)
        assert "3" in t_slider.locator(".widget-readout").inner_text()
        assert se.locator(".aim-panel-error").count() == 0 and _img_src(se) == old

        # 4. back to T = 2 by keyboard: the hardmax curve at two tokens is drawn
        page.keyboard.press("ArrowLeft")
        _wait_new_image(page, 0, old)
        assert "2" in t_slider.locator(".widget-readout").inner_text()

        # 5. a non-numeric alpha range typed into the text field
        old = _img_src(se)
        field = se.locator("input[type=text]").first
        field.fill("0.01, lots")
        field.press("Enter")
        _wait_message(page, 0, True)
        assert "not a number" in se.locator(".aim-panel-error").inner_text()
        field.fill("0.01, 10")
        field.press("Enter")
        _wait_message(page, 0, False)
        _wait_new_image(page, 0, old)
        print(f"[app] interactions done {time.time() - t0:.1f} s after the request")
    finally:
        page.screenshot(path=str(work / "app.png"))
        ctx.close()
    problems = recorded_problems(seen)
    assert not problems, f"{problems} (Voila log: {work / 'voila.log'}, screenshot: {work / 'app.png'})"


# --------------------------------------------------------------------------- the static book
@pytest.mark.book
@pytest.mark.browser
def test_static_playground_renders_saved_widgets(built_book, chromium_app):
    """In the built book the panels render offline from the saved widget state."""
    proc, html = built_book
    assert proc.returncode == 0, "the book build failed; see test_book.py"
    with serve(html) as base:
        ctx = chromium_app.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        seen = watch(page, base)
        try:
            page.goto(f"{base}/book/playground.html", wait_until="load")
            page.wait_for_function(
                "() => [...document.querySelectorAll('.widget-subarea .aim-panel img')]"
                ".filter(i => i.naturalWidth > 0).length >= 5", timeout=30_000)
            page.wait_for_load_state("networkidle")
            report = page.evaluate("""() => ({
                panels: document.querySelectorAll('.widget-subarea .aim-panel').length,
                sliders: document.querySelectorAll('.aim-panel .widget-slider').length,
                selects: document.querySelectorAll('.aim-panel select').length,
                hub: !!(window.MathJax && window.MathJax.Hub && window.MathJax.Hub.Queue),
                mathjax3: !!(window.MathJax && window.MathJax.typesetPromise)})""")
        finally:
            ctx.close()
    assert report["panels"] == 6 and report["sliders"] >= 10 and report["selects"] >= 3, report
    assert report["hub"] and report["mathjax3"], report
    problems = recorded_problems(seen)
    assert not problems, problems
