"""The command line's contract, for every subcommand and option (issue 47): a bad value is one line naming it and
exit 2, checked before any work or allocation; a well-formed request whose answer is no exits 3; Ctrl-C is one line
and exit 130; a reader that goes away (``| head``) ends the command quietly; ``--version``. The exit codes are the
README's ("The command line")."""

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from kdtree_lab.cli.main import build_parser, main
from kdtree_lab.core.paths import ROOT

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="the answer differs on a machine with a GPU")


def _outcome(argv, capsys):
    """(exit code, stdout, stderr) of ``kdtree-lab ARGV`` run in this process."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "usage:" not in err, err
    return lines[0]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if a.dest == "command").choices


def _value_options() -> list[tuple[str, str, argparse.Action]]:
    """(command, option, action) for every option of every subcommand that takes a value."""
    return [(name, a.option_strings[-1], a) for name, p in _subcommands().items() for a in p._actions
            if a.option_strings and a.nargs != 0 and a.dest != "help"]


@pytest.fixture
def no_work(monkeypatch):
    """Fail a test that lets a refused command start its work: no notebook executes, no batch is drawn."""
    import papermill

    def boom(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(papermill, "execute_notebook", boom)
    monkeypatch.setattr(torch, "randn", boom)


# The examples and their class: each a bad value refused in one line naming it, exit 2, before any work.
BAD = [
    (["audit", "--seed", "-1"], "argument --seed: expected an integer from 0 to 4294967295, found '-1'"),
    (["parity", "--impl", "triton", "--seed", "-1"], "argument --seed: expected an integer from 0 to 4294967295"),
    (["capture", "--seed", "4294967296"], "argument --seed: expected an integer from 0 to 4294967295"),
    (["audit", "--variant", "capture", "--padded-bs", "1"],
     "argument --padded-bs: expected at least the live batch (3 requests), found 1"),
    (["audit", "--padded-bs", "5"], "argument --padded-bs: applies to --variant capture only"),
    (["audit", "--prefix", "100000000"], "arguments --prefix/--draft/--heads: expected a size within 80% of the "),
    (["audit", "--heads", "100000000"], "arguments --prefix/--draft/--heads: expected a size within 80% of the "),
    (["audit", "--draft", "1000000"], "arguments --prefix/--draft/--heads: expected a size within 80% of the "),
    (["audit", "--k-scale", "nan"], "argument --k-scale: expected a number > 0, found 'nan'"),
    (["audit", "--v-scale", "inf"], "argument --v-scale: expected a number > 0, found 'inf'"),
    (["parity", "--impl", "triton", "--max-prefix", "4000000"],
     "arguments --max-prefix/--max-batch/--max-draft/--heads: expected a size within 80% of the "),
    (["parity", "--impl", "triton", "--fp8-math", "e4m3"],
     "argument --fp8-math: applies with --kv-dtype fp8 only (how an fp8 pool's e4m3 is read), found --fp8-math "
     "e4m3 with a bf16 pool"),
    (["parity", "--impl", "triton", "--cases", "0", "--no-edge"], "arguments --cases and --no-edge: expected at "
                                                                   "least one case"),
    (["parity", "--impl", "cuda_sm120_fp8"], "argument --kv-dtype bf16: impl cuda_sm120_fp8 serves fp8 KV pools"),
    (["build", "--arch", ""], "argument --arch: expected one or more of sm_120a, sm_120, sm_90a, sm_90 (the library "
                              "needs sm_90 or later: sm_80 and sm_89 lack PTX it uses), found ''"),
    (["build", "--arch", "sm_80"], "argument --arch: expected one or more of sm_120a, sm_120, sm_90a, sm_90"),
    (["build", "--arch", "sm_120a,"], "argument --arch: expected one or more of"),
    (["run", "--only", ""], "argument --only: expected notebook numbers or names, found an empty value"),
    (["run", "--only", ","], "argument --only: expected notebook numbers or names, found ','"),
    (["run", "--out", ""], "argument --out: expected a run directory, found an empty value"),
    (["run", "-p", "=1"], "argument -p: expected key=value with a parameter name, found '=1'"),
    (["bench", "--impl", "nosuch"], "argument --impl: expected comma-separated names of cuda, "),
    (["bench", "--impl", ""], "argument --impl: expected comma-separated names of"),
    (["bench", "--out", ""], "argument --out: expected a file to write the JSON result to, found an empty value"),
    (["bench", "--resume", str(ROOT / "README.md")], "expected a bench result JSON, found unreadable JSON"),
    (["bench", "--preset", "quick", "--impl", "flashmla"], "argument --impl: expected an implementation preset "
                                                           "quick times, found flashmla"),
    (["bench", "--shape", "1,2", "--impl", "cuda"], "argument --shape: expected B,L,N,H[,KV] (positive integers; "
                                                    "KV one of bf16, fp8), found '1,2'"),
    (["bench", "--shape", "1,4096,4,8,fp9", "--impl", "cuda"], "argument --shape: expected B,L,N,H[,KV]"),
    (["bench", "--shape", "0,4096,4,8", "--impl", "cuda"], "argument --shape: expected B,L,N,H[,KV]"),
    (["bench", "--shape", "1,4096,4,8"], "argument --shape: needs --impl (the implementations to time at these "
                                         "shapes), found none"),
    (["bench", "--shape", "1,4096,4,8", "--impl", "cuda", "--preset", "issue"],
     "argument --shape: times the shapes it names, found it with --preset issue"),
    (["bench", "--shape", "1,4096,4,8", "--impl", "cuda", "--resume", str(ROOT / "README.md")],
     "argument --resume: finishes a preset's run, found it with --shape"),
    (["bench", "--preset", "card-floor", "--gpus", "cpu:2"],
     "argument --gpus: the card-floor preset is one run on one GPU"),
    (["capture", "--bs", "64", "--max-bs", "8"], "argument --bs: expected sizes up to --max-bs 8"),
    (["capture", "--impl", "cuda_sm120_fp8"], "argument --kv-dtype bf16: impl cuda_sm120_fp8 serves fp8 KV pools"),
    (["budget", "--mem-fraction", "1"], "argument --mem-fraction: expected a value in (0, 1), found 1.0"),
    (["budget", "--mem-fraction", "0"], "argument --mem-fraction: expected a value in (0, 1), found 0.0"),
    (["budget", "--mem-fraction", "1.5"], "argument --mem-fraction: expected a value in (0, 1), found 1.5"),
    (["budget", "--mem-fraction", "nan"], "argument --mem-fraction: expected a finite number, found 'nan'"),
    (["budget", "--preset", "reference-decision", "--mem-fraction", "0.9"],
     "argument --mem-fraction: does not apply with --preset reference-decision"),
    (["budget", "--model-path", " "], "argument --model-path: expected a checkpoint path for the launch line"),
    (["speculate", "--nodes", "100"], "argument --nodes: expected tree sizes from 2 to 64"),
    (["speculate", "--nodes", "1"], "argument --nodes: expected comma-separated integers >= 2, found '1'"),
    (["speculate", "--batch", "100"], "argument --batch: expected 1 to 48 (the grid of ours times), found 100"),
    (["speculate", "--step-context", "4096"], "argument --step-context: applies with --step-ms only"),
    (["speculate", "--accept-nodes", "1", "--accept-length", "1"], "argument --accept-nodes: expected an integer >= 2"),
    (["speculate", "--step-ms", "inf", "--step-context", "4096"], "argument --step-ms: expected a number > 0"),
    (["speculate", "--quant", "nf4"], "argument --quant: expected one of"),
    (["run", "--scheduler", "tcp://x:8786"], "argument --scheduler: applies with --gpus only"),
    (["parity", "--impl", "triton", "--scheduler", "tcp://x:8786"], "argument --scheduler: applies with --gpus only"),
    (["bench", "--scheduler", "tcp://x:8786"], "argument --scheduler: applies with --gpus only"),
    (["run", "--gpus", " "], "argument --gpus: expected all, cpu:N or GPU indices such as 0,1, found an empty value"),
    (["parity", "--impl", "triton", "--gpus", "x"], "--gpus x: expected all, cpu:N or distinct GPU indices"),
]


@pytest.mark.parametrize("argv,needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_one_line_naming_it_exit_2_before_any_work(argv, needle, capsys, no_work):
    t0 = time.perf_counter()
    code, out, err = _outcome(argv, capsys)
    line = _one_line(err)
    assert code == 2 and line.startswith(f"kdtree-lab {argv[0]}: ") and needle in line, (code, err)
    assert time.perf_counter() - t0 < 30, "refused only after work"


# -p values of `kdtree-lab run`, refused by the rules the library applies, before the first notebook starts.
BAD_PARAMS = [
    ("gpu=nosuch", "argument -p gpu: expected one of b200, h100, h200, rtx-5090, rtx-pro-6000, found 'nosuch' "
                   "(notebook 04_memory_budget)"),
    ("mem_fraction=1.5", "argument -p mem_fraction: expected 0 (the largest safe fraction) or a value in (0, 1), "
                         "found 1.5 (notebook 04_memory_budget)"),
    ("mem_fraction=-0.1", "argument -p mem_fraction: expected 0 (the largest safe fraction) or a value in (0, 1), "
                          "found -0.1 (notebook 04_memory_budget)"),
    ("tp=3", "argument -p tp: expected a divisor of the model's 64 heads, found 3 (notebook 04_memory_budget)"),
    ("quant='nf4'", "argument -p quant: expected one of bf16, fp8, int4"),
    ("activation_model='guess'", "argument -p activation_model: expected one of"),
    ("sglang_log='/nonexistent.log'", "argument -p sglang_log: expected an SGLang log file, found none"),
    ("seed=-1", "argument -p seed: expected an integer from 0 to 4294967295, found -1 (notebook 01_dtype_audit)"),
    ("padded_bs=1", "argument -p padded_bs: expected at least the live batch (3 requests), found 1 "
                    "(notebook 01_dtype_audit)"),
    ("prefix_lens=[100000000]", "arguments -p prefix_lens/-p num_draft/-p num_heads: expected a size within 80%"),
    ("archs=['sm_80']", "argument -p archs: expected one or more of sm_120a, sm_120, sm_90a, sm_90"),
    ("triton_capabilities=[75]", "argument -p triton_capabilities: expected compute capabilities (x 10) from 80, 90, "
                                 "120, found 75 (notebook 02_kernel_build)"),
    ("impls=['nosuch']", "argument -p impls: expected implementations from cuda,"),
    ("max_prefix=4000000", "arguments -p max_prefix/-p max_batch/-p max_draft/-p heads: expected a size within 80%"),
    ("impl='nosuch'", "argument -p impl: expected an implementation from cuda,"),
    ("kv_dtypes=['fp16']", "argument -p kv_dtypes: expected KV pools from bf16, fp8, found 'fp16'"),
    ("preset='nosuch'", "argument -p preset: expected a preset from quick,"),
    ("committed='nosuch.json'", "argument -p committed: expected \"current\" or a results JSON"),
    ("nodes=[2,200]", "argument -p nodes: expected tree sizes from 2 to 64"),
    ("contexts=[]", "argument -p contexts: expected token counts >= 1, found none (notebook 07_speculation)"),
    ("draft='medusa'", "argument -p draft: expected one of ddtree-math500, dflash-gsm8k"),
    ("batch=100", "argument -p batch: expected 1 to 48 (the grid of ours times), found 100"),
]


@pytest.mark.parametrize("param,needle", BAD_PARAMS, ids=[p for p, _ in BAD_PARAMS])
def test_run_refuses_a_parameter_the_library_refuses_before_the_first_notebook(param, needle, capsys, no_work,
                                                                              tmp_path):
    code, out, err = _outcome(["run", "--profile", "cpu", "-p", param, "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and needle in _one_line(err), err
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_every_notebook_parameter_the_rules_read_is_one_the_notebook_declares():
    """notebook_checks reads each notebook's parameters by name: the shipped defaults pass, a rule without its
    parameters fails loudly (a KeyError, not a silent default), and notebook 04 passes each BudgetInputs field the
    parameter of the same name (what the rule builds its BudgetInputs from)."""
    import json
    import re

    from kdtree_lab.lab import notebook_checks, runner

    for e in runner.manifest():
        declared = runner.notebook_parameters(e.path)
        params = {k: runner._default(v) for k, v in declared.items()}
        notebook_checks.check(e.name, params)  # the shipped defaults pass their own rules
        if e.name in notebook_checks.RULES and e.name != "04_memory_budget":
            with pytest.raises(KeyError):
                notebook_checks.check(e.name, {k: v for k, v in params.items() if k in ("run_dir", "profile")})
    nb = ROOT / "notebooks" / "04_memory_budget.ipynb"
    source = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
    call = source[source.index("inputs.BudgetInputs("):source.index("res = ")]
    passed = re.findall(r"(\w+)=(\w+)", call)
    declared = runner.notebook_parameters(nb)
    assert passed and all(field == param and param in declared for field, param in passed), passed


def _option_value_cases():
    """Values no option accepts: an empty one for every option; nan and inf for every number; -1 for every
    integer that has a lower bound at 0 or above."""
    out = []
    for command, option, a in _value_options():
        out.append((command, option, ""))
        name = getattr(a.type, "__name__", "")
        if "integer" in name or "number" in name:
            out += [(command, option, "nan"), (command, option, "inf")]
        if "integer" in name and "-" not in name:
            out.append((command, option, "-1"))
    return out


OPTION_CASES = _option_value_cases()


@pytest.mark.parametrize("command,option,value", OPTION_CASES,
                         ids=[f"{c} {o} {v!r}" for c, o, v in OPTION_CASES])
def test_every_option_refuses_what_no_option_accepts_in_one_line(command, option, value, capsys, no_work):
    argv = [command, option, value] + (["--impl", "triton"] if command == "parity" and option != "--impl" else [])
    code, out, err = _outcome(argv, capsys)
    line = _one_line(err)
    assert code == 2 and line.startswith(f"kdtree-lab {command}: "), (code, err)
    shown = option if option != "--param" else "-p"
    assert shown in line or f"argument {option}" in line, line  # the line names the option


# A well-formed request whose answer is no: exit 3, one line saying why (the answer, when there is one, on stdout).
ANSWER_NO = [
    (["budget", "--mem-fraction", "0.99"], "--mem-fraction 0.990 is not safe: leaves "),
    (["budget", "--context", "100000000"], "impossible deployment: no fraction fits"),
    (["capture"], "graph capture and replay need a CUDA GPU, found none here"),
    (["bench"], "needs a CUDA GPU, found none here"),
    (["bench", "--impl", "cuda"], "needs a CUDA GPU, found none here"),
    (["bench", "--shape", "1,4096,4,8,fp8", "--shape", "8,4096,4,8", "--impl", "cuda_sm120_e4m3_32"],
     "needs a CUDA GPU, found none here"),
    (["parity", "--impl", "cuda"], "--impl cuda: expected a CUDA GPU, found none here"),
    (["run", "--profile", "h200", "--only", "00"], "--profile h200: expected a CUDA GPU, found none on this machine"),
    (["speculate", "--measure"], "--measure: needs a CUDA GPU"),
    (["speculate", "--gpu", "rtx-5090"], "the memory budget refuses it"),  # Kimi K2 at TP8 cannot load on 32 GB
]


@NO_GPU
@pytest.mark.parametrize("argv,needle", ANSWER_NO, ids=[" ".join(a) for a, _ in ANSWER_NO])
def test_a_well_formed_no_exits_3_in_one_line(argv, needle, capsys, no_work):
    code, out, err = _outcome(argv, capsys)
    assert code == 3 and needle in _one_line(err), (code, err)


def test_version(capsys):
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    code, out, err = _outcome(["--version"], capsys)
    assert code == 0 and out == f"kdtree-lab {declared}\n" and not err


def test_an_internal_error_is_one_line_with_how_to_see_the_traceback(monkeypatch, capsys):
    from kdtree_lab.cli import doctor

    def broken(args):
        raise ZeroDivisionError("a planted bug")

    monkeypatch.setattr(doctor, "cmd_doctor", broken)
    code, out, err = _outcome(["doctor"], capsys)
    line = _one_line(err)
    assert code == 1 and line.startswith("kdtree-lab doctor: internal error, not a problem with the arguments: "
                                         "ZeroDivisionError: a planted bug (run again with KDTREE_TRACEBACK=1")
    monkeypatch.setenv("KDTREE_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):
        main(["doctor"])


# Ctrl-C: SIGINT delivered while each command is at work (a hook in the library call it makes), as a terminal sends
# it; one line, exit 130, nothing else on stderr.
_HOOKED = """
import os, signal, sys, importlib
module, name = importlib.import_module(sys.argv[1]), sys.argv[2]
real = getattr(module, name)
def interrupted(*a, **k):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)  # the signal lands here, inside the command's work
    return real(*a, **k)
