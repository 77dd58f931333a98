"""GPU: the hook against SGLang's own extend_attention_fwd on identical buffers, eager and in graph replays."""

import pytest
import torch

from kdtree_lab.checks import parity, sglang_kernels
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.checks.parity import within_tolerance
from kdtree_lab.sglang import hook as sglang_hook

pytestmark = pytest.mark.gpu
extend_attention = pytest.importorskip("sglang.kernels.ops.attention.extend_attention")


@pytest.fixture(autouse=True, params=["cuda", "cuda_sm120", "cuda_sm120_roles"])
def impl(request):
    """Every test three times: the configuration this GPU selects, and the two sm_120 configurations forced (what
    sm_120 runs: the first kernel for rows <= 32, its second generation above; over an fp8 pool both run the e4m3
    tensor-core configuration under automatic fp8 math)."""
    from kdtree_lab.kernels import loader

    with loader.impl_config(request.param):
        yield request.param


def _call(hook, b):
    return hook(*b.extend_attention_args(), 1.0, 1.0, b.sm_scale, max_bs=hook.max_bs)


@pytest.mark.parametrize("variant", ["eager", "capture"])
@pytest.mark.parametrize("mask", ["tree", "chain", "causal"])
def test_hook_matches_sglang(variant, mask):
    b = build_verify_batch([3000, 17, 1], 8, 16, variant=variant, mask=mask,
                           padded_bs=4 if variant == "capture" else None, seed=hash((variant, mask)) % 1000,
                           device="cuda")
    hook = sglang_hook.VerifyHook("on", max_bs=8, num_draft=8, num_heads=16)
    assert _call(hook, b) is True
    ours = b.o.clone()
    theirs = sglang_kernels.extend_attention(b, torch.full_like(b.o, float("nan")))
    rows = b.live_bs * 8
    ref = reference(b)[:rows]
    assert compare(ours[:rows], theirs[:rows])["rel_l2"] < 1e-2
    assert within_tolerance(compare(ours[:rows], ref)) and within_tolerance(compare(theirs[:rows], ref))


@pytest.mark.parametrize("shape", [(8, 16), (4, 8)], ids=["128rows", "32rows"])
@pytest.mark.parametrize("variant", ["eager", "capture"])
@pytest.mark.parametrize("mask", ["tree", "chain", "causal"])
def test_hook_serves_fp8_pools_like_sglang(variant, mask, shape):
    """An fp8_e4m3 pool with k_scale, v_scale other than 1: the hook serves it (no fall-back) and lands within the
    oracle's tolerance of the dequantised pool; SGLang's kernel downcasts Q and P to e4m3 for the prefix
    (data/contracts/sglang-0.5.23-fp8-kv.yaml), so the two differ by about SGLang's own distance to the oracle, and
    ours stays within parity.within_sglang_error of it (not below it on every case: issue 51).
    128 rows (8 nodes x 16 heads) and 32 (a chain of 4 at 8 heads, what the 32-row configurations run)."""
    n, h = shape
    b = build_verify_batch([3000, 17, 1], n, h, variant=variant, mask=mask,
                           padded_bs=4 if variant == "capture" else None, seed=hash((variant, mask, n)) % 1000,
                           device="cuda", kv_dtype="fp8", k_scale=0.75, v_scale=1.5)
    hook = sglang_hook.VerifyHook("on", max_bs=8, num_draft=n, num_heads=h, kv_dtype="fp8")
    assert hook(*b.extend_attention_args(), b.k_scale, b.v_scale, b.sm_scale, max_bs=8) is True
    assert hook.stats.fell_back == 0
    ours = b.o.clone()
    theirs = sglang_kernels.extend_attention(b, torch.full_like(b.o, float("nan")))
    rows = b.live_bs * n
    ref = reference(b)[:rows]
    mine, sglang_err = compare(ours[:rows], ref), compare(theirs[:rows], ref)
    print(f"fp8 {variant} {mask} {n}x{h}: ours vs oracle {mine['rel_l2']:.2e}, SGLang vs oracle {sglang_err['rel_l2']:.2e}")
    assert within_tolerance(mine, hook.attn.e4m3_math)
    assert parity.within_sglang_error(mine["rel_l2"], sglang_err["rel_l2"])  # 1.5x SGLang's + 2^-8: 3x fails
    gap = compare(ours[:rows], theirs[:rows])["rel_l2"]
    assert gap <= parity.SGLANG_GAP_FACTOR * sglang_err["rel_l2"] + parity.REL_L2_TOL


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_kernel_against_sglang_on_the_gpu_grid(impl, kv):
    """Issue 17's parity: the edge grid + 100 random cases (both variants; tree, chain, causal; fp8 with scales
    other than 1) against SGLang's own extend_attention_fwd on the same pool, and both against the fp64 oracle."""
    cases = parity.gpu_grid(100, seed=1717, heads=(8, 16, 64, 128))
    rows = parity.against_sglang(impl, parity.fp8_cases(cases) if kv == "fp8" else cases)
    bad = [r for r in rows if not r["ok"]]
    assert len(rows) > 100 and not bad, bad[:3]
    assert {r["variant"] for r in rows} == {"eager", "capture"} and {"tree", "chain", "causal"} <= {r["mask"] for r in rows}


