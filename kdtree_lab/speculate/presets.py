"""The step model's inputs from ``data/presets/speculation.yaml``, typed, each with its source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml

from ..core.paths import DATA

PRESETS = DATA / "presets" / "speculation.yaml"


@dataclass(frozen=True)
class Architecture:
    """What a DeepseekV3-style MLA MoE target reads per token besides attention (shapes in elements)."""

    name: str
    hidden: int
    dense_layers: int  # leading layers with a dense MLP instead of experts
    q_lora_rank: int  # 0: Q projected straight from the hidden state (DeepSeek-V2-Lite)
    qk_nope_head_dim: int
    v_head_dim: int
    dense_intermediate: int
    moe_intermediate: int
    experts: int
    experts_per_token: int
    shared_experts: int
    vocab: int
    weight_bytes: dict[str, dict[str, float]]  # quant -> weight group -> bytes per parameter
    sources: dict[str, str]


@dataclass(frozen=True)
class Rates:
    """How fast a GPU runs the non-attention part of a step. ``None`` rates are the kernel-time file's measured
    ceilings (H200)."""

    gpu: str
    weights_gbps: float | None
    tensor_tflops: float | None
    allreduce_latency_us: float
    allreduce_gbps: float
    sources: dict[str, str]


@dataclass(frozen=True)
class DraftCost:
    """What one step of a drafting method costs (ms) on ``gpu``, over ``forwards`` draft forwards."""

    method: str
    ms: float
    forwards: int
    gpu: str
    source: str

    @property
    def per_forward_ms(self) -> float:
        return self.ms / self.forwards


@dataclass(frozen=True)
class DraftPreset:
    """A published acceptance figure: ``chain`` (nodes, tau); ``trees`` ((nodes, tau), ...) where published;
    ``shape_from`` the preset whose fitted shape a chain-only figure borrows."""

    name: str
    method: str
    depth: int
    chain: tuple[int, float]
    trees: tuple[tuple[int, float], ...]
    shape_from: str | None
    source: str


@dataclass(frozen=True)
class Explained:
    """A published cell the model may miss by more than its table's tolerance, with why: ``series`` "spec" or
    "no_spec", at ``context``, allowed ``tolerance``."""

    series: str
    context: int
    tolerance: float
    why: str


@dataclass(frozen=True)
class Published:
    """Tokens per second someone else measured for one deployment, with and without speculation (one request),
    and without speculation at several concurrencies (aggregate)."""

    name: str
    label: str
    source: str
    date: str  # when it was measured (ISO)
    role: str  # "today" (fitted, reproduced within tolerance), "historical" (shown) or "superseded" (kept, unused)
    headline: bool  # its one-request speculative cells compete for today's best at their context
    gpu: str
    model: str
    quant: str
    tp: int
    batch: int
    kv: str
    draft: str
    nodes: int
    dcp: int  # vLLM's decode context parallel size: the KV split over this many of the TP GPUs
    draft_fit: str  # the fitted value of today's preset that prices this table's draft: "draft_ms" (the K2.6 drafts,
    # standard + greedy) or "draft_ms_k25" (the K2.5 draft, probabilistic rejection, on the older image)
    no_spec: tuple[tuple[float, ...], ...]  # (context, tok/s[, step ms])
    spec: tuple[tuple[float, ...], ...]
    concurrency: tuple[int, ...]
    concurrency_no_spec: tuple[tuple[float, ...], ...]  # (context, tok/s at each concurrency)
    beyond_fit: tuple[int, ...]  # concurrencies shown against the model but not fitted
    beyond_fit_no_spec: tuple[tuple[float, ...], ...]  # (context, tok/s at each of them)
    spec_concurrency: tuple[int, ...]  # concurrencies of the speculative cells shown against the model, not fitted
    spec_concurrency_rows: tuple[tuple[float, ...], ...]  # (context, aggregate tok/s at each of them)
    interarrival_ms: tuple[float, float] | None  # (low, high) p50 across the spec contexts
    tolerance: float
    explained: tuple[Explained, ...]
    reported: tuple[tuple[int, float, str], ...]  # (context, tok/s, what): second-hand figures
    notes: str


@dataclass(frozen=True)
class DecodeKernelPreset:
    """vLLM's TRITON_MLA decode as a deployment launches it (see ``today.DecodeKernel``)."""

    max_splits: int
    cta_target: int
    block_h: int
    block_n: int
    ctas_per_sm: int
    kv_bytes_per_token: int
    partial_bytes: int  # fp32 partial output + LSE per head and split
    tuned_heads: tuple[int, ...] = ()  # head counts per GPU the shipped tuning table has an entry for