import time
setattr(module, name, interrupted)
from kdtree_lab.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def _sigint_default():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


CTRL_C = [
    ("kdtree_lab.lab.doctor", "collect", ["doctor"]),
    ("kdtree_lab.lab.runner", "plan_parameters", ["run", "--only", "00"]),
    ("kdtree_lab.contract.audit", "audit", ["audit"]),
    ("kdtree_lab.kernels.build", "build_library", ["build", "--force"]),
    ("kdtree_lab.checks.parity", "run_case", ["parity", "--impl", "triton", "--cases", "2", "--no-edge",
                                              "--max-prefix", "16"]),
    ("kdtree_lab.budget.calculator", "compute", ["budget"]),
    ("kdtree_lab.checks.capture_plants", "planted_findings", ["capture"]),
    ("kdtree_lab.checks.bench_presets", "preset_items", ["bench", "--impl", "cuda"]),
    ("kdtree_lab.speculate.sweep", "sweep", ["speculate"]),
    ("kdtree_lab.generate.run", "plan", ["generate"]),
]


def test_ctrl_c_cases_cover_every_subcommand():
    assert sorted({argv[0] for _, _, argv in CTRL_C}) == sorted(_subcommands())


@pytest.mark.parametrize("module,name,argv", CTRL_C, ids=[c[2][0] for c in CTRL_C])
def test_ctrl_c_during_every_command_is_one_line_and_exit_130(module, name, argv):
    env = os.environ | {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", _HOOKED, module, name, *argv], capture_output=True, text=True,
                          env=env, preexec_fn=_sigint_default, timeout=300)
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert done.stderr == f"kdtree-lab {argv[0]}: interrupted (Ctrl-C)\n", done.stderr[-2000:]


