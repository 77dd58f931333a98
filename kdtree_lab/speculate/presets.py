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
    method: str
    ms: float
    gpu: str
    source: str


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
class Published:
    """Tokens per second someone else measured for one deployment, with and without speculation."""

    name: str
    label: str
    source: str
    gpu: str
    model: str
    quant: str
    tp: int
    batch: int
    kv: str
    draft: str
    nodes: int
    calibrate_at: int  # the no-speculation row (context) the model's fixed part is set from
    no_spec: tuple[tuple[float, ...], ...]  # (context, tok/s[, step ms])
    spec: tuple[tuple[float, ...], ...]
    reported: tuple[tuple[int, float, str], ...]  # (context, tok/s, what): second-hand figures
    parts: dict[str, tuple[int, float, str]]  # name -> (context, ms, what)
    decode_kernel_ms: tuple[tuple[int, int, float], ...]  # (context, batch, ms per call) the report measured
    notes: str


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    return yaml.safe_load(PRESETS.read_text())


def architectures() -> dict[str, Architecture]:
    return {k: Architecture(name=k, **v) for k, v in _raw()["architectures"].items()}


def rates() -> dict[str, Rates]:
    out = {}
    for k, v in _raw()["rates"].items():
        w, t = v["weights_gbps"], v["tensor_tflops"]
        out[k] = Rates(k, None if w == "measured" else float(w), None if t == "measured" else float(t),
                       float(v["allreduce"]["latency_us"]), float(v["allreduce"]["gbps"]), v["sources"])
    return out


def draft_costs() -> dict[str, DraftCost]:
    return {k: DraftCost(method=k, **v) for k, v in _raw()["draft_costs"].items()}


def drafts() -> dict[str, DraftPreset]:
    return {k: DraftPreset(name=k, method=v["method"], depth=int(v["depth"]),
                           chain=(int(v["chain"]["nodes"]), float(v["chain"]["tau"])),
                           trees=tuple((int(n), float(t)) for n, t in v.get("trees", [])),
                           shape_from=v.get("shape_from"), source=v["source"])
            for k, v in _raw()["drafts"].items()}


def published() -> dict[str, Published]:
    out = {}
    for k, v in _raw()["published"].items():
        out[k] = Published(name=k, label=v["label"], source=v["source"], gpu=v["gpu"], model=v["model"],
                           quant=v["quant"], tp=int(v["tp"]), batch=int(v["batch"]), kv=v["kv"], draft=v["draft"],
                           nodes=int(v["nodes"]), calibrate_at=int(v["calibrate_at"]),
                           no_spec=tuple(tuple(r) for r in v["no_spec"]), spec=tuple(tuple(r) for r in v["spec"]),
                           reported=tuple((int(c), float(t), w) for c, t, w in v.get("reported", [])),
                           parts={p: (int(c), float(ms), what) for p, (c, ms, what) in (v.get("parts") or {}).items()},
                           decode_kernel_ms=tuple((int(c), int(b), float(ms)) for c, b, ms in v.get("decode_kernel_ms", [])),
                           notes=v["notes"])
    return out
