"""PyTorch's CUDA caching allocator as it holds a model's weights: the segments a sequence of allocations and frees
reserves, which is what ``cudaMemGetInfo`` (SGLang's "mem usage") sees, rather than the tensors' sum.

The model follows c10/cuda/CUDACachingAllocator.cpp with the default configuration: every request rounds up to
512 B; up to 1 MiB comes from the small pool (2 MiB segments), above it from the large pool (a 20 MiB segment for
a request under 10 MiB, else the request rounded up to 2 MiB); a request takes the best-fitting free block of its
pool and splits it when the remainder is at least 512 B (small pool) or more than 1 MiB (large pool); a free
coalesces with its free neighbours; ``empty_cache`` (SGLang's ``get_available_gpu_memory`` calls it before every
reading) returns each segment with nothing live. Constants: ``data/contracts/sglang-0.5.23-weight-sharding.yaml``
(``torch_caching_allocator``). Bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import yaml

from ..core.paths import CONTRACTS


@lru_cache(maxsize=1)
def constants() -> dict[str, int]:
    doc = yaml.safe_load((CONTRACTS / "sglang-0.5.23-weight-sharding.yaml").read_text())
    return doc["torch_caching_allocator"]


@dataclass
class _Block:
    offset: int
    size: int
    live: bool = False


@dataclass
class _Segment:
    size: int
    small: bool
    blocks: list[_Block] = field(default_factory=list)


class CachingAllocator:
    """One device's caching allocator: ``malloc`` returns a handle for ``free``; ``reserved`` is what the device
    gives up (segments), ``allocated`` what tensors hold (rounded requests)."""

    def __init__(self) -> None:
        self.c = constants()
        self.segments: list[_Segment] = []

    def _round(self, nbytes: int) -> int:
        m = self.c["min_block"]
        return max(m, -(-nbytes // m) * m)

    def malloc(self, nbytes: int) -> tuple[_Segment, _Block]:
        size = self._round(nbytes)
        small = size <= self.c["small_size"]
        best = None
        for seg in self.segments:
            if seg.small != small:
                continue
            for blk in seg.blocks:
                if not blk.live and blk.size >= size and (best is None or blk.size < best[1].size):
                    best = (seg, blk)
        if best is None:
            if small:
                seg_size = self.c["small_buffer"]
            elif size < self.c["min_large_alloc"]:
                seg_size = self.c["large_buffer"]
            else:
                r = self.c["round_large"]
                seg_size = -(-size // r) * r
            seg = _Segment(seg_size, small, [_Block(0, seg_size)])
            self.segments.append(seg)
            best = (seg, seg.blocks[0])
        seg, blk = best
        rest = blk.size - size
        if rest >= (self.c["min_block"] if small else self.c["small_size"] + 1):
            i = seg.blocks.index(blk)
            seg.blocks.insert(i + 1, _Block(blk.offset + size, rest))
            blk.size = size
        blk.live = True
        return seg, blk

    def free(self, handle: tuple[_Segment, _Block]) -> None:
        seg, blk = handle
        blk.live = False
        merged: list[_Block] = []
        for b in seg.blocks:
            if merged and not merged[-1].live and not b.live:
                merged[-1].size += b.size
            else:
                merged.append(b)
        seg.blocks = merged

    def empty_cache(self) -> None:
        self.segments = [s for s in self.segments if any(b.live for b in s.blocks)]

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def allocated(self) -> int:
        return sum(b.size for s in self.segments for b in s.blocks if b.live)
