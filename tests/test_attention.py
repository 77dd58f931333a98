"""VerifyAttention, the public plan/run object, on a CPU: planning and workspace sizing, the one-line refusals of
bad arguments and buffers, a capture-safe run(), and the Triton twin through it against the fp64 oracle (the CUDA
implementations through it: tests/test_gpu.py, test_gpu_graphs.py, test_gpu_sglang_hook.py on a GPU)."""

import pytest
import torch

import kdtree_lab
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.capture_audit import audit_capture, watch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.checks.parity import within_tolerance
from kdtree_lab.kernels import dispatch, launch_plan
from kdtree_lab.kernels.attention import VerifyAttention, batch_args

CPU = dict(device="cpu", impl="triton")


def test_exported_from_the_package():
    assert kdtree_lab.VerifyAttention is VerifyAttention


def test_the_plan_covers_each_batch_size_and_one_workspace_serves_them():
    attn = VerifyAttention(8, 16, 8, **CPU)
    assert sorted(attn.plan.batches) == list(range(1, 9))
    want = max(launch_plan.workspace_bytes(bs, 16, 8, attn.nsplit(bs)) for bs in range(1, 9))
    assert attn.plan.workspace_bytes == want and attn.workspace.numel() == want
    assert attn.workspace.dtype == torch.uint8 and not attn.workspace.any()
    assert all(attn.config(bs) == launch_plan.Config("triton", dispatch.TRITON_ROW_TILE) for bs in range(1, 9))
    sized = VerifyAttention(48, 16, 8, nsplit=7, batch_sizes=(1, 2, 4, 48), **CPU)
    assert sorted(sized.plan.batches) == [1, 2, 4, 48] and {sized.nsplit(b) for b in (1, 48)} == {7}
    assert sized.plan.workspace_bytes == launch_plan.workspace_bytes(48, 16, 8, 7)
    assert "nsplit 7..7 over bs 1,2,4,48" in repr(sized)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(max_bs=0), "max_bs: expected an integer >= 1, found 0"),
    (dict(num_draft=0), "num_draft: expected an integer >= 1, found 0"),
    (dict(num_heads=-2), "num_heads: expected an integer >= 1, found -2"),
    (dict(kv_dtype="int8"), "kv_dtype: expected one of bf16, fp8, found 'int8'"),
    (dict(impl="cuda_nonesuch"), "impl: expected one of cuda, "),
    (dict(impl="cuda_sm120_fp8", kv_dtype="bf16"), "kv_dtype: impl cuda_sm120_fp8 serves fp8 KV pools, not bf16"),
    (dict(nsplit=600), "nsplit: expected 0 .* or 1..512, found 600"),
    (dict(batch_sizes=(1, 9)), r"batch_sizes: expected sizes in 1..max_bs=8, found \[1, 9\]"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, needle):
    args = dict(max_bs=8, num_draft=16, num_heads=8, **CPU) | kwargs
    with pytest.raises(ValueError, match=needle) as err:
        VerifyAttention(**args)
    assert "\n" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a CUDA impl without a GPU")
def test_a_cuda_implementation_or_device_without_a_gpu_is_refused_saying_what_to_pass():
    for kwargs, name in ((dict(device="cpu"), "impl: cuda"), (dict(device="cuda", impl="triton"), "device: 'cuda'")):
        with pytest.raises(ValueError) as err:
            VerifyAttention(8, 16, 8, **kwargs)
        line = str(err.value)
        assert line.startswith(name) and "\n" not in line and "found none here (torch " in line
        assert "found cuda" not in line and "device='cpu' and impl='triton'" in line and "TRITON_INTERPRET=1" in line
    with pytest.raises(ValueError, match="^device: 'cuda' needs a CUDA GPU, found none here .*device='cpu'"):
        build_verify_batch([9], 4, 2, device="cuda")


