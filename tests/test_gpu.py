"""GPU tests (marker ``gpu``): the CUDA kernel and the Triton twin against the fp64 oracle on a real GPU.

Skipped without a CUDA GPU; a skip is reported as a skip, never counted as a pass."""

import numpy as np
import pytest
import torch

from kdtree_lab.checks import parity
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.contract.audit import ContractError
from kdtree_lab.kernels import abi, dispatch, loader, triton_verify
from kdtree_lab.kernels.impls import IMPLS
from kdtree_lab.kernels.launch_plan import E4M3_CONFIGS

pytestmark = pytest.mark.gpu
HEADS = (8, 16, 64, 128)


def test_cuda_edge_grid():
    report = parity.run_parity("cuda", parity.edge_cases(max_prefix=200_000, max_batch=48, heads=HEADS, big_n=64),
                               "cuda")
    assert report.ok, report.summary()


def test_cuda_500_random_cases():
    cases = parity.random_cases(500, np.random.default_rng(2026), max_prefix=200_000, max_batch=8, max_draft=64,
                                heads=HEADS, budget_tokens=100_000_000)
    report = parity.run_parity("cuda", cases, "cuda")
    assert len(report.results) == 500 and report.ok, report.summary()


@pytest.mark.parametrize("impl", ["cuda_sm120", "cuda_sm120_roles"])
def test_sm120_kernel_edge_grid_and_500_random(impl):
    """The sm_120 configurations, forced on this GPU over every shape (the first kernel, verify_sm120_kernel<32,2>,
    and its second generation, verify_sm120_roles_kernel<64>, each beyond the rows automatic selection gives it):
    edge grid + 500 random against the fp64 oracle."""
    report = parity.run_parity(impl, parity.gpu_grid(500, seed=120, heads=HEADS), "cuda")
    assert len(report.results) > 500 and report.ok, report.summary()


@pytest.mark.parametrize("impl", ["cuda", "cuda_sm120", "cuda_sm120_fp8", "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"])
def test_fp8_pool_edge_grid_and_500_random(impl):
    """SGLang's fp8_e4m3 pool with (k_scale, v_scale) other than 1, on the configuration this GPU selects (v5 here,
    whose fp8 pools run v4's exact e4m3 variant), on the sm_120 kernel forced (automatic fp8 math at its 32-row
    tile: the exact variant), that exact variant and the e4m3 tensor-core configurations (64- and 32-row CTAs, at
    e4m3's tolerance), each forced: the GPU grid against the fp64 oracle of the dequantised pool."""
    report = parity.run_parity(impl, parity.fp8_cases(parity.gpu_grid(500, seed=817, heads=HEADS)), "cuda")
    assert len(report.results) > 500 and report.ok, report.summary()
    assert all(r.case.kv_dtype == "fp8" for r in report.results)


@pytest.mark.parametrize("impl", ["cuda_sm120_e4m3", "cuda_sm120_e4m3_32", "cuda_sm120_roles"])
def test_splits_of_one_to_eight_key_tiles(impl):
    """Every ring depth a split can end at: prefixes of 1 to 8 key tiles (32 keys each) and one key either side in
    one split, and 2 to 8 tiles a split in three (the last split 5 keys short), over fp8 pools for the e4m3 forms and
    bf16 for the role split, on a seed drawn fresh each run (in each case's name), against the fp64 oracle."""
    import os

    seed = int.from_bytes(os.urandom(4), "little")
    tile, kv = 32, "bf16" if impl == "cuda_sm120_roles" else "fp8"
    cases = []
    for t in range(1, 9):
        for n, h in ((16, 8), (4, 8)) if impl != "cuda_sm120_e4m3_32" else ((4, 8), (2, 16)):
            cases.append(parity.Case(f"tiles{t}_N{n}_H{h}_seed{seed}", (tile * t - 1, tile * t, tile * t + 1), n, h,
                                     nsplit=1, seed=seed + t))
            if t > 1:  # a split covers at least 64 keys (MIN_SPLIT_TOKENS)
                cases.append(parity.Case(f"tiles{t}x3_N{n}_H{h}_seed{seed}", (3 * tile * t - 5,), n, h, nsplit=3,
                                         seed=seed + 100 + t))
    if kv == "fp8":
        cases = parity.fp8_cases(cases)
    report = parity.run_parity(impl, cases, "cuda")
    assert len(report.results) == 30 and report.ok, report.summary()


