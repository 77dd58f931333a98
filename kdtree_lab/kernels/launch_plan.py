"""The verify kernel's launch plan, a pure function of host integers: the prefix split count of a call of ``bs``
requests, the workspace it needs, and the plan over a set of batch sizes (SGLang's capture sizes, or 1..max_bs).

One home for these facts: the loader, the CUDA-graph runner, the SGLang hook, the memory budget and the benchmark
take them from here (torch- and ctypes-free, so the budget and the CLI use it without a GPU stack). The C library
computes the same workspace (``kdtree_verify_workspace_bytes``) and caps the split count at the same
``MAX_NSPLIT``; tests/test_c_abi.py holds the two sides equal. The reasoning behind the split rule is in
docs/performance.md ("Split count").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.mla import D_V

HEADER_BYTES = 256  # the workspace's header (the status word), kernels/common/frame.cuh HEADER_BYTES
MAX_NSPLIT = 512  # the C ABI's largest nsplit (kernels/common/frame.cuh MAX_NSPLIT)


def default_nsplit(bs: int, num_draft: int, num_heads: int, num_sms: int, row_tile: int = 64,
                   cta_overhead: float = 0.002, draft_tail: float = 0.001) -> int:
    """Prefix splits for a launch. The grid has ``tiles = bs * row_tiles`` CTAs per split (``row_tile`` rows of
    draft node x head each: the selected kernel configuration's block_m) and ``nsplit`` prefix splits plus one
    draft-block split, over ``num_sms`` slots (every automatic configuration runs one CTA per SM). Costs are in
    units of one CTA walking a whole long prefix: a prefix CTA takes ``1 / nsplit`` of it plus ``cta_overhead``
    (its Q tile, its fp32 partial, its share of the reduce); the short draft-block CTAs (launched last) add
    ``draft_tail`` when they do not fit beside the last wave. The choice minimises
    ``waves * (1 / nsplit + cta_overhead) (+ draft_tail)``: the headline (B=1, N=16, H=8, 64-row tiles) gets 65
    splits (130 prefix + 2 draft CTAs: one wave of 132), B=8 gets 8 (one wave of 128 prefix CTAs) rather than 9
    and a second wave of 12. Splits beyond about 4 waves are not considered (they grow the fp32 partials, i.e.
    the workspace, for little gain). The kernel still skips splits a short prefix does not need."""
    tiles = max(1, bs * math.ceil(num_draft * num_heads / row_tile))
    slots = max(1, num_sms)
    top = min(MAX_NSPLIT, math.ceil(4 * slots / tiles))

    def cost(n: int) -> float:
        waves = math.ceil(tiles * n / slots)
        return waves * (1 / n + cta_overhead) + (draft_tail if tiles * (n + 1) > waves * slots else 0.0)

    return min(range(1, top + 1), key=cost)  # the first (smallest) of equal costs


def workspace_bytes(bs: int, num_draft: int, num_heads: int, nsplit: int, partial_bytes: int = 4) -> int:
    """Bytes of workspace a call needs: the header, then a partial output row (``D_V`` values of ``partial_bytes``)
    and an fp32 LSE (padded to 256 bytes) for every (request, split or draft block, draft node, head)."""
    rows = bs * (nsplit + 1) * num_draft * num_heads
    return HEADER_BYTES + rows * D_V * partial_bytes + math.ceil(rows * 4 / 256) * 256


@dataclass(frozen=True)
class LaunchPlan:
    """The split count of each batch size and the one workspace that serves them all."""

    row_tile: int
    splits: dict[int, int]  # batch size -> prefix splits
    workspace_bytes: int


def plan(batch_sizes, num_draft: int, num_heads: int, num_sms: int, row_tile: int, nsplit: int = 0,
         partial_bytes: int = 4) -> LaunchPlan:
    """The plan over ``batch_sizes`` (``nsplit`` > 0 fixes the split count; 0: ``default_nsplit`` per size)."""
    splits = {bs: nsplit or default_nsplit(bs, num_draft, num_heads, num_sms, row_tile) for bs in batch_sizes}
    need = max((workspace_bytes(bs, num_draft, num_heads, s, partial_bytes) for bs, s in splits.items()), default=0)
    return LaunchPlan(row_tile, splits, need)
