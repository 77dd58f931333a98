"""A verify batch as a paged cache that already holds its draft tokens: what dense MLA decode kernels read.

FlashMLA's dense decode and b12x's dense MLA take ``s_q`` query rows per request over a paged latent cache of
``L + s_q`` tokens, the query rows' own keys last, causally for ``s_q > 1``: query row i sees cache positions
``<= L + i``. For a chain (EAGLE topk 1) that is the verify step's mask. ``paged`` lays a
:class:`~kdtree_lab.checks.batch.VerifyBatch` out that way (prefix rows gathered from the pool in kv_indices order,
then the draft tokens' own keys; pages in a random order, as a paged pool hands them out). Over an fp8 pool the draft
keys are written to the cache as e4m3 at the pool's k_scale (SGLang writes them to the pool before it attends), and
K and V share that one scale (both kernels take one). ``paged_reference`` is the fp64 attention over the layout,
which the CPU tests hold to the oracle of the original batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.mla import D_V
from .batch import VerifyBatch


@dataclass
class PagedBatch:
    q: torch.Tensor  # bf16 [B * N, H, 576], the rows of one request together
    cache: torch.Tensor  # bf16 or float8_e4m3fn [pages, page, 1, 576]
    table: torch.Tensor  # int32 [B, max pages]
    seqlens: torch.Tensor  # int32 [B]: L + N
    draft: int  # N, query rows per request
    sm_scale: float
    causal: bool
    scale: float = 1.0  # the cache's dequantisation scale, K and V (fp8); 1 for bf16

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, N, H)."""
        return self.seqlens.shape[0], self.draft, self.q.shape[1]

    @property
    def page(self) -> int:
        return self.cache.shape[1]


def is_chain(batch: VerifyBatch) -> bool:
    """Whether every live request's draft tree is a chain (each node's parent the one before it)."""
    return all(t.parents.tolist() == list(range(-1, t.size - 1)) for t in batch.trees[: batch.live_bs]) \
        if batch.trees else False


def paged(batch: VerifyBatch, page: int, seed: int = 0, who: str = "a dense decode kernel") -> PagedBatch:
    """``batch`` (a chain or causal batch of equal N per request, no padded rows) as ``page``-token pages."""
    if batch.custom_mask is not None and not is_chain(batch):
        raise ValueError(f"custom_mask: {who} serves causal rows (chains, topk 1) only, found a tree mask")
    if not torch.equal(batch.v_extend, batch.k_extend[..., :D_V]):
        raise ValueError(f"v_extend: {who} reads V as the first {D_V} of each cached key record (SGLang's latent "
                         f"layout), found a v_extend that is not k_extend[..., :{D_V}]")
    if batch.live_bs != batch.bs:
        raise ValueError(f"live_bs: {who} takes no padded requests, found {batch.live_bs} live of {batch.bs}")
    bs, n, dev, dtype = batch.bs, batch.max_extend_len, batch.q.device, batch.k_buffer.dtype
    fp8 = dtype == torch.float8_e4m3fn
    kv = batch.kv_indptr.cpu().tolist()
    lens = [kv[b + 1] - kv[b] for b in range(bs)]
    pages = [-(-(length + n) // page) for length in lens]
    order = torch.randperm(sum(pages), generator=torch.Generator().manual_seed(seed)).to(dev)
    width = batch.k_buffer.shape[-1]
    cache = torch.zeros(sum(pages), page, 1, width, dtype=dtype, device=dev)
    table = torch.zeros(bs, max(pages), dtype=torch.int32, device=dev)
    start = 0
    for b in range(bs):
        ids = order[start:start + pages[b]]
        start += pages[b]
        table[b, : pages[b]] = ids.to(torch.int32)
        own = batch.k_extend[b * n:(b + 1) * n]
        own = (own.float() / batch.k_scale).to(dtype) if fp8 else own
        rows = torch.cat([batch.k_buffer[batch.kv_indices[kv[b]:kv[b + 1]]], own])
        flat = torch.zeros(pages[b] * page, 1, width, dtype=dtype, device=dev)
        flat[: rows.shape[0]] = rows
        cache[ids] = flat.view(pages[b], page, 1, -1)
    seqlens = torch.tensor([length + n for length in lens], dtype=torch.int32, device=dev)
    return PagedBatch(batch.q[: bs * n], cache, table, seqlens, n, batch.sm_scale, causal=n > 1,
                      scale=batch.k_scale if fp8 else 1.0)


def paged_reference(p: PagedBatch) -> torch.Tensor:
    """fp64 attention over the paged layout (the cache dequantised at ``p.scale``), [B * N, H, 512]."""
    bs, n, h = p.shape
    out = torch.zeros(bs * n, h, D_V, dtype=torch.float64, device=p.q.device)
    for b in range(bs):
        length = int(p.seqlens[b])
        blocks = p.table[b, : -(-length // p.page)].long()
        k = p.cache[blocks].reshape(-1, p.cache.shape[-1])[:length].double() * p.scale
        q = p.q[b * n:(b + 1) * n].double()  # [N, H, 576]
        logits = torch.einsum("nhd,ld->nhl", q, k) * p.sm_scale
        if p.causal:
            last = length - n + torch.arange(n, device=q.device)  # query i sees positions <= L + i
            visible = torch.arange(length, device=q.device)[None, :] <= last[:, None]
            logits = logits.masked_fill(~visible[:, None, :], float("-inf"))
        out[b * n:(b + 1) * n] = torch.einsum("nhl,ld->nhd", torch.softmax(logits, -1), k[:, :D_V])
    return out
