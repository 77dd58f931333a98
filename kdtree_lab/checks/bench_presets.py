"""The benchmark's named shape grids (quick, issue, fp8, card-floor, ...) and the implementations each shape is timed
with."""

from __future__ import annotations

import math

from ..kernels.impls import IMPLS
from ..kernels.launch_plan import E4M3_SM120_32
from .roofline import Shape

OURS = ("cuda", "cuda_sm120", "cuda_sm120_roles", "triton")  # what the quick preset times of ours: the selected
# configuration, both sm_120 configurations forced (what a 99 KB card selects per shape) and the Triton twin
FP8_OURS = ("cuda", "cuda_sm120", "triton")  # not the second generation: over an fp8 pool it runs the e4m3
# configuration, which the H200 emulates (the issue-fp8 preset times it on the timing library, KDT_E4M3_TIMING=1)
TIMEABLE = tuple(IMPLS)  # any registered implementation, when asked for (--impl)
ALL_IMPLS = [*OURS, "sglang_extend", "sglang_decode"]
PEERS = ("sglang_verify_mla", "flashmla", "b12x")  # chain-only peers: SGLang's grouped-head verify kernel, FlashMLA
# (SM90), b12x's dense MLA (SM120, CuTe DSL)
PEER_IMPLS = ("sglang_extend", "sglang_decode", *PEERS, "b12x_p64")  # every implementation that is not ours
# (b12x_p64: b12x over 64-token pages, beside its page-1 layout in the b12x preset)
# chain (EAGLE topk 1) shapes: the issue-37 grid, where SGLang's verify_shared_kv_fwd and FlashMLA's causal decode
# also serve the step; FlashMLA runs them at equal rows (N query tokens x H heads per request)
CHAIN_SHAPES = ((1, 200_000, 4, 8), (8, 200_000, 4, 8), (1, 200_000, 4, 16), (8, 32_768, 4, 16), (1, 32_768, 4, 8),
                (48, 8_192, 4, 8), (1, 200_000, 8, 8))


# the issue grid's H = 8, 16 rows (TP8 / TP4 of a 64-head model) as (B, L, N, H): the fp8 presets' shapes
TP8_TP4_ROWS = tuple((b, length, n, h) for h in (8, 16) for n in (4, 16, 64) for b in (1, 8)
                     for length in (4096, 32_768, 200_000))
# b12x's dense MLA beside ours (issue 51): chains of 1-8 causal rows, B 1 and 8, L 4k-200k, H 8 / 16, both pools
B12X_ROWS = tuple((b, length, n, h) for n in (4, 8, 1) for h in (8, 16) for b in (1, 8)
                  for length in (200_000, 32_768, 4096))  # chains of 4 and 8 first: what a run cut short keeps
# issue 52's targets (the sm_120 forms toward the card's floor): the TP8 / TP4 rows at long prefixes over both pools,
# the shapes its targets name first (the headline at B 1 and 8, the 32-row chains at B 1 and 8), so a run cut short
# keeps them
CARD_FLOOR_FIRST = ((1, 200_000, 16, 8), (8, 200_000, 16, 8), (1, 200_000, 4, 8), (8, 200_000, 4, 8),
                    (1, 32_768, 4, 8), (8, 32_768, 4, 8))
CARD_FLOOR_ROWS = CARD_FLOOR_FIRST + tuple(k for k in TP8_TP4_ROWS if k[1] >= 32_768 and k not in CARD_FLOOR_FIRST)
SM120_BF16 = ("cuda_sm120", "cuda_sm120_roles")  # what a 99 KB card runs over a bf16 pool (by rows), both forced


def sm120_fp8_forms(rows: int) -> list[str]:
    """The e4m3 forms a 99 KB card may run over an fp8 pool for ``rows`` (N x H) query rows under automatic fp8
    math, forced: the 64-row form, and the 32-row form where it can be chosen (rows within its row tile)."""
    return ["cuda_sm120_e4m3", *(["cuda_sm120_e4m3_32"] if rows <= E4M3_SM120_32.block_m else [])]


PRESETS = ("quick", "issue", "issue-fp8", "hopper-fp8", "fp8", "chain", "b12x", "card-floor")  # what preset() knows


