"""Planted buffer mistakes for the contract audit's demonstration (notebook 01) and tests: what a hand-written
hook gets wrong, and the audit naming each one."""

from __future__ import annotations

import torch

from ..contract.audit import audit
from .batch import build_verify_batch


def planted_mismatches(prefix_lens=(37, 200, 1), num_draft: int = 8, num_heads: int = 8, seed: int = 0) -> list[dict]:
    """Plant the mistakes a hand-written hook makes and show the audit naming each one.

    Returns one row per plant: what was planted, the variant audited, whether the audit caught it, and its words.
    """
    def capture_batch(**kw):
        return build_verify_batch(list(prefix_lens), num_draft, num_heads, variant="capture",
                                  padded_bs=len(prefix_lens) + 1, seed=seed, **kw)

    def eager_batch(**kw):
        return build_verify_batch(list(prefix_lens), num_draft, num_heads, variant="eager", seed=seed, **kw)

    plants = []  # (what, variant audited, batch, the --kv-cache-dtype the server runs with or None)
    b = capture_batch()
    b.qo_indptr = b.qo_indptr.to(torch.int32)
    plants.append(("int32 qo_indptr where the graph variant has int64", "capture", b, None))
    b = capture_batch()
    b.custom_mask = b.custom_mask.to(torch.bool)
    plants.append(("bool mask where the graph variant has uint8", "capture", b, None))
    b = eager_batch()
    b.kv_indices = b.kv_indices.to(torch.int32)
    plants.append(("int32 kv_indices (SGLang's req_to_token dtype) instead of int64", "eager", b, None))
    b = eager_batch()
    wide = torch.empty(b.q.shape[0], b.q.shape[1], 2 * b.q.shape[2], dtype=b.q.dtype)
    wide[..., ::2] = b.q
    b.q = wide[..., ::2]
    plants.append(("non-contiguous q (every other element of a wider tensor)", "eager", b, None))
    b = eager_batch()
    b.v_buffer = b.v_buffer.contiguous()
    plants.append(("v_buffer copied instead of a view of k_buffer", "eager", b, None))
    plants.append(("a bf16 pool where SGLang runs --kv-cache-dtype fp8_e4m3", "eager", eager_batch(), "fp8_e4m3"))
    b = eager_batch(kv_dtype="fp8")
    b.k_scale = None
    plants.append(("an fp8 pool without its k_scale", "eager", b, "fp8_e4m3"))
    plants.append(("an fp8 pool where the server declares bf16 (--kv-cache-dtype auto)", "capture",
                   capture_batch(kv_dtype="fp8", k_scale=0.5, v_scale=2.0), "auto"))
    rows = []
    for what, variant, batch, declared in plants:
        report = audit(batch.buffers(), variant=variant, kv_dtype=declared)
        rows.append({"planted": what, "variant": variant, "caught": not report.ok,
                     "audit says": "; ".join(report.mismatches())})
    return rows
