"""The SGLang buffer contract, loaded from ``data/contracts/*.yaml``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.paths import CONTRACTS

DEFAULT_CONTRACT = "sglang-0.5.23-target-verify"
VARIANTS = ("eager", "capture")


@dataclass(frozen=True)
class BufferSpec:
    """One buffer: allowed dtypes per variant, shape expressions, layout rule, optional (may be None)."""

    name: str
    dtypes: dict[str, list[str]]
    shape: list[Any]
    layout: str
    optional: bool = False
    strides: list[int] | None = None
    meaning: str = ""


@dataclass(frozen=True)
class Contract:
    name: str
    sglang_version: str
    buffers: dict[str, BufferSpec]
    scalars: dict[str, dict[str, str]]
    invariants: dict[str, str]
    graph_notes: dict[str, Any] = field(default_factory=dict)

    @property
    def capture_sizes(self) -> list[int]:
        """The batch sizes SGLang captures for speculative verify with max_running_requests=48."""
        return list(self.graph_notes.get("capture_sizes", []))


def load_contract(name: str = DEFAULT_CONTRACT, path: str | Path | None = None) -> Contract:
    """Load a contract by name (a file under data/contracts) or explicit path."""
    p = Path(path) if path else CONTRACTS / f"{name}.yaml"
    if not p.exists():
        known = sorted(x.stem for x in CONTRACTS.glob("*.yaml"))
        raise ValueError(f"unknown contract {name!r}: expected one of {known}")
    raw = yaml.safe_load(p.read_text())
    buffers = {
        n: BufferSpec(name=n, dtypes={k: list(v) for k, v in spec["dtype"].items()}, shape=list(spec["shape"]),
                      layout=spec["layout"], optional=bool(spec.get("optional", False)), strides=spec.get("strides"),
                      meaning=spec.get("meaning", ""))
        for n, spec in raw["buffers"].items()
    }
    return Contract(name=p.stem, sglang_version=str(raw["sglang_version"]), buffers=buffers,
                    scalars=raw.get("scalars", {}), invariants=raw.get("invariants", {}),
                    graph_notes=raw.get("graph_notes", {}))


def sglang_capture_sizes(max_bs: int = 48) -> list[int]:
    """SGLang 0.5.23's speculative verify capture list, clamped to ``max_bs`` (23 sizes at 48)."""
    return [s for s in load_contract().capture_sizes if s <= max_bs]
