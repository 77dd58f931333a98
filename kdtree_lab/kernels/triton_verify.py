"""The Triton twin of the CUDA verify kernel: same buffers, same split-K decomposition, same reduce.

Grid (row_tiles, nsplit + 1, bs): row tiles of BLOCK_M rows (row = draft node * H + head) of one request,
``nsplit`` prefix splits whose ranges come from ``kv_indptr`` on the device, and one draft-block split that
reads k_extend / v_extend under the tree mask (or causally). Each split writes fp32 partial outputs and a
log2-domain LSE into a caller-owned workspace; a second kernel merges them and writes bf16 ``o``.
NSPLIT is a compile-time constant and nothing syncs the host, so the launch can be captured.

An fp8 (e4m3) pool, SGLang's ``--kv-cache-dtype fp8_e4m3``, is read as e4m3 and converted to the dot's dtype
(exact: e4m3 has 3 mantissa bits); ``k_scale`` scales the prefix logits and ``v_scale`` the prefix output, as
SGLang's ``extend_attention_fwd`` applies them (data/contracts/sglang-0.5.23-fp8-kv.yaml). Unlike SGLang, Q and P
stay bf16 (SGLang casts both to e4m3 for its prefix dots).

Under ``TRITON_INTERPRET=1`` (CPU) ``tl.dot`` on two bf16 operands returns garbage (triton 3.6 and 3.9), so
the dot operands are upcast to fp32 there, and only there (``UPCAST``).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..core.dtypes import KV_DTYPES, kv_dtype_of
from ..core.mla import D_V
from .launch_plan import (  # the CUDA kernel's workspace layout
    HEADER_BYTES,
    workspace_bytes,
)

MIN_SPLIT_TOKENS = 128  # this kernel's own floor; the CUDA kernels' is 64 (kernels/common/frame.cuh), not shared


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


DEFINED_INTERPRETED = interpreting()  # Triton picks interpreter or compiler when a kernel is defined: at this import


@triton.jit
def _online_softmax_step(s, v, m_i, l_i, acc, DOT_T: tl.constexpr):
    """One key tile of the online softmax in the log2 domain: s [BLOCK_M, BLOCK_N] scaled logits (-inf where
    hidden), v [BLOCK_N, 512]; returns the updated running max, row sum and accumulator."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    base = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet stays at zero
    alpha = tl.exp2(m_i - base)
    p = tl.exp2(s - base[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(DOT_T), v)
    return m_new, l_i, acc


@triton.jit
def _verify_split_kernel(
    q_ptr, q_st, q_sh, kx_ptr, kx_s, vx_ptr, vx_s, kb_ptr, kb_s, pool_rows,
    qo_ptr, kv_indptr_ptr, kv_indices_ptr, mask_ptr, mask_indptr_ptr,
    o_part_ptr, lse_part_ptr, status_ptr,
    N, H, R, scale_pre, scale_draft, v_scale,
    NSPLIT: tl.constexpr, HAS_MASK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    MIN_SPLIT: tl.constexpr, UPCAST: tl.constexpr,
):
    tile = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    DOT_T = tl.float32 if UPCAST else tl.bfloat16
    tok0 = tl.load(qo_ptr + b).to(tl.int64)
    n_b = (tl.load(qo_ptr + b + 1).to(tl.int64) - tok0).to(tl.int32)
    n_b = tl.minimum(tl.maximum(n_b, 0), N)
    kv0 = tl.load(kv_indptr_ptr + b).to(tl.int64)
    L = (tl.load(kv_indptr_ptr + b + 1) - tl.load(kv_indptr_ptr + b)).to(tl.int32)
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_b * H
    node = rows // H
    head = rows % H
    d512 = tl.arange(0, 512)
    d64 = tl.arange(0, 64)
    q_row = q_ptr + (tok0 + node).to(tl.int64)[:, None] * q_st + head.to(tl.int64)[:, None] * q_sh
    q_nope = tl.load(q_row + d512[None, :], mask=row_ok[:, None], other=0.0).to(DOT_T)
    q_pe = tl.load(q_row + 512 + d64[None, :], mask=row_ok[:, None], other=0.0).to(DOT_T)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, 512], tl.float32)
    keys = tl.arange(0, BLOCK_N)
    if split == NSPLIT:
        # Draft block: N x N under the tree mask (or causal), keys from k_extend / v_extend.
        m0 = tl.load(mask_indptr_ptr + b)
        mstride = (L + n_b).to(tl.int64)
        for key0 in range(0, N, BLOCK_N):
            j = key0 + keys
            j_ok = j < n_b
            k_row = kx_ptr + (tok0 + j).to(tl.int64)[:, None] * kx_s
            k_nope = tl.load(k_row + d512[None, :], mask=j_ok[:, None], other=0.0).to(DOT_T)
            k_pe = tl.load(k_row + 512 + d64[None, :], mask=j_ok[:, None], other=0.0).to(DOT_T)
            v = tl.load(vx_ptr + (tok0 + j).to(tl.int64)[:, None] * vx_s + d512[None, :], mask=j_ok[:, None],
                        other=0.0).to(DOT_T)
            s = tl.dot(q_nope, tl.trans(k_nope)) + tl.dot(q_pe, tl.trans(k_pe))
            vis = j_ok[None, :] & row_ok[:, None]
            if HAS_MASK:
                mptr = mask_ptr + m0 + node.to(tl.int64)[:, None] * mstride + L + j[None, :]
                vis = vis & (tl.load(mptr, mask=vis, other=0) != 0)
            else:
                vis = vis & (j[None, :] <= node[:, None])
            s = tl.where(vis, s * scale_draft, float("-inf"))
            m_i, l_i, acc = _online_softmax_step(s, v, m_i, l_i, acc, DOT_T)
        vscale = 1.0
    else:
        chunk = tl.cdiv(L, NSPLIT)
        chunk = tl.maximum(tl.cdiv(chunk, 16) * 16, MIN_SPLIT)
        kbeg = split * chunk
        kend = tl.minimum(L, kbeg + chunk)
        for key0 in range(kbeg, kend, BLOCK_N):
            kk = key0 + keys
            k_ok = kk < kend
            slot = tl.load(kv_indices_ptr + kv0 + kk, mask=k_ok, other=0)
            bad = (slot < 0) | (slot >= pool_rows)
            tl.atomic_or(status_ptr + keys * 0, tl.where(bad & k_ok, 1, 0), mask=bad & k_ok)
            slot = tl.where(bad, 0, slot)
            k_row = kb_ptr + slot.to(tl.int64)[:, None] * kb_s
            k_nope = tl.load(k_row + d512[None, :], mask=k_ok[:, None], other=0.0).to(DOT_T)
            k_pe = tl.load(k_row + 512 + d64[None, :], mask=k_ok[:, None], other=0.0).to(DOT_T)
            s = tl.dot(q_nope, tl.trans(k_nope)) + tl.dot(q_pe, tl.trans(k_pe))
            s = tl.where(k_ok[None, :], s * scale_pre, float("-inf"))
            m_i, l_i, acc = _online_softmax_step(s, k_nope, m_i, l_i, acc, DOT_T)  # V = first 512 dims of K
        vscale = v_scale
    part = (b * (NSPLIT + 1) + split).to(tl.int64) * R + rows
    out_ok = rows < R
    has = l_i > 0.0
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    tl.store(lse_part_ptr + part, lse, mask=out_ok)
    inv = tl.where(has, vscale / tl.where(has, l_i, 1.0), 0.0)
    tl.store(o_part_ptr + part[:, None] * 512 + d512[None, :], acc * inv[:, None], mask=out_ok[:, None])


