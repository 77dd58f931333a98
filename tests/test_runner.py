"""The papermill runner: parameter checks, failure reports naming notebook and cell, dead kernels, summaries."""

import json
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from kdtree_lab.lab import report, runner
from kdtree_lab.lab.profiles import Profile, auto_name, load


def _notebook(tmp_path: Path, name: str, body: str) -> runner.NotebookEntry:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = new_code_cell('run_dir = "x"  # results\nsteps = 2  # how many')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, new_code_cell(body)]
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return runner.NotebookEntry(name[:2], name, name, "no", 0.1, 0.1, source=path)


PROFILE = Profile("test", "", False)
SAVE = "from kdtree_lab.lab.record import save_results\nsave_results(run_dir, '{name}', {payload})"


def test_profiles_load_and_auto_pick():
    assert {p: load(p).name for p in ("cpu", "h200", "sm120")} == {"cpu": "cpu", "h200": "h200", "sm120": "sm120"}
    assert auto_name(None, None) == "cpu"
    assert auto_name("NVIDIA H200", "9.0") == "h200"
    assert auto_name("NVIDIA RTX PRO 6000 Blackwell", "12.0") == "sm120"
    with pytest.raises(ValueError, match="no profile"):
        auto_name("Some GPU", "7.5")


def test_parameter_plan_checks_names_and_types(tmp_path):
    e = _notebook(tmp_path, "90_ok", "pass")
    plan = runner.plan_parameters([e], PROFILE, {"steps": 5}, tmp_path)
    assert plan["90_ok"] == {"steps": 5, "run_dir": str(tmp_path)}
    with pytest.raises(runner.ParameterError, match="unknown parameter 'nope'"):
        runner.plan_parameters([e], PROFILE, {"nope": 1}, tmp_path)
    with pytest.raises(runner.ParameterError, match="'steps' of 90_ok: expected int"):
        runner.plan_parameters([e], PROFILE, {"steps": "many"}, tmp_path)
    bad_profile = Profile("p", "", False, notebooks={"90": {"missing": 1}})
    with pytest.raises(runner.ParameterError, match="no parameter 'missing'"):
        runner.plan_parameters([e], bad_profile, {}, tmp_path)


def test_parse_overrides():
    assert runner.parse_overrides(["a=1", "b=[1, 2]", "c=hello", "d=True", "e=0.5"]) == \
        {"a": 1, "b": [1, 2], "c": "hello", "d": True, "e": 0.5}
    with pytest.raises(runner.ParameterError, match="key=value"):
        runner.parse_overrides(["novalue"])


@pytest.mark.slow
def test_pass_skip_failure_and_dead_kernel(tmp_path):
    ok = _notebook(tmp_path, "91_ok", SAVE.format(name="91_ok", payload="{'figures': {'x': steps}}"))
    skips = _notebook(tmp_path, "92_skip", SAVE.format(
        name="92_skip", payload="{'skipped': [{'what': 'gpu part', 'why': 'no GPU'}]}"))
    fails = _notebook(tmp_path, "93_fail", "raise ValueError('planted failure')")
    out = tmp_path / "run"
    run_dir, outcomes = runner.execute([ok, skips, fails, ok], PROFILE, {"steps": 3}, out, progress=False)
    status = [o.status for o in outcomes]
    assert status == ["passed", "passed-with-skips", "failed", "not-run"]
    assert outcomes[0].figures == {"x": 3}
    assert "cell 2 of the output notebook" in outcomes[2].error and "raise ValueError" in outcomes[2].error and "ValueError: planted failure" in outcomes[2].error
    assert (out / "93_fail.ipynb").exists(), "the partial output notebook is kept"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["any_failed"] and not summary["all_passed"]
    md = (out / "summary.md").read_text()
    assert "92_skip | passed-with-skips" in md and "gpu part (no GPU)" in md

    dead = _notebook(tmp_path, "94_dead", "import os\nos._exit(1)")
    _, outcomes = runner.execute([dead], PROFILE, {}, tmp_path / "dead", progress=False)
    assert outcomes[0].status == "failed" and "kernel died" in outcomes[0].error