def test_validate_mode_writes_sglangs_output_and_checks():
    b = build_verify_batch([2048, 5], 4, 8, seed=3, device="cuda")
    hook = sglang_hook.VerifyHook("validate", max_bs=4, num_draft=4, num_heads=8)
    assert _call(hook, b) is True
    theirs = sglang_kernels.extend_attention(b, torch.empty_like(b.o))
    assert torch.equal(b.o, theirs), "validate mode keeps SGLang's output"
    strict = sglang_hook.VerifyHook("validate", max_bs=4, num_draft=4, num_heads=8, tol=1e-9)
    with pytest.raises(sglang_hook.ValidationFailed, match="differs from SGLang"):
        _call(strict, b)


@pytest.mark.parametrize("mode", ["on", "validate"])
@pytest.mark.parametrize("mask", ["tree", "chain", "causal"])
def test_hook_inside_captured_graphs(mode, mask):
    for bs in (1, 4, 8):
        b = build_verify_batch([500] * bs, 4, 8, variant="capture", padded_bs=bs, seed=bs, device="cuda",
                               pool_size=8 * 600, mask=mask)
        hook = sglang_hook.VerifyHook(mode, max_bs=8, num_draft=4, num_heads=8)
        for _ in range(2):
            _call(hook, b)  # warm-up: Triton compiles before capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            _call(hook, b)
        for k in range(3):
            fresh = build_verify_batch([500 - 37 * k] * bs, 4, 8, variant="capture", padded_bs=bs, seed=100 + k,
                                       device="cuda", pool_size=8 * 600, mask=mask)
            for name in ("q", "k_extend", "v_extend", "k_buffer", "kv_indptr", "mask_indptr"):
                getattr(b, name).copy_(getattr(fresh, name))
            b.kv_indices[: fresh.kv_indices.numel()].copy_(fresh.kv_indices)
            if mask != "causal":
                b.custom_mask[: fresh.custom_mask.numel()].copy_(fresh.custom_mask)
            b.o.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            if mode == "validate":
                assert hook.check() <= sglang_hook.VALIDATE_TOL
            theirs = sglang_kernels.extend_attention(b, torch.empty_like(b.o))
            assert compare(b.o, theirs)["rel_l2"] < 1e-2


def test_causal_call_without_mask_buffers_is_served_like_sglang():
    """SGLang's extend_attention_fwd accepts custom_mask=None, mask_indptr=None for a causal call; so does the hook."""
    b = build_verify_batch([3000, 17, 1], 8, 16, mask="causal", seed=5, device="cuda")
    hook = sglang_hook.VerifyHook("on", max_bs=8, num_draft=8, num_heads=16)
    args = list(b.extend_attention_args())
    assert hook(*args[:9], None, True, None, *args[12:], 1.0, 1.0, b.sm_scale, max_bs=8) is True
    ours = b.o.clone()
    theirs = torch.full_like(b.o, float("nan"))
    extend_attention.extend_attention_fwd(b.q, b.k_extend, b.v_extend, theirs, b.k_buffer, b.v_buffer, b.qo_indptr,
                                          b.kv_indptr, b.kv_indices, None, True, None, b.max_extend_len, 1.0, 1.0,
                                          sm_scale=b.sm_scale)
    rows = b.live_bs * 8
    assert compare(ours[:rows], theirs[:rows])["rel_l2"] < 1e-2


@pytest.mark.parametrize("extra,served", [
    ({"identity_kv_indices": False, "extend_seq_lens_cpu": [8, 8, 8]}, True),  # hints: served
    ({"page_size": 16}, False), ({"lse_extend": "a buffer"}, False), ({"skip_prefix_custom_mask": False}, False),
])
def test_sglang_keyword_arguments_reach_the_decision(extra, served):
    """The backend's keyword arguments are forwarded to the fall-back decision: a value the kernel does not serve
    leaves o untouched and returns False (SGLang then runs its own kernel)."""
    b = build_verify_batch([700, 9, 1], 8, 16, seed=5, device="cuda")
    hook = sglang_hook.VerifyHook("on", max_bs=8, num_draft=8, num_heads=16)
    b.o.fill_(float("nan"))
    assert hook(*b.extend_attention_args(), 1.0, 1.0, b.sm_scale, max_bs=8, **extra) is served
    if served:
        theirs = sglang_kernels.extend_attention(b, torch.empty_like(b.o))
        rows = b.live_bs * 8
        assert compare(b.o[:rows], theirs[:rows])["rel_l2"] < 1e-2
    else:
        assert torch.isnan(b.o).all() and hook.stats.fell_back == 1