@pytest.mark.parametrize("variant", ["cuda_sm120_fp8", "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"])
def test_a_pool_the_forced_configuration_does_not_read_is_refused_in_one_line(variant):
    """Every bf16 configuration reads fp8 pools (through its e4m3 variants); a bf16 pool on a forced fp8-only
    configuration is refused as a dtype error: the launcher says so and writes nothing, and the GPU stays usable."""
    bf = build_verify_batch([300], 4, 8, seed=1, device="cuda")
    ws = dispatch.workspace(1, 4, 8, 4)
    with loader.impl_config(variant), pytest.raises(loader.KernelCallError, match="dtype"):
        loader.verify(bf, ws, 4)
    assert torch.isnan(bf.o.float()).all(), "nothing was written"
    out = loader.verify(bf, ws, 4)  # the GPU is usable after the refusal: the same batch, automatic selection
    assert parity.within_tolerance(compare(out, reference(bf)))


def test_triton_gpu_edge_grid_and_random():
    report = parity.run_parity("triton", parity.gpu_grid(100, seed=7, heads=HEADS), "cuda")
    assert report.ok, report.summary()


def test_cuda_and_triton_agree():
    b = build_verify_batch([4096, 777, 1], 16, 8, seed=11, device="cuda")
    ws = dispatch.workspace(b.bs, 16, 8, 16)
    cuda_out = loader.verify(b, ws, 16).clone()
    b.o.fill_(float("nan"))
    tws = dispatch.workspace(b.bs, 16, 8, 16, "cuda")
    triton_out = triton_verify.verify(b, tws, 16)
    assert compare(cuda_out, triton_out.double())["rel_l2"] < 1e-2


def test_out_of_pool_index_sets_flag_and_gpu_stays_usable():
    b = build_verify_batch([300], 4, 8, seed=1, device="cuda")
    b.kv_indices[7] = b.k_buffer.shape[0] + 10_000_000
    ws = dispatch.workspace(1, 4, 8, 4)
    loader.verify(b, ws, 4)
    assert dispatch.read_status(ws) & abi.FLAG_INDEX_OUT_OF_POOL
    dispatch.clear_status(ws)
    good = build_verify_batch([300], 4, 8, seed=2, device="cuda")
    out = loader.verify(good, ws, 4)
    assert dispatch.read_status(ws) == 0
    assert parity.within_tolerance(compare(out, reference(good)))


@pytest.mark.parametrize("impl", ["cuda", "cuda_sm120", "cuda_sm120_roles", "cuda_wgmma", "cuda_wgmma_v5",
                                  "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"])
def test_corrupt_kv_indptr_sets_flag_in_every_configuration(impl):
    """A request whose kv_indptr end is before its start raises KDT_FLAG_KV_INDPTR (its prefix is read as empty, no
    slot outside its range is touched) in every configuration, and the other request is served exactly (the e4m3
    tensor-core configuration over an fp8 pool, at e4m3's tolerance)."""
    fp8 = IMPLS[impl].kv_dtypes == ("fp8",)  # an fp8-only configuration: over an fp8 pool
    b = build_verify_batch([300, 200], 4, 8, seed=5, device="cuda", **({"kv_dtype": "fp8"} if fp8 else {}))
    good = b.kv_indptr.clone()
    b.kv_indptr[1], b.kv_indptr[2] = 300, 250  # request 1: end 250 before its start 300
    ws = dispatch.workspace(2, 4, 8, 4)
    with loader.impl_config(impl):
        out = loader.verify(b, ws, 4)
    torch.cuda.synchronize()
    assert dispatch.read_status(ws) & abi.FLAG_KV_INDPTR, impl
    b.kv_indptr.copy_(good)
    rows = 4  # request 0's draft rows: its prefix and draft block are intact
    e4m3 = IMPLS[impl].kernel in E4M3_CONFIGS
    assert parity.within_tolerance(compare(out[:rows], reference(b)[:rows]), e4m3=e4m3), impl