def preset(name: str) -> list[tuple[Shape, list[str]]]:
    """Named shape grids with the implementations each shape is timed with (chain: CHAIN_SHAPES with SGLang's
    chain verify kernel, FlashMLA and b12x beside ours and extend_attention_fwd; b12x: B12X_ROWS over both pools,
    chains of N causal rows, b12x beside the H200's pick and the sm_120 forms).

    quick: the headline (B=1, L=200k, H=8, N=16), the reference deployment (B=8), batch 48, and memory- and
    compute-bound corners. issue: the full grid H {8,16,64,128} x N {4,16,64} x B {1,8,48} x L {4k,32k,200k}
    (our kernels; SGLang where its time stays under a few seconds per call). card-floor: issue 52's targets, the
    TP8 / TP4 rows at L >= 32k over both pools, the sm_120 forms only."""
    if name == "quick":
        out = [(Shape(1, 200_000, 16, 8), ALL_IMPLS), (Shape(8, 200_000, 16, 8), ALL_IMPLS),
               (Shape(48, 32_768, 16, 8), ALL_IMPLS)]
        ours = list(OURS)
        for b in (1, 8):
            out += [(Shape(b, 200_000, 4, 8), ours), (Shape(b, 200_000, 4, 16), ours)]
        out += [(Shape(1, 200_000, 16, 16), ours), (Shape(1, 200_000, 16, 64), ours),
                (Shape(1, 200_000, 64, 128), ours), (Shape(1, 32_768, 64, 16), ours)]
        return out
    if name == "issue":
        out = []
        for h in (8, 16, 64, 128):
            for n in (4, 16, 64):
                for b in (1, 8, 48):
                    for length in (4096, 32_768, 200_000):
                        s = Shape(b, length, n, h)
                        slow = b * h * math.ceil(n / 32) > 132 and length > 32_768
                        out.append((s, ["cuda", "triton"] + ([] if slow else ["sglang_extend", "sglang_decode"])))
        return out
    if name == "issue-fp8":  # the issue grid's TP8 / TP4 rows over an fp8 pool: what sm_120 runs for it, e4m3 and exact
        return [(Shape(b, length, n, h, kv="fp8"), ["cuda_sm120_e4m3", "cuda_sm120_e4m3_32", "cuda_sm120_fp8"])
                for b, length, n, h in TP8_TP4_ROWS]
    if name == "hopper-fp8":  # issue 36's sm_90a part: the same rows over both pools on the default (v5 over bf16;
        # an fp8 pool runs v4's e4m3 variant, what v5 maps it to)
        return [(Shape(b, length, n, h, kv=kv), ["cuda"]) for b, length, n, h in TP8_TP4_ROWS for kv in ("bf16", "fp8")]
    if name == "fp8":  # issue 17: each shape over a bf16 pool and over an fp8 one, in one run
        out = []
        for b, length, n, h in ((1, 200_000, 4, 8), (8, 200_000, 4, 8), (8, 32_768, 4, 16), (1, 200_000, 16, 8),
                                (8, 200_000, 16, 8), (1, 200_000, 64, 128)):
            for kv in ("bf16", "fp8"):
                out.append((Shape(b, length, n, h, kv=kv), [*FP8_OURS, "sglang_extend"]))
        return out
    if name == "chain":  # issue 37: chains beside SGLang's two verify kernels and FlashMLA
        return [(Shape(b, length, n, h, mask="chain"), ["cuda", "sglang_extend", *PEERS])
                for b, length, n, h in CHAIN_SHAPES]
    if name == "b12x":  # issue 51: b12x beside ours, the H200's pick and what an sm_120 card runs (fp8: e4m3 forms)
        out = []
        for b, length, n, h in B12X_ROWS:
            mask = "chain" if n > 1 else "causal"
            for kv, ours in (("bf16", list(SM120_BF16)), ("fp8", sm120_fp8_forms(n * h))):
                out.append((Shape(b, length, n, h, mask=mask, kv=kv), ["cuda", *ours, "b12x", "b12x_p64"]))
        return out
    if name == "card-floor":  # issue 52: both pools in one run, every sm_120 form a card may run for the shape (the
        # e4m3 forms to be timed on the timing library, KDT_E4M3_TIMING=1, which leaves the bf16 forms as they are)
        out = []
        for b, length, n, h in CARD_FLOOR_ROWS:
            out += [(Shape(b, length, n, h), list(SM120_BF16)),
                    (Shape(b, length, n, h, kv="fp8"), sm120_fp8_forms(n * h))]
        return out
    raise ValueError(f"unknown bench preset {name!r}: expected one of {', '.join(PRESETS)}")


def preset_items(name: str, impls: list[str] | None = None) -> list[tuple[Shape, list[str]]]:
    """Preset ``name``'s (shape, implementations) pairs, filtered to ``impls``; a CUDA kernel configuration the
    preset does not name (cuda_wgmma, for one) is timed wherever the preset times ``cuda``."""
    out = []
    for shape, shape_impls in preset(name):
        chosen = [i for i in shape_impls if impls is None or i in impls]
        chosen += [i for i in impls or [] if i not in shape_impls and i in TIMEABLE and "cuda" in shape_impls]
        out.append((shape, chosen))
    return out
