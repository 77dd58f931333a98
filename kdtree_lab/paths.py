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
