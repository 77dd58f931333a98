"""Where the repository's files live (the package is installed editable from a clone)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
NOTEBOOKS = ROOT / "notebooks"
KERNELS = ROOT / "kernels"
BUILD = ROOT / "build"
RUNS = ROOT / "runs"
PROFILES = DATA / "profiles"
CONTRACTS = DATA / "contracts"
RESULTS = DATA / "results"

# The H200 results of record (data/results/h200/README.md indexes every folder and the command behind it).


def kernel_sources() -> list[Path]:
    """Every CUDA source file the build compiles: the launcher, the C ABI header and the kernel headers, sorted."""
    return sorted([*KERNELS.glob("*.cu"), *KERNELS.glob("*.h"), *KERNELS.rglob("*.cuh")])


H200_V3 = RESULTS / "h200" / "2026-11-29-v3-kernel"  # kernel v3 (mma.sync), eager timing, every earlier version
H200_V4 = RESULTS / "h200" / "2026-11-29-v4-wgmma"  # kernel v4 (wgmma), the sm_90a default
H200_BENCH = H200_V4 / "bench-issue.json"  # the issue grid, CUDA-graph replay timing
H200_SM120 = RESULTS / "h200" / "2026-12-01-sm120"  # the sm_120 kernel forced on the H200 beside v1, v3, v4
H200_GRAPHS = H200_V4 / "notebook-05" / "05_cuda_graphs.json"  # workspace and graph-pool bytes, replay parity