def test_the_triton_twin_on_a_cpu_outside_the_interpreter_is_refused(monkeypatch):
    """Triton picks interpreter or compiler when a kernel is defined: unset before the import, or the kernels
    defined without it, each gets one line naming TRITON_INTERPRET=1 (Triton's own is "0 active drivers")."""
    import sys

    from kdtree_lab.kernels import triton_verify

    monkeypatch.delitem(sys.modules, "kdtree_lab.kernels.triton_verify")
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(ValueError, match="^impl: triton on a CPU needs Triton's interpreter, expected "
                                         "TRITON_INTERPRET=1 in the environment, found it unset; start Python as"):
        VerifyAttention(8, 16, 8, **CPU)
    monkeypatch.setitem(sys.modules, "kdtree_lab.kernels.triton_verify", triton_verify)
    monkeypatch.setattr(triton_verify, "DEFINED_INTERPRETED", False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ValueError, match="found the Triton kernels already defined without it; restart Python"):
        VerifyAttention(8, 16, 8, **CPU)


def _batch(**kw):
    return build_verify_batch([40, 7, 1], 4, 2, seed=5, device="cpu", **kw)


@pytest.mark.parametrize("change,needle", [
    (lambda b: setattr(b, "q", b.q.half()), "q: expected bfloat16, found torch.float16"),
    (lambda b: setattr(b, "kv_indptr", b.kv_indptr[:2]), "kv_indptr: a batch of 1 requests was not planned"),
    (lambda b: setattr(b, "kv_indices", b.kv_indices.int()), "kv_indices: expected int64, found torch.int32"),
    (lambda b: setattr(b, "o", b.o[:, :1]), "o: expected"),
    (lambda b: setattr(b, "custom_mask", b.custom_mask.float()), "custom_mask: expected bool or uint8"),
    (lambda b: setattr(b, "mask_indptr", None), "mask_indptr: expected int64 \\[bs \\+ 1\\] with a custom_mask"),
])
def test_bad_buffers_are_refused_in_one_line_before_any_launch(change, needle, monkeypatch):
    launches = []
    monkeypatch.setattr(dispatch, "launch", lambda *a, **kw: launches.append(a))
    attn = VerifyAttention(4, 4, 2, batch_sizes=(2, 3), **CPU)
    b = _batch()
    change(b)
    with pytest.raises(ValueError, match=needle) as err:
        attn.run(*batch_args(b))
    assert "\n" not in str(err.value) and launches == []


def test_the_pool_and_the_heads_must_be_the_planned_ones(monkeypatch):
    monkeypatch.setattr(dispatch, "launch", lambda *a, **kw: None)
    with pytest.raises(ValueError, match=r"k_buffer: expected a bf16 pool \(torch.bfloat16\), found torch.float8"):
        VerifyAttention(4, 4, 2, **CPU).run(*batch_args(_batch(kv_dtype="fp8")))
    with pytest.raises(ValueError, match="q: expected H=1 heads, found 2"):
        VerifyAttention(4, 4, 1, **CPU).run(*batch_args(_batch()))
    with pytest.raises(ValueError, match="q: expected bs\\*N = 3\\*8"):  # N=4 buffers, a plan for N=8
        VerifyAttention(4, 8, 2, **CPU).run(*batch_args(_batch()))


def test_run_is_capture_safe(monkeypatch):
    """Everything run() does around the launch: no allocation, no host sync, no read of kv_indices' or the mask's
    length (under graphs both are far longer than their valid part)."""
    attn = VerifyAttention(4, 4, 2, **CPU)
    b = build_verify_batch([40, 7, 1], 4, 2, seed=5, device="cpu", variant="capture", padded_bs=4)
    launched = []
    monkeypatch.setattr(dispatch, "launch", lambda *a, **kw: launched.append(a))
    args = list(batch_args(b))
    from kdtree_lab.checks.capture_audit import CaptureAuditReport

    pending = CaptureAuditReport()
    args[6], args[7] = watch(b.kv_indices, "kv_indices", pending), watch(b.custom_mask, "custom_mask", pending)
    report = audit_capture(attn.run, *args, watch_shapes={"kv_indices": args[6], "custom_mask": args[7]})
    assert report.capture_safe, report.findings
    assert len(launched) == 1 and launched[0][0] == "triton" and launched[0][12] == attn.nsplit(4)
    assert launched[0][-1] is attn.workspace


