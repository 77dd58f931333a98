"""Verify batches in SGLang's own layout (see data/contracts/sglang-0.5.23-target-verify.yaml).

``build_verify_batch`` draws a latent pool with randomly permuted slots (page size 1, row 0 = padding slot),
random bf16 q / k_extend / v_extend, a FULL_MASK tree mask and the indptr arrays, in either variant:
``eager`` (int32 qo_indptr, bool mask, exact-size kv_indices) or ``capture`` (int64 qo_indptr, uint8 mask in an
oversized buffer, kv_indices oversized and poisoned past the valid part, rows padded to a captured size with
prefix length 1 at slot 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
import torch

from ..core import dtypes, env
from ..core.mla import D_QK, D_V, MODEL_SM_SCALE
from ..core.tree import DraftTree, chain, random_ddtree

Variant = Literal["eager", "capture"]
MaskKind = Literal["tree", "chain", "causal"]

@dataclass
class VerifyBatch:
    """The arguments SGLang passes to ``extend_attention_fwd`` for MLA target verify, plus what built them.

    Tensors keep SGLang's dtypes and shapes; ``prefix_lens`` / ``trees`` are host-side truth for oracles and
    tests (``live_bs`` requests are real, the rest are graph padding).
    """

    q: torch.Tensor  # bf16 [bs*N, H, 576]
    k_extend: torch.Tensor  # bf16 [bs*N, 1, 576]
    v_extend: torch.Tensor  # bf16 [bs*N, 1, 512]
    o: torch.Tensor  # bf16 [bs*N, H, 512]
    k_buffer: torch.Tensor  # bf16 or float8_e4m3fn (--kv-cache-dtype fp8_e4m3) [P, 1, 576]
    v_buffer: torch.Tensor  # the same dtype, view [P, 1, 512], strides (576, 576, 1)
    qo_indptr: torch.Tensor  # int32 (eager) / int64 (capture) [bs+1]
    kv_indptr: torch.Tensor  # int32 [bs+1]
    kv_indices: torch.Tensor  # int64 [>= kv_indptr[bs]]
    custom_mask: torch.Tensor | None  # bool (eager) / uint8 (capture), or None for causal
    mask_indptr: torch.Tensor  # int64 [bs+1]
    max_extend_len: int
    sm_scale: float = MODEL_SM_SCALE
    k_scale: float = 1.0
    v_scale: float = 1.0
    variant: Variant = "eager"
    prefix_lens: list[int] = field(default_factory=list)
    trees: list[DraftTree] = field(default_factory=list)
    live_bs: int = 0

    @property
    def bs(self) -> int:
        return self.kv_indptr.shape[0] - 1

    @property
    def num_heads(self) -> int:
        return self.q.shape[1]

    def buffers(self) -> dict[str, object]:
        """Name -> tensor or scalar, the contract's names (what ``audit`` reads)."""
        names = ["q", "k_extend", "v_extend", "o", "k_buffer", "v_buffer", "qo_indptr", "kv_indptr", "kv_indices",
                 "custom_mask", "mask_indptr", "max_extend_len", "sm_scale", "k_scale", "v_scale"]
        return {n: getattr(self, n) for n in names}

    def extend_attention_args(self) -> tuple:
        """Positional arguments in ``extend_attention_fwd``'s order (SGLang 0.5.23) up to ``max_len_extend``."""
        return (self.q, self.k_extend, self.v_extend, self.o, self.k_buffer, self.v_buffer, self.qo_indptr,
                self.kv_indptr, self.kv_indices, self.custom_mask, True, self.mask_indptr, self.max_extend_len)

    def to(self, device: str | torch.device) -> "VerifyBatch":
        """A copy on ``device``; v_buffer is re-made as the view of the moved k_buffer."""
        moved = {n: (t.to(device) if isinstance(t, torch.Tensor) else t) for n, t in vars(self).items()}
        moved["v_buffer"] = moved["k_buffer"][..., :D_V]
        return VerifyBatch(**moved)


def _make_tree(kind: MaskKind, n: int, rng: np.random.Generator) -> DraftTree:
    if kind == "tree":
        return random_ddtree(n, rng, depth=max(1, min(n - 1, 8)) if n > 1 else 1)
    return chain(n)


def full_tree_mask(prefix_lens: Sequence[int], trees: Sequence[DraftTree]) -> torch.Tensor:
    """SGLang's FULL_MASK tree mask (bool, flat, on the CPU): per request an N x (L + N) row-major block, its prefix
    columns True (as SGLang fills them), its draft columns the tree's ancestor-or-self mask."""
    parts = []
    for length, tree in zip(prefix_lens, trees, strict=True):
        n = tree.size
        block = np.ones((n, int(length) + n), dtype=bool)
        block[:, int(length):] = tree.ancestor_mask()
        parts.append(torch.from_numpy(block.reshape(-1)))
    return torch.cat(parts)