def test_bad_input_is_refused_before_launch():
    b = build_verify_batch([100], 4, 8, seed=3, device="cuda")
    small = torch.zeros(64, dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="workspace: expected at least"):
        loader.verify(b, small, 4)
    b.kv_indices = b.kv_indices.to(torch.int32)
    ws = dispatch.workspace(1, 4, 8, 4)
    with pytest.raises(ValueError, match="kv_indices: expected int64"):
        loader.verify(b, ws, 4)
    with pytest.raises(ContractError, match="kv_indices"):
        loader.verify(b, ws, 4, checked=True)
    assert torch.isnan(b.o.float()).all(), "nothing was written"


def test_launches_on_the_current_stream():
    b = build_verify_batch([5000, 3], 8, 8, seed=4, device="cuda")
    ws = dispatch.workspace(b.bs, 8, 8, 8)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        loader.verify(b, ws, 8)
    side.synchronize()
    assert parity.within_tolerance(compare(b.o, reference(b)))


def test_cuda_graph_capture_and_replay_with_fresh_data():
    b = build_verify_batch([2000, 1, 64], 8, 16, variant="capture", padded_bs=4, seed=5, device="cuda")
    ws = dispatch.workspace(b.bs, 8, 16, 8)
    for _ in range(2):
        loader.verify(b, ws, 8)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        torch.ops.kdtree_lab.verify(b.q, b.k_extend, b.v_extend, b.o, b.k_buffer, b.qo_indptr, b.kv_indptr,
                                    b.kv_indices, b.custom_mask, b.mask_indptr, b.max_extend_len, 8, b.sm_scale,
                                    b.k_scale, b.v_scale, ws)
    for seed in range(3):
        fresh = build_verify_batch([2000, 1, 64], 8, 16, variant="capture", padded_bs=4, seed=100 + seed,
                                   device="cuda")
        for name in ("q", "k_extend", "v_extend", "k_buffer"):
            getattr(b, name).copy_(getattr(fresh, name))
        b.o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        rows = 3 * 8
        assert parity.within_tolerance(compare(b.o[:rows], reference(b)[:rows]))


def test_the_readme_example_runs_as_written():
    """README, "Calling the kernel from another engine": the five lines on this GPU, against the fp64 oracle."""
    from test_attention import readme_example

    scope = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)
    b, attn = scope["b"], scope["attn"]
    assert parity.within_tolerance(compare(b.o, reference(b))) and attn.status() == 0


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_verify_attention_plans_what_the_launcher_runs(kv):
    """The plan's configuration for every batch size is the one the launcher selects on this GPU for that pool, and
    its split count the rule's at that configuration's row tile."""
    from kdtree_lab.kernels.attention import VerifyAttention
    from kdtree_lab.kernels.launch_plan import default_nsplit

    attn = VerifyAttention(48, 16, 8, kv_dtype=kv)
    running = loader.library().selected_config(kv=kv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for bs in range(1, 49):
        assert attn.config(bs).name == running["kernel"] and attn.config(bs).block_m == running["block_m"]
        assert attn.nsplit(bs) == default_nsplit(bs, 16, 8, sms, running["block_m"], cluster=running["cluster"])


def test_verify_attention_captured_and_replayed_with_fresh_data():
    from kdtree_lab.kernels.attention import VerifyAttention, batch_args

    b = build_verify_batch([2000, 1, 64], 8, 16, variant="capture", padded_bs=4, seed=5, device="cuda", pool_size=3000)
    attn = VerifyAttention(8, 8, 16, batch_sizes=(4,))
    for _ in range(2):
        attn.run(*batch_args(b))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        attn.run(*batch_args(b))
    fresh = build_verify_batch([1500, 500, 3], 8, 16, variant="capture", padded_bs=4, seed=6, device="cuda",
                               pool_size=3000)  # fewer tokens than b: its index and mask buffers hold them
    for name in ("q", "k_extend", "v_extend", "k_buffer", "qo_indptr", "kv_indptr", "mask_indptr"):
        getattr(b, name).copy_(getattr(fresh, name))
    b.kv_indices[: fresh.kv_indices.numel()].copy_(fresh.kv_indices)
    b.custom_mask[: fresh.custom_mask.numel()].copy_(fresh.custom_mask)
    b.o.fill_(float("nan"))
    g.replay()
    rows = fresh.live_bs * 8
    assert parity.within_tolerance(compare(b.o[:rows], reference(fresh)[:rows]))
