"""The fp64 reference for MLA tree verify, computed from exactly the contract's buffers.

For request b, row (i, h): logits over the prefix are ``q . K_pool[slot] * sm_scale * k_scale`` for the slots
``kv_indices[kv_indptr[b]:kv_indptr[b+1]]``; logits over the draft block are ``q . k_extend[j] * sm_scale`` for
draft nodes j visible under the tree mask (``custom_mask`` at ``mask_indptr[b]``, row stride L_b+N, columns from
L_b) or causally (j <= i) when the mask is None. The output is the softmax-weighted sum of ``v_scale *
K_pool[slot][:512]`` and ``v_extend[j]``.
"""

from __future__ import annotations

import torch

from ..core.mla import D_V


def reference(batch, device: str | torch.device | None = None, dtype: torch.dtype = torch.float64,
              return_lse: bool = False):
    """Reference output [bs*N, H, 512] in ``dtype`` (fp64 by default), on ``device`` (default: the batch's).

    Reads the buffers, not the builder's host-side truth, so it checks the layout too. With ``return_lse``
    also returns the natural-log sum-exp of the scaled logits per row, [bs*N, H].
    """
    dev = torch.device(device) if device is not None else batch.q.device
    q = batch.q.to(dev, dtype)
    k_pool = batch.k_buffer.to(dev, dtype)[:, 0, :]
    k_ext = batch.k_extend.to(dev, dtype)[:, 0, :]
    v_ext = batch.v_extend.to(dev, dtype)[:, 0, :]
    qo = batch.qo_indptr.to("cpu").tolist()
    kv = batch.kv_indptr.to("cpu").tolist()
    mi = batch.mask_indptr.to("cpu").tolist()
    kv_indices = batch.kv_indices.to(dev)
    mask = batch.custom_mask.to(dev) if batch.custom_mask is not None else None
    out = torch.zeros(q.shape[0], q.shape[1], D_V, dtype=dtype, device=dev)
    lse_out = torch.zeros(q.shape[0], q.shape[1], dtype=dtype, device=dev)
    for b in range(len(kv) - 1):
        t0, t1 = qo[b], qo[b + 1]
        n_b = t1 - t0
        length = kv[b + 1] - kv[b]
        slots = kv_indices[kv[b]:kv[b + 1]]
        kp = k_pool[slots]  # [L, 576]
        qb = q[t0:t1]  # [n, H, 576]
        lp = torch.einsum("nhd,ld->nhl", qb, kp) * (batch.sm_scale * batch.k_scale)
        ld = torch.einsum("nhd,jd->nhj", qb, k_ext[t0:t1]) * batch.sm_scale
        if mask is not None:
            block = mask[mi[b]: mi[b] + n_b * (length + n_b)].view(n_b, length + n_b)[:, length:] != 0
        else:
            block = torch.ones(n_b, n_b, dtype=torch.bool, device=dev).tril()
        ld = ld.masked_fill(~block[:, None, :], float("-inf"))
        logits = torch.cat([lp, ld], dim=-1)
        lse = torch.logsumexp(logits, dim=-1)  # [n, H]
        p = torch.exp(logits - lse[..., None])
        p = torch.nan_to_num(p, nan=0.0)  # rows with nothing visible (cannot happen with a valid tree)
        out[t0:t1] = (torch.einsum("nhl,ld->nhd", p[..., :length], kp[:, :D_V]) * batch.v_scale
                      + torch.einsum("nhj,jd->nhd", p[..., length:], v_ext[t0:t1]))
        lse_out[t0:t1] = lse
    return (out, lse_out) if return_lse else out


def oracle_bytes(prefix_lens, num_draft: int, num_heads: int, pool_rows: int, dtype_bytes: int = 8) -> int:
    """Bytes ``reference`` allocates at its peak for a batch of these dims (fp64 by default): the pool, q, the
    extend rows and the output in its dtype, plus one request's logits, weights and their temporaries."""
    from ..core.mla import D_QK

    t = len(prefix_lens) * num_draft
    fixed = pool_rows * D_QK + t * num_heads * (D_QK + 2 * D_V) + t * (D_QK + D_V)
    widest = max((int(length) + num_draft for length in prefix_lens), default=0)
    per_request = 4 * num_draft * num_heads * widest + widest * D_QK  # lp/ld, logits, exp, weights; its pool rows
    return dtype_bytes * (fixed + per_request)


def compare(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """Error figures of ``out`` against ``ref``: max-abs, relative L2 (Frobenius), NaN count, unwritten count.

    ``unwritten`` counts NaNs where the reference is finite: outputs are poisoned with NaN before a kernel runs.
    """
    o = out.to(torch.float64).cpu()
    r = ref.to(torch.float64).cpu()
    nan = int(torch.isnan(o).sum())
    diff = (o - r).nan_to_num(nan=float("inf"))
    denom = float(torch.linalg.vector_norm(r)) or 1.0
    return {
        "max_abs": float(diff.abs().max()) if diff.numel() else 0.0,
        "rel_l2": float(torch.linalg.vector_norm(diff)) / denom,
        "nan": nan,
        "max_ref": float(r.abs().max()) if r.numel() else 0.0,
    }
