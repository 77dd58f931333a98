"""The Triton twin against the fp64 oracle in Triton's CPU interpreter (or on the GPU when there is one)."""

import numpy as np
import pytest
import torch

from kdtree_lab.checks import parity
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.kernels import attention, dispatch, triton_verify

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_edge_grid():
    report = parity.run_parity("triton", parity.edge_cases(max_prefix=600, max_batch=48, heads=(2, 3), big_n=16),
                               DEVICE)
    assert report.ok, report.summary()


def test_fifty_random_cases():
    cases = parity.random_cases(50, np.random.default_rng(12345), max_prefix=600, max_batch=4, max_draft=8,
                                heads=(1, 2, 3), budget_tokens=20000)
    report = parity.run_parity("triton", cases, DEVICE)
    assert len(report.results) == 50 and report.ok, report.summary()


def test_interpreter_takes_the_fp32_dot_workaround():
    if DEVICE == "cuda":
        pytest.skip("GPU run: the interpreter workaround does not apply")
    assert triton_verify.interpreting(), "conftest sets TRITON_INTERPRET=1 without a GPU"


@pytest.mark.skipif(DEVICE == "cuda", reason="about Triton's CPU interpreter")
def test_interpreter_bf16_dot_is_still_broken():
    """If this fails, the interpreter's bf16 tl.dot works again and the UPCAST workaround can be dropped."""
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))

    a = torch.randn(16, 16).to(torch.bfloat16)
    b = torch.randn(16, 16).to(torch.bfloat16)
    c = torch.empty(16, 16)
    dot_kernel[(1,)](a, b, c)
    want = a.float() @ b.float()
    assert not torch.allclose(c, want, rtol=1e-2, atol=1e-2)


def test_harness_fails_a_wrong_mask():
    b = build_verify_batch([40, 9], 8, 2, mask="tree", seed=7, device=DEVICE)
    ref = reference(b)
    b.custom_mask = None  # the kernel now runs causally: wrong for a tree
    ws = dispatch.workspace(b.bs, 8, 2, 2, DEVICE)
    err = compare(triton_verify.verify(b, ws, 2), ref)
    assert not parity.within_tolerance(err)


def test_out_of_pool_index_sets_the_status_flag_and_stays_in_bounds():
    b = build_verify_batch([30], 4, 2, seed=1, device=DEVICE)
    b.kv_indices[5] = b.k_buffer.shape[0] + 100
    ws = dispatch.workspace(1, 4, 2, 2, DEVICE)
    triton_verify.verify(b, ws, 2)
    assert dispatch.read_status(ws) & 1
    assert torch.isfinite(b.o.float()).all()


def test_validate_mode():
    run = attention.output_fn("triton", nsplit=2)  # the registry's runner: a fresh workspace per call
    b = build_verify_batch([20, 3], 4, 2, seed=2, device=DEVICE)
    parity.validated(run, b, "validate")
    with pytest.raises(parity.ValidationError, match="request 1, draft node"):
        def corrupt(batch):
            out = run(batch)
            out[4 + 2, 1, 7] += 1.0  # request 1, node 2, head 1
            return out

        parity.validated(corrupt, build_verify_batch([20, 3], 4, 2, seed=3, device=DEVICE), "validate")
    off = build_verify_batch([20, 3], 4, 2, seed=4, device=DEVICE)
    assert compare(parity.validated(run, off, "off"), reference(off))["rel_l2"] < 5e-3
    with pytest.raises(ValueError, match="mode"):
        parity.validated(run, off, "maybe")


def test_workspace_too_small_is_refused():
    b = build_verify_batch([10], 4, 2, seed=0, device=DEVICE)
    with pytest.raises(ValueError, match="workspace"):
        triton_verify.verify(b, torch.zeros(16, dtype=torch.uint8, device=DEVICE), 2)


def test_parity_grid_is_the_edge_grid_then_random_draws():
    import numpy as np

    g = parity.grid(5, 3, max_prefix=600, max_batch=48, max_draft=16, heads=(2, 3), budget_tokens=20_000)
    edge = parity.edge_cases(max_prefix=600, max_batch=48, heads=(2, 3), big_n=16)
    rand = parity.random_cases(5, np.random.default_rng(3), max_prefix=600, max_batch=8, max_draft=16, heads=(2, 3),
                               budget_tokens=20_000)
    assert g == edge + rand
    assert parity.grid(5, 3, max_prefix=600, max_batch=48, max_draft=16, heads=(2, 3), budget_tokens=20_000,
                       edge=False) == rand


# fp8 (e4m3) KV pools, SGLang's --kv-cache-dtype fp8_e4m3 (issue 17): the twin reads e4m3 and applies k_scale to the
# prefix logits and v_scale to the prefix output; the oracle computes the same from the dequantised pool in fp64.

def test_fp8_pool_edge_grid_with_scales():
    cases = parity.fp8_cases(parity.edge_cases(max_prefix=300, max_batch=12, heads=(2,), big_n=8))
    assert all(c.kv_dtype == "fp8" for c in cases) and {c.k_scale for c in cases} >= {0.75, 2.0}
    report = parity.run_parity("triton", cases, DEVICE)
    assert report.ok, report.summary()


def test_fp8_pool_random_cases():
    cases = parity.fp8_cases(parity.random_cases(12, np.random.default_rng(8), max_prefix=400, max_batch=3,
                                                 max_draft=8, heads=(1, 2, 3), budget_tokens=12000))
    report = parity.run_parity("triton", cases, DEVICE)
    assert len(report.results) == 12 and report.ok, report.summary()


def test_fp8_scales_are_applied_where_sglang_applies_them():
    b = build_verify_batch([90, 20], 6, 2, mask="tree", seed=5, device=DEVICE, kv_dtype="fp8", k_scale=2.0,
                           v_scale=0.5)
    assert b.k_buffer.dtype == torch.float8_e4m3fn and b.v_buffer.dtype == torch.float8_e4m3fn
    ws = dispatch.workspace(b.bs, 6, 2, 2, DEVICE)
    out = triton_verify.verify(b, ws, 2).clone()
    assert parity.within_tolerance(compare(out, reference(b)))
    for k_scale, v_scale in ((1.0, 0.5), (2.0, 1.0)):  # a kernel that ignored either scale would match these
        b.k_scale, b.v_scale = k_scale, v_scale
        assert not parity.within_tolerance(compare(out, reference(b)))


def test_a_case_on_an_impl_that_does_not_serve_its_pool_is_refused_in_one_line():
    case = parity.Case("x", (5,), 2, 2)  # a bf16 pool
    with pytest.raises(ValueError, match="serves fp8 KV pools, not bf16"):
        parity.run_case("cuda_sm120_fp8", case, DEVICE)  # the sm_120 kernel's e4m3 variant reads fp8 pools only
