"""FlashMLA (the ``sgl-flash-mla`` 1.0.0 wheel, SGLang's fork) as the Hopper peer on chain shapes.

FlashMLA's dense decode (its legacy SM90 kernel, ``flash_mla_with_kvcache(..., use_legacy=True)``) attends
``s_q`` query tokens per request over a paged bf16 latent cache of 64-token pages that already holds those tokens,
causally for ``s_q > 1``. For a chain (EAGLE topk 1) that is the verify step's mask, so a chain verify batch of N
draft tokens and H heads is timed as FlashMLA decode with ``s_q = N``: the same N x H rows per request, the same
prefix and draft keys, laid out by :func:`kdtree_lab.checks.paged.paged` in 64-token pages.

The wheel's metadata asks for torch >= 2.14.1 and its extensions are loaded with ``torch.ops.load_library``;
``load`` returns the exact error where that fails (the device's torch is 2.11), so a benchmark records it instead
of a time.
"""

from __future__ import annotations

import torch

from ..core.mla import D_V
from .batch import VerifyBatch
from .paged import PagedBatch
from .paged import paged as paged_layout

PAGE = 64  # FlashMLA's page block size


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
    """``batch`` (a chain or causal verify batch of equal N per request, a bf16 pool) in FlashMLA's 64-token pages."""
    if batch.k_buffer.dtype != torch.bfloat16:
        raise ValueError(f"k_buffer: FlashMLA's dense decode reads a bf16 cache here, found {batch.k_buffer.dtype}")
    return paged_layout(batch, PAGE, seed, who="FlashMLA's causal decode")


def make_runner(flash_mla, p: PagedBatch):
    """A zero-argument call of FlashMLA's dense decode on ``p`` (scheduler metadata computed by the first call,
    then reused: call it once before capturing it in a graph). Returns the output [B, N, H, 512]."""
    sched, _ = flash_mla.get_mla_metadata()
    bs, n, h = p.shape
    q = p.q.view(bs, n, h, p.q.shape[-1])

    def run():
        out, _ = flash_mla.flash_mla_with_kvcache(q, p.cache, p.table, p.seqlens, D_V, sched,
                                                  softmax_scale=p.sm_scale, causal=p.causal, use_legacy=True)
        return out

    return run