@triton.jit
def _verify_reduce_kernel(o_ptr, o_st, o_sh, qo_ptr, o_part_ptr, lse_part_ptr, N, H, R,
                          NSPLIT: tl.constexpr, BLOCK_S: tl.constexpr):
    r = tl.program_id(0)
    b = tl.program_id(1)
    tok0 = tl.load(qo_ptr + b).to(tl.int64)
    n_b = (tl.load(qo_ptr + b + 1).to(tl.int64) - tok0).to(tl.int32)
    n_b = tl.minimum(tl.maximum(n_b, 0), N)
    if r < n_b * H:
        s = tl.arange(0, BLOCK_S)
        s_ok = s < NSPLIT + 1
        part = (b * (NSPLIT + 1) + s).to(tl.int64) * R + r
        lse = tl.load(lse_part_ptr + part, mask=s_ok, other=float("-inf"))
        m = tl.max(lse, 0)
        base = tl.where(m == float("-inf"), 0.0, m)
        w = tl.where(lse == float("-inf"), 0.0, tl.exp2(lse - base))
        d = tl.arange(0, 512)
        parts = tl.load(o_part_ptr + part[:, None] * 512 + d[None, :], mask=(s_ok & (w > 0))[:, None], other=0.0)
        total = tl.sum(w, 0)
        out = tl.sum(parts * w[:, None], 0) / tl.where(total > 0, total, 1.0)
        node = r // H
        head = r % H
        tl.store(o_ptr + (tok0 + node) * o_st + head * o_sh + d, out.to(tl.bfloat16))




