"""SGLang 0.5.23's memory formulas: the KV cell, its default chunked-prefill size, graph sizes and memory
fraction, and the Triton backend's graph-time buffers, each a line item (:class:`Consumer`) of the budget.

SGLang's model: ``G`` = free memory before weights load; ``mem_fraction_static`` (mfs) = (weights + KV pool) / G;
the KV pool gets ``G*mfs - weights`` bytes (weights: the target's and the draft's, as loaded, and a multimodal
model's reserve), i.e. ``floor((G*mfs - weights) / cell)`` tokens with
``cell = 576 * (layers + draft_layers) * kv_dtype_bytes``. Everything else must fit in the slack ``G*(1 - mfs)``.
Bytes unless a name says MiB / GiB."""

from __future__ import annotations

from dataclasses import dataclass

from .inputs import BudgetInputError
from .presets import ModelPreset, models

MLA_MAX_KV_SPLITS = 256  # Triton backend's max_kv_splits for MLA on >= 132-SM parts at long context
LEAN_BLOCK_M = 16  # rows per program of the Triton backend's lean decode partials (decode_attention._LEAN_BLOCK_M)


@dataclass(frozen=True)
class Consumer:
    name: str
    bytes: int
    where: str  # "pool" (inside mfs) or "slack" (must fit in G*(1-mfs))
    source: str  # sglang-formula | kdtree | estimate | measured | preset
    # the SGLang tensors this item stands for: (phase, attribute name) as scripts/sglang_graph_state.py records them
    sglang: tuple[tuple[str, str], ...] = ()


def kv_cell_bytes(m: ModelPreset, kv_dtype: str, draft: bool = True) -> int:
    """KV bytes per token over all layers: 576 x (layers + draft layers) x dtype bytes (SGLang's cell size; without
    speculative decoding, ``draft`` False, the target's layers alone)."""
    elem = {"bf16": 2, "fp8": 1}.get(kv_dtype)
    if elem is None:
        raise BudgetInputError(f"kv_dtype: expected bf16 or fp8, found {kv_dtype!r}")
    return (m.kv_lora_rank + m.qk_rope_head_dim) * (m.layers + (m.draft_layers if draft else 0)) * elem


VLM_CACHE_SIZE_MIB = 100  # SGLANG_VLM_CACHE_SIZE_MB's default (environ.py; rules mm_reserve, vlm_cache_default)


