"""Where the repository's files live (the package is installed editable from a clone)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
NOTEBOOKS = ROOT / "notebooks"
KERNELS = ROOT / "kernels"
BUILD = ROOT / "build"
RUNS = ROOT / "runs"
PROFILES = DATA / "profiles"
CONTRACTS = DATA / "contracts"
RESULTS = DATA / "results"

def kernel_sources() -> list[Path]:
    """Every CUDA source file the build compiles: the launcher, the C ABI header and the kernel headers, sorted."""
    return sorted([*KERNELS.glob("*.cu"), *KERNELS.glob("*.h"), *KERNELS.rglob("*.cuh")])