def launch(q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
           max_extend_len: int, nsplit: int, sm_scale: float, k_scale: float, v_scale: float,
           workspace: torch.Tensor, block_m: int | None = None, block_n: int | None = None) -> None:
    """Launch both kernels on the current stream (no allocation, no host sync)."""
    bs = kv_indptr.shape[0] - 1
    heads = q.shape[1]
    rows = max_extend_len * heads
    need = workspace_bytes(bs, max_extend_len, heads, nsplit)
    if workspace.numel() < need or workspace.dtype != torch.uint8:
        raise ValueError(f"workspace: expected a uint8 tensor of at least {need} bytes, found "
                         f"{workspace.dtype} with {workspace.numel()}")
    if kv_dtype_of(k_buffer.dtype) is None:
        raise NotImplementedError(f"k_buffer: expected a pool of {[d.torch for d in KV_DTYPES.values()]}, found "
                                  f"{k_buffer.dtype}")
    upcast = interpreting()
    bm = block_m or (16 if upcast else 32)
    bn = block_n or 16  # 32 spills on sm_90 and sm_120 with BLOCK_M=32 (see triton_aot)
    n_part = bs * (nsplit + 1) * rows
    body = workspace[HEADER_BYTES:]
    o_part = body[: n_part * D_V * 4].view(torch.float32)
    lse_part = body[n_part * D_V * 4: n_part * D_V * 4 + n_part * 4].view(torch.float32)
    status = workspace[:4].view(torch.int32)
    log2e = 1.4426950408889634
    mask_arg = custom_mask.view(torch.uint8) if custom_mask is not None else kv_indices
    grid = (triton.cdiv(rows, bm), nsplit + 1, bs)
    _verify_split_kernel[grid](
        q, q.stride(0), q.stride(1), k_extend, k_extend.stride(0), v_extend, v_extend.stride(0),
        k_buffer, k_buffer.stride(0), k_buffer.shape[0],
        qo_indptr, kv_indptr, kv_indices, mask_arg, mask_indptr, o_part, lse_part, status,
        max_extend_len, heads, rows, sm_scale * k_scale * log2e, sm_scale * log2e, v_scale,
        NSPLIT=nsplit, HAS_MASK=custom_mask is not None, BLOCK_M=bm, BLOCK_N=bn, MIN_SPLIT=MIN_SPLIT_TOKENS,
        UPCAST=upcast, num_warps=8 if not upcast else 4, num_stages=2 if not upcast else 1)
    _verify_reduce_kernel[(rows, bs)](o, o.stride(0), o.stride(1), qo_indptr, o_part, lse_part, max_extend_len,
                                      heads, rows, NSPLIT=nsplit, BLOCK_S=triton.next_power_of_2(nsplit + 1),
                                      num_warps=4)


def verify(batch, workspace: torch.Tensor, nsplit: int, checked: bool = False, **blocks) -> torch.Tensor:
    """Run the Triton twin on a :class:`~kdtree_lab.checks.batch.VerifyBatch`; writes and returns ``batch.o``."""
    if checked:
        from ..contract.audit import audit

        audit(batch.buffers(), variant=batch.variant, enforce=True)
    launch(batch.q, batch.k_extend, batch.v_extend, batch.o, batch.k_buffer, batch.qo_indptr, batch.kv_indptr,
           batch.kv_indices, batch.custom_mask, batch.mask_indptr, batch.max_extend_len, nsplit, batch.sm_scale,
           batch.k_scale, batch.v_scale, workspace, **blocks)
    return batch.o
