"""Every contract invariant has a failing example; the enforcing audit names every mismatch."""

import pytest
import torch

from kdtree_lab.checks.audit_plants import planted_mismatches
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.contract.audit import ContractError, WorkspaceSpec, audit
from kdtree_lab.contract.spec import load_contract


def _eager():
    return build_verify_batch([6, 11, 2], 4, 2, variant="eager", seed=0)


def _capture():
    return build_verify_batch([6, 11, 2], 4, 2, variant="capture", padded_bs=5, seed=0)


def _failed(report):
    return {i.name for i in report.invariants if not i.ok}


def test_good_batches_pass_both_variants():
    assert audit(_eager().buffers(), variant="eager").ok
    assert audit(_capture().buffers(), variant="capture").ok


def test_contract_lists_every_buffer_the_issue_names():
    c = load_contract()
    for name in ("q", "k_extend", "v_extend", "o", "k_buffer", "v_buffer", "qo_indptr", "kv_indptr", "kv_indices",
                 "custom_mask", "mask_indptr"):
        assert name in c.buffers
    assert c.buffers["qo_indptr"].dtypes == {"eager": ["int32"], "capture": ["int64"]}
    assert c.buffers["custom_mask"].dtypes["capture"] == ["uint8"]
    assert set(c.scalars) == {"max_extend_len", "sm_scale", "k_scale", "v_scale"}
    assert len(c.capture_sizes) == 23


def test_same_device():
    b = _eager()
    bufs = b.buffers() | {"q": b.q.to("meta")}
    assert "same_device" in _failed(audit(bufs, variant="eager"))


def test_qo_indptr_uniform():
    b = _eager()
    b.qo_indptr[1] += 1
    assert "qo_indptr_uniform" in _failed(audit(b.buffers(), variant="eager"))


def test_kv_indptr_monotone():
    b = _eager()
    b.kv_indptr[2] = b.kv_indptr[1] - 1
    assert "kv_indptr_monotone" in _failed(audit(b.buffers(), variant="eager"))


def test_kv_indices_cover():
    b = _eager()
    b.kv_indices = b.kv_indices[:-1]
    assert "kv_indices_cover" in _failed(audit(b.buffers(), variant="eager"))


def test_kv_indices_in_pool():
    b = _eager()
    b.kv_indices[3] = b.k_buffer.shape[0]
    assert "kv_indices_in_pool" in _failed(audit(b.buffers(), variant="eager"))
    b.kv_indices[3] = -1
    assert "kv_indices_in_pool" in _failed(audit(b.buffers(), variant="eager"))


def test_graph_kv_indices_poison_past_valid_part_is_ignored():
    b = _capture()
    assert int(b.kv_indices[-1]) >= b.k_buffer.shape[0]  # poisoned tail
    assert "kv_indices_in_pool" not in _failed(audit(b.buffers(), variant="capture"))


def test_mask_indptr_layout():
    b = _eager()
    b.mask_indptr[1] += 1
    assert "mask_indptr_layout" in _failed(audit(b.buffers(), variant="eager"))


def test_mask_length():
    b = _eager()
    b.custom_mask = b.custom_mask[:-1]
    assert "mask_length" in _failed(audit(b.buffers(), variant="eager"))


def test_mask_self_visible():
    b = _eager()
    L0 = b.prefix_lens[0]
    b.custom_mask[2 * (L0 + 4) + L0 + 2] = False  # node 2 of request 0 no longer sees itself
    assert "mask_self_visible" in _failed(audit(b.buffers(), variant="eager"))


def test_v_buffer_aliases_k():
    b = _eager()
    b.v_buffer = b.v_buffer.clone()
    rows = {r.name: r for r in audit(b.buffers(), variant="eager").rows}
    assert not rows["v_buffer"].ok and "view of k_buffer" in " ".join(rows["v_buffer"].problems)


