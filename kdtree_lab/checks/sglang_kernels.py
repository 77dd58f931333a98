"""SGLang 0.5.23's own verify kernel, called the way its TritonAttnBackend calls it for MLA target verify.

One call site for ``extend_attention_fwd`` (the benchmark, parity against SGLang, the kernel-lab scripts); the
hook calls it through SGLang's backend instead. Needs the ``sglang`` package (its Triton kernels) and a GPU."""

from __future__ import annotations

import torch

from .batch import VerifyBatch
from .paged import is_chain


def extend_attention(batch: VerifyBatch, o: torch.Tensor | None = None) -> torch.Tensor:
    """SGLang's ``extend_attention_fwd`` on ``batch`` (its pool, scales, mask and sm_scale) into ``o`` (default
    ``batch.o``; bf16 [tokens, H, 512]); returns it."""
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    out = batch.o if o is None else o
    extend_attention_fwd(batch.q, batch.k_extend, batch.v_extend, out, batch.k_buffer, batch.v_buffer,
                         batch.qo_indptr, batch.kv_indptr, batch.kv_indices, batch.custom_mask, True,
                         batch.mask_indptr, batch.max_extend_len, batch.k_scale, batch.v_scale,
                         sm_scale=batch.sm_scale)
    return out


def verify_shared_kv(batch: VerifyBatch, o: torch.Tensor | None = None) -> torch.Tensor:
    """SGLang 0.5.23's chain verify kernel ``verify_mla.verify_shared_kv_fwd`` (grouped-head split-KV; SGLang routes
    MLA target verify to it on gfx95 at topk 1) on ``batch``, called as TritonAttnBackend calls its verify slot,
    into ``o``; returns it. It does not read the mask (a chain's is causal), so a tree batch is refused here; a
    call its own ``can_handle`` refuses raises."""
    from sglang.kernels.ops.attention.verify_mla import verify_shared_kv_fwd

    if batch.trees and not is_chain(batch):
        raise ValueError("batch: verify_shared_kv_fwd serves chains (topk 1) only, found a tree mask")
    out = batch.o if o is None else o
    served = verify_shared_kv_fwd(batch.q, batch.k_extend, batch.v_extend, out, batch.k_buffer, batch.v_buffer,
                                  batch.qo_indptr, batch.kv_indptr, batch.kv_indices, batch.custom_mask, True,
                                  batch.mask_indptr, batch.max_extend_len, batch.k_scale, batch.v_scale,
                                  sm_scale=batch.sm_scale, max_bs=batch.bs)
    if not served:
        raise RuntimeError("verify_shared_kv_fwd refused the batch (its can_handle returned False)")
    return out
