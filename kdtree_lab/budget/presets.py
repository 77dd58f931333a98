"""Model and GPU presets (``data/presets/*.yaml``, each value with its source)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import yaml

from ..core.paths import DATA
from ..kernels.launch_plan import Device


@dataclass(frozen=True)
class ModelPreset:
    name: str
    label: str
    layers: int
    heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    draft_layers: int
    architecture: dict[str, int]  # config.json numbers a prefill chunk's activations are sized by
    rope: dict[str, int]  # YaRN: original_max_position_embeddings, factor (the rotary cache's length)
    checkpoints: dict[str, dict]  # quantisation -> checkpoint, scheme, what it quantises (weights.py reads these)
    draft: dict  # the draft model SGLang loads for EAGLE / EAGLE3: kind (none | nextn | eagle3-mla) and its numbers
    sources: dict[str, str]
    vision: dict | None = None  # the MoonViT tower of the checkpoints with vision: true


@dataclass(frozen=True)
class GpuPreset:
    name: str
    label: str
    memory_mib: int
    sms: int
    bandwidth_gbps: float
    compute_capability: int  # major * 10 + minor (what the kernel configuration choice reads)
    smem_optin: int  # opt-in shared memory per block, bytes (ditto)
    context_overhead_mib: float  # memory_mib less SGLang's G at TP8: CUDA context, NCCL, custom all-reduce (MiB)
    sources: dict[str, str]

    @property
    def device(self) -> Device:
        """The facts the launch plan reads (the default build, with sm_90a code)."""
        return Device(self.sms, self.compute_capability, self.smem_optin)


@lru_cache(maxsize=None)
def _presets(name: str) -> dict:
    return yaml.safe_load((DATA / "presets" / f"{name}.yaml").read_text())[name]


def models() -> dict[str, ModelPreset]:
    return {k: ModelPreset(name=k, **v) for k, v in _presets("models").items()}


def gpus() -> dict[str, GpuPreset]:
    return {k: GpuPreset(name=k, **v) for k, v in _presets("gpus").items()}