def test_within_workspace():
    b = _eager()
    ws = WorkspaceSpec(max_bs=2, num_draft=4, num_heads=2, nsplit=4)
    assert "within_workspace" in _failed(audit(b.buffers(), variant="eager", workspace=ws))
    ok = WorkspaceSpec(max_bs=3, num_draft=4, num_heads=2, nsplit=4)
    assert "within_workspace" not in _failed(audit(b.buffers(), variant="eager", workspace=ok))


def test_dtype_shape_layout_rows():
    b = _eager()
    b.q = b.q[:, :1]  # wrong H -> o shape mismatch
    rows = {r.name: r for r in audit(b.buffers(), variant="eager").rows}
    assert not rows["o"].ok and "shape" in rows["o"].problems[0]


def test_missing_required_buffer_and_optional_mask():
    b = _eager()
    bufs = b.buffers() | {"custom_mask": None}
    assert audit(bufs, variant="eager").ok  # None means causal
    bufs = b.buffers() | {"kv_indices": None}
    assert not audit(bufs, variant="eager").ok


def test_enforcing_audit_lists_every_mismatch():
    b = _eager()
    with pytest.raises(ContractError) as exc:
        audit(b.buffers(), variant="capture", enforce=True)
    msg = str(exc.value)
    assert "qo_indptr: dtype: expected int64 (capture), found int32" in msg
    assert "custom_mask: dtype: expected uint8 (capture), found bool" in msg
    assert len(exc.value.report.mismatches()) == 2


def test_planted_mismatches_all_caught():
    rows = planted_mismatches()
    assert len(rows) == 8 and all(r["caught"] for r in rows), rows
    fp8 = {r["planted"]: r["audit says"] for r in rows if "fp8" in r["planted"]}
    assert "found bfloat16" in fp8["a bf16 pool where SGLang runs --kv-cache-dtype fp8_e4m3"]
    assert "k_scale: an fp8 pool needs" in fp8["an fp8 pool without its k_scale"]


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        audit(_eager().buffers(), variant="graph")


def _kv_check(report):
    return next(i for i in report.invariants if i.name == "kv_pool_dtype")


def test_fp8_pool_with_scales_passes_when_declared_fp8():
    b = build_verify_batch([37, 5], 4, 2, kv_dtype="fp8", k_scale=0.5, v_scale=1.25)
    report = audit(b.buffers(), kv_dtype="fp8_e4m3")
    assert report.ok and "float8_e4m3fn pool" in _kv_check(report).detail


@pytest.mark.parametrize("kv_dtype,declared,scales,fragment", [
    ("bf16", "fp8_e4m3", (1.0, 1.0), "declared fp8_e4m3 (--kv-cache-dtype) expects float8_e4m3fn, found bfloat16"),
    ("fp8", "auto", (1.0, 1.0), "declared auto (--kv-cache-dtype) expects bfloat16, found float8_e4m3fn"),
    ("fp8", "fp8_e4m3", (None, 1.0), "k_scale: an fp8 pool needs a finite scale > 0"),
    ("fp8", None, (1.0, float("nan")), "v_scale: an fp8 pool needs a finite scale > 0"),
    ("fp8", None, (0.0, 1.0), "k_scale: an fp8 pool needs a finite scale > 0"),
])
def test_fp8_mismatches_are_named(kv_dtype, declared, scales, fragment):
    b = build_verify_batch([37, 5], 4, 2, kv_dtype=kv_dtype)
    b.k_scale, b.v_scale = scales
    report = audit(b.buffers(), kv_dtype=declared)
    check = _kv_check(report)
    assert not check.ok and fragment in check.detail and not report.ok


def test_value_buffer_of_another_dtype_than_the_key_buffer_is_named():
    b = build_verify_batch([20], 4, 2, kv_dtype="fp8")
    buffers = b.buffers() | {"v_buffer": b.k_buffer.to(torch.bfloat16)[..., :512]}
    assert "v_buffer: bfloat16, expected k_buffer's dtype float8_e4m3fn" in _kv_check(audit(buffers)).detail


def test_unknown_declared_kv_dtype_is_refused():
    b = build_verify_batch([20], 4, 2)
    with pytest.raises(ValueError, match="kv_dtype: expected one of"):
        audit(b.buffers(), kv_dtype="int8")
