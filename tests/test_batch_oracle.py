"""The verify-batch builder and the fp64 oracle: a hand-computed case, properties, and an independent check."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.contract.audit import audit
from kdtree_lab.core.tree import chain


def _naive(batch):
    """Row by row, straight from the definition (prefix via kv_indices, draft block via the mask)."""
    out = torch.zeros(batch.q.shape[0], batch.q.shape[1], 512, dtype=torch.float64)
    kv, mi, qo = batch.kv_indptr.tolist(), batch.mask_indptr.tolist(), batch.qo_indptr.tolist()
    for b in range(batch.bs):
        n, L = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        for i in range(n):
            for h in range(batch.q.shape[1]):
                q = batch.q[qo[b] + i, h].double()
                logits, values = [], []
                for t in range(L):
                    row = batch.k_buffer[int(batch.kv_indices[kv[b] + t]), 0].double()
                    logits.append(float(q @ row) * batch.sm_scale * batch.k_scale)
                    values.append(row[:512] * batch.v_scale)
                for j in range(n):
                    if batch.custom_mask is None:
                        vis = j <= i
                    else:
                        vis = bool(batch.custom_mask[mi[b] + i * (L + n) + L + j])
                    if vis:
                        logits.append(float(q @ batch.k_extend[qo[b] + j, 0].double()) * batch.sm_scale)
                        values.append(batch.v_extend[qo[b] + j, 0].double())
                w = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
                out[qo[b] + i, h] = sum(wk * v for wk, v in zip(w, values))
    return out


def test_hand_computed_tiny_case():
    b = build_verify_batch([1], 2, 1, mask="chain", seed=0)
    slot = int(b.kv_indices[0])
    # Make every logit known: q = e0, prefix row = [2, ...], draft rows = [0, ...] and [1, ...].
    b.q.zero_(); b.q[:, 0, 0] = 1.0
    b.k_buffer[slot, 0].zero_(); b.k_buffer[slot, 0, 0] = 2.0; b.k_buffer[slot, 0, 1] = 7.0  # V col 1 = 7
    b.k_extend.zero_(); b.k_extend[1, 0, 0] = 1.0
    b.v_extend.zero_(); b.v_extend[0, 0, 1] = 1.0; b.v_extend[1, 0, 1] = 3.0
    b.sm_scale = 1.0
    out = reference(b)
    # node 0 sees prefix (logit 2) and itself (logit 0); node 1 sees prefix (2), node 0 (0), itself (1)
    e2, e0, e1 = math.exp(2), 1.0, math.exp(1)
    assert out[0, 0, 1].item() == pytest.approx((7 * e2 + 1 * e0) / (e2 + e0))
    assert out[1, 0, 1].item() == pytest.approx((7 * e2 + 1 * e0 + 3 * e1) / (e2 + e0 + e1))


def test_oracle_matches_naive_definition_with_scales():
    b = build_verify_batch([3, 5], 3, 2, mask="tree", seed=3, v_extend_from_k=False)
    b.k_scale, b.v_scale = 0.7, 1.3
    err = compare(reference(b), _naive(b))
    assert err["max_abs"] < 1e-9


def test_causal_equals_chain_mask():
    a = build_verify_batch([9, 4], 4, 2, mask="causal", seed=1)
    c = build_verify_batch([9, 4], 4, 2, mask="chain", seed=1)
    assert a.custom_mask is None and c.custom_mask is not None
    assert torch.equal(reference(a), reference(c))


def test_pool_permutation_does_not_change_output():
    b = build_verify_batch([50, 7], 4, 2, seed=2)
    ref = reference(b)
    perm = torch.randperm(b.k_buffer.shape[0] - 1) + 1
    new_pool = b.k_buffer.clone()
    new_pool[perm] = b.k_buffer[1:]
    inv = torch.zeros(b.k_buffer.shape[0], dtype=torch.int64)
    inv[1:] = perm
    b.kv_indices = inv[b.kv_indices]
    b.k_buffer = new_pool
    b.v_buffer = new_pool[..., :512]
    assert compare(reference(b), ref)["max_abs"] < 1e-12


def test_wrong_mask_changes_output():
    b = build_verify_batch([20, 30], 8, 2, mask="tree", seed=4)
    ref = reference(b)
    b.custom_mask = None
    assert compare(reference(b), ref)["rel_l2"] > 0.01


@settings(max_examples=30, deadline=None)
@given(lens=st.lists(st.integers(1, 40), min_size=1, max_size=5), n=st.integers(1, 8), h=st.integers(1, 3),
       variant=st.sampled_from(["eager", "capture"]), mask=st.sampled_from(["tree", "chain", "causal"]),
       pad=st.integers(0, 2), seed=st.integers(0, 1000))
def test_builder_properties(lens, n, h, variant, mask, pad, seed):
    b = build_verify_batch(lens, n, h, variant=variant, mask=mask, seed=seed,
                           padded_bs=len(lens) + pad if variant == "capture" else None)
    report = audit(b.buffers(), variant=variant)
    assert report.ok, report.mismatches()
    assert b.bs == (len(lens) + pad if variant == "capture" else len(lens))
    assert b.prefix_lens[len(lens):] == [1] * (b.bs - len(lens))
    kv = b.kv_indptr.tolist()
    for r in range(len(lens), b.bs):  # padded rows: prefix length 1 at slot 0
        assert int(b.kv_indices[kv[r]]) == 0
    live = b.kv_indices[: kv[len(lens)]]
    assert live.numel() == len(set(live.tolist())) and int(live.min()) >= 1, "live slots distinct, never slot 0"
    assert torch.isnan(b.o.float()).all(), "outputs are poisoned"
    out = reference(b)
    assert torch.isfinite(out).all()
    if len(lens) == 1 and n <= 3 and h == 1:
        assert compare(out, _naive(b))["max_abs"] < 1e-9


def test_builder_refuses_bad_input():
    with pytest.raises(ValueError, match="prefix_lens"):
        build_verify_batch([0], 2, 1)
    with pytest.raises(ValueError, match="padded_bs"):
        build_verify_batch([3, 4], 2, 1, variant="capture", padded_bs=1)
    with pytest.raises(ValueError, match="variant"):
        build_verify_batch([3], 2, 1, variant="graph")
    with pytest.raises(ValueError, match="trees"):
        build_verify_batch([3], 2, 1, trees=[chain(3)])
