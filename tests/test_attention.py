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
    (dict(impl="cuda_rows32", kv_dtype="fp8"), "kv_dtype: impl cuda_rows32 serves bf16 KV pools, not fp8"),
    (dict(nsplit=600), "nsplit: expected 0 .* or 1..512, found 600"),
    (dict(batch_sizes=(1, 9)), r"batch_sizes: expected sizes in 1..max_bs=8, found \[1, 9\]"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, needle):
    args = dict(max_bs=8, num_draft=16, num_heads=8, **CPU) | kwargs
    with pytest.raises(ValueError, match=needle) as err:
        VerifyAttention(**args)
    assert "\n" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a CUDA impl without a GPU")
def test_a_cuda_implementation_without_a_gpu_is_refused():
    with pytest.raises(ValueError, match="device: impl cuda runs on a CUDA GPU, found cpu .*impl triton runs on a CPU"):
        VerifyAttention(8, 16, 8, device="cpu")


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


def readme_example() -> str:
    from kdtree_lab.core.paths import ROOT

    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- example: VerifyAttention -->\n```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) == 5, "the README promises five lines"
    return block


def test_the_readme_example_runs_on_the_cpu_through_the_triton_twin():
    """The README's five lines with the CUDA device swapped for the CPU and the Triton twin (as it says), over
    shorter prefixes (the interpreter takes a minute over the README's)."""
    code = readme_example().replace('device="cuda")  #', 'device="cpu")  #').replace("[4096, 900]", "[70, 9]")
    code = code.replace('kv_dtype="bf16", device="cuda")', 'kv_dtype="bf16", device="cpu", impl="triton")')
    assert code.count('"cpu"') == 2 and "[70, 9]" in code
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    b = scope["b"]
    assert within_tolerance(compare(b.o, reference(b))) and scope["attn"].status() == 0
