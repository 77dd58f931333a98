"""Model and GPU presets (``data/presets/*.yaml``, each value with its source)."""

from __future__ import annotations

from dataclasses import dataclass

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
    weights_gib: dict[str, float]
    sources: dict[str, str]


@dataclass(frozen=True)
class GpuPreset:
    name: str
    label: str
    memory_mib: int
    sms: int
    bandwidth_gbps: float
    compute_capability: int  # major * 10 + minor (what the kernel configuration choice reads)
    smem_optin: int  # opt-in shared memory per block, bytes (ditto)
    sources: dict[str, str]
    mma_sync_tflops: float | None = None  # bf16 mma.sync m16n8k16 rate, fp32 accumulate (for predictions)

    @property
    def device(self) -> Device:
        """The facts the launch plan reads (the default build, with sm_90a code)."""
        return Device(self.sms, self.compute_capability, self.smem_optin)


def models() -> dict[str, ModelPreset]:
    raw = yaml.safe_load((DATA / "presets" / "models.yaml").read_text())["models"]
    return {k: ModelPreset(name=k, **v) for k, v in raw.items()}


def gpus() -> dict[str, GpuPreset]:
    raw = yaml.safe_load((DATA / "presets" / "gpus.yaml").read_text())["gpus"]
    return {k: GpuPreset(name=k, **v) for k, v in raw.items()}
