"""The budget widget in a real browser: Voila serves notebook 04 on loopback, Chromium (Debian's package, driven
by Playwright) moves the fraction slider, and the KV token count shown must equal the library's figure.

Needs voila, playwright and /usr/bin/chromium; `.ci/run` installs them. Without them the test is skipped (and a
skip is not a pass). Voila's page links stylesheets on public CDNs; the browser is kept on loopback (every other
request is aborted at once) so a sandbox whose DNS or TCP hangs cannot hold the page's load for minutes."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

import pytest

from kdtree_lab.budget.calculator import compute
from kdtree_lab.budget.inputs import BudgetInputs
from kdtree_lab.core.paths import NOTEBOOKS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser
playwright_sync = pytest.importorskip("playwright.sync_api")
pytest.importorskip("voila")
if not os.path.exists(CHROMIUM):
    pytest.skip("Debian's chromium is not installed (.ci/run installs it)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("voila") / "voila.log"
    log = open(log_path, "w")  # a file, not a pipe nobody reads: a full pipe would stall the server
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.Popen([sys.executable, "-m", "voila", str(NOTEBOOKS / "04_memory_budget.ipynb"),
                             "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
                             "--ServerApp.ip=127.0.0.1"], cwd=NOTEBOOKS, env=env,
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if proc.poll() is not None:
            pytest.fail(f"voila exited: {log_path.read_text()[-3000:]}")
        time.sleep(0.5)
    yield f"http://127.0.0.1:{port}/", log_path
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _loopback_only(route):
    if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
        route.continue_()
    else:
        route.abort()


def _shown(page):
    span = page.locator(".kd-kv-tokens")
    return float(span.get_attribute("data-fraction")), int(span.inner_text().replace(",", ""))  # thousands separators


def test_moving_the_fraction_slider_shows_the_library_kv_tokens(voila_url):
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page()
        page.route("**/*", _loopback_only)
        url, log_path = voila_url
        try:
            page.goto(url, wait_until="domcontentloaded", timeout=180_000)
            page.wait_for_selector(".kd-kv-tokens", timeout=180_000)
        except playwright_sync.Error as e:
            pytest.fail(f"the budget page did not show its KV tokens: {e}\nvoila's log (tail):\n"
                        f"{log_path.read_text()[-3000:]}")
        frac0, tokens0 = _shown(page)
        defaults = BudgetInputs()  # notebook 04's parameters are the calculator's defaults
        assert tokens0 == compute(BudgetInputs(**{**defaults.__dict__, "mem_fraction": frac0})).kv_tokens
        handle = page.locator(".kd-fraction .noUi-handle")
        handle.focus()
        for _ in range(6):
            handle.press("ArrowLeft")
        page.wait_for_function("f => document.querySelector('.kd-kv-tokens').dataset.fraction !== f",
                               arg=f"{frac0:.3f}", timeout=60_000)
        # each key press recomputes the budget in the kernel: wait until the last one's answer is the one shown
        page.wait_for_function(
            "() => { const r = document.querySelector('.kd-fraction .widget-readout').innerText.replace(/[^0-9.]/g, '');"
            " return Math.abs(parseFloat(r) - parseFloat(document.querySelector('.kd-kv-tokens').dataset.fraction))"
            " < 1e-9; }", timeout=60_000)
        frac1, tokens1 = _shown(page)
        readout = page.locator(".kd-fraction .widget-readout").inner_text()
        assert frac1 < frac0 and abs(float(re.sub(r"[^\d.]", "", readout)) - frac1) < 1e-9
        assert tokens1 == compute(BudgetInputs(**{**defaults.__dict__, "mem_fraction": frac1})).kv_tokens
        assert tokens1 < tokens0
        browser.close()