def batch_bytes(prefix_lens: Sequence[int], num_draft: int, num_heads: int, variant: Variant = "eager",
                padded_bs: int | None = None, kv_dtype: str = "bf16", mask: MaskKind = "tree",
                ctx: int | None = None, pool_size: int | None = None) -> int:
    """Host or device bytes ``build_verify_batch`` allocates for these arguments at its peak (the pool drawn in bf16
    before an fp8 cast included), computed before anything is allocated."""
    lens = [int(x) for x in prefix_lens]
    bs = max(padded_bs or len(lens), len(lens))
    lens = lens + [1] * (bs - len(lens))
    n, h, live_tokens = num_draft, num_heads, sum(lens[:len(prefix_lens)])
    rows = (pool_size if pool_size is not None else live_tokens + 64) + 1
    pool = rows * D_QK * (2 + (1 if kv_dtype == "fp8" else 0)) + 8 * (rows + live_tokens)  # k_buffer, slots
    t = bs * n
    tokens = t * (h * (D_QK + D_V) + D_QK + D_V) * 2  # q, o, k_extend, v_extend
    kv_cells = sum(lens)
    kv = 8 * (max(bs * n * ctx, kv_cells) if variant == "capture" and ctx else kv_cells + bs * n * 16)
    cells = sum(n * (length + n) for length in lens)
    masks = 0 if mask == "causal" else 2 * cells + (cells if variant == "capture" else 0)  # numpy, torch, uint8 copy
    return pool + tokens + kv + masks


def batch_words(prefix_lens: Sequence[int], num_draft: int, num_heads: int, kv_dtype: str = "bf16") -> str:
    """The shape of a batch in a refusal: "3 requests, 100,000,238 prefix tokens, N 8, H 8, bf16 pool"."""
    return (f"{len(prefix_lens)} request{'s' * (len(prefix_lens) != 1)}, {sum(prefix_lens):,} prefix tokens, "
            f"N {num_draft}, H {num_heads}, {kv_dtype} pool")


def require_batch(prefix_lens: Sequence[int], num_draft: int, num_heads: int, *, variant: Variant = "eager",
                  mask: MaskKind = "tree", pool_size: int | None = None, padded_bs: int | None = None,
                  ctx: int | None = None, device: str | torch.device = "cpu", seed: int = 0,
                  kv_dtype: str = "bf16") -> torch.device:
    """``build_verify_batch``'s rules for its arguments, checked before anything is allocated (the CLI and the
    notebook runner apply the same): ValueError naming the first one broken (``env.SizeError`` for a batch larger
    than the free memory of ``device``). Returns the device as a ``torch.device``."""
    dtypes.kv_dtype(kv_dtype)
    lens = [int(x) for x in prefix_lens]
    if not lens or min(lens) < 1:
        raise ValueError(f"prefix_lens: expected >= 1 request with length >= 1, found {lens}")
    if num_draft < 1 or num_heads < 1:
        raise ValueError(f"num_draft and num_heads: expected >= 1, found N={num_draft}, H={num_heads}")
    if variant == "capture":
        if padded_bs is not None and padded_bs < len(lens):
            raise ValueError(f"padded_bs: expected at least the live batch ({len(lens)} requests), found {padded_bs}")
    elif variant == "eager":
        if padded_bs not in (None, len(lens)):
            raise ValueError(f"padded_bs: applies to the capture variant only, found {padded_bs} with eager")
    else:
        raise ValueError(f"variant: expected 'eager' or 'capture', found {variant!r}")
    if mask not in ("tree", "chain", "causal"):
        raise ValueError(f"mask: expected tree, chain or causal, found {mask!r}")
    if not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"seed: expected an integer from 0 to {2**32 - 1}, found {seed}")
    if pool_size is not None and pool_size < sum(lens):
        raise ValueError(f"pool_size: expected at least the live prefix tokens {sum(lens)}, found {pool_size}")
    dev = env.torch_device(device)
    env.require_fits(batch_bytes(lens, num_draft, num_heads, variant, padded_bs, kv_dtype, mask, ctx, pool_size),
                     dev, "prefix_lens/num_draft/num_heads: " + batch_words(lens, num_draft, num_heads, kv_dtype))
    return dev