@pytest.mark.parametrize("mask", ["tree", "causal"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_the_triton_twin_through_it_matches_the_oracle(mask, kv):
    b = build_verify_batch([57, 3], 4, 2, seed=9, device="cpu", mask=mask, kv_dtype=kv,
                           **({"k_scale": 0.75, "v_scale": 1.5} if kv == "fp8" else {}))
    attn = VerifyAttention(2, 4, 2, kv_dtype=kv, **CPU)
    args = list(batch_args(b))
    if mask == "causal":
        args[7], args[8] = None, None  # SGLang's causal call: no mask, no mask offsets
    assert attn.run(*args) is b.o
    assert within_tolerance(compare(b.o, reference(b))) and attn.status() == 0
    attn.clear_status()


def readme_example(marker: str = "VerifyAttention", lang: str = "python") -> str:
    from kdtree_lab.core.paths import ROOT

    text = (ROOT / "README.md").read_text()
    return text.split(f"<!-- example: {marker} -->\n```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_readme_gpu_example_is_five_lines():
    assert len(readme_example().strip().splitlines()) == 5, "the README promises five lines"


def _as_a_cpu_user(code: str, interpret: bool, lang: str) -> "subprocess.CompletedProcess":
    """``code`` run in a fresh process from the repository root, with no GPU visible and TRITON_INTERPRET only as
    the code sets it; the README's .venv/bin/python is this interpreter."""
    import os
    import subprocess
    import sys

    from kdtree_lab.core.paths import ROOT

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"CUDA_VISIBLE_DEVICES": ""}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    cmd = ["bash", "-c", code.replace(".venv/bin/python", sys.executable)] if lang == "bash" else [sys.executable,
                                                                                                  "-c", code]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_readme_cpu_example_runs_as_written():
    """README, "On a CPU": the shell block as a CPU user pastes it (no TRITON_INTERPRET beforehand)."""
    done = _as_a_cpu_user(readme_example("VerifyAttention on a CPU", "bash"), interpret=False, lang="bash")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("VerifyAttention(") and done.stdout.strip().endswith("status 0")


def test_the_readme_cpu_example_matches_the_oracle():
    """The CPU block's Python, in this process (the interpreter is on), against the fp64 oracle."""
    code = readme_example("VerifyAttention on a CPU", "bash").split("-c '", 1)[1].rsplit("'", 1)[0]
    scope = {}
    exec(compile(code.replace("print(", "(").strip(), "README.md", "exec"), scope)
    b = scope["b"]
    assert within_tolerance(compare(b.o, reference(b))) and scope["attn"].status() == 0


@pytest.mark.parametrize("which,interpret,last", [
    ("gpu", True, "ValueError: device: 'cuda' needs a CUDA GPU, found none here (torch "),
    ("cpu", False, "ValueError: impl: triton on a CPU needs Triton's interpreter, expected TRITON_INTERPRET=1"),
])
def test_the_readme_examples_fail_on_a_cpu_in_one_line_saying_what_to_do(which, interpret, last):
    """The five lines on a CPU, and the CPU block's Python without TRITON_INTERPRET=1: the last line says what to
    do, and no frame is torch's or Triton's (their own errors are pages about ATen_cuda and "0 active drivers")."""
    code = (readme_example() if which == "gpu"
            else readme_example("VerifyAttention on a CPU", "bash").split("-c '", 1)[1].rsplit("'", 1)[0])
    done = _as_a_cpu_user(code, interpret=interpret, lang="python")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(last), done.stderr
    assert "site-packages/torch" not in done.stderr and "site-packages/triton" not in done.stderr
    assert "TRITON_INTERPRET=1" in done.stderr.splitlines()[-1]
