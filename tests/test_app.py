"""The playground as a live Voila app, driven in headless Chromium with the network cut.

The test converts ``book/playground.md`` to a notebook (jupytext), serves it
with Voila on a free port of 127.0.0.1 (as ``make app`` does: template
``aim`` from ``book/_ext`` without the CDN links, jupytext's JupyterLab
extension denied), then moves a slider with the keyboard, changes a
dropdown and types into a text field, and checks that the plot image is
redrawn by the kernel, that a bad input shows a message, and that there are
no console errors, page errors, HTTP errors or off-site requests.

Needs Debian's ``chromium``, the Python packages ``playwright`` and
``voila``.  In CI (``CI=true``) a missing piece is a failure; elsewhere the
test skips and says what is missing.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_support import launch, recorded_problems, require, serve, watch

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
VOILA = Path(sys.executable).with_name("voila")
TIMEOUT_MS = 90_000


def _require():
    voila_missing = not VOILA.exists() or importlib.util.find_spec("voila") is None
    require("Voila is missing (`pip install -r requirements.txt`)" if voila_missing else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """Start Voila on the playground; yield its URL; stop it (and its kernels) at the end."""
    _require()
    import jupytext

    work = tmp_path_factory.mktemp("app")
    nb = work / "playground.ipynb"
    jupytext.write(jupytext.read(ROOT / "book" / "playground.md"), nb)
    port = _free_port()
    env = dict(os.environ, JUPYTER_PATH=str(ROOT / "book" / "_ext"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    log = open(work / "voila.log", "w")
    proc = subprocess.Popen(
        [str(VOILA), str(nb), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
         "--template=aim", "--VoilaConfiguration.extension_denylist=jupyterlab-jupytext"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:  # wait for the port only: a GET / would start a kernel
            if proc.poll() is not None:
                pytest.fail(f"Voila exited with {proc.returncode}:\n{(work / 'voila.log').read_text()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.time() > deadline:
                pytest.fail(f"Voila did not listen within 60 s:\n{(work / 'voila.log').read_text()}")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/", work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # Voila's own process group: it and its kernels
            proc.wait(timeout=5)
        log.close()


@pytest.fixture(scope="module")
def chromium_app():
    _require()
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


def test_playground_app_is_live_and_offline(app, chromium_app):
    base, work = app
    ctx = chromium_app.new_context(viewport={"width": 1280, "height": 1000})
    page = ctx.new_page()
    seen = watch(page, base)
    try:
        t0 = time.time()
        page.goto(base, wait_until="load", timeout=TIMEOUT_MS)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.aim-panel img')].filter(i => i.naturalWidth > 0).length >= 4",
            timeout=TIMEOUT_MS)
        print(f"\n[app] all four panels drawn {time.time() - t0:.1f} s after the request")
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

        # 3. T = 4 by keyboard: refused with a readable message, the last good plot stays
        old = _img_src(se)
        t_slider.locator(".noUi-handle").focus()
        page.keyboard.press("ArrowRight")
        _wait_message(page, 0, True)
        text = se.locator(".aim-panel-error").inner_text()
        assert "T <= 3" in text and "Traceback" not in text
        assert _img_src(se) == old

        # 4. back to T = 2 by keyboard: the hardmax curve is drawn, the message goes away
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        _wait_message(page, 0, False)
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
