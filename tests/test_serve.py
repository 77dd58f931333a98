"""The way into a running SGLang server: the budget's launch lines through SGLang 0.5.23's own argument parser,
kdtree_lab.sglang.serve's refusals, and the hook's entry point against SGLang's plugin registry. SGLang is installed
without its GPU stack by `make venv` (its parser and registry import without CUDA)."""

import ast
import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib
from sglang.srt.plugins.hook_registry import HookRegistry, HookType  # noqa: E402  (SGLang itself, not a copy)
from sglang.srt.server_args import prepare_server_args  # noqa: E402

from kdtree_lab.budget import calculator
from kdtree_lab.budget.inputs import BudgetInputError, BudgetInputs
from kdtree_lab.budget.launch import speculative_problem
from kdtree_lab.sglang import hook as sglang_hook
from kdtree_lab.sglang import serve

ROOT = Path(__file__).resolve().parents[1]


def sglang_args(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[:4] == ["KDTREE_VERIFY=on", "python", "-m", "kdtree_lab.sglang.serve"], line
    return words[4:]


@pytest.mark.parametrize("kw", [
    dict(),  # the default: an EAGLE tree, top-k 4, 3 steps, 16 tokens
    dict(spec_algorithm="EAGLE3", topk=1, spec_steps=3, draft_tokens=4),  # a chain
    dict(spec_algorithm="DFLASH", topk=1, spec_steps=1, draft_tokens=16),  # one DFlash block
    dict(kv_dtype="fp8", chunked_prefill=4096, max_bs=16, topk=8, spec_steps=4, draft_tokens=32, context=32768,
         concurrency=16),
    dict(gpu="h200", model="deepseek-v3", quant="fp8", model_path="/models/dsv3", draft_model_path="/models/my draft"),
])
def test_launch_line_is_what_sglang_parses(kw):
    inp = BudgetInputs(**kw)
    res = calculator.compute(inp)
    assert res.impossible is None
    sa = prepare_server_args(sglang_args(res.launch_line))
    assert serve.launch_problems(sa) == []
    assert (sa.speculative_algorithm, sa.speculative_eagle_topk, sa.speculative_num_steps,
            sa.speculative_num_draft_tokens) == (inp.spec_algorithm, inp.topk, inp.spec_steps, inp.draft_tokens)
    assert (sa.model_path, sa.speculative_draft_model_path) == (inp.model_path, inp.draft_model_path)
    assert (sa.attention_backend, sa.tp_size, sa.context_length) == ("triton", inp.tp, inp.context)
    assert (sa.cuda_graph_max_bs_decode, sa.max_running_requests) == (inp.max_bs, inp.max_bs)
    assert sa.mem_fraction_static == pytest.approx(res.fraction, abs=5e-4)
    assert sa.kv_cache_dtype == ("fp8_e4m3" if inp.kv_dtype == "fp8" else "auto")
    assert sa.chunked_prefill_size == inp.chunked_prefill


@pytest.mark.parametrize("algorithm,steps,topk,n,fragment", [
    ("EAGLE", 3, 1, 16, "chain of spec_steps + 1 = 4"),  # the old default launch line
    ("EAGLE", 3, 4, 38, "at most 37"),  # 1 + 4 + 2 x 16
    ("EAGLE", 1, 4, 6, "at most 5"),
    ("DFLASH", 3, 1, 16, "DFLASH drafts a chain"),
    ("MEDUSA", 3, 4, 16, "spec_algorithm"),
])
def test_speculative_settings_sglang_would_not_run_are_refused(algorithm, steps, topk, n, fragment):
    assert fragment in speculative_problem(algorithm, steps, topk, n)
    with pytest.raises(BudgetInputError, match="draft_tokens|topk|spec_algorithm"):
        calculator.compute(BudgetInputs(spec_algorithm=algorithm, spec_steps=steps, topk=topk, draft_tokens=n))


def test_speculative_settings_sglang_runs_pass():
    assert speculative_problem("EAGLE", 3, 1, 4) is None
    assert speculative_problem("EAGLE", 3, 4, 37) is None
    assert speculative_problem("EAGLE3", 5, 8, 64) is None
    assert speculative_problem("DFLASH", 1, 1, 16) is None


def test_budget_cli_refuses_an_inconsistent_draft_in_one_line():
    out = subprocess.run([sys.executable, "-m", "kdtree_lab", "budget", "--topk", "1", "--draft-tokens", "16"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().count("\n") == 0 and "spec_steps + 1" in out.stderr


@pytest.mark.parametrize("extra,fragment", [
    (["--attention-backend", "flashinfer", "--speculative-algorithm", "EAGLE"], "--attention-backend triton"),
    (["--speculative-algorithm", "EAGLE"], "SGLang auto-selection"),
    (["--attention-backend", "triton"], "no --speculative-algorithm"),
])
def test_launch_problems_on_sglang_parsed_arguments(extra, fragment):
    problems = serve.launch_problems(prepare_server_args(["--model-path", "MODEL_PATH", *extra]))
    assert len(problems) == 1 and fragment in problems[0]


@pytest.mark.parametrize("env,argv,fragment", [
    ({"KDTREE_VERIFY": "on"}, ["--model-path", "M", "--attention-backend", "flashinfer", "--speculative-algorithm",
                               "EAGLE"], "--attention-backend triton is required"),
    ({"KDTREE_VERIFY": "fast"}, ["--model-path", "M"], "KDTREE_VERIFY='fast'"),
    ({"KDTREE_VERIFY": "on"}, [], "usage:"),
])
def test_serve_refuses_in_one_line(env, argv, fragment):
    out = subprocess.run([sys.executable, "-m", "kdtree_lab.sglang.serve", *argv], capture_output=True, text=True,
                         cwd=ROOT, env={"PATH": "/usr/bin:/bin", **env}, timeout=300)
    assert out.returncode == 2
    text = out.stderr if argv else out.stdout
    assert fragment in text and "Traceback" not in out.stderr


@pytest.fixture
def clean_registry():
    saved = {k: list(v) for k, v in HookRegistry._hooks.items()}
    serve._registered = False
    yield HookRegistry._hooks
    HookRegistry._hooks.clear()
    HookRegistry._hooks.update(saved)
    serve._registered = False


def test_plugin_registers_an_after_hook_on_the_backend_init(clean_registry, monkeypatch):
    monkeypatch.setenv("KDTREE_VERIFY", "validate")
    serve.sglang_plugin()
    serve.sglang_plugin()  # once per process
    assert [(t, h) for t, h, _ in clean_registry[serve.TARGET]] == [(HookType.AFTER, serve.after_backend_init)]


def test_plugin_registers_nothing_when_off(clean_registry, monkeypatch):
    monkeypatch.delenv("KDTREE_VERIFY", raising=False)
    serve.sglang_plugin()
    assert not clean_registry.get(serve.TARGET)


def test_entry_point_is_declared_for_sglang_plugin_group():
    from sglang.srt.plugins import GENERAL_PLUGINS_GROUP

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps[GENERAL_PLUGINS_GROUP] == {"kdtree_verify": "kdtree_lab.sglang.serve:sglang_plugin"}


def test_after_backend_init_installs_on_target_mla_backends_only(monkeypatch):
    calls = []
    monkeypatch.setattr(sglang_hook, "install", lambda backend, mode: calls.append((backend, mode)) or
                        SimpleNamespace(mode=mode, num_heads=8, num_draft=16, max_bs=8))
    monkeypatch.setenv("KDTREE_VERIFY", "on")
    target = SimpleNamespace(is_draft_worker=False, server_args=SimpleNamespace(model_path="/models/llama"))
    mla = SimpleNamespace(use_mla=True)
    assert serve.after_backend_init("r", mla, target) == "r" and calls == [(mla, "on")]
    serve.after_backend_init(None, SimpleNamespace(use_mla=False), SimpleNamespace(is_draft_worker=True))
    assert len(calls) == 1  # a draft model's backend is left alone
    with pytest.raises(sglang_hook.HookInstallError, match="/models/llama does not use MLA"):
        serve.after_backend_init(None, SimpleNamespace(use_mla=False), target)
    other = SimpleNamespace(use_mla=True)
    serve.after_backend_init(None, other, model_runner=target)  # the runner passed by name
    assert calls[-1] == (other, "on")


def _source(module: str) -> ast.Module:
    return ast.parse(Path(importlib.util.find_spec(module).origin).read_text())


def _self_attrs(fn: ast.FunctionDef) -> set[str]:
    return {t.attr for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_sglang_classes_have_what_the_hook_reads():
    """SGLang's real sources (read, not imported: the backend module needs the GPU stack)."""
    module, _, rest = serve.TARGET.rpartition(".TritonAttnBackend.")
    init = _method(_source(module), "TritonAttnBackend", rest)
    assert [a.arg for a in init.args.args[:2]] == ["self", "model_runner"]
    assert {"use_mla", "req_to_token_pool", "num_head", "num_draft_tokens", "device", "verify_shared_kv_fwd",
            "use_verify_shared_kv"} <= _self_attrs(init)
    runner = _method(_source("sglang.srt.model_executor.model_runner"), "ModelRunner", "__init__")
    assert {"is_draft_worker", "server_args"} <= _self_attrs(runner)
    launch = next(n for n in _source("sglang.srt.entrypoints.http_server").body
                  if isinstance(n, ast.FunctionDef) and n.name == "launch_server")
    assert "run_scheduler_process_func" in [a.arg for a in launch.args.args]