def kv_pool_tokens(g_bytes: float, fraction: float, loaded_bytes: float, cell_bytes: int) -> int:
    """SGLang 0.5.23's KV token count (kv_cache_configurator.py _profile_available_bytes, page size 1): what is free
    after the weights, less the slack G x (1 - fraction), in cells; 0 where SGLang refuses to start.
    ``loaded_bytes``: everything allocated between G's reading and the pool's (target and draft weights with what
    the allocator holds, the multimodal reserve)."""
    rest = g_bytes * fraction - loaded_bytes
    return max(0, int(rest // cell_bytes))


def mm_reserve_bytes(multimodal: bool) -> int:
    """The KV budget a multimodal model (a vision tower) reserves in SGLang 0.5.23 (mm_runtime_reservation_gb with
    the CPU feature transport: SGLANG_VLM_CACHE_SIZE_MB)."""
    return VLM_CACHE_SIZE_MIB * 2**20 if multimodal else 0


def sglang_defaults(memory_mib: int, tp: int) -> tuple[int, int]:
    """SGLang 0.5.23's (chunked_prefill_size, decode cuda-graph max_bs) defaults by GPU memory in MiB
    (arg_groups/memory_hook.py, before speculative settings); pinned by data/contracts/sglang-0.5.23-memory-defaults.json."""
    gib = memory_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 4096, 48 if tp < 4 else 160
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 90:
        return 8192, 256 if tp < 4 else 512
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def sglang_default_fraction(memory_mib: int, tp: int, chunked_prefill: int | None = None, pp: int = 1,
                            mla: bool = True, deep_ep: bool = False, prefill_graphs: bool = False) -> float:
    """SGLang 0.5.23's default ``mem_fraction_static`` (arg_groups/memory_hook.py handle_gpu_memory_settings): the
    GPU's MiB less 512 + 1.5 x activation tokens + TP x PP / 8 GiB + the graph reserve (2 MiB per decode graph
    size, and 1.5 GiB for MLA only when prefill CUDA graphs are on, which they are not by default), at least
    10 GiB above 60 GiB; pinned by data/contracts/sglang-0.5.23-memory-defaults.json."""
    default_chunk, decode_max_bs = sglang_defaults(memory_mib, tp)
    activation_tokens = max(chunked_prefill or default_chunk, 2048)
    reserve_for_graph_mb = decode_max_bs * 2 + (1.5 * 1024 if mla and prefill_graphs else 0)
    reserved = 512 + 1.5 * activation_tokens + tp * pp / 8 * 1024 + reserve_for_graph_mb + (2048 if deep_ep else 0)
    if memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((memory_mib - reserved) / memory_mib, 3)


def triton_graph_buffers(heads: int, max_bs: int, draft_tokens: int, topk: int, steps: int, context: int,
                         sms: int, max_kv_splits: int = MLA_MAX_KV_SPLITS) -> list[Consumer]:
    """The Triton backend's graph-time buffers (target verify, draft decode, draft extend), per section 6.3 and
    as SGLang 0.5.23's own classes allocate them (data/results/h200/*-sglang-graph-state/)."""
    n, s = draft_tokens, max_kv_splits
    backends = 1 + (steps - 1) + 1  # target, one per draft decode step but the last, draft extend
    lean = sms * LEAN_BLOCK_M * (512 + 2) * 4 + sms * 4  # Mp, Lp, Op (fp32) and the locks (int32), per backend
    out = [
        Consumer("target attn_logits (split-K decode partials, unused by verify)", max_bs * n * heads * s * 512 * 4,
                 "slack", "sglang-formula", (("target_verify", "cuda_graph_attn_logits"),)),
        Consumer("target attn_lse", max_bs * n * heads * s * 4, "slack", "sglang-formula",
                 (("target_verify", "cuda_graph_attn_lse"),)),
        Consumer("target cuda_graph_kv_indices", max_bs * n * context * 8, "slack", "sglang-formula",
                 (("target_verify", "cuda_graph_kv_indices"),)),
        Consumer("target verify mask (uint8)", max_bs * n * (context + n), "slack", "sglang-formula",
                 (("target_verify", "_verify_mask.buffer"),)),
    ]
    if steps > 1:
        out.append(Consumer("draft decode attn_logits + lse", (steps - 1) * max_bs * topk * heads * s * (512 + 1) * 4,
                            "slack", "sglang-formula", (("draft_decode", "cuda_graph_attn_logits"),
                                                        ("draft_decode", "cuda_graph_attn_lse"))))
    out.append(Consumer("draft decode kv_indices", steps * max_bs * topk * context * 8, "slack", "sglang-formula",
                        (("draft_decode", "cuda_graph_kv_indices"),)))
    out.append(Consumer("draft extend attn_logits + lse + kv_indices",
                        max_bs * n * heads * s * (512 + 1) * 4 + max_bs * n * context * 8, "slack", "sglang-formula",
                        (("draft_extend", "cuda_graph_attn_logits"), ("draft_extend", "cuda_graph_attn_lse"),
                         ("draft_extend", "cuda_graph_kv_indices"))))
    out.append(Consumer(f"lean decode partials ({backends} backends x {sms} programs)", backends * lean, "slack",
                        "sglang-formula", tuple((ph, f"cuda_graph_lean_{k}") for ph in
                                                ("target_verify", "draft_decode", "draft_extend")
                                                for k in ("Mp", "Lp", "Op", "locks"))))
    return out


def eager_decode_partials(heads: int, max_bs: int, topk: int, steps: int, sms: int,
                          max_kv_splits: int = MLA_MAX_KV_SPLITS) -> Consumer:
    """Without CUDA graphs the Triton backend allocates its decode split-K partials in every decode forward
    (``init_forward_metadata``): the EAGLE draft's decode steps over ``max_bs x topk`` rows, one step's set at a
    time, freed after (target verify and draft extend take the extend path, without them). fp32 attn_logits
    [rows, H, S, 512], attn_lse [rows, H, S] and the lean-decode partials."""
    rows = max_bs * topk
    lean = sms * LEAN_BLOCK_M * (512 + 2) * 4 + sms * 4
    size = rows * heads * max_kv_splits * (512 + 1) * 4 + lean if steps > 1 else 0
    return Consumer("eager draft-decode split-K partials (allocated per forward; graphs off)", size, "slack",
                    "sglang-formula")


def sglang_state_rows(state: dict) -> list[dict]:
    """The budget's graph-time line items beside what SGLang's own classes allocated for the same deployment
    (``state``: the JSON of scripts/sglang_graph_state.py). One row per line item (ratio = SGLang / budget), one for
    SGLang's tensors no item stands for, and the totals. Bytes."""
    inp, widths = state["inputs"], state["widths"]
    if widths["target_verify"] != inp["draft_tokens"] or widths["draft_extend"] != inp["draft_tokens"]:
        raise ValueError(f"widths: the budget sizes verify and draft extend by draft_tokens={inp['draft_tokens']}, "
                         f"SGLang captured {widths}")
    heads = models()[inp["model"]].heads // inp["tp"]
    items = triton_graph_buffers(heads, inp["max_bs"], inp["draft_tokens"], inp["topk"], inp["spec_steps"],
                                 inp["context"], state["sms"], state["phases"][0]["max_kv_splits"])
    held = [(ph["phase"], t) for ph in state["phases"] for t in ph["tensors"]]
    used: set[int] = set()
    rows = []
    for item in items:
        got = [i for i, (ph, t) in enumerate(held)
               if any(ph == want_ph and want in (t["name"], t["name"].split(".", 1)[-1])
                      for want_ph, want in item.sglang)]
        used.update(got)
        sglang_bytes = sum(held[i][1]["bytes"] for i in got)
        rows.append({"item": item.name, "budget": item.bytes, "sglang": sglang_bytes,
                     "ratio": round(sglang_bytes / item.bytes, 4) if item.bytes else None})
    rest = sum(t["bytes"] for i, (_, t) in enumerate(held) if i not in used)
    rows.append({"item": "SGLang tensors no line item stands for", "budget": 0, "sglang": rest, "ratio": None})
    total_budget, total_sglang = sum(r["budget"] for r in rows), sum(r["sglang"] for r in rows)
    rows.append({"item": "total", "budget": total_budget, "sglang": total_sglang,
                 "ratio": round(total_sglang / total_budget, 4)})
    allocated = [ph["allocated_bytes"] for ph in state["phases"]]
    if all(a is not None for a in allocated):
        rows.append({"item": "total as torch's allocator counted it", "budget": total_budget,
                     "sglang": sum(allocated), "ratio": round(sum(allocated) / total_budget, 4)})
    return rows