def build_verify_batch(
    prefix_lens: Sequence[int],
    num_draft: int,
    num_heads: int,
    *,
    variant: Variant = "eager",
    mask: MaskKind = "tree",
    trees: Sequence[DraftTree] | None = None,
    pool_size: int | None = None,
    padded_bs: int | None = None,
    ctx: int | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
    sm_scale: float = MODEL_SM_SCALE,
    v_extend_from_k: bool = True,
    kv_dtype: str = "bf16",
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> VerifyBatch:
    """Build one verify batch.

    prefix_lens: committed tokens per live request (>= 1). num_draft: N. num_heads: H (local heads).
    mask: 'tree' (random DDTree per request), 'chain' (EAGLE topk=1, a custom mask equal to causal) or
    'causal' (custom_mask None). pool_size: token slots (default: sum of prefixes + 64); P = pool_size + 1.
    padded_bs: capture variant only, pad to this captured batch size with L=1 at slot 0.
    ctx: capture variant's context length, sizing kv_indices / mask as SGLang does (default: a smaller slack).
    v_extend_from_k: v_extend = k_extend[..., :512] as in SGLang; False draws it independently (tests).
    kv_dtype: 'bf16', or 'fp8' for SGLang's fp8_e4m3 pool (latent rows cast to e4m3 unscaled, as SGLang writes
    them; k_extend / v_extend stay bf16). k_scale / v_scale: the per-tensor scales SGLang passes (prefix only).
    """
    dev = require_batch(prefix_lens, num_draft, num_heads, variant=variant, mask=mask, pool_size=pool_size,
                        padded_bs=padded_bs, ctx=ctx, device=device, seed=seed, kv_dtype=kv_dtype)
    kv_pool = dtypes.kv_dtype(kv_dtype)
    lens, live = [int(x) for x in prefix_lens], len(prefix_lens)
    bs = padded_bs if variant == "capture" and padded_bs is not None else live
    lens = lens + [1] * (bs - live)
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=dev).manual_seed(seed)  # draw on the target device: pools can be GBs
    n, h = num_draft, num_heads
    if trees is None:
        trees = [_make_tree(mask, n, rng) for _ in range(live)]
    trees = list(trees) + [chain(n) for _ in range(bs - len(trees))]
    if any(t.size != n for t in trees):
        raise ValueError(f"trees: every tree must have N={n} nodes, got {[t.size for t in trees]}")

    live_tokens = sum(lens[:live])
    pool = pool_size if pool_size is not None else live_tokens + 64
    rows = pool + 1  # row 0 = padding slot
    k_buffer = torch.randn(rows, 1, D_QK, generator=gen, device=dev, dtype=torch.bfloat16).to(kv_pool.torch)
    slots = torch.randperm(pool, generator=gen, device=dev)[:live_tokens] + 1
    kv_parts, start = [], 0
    for b, length in enumerate(lens):
        if b < live:
            kv_parts.append(slots[start:start + length])
            start += length
        else:
            kv_parts.append(torch.zeros(length, dtype=torch.int64, device=dev))  # padded rows read slot 0
    kv_valid = torch.cat(kv_parts).to(torch.int64)
    kv_indptr = torch.zeros(bs + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(lens), 0).to(torch.int32)
    kv_indptr = kv_indptr.to(dev)

    t = bs * n
    q = torch.randn(t, h, D_QK, generator=gen, device=dev, dtype=torch.bfloat16)
    k_extend = torch.randn(t, 1, D_QK, generator=gen, device=dev, dtype=torch.bfloat16)
    if v_extend_from_k:
        v_extend = k_extend[..., :D_V].contiguous()
    else:
        v_extend = torch.randn(t, 1, D_V, generator=gen, device=dev, dtype=torch.bfloat16)
    o = torch.full((t, h, D_V), float("nan"), dtype=torch.bfloat16, device=dev)  # poison: unwritten rows show

    qo_dtype = torch.int32 if variant == "eager" else torch.int64
    qo_indptr = torch.arange(0, (bs + 1) * n, n, dtype=qo_dtype, device=dev)
    mask_sizes = [n * (length + n) for length in lens]
    mask_indptr = torch.zeros(bs + 1, dtype=torch.int64)
    mask_indptr[1:] = torch.cumsum(torch.tensor(mask_sizes), 0)
    mask_indptr = mask_indptr.to(dev)

    if variant == "capture":
        # SGLang's buffer is max_bs*N*ctx long; without ctx keep a smaller slack that still breaks shape-sizing.
        cap = max(bs * n * ctx, kv_valid.numel()) if ctx is not None else kv_valid.numel() + bs * n * 16
        kv_indices = torch.full((cap,), pool + 12345, dtype=torch.int64, device=dev)  # poison past the valid part
        kv_indices[: kv_valid.numel()] = kv_valid
    else:
        kv_indices = kv_valid

    custom_mask = None
    if mask != "causal":
        flat = full_tree_mask(lens, trees)
        if variant == "capture":
            cap = max(bs * n * (ctx + n), flat.numel()) if ctx is not None else flat.numel() + bs * n * 16
            custom_mask = torch.full((cap,), 0xA5, dtype=torch.uint8, device=dev)  # poison past mask_indptr[bs]
            custom_mask[: flat.numel()] = flat.to(dev, torch.uint8)
        else:
            custom_mask = flat.to(dev)

    batch = VerifyBatch(q=q, k_extend=k_extend, v_extend=v_extend, o=o, k_buffer=k_buffer,
                        v_buffer=k_buffer[..., :D_V], qo_indptr=qo_indptr, kv_indptr=kv_indptr,
                        kv_indices=kv_indices, custom_mask=custom_mask, mask_indptr=mask_indptr,
                        max_extend_len=n, sm_scale=sm_scale, k_scale=k_scale, v_scale=v_scale, variant=variant,
                        prefix_lens=lens, trees=trees, live_bs=live)
    return batch
