"""GPU: capture at SGLang's 23 sizes, replay parity, calls back to back in one graph, the in-graph validate mode, the
audit of the real call."""

import pytest
import torch

from kdtree_lab.checks.capture_plants import planted_findings
from kdtree_lab.checks.graphs import (
    GraphConfig,
    VerifyGraphRunner,
    audit_verify_call,
    chained_calls,
    pool_fields,
    replay_parity,
    validate_in_graph,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def runner():
    r = VerifyGraphRunner(GraphConfig(max_bs=48, num_draft=16, num_heads=8, ctx=512))
    r.capture()
    return r


def test_all_23_sizes_capture_and_replay_without_mismatch(runner):
    assert sorted(runner.graphs) == GraphConfig().capture_sizes[::-1]
    rep = replay_parity(runner, replays=100, oracle_every=5, time_iters=5)
    assert rep.ok, rep.failures[:5]


@pytest.mark.parametrize("impl, block_m", [("cuda_sm120", 32), ("cuda_sm120_roles", 64)])
def test_sm120_kernel_all_23_sizes_capture_and_replay_without_mismatch(impl, block_m):
    """The sm_120 configurations, forced (the first kernel and its second generation): the same 23 sizes x 100
    fresh replays."""
    r = VerifyGraphRunner(GraphConfig(max_bs=48, num_draft=16, num_heads=8, ctx=512, impl=impl))
    r.capture()
    assert r.block_m == block_m and sorted(r.graphs) == GraphConfig().capture_sizes[::-1]
    rep = replay_parity(r, replays=100, oracle_every=5, time_iters=5)
    assert rep.ok, rep.failures[:5]


@pytest.mark.parametrize("impl", ["cuda", "cuda_sm120", "cuda_sm120_fp8", "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"])
def test_fp8_pool_all_23_sizes_capture_and_replay_without_mismatch(impl):
    """An fp8_e4m3 pool (scales other than 1, captured as constants): the 23 sizes x 100 fresh replays (cuda_sm120
    at these 128 rows under automatic fp8 math runs its exact variant cuda_sm120_fp8, as forced here too; and the e4m3
    tensor-core configuration forced)."""
    r = VerifyGraphRunner(GraphConfig(max_bs=48, num_draft=16, num_heads=8, ctx=512, impl=impl, **pool_fields("fp8")))
    r.capture()
    assert r.k_buffer.dtype == torch.float8_e4m3fn and sorted(r.graphs) == GraphConfig().capture_sizes[::-1]
    rep = replay_parity(r, replays=100, oracle_every=5, time_iters=5)
    assert rep.ok, rep.failures[:5]


@pytest.mark.parametrize("impl, kv", [
    ("cuda", "bf16"), ("cuda_sm120", "bf16"), ("cuda_sm120_roles", "bf16"), ("cuda_wgmma", "bf16"),
    ("cuda", "fp8"), ("cuda_sm120_fp8", "fp8"), ("cuda_sm120_e4m3", "fp8"), ("cuda_sm120_e4m3_32", "fp8"),
])
def test_calls_back_to_back_in_one_graph_share_the_workspace_safely(impl, kv):
    """Five calls in one graph through one workspace (short and long prefixes, B = 1: the split counts of a short
    call), 20 replays with fresh Q: each output bit for bit that of the same call alone, and within tolerance of
    the oracle; no status flag."""
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    rep = chained_calls(impl, kv, seed=seed)
    assert rep.ok, (f"seed {seed}", rep.flags, rep.failures[:5])
    assert rep.worst_rel_l2 > 0, "the outputs were compared"


def test_captured_call_is_capture_safe(runner):
    rep = audit_verify_call(runner, 48)
    assert rep.capture_safe, rep.table()


def test_validate_inside_graph_catches_a_planted_error():
    rows = validate_in_graph(GraphConfig(max_bs=8, num_draft=16, num_heads=8, ctx=512), sizes=(1, 8))
    assert all(r["clean_ok"] for r in rows), rows
    assert all(r["planted_caught"] for r in rows), rows


def test_audit_flags_item_and_default_stream_launch_on_gpu():
    rows = {r["expected"]: r for r in planted_findings("cuda")}
    assert rows["host-sync"]["caught"] and rows["stream"]["caught"]


def test_host_validate_mode_refuses_under_capture():
    from kdtree_lab.checks import parity
    from kdtree_lab.checks.batch import build_verify_batch

    b = build_verify_batch([10], 2, 2, device="cuda")
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="cannot run under CUDA graph capture"):
        with torch.cuda.graph(g):
            parity.validated(lambda x: x.o, b, "validate")
