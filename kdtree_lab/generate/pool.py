"""The paged latent KV pool as SGLang lays it for MLA (page size 1), with its slot allocator.

One buffer per layer, ``[slots + 1, 1, 576]`` in the pool's dtype (bf16, or float8_e4m3fn for ``--kv-cache-dtype
fp8_e4m3``, written unscaled as SGLang writes it with k_scale 1); slot 0 is the padding slot padded graph rows write
and read. Slots are handed out from a free list and given back when a request rejects a draft or finishes, as
SGLang's ``TokenToKVPoolAllocator`` does: a verify allocates one slot per tree node, keeps the accepted path's and
frees the rest.
"""

from __future__ import annotations

import torch

from ..core import dtypes
from ..core.mla import D_QK


class PoolFull(RuntimeError):
    """The pool has fewer free slots than a step asks for."""


class LatentPool:
    """Per-layer latent rows and the free slots. State: the buffers (device) and the free list (host)."""

    def __init__(self, layers: int, slots: int, kv_dtype: str = "bf16", device: str | torch.device = "cpu"):
        if slots < 1:
            raise ValueError(f"slots: expected >= 1, found {slots}")
        self.kv = dtypes.kv_dtype(kv_dtype)
        self.size = slots
        self.buffers = [torch.zeros(slots + 1, 1, D_QK, dtype=self.kv.torch, device=device) for _ in range(layers)]
        self._free = list(range(slots, 0, -1))  # pop() hands out the lowest slot first
        self._is_free = set(self._free)

    @property
    def free_slots(self) -> int:
        return len(self._free)

    @property
    def used_slots(self) -> int:
        return self.size - len(self._free)

    def alloc(self, n: int) -> list[int]:
        """``n`` free slots (host ints); PoolFull naming the shortfall when fewer are free."""
        if n > len(self._free):
            raise PoolFull(f"KV pool: {n} slots asked for, {len(self._free)} of {self.size} free")
        out = [self._free.pop() for _ in range(n)]
        self._is_free.difference_update(out)
        return out

    def free(self, slots: list[int]) -> None:
        """Give ``slots`` back (each must be in use)."""
        for s in slots:
            if not 1 <= s <= self.size:
                raise ValueError(f"slots: expected slots in 1..{self.size}, found {s}")
            if s in self._is_free:
                raise ValueError(f"slots: slot {s} is already free (freed twice)")
        if len(set(slots)) != len(slots):
            raise ValueError("slots: a slot is given back twice in one call")
        self._free.extend(sorted(slots, reverse=True))
        self._is_free.update(slots)

    def write(self, layer: int, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Write latent rows (``[n, 576]``, any float dtype) into ``slots`` (int64 [n], device) of one layer, cast to
        the pool's dtype (capture-safe)."""
        self.buffers[layer][slots, 0] = rows.to(self.kv.torch)
