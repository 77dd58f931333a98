"""The budget against public start-up figures (``data/published/kimi-k2-memory.yaml``): for each, the budget's own
per-GPU weights and KV tokens recomputed at the figure's conditions, by the functions ``calculator.compute`` uses
(``weights.loaded``, ``sglang_memory.kv_pool_tokens``, the GPU preset's G), and how far apart they are.

Where the conditions match (``same_condition``) the miss is the budget's error; where they differ, the entry says
which term does, and for vLLM figures the row gives the non-KV memory vLLM's own accounting implies beside the
budget's weights (vLLM's utilisation is of the whole card and includes its activation peak, non-torch memory and
CUDA graphs; SGLang's fraction is of G and leaves those to the slack)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import yaml

from ..core.paths import DATA
from .inputs import GIB, MIB
from .presets import gpus, models
from .sglang_memory import kv_cell_bytes, kv_pool_tokens, mm_reserve_bytes
from .weights import loaded

SOURCE = DATA / "published" / "kimi-k2-memory.yaml"
TOLERANCE = 0.05  # a same-condition figure the budget must come within (issue 45)


@lru_cache(maxsize=1)
def figures() -> tuple[dict, ...]:
    return tuple(yaml.safe_load(SOURCE.read_text())["figures"])


@dataclass(frozen=True)
class Recomputed:
    """The budget at one figure's conditions. Bytes; tokens; None where the figure gives nothing to compare."""

    weights_bytes: int | None  # the target's weights with what the allocator holds (what "mem usage" logs)
    explained_bytes: int | None  # the same with the term an older SGLang held differently (None: no such term)
    loaded_bytes: int | None  # everything the pool shares G x fraction with (weights, draft, reserve)
    g_bytes: int | None
    kv_tokens: int | None


def g_bytes(conditions: dict) -> int:
    """G at a figure's conditions: the log's when it gives one, else the GPU preset's (memory less its overhead)."""
    if conditions.get("G_gib") is not None:
        return int(conditions["G_gib"] * GIB)
    g = gpus()[conditions["gpu"]]
    return (g.memory_mib - g.context_overhead_mib) * MIB


def recompute(entry: dict, weights_fn=None) -> Recomputed:
    """The budget's figures at ``entry``'s conditions. ``weights_fn(conditions) -> (weights, loaded)`` replaces the
    budget's weights (the old checkpoint / TP rule, for the test that shows it missing)."""
    c = entry["conditions"]
    if not c:
        return Recomputed(None, None, None, None, None)
    lw = loaded(c["model"], c["quant"], c["tp"], c["moe_runner"], c.get("draft", False), c.get("vision"))
    weights = lw.target_loaded_bytes
    total = lw.total_bytes + mm_reserve_bytes(lw.vision)
    explained = None
    if c.get("shared_expert_replicas"):  # SGLang 0.4.6 held R TP-sharded copies of the shared expert, 0.5.23 one
        shared = sum(t.bytes for t in lw.target_terms if t.module.startswith("mlp.shared_experts"))
        explained = weights + (c["shared_expert_replicas"] - 1) * shared
    if weights_fn is not None:
        weights, total = weights_fn(c)
    if "mem_fraction" not in c:
        return Recomputed(weights, explained, total, None, None)
    g = g_bytes(c)
    cell = kv_cell_bytes(models()[c["model"]], c["kv_dtype"], draft=c.get("draft", False))
    return Recomputed(weights, explained, total, g, kv_pool_tokens(g, c["mem_fraction"], total, cell))


def _miss(budget: float | None, public: float | None) -> float | None:
    return None if budget is None or not public else budget / public - 1


def comparison_rows() -> list[dict]:
    """One row per public figure: the figure, the budget's at the same conditions, the miss, and for figures whose
    conditions differ the term that explains it."""
    rows = []
    for e in figures():
        r, fig, c = recompute(e), e["figure"], e["conditions"]
        row = {"id": e["id"], "engine": e["engine"], "same conditions": e["same_condition"]}
        if "weights_gib" in fig:
            row |= {"public weights GiB": fig["weights_gib"],
                    "budget weights GiB": round(r.weights_bytes / GIB, 2),
                    "weights miss": round(_miss(r.weights_bytes / GIB, fig["weights_gib"]), 4)}
            if r.explained_bytes is not None:
                row |= {"budget weights GiB with that term": round(r.explained_bytes / GIB, 2),
                        "miss with that term": round(_miss(r.explained_bytes / GIB, fig["weights_gib"]), 4)}
        if "kv_tokens" in fig:
            row["public KV tokens"] = fig["kv_tokens"]
            if r.kv_tokens is not None:
                row |= {"budget KV tokens": r.kv_tokens, "KV miss": round(_miss(r.kv_tokens, fig["kv_tokens"]), 4)}
        if e["engine"].startswith("vLLM") and r.kv_tokens is not None:
            cell = kv_cell_bytes(models()[c["model"]], c["kv_dtype"], draft=c.get("draft", False))
            card = gpus()[c["gpu"]].memory_mib * MIB
            implied = card * c["mem_fraction"] - fig["kv_tokens"] * cell
            row["vLLM's non-KV GiB beside the budget's weights"] = (
                f"{implied / GIB:.2f} vs {r.loaded_bytes / GIB:.2f}: {(implied - r.loaded_bytes) / GIB:.2f} GiB of "
                "activations, non-torch memory and graphs inside vLLM's utilisation")
        row["differences"] = e["differences"]
        rows.append(row)
    return rows


def checks() -> list[dict]:
    """Each same-condition figure against the budget: within :data:`TOLERANCE` or not (notebook 04's checks)."""
    out = []
    for row in comparison_rows():
        if not row["same conditions"]:
            continue
        for what in ("weights miss", "KV miss"):
            if what in row:
                out.append({"name": f"{row['id']}: budget {what.split()[0]} within {TOLERANCE:.0%} of the public "
                                    "figure", "ok": abs(row[what]) <= TOLERANCE})
    return out