def test_checks_failing_in_results_fail_the_notebook(tmp_path):
    e = _notebook(tmp_path, "95_check", SAVE.format(name="95_check", payload="{'checks': [{'name': 'c', 'ok': False}]}"))
    _, outcomes = runner.execute([e], PROFILE, {}, tmp_path / "r", progress=False)
    assert outcomes[0].status == "failed" and "checks failed: ['c']" in outcomes[0].error


def _sleeper(tmp_path, name):
    nb = nbformat.read(_notebook(tmp_path, name, "import time\ntime.sleep(60)").source, as_version=4)
    nb.cells.append(new_code_cell("after = 1"))
    nbformat.write(nb, tmp_path / f"{name}.ipynb")
    return runner.NotebookEntry(name[:2], name, name, "no", 0.1, 0.1, source=tmp_path / f"{name}.ipynb")


def _stop_note(path):
    nb = nbformat.read(path, as_version=4)
    status = [c.metadata.get("papermill", {}).get("status") for c in nb.cells if c.cell_type == "code"]
    return nb.cells, status


_INTERRUPTED_RUN = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_runner import PROFILE, _notebook, _sleeper
from kdtree_lab.lab import report, runner
tmp = Path({tmp!r})
e, later = _sleeper(tmp, "96_sleep"), _notebook(tmp, "97_next", "pass")
_, outcomes = runner.execute([e, later], PROFILE, {{}}, tmp / "run", progress=False)
print(json.dumps([[o.status, o.error] for o in outcomes]))
"""


@pytest.mark.slow
def test_ctrl_c_leaves_a_summary_and_a_notebook_that_says_where_it_stopped(tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the process running the notebooks, its default handler in place)
    while a cell sleeps: the run ends interrupted with a summary, and the partial notebook says where."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "run"
    code = _INTERRUPTED_RUN.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL),
                                                       signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})))
    deadline = time.time() + 120
    while time.time() < deadline:  # papermill rewrites the output notebook as each cell starts
        try:
            cells = nbformat.read(out / "96_sleep.ipynb", as_version=4).cells
            if cells[-2].metadata.get("papermill", {}).get("status") == "running":
                break
        except Exception:  # noqa: BLE001 - not written yet, or half-written
            pass
        time.sleep(0.2)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    outcomes = json.loads(stdout.strip().splitlines()[-1])
    assert [o[0] for o in outcomes] == ["interrupted", "not-run"], outcomes
    assert "Ctrl-C in cell 3 of the output notebook (starting 'import time')" in outcomes[0][1]
    assert "96_sleep interrupted" in outcomes[1][1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and not summary["all_passed"]
    assert "This run was interrupted" in (out / "summary.md").read_text()
    assert "Traceback" not in stderr and "ZMQError" not in stderr, stderr
    cells, status = _stop_note(out / "96_sleep.ipynb")
    assert "kdtree-lab-stopped" in cells[2].metadata["tags"] and "Ctrl-C" in cells[2].source
    assert cells[3].source.startswith("import time")  # "cell 3 of the output notebook"
    assert status[-2:] == ["running", "pending"], status  # not papermill's "completed" for cells that never ran


@pytest.mark.slow
def test_cell_timeout_names_the_cell(tmp_path):
    e = _sleeper(tmp_path, "98_slow")
    _, outcomes = runner.execute([e], PROFILE, {}, tmp_path / "r", progress=False, timeout_s=3)
    assert outcomes[0].status == "failed"
    assert "cell 3 of the output notebook (starting 'import time') ran past the 3 s cell timeout" in \
        outcomes[0].error, outcomes[0].error
    cells, status = _stop_note(tmp_path / "r" / "98_slow.ipynb")
    assert "timed out after 3 s" in cells[2].source and status[-2:] == ["running", "pending"]


def test_parameter_bounds_from_the_help_comment(tmp_path):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = new_code_cell('run_dir = "x"  # results\nmax_bs = 8  # largest batch (at least 1)\n'
                      'lens = [1, 2]  # lengths (at least 1)\nfrac = 0.5  # a fraction (more than 0)')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p]
    nbformat.write(nb, tmp_path / "90_b.ipynb")
    e = runner.NotebookEntry("90", "90_b", "b", "no", 0.1, 0.1, source=tmp_path / "90_b.ipynb")
    assert runner.plan_parameters([e], PROFILE, {"max_bs": 1, "lens": [3], "frac": 0.1}, tmp_path)
    with pytest.raises(runner.ParameterError, match=r"'max_bs' of 90_b: expected >= 1, found -1"):
        runner.plan_parameters([e], PROFILE, {"max_bs": -1}, tmp_path)
    with pytest.raises(runner.ParameterError, match="expected >= 1 for every element, found \\[3, 0\\]"):
        runner.plan_parameters([e], PROFILE, {"lens": [3, 0]}, tmp_path)
    with pytest.raises(runner.ParameterError, match="expected > 0, found 0"):
        runner.plan_parameters([e], PROFILE, {"frac": 0}, tmp_path)


def test_every_shipped_count_parameter_has_a_bound():
    for e in runner.manifest():
        for name, spec in runner.notebook_parameters(e.path).items():
            if name in ("max_bs", "num_draft", "num_heads", "tp", "draft_tokens", "context", "replays", "ctx"):
                assert runner._bound(spec["help"]) == (">=", 1.0), (e.name, name)


def test_a_corrupted_notebook_is_named(tmp_path):
    bad = tmp_path / "90_bad.ipynb"
    bad.write_text('{"cells": [')
    e = runner.NotebookEntry("90", "90_bad", "bad", "no", 0.1, 0.1, source=bad)
    with pytest.raises(runner.ParameterError, match=f"{bad}: not a readable notebook"):
        runner.plan_parameters([e], PROFILE, {}, tmp_path)


@pytest.mark.slow
def test_headless_runs_store_text_progress_not_stale_widgets(tmp_path):
    body = ("import os\nfrom kdtree_lab.core.display import headless, progress\n"
            "assert headless(), os.environ.get('KDTREE_HEADLESS')\nfor _ in progress(range(3), desc='work'): pass\n"
            + SAVE.format(name="99_bar", payload="{}"))
    e = _notebook(tmp_path, "99_bar", body)
    _, outcomes = runner.execute([e], PROFILE, {}, tmp_path / "r", progress=False)
    assert outcomes[0].status == "passed", outcomes[0].error
    nb = nbformat.read(tmp_path / "r" / "99_bar.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    progress = [o["text"] for o in outputs if "work:" in o.get("text", "")]
    assert len(progress) == 1 and progress[0].startswith("work: 3/3 items in "), progress  # one line, the final count


def _fake_run(monkeypatch, tmp_path, interrupt_at: str):
    """The real manifest's notebooks through ``execute`` with papermill stood in for: each writes its results until
    ``interrupt_at``, where Ctrl-C arrives. Returns (outcomes, run dir, what the terminal showed)."""
    import io

    import papermill
    from rich.console import Console

    from kdtree_lab.lab.record import save_results

    def fake(path, output, parameters, **kw):
        name = Path(path).stem
        if name == interrupt_at:
            raise KeyboardInterrupt
        save_results(parameters["run_dir"], name, {"figures": {"tokens": 287588}})

    shown = io.StringIO()
    monkeypatch.setattr(papermill, "execute_notebook", fake)
    monkeypatch.setattr("kdtree_lab.core.display.console",
                        lambda **kw: Console(file=shown, width=80, color_system=None))
    entries = {e.name: e for e in runner.manifest()}
    chosen = [entries[n] for n in ("07_speculation", "03_eager_parity", "02_kernel_build", "04_memory_budget")]
    out = tmp_path / "run"
    out.mkdir()
    (out / "kernels.log").write_text("")  # as the kernels leave it when they say nothing
    _, outcomes = runner.execute(chosen, load("cpu"), {}, out, progress=False)
    return outcomes, out, shown.getvalue()


def test_after_ctrl_c_every_later_notebook_names_the_one_that_stopped_the_run(monkeypatch, tmp_path):
    outcomes, out, shown = _fake_run(monkeypatch, tmp_path, "03_eager_parity")
    assert [o.status for o in outcomes] == ["passed", "interrupted", "not-run", "not-run"]
    assert [o.error for o in outcomes[2:]] == ["03_eager_parity interrupted before it"] * 2
    assert not (out / "kernels.log").exists(), "an empty kernels.log is not left in the run folder"
    started = [ln for ln in shown.splitlines() if ln.startswith("[")]
    assert [ln.split()[1] for ln in started] == ["07_speculation", "03_eager_parity"]
    assert all(len(ln) <= 80 for ln in started), started  # a long title ends in an ellipsis, on its one line
    assert started[0].startswith("[1/4] 07_speculation (profile cpu): What tree verify buys")  # the manifest's title
    assert started[0].endswith("\u2026") and shown.splitlines()[1].split()[0] == "passed"  # cut, not wrapped


def test_the_summary_says_what_passed_with_skips_means_only_when_something_was_skipped(tmp_path):
    O = runner.NotebookOutcome
    clean = [O("00_environment", "passed", 5.0), O("04_memory_budget", "passed", 6.0)]
    assert report.notes(clean) == []
    runner.write_summary(tmp_path, PROFILE, clean)
    for page in ("summary.md", "index.html"):
        assert "passed-with-skips" not in (tmp_path / page).read_text(), page
    skipped = clean + [O("03_eager_parity", "passed-with-skips", 9.0, skipped=[{"what": "CUDA part", "why": "no GPU"}])]
    runner.write_summary(tmp_path, PROFILE, skipped)
    for page in ("summary.md", "index.html"):
        assert "A notebook that passed-with-skips did everything this machine allows" in (tmp_path / page).read_text()


def test_the_run_summary_on_a_terminal_is_a_table_not_markdown():
    """What ``kdtree-lab run`` prints at the end: a rich table, statuses whole, no Markdown markup, within 80 columns."""
    import io

    from rich.console import Console

    O = runner.NotebookOutcome
    outcomes = [O("00_environment", "passed", 5.0, figures={"torch": "2.13.0+cpu", "tokens": 287588}),
                O("03_eager_parity", "passed-with-skips", 163.8, skipped=[{"what": "CUDA part", "why": "no GPU"}]),
                O("04_memory_budget", "interrupted", 2.0, error="Ctrl-C in cell 3"),
                O("05_cuda_graphs", "not-run", error="04_memory_budget interrupted before it")]
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(runner.summary_table("cpu", Path("/tmp/r"), outcomes))
    text = buf.getvalue()
    assert text.startswith("kdtree-lab run (cpu): /tmp/r")
    assert "# " not in text and "`" not in text and "|" not in text and "---" not in text
    assert all(len(ln) <= 80 for ln in text.splitlines())
    statuses, figures = text.split("key figures", 1)
    rows = {ln.split()[0]: ln.split()[1] for ln in statuses.splitlines() if ln.strip()[:2] in ("00", "03", "04", "05")}
    assert rows == {o.notebook: o.status for o in outcomes}  # each status whole, on its notebook's line
    assert any(ln.split() == ["00_environment", "torch", "2.13.0+cpu"] for ln in figures.splitlines()), figures
    assert any(ln.split() == ["tokens", "287,588"] for ln in figures.splitlines()), figures
    assert "This run was interrupted (Ctrl-C)" in text


def test_after_ctrl_c_only_the_dead_kernel_task_report_is_dropped():
    """asyncio's report of nbclient's cell task dying with the interrupted kernel is dropped; any other record passes."""
    import logging

    from nbclient.exceptions import DeadKernelError

    from kdtree_lab.lab.runner import _DeadKernelAfterCtrlC

    def record(msg, exc):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None,
                                 (type(exc), exc, None) if exc else None)

    f = _DeadKernelAfterCtrlC()
    assert not f.filter(record("Task exception was never retrieved\nfuture: <Task>", DeadKernelError("Kernel died")))
    assert f.filter(record("Task exception was never retrieved\nfuture: <Task>", RuntimeError("other")))
    assert f.filter(record("Unclosed client session", None))
    assert f.filter(record("Exception in callback", DeadKernelError("Kernel died")))
    log = logging.getLogger("asyncio")
    saved = list(log.filters)  # an interrupted run earlier in this process may have installed one
    try:
        log.filters[:] = [x for x in saved if not isinstance(x, _DeadKernelAfterCtrlC)]
        _DeadKernelAfterCtrlC.install()
        _DeadKernelAfterCtrlC.install()
        assert sum(isinstance(x, _DeadKernelAfterCtrlC) for x in log.filters) == 1
    finally:
        log.filters[:] = saved