@dataclass(frozen=True)
class TodayPreset:
    """Today's best on one deployment: the decode kernel as launched, the fitted values, each with its
    source."""

    name: str
    label: str
    gpu: str
    model: str
    tp: int
    quant: str
    kv: str
    draft: str
    nodes: int
    kv_capacity_tokens: int
    kernel: DecodeKernelPreset
    fixed_ms: float
    moe_efficiency: float
    cta_gbps: float
    draft_ms: float
    dcp_ms: float
    tuned_gbps: float
    draft_ms_k25: float  # draft_ms of the older draft generation (the K2.5 draft, probabilistic rejection)
    sources: dict[str, str]


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    return yaml.safe_load(PRESETS.read_text())


def architectures() -> dict[str, Architecture]:
    return {k: Architecture(name=k, **v) for k, v in _raw()["architectures"].items()}


def rates() -> dict[str, Rates]:
    from . import card_model

    out = {}
    for k, v in _raw()["rates"].items():
        w, t = v["weights_gbps"], v["tensor_tflops"]
        if "card_model" in (w, t):  # the card model's rates (gpus.yaml card_model), the one home of a card's figures
            card = card_model.card(k)
            w = card.stream_gbps if w == "card_model" else w
            t = card.tensor_tflops("bf16") if t == "card_model" else t
        out[k] = Rates(k, None if w == "measured" else float(w), None if t == "measured" else float(t),
                       float(v["allreduce"]["latency_us"]), float(v["allreduce"]["gbps"]), v["sources"])
    return out


def draft_costs() -> dict[str, DraftCost]:
    return {k: DraftCost(method=k, ms=float(v["ms"]), forwards=int(v["forwards"]), gpu=v["gpu"], source=v["source"])
            for k, v in _raw()["draft_costs"].items()}


def drafts() -> dict[str, DraftPreset]:
    return {k: DraftPreset(name=k, method=v["method"], depth=int(v["depth"]),
                           chain=(int(v["chain"]["nodes"]), float(v["chain"]["tau"])),
                           trees=tuple((int(n), float(t)) for n, t in v.get("trees", [])),
                           shape_from=v.get("shape_from"), source=v["source"])
            for k, v in _raw()["drafts"].items()}


def published() -> dict[str, Published]:
    out = {}
    for k, v in _raw()["published"].items():
        out[k] = Published(
            name=k, label=v["label"], source=v["source"], date=str(v["date"]), role=v["role"], headline=bool(v.get("headline", False)),
            gpu=v["gpu"], model=v["model"], quant=v["quant"], tp=int(v["tp"]), batch=int(v["batch"]), kv=v["kv"],
            draft=v["draft"], nodes=int(v["nodes"]), dcp=int(v.get("dcp", 1)),
            draft_fit=v.get("draft_fit", "draft_ms"), no_spec=tuple(tuple(r) for r in v["no_spec"]),
            spec=tuple(tuple(r) for r in v["spec"]), concurrency=tuple(int(c) for c in v.get("concurrency", [])),
            concurrency_no_spec=tuple(tuple(r) for r in v.get("concurrency_no_spec", [])),
            beyond_fit=tuple(int(c) for c in v.get("beyond_fit", [])),
            beyond_fit_no_spec=tuple(tuple(r) for r in v.get("beyond_fit_no_spec", [])),
            spec_concurrency=tuple(int(c) for c in v.get("spec_concurrency", [])),
            spec_concurrency_rows=tuple(tuple(r) for r in v.get("spec_concurrency_rows", [])),
            interarrival_ms=tuple(v["interarrival_ms"]) if v.get("interarrival_ms") else None,
            tolerance=float(v["tolerance"]),
            explained=tuple(Explained(s, int(c), float(tol), why) for s, c, tol, why in v.get("explained", [])),
            reported=tuple((int(c), float(t), w) for c, t, w in v.get("reported", [])), notes=v["notes"])
    return out


def today() -> dict[str, TodayPreset]:
    out = {}
    for k, v in _raw()["today"].items():
        f = v["fitted"]
        out[k] = TodayPreset(name=k, label=v["label"], gpu=v["gpu"], model=v["model"], tp=int(v["tp"]),
                             quant=v["quant"], kv=v["kv"], draft=v["draft"], nodes=int(v["nodes"]),
                             kv_capacity_tokens=int(v["kv_capacity_tokens"]),
                             kernel=DecodeKernelPreset(**{n: tuple(x) if isinstance(x, list) else int(x)
                                                          for n, x in v["kernel"].items()}),
                             fixed_ms=float(f["fixed_ms"]), moe_efficiency=float(f["moe_efficiency"]),
                             cta_gbps=float(f["cta_gbps"]), draft_ms=float(f["draft_ms"]),
                             dcp_ms=float(f["dcp_ms"]), tuned_gbps=float(f["tuned_gbps"]),
                             draft_ms_k25=float(f["draft_ms_k25"]), sources=v["sources"])
    return out