def test_ctrl_c_during_nvcc_stops_the_build_in_one_line_and_caches_nothing(tmp_path):
    """Ctrl-C to the whole process group (nvcc included), as a terminal sends it, while nvcc compiles: one line,
    exit 130, and no library left that a later build would take from the cache."""
    from kdtree_lab.core.cuda_tools import find_nvcc

    if not find_nvcc():
        pytest.skip("no nvcc here")
    start = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "kdtree_lab", "build", "--force", "--arch", "sm_90a"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: (_sigint_default(), os.setpgrp()))
    line = proc.stderr.readline()  # "nvcc: building libkdtree_verify-<hash>.so for sm_90a", then nvcc runs
    assert line.startswith("nvcc: building "), line
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err == "kdtree-lab build: interrupted (Ctrl-C)\n", (proc.returncode, err)
    assert not out
    log = (ROOT / "build" / line.split()[2]).with_suffix(".ptxas.log")
    assert not log.exists() or log.stat().st_mtime < start  # the cache holds only what finished before


# A reader that goes away (`kdtree-lab ... | head`): the command ends quietly, exit 141, nothing on stderr. Every
# way a command prints: a text answer through record.emit (parity, build and bench print the same way), its JSON,
# terminal tables, a table then a refusal (capture without a GPU); run's own below.
PIPED = [["doctor"], ["audit"], ["budget"], ["budget", "--preset", "reference-decision"], ["speculate"],
         ["speculate", "--sources"], ["capture"], ["audit", "--json"], ["budget", "--json"]]


