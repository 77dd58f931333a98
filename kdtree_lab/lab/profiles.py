"""Run profiles (``data/profiles/<name>.yaml``): which archs to build and each notebook's parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from ..core.paths import PROFILES


@dataclass(frozen=True)
class Profile:
    """A parsed profile. ``notebooks`` maps a notebook number ("03") to its parameter overrides."""

    name: str
    description: str
    gpu: bool
    common: dict[str, Any] = field(default_factory=dict)
    notebooks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def params_for(self, number: str) -> dict[str, Any]:
        out = dict(self.common)
        out.update(self.notebooks.get(number, {}) or {})
        return out


def available() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


def load(name: str) -> Profile:
    """Load ``data/profiles/<name>.yaml``; raise ValueError naming the known profiles if it is absent."""
    path = PROFILES / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"argument --profile: expected auto or one of {', '.join(available())}, found unknown "
                         f"profile {name!r}")
    raw = yaml.safe_load(path.read_text()) or {}
    notebooks = {str(k).zfill(2): v or {} for k, v in (raw.get("notebooks") or {}).items()}
    return Profile(name=raw.get("name", name), description=raw.get("description", ""),
                   gpu=bool(raw.get("gpu", False)), common=raw.get("common") or {}, notebooks=notebooks)


def auto_name(gpu_name: str | None, compute_capability: str | None) -> str:
    """The profile that fits the GPU present: ``cpu`` without one, ``sm120`` on cc 12.x, ``h200`` on cc 9.x."""
    if not gpu_name or not compute_capability:
        return "cpu"
    major = int(compute_capability.split(".")[0])
    if major == 12:
        return "sm120"
    if major == 9:
        return "h200"
    raise ValueError(f"no profile for GPU {gpu_name!r} (compute capability {compute_capability}); "
                     f"pass --profile with one of {available()}")


def resolve(name: str) -> Profile:
    """``auto`` picks by the GPU present (see :func:`auto_name`); anything else loads that profile."""
    if name == "auto":
        from .doctor import collect

        env = collect()
        name = auto_name(env.gpu_name, env.compute_capability)
    return load(name)
