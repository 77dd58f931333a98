"""A run as a person looks at it: index.html and the executed notebooks as HTML (opened in a real browser), relative
--out paths, Ctrl-C on the command line, and `make lab` serving both the notebooks and the runs."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from kdtree_lab.core.paths import ROOT
from kdtree_lab.lab import runner
from kdtree_lab.lab.profiles import Profile
from test_runner import SAVE, _notebook

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROFILE = Profile("test", "", False)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """Three notebooks run through the runner: one passes with a figure, one skips a part, one fails."""
    tmp = tmp_path_factory.mktemp("report")
    ok = _notebook(tmp, "91_ok", "print('hello from 91')\n" + SAVE.format(name="91_ok", payload="{'figures': {'x': 12345}}"))
    skips = _notebook(tmp, "92_skip", "from kdtree_lab.lab.record import skip\n"
                      "s = [skip('gpu part', 'no CUDA GPU here')]\n"
                      + SAVE.format(name="92_skip", payload="{'skipped': s}"))
    fails = _notebook(tmp, "93_fail", "raise ValueError('planted failure')")
    later = _notebook(tmp, "94_later", "pass")
    run_dir, outcomes = runner.execute([ok, skips, fails, later], PROFILE, {}, tmp / "run", progress=False)
    return run_dir, outcomes


@pytest.mark.slow
def test_index_lists_every_notebook_with_status_skips_and_pages(small_run):
    run_dir, outcomes = small_run
    assert [o.status for o in outcomes] == ["passed", "passed-with-skips", "failed", "not-run"]
    index = (run_dir / "index.html").read_text()
    for o in outcomes:
        assert f'data-notebook="{o.notebook}" data-status="{o.status}"' in index
    assert 'href="91_ok.html"' in index and 'href="93_fail.html"' in index and 'href="94_later.html"' not in index
    assert "no CUDA GPU here" in index and "12,345" in index
    assert "hello from 91" in (run_dir / "91_ok.html").read_text()
    page = (run_dir / "92_skip.html").read_text()
    assert "Skipped on this machine: gpu part." in page  # the sentence skip() displays where the part was skipped
    assert "PosixPath" not in page and "Results written to" in page


@pytest.mark.slow
@pytest.mark.browser
def test_index_in_a_real_browser(small_run):
    playwright_sync = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    run_dir, _ = small_run
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        page = browser.new_page()
        page.goto((run_dir / "index.html").as_uri())
        rows = page.locator("#summary tbody tr")
        assert rows.count() == 4
        shown = {rows.nth(i).get_attribute("data-notebook"): rows.nth(i).locator(".status").inner_text()
                 for i in range(4)}
        assert shown == {"91_ok": "passed", "92_skip": "passed-with-skips", "93_fail": "failed",
                         "94_later": "not-run"}
        assert "gpu part: no CUDA GPU here" in rows.nth(1).locator(".skip").inner_text()
        assert "ValueError: planted failure" in rows.nth(2).inner_text()
        page.locator('a.notebook[href="91_ok.html"]').click()
        page.wait_for_load_state()
        assert page.url.endswith("/91_ok.html")
        assert "hello from 91" in page.locator("body").inner_text()
        page.go_back()
        page.locator('a.notebook[href="93_fail.html"]').click()
        page.wait_for_load_state()
        assert "planted failure" in page.locator("body").inner_text()
        browser.close()


@pytest.mark.slow
def test_relative_out_resolves_against_the_callers_directory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kdtree_lab", "run", "--profile", "cpu", "--only", "00", "--out",
                           "rel/run", "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "rel" / "run"
    assert json.loads((out / "summary.json").read_text())["notebooks"][0]["status"] == "passed"
    assert (out / "00_environment.json").exists() and (out / "index.html").exists()
    assert f"the run as HTML: {out / 'index.html'}" in proc.stdout


@pytest.mark.slow
def test_ctrl_c_on_the_command_line_is_quiet(tmp_path):
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) during a notebook: exit 130, the
    summary printed, one line on stderr saying it was interrupted, and no traceback from the notebook kernel."""
    proc = subprocess.Popen([sys.executable, "-m", "kdtree_lab", "run", "--profile", "cpu", "--only", "03", "--out",
                             str(tmp_path / "run"), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp(),
                                                          signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})))
    deadline = time.time() + 240
    while not list((tmp_path / "run").glob("03_eager_parity.ipynb")) and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(8)  # the kernel is up and running the parity grid
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out[-2000:], err[-3000:])
    assert "Traceback" not in err and "ZMQError" not in err, err
    said = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert len(said) == 1 and said[0].startswith("kdtree-lab run: notebook 03_eager_parity interrupted by Ctrl-C"), err
    assert "This run was interrupted" in out
    assert any(ln.split()[:2] == ["03_eager_parity", "interrupted"] for ln in out.splitlines()), out  # a table row


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_the_notebooks_and_the_runs():
    """The command `make lab` runs, on a free port: JupyterLab's contents API lists notebooks/ and runs/."""
    port = _free_port()
    cmd = subprocess.run(["make", "-s", "-n", "lab", f"LAB_ARGS=--port={port} --no-browser --ServerApp.token=x "
                          "--ServerApp.ip=127.0.0.1"], cwd=ROOT, capture_output=True, text=True, check=True)
    line = [ln for ln in cmd.stdout.splitlines() if "jupyter lab" in ln][-1]
    (ROOT / "runs").mkdir(exist_ok=True)
    server = subprocess.Popen(line, shell=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        listing = {}
        deadline = time.time() + 120
        while time.time() < deadline and len(listing) < 2:
            for folder in ("notebooks", "runs"):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/{folder}?token=x",
                                                timeout=5) as r:
                        listing[folder] = json.load(r)
                except OSError:
                    time.sleep(1)
        assert set(listing) == {"notebooks", "runs"}, listing
        assert {"06_benchmark.ipynb"} <= {c["name"] for c in listing["notebooks"]["content"]}
        assert listing["runs"]["type"] == "directory"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_an_executed_notebook_as_html_loads_nothing_from_the_network(tmp_path):
    """nbconvert's lab template pulls require.js, MathJax, Mermaid and (with widget state) the widget manager from a
    CDN; the run's pages must open offline, so none of them is referenced."""
    import re

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from kdtree_lab.lab.report import notebook_html

    nb = new_notebook(cells=[new_markdown_cell("# a title\nsome text"),
                             new_code_cell("print(1)", outputs=[new_output("stream", name="stdout", text="one\n")])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                            "version_minor": 0}}
    nbformat.write(nb, tmp_path / "90_x.ipynb")
    page = notebook_html(tmp_path / "90_x.ipynb").read_text()
    assert "one" in page and "a title" in page
    assert not re.findall(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', page), "an external script or stylesheet"
    assert not re.findall(r'import\(\s*["\'](?:https?:)?//', page)
    for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net", "require.min.js", "MathJax.js", "latest.js"):
        assert cdn not in page, cdn
