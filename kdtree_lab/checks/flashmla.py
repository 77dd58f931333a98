"""FlashMLA (the ``sgl-flash-mla`` 1.0.0 wheel, SGLang's fork) as the Hopper peer on chain shapes.

FlashMLA's dense decode (its legacy SM90 kernel, ``flash_mla_with_kvcache(..., use_legacy=True)``) attends
``s_q`` query tokens per request over a paged bf16 latent cache of 64-token pages that already holds those tokens,
causally for ``s_q > 1``: query token i sees cache positions < L + i + 1. For a chain (EAGLE topk 1) that is the
verify step's mask, so a chain verify batch of N draft tokens and H heads is timed as FlashMLA decode with
``s_q = N``: the same N x H rows per request, the same prefix and draft keys. ``paged`` lays a
:class:`~kdtree_lab.checks.batch.VerifyBatch` out that way (prefix rows gathered from the pool in kv_indices order,
then the draft tokens' own keys; pages in a random order, as a paged pool hands them out); ``paged_reference`` is
the fp64 attention over that layout, which the CPU tests hold to the oracle of the original batch.

The wheel's metadata asks for torch >= 2.14.1 and its extensions are loaded with ``torch.ops.load_library``;
``load`` returns the exact error where that fails (the device's torch is 2.11), so a benchmark records it instead
of a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.mla import D_V
from .batch import VerifyBatch

PAGE = 64  # FlashMLA's page block size


@dataclass
class PagedBatch:
    q: torch.Tensor  # bf16 [B, N, H, 576]
    k_cache: torch.Tensor  # bf16 [blocks, 64, 1, 576]
    block_table: torch.Tensor  # int32 [B, max_blocks]
    cache_seqlens: torch.Tensor  # int32 [B]: L + N
    sm_scale: float
    causal: bool

    @property
    def shape(self) -> tuple[int, int, int]:
        b, n, h, _ = self.q.shape
        return b, n, h


def load() -> tuple[object | None, str | None]:
    """(the flash_mla module, None), or (None, the exact error of ``import flash_mla``)."""
    try:
        import flash_mla

        if not flash_mla.has_legacy():  # the dense SM90 kernel lives in the legacy extension
            from flash_mla import _loader

            return None, f"flash_mla {flash_mla.__version__}: no legacy (SM90 dense) extension: " \
                         f"{_loader._LEGACY_UNAVAILABLE}"
        return flash_mla, None
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return None, f"{type(exc).__name__}: {exc}"


def paged(batch: VerifyBatch, seed: int = 0) -> PagedBatch:
    """``batch`` (a chain or causal verify batch of equal N per request, a bf16 pool) in FlashMLA's paged layout."""
    if batch.k_buffer.dtype != torch.bfloat16:
        raise ValueError(f"k_buffer: FlashMLA's dense decode reads a bf16 cache here, found {batch.k_buffer.dtype}")
    if batch.custom_mask is not None and not _is_chain(batch):
        raise ValueError("custom_mask: FlashMLA's causal decode serves chains (topk 1) only, found a tree mask")
    bs, n, dev = batch.bs, batch.max_extend_len, batch.q.device
    kv = batch.kv_indptr.cpu().tolist()
    lens = [kv[b + 1] - kv[b] for b in range(bs)]
    pages = [-(-(length + n) // PAGE) for length in lens]
    order = torch.randperm(sum(pages), generator=torch.Generator().manual_seed(seed)).to(dev)
    cache = torch.zeros(sum(pages), PAGE, 1, batch.k_buffer.shape[-1], dtype=torch.bfloat16, device=dev)
    table = torch.zeros(bs, max(pages), dtype=torch.int32, device=dev)
    start = 0
    for b in range(bs):
        ids = order[start:start + pages[b]]
        start += pages[b]
        table[b, : pages[b]] = ids.to(torch.int32)
        rows = torch.cat([batch.k_buffer[batch.kv_indices[kv[b]:kv[b + 1]]], batch.k_extend[b * n:(b + 1) * n]])
        flat = torch.zeros(pages[b] * PAGE, 1, rows.shape[-1], dtype=torch.bfloat16, device=dev)
        flat[: rows.shape[0]] = rows
        cache[ids] = flat.view(pages[b], PAGE, 1, -1)
    q = batch.q.view(bs, n, batch.q.shape[1], batch.q.shape[2])
    seqlens = torch.tensor([length + n for length in lens], dtype=torch.int32, device=dev)
    return PagedBatch(q, cache, table, seqlens, batch.sm_scale, causal=n > 1)


def _is_chain(batch: VerifyBatch) -> bool:
    return all(t.parents.tolist() == list(range(-1, t.size - 1)) for t in batch.trees[: batch.live_bs]) \
        if batch.trees else False


def paged_reference(p: PagedBatch) -> torch.Tensor:
    """fp64 attention over the paged layout as FlashMLA defines it, [B * N, H, 512]."""
    bs, n, h = p.shape
    out = torch.zeros(bs * n, h, D_V, dtype=torch.float64, device=p.q.device)
    for b in range(bs):
        length = int(p.cache_seqlens[b])
        blocks = p.block_table[b, : -(-length // PAGE)].long()
        k = p.k_cache[blocks].reshape(-1, p.k_cache.shape[-1])[:length].double()
        q = p.q[b].double()  # [N, H, 576]
        logits = torch.einsum("nhd,ld->nhl", q, k) * p.sm_scale
        if p.causal:
            last = length - n + torch.arange(n, device=q.device)  # query i sees positions <= L + i
            visible = torch.arange(length, device=q.device)[None, :] <= last[:, None]
            logits = logits.masked_fill(~visible[:, None, :], float("-inf"))
        out[b * n:(b + 1) * n] = torch.einsum("nhl,ld->nhd", torch.softmax(logits, -1), k[:, :D_V])
    return out


def make_runner(flash_mla, p: PagedBatch):
    """A zero-argument call of FlashMLA's dense decode on ``p`` (scheduler metadata computed by the first call,
    then reused: call it once before capturing it in a graph). Returns the output [B, N, H, 512]."""
    sched, _ = flash_mla.get_mla_metadata()

    def run():
        out, _ = flash_mla.flash_mla_with_kvcache(p.q, p.k_cache, p.block_table, p.cache_seqlens, D_V, sched,
                                                  softmax_scale=p.sm_scale, causal=p.causal, use_legacy=True)
        return out

    return run