@pytest.mark.parametrize("argv", PIPED, ids=[" ".join(a) for a in PIPED])
def test_a_closed_pipe_ends_the_command_quietly(argv):
    env = os.environ | {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.Popen([sys.executable, "-m", "kdtree_lab", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # `| head -0`: the reader is gone before the first line
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert proc.returncode == 141 and err == "", (proc.returncode, err[-2000:])


def test_a_closed_pipe_during_run_leaves_a_summary_that_says_so(tmp_path):
    import json

    proc = subprocess.Popen([sys.executable, "-m", "kdtree_lab", "run", "--profile", "cpu", "--only", "00,01",
                             "--out", str(tmp_path / "run")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.stdout.close()  # `kdtree-lab run 2>&1 | head -0`
    assert proc.wait(timeout=300) == 141
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["interrupted"] and not summary["all_passed"], summary
    first, second = summary["notebooks"]
    assert first["status"] == "interrupted" and "broken pipe" in first["error"], first
    assert second["status"] == "not-run" and second["error"] == "00_environment interrupted before it", second
    assert "interrupted" in (tmp_path / "run" / "summary.md").read_text()


def test_papermill_draws_no_progress_bar_when_stderr_is_not_a_terminal(monkeypatch, tmp_path, capsys):
    """Its bar would be one long carriage-return line in a log; on a terminal it stays unless --no-progress."""
    from kdtree_lab.lab import runner

    seen = []

    def execute(entries, profile, overrides, out, progress, timeout_s):
        seen.append(progress)
        return out, []

    monkeypatch.setattr(runner, "execute", execute)
    for tty in (False, True):
        monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
        assert main(["run", "--profile", "cpu", "--only", "00", "--out", str(tmp_path / "r")]) == 0
    assert seen == [False, True]


# Output a person reads: one table style (display.aligned_table), the answer first, sources behind a flag.
def test_speculate_answers_first_and_shortly_and_only_at_the_contexts_asked(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = _outcome(["speculate", "--context", "65536"], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith("Tokens per second per request: today's best against the best setup"), lines[:3]
    rule = next(i for i, ln in enumerate(lines) if set(ln) == {"─"})
    headline = lines[rule + 1:lines.index("", rule)]
    assert len(headline) == 1 and headline[0].split()[0] == "64k", headline  # the context asked, and only it
    assert "| --- |" not in out and "|---|" not in out and len(lines) < 30, out
    assert "Inputs, each with its source" not in out and "--sources" in out
    code, sourced, _ = _outcome(["speculate", "--context", "65536", "--sources"], capsys)
    assert "Inputs, each with its source" in sourced and "gpus.yaml" in sourced
    code, default, _ = _outcome(["speculate"], capsys)
    assert len(default.splitlines()) < 45, default  # was ~60: the answer is its first table


def test_budget_prints_its_verdict_first_and_tables_not_markdown(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = _outcome(["budget"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("fraction 0.") and " is safe: " in out.splitlines()[0]
    assert "|---|" not in out
    launch = [ln for ln in out.splitlines() if "--mem-fraction-static" in ln]
    assert all(len(ln) <= 120 for ln in out.splitlines() if ln not in launch), out  # launch lines stay whole


def test_the_reference_decision_names_each_workspace_layout_once(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = _outcome(["budget", "--preset", "reference-decision"], capsys)
    assert code == 0 and not err and "|---|" not in out
    from kdtree_lab.budget.inputs import BudgetInputs
    from kdtree_lab.budget.scenario import reference_decision

    for name in {r["workspace"] for r in reference_decision(BudgetInputs())["workspace"]}:
        assert out.count(name[:60]) == 1, name  # a heading, not a cell repeated on every line of its layout
    assert max(len(ln) for ln in out.splitlines()) <= 120, out


@NO_GPU
def test_capture_without_a_gpu_prints_the_audit_as_a_table_then_says_why_it_stopped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = _outcome(["capture"], capsys)
    assert code == 3 and "|---|" not in out and out.startswith("capture-safety audit on planted breakers:")
    assert "graph capture and replay need a CUDA GPU" in _one_line(err)


def test_terminal_tables_wrap_text_columns_and_never_cut_a_cell():
    from kdtree_lab.core.display import aligned_table

    rows = [{"name": "a", "n": 1, "note": "word " * 60}, {"name": "bb", "n": 22, "note": "short"}]
    text = aligned_table(rows, width=60)
    assert max(map(len, text.splitlines())) <= 60, text
    assert " ".join(text.split()).count("word") == 60  # every word kept, wrapped inside its column
    assert aligned_table(rows[1:], width=60).splitlines()[2].split() == ["bb", "22", "short"]


def test_a_terminal_table_is_text_inside_a_notebook_too(monkeypatch):
    """In a Jupyter kernel rich displays a table itself instead of writing it: aligned_table must still return it
    as text (notebooks 00 and 01 print the doctor's and the audit's tables)."""
    import rich.console

    from kdtree_lab.core.display import aligned_table

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    text = aligned_table([{"buffer": "q", "ok": "ok"}], title="audit")
    assert text.splitlines()[0] == "audit" and text.splitlines()[-1].split() == ["q", "ok"], text
