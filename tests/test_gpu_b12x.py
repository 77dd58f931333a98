"""GPU: the b12x peer's adapter (kdtree_lab/checks/b12x.py) against the fp64 attention over its layout and against
b12x's own reference, on ragged batches over both pools and both page sizes, before and after graph replays. Needs
b12x and its CuTe DSL libraries (scripts/fetch_b12x.sh, scripts/b12x_session.sh on the device); skipped, never
passed, without them."""

import random

import pytest
import torch

from kdtree_lab.checks import b12x
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare
from kdtree_lab.checks.parity import within_tolerance

pytestmark = pytest.mark.gpu
MODULE, ERROR = b12x.load()
if MODULE is None:
    pytest.skip(f"b12x does not import here: {ERROR}", allow_module_level=True)


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize("page", [1, 64])
@pytest.mark.parametrize("mask, n", [("chain", 4), ("causal", 1), ("chain", 7)])
def test_b12x_matches_the_attention_over_its_layout_on_ragged_batches(kv, page, mask, n):
    seed = random.SystemRandom().randrange(2**31)  # fresh data each run, named in every message
    batch = build_verify_batch([3000, 17, 700], n, 8, mask=mask, seed=seed, device="cuda", kv_dtype=kv,
                               k_scale=0.75, v_scale=0.75)
    call = b12x.prepare(MODULE, b12x.paged(batch, page=page, seed=seed + 1))
    assert torch.isnan(call.out).all()  # poisoned before it runs
    out = call.run().clone()
    ref = b12x.reference(call.paged)
    err = compare(out, ref)
    assert within_tolerance(err, e4m3=kv == "fp8"), (seed, err)
    from b12x.attention.dense_mla._reference import dense_mla_reference  # b12x's own oracle of the same call

    p = call.paged
    theirs, _ = dense_mla_reference(p.q, p.cache, p.table, p.seqlens, sm_scale=p.sm_scale, **b12x.row_inputs(p))
    assert compare(theirs, ref)["rel_l2"] < 0.01, seed  # our oracle of b12x's call is b12x's own
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call.run()
    call.out.fill_(float("nan"))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert within_tolerance(compare(call.out, ref), e4m3=kv == "fp8"), seed
